#!/usr/bin/env bash
# The test command: installs dependencies, builds everything with clang, compiles every target
# with GCC as well (build-gcc/, not run), runs the whole CTest suite of the clang build (unit,
# parity, CLI, fuzz and sanitizer tests) and prints CTest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --tests
scripts/build.sh
scripts/build-gcc.sh
cd build
set +e
ctest --output-on-failure -j2 --timeout 900 2>&1 | tee ctest.log | grep -vE "^\s*[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed"
rc=${PIPESTATUS[0]}
set -e
grep -E "tests passed|tests failed" ctest.log | tail -1
exit "$rc"
