#!/usr/bin/env bash
# ThreadSanitizer over the threaded parts: the engine loop and its clients (tests/engine), the
# KV pool (tests/kv) and a real `ll3 serve` driven over HTTP (tests/server: disconnects,
# cancellation, shutdown), all built with -fsanitize=thread into build-tsan/. Any data race or
# lock-order report fails it. Not part of the CI run (about 12 minutes on 2 cores); run it after
# a change to the engine, the scheduler or the server.
set -euo pipefail
cd "$(dirname "$0")/../.."
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DLL3_TSAN=ON -DLL3_FUZZ=OFF -DLL3_BENCH=OFF -DLL3_CUDA=OFF >/dev/null
cmake --build build-tsan -j"$(nproc)" --target ll3 test_engine test_kv test_server
export TSAN_OPTIONS="halt_on_error=1 exitcode=66 second_deadlock_stack=1"
for t in test_kv test_engine test_server; do
  echo "== $t"
  build-tsan/tests/$t --gtest_brief=1
done
echo "tsan: no reports"
