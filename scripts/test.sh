#!/usr/bin/env bash
# The test command: installs dependencies, builds everything with clang, compiles every target
# with GCC as well (build-gcc/, not run), runs the whole CTest suite of the clang build (unit,
# parity, CLI, fuzz and sanitizer tests) and prints CTest's summary line, then what was skipped
# (the GPU tests without a GPU, and why).
#
#   scripts/test.sh                        what CI runs (.ci/run)
#   scripts/test.sh --stress N [--repeat K]
#       the same suite with N busy loops on the CPUs beside it (a busy CI machine), then the
#       tests that spawn processes (ll3 serve, the CLI, the deployment tests; CTest label
#       `spawn`, and the `Cli` tests of the other modules) again with --repeat until-fail:K
#       (default 3) under the same load; ends with the ten slowest tests against their
#       timeouts. Run it before submitting a change to a test harness.
set -euo pipefail
cd "$(dirname "$0")/.."
stress=0 repeat=3
while (($#)); do
  case "$1" in
    --stress) stress="${2:?--stress N}"; shift 2 ;;
    --repeat) repeat="${2:?--repeat K}"; shift 2 ;;
    *) echo "usage: scripts/test.sh [--stress N [--repeat K]]" >&2; exit 2 ;;
  esac
done
root="$(pwd)"
scripts/setup.sh --tests
scripts/build.sh
scripts/build-gcc.sh
cd build

loops=()
stop_loops() { ((${#loops[@]})) && kill "${loops[@]}" 2>/dev/null; loops=(); }
trap stop_loops EXIT
if ((stress)); then
  for ((i = 0; i < stress; i++)); do
    (while :; do :; done) &
    loops+=($!)
  done
  echo "test.sh: $stress busy loops beside the suite (pids ${loops[*]})"
fi

# Passed and skipped lines are left out of the terminal (ctest.log keeps them; the skips are
# summed up by reason at the end); failures print their output.
quiet() { grep -vE "^\s*[0-9]+/[0-9]+ Test +#[0-9]+: .* (Passed|Skipped)|^\s+[0-9]+ - .* \(Skipped\)$"; }
set +e
ctest --output-on-failure -j2 --timeout 900 2>&1 | tee ctest.log | quiet
rc=${PIPESTATUS[0]}
cp Testing/Temporary/LastTest.log last-test.log  # every test's output (the repeats below write their own)
if ((stress)); then
  echo "test.sh: the tests that spawn processes again, --repeat until-fail:$repeat"
  ctest --output-on-failure -j2 --timeout 900 -L spawn --repeat until-fail:"$repeat" 2>&1 | tee ctest-repeat.log | quiet
  r1=${PIPESTATUS[0]}
  ctest --output-on-failure -j2 --timeout 900 -LE spawn -R Cli -E '^(avx512|avx2|scalar)\.' --repeat until-fail:"$repeat" 2>&1 |
    tee -a ctest-repeat.log | quiet
  r2=${PIPESTATUS[0]}
  ((rc == 0 && r1 != 0)) && rc=$r1
  ((rc == 0 && r2 != 0)) && rc=$r2
  stop_loops
  echo "test.sh: the repeated tests: $(grep -E "tests passed|tests failed" ctest-repeat.log | tr '\n' ' ')"
  "$root/scripts/dev/slowest-tests.sh" ctest.log 10
fi
set -e
"$root/scripts/dev/skipped-tests.sh" last-test.log
grep -E "tests passed|tests failed" ctest.log | tail -1
exit "$rc"
