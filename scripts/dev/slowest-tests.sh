#!/usr/bin/env bash
# The N slowest tests of a CTest run (default 10) beside their timeouts, from CTest's console
# log (ctest ... | tee ctest.log), run from the build directory; flags any test that used more
# than half of its timeout (a busy machine would take it past the end).
#   scripts/dev/slowest-tests.sh ctest.log [N]
set -euo pipefail
log="${1:?usage: slowest-tests.sh ctest.log [N]}" n="${2:-10}"
timeouts="$(mktemp)"
trap 'rm -f "$timeouts"' EXIT
# name TIMEOUT for every test (CTest's JSON model of the suite).
ctest --show-only=json-v1 2>/dev/null | node -e '
  let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => {
    for (const t of JSON.parse(s).tests) {
      const p = (t.properties || []).find((q) => q.name === "TIMEOUT");
      console.log(`${t.name} ${p ? p.value : 1500}`);
    }
  });' >"$timeouts"
echo "test.sh: the $n slowest tests (seconds, and the share of each one's timeout):"
awk '/ Test +#[0-9]+: / && $NF == "sec" { for (i = 1; i < NF; i++) if ($i ~ /^#[0-9]+:$/) { print $(NF - 1), $(i + 1); break } }' "$log" |
  sort -rn | head -n "$n" |
  awk -v tf="$timeouts" 'BEGIN { while ((getline l < tf) > 0) { split(l, a, " "); to[a[1]] = a[2] } }
    { t = to[$2] ? to[$2] : 1500; share = 100 * $1 / t
      printf "  %8.1f s  %3.0f%% of %4d s  %s%s\n", $1, share, t, $2, (share > 50 ? "   <- over half its timeout" : "") }'
