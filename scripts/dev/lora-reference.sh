#!/usr/bin/env bash
# llama.cpp's logits with a LoRA adapter, as the reference tests/model/lora_test.cpp checks ll3
# against (tests/fixtures/lora/): runs llama-cpp-ref.sh's build (llama_probe with PROBE_LORA) on
# the token ids and writes, per position, the 16 highest logits and the row's logsumexp as JSON.
# A developer's tool, not part of the build or the tests.
#
#   scripts/dev/lora-reference.sh MODEL.gguf ADAPTER.gguf SCALE TOKENS OUT.json [CPU_VARIANT]
set -euo pipefail
[ $# -ge 5 ] || { sed -n 2,8p "$0"; exit 2; }
MODEL=$1 ADAPTER=$2 SCALE=$3 TOKENS=$4 OUT=$5 VARIANT=${6:-haswell}
HERE=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
PROBE_LORA="$ADAPTER:$SCALE" "$HERE/llama-cpp-ref.sh" "$MODEL" "$TOKENS" "$work" "$VARIANT" >/dev/null
node -e '
  const fs = require("fs");
  const [logits, tokensFile, model, adapter, scale, variant, out] = process.argv.slice(1);
  const tokens = fs.readFileSync(tokensFile, "utf8").split(/[\s,]+/).filter(Boolean).map(Number);
  const buf = fs.readFileSync(logits);
  const f = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  const V = f.length / tokens.length;
  const positions = [];
  for (let p = 0; p < tokens.length; p++) {
    const row = f.subarray(p * V, (p + 1) * V);
    let m = -Infinity;
    for (const x of row) m = Math.max(m, x);
    let s = 0;
    for (const x of row) s += Math.exp(x - m);
    const ids = [...row.keys()].sort((a, b) => row[b] - row[a]).slice(0, 16);
    positions.push({ top_ids: ids, top_logits: ids.map((i) => row[i]), logsumexp: m + Math.log(s) });
  }
  fs.writeFileSync(out, JSON.stringify({ model: require("path").basename(model), adapter: require("path").basename(adapter),
    scale: Number(scale), llama_cpp_cpu: variant, tokens, positions }) + "\n");' \
  "$work/logits.f32" "$TOKENS" "$MODEL" "$ADAPTER" "$SCALE" "$VARIANT" "$OUT"
echo "lora-reference.sh: $OUT"
