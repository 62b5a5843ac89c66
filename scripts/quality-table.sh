#!/bin/bash
# Quantization quality table: KL divergence of quantized GGUF files against a base model on one
# text, with ll3's perplexity (so only the quantizer differs between files), plus size, bits per
# weight and ll3 bench speeds. Builds nothing and runs only ll3; the quantized files are made
# beforehand (by `ll3 quantize` or any other quantizer), see docs/QUALITY.md.
#
# usage: scripts/quality-table.sh LL3 BASE.gguf TEXT CHUNKS WORKDIR FILE.gguf...
#   env THREADS (default 2), CTX (default 512), BENCH=0 to skip the speed runs.
# Writes WORKDIR/base.kl (the base log-probabilities), WORKDIR/out-<name>.txt per file, and prints
# one markdown row per file: | file | MiB | bpw | PPL | KLD mean | KLD median | KLD 99% | KLD max |
# same top | pp t/s | tg t/s |
set -euo pipefail
if [ $# -lt 6 ]; then
  sed -n '2,11p' "$0" >&2
  exit 2
fi
LL3=$1 BASE=$2 TEXT=$3 CHUNKS=$4 WORK=$5
shift 5
THREADS=${THREADS:-2} CTX=${CTX:-512} BENCH=${BENCH:-1}
mkdir -p "$WORK"

if [ ! -s "$WORK/base.kl" ]; then
  nice -n 5 "$LL3" perplexity -m "$BASE" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
    --save-logits "$WORK/base.kl" >"$WORK/out-base.txt" 2>"$WORK/err-base.txt"
fi
grep "Final estimate" "$WORK/out-base.txt" | sed 's/^/base: /' >&2

# Bits per weight over the weight tensors, from `ll3 inspect` (bytes / elements).
bpw() {
  "$LL3" inspect "$1" 2>/dev/null | awk '/^[a-z_0-9.]+weight / {
      shape=$3; for (i=4;i<NF;i++) shape=shape $i; gsub(/[\[\]]/,"",shape); n=split(shape,d,",");
      e=1; for (i=1;i<=n;i++) e*=d[i]; el+=e; by+=$NF }
    END { if (el>0) printf "%.2f", 8*by/el }'
}
val() { grep -m1 "$1" "$2" | sed 's/.*: *//' | awk '{print $1}'; }

echo "| file | MiB | bpw | PPL | KLD mean | KLD median | KLD 99% | KLD max | same top % | pp t/s | tg t/s |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
for f in "$@"; do
  name=$(basename "$f" .gguf)
  out="$WORK/out-$name.txt"
  if [ ! -s "$out" ]; then
    nice -n 5 "$LL3" perplexity -m "$f" -f "$TEXT" --ctx "$CTX" --chunks "$CHUNKS" -t "$THREADS" \
      --kl-base "$WORK/base.kl" >"$out" 2>"$WORK/err-$name.txt"
  fi
  pp="" tg=""
  if [ "$BENCH" = 1 ]; then
    b="$WORK/bench-$name.json"
    [ -s "$b" ] || nice -n 5 "$LL3" bench -m "$f" -p 128 -n 32 -r 3 -t "$THREADS" --json >"$b" 2>/dev/null
    pp=$(python3 -c "import json,sys; print('%.1f' % [r['avg_ts'] for r in json.load(open(sys.argv[1])) if r['test'].startswith('pp')][0])" "$b")
    tg=$(python3 -c "import json,sys; print('%.2f' % [r['avg_ts'] for r in json.load(open(sys.argv[1])) if r['test'].startswith('tg')][0])" "$b")
  fi
  mib=$(awk -v s="$(stat -c %s "$f")" 'BEGIN { printf "%.1f", s/1048576 }')
  echo "| $name | $mib | $(bpw "$f") | $(grep -m1 'Final estimate' "$out" | sed 's/.*PPL = //' | awk '{print $1}') | $(val 'Mean    KLD' "$out") |" \
    "$(val 'Median  KLD' "$out") | $(val '99.0%   KLD' "$out") | $(val 'Maximum KLD' "$out") |" \
    "$(val 'Same top p' "$out") | $pp | $tg |"
done
