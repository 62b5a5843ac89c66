#!/usr/bin/env bash
# The main job: installs dependencies, builds ll3, and generates text with MODEL (a GGUF file or
# a Hugging Face directory), or, when none is given, with the default model that ll3 makes on
# first use: `ll3 make-model --preset llama3.2-1b --type f16 --seed 1` into a temporary file, then
# `ll3 quantize ... q4_k_m`, cached as ~/.cache/ll3/models/llama3.2-1b-q4_k_m-seed1.gguf (the F16
# file is deleted).
#   scripts/run.sh [MODEL] [extra ll3 run flags...]
#   LL3_PROMPT="..." LL3_N=128 scripts/run.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# Only the ll3 binary (no test, benchmark or fuzz target, nor their packages), and the CUDA backend only where a GPU driver is present to run it (nvcc
# compiling every kernel for two architectures is most of a full build on a small machine; the
# test command, scripts/build.sh, still compiles it wherever nvcc is found). LL3_CUDA=ON|OFF
# overrides the guess.
cuda="${LL3_CUDA:-}"
if [ -z "$cuda" ]; then
  cuda=OFF
  if [ -e /dev/nvidiactl ] || ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then cuda=AUTO; fi
fi
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLL3_CUDA="$cuda" \
  -DLL3_TESTS=OFF -DLL3_BENCH=OFF -DLL3_FUZZ=OFF >/dev/null
cmake --build build -j"$(nproc 2>/dev/null || echo 2)" --target ll3 >/dev/null
model=()
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
  model=(-m "$1")
  shift
fi
exec build/ll3 run "${model[@]}" -p "${LL3_PROMPT:-The capital of France is}" -n "${LL3_N:-64}" "$@"
