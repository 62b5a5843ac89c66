# shellcheck shell=bash
# Shared by the tests/deploy/*_test.sh drivers (sourced). CTest runs them (tests/CMakeLists.txt)
# with LL3_BIN (the ll3 binary) and LL3_SHARED (the shared test data) in the environment.
# A missing tool fails the test under CI (CI=true) and skips it elsewhere (exit 77, CTest's
# SKIP_RETURN_CODE), saying which tool and how to install it; it never passes silently.
#
# Every wait here has a deadline, and the whole test has one (TEST_BUDGET seconds, default 240,
# well inside CTest's 300): a watchdog ends the test when it passes, or within a second of a
# background process the test still needs (a server) exiting, printing that process's log. A
# failing test prints the end of every background process's log.
set -euo pipefail

DEPLOY_TEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$DEPLOY_TEST_DIR/../.." && pwd)"
JS="$DEPLOY_TEST_DIR/js"
LL3_BIN="${LL3_BIN:-$REPO/build/ll3}"
LL3_SHARED="${LL3_SHARED:-$REPO/../shared}"
TEST_NAME="$(basename "$0" .sh)"
TEST_BUDGET="${TEST_BUDGET:-240}"

log() { echo "[$TEST_NAME] $*"; }
die() { echo "[$TEST_NAME] FAIL: $*" >&2; exit 1; }
skip_or_fail() {
  if [ "${CI:-}" = true ]; then die "$* (CI: required)"; fi
  echo "[$TEST_NAME] SKIP: $*" >&2
  exit 77
}
need() {  # need TOOL HOW-TO-INSTALL
  command -v "$1" >/dev/null 2>&1 || skip_or_fail "$1 is not installed ($2)"
}
need_js() {
  need node "scripts/setup.sh installs Node.js"
  [ -f "$JS/node_modules/kubernetes-models/package.json" ] ||
    skip_or_fail "tests/deploy/js/node_modules is missing (scripts/setup.sh runs: cd tests/deploy/js && npm ci)"
}
need_model() {
  MODEL="$LL3_SHARED/models/tiny-llama3-f32.gguf"
  [ -f "$MODEL" ] || skip_or_fail "the shared test model $MODEL is missing (set LL3_SHARED)"
}
need_kubectl() {
  need kubectl "Debian: apt-get install kubernetes-client, or a kubectl >= 1.27"
  # The kustomizations use `labels`, `patches` and components: kustomize v5 (kubectl 1.27+).
  local v
  v="$(kubectl version --client 2>/dev/null | sed -n 's/^Kustomize Version: v\([0-9]*\).*/\1/p')"
  [ -n "$v" ] && [ "$v" -ge 5 ] || skip_or_fail "kubectl's kustomize is older than v5 ($(kubectl version --client 2>&1 | tr '\n' ' '))"
}

TMP="$(mktemp -d "${TMPDIR:-/tmp}/ll3-$TEST_NAME.XXXXXX")"
BG="$TMP/background"     # "PID WATCHED LOG NAME" per background process
: >"$BG"
CLEANUPS=()
cleanup() {
  local rc=$?
  set +e
  [ -n "${WATCHDOG_PID:-}" ] && kill "$WATCHDOG_PID" 2>/dev/null
  if ((rc != 0 && rc != 77)); then
    local pid watched logf name
    while read -r pid watched logf name; do
      [ -s "$logf" ] || continue
      echo "[$TEST_NAME] --- the end of $name's log (pid $pid, $logf):" >&2
      tail -n 30 "$logf" >&2
    done <"$BG"
  fi
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[i]}" >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
on_exit() { CLEANUPS+=("$1"); }

