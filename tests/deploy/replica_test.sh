#!/usr/bin/env bash
# Replicas that lose no conversation: three `ll3 serve` replicas sharing one --session-dir behind
# the shipped HAProxy config (consistent hash on X-Session-Id), 30 concurrent conversations of 4
# turns (js/replica.mjs), one replica killed with SIGKILL in the middle while it streams a reply.
# Every turn must give exactly the text a single reference server gives for the same prompt
# (greedy); the request in flight on the killed replica fails and succeeds on retry; the killed
# replica's conversations continue on the survivors from their saved sessions. All on 127.0.0.1,
# bounded by timeouts; about a minute on two cores.
source "$(dirname "$0")/lib.sh"
need haproxy "Debian: apt-get install haproxy"
need curl "apt-get install curl"
need node "scripts/setup.sh installs Node.js"
need_model
[ -x "$LL3_BIN" ] || die "no ll3 binary at $LL3_BIN"

sessions="$TMP/sessions"
mkdir -p "$sessions"
declare -A pid url
for r in r0 r1 r2; do
  start_ll3 --alias "$r" --no-access-log -c 8192 --session-dir "$sessions"
  pid[$r]="$LL3_PID"
  url[$r]="$LL3_URL"
done
start_ll3 --alias reference --no-access-log -c 8192
ref="$LL3_URL"

cfg="$REPO/deploy/haproxy/haproxy.cfg"
port="$(free_port)"
grep -q '^    bind :8080$' "$cfg" && grep -q '^    server-template ' "$cfg" || die "the config's bind / server-template lines moved; update this test"
servers=""
for r in r0 r1 r2; do servers+="    server $r ${url[$r]#http://} check\n"; done
sed -e "s|^    bind :8080$|    bind 127.0.0.1:$port|" -e "s|^    server-template .*|$servers|" "$cfg" >"$TMP/haproxy.cfg"
haproxy -c -q -f "$TMP/haproxy.cfg" || die "the test's copy of the config does not parse"
timeout 300 haproxy -db -f "$TMP/haproxy.cfg" >"$TMP/haproxy.log" 2>&1 &
hap_pid=$!
on_exit "kill $hap_pid; wait $hap_pid"
lb="http://127.0.0.1:$port"
wait_200 "$lb/health" 20 || die "HAProxy did not answer: $(cat "$TMP/haproxy.log")"

pids="{\"r0\": ${pid[r0]}, \"r1\": ${pid[r1]}, \"r2\": ${pid[r2]}}"
timeout 280 node "$JS/replica.mjs" "$lb" "$ref" "$pids" || die "the replica test failed (haproxy log: $TMP/haproxy.log)"
ls "$sessions" | grep -q '\.tmp$' && die "temporary session files left: $(ls "$sessions")"
log "ok"
