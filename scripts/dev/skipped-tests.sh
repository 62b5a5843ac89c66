#!/usr/bin/env bash
# Says which tests of a CTest run were skipped and why, grouped by reason (the GPU tests on a
# machine without a GPU are one group), from CTest's full log (Testing/Temporary/LastTest.log,
# which keeps every test's output): a skip is never silent in the summary.
#   scripts/dev/skipped-tests.sh LastTest.log
set -euo pipefail
log="${1:?usage: skipped-tests.sh LastTest.log}"
[ -f "$log" ] || { echo "skipped-tests.sh: no $log" >&2; exit 1; }
awk '
  # A test block starts with "N/M Testing: NAME" and its output follows.
  /^[0-9]+\/[0-9]+ Testing: / { name = $3; reason = ""; next }
  # GoogleTest prints "file:line: Skipped", then the reason, then "[  SKIPPED ] NAME (..)".
  / Skipped$/ && name != "" { getline reason; next }
  /^\[  SKIPPED \] [^ ]+ \(/ && name != "" { skipped[name] = reason }
  # tests/deploy/lib.sh prints "[test] SKIP: reason" and exits 77.
  /^\[[A-Za-z_]+\] SKIP: / && name != "" { r = $0; sub(/^\[[A-Za-z_]+\] SKIP: /, "", r); skipped[name] = r }
  END {
    n = 0
    for (t in skipped) { n++; r = skipped[t]; if (r == "") r = "(no reason printed)"; count[r]++; if (!(r in first)) first[r] = t }
    if (n == 0) { print "test.sh: no test was skipped"; exit }
    print "test.sh: " n " test" (n == 1 ? "" : "s") " skipped:"
    for (r in count) {
      what = (r ~ /CUDA device|GPU/) ? "GPU tests" : "tests"
      printf "  %d %s (e.g. %s): %s\n", count[r], what, first[r], r
    }
  }' "$log"
