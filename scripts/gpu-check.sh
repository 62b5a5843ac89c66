#!/usr/bin/env bash
# The GPU check, one run on a machine with an NVIDIA GPU: builds the CUDA ops and the GPU
# forward pass in the kernels-only configuration (LL3_KERNELS_ONLY: core, kernels, checkpoint
# readers, KV cache, CPU and CUDA runners; no server, tokenizer or test packages needed, which a
# GPU machine may lack), runs their tests against the CPU, then the op benchmark and the runner
# benchmark on the llama3.1-8b shape (pp512, tg128, decode GB/s against the copy bandwidth,
# aggregate decode at 1, 8, 32 and 128 sequences), and prints its table last.
#
#   scripts/gpu-check.sh --prepare   on the development machine, once: copies GoogleTest's
#                                    sources and nlohmann-json's headers to .gpu-deps/ (git-ignored)
#   scripts/gpu-check.sh [TYPES]     on the GPU machine (carry .gpu-deps); logs go to $OUT or
#                                    build-gpu/; TYPES for the runner benchmark (default
#                                    f16,bf16,q8_0,q4_k)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--prepare" ]; then
  rm -rf .gpu-deps && mkdir -p .gpu-deps/json && cp -r /usr/src/googletest .gpu-deps/ &&
    cp -r /usr/include/nlohmann .gpu-deps/json/
  grep -qx '/.gpu-deps/' .git/info/exclude 2>/dev/null || echo '/.gpu-deps/' >> .git/info/exclude
  echo "gpu-check: .gpu-deps (googletest, nlohmann-json) ready; carry .gpu-deps"
  exit 0
fi
logs=${OUT:-build-gpu}
mkdir -p build-gpu "$logs"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader || true
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B build-gpu "${generator[@]}" -DCMAKE_BUILD_TYPE=Release -DLL3_KERNELS_ONLY=ON -DLL3_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DLL3_GTEST_SOURCE="$PWD/.gpu-deps/googletest" -DLL3_JSON_INCLUDE="$PWD/.gpu-deps/json" >"$logs/configure.log" 2>&1 ||
  { tail -30 "$logs/configure.log"; exit 1; }
cmake --build build-gpu -j"$(nproc)" >"$logs/build.log" 2>&1 || { grep -E "error" -A3 "$logs/build.log" | head -60; exit 1; }
set +e
build-gpu/test_cuda 2>&1 | tee "$logs/test_cuda.log" | grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|Expected|Which is" | head -60
tests_rc=${PIPESTATUS[0]}
build-gpu/ll3-cuda-bench 2>&1 | tee "$logs/bench.md"
bench_rc=${PIPESTATUS[0]}
models=$(df --output=avail -B1G /tmp | tail -1)
build-gpu/ll3-cuda-runner-bench /tmp "${1:-f16,bf16,q8_0,q4_k}" 2>&1 | tee "$logs/runner.md"
runner_rc=${PIPESTATUS[0]}
set -e
echo
echo "gpu-check: CUDA tests exit $tests_rc, op benchmark exit $bench_rc, runner benchmark exit $runner_rc" \
  "(/tmp had $models GB free)"
exit $(( tests_rc != 0 || bench_rc != 0 || runner_rc != 0 ))
