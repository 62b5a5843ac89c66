#!/usr/bin/env bash
# Configures and compiles every target (library, ll3, tests, benchmarks) with GCC (-O0) into
# build-gcc/: the check that ll3 still builds with Debian 12's GCC 12 as well as with clang.
# Compile only: CI runs the test suite from the clang build (build/). fuzz/ is clang-only. It is
# also the build without CUDA (LL3_CUDA=OFF): the clang build compiles the CUDA ops once, and
# this one checks that ll3 builds where there is no nvcc. At -O0 (a Debug build without debug
# information): what it checks is that GCC compiles and links every target, and without its
# optimizer that takes a fraction of the time, which keeps CI's run within its hour.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs="$(nproc 2>/dev/null || echo 2)"
cmake -S . -B build-gcc -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DCMAKE_CXX_FLAGS_DEBUG=-O0 -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
  -DLL3_TESTS=ON -DLL3_BENCH=ON -DLL3_FUZZ=OFF -DLL3_CUDA=OFF "$@" >/dev/null
cmake --build build-gcc -j"$jobs"
