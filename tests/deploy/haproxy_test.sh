#!/usr/bin/env bash
# deploy/haproxy/haproxy.cfg: `haproxy -c` accepts it as shipped; then, with its replica list and
# listen address swapped for two local ll3 serve replicas (--alias a / b, so that a response's
# "model" names the replica that answered), every X-Session-Id goes to one replica every time,
# the sessions spread over both, requests without the header go to both, and when a replica
# stops the health check takes it out and its sessions are answered by the other. All on
# 127.0.0.1; about 10 s.
# shellcheck source=tests/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
need haproxy "Debian: apt-get install haproxy"
need curl "apt-get install curl"
need timeout "coreutils"
need_js
need_model
[ -x "$LL3_BIN" ] || die "no ll3 binary at $LL3_BIN"

cfg="$REPO/deploy/haproxy/haproxy.cfg"
haproxy -c -q -f "$cfg" || die "haproxy -c rejects $cfg"
grep -q "balance hdr(X-Session-Id)" "$cfg" && grep -q "hash-type consistent" "$cfg" || die "not a consistent hash on X-Session-Id"

start_ll3 --alias a --no-access-log
url_a="$LL3_URL" pid_a="$LL3_PID"
start_ll3 --alias b --no-access-log
url_b="$LL3_URL"
grep -q '^    bind :8080$' "$cfg" && grep -q '^    server-template ' "$cfg" || die "the config's bind / server-template lines moved; update this test"
launch_haproxy() {  # the shipped config with this port and these two replicas
  sed -e "s|^    bind :8080$|    bind 127.0.0.1:$1|" \
      -e "s|^    server-template .*|    server a ${url_a#http://} check\n    server b ${url_b#http://} check|" \
      "$cfg" >"$TMP/haproxy.cfg"
  haproxy -c -q -f "$TMP/haproxy.cfg" || { echo "the test's copy of the config does not parse"; exit 1; }
  exec haproxy -db -f "$TMP/haproxy.cfg"
}
start_listener HAProxy "$TMP/haproxy.log" launch_haproxy
LB="http://127.0.0.1:$PORT"
wait_200 "$LB/health" 20 "$BG_PID" || die "HAProxy did not answer: $(cat "$TMP/haproxy.log")"

# Which replica answers a completion (its alias is the response's model).
who() {  # who [SESSION]
  local h=()
  [ -n "${1:-}" ] && h=(-H "X-Session-Id: $1")
  curl -sf -m 20 "${h[@]}" "$LB/v1/completions" -d '{"prompt": "Hi", "max_tokens": 1}' |
    node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>console.log(JSON.parse(s).model))'
}
declare -A first
seen=""
for round in 1 2 3; do
  for s in $(seq 1 16); do
    r="$(who "session-$s")" || die "request for session-$s failed"
    if [ "$round" = 1 ]; then first[$s]="$r"; seen+="$r"
    elif [ "${first[$s]}" != "$r" ]; then die "session-$s went to ${first[$s]}, then to $r"; fi
  done
done
[[ "$seen" == *a* && "$seen" == *b* ]] || die "16 sessions all went to one replica ($seen)"
log "16 sessions, 3 requests each, each on one replica: ${first[*]}"
nohdr=""
for _ in $(seq 1 12); do nohdr+="$(who)"; done
[[ "$nohdr" == *a* && "$nohdr" == *b* ]] || die "requests without X-Session-Id all went to one replica ($nohdr)"
log "without the header: $nohdr"

# Replica a stops: after the failed checks (inter 2s, fall 2) every session is answered by b.
stop_pid "$pid_a"
until=$((SECONDS + 15))
while ((SECONDS < until)); do
  ok=1
  for s in $(seq 1 16); do [ "$(who "session-$s" 2>/dev/null)" = b ] || { ok=0; break; }; done
  ((ok)) && break
  sleep 0.5
done
((ok)) || die "with replica a stopped, not every session is answered by b"
log "replica a stopped: all 16 sessions answered by b"
log "ok"
