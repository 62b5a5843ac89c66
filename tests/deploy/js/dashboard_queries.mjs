// Runs every query of the Grafana dashboard in the monitoring component against a Prometheus
// that scrapes a running ll3 serve (tests/deploy/dashboard_test.sh sets both up):
//
//   node dashboard_queries.mjs RENDERED.yaml PROMETHEUS_URL NAMESPACE POD
//
// The dashboard comes from the rendered ConfigMap (label grafana_dashboard), so the test reads
// what Grafana would. Grafana's variables are replaced as Grafana would with one namespace and
// one pod selected ($__rate_interval by 1m). Each panel query must answer a vector with at least
// one finite value, and each templating query (label_values) at least one value. Exit 1 on any
// failure, listing them all.
import fs from "node:fs";
import YAML from "yaml";

const [file, prom, namespace, pod] = process.argv.slice(2);
if (!pod) {
  console.error("usage: node dashboard_queries.mjs RENDERED.yaml PROMETHEUS_URL NAMESPACE POD");
  process.exit(2);
}
const objs = YAML.parseAllDocuments(fs.readFileSync(file, "utf8")).map((d) => d.toJS());
const cms = objs.filter((o) => o?.kind === "ConfigMap" && o.metadata?.labels?.grafana_dashboard === "1");
if (cms.length !== 1) {
  console.error(`expected one dashboard ConfigMap, found ${cms.length}`);
  process.exit(1);
}
const files = Object.entries(cms[0].data ?? {});
if (files.length !== 1) {
  console.error(`expected one dashboard in the ConfigMap, found ${files.length}`);
  process.exit(1);
}
const dash = JSON.parse(files[0][1]); // throws (exit 1) on invalid JSON

const vars = { namespace, pod, __rate_interval: "1m", datasource: "prometheus" };
const substitute = (q) =>
  q.replace(/\$\{?(\w+)\}?/g, (m, name) => {
    if (!(name in vars)) throw new Error(`unknown variable ${m} in ${q}`);
    return vars[name];
  });

async function query(expr) {
  const r = await fetch(`${prom}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await r.json();
  if (body.status !== "success") throw new Error(`${body.errorType}: ${body.error}`);
  return body.data;
}

const failures = [];
let n = 0;
const panels = (dash.panels ?? []).flatMap((p) => (p.type === "row" ? p.panels ?? [] : [p]));
for (const p of panels) {
  for (const t of p.targets ?? []) {
    n++;
    const expr = substitute(t.expr);
    try {
      const data = await query(expr);
      const values = data.resultType === "vector" ? data.result.map((s) => Number(s.value[1])) : data.resultType === "scalar" ? [Number(data.result[1])] : [];
      const finite = values.filter((v) => Number.isFinite(v));
      if (finite.length === 0) failures.push(`"${p.title}" / ${t.legendFormat}: no finite value (${JSON.stringify(data.result)}) for ${expr}`);
      else console.log(`ok   "${p.title}" / ${t.legendFormat}: ${finite.map((v) => +v.toPrecision(4)).join(", ")}`);
    } catch (e) {
      failures.push(`"${p.title}" / ${t.legendFormat}: ${e.message} for ${expr}`);
    }
  }
}
for (const v of dash.templating?.list ?? []) {
  if (v.type !== "query") continue;
  n++;
  const q = substitute(typeof v.query === "string" ? v.query : v.query.query);
  const m = /^label_values\((?:(.*),\s*)?(\w+)\)$/.exec(q);
  if (!m) {
    failures.push(`variable ${v.name}: not a label_values() query: ${q}`);
    continue;
  }
  const params = m[1] ? `?match[]=${encodeURIComponent(m[1])}` : "";
  const body = await (await fetch(`${prom}/api/v1/label/${m[2]}/values${params}`)).json();
  if (body.status !== "success" || body.data.length === 0) failures.push(`variable ${v.name}: no values for ${q}`);
  else console.log(`ok   variable ${v.name}: ${body.data.join(", ")}`);
}
if (n < 10) failures.push(`only ${n} queries in the dashboard`);
if (failures.length) {
  for (const f of failures) console.log(`FAIL ${f}`);
  process.exit(1);
}
console.log(`ok   all ${n} queries answered`);
