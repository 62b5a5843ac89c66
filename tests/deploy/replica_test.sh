#!/usr/bin/env bash
# Replicas that lose no conversation: three `ll3 serve` replicas sharing one --session-dir behind
# the shipped HAProxy config (consistent hash on X-Session-Id), 30 concurrent conversations of 4
# turns (js/replica.mjs), one replica killed with SIGKILL in the middle while it streams a reply.
# Every turn must give exactly the text a single reference server gives for the same prompt
# (greedy); the request in flight on the killed replica fails and succeeds on retry; the killed
# replica's conversations continue on the survivors from their saved sessions. All on 127.0.0.1,
# bounded by timeouts (replica.mjs gives up after 180 s); about a minute on two cores.
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

# node kills one replica on purpose: the watchdog keeps to the reference and HAProxy, and the
# replicas are checked after it (exactly the one it killed is gone).
for r in r0 r1 r2; do unwatch "${pid[$r]}"; done

cfg="$REPO/deploy/haproxy/haproxy.cfg"
grep -q '^    bind :8080$' "$cfg" && grep -q '^    server-template ' "$cfg" || die "the config's bind / server-template lines moved; update this test"
servers=""
for r in r0 r1 r2; do servers+="    server $r ${url[$r]#http://} check\n"; done
launch_haproxy() {  # the shipped config with this port and the three replicas
  sed -e "s|^    bind :8080$|    bind 127.0.0.1:$1|" -e "s|^    server-template .*|$servers|" "$cfg" >"$TMP/haproxy.cfg"
  haproxy -c -q -f "$TMP/haproxy.cfg" || { echo "the test's copy of the config does not parse"; exit 1; }
  exec haproxy -db -f "$TMP/haproxy.cfg"
}
start_listener HAProxy "$TMP/haproxy.log" launch_haproxy
lb="http://127.0.0.1:$PORT"
wait_200 "$lb/health" 20 "$BG_PID" || die "HAProxy did not answer: $(cat "$TMP/haproxy.log")"

pids="{\"r0\": ${pid[r0]}, \"r1\": ${pid[r1]}, \"r2\": ${pid[r2]}}"
timeout 200 node "$JS/replica.mjs" "$lb" "$ref" "$pids" | tee "$TMP/replica.out" ||
  die "the replica test failed (haproxy log: $TMP/haproxy.log)"
killed="$(sed -n 's/^killed \(r[0-9]\) .*/\1/p' "$TMP/replica.out")"
[ -n "$killed" ] || die "replica.mjs did not say which replica it killed"
for r in r0 r1 r2; do
  if [ "$r" = "$killed" ]; then
    if alive "${pid[$r]}"; then die "$r was killed but runs"; fi
  elif ! alive "${pid[$r]}"; then
    die "$r, which nobody killed, exited: $(tail -n 40 "$TMP/ll3-$((${r#r} + 1)).log")"
  fi
done
ls "$sessions" | grep -q '\.tmp$' && die "temporary session files left: $(ls "$sessions")"
log "ok"