# Whether PID runs (a zombie, exited but not yet reaped, does not).
alive() {
  local state
  state="$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

# Stops PID: SIGTERM, then SIGKILL after GRACE seconds (default 10); reaps it. Never waits longer.
stop_pid() {  # stop_pid PID [GRACE]
  local pid=$1 until=$(($(date +%s) + ${2:-10}))
  unwatch "$pid"
  kill -TERM "$pid" 2>/dev/null || true
  while alive "$pid" && (($(date +%s) < until)); do sleep 0.1; done
  alive "$pid" && kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null || true
}

# Runs CMD in the background with its output in LOG (made before it starts, so it can be read at
# once); sets BG_PID. The watchdog fails the test if it exits before `unwatch` or `stop_pid`.
# The exit trap stops it.
start_bg() {  # start_bg NAME LOG CMD...
  local name=$1 logf=$2
  shift 2
  : >"$logf"
  "$@" >>"$logf" 2>&1 </dev/null &
  BG_PID=$!
  echo "$BG_PID 1 $logf $name" >>"$BG"
  on_exit "stop_pid $BG_PID 5"
}
unwatch() { sed -i "s/^$1 1 /$1 0 /" "$BG"; }

# The watchdog: ends the test (and whatever it is waiting on) when TEST_BUDGET passes or a
# watched process exits, saying which and printing its log.
watchdog() {
  set +e
  local main=$1 deadline=$(($(date +%s) + TEST_BUDGET)) reason="" pid watched logf name
  while kill -0 "$main" 2>/dev/null; do
    if (($(date +%s) >= deadline)); then
      reason="the test's deadline (TEST_BUDGET=$TEST_BUDGET s) passed"
    else
      while read -r pid watched logf name; do
        if ((watched)) && ! alive "$pid"; then
          reason="$name (pid $pid) exited while the test needed it (the end of its log follows)"
          unwatch "$pid"
          break
        fi
      done <"$BG"
    fi
    if [ -n "$reason" ]; then
      echo "[$TEST_NAME] FAIL (watchdog): $reason" >&2
      kill -TERM "$main" 2>/dev/null
      # The script runs its trap once its foreground command ends: end that command too.
      for pid in $(pgrep -P "$main"); do
        [ "$pid" != "$BASHPID" ] && ! grep -q "^$pid " "$BG" && kill -TERM "$pid" 2>/dev/null
      done
      return
    fi
    sleep 0.5
  done
}
watchdog $$ &
WATCHDOG_PID=$!

# Renders DIR (relative to deploy/kubernetes) into FILE.
render() {
  timeout 60 kubectl kustomize "$REPO/deploy/kubernetes/$1" >"$2" || die "kubectl kustomize deploy/kubernetes/$1 failed"
}

# A free TCP port on 127.0.0.1 (the kernel's pick; released before use, so another process may
# take it first: start_listener checks and retries).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Whether PID itself listens on 127.0.0.1:PORT.
listens() { ss -Htlnp "sport = :$2" 2>/dev/null | grep -q "pid=$1,"; }

# Starts a server that takes a port on its command line: LAUNCH PORT must exec it (a function
# that writes its config, then execs). Tries free ports until the process itself listens on one
# (a port another process took in the meantime makes the server exit: the next port is tried).
# Sets BG_PID and PORT.
start_listener() {  # start_listener NAME LOG LAUNCH [SECONDS]
  local name=$1 logf=$2 launch=$3 secs=${4:-30} attempt until
  for attempt in 1 2 3 4 5; do
    PORT="$(free_port)"
    start_bg "$name" "$logf" "$launch" "$PORT"
    until=$(($(date +%s) + secs))
    while alive "$BG_PID" && ! listens "$BG_PID" "$PORT" && (($(date +%s) < until)); do sleep 0.1; done
    listens "$BG_PID" "$PORT" && return 0
    alive "$BG_PID" && die "$name did not listen on port $PORT within $secs s: $(tail -n 20 "$logf")"
    grep -qiE "address already in use|cannot bind|bind: " "$logf" || die "$name exited: $(tail -n 20 "$logf")"
    unwatch "$BG_PID"
    log "$name: port $PORT was taken (attempt $attempt); another"
  done
  die "$name found no free port in 5 attempts"
}

# Waits up to $2 seconds for URL $1 to answer 200; with a PID ($3), fails at once if it exits.
wait_200() {
  local until=$(($(date +%s) + $2))
  while (($(date +%s) < until)); do
    [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null)" = 200 ] && return 0
    [ -n "${3:-}" ] && ! alive "$3" && return 1
    sleep 0.1
  done
  return 1
}

# Starts `ll3 serve` on 127.0.0.1 (its own free port, --port 0) with the tiny model and extra
# flags; sets LL3_URL, LL3_PID and LL3_LOG once /health answers 200.
LL3_STARTS=0
start_ll3() {
  LL3_STARTS=$((LL3_STARTS + 1))
  LL3_LOG="$TMP/ll3-$LL3_STARTS.log"
  start_bg "ll3 serve #$LL3_STARTS" "$LL3_LOG" "$LL3_BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 -t 1 -c 2048 "$@"
  LL3_PID=$BG_PID
  local until=$(($(date +%s) + 30)) port=""
  while [ -z "$port" ]; do
    port="$(sed -n 's|^ll3 serve: listening on http://[^:]*:\([0-9]*\)$|\1|p' "$LL3_LOG")"
    [ -n "$port" ] && break
    alive "$LL3_PID" || die "ll3 serve exited: $(cat "$LL3_LOG")"
    (($(date +%s) < until)) || die "ll3 serve did not say its port in 30 s: $(cat "$LL3_LOG")"
    sleep 0.05
  done
  LL3_URL="http://127.0.0.1:$port"
  wait_200 "$LL3_URL/health" 60 "$LL3_PID" || die "ll3 serve did not become ready: $(cat "$LL3_LOG")"
}
