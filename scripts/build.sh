#!/usr/bin/env bash
# Configures and builds ll3 (Release, clang) into build/: every target (tests, benchmarks, fuzz
# targets), the CUDA backend included wherever nvcc is found (the test command's build). Extra
# arguments go to CMake's configure step.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc 2>/dev/null || echo 2)"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DLL3_CUDA=AUTO \
  -DLL3_TESTS=ON -DLL3_BENCH=ON -DLL3_FUZZ=ON "$@" >/dev/null
cmake --build build -j"$jobs"
