#!/usr/bin/env bash
# Builds llama.cpp's CUDA backend and llama-bench here (no GPU needed: nvcc only), for
# scripts/gpu-vs-llama-cpp.sh to carry to a GPU machine. SRC: a llama.cpp checkout (default
# /tmp/llama.cpp; the figures in docs use commit c392e50 of 2025-02-20). sm_90 only (H100 /
# H200), which keeps the library small enough to carry. On 2 cores the build takes about an
# hour; it resumes where it stopped. The executables link with --allow-shlib-undefined: here only
# the toolkit's stub libcuda.so exists, not the driver's libcuda.so.1 the library names.
set -euo pipefail
src=${SRC:-/tmp/llama.cpp}
cmake -S "$src" -B "$src/build-cuda" -DLLAMA_CURL=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DGGML_NATIVE=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS=-Wl,--allow-shlib-undefined
nice make -C "$src/build-cuda" -j"$(nproc)" llama-bench
ls -la "$src/build-cuda/bin"
