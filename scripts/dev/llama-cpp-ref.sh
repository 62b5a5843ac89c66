#!/usr/bin/env bash
# Runs a recent llama.cpp build beside ll3, on the same token ids, to find where the two part.
# A developer's tool, not part of the build or the tests.
#
#   scripts/dev/llama-cpp-ref.sh MODEL.gguf TOKENS OUT_DIR [CPU_VARIANT]
#
# TOKENS is a file of token ids (spaces, commas or newlines). CPU_VARIANT is one of the CPU
# backends of the build (zen4, icelake, skylakex, haswell, ...; default zen4: AVX-512 with
# VNNI and BF16, the build that reproduces ../shared/models/golden bit for bit). Writes
# OUT_DIR/logits.f32 (n_tokens x n_vocab) and OUT_DIR/act/NNN_<node>.f32, every node of the
# graph; compare them with `ll3 logits --dump-activations DIR` by compare_activations.py.
# With PROBE_LORA=ADAPTER.gguf[:SCALE] the adapter is applied (as llama-cli --lora-scaled).
# With PROBE_BENCH=PP,TG in the environment it times that build instead (prompt of PP tokens, TG
# decoded), printing t/s as llama-bench does; OUT_DIR is then unused.
#
# The build is node-llama-cpp's prebuilt linux-x64 binaries (llama.cpp snapshot of Sep 2026,
# every CPU variant as a loadable backend), and its headers come from the llama.cpp sources
# the npm package bundles. Both come from the npm registry once, into ~/.cache/ll3/llama-cpp-ref.
set -euo pipefail
[ $# -ge 3 ] || { sed -n 4,15p "$0"; exit 2; }
MODEL=$1 TOKENS=$2 OUT=$3 VARIANT=${4:-zen4}
VERSION=3.22.1
CACHE=${LL3_LLAMA_CPP_REF:-$HOME/.cache/ll3/llama-cpp-ref}
HERE=$(cd "$(dirname "$0")" && pwd)
BINS=$CACHE/bin/package/bins/linux-x64

if [ ! -x "$CACHE/llama_probe" ] || [ "$HERE/llama_probe.c" -nt "$CACHE/llama_probe" ]; then
  mkdir -p "$CACHE/bin" "$CACHE/src"
  if [ ! -d "$CACHE/llama.cpp" ]; then
    (cd "$CACHE" && npm pack --silent "@node-llama-cpp/linux-x64@$VERSION" "node-llama-cpp@$VERSION" >/dev/null)
    tar xzf "$CACHE/node-llama-cpp-linux-x64-$VERSION.tgz" -C "$CACHE/bin"
    tar xzf "$CACHE/node-llama-cpp-$VERSION.tgz" -C "$CACHE/src" package/llama/gitRelease.bundle
    git clone -q "$CACHE/src/package/llama/gitRelease.bundle" "$CACHE/llama.cpp"
  fi
  cc -O1 "$HERE/llama_probe.c" -I"$CACHE/llama.cpp/include" -I"$CACHE/llama.cpp/ggml/include" \
     -L"$BINS" -l:libllama.v0.5.0.so -l:libggml.v0.5.0.so -l:libggml-base.so -Wl,-rpath,"$BINS" \
     -o "$CACHE/llama_probe"
fi
if [ -n "${PROBE_BENCH:-}" ]; then
  exec "$CACHE/llama_probe" "$MODEL" "$TOKENS" /dev/null "$BINS/libggml-cpu-$VARIANT.so" "${THREADS:-2}" 2>/dev/null
fi
mkdir -p "$OUT/act"
rm -f "$OUT"/act/*.f32
PROBE_DUMP=$OUT/act "$CACHE/llama_probe" "$MODEL" "$TOKENS" "$OUT/logits.f32" \
  "$BINS/libggml-cpu-$VARIANT.so" "${THREADS:-2}" 2>"$OUT/llama.log" || { tail -5 "$OUT/llama.log"; exit 1; }
echo "llama.cpp ($VARIANT): $(ls "$OUT/act" | wc -l) activations and the logits in $OUT"
