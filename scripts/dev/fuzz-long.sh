#!/usr/bin/env bash
# Long fuzzing runs outside the suite: each libFuzzer target of build/fuzz for SECONDS (default
# 1200, 20 CPU-minutes), JOBS targets at a time (default 2), starting from its committed corpus
# fuzz/corpus/<name>; then that corpus becomes the smallest set of the old and the new inputs
# covering what they cover (minimize below), so the suite's 15 s runs start from what the long
# runs found.
# Prints one line per target: runs, runs/s, coverage, corpus size, and the crash, leak or
# timeout inputs it left (fuzz-long/<name>-artifacts/), which fail the script.
#   scripts/dev/fuzz-long.sh [SECONDS] [JOBS] [TARGET...]
#   scripts/dev/fuzz-long.sh --minimize TARGET...      (the corpora only)
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=run
if [ "${1:-}" = --minimize ]; then
  mode=minimize
  shift
else
  secs="${1:-1200}" jobs="${2:-2}"
  shift $(($# > 2 ? 2 : $#))
fi
targets=("$@")
if ((${#targets[@]} == 0)); then
  for f in fuzz/fuzz_*.cpp; do targets+=("$(basename "$f" .cpp | sed 's/^fuzz_//')"); done
fi
out=build/fuzz-long
mkdir -p "$out"

run_one() {
  local name=$1 bin="build/fuzz/fuzz_$1" work="$out/$1" dict=""
  [ -x "$bin" ] || { echo "$name: no $bin (scripts/build.sh builds the fuzz targets)"; return 1; }
  [ -f "fuzz/corpus/$name.dict" ] && dict="-dict=fuzz/corpus/$name.dict"
  rm -rf "$work" "$work-artifacts" && mkdir -p "$work" "$work-artifacts"
  [ -d "fuzz/corpus/$name" ] && cp -r "fuzz/corpus/$name/." "$work/"
  local t0=$SECONDS TIMEFORMAT='%U %S'
  # Without the allocation stack of every malloc (a fifth of a sanitized run's time): a finding's
  # report then lacks where its memory was allocated; rerun its input (build/fuzz/fuzz_NAME FILE)
  # for the full report.
  { time env ASAN_OPTIONS="${ASAN_OPTIONS:-malloc_context_size=0}" "$bin" -max_total_time="$secs" -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 \
      -artifact_prefix="$work-artifacts/" $dict "$work" >"$work.log" 2>&1 || true; } 2>"$work.cpu"
  local took=$((SECONDS - t0))  # shorter than asked when it stopped at a finding
  local cpu
  cpu="$(awk '{printf "%.0f", $1 + $2}' "$work.cpu")"  # user + system seconds: what it had of the CPUs
  minimize "$name" "$work"
  local runs rate cov files found
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$work.log" | tail -1)"
  rate="$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work.log" | tail -1)"
  cov="$(grep -E '^#[0-9]+.*cov:' "$work.log" | tail -1 | sed -n 's/.*cov: \([0-9]*\) ft: \([0-9]*\).*/cov \1 ft \2/p')"
  files="$(ls "fuzz/corpus/$name" | wc -l)"
  found="$(ls "$work-artifacts" | wc -l)"
  echo "$name: ${runs:-?} runs in $took s, $cpu CPU-s (${rate:-?}/s), $cov, corpus $files files ($(du -sk "fuzz/corpus/$name" | cut -f1) KiB), findings: $found"
  ((found == 0)) || { ls "$work-artifacts"; grep -m3 -E "ERROR|SUMMARY" "$work.log"; return 1; }
}

# The committed corpus becomes the smallest set of its inputs and $2's that covers what they all
# cover (libFuzzer -merge=1 into an empty directory), plus the hand-made seeds and regressions
# (files not named by their hash), which always stay.
minimize() {  # minimize NAME [MORE_DIR]
  local name=$1 more=${2:-} bin="build/fuzz/fuzz_$1" dir="fuzz/corpus/$1" min="$out/$1-min"
  rm -rf "$min" && mkdir -p "$min" "$dir"
  "$bin" -merge=1 -rss_limit_mb=2048 -timeout=10 "$min" "$dir" ${more:+"$more"} >"$out/$name-merge.log" 2>&1
  for f in "$dir"/*; do
    [[ "$(basename "$f")" =~ ^[0-9a-f]{40}$ ]] || cp "$f" "$min/"
  done
  rm -rf "$dir" && mv "$min" "$dir"
}

if [ "$mode" = minimize ]; then
  for name in "${targets[@]}"; do minimize "$name"; echo "$name: corpus $(ls "fuzz/corpus/$name" | wc -l) files ($(du -sk "fuzz/corpus/$name" | cut -f1) KiB)"; done
  exit 0
fi

rc=0
pids=()
for name in "${targets[@]}"; do
  run_one "$name" &
  pids+=($!)
  if ((${#pids[@]} >= jobs)); then
    wait "${pids[0]}" || rc=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
exit "$rc"
