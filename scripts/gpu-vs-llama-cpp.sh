#!/usr/bin/env bash
# ll3 and llama.cpp's CUDA build side by side on one GPU, in one run, on the same files: the
# llama3.1-8b preset with random weights (`ll3 make-model`, the Llama-3 tokenizer) at F16 and
# quantized to Q4_K_M by `ll3 quantize`; llama-bench (-ngl 99, pp512 and tg128) against
# ll3-cuda-runner-bench on each file. One call of its own on the GPU machine (about 5 minutes:
# the F16 file is 16 GB), separate from scripts/gpu-check.sh so that both fit the carry limit.
#
#   scripts/gpu-vs-llama-cpp.sh --prepare   here, after scripts/build.sh and a CUDA build of
#                                           llama.cpp (LLAMA_CPP_CUDA: its bin/ folder, default
#                                           /tmp/llama.cpp/build-cuda/bin; scripts/dev/llama-cpp-cuda.sh
#                                           builds it): stripped binaries and the tokenizer to
#                                           .gpu-llama/ (git-ignored)
#   scripts/gpu-vs-llama-cpp.sh             on the GPU machine (carry .gpu-llama)
#
# llama.cpp's libraries need cuBLAS and the CUDA runtime of the toolkit they were built with;
# the GPU image has them as Python packages (nvidia-cublas, nvidia-cuda-runtime), which the
# script puts on LD_LIBRARY_PATH.
set -uo pipefail
cd "$(dirname "$0")/.."
deps=.gpu-llama
if [ "${1:-}" = "--prepare" ]; then
  set -e
  llama=${LLAMA_CPP_CUDA:-/tmp/llama.cpp/build-cuda/bin}
  [ -x "$llama/llama-bench" ] || { echo "gpu-vs-llama-cpp: no $llama/llama-bench (build it: scripts/dev/llama-cpp-cuda.sh)"; exit 1; }
  rm -rf $deps && mkdir -p $deps/bin $deps/llama-cpp
  for f in build/ll3 build/ll3-cuda-runner-bench; do strip -o "$deps/bin/$(basename "$f")" "$f"; done
  cp "$llama"/llama-bench "$llama"/lib*.so* $deps/llama-cpp/
  strip $deps/llama-cpp/*
  cp -r "${LL3_SHARED:-../shared}/tokenizers/llama3" $deps/tokenizer
  # One archive: with the repository it must stay under the 64 MiB a call carries (about 57 MB).
  tar czf $deps/bin.tgz -C $deps bin llama-cpp tokenizer && rm -r $deps/bin $deps/llama-cpp $deps/tokenizer
  grep -qx "/$deps/" .git/info/exclude 2>/dev/null || echo "/$deps/" >> .git/info/exclude
  echo "gpu-vs-llama-cpp: $deps ready ($(du -sh $deps | cut -f1)); carry $deps"
  exit 0
fi
logs=${OUT:-build-gpu}
work=${WORK:-/tmp/ll3-vs-llama}
mkdir -p "$logs" "$work" build-gpu/llama
tar xzf $deps/bin.tgz -C build-gpu/llama || exit 1
bin=build-gpu/llama/bin
tokenizer=build-gpu/llama/tokenizer
cuda_libs=$(python3 -c 'import os, nvidia.cublas, nvidia.cuda_runtime as r
print(":".join(os.path.join(m.__path__[0], "lib") for m in (nvidia.cublas, r)))' 2> /dev/null)
export LD_LIBRARY_PATH=$PWD/build-gpu/llama/llama-cpp${cuda_libs:+:$cuda_libs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
"$bin/ll3" --version | tail -1

t0=$SECONDS
"$bin/ll3" make-model --preset llama3.1-8b --type f16 --tokenizer "$tokenizer" -o "$work/8b-f16.gguf" > "$logs/make.log" 2>&1 &&
  "$bin/ll3" quantize "$work/8b-f16.gguf" "$work/8b-q4_k_m.gguf" q4_k_m >> "$logs/make.log" 2>&1 ||
  { tail -5 "$logs/make.log"; exit 1; }
echo "files made in $((SECONDS - t0)) s"
for f in q4_k_m f16; do
  file=$work/8b-$f.gguf
  timeout 150 build-gpu/llama/llama-cpp/llama-bench -m "$file" -ngl 99 -p 512 -n 128 -r 3 -o md > "$logs/llama-bench-$f.log" 2>&1
  echo "llama-bench $f: exit $?"
  timeout 150 "$bin/ll3-cuda-runner-bench" "$work" "$file" "" > "$logs/ll3-$f.log" 2>&1
  echo "ll3-cuda-runner-bench $f: exit $?"
done
echo
for f in q4_k_m f16; do
  grep -E "^\|" "$logs/llama-bench-$f.log"
  grep -E "^\||read" "$logs/ll3-$f.log"
  echo
done
