#!/usr/bin/env bash
# The monitoring component's PrometheusRule: its spec, extracted from the rendered overlay, passes
# `promtool check rules` and the unit tests in tests/deploy/alerts_test.yaml
# (`promtool test rules`); every alert of the rule file has a test.
# shellcheck source=tests/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
need promtool "Debian: apt-get install prometheus"
need_kubectl
need_js

render overlays/monitoring "$TMP/monitoring.yaml"
node -e '
  const fs = require("fs"), YAML = require(process.argv[1] + "/node_modules/yaml");
  const rules = YAML.parseAllDocuments(fs.readFileSync(process.argv[2], "utf8")).map((d) => d.toJS()).filter((o) => o?.kind === "PrometheusRule");
  if (rules.length !== 1) { console.error(`expected one PrometheusRule, found ${rules.length}`); process.exit(1); }
  fs.writeFileSync(process.argv[3], YAML.stringify({ groups: rules[0].spec.groups }));
  const alerts = rules[0].spec.groups.flatMap((g) => g.rules).filter((r) => r.alert).map((r) => r.alert);
  const tested = fs.readFileSync(process.argv[4], "utf8");
  const untested = alerts.filter((a) => !tested.includes(`alertname: ${a}`));
  if (untested.length) { console.error(`alerts without a test in alerts_test.yaml: ${untested.join(", ")}`); process.exit(1); }
  console.log(alerts.join(" "));' \
  "$JS" "$TMP/monitoring.yaml" "$TMP/ll3-rules.yaml" "$DEPLOY_TEST_DIR/alerts_test.yaml" >"$TMP/alerts" ||
  die "could not extract the rules"
log "alerts: $(cat "$TMP/alerts")"
promtool check rules "$TMP/ll3-rules.yaml" || die "promtool check rules failed"
cp "$DEPLOY_TEST_DIR/alerts_test.yaml" "$TMP/"
(cd "$TMP" && promtool test rules alerts_test.yaml) || die "promtool test rules failed"
log "ok"
