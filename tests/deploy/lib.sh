# shellcheck shell=bash
# Shared by the tests/deploy/*_test.sh drivers (sourced). CTest runs them (tests/CMakeLists.txt)
# with LL3_BIN (the ll3 binary) and LL3_SHARED (the shared test data) in the environment.
# A missing tool fails the test under CI (CI=true) and skips it elsewhere (exit 77, CTest's
# SKIP_RETURN_CODE), saying which tool and how to install it; it never passes silently.
set -euo pipefail

DEPLOY_TEST_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$DEPLOY_TEST_DIR/../.." && pwd)"
JS="$DEPLOY_TEST_DIR/js"
LL3_BIN="${LL3_BIN:-$REPO/build/ll3}"
LL3_SHARED="${LL3_SHARED:-$REPO/../shared}"
TEST_NAME="$(basename "$0" .sh)"

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
CLEANUPS=()
cleanup() {
  local rc=$?
  for ((i = ${#CLEANUPS[@]} - 1; i >= 0; i--)); do eval "${CLEANUPS[i]}" >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
on_exit() { CLEANUPS+=("$1"); }

# Renders DIR (relative to deploy/kubernetes) into FILE.
render() {
  kubectl kustomize "$REPO/deploy/kubernetes/$1" >"$2" || die "kubectl kustomize deploy/kubernetes/$1 failed"
}

# A free TCP port on 127.0.0.1 (the kernel's pick; released before use).
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

# Waits up to $2 seconds for URL $1 to answer 200.
wait_200() {
  local until=$((SECONDS + $2))
  while ((SECONDS < until)); do
    [ "$(curl -s -o /dev/null -m 2 -w '%{http_code}' "$1" 2>/dev/null)" = 200 ] && return 0
    sleep 0.1
  done
  return 1
}

# Starts `ll3 serve` on 127.0.0.1 with the tiny model and extra flags; sets LL3_URL and LL3_PID.
start_ll3() {
  local log="$TMP/ll3-$RANDOM.log"
  "$LL3_BIN" serve -m "$MODEL" --host 127.0.0.1 --port 0 -t 1 -c 2048 "$@" 2>"$log" &
  LL3_PID=$!
  on_exit "kill $LL3_PID; wait $LL3_PID"
  local until=$((SECONDS + 30)) port=""
  while ((SECONDS < until)) && [ -z "$port" ]; do
    port="$(sed -n 's|^ll3 serve: listening on http://[^:]*:\([0-9]*\)$|\1|p' "$log")"
    kill -0 "$LL3_PID" 2>/dev/null || die "ll3 serve exited: $(cat "$log")"
    sleep 0.05
  done
  [ -n "$port" ] || die "ll3 serve did not say its port: $(cat "$log")"
  LL3_URL="http://127.0.0.1:$port"
  wait_200 "$LL3_URL/health" 30 || die "ll3 serve did not become ready: $(cat "$log")"
}
