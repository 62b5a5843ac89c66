#!/usr/bin/env bash
# The test command: installs dependencies, builds everything, runs the whole CTest suite
# (unit, parity, CLI, fuzz and sanitizer tests) and prints CTest's summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
cd build
set +e
ctest --output-on-failure -j2 --timeout 900 2>&1 | tee ctest.log | grep -vE "^\s*[0-9]+/[0-9]+ Test +#[0-9]+: .* Passed"
rc=${PIPESTATUS[0]}
set -e
grep -E "tests passed|tests failed" ctest.log | tail -1
exit "$rc"
