#!/usr/bin/env bash
# The Grafana dashboard's queries (monitoring component) against real data: ll3 serve with the
# tiny shared model and a Prometheus scraping it every second, both on 127.0.0.1; a few
# completions (streamed and not, one prompt twice for prefix-cache hits, one 4xx); then every
# panel query must return a finite value and every variable query some values
# (js/dashboard_queries.mjs). About 15 s; every wait has a deadline.
# shellcheck source=tests/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
need prometheus "Debian: apt-get install prometheus"
need curl "apt-get install curl"
need timeout "coreutils"
need_kubectl
need_js
need_model
[ -x "$LL3_BIN" ] || die "no ll3 binary at $LL3_BIN"

render overlays/monitoring "$TMP/monitoring.yaml"
start_ll3
log "ll3 serve at $LL3_URL"

# The labels a ServiceMonitor gives the target in Kubernetes (namespace, service, pod, job).
cat >"$TMP/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: ll3
    static_configs:
      - targets: ["${LL3_URL#http://}"]
        labels: {namespace: ll3, service: ll3, pod: ll3-test-0}
EOF
launch_prometheus() {
  exec prometheus --config.file="$TMP/prometheus.yml" --storage.tsdb.path="$TMP/tsdb" \
    --web.listen-address="127.0.0.1:$1" --log.level=warn
}
start_listener Prometheus "$TMP/prometheus.log" launch_prometheus
PROM="http://127.0.0.1:$PORT"
wait_200 "$PROM/-/ready" 30 "$BG_PID" || die "Prometheus did not start: $(tail -5 "$TMP/prometheus.log")"

# Waits up to 20 s until the instant query $1 has a sample (whatever its value).
until_sample() {
  local until=$(($(date +%s) + 20))
  until curl -s -m 5 "$PROM/api/v1/query" --data-urlencode "query=$1" | grep -q '"value"'; do
    (($(date +%s) < until)) || die "Prometheus has no sample of $1 after 20 s: $(curl -s -m 5 "$PROM/api/v1/targets")"
    sleep 0.2
  done
}
# Until Prometheus has scraped ll3 (before the requests, so that the rates see them).
until_sample ll3_model_loaded

long_prompt="$(printf 'The quick brown fox jumps over the lazy dog. %.0s' {1..8})"
for i in 1 2; do
  curl -sf -m 30 "$LL3_URL/v1/completions" -d "{\"prompt\": \"$long_prompt\", \"max_tokens\": 8, \"temperature\": 0}" >/dev/null ||
    die "completion $i failed"
done
curl -sf -m 30 -N "$LL3_URL/v1/chat/completions" \
  -d '{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "stream": true}' >/dev/null || die "streamed chat failed"
curl -s -m 10 -o /dev/null "$LL3_URL/v1/completions" -d '{"prompt": 1}' # a 400
# The 400 came last: once a scrape shows it, the scrapes have seen every request.
until_sample 'll3_requests_total{status="400"} >= 1'

timeout 60 node "$JS/dashboard_queries.mjs" "$TMP/monitoring.yaml" "$PROM" ll3 ll3-test-0 || die "dashboard queries failed"
log "ok"
