#!/usr/bin/env bash
# Side-by-side speed: ll3 bench and (optionally) llama.cpp's llama-bench on the same files, same
# threads, interleaved rep by rep so both see the same machine load; prints medians and ratios.
#   scripts/bench.sh [-t THREADS] [-p 128] [-n 32] [-r ROUNDS] MODEL.gguf...
#   LLAMA_BENCH=/path/to/llama-bench scripts/bench.sh ...   (a llama.cpp you built yourself)
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 np=128 ng=32 rounds=3
while getopts "t:p:n:r:" o; do
  case "$o" in
    t) threads=$OPTARG ;; p) np=$OPTARG ;; n) ng=$OPTARG ;; r) rounds=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || { echo "usage: scripts/bench.sh [-t N] [-p N] [-n N] [-r N] MODEL.gguf..." >&2; exit 2; }
ll3=build/ll3
[ -x "$ll3" ] || scripts/build.sh >/dev/null

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
field() { python3 -c "import json,sys; d=json.load(sys.stdin); print(' '.join(str(t['avg_ts']) for t in d if t['test']=='$1'))"; }

printf '| model | threads | test | ll3 t/s | llama.cpp t/s | ratio |\n|---|---|---|---|---|---|\n'
for m in "$@"; do
  declare -A ours=() theirs=()
  for ((i = 0; i < rounds; i++)); do
    j=$("$ll3" bench -m "$m" -p "$np" -n "$ng" -t "$threads" -r 1 --json 2>/dev/null)
    ours[pp]+="$(echo "$j" | field "pp$np") "; ours[tg]+="$(echo "$j" | field "tg$ng") "
    if [ -n "${LLAMA_BENCH:-}" ]; then
      j=$("$LLAMA_BENCH" -m "$m" -p "$np" -n "$ng" -t "$threads" -r 1 -o json 2>/dev/null)
      theirs[pp]+="$(echo "$j" | python3 -c "import json,sys; print(' '.join(str(t['avg_ts']) for t in json.load(sys.stdin) if t['n_prompt']>0))") "
      theirs[tg]+="$(echo "$j" | python3 -c "import json,sys; print(' '.join(str(t['avg_ts']) for t in json.load(sys.stdin) if t['n_gen']>0))") "
    fi
  done
  for t in pp tg; do
    o=$(echo "${ours[$t]}" | tr ' ' '\n' | grep . | median)
    if [ -n "${LLAMA_BENCH:-}" ]; then
      l=$(echo "${theirs[$t]}" | tr ' ' '\n' | grep . | median)
      r=$(awk -v a="$o" -v b="$l" 'BEGIN {printf "%.2f", a / b}')
    else
      l=- r=-
    fi
    n=$([ $t = pp ] && echo "$np" || echo "$ng")
    printf '| %s | %s | %s%s | %.2f | %s | %s |\n' "$(basename "$m")" "$threads" "$t" "$n" "$o" "$l" "$r"
  done
  unset ours theirs
done
