// Validates Kubernetes manifests (multi-document YAML, as `kubectl kustomize` renders them)
// against the API schemas, strictly:
//
//   node validate_manifests.mjs FILE...      exit 0: all valid; 1: errors, one per line
//
// - Built-in kinds against kubernetes-models, ScaledObject against @kubernetes-models/keda,
//   ServiceMonitor / PrometheusRule against @kubernetes-models/prometheus-operator, HTTPRoute
//   against @kubernetes-models/gateway-api, DestinationRule against @kubernetes-models/istio. Their
//   validators accept fields the schema does not know (as the API server's lenient decoding
//   does), so every object is validated through a Proxy that records which properties the
//   validator looked at: the validator reads every property its schema declares (and every key
//   of a map-typed object), so a key it never read is one the schema does not have, and is
//   reported (`spec.sessionAfinity: unknown field`). An object whose keys the validator read
//   none of is free-form in the schema (preserve-unknown-fields) and is not walked further.
// - KServe (no typed models on npm): the fields of ClusterServingRuntime and InferenceService
//   that ll3 uses are checked by hand below (allowed keys and required fields from KServe's
//   CRDs); their containers and pod fields go through the strict core/v1 validators.
// - Then references between the objects: selectors that select the pods, named ports, mounts
//   of declared volumes, scale targets and ServiceMonitor selectors that name an object.
// Any apiVersion/kind without a schema is an error: nothing passes unchecked.
import fs from "node:fs";
import YAML from "yaml";

const errors = [];
const fail = (where, msg) => errors.push(`${where}: ${msg}`);
const join = (path, key) => (path && key ? `${path}.${key}` : path || key);

// ---- strict validation through a recording Proxy

// `prefix`: the path of `data` within its object, for the messages.
function strictValidate(validateFn, data, where, prefix = "") {
  const seen = new Map(); // original object -> Set of keys the validator read
  const proxies = new WeakMap();
  const wrap = (v) => {
    if (v === null || typeof v !== "object") return v;
    if (proxies.has(v)) return proxies.get(v);
    const keys = new Set();
    seen.set(v, keys);
    const note = (k) => typeof k === "string" && keys.add(k);
    const p = new Proxy(v, {
      get(t, k, r) { note(k); return wrap(Reflect.get(t, k, r)); },
      has(t, k) { note(k); return Reflect.has(t, k); },
      getOwnPropertyDescriptor(t, k) { note(k); return Reflect.getOwnPropertyDescriptor(t, k); },
    });
    proxies.set(v, p);
    return p;
  };
  const ok = validateFn(wrap(data));
  if (!ok) {
    for (const e of validateFn.errors || []) {
      const at = (e.instancePath || "").split("/").filter(Boolean).join(".");
      fail(where, `${join(prefix, at) || "(object)"}: ${e.message || e.keyword} ${JSON.stringify(e.params ?? {})}`);
    }
  }
  const walk = (v, path) => {
    if (v === null || typeof v !== "object") return;
    if (Array.isArray(v)) {
      v.forEach((x, i) => walk(x, `${path}[${i}]`));
      return;
    }
    const keys = seen.get(v);
    if (!keys || keys.size === 0) return; // not reached (a parent was unknown) or free-form
    for (const k of Object.keys(v)) {
      if (!keys.has(k)) fail(where, `${join(path, k)}: unknown field`);
      else walk(v[k], join(path, k));
    }
  };
  walk(data, prefix);
}

// The validator of a model class (kubernetes-models and its CRD packages set it with
// setValidateFunc on the prototype; runValidateFunc throws, so unwrap that).
async function modelValidator(modulePath, kind) {
  let mod;
  try {
    mod = await import(modulePath);
  } catch {
    return null;
  }
  const cls = mod[kind];
  if (!cls) return null;
  const fn = (data) => {
    try {
      cls.prototype.validate.call(data);
      fn.errors = null;
      return true;
    } catch (e) {
      fn.errors = e.errors || [{ instancePath: "", message: e.message }];
      return false;
    }
  };
  return fn;
}

async function schemaValidator(modulePath) {
  const { validate } = await import(modulePath);
  return validate;
}

function modulesFor(apiVersion, kind) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  if (group === "keda.sh") return `@kubernetes-models/keda/keda.sh/${version}/${kind}`;
  if (group === "monitoring.coreos.com") return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}/${kind}`;
  if (group === "networking.istio.io") return `@kubernetes-models/istio/networking.istio.io/${version}/${kind}`;
  if (group === "gateway.networking.k8s.io") return `@kubernetes-models/gateway-api/gateway.networking.k8s.io/${version}/${kind}`;
  if (group === "") return `kubernetes-models/${version}/${kind}`;
  return `kubernetes-models/${group}/${version}/${kind}`;
}

// ---- KServe, by hand: allowed keys and required fields of the parts ll3 uses

const coreSchema = (name) => schemaValidator(`kubernetes-models/_schemas/${name}`);
const metaSchema = () => schemaValidator("@kubernetes-models/apimachinery/_schemas/IoK8sApimachineryPkgApisMetaV1ObjectMeta");

// An object with a fixed key set: `keys` maps each allowed key to a checker (or null: allowed,
// value not checked further).
function checkObject(v, where, path, keys, required = []) {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return fail(where, `${path}: expected an object`);
  for (const r of required) if (!(r in v)) fail(where, `${join(path, r)}: required`);
  for (const [k, x] of Object.entries(v)) {
    if (!(k in keys)) fail(where, `${join(path, k)}: unknown field`);
    else if (keys[k]) keys[k](x, join(path, k));
  }
}

// An object that is a Kubernetes type plus KServe's own fields: the KServe fields are checked
// by `extra`, the rest strictly by the type's validator (with `fill` supplying what the type
// requires and KServe does not).
function checkExtending(v, where, path, k8sValidate, extra, fill = {}) {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return fail(where, `${path}: expected an object`);
  const rest = { ...fill };
  for (const [k, x] of Object.entries(v)) {
    if (k in extra) {
      if (extra[k]) extra[k](x, join(path, k));
    } else rest[k] = x;
  }
  strictValidate(k8sValidate, rest, where, path);
}

const isString = (where) => (v, p) => typeof v !== "string" && fail(where, `${p}: expected a string`);
const isBool = (where) => (v, p) => typeof v !== "boolean" && fail(where, `${p}: expected a boolean`);
const isInt = (where) => (v, p) => !Number.isInteger(v) && fail(where, `${p}: expected an integer`);
const arrayOf = (where, check) => (v, p) => (Array.isArray(v) ? v.forEach((x, i) => check(x, `${p}[${i}]`)) : fail(where, `${p}: expected a list`));

async function checkKServe(o, where) {
  const container = await coreSchema("IoK8sApiCoreV1Container");
  const podSpec = await coreSchema("IoK8sApiCoreV1PodSpec");
  const meta = await metaSchema();
  const top = (spec) => ({
    apiVersion: null,
    kind: null,
    metadata: (v, p) => strictValidate(meta, v, where, p),
    spec,
  });
  if (o.apiVersion === "serving.kserve.io/v1alpha1" && (o.kind === "ClusterServingRuntime" || o.kind === "ServingRuntime")) {
    const str = isString(where);
    const spec = (v, p) => {
      // The pod-level fields a serving runtime takes (KServe's CRD), checked as PodSpec fields.
      const podKeys = ["affinity", "containers", "hostIPC", "imagePullSecrets", "nodeSelector", "resourceClaims",
        "schedulerName", "tolerations", "volumes"];
      const extra = {
        supportedModelFormats: arrayOf(where, (m, q) => checkObject(m, where, q,
          { name: str, version: str, autoSelect: isBool(where), priority: isInt(where) }, ["name"])),
        protocolVersions: arrayOf(where, str), multiModel: isBool(where), disabled: isBool(where),
        grpcEndpoint: str, grpcDataEndpoint: str, httpDataEndpoint: str, replicas: isInt(where),
        storageHelper: null, builtInAdapter: null, workerSpec: null, labels: null, annotations: null,
      };
      for (const k of Object.keys(v)) if (!(k in extra) && !podKeys.includes(k)) fail(where, `${join(p, k)}: unknown field`);
      if (!Array.isArray(v.containers) || v.containers.length === 0) fail(where, `${join(p, "containers")}: required`);
      for (const [i, c] of (v.containers || []).entries()) strictValidate(container, c, where, `${join(p, "containers")}[${i}]`);
      const pod = Object.fromEntries(Object.entries(v).filter(([k]) => podKeys.includes(k) && k !== "containers"));
      strictValidate(podSpec, { ...pod, containers: [] }, where, p);
      checkObject(Object.fromEntries(Object.entries(v).filter(([k]) => k in extra)), where, p, extra);
    };
    checkObject(o, where, "", top(spec), ["spec"]);
    return;
  }
  if (o.apiVersion === "serving.kserve.io/v1beta1" && o.kind === "InferenceService") {
    const str = isString(where);
    const model = (v, p) => checkExtending(v, where, p, container, {
      modelFormat: (m, q) => checkObject(m, where, q, { name: str, version: str }, ["name"]),
      runtime: str, runtimeVersion: str, protocolVersion: str, storageUri: str, storage: null, confidential: null,
    }, { name: "kserve-container" });
    const predictor = (v, p) => checkExtending(v, where, p, podSpec, {
      model, minReplicas: isInt(where), maxReplicas: isInt(where), scaleTarget: isInt(where), scaleMetric: str,
      scaleMetricType: str, containerConcurrency: isInt(where), timeout: isInt(where), canaryTrafficPercent: isInt(where),
      labels: null, annotations: null, logger: null, batcher: null, deploymentStrategy: null, autoScaling: null,
      workerSpec: null, storageUris: null, storageContainerName: str,
    }, { containers: [] });
    const spec = (v, p) => checkObject(v, where, p, { predictor, transformer: null, explainer: null, canary: null }, ["predictor"]);
    checkObject(o, where, "", top(spec), ["spec"]);
    return;
  }
  fail(where, `no schema for ${o.apiVersion} ${o.kind}`);
}

// KEDA's trigger metadata is a string map in the schema; the prometheus scaler's keys (KEDA's
// documentation) are checked here.
function checkKedaTriggers(o, where) {
  const prometheus = ["serverAddress", "query", "queryParameters", "threshold", "activationThreshold", "namespace",
    "customHeaders", "ignoreNullValues", "unsafeSsl", "timeout", "authModes"];
  for (const [i, t] of (o.spec?.triggers ?? []).entries()) {
    if (t.type !== "prometheus") continue;
    const md = t.metadata ?? {};
    for (const k of Object.keys(md)) if (!prometheus.includes(k)) fail(where, `spec.triggers[${i}].metadata.${k}: unknown prometheus scaler parameter`);
    for (const k of ["serverAddress", "query", "threshold"]) if (!(k in md)) fail(where, `spec.triggers[${i}].metadata.${k}: required`);
    for (const [k, v] of Object.entries(md)) if (typeof v !== "string") fail(where, `spec.triggers[${i}].metadata.${k}: must be a string`);
  }
}

// ---- references between objects

const matches = (selector, labels) =>
  selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels?.[k] === v);

function checkReferences(objs) {
  const id = (o) => `${o.kind} ${o.metadata?.namespace ?? ""}/${o.metadata?.name}`;
  const workloads = objs.filter((o) => o.kind === "Deployment");
  const podLabels = (d) => d.spec?.template?.metadata?.labels ?? {};
  for (const d of workloads) {
    const where = id(d);
    if (!matches(d.spec?.selector?.matchLabels, podLabels(d))) fail(where, "spec.selector does not select the pod template's labels");
    const pod = d.spec?.template?.spec ?? {};
    const volumes = new Set((pod.volumes ?? []).map((v) => v.name));
    for (const c of [...(pod.containers ?? []), ...(pod.initContainers ?? [])]) {
      for (const m of c.volumeMounts ?? []) if (!volumes.has(m.name)) fail(where, `container ${c.name} mounts undeclared volume ${m.name}`);
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.resourceFieldRef;
        if (ref?.containerName && !pod.containers.some((x) => x.name === ref.containerName)) {
          fail(where, `env ${e.name} refers to container ${ref.containerName}, which does not exist`);
        }
      }
      for (const probe of ["startupProbe", "readinessProbe", "livenessProbe"]) {
        const port = c[probe]?.httpGet?.port ?? c[probe]?.tcpSocket?.port;
        if (typeof port === "string" && !(c.ports ?? []).some((p) => p.name === port)) fail(where, `${probe} uses port ${port}, which the container does not name`);
      }
    }
  }
  const inNs = (o, ns) => (o.metadata?.namespace ?? "") === (ns ?? "");
  for (const s of objs.filter((o) => o.kind === "Service")) {
    const targets = workloads.filter((d) => inNs(d, s.metadata?.namespace) && matches(s.spec?.selector, podLabels(d)));
    if (targets.length === 0) fail(id(s), "its selector selects no Deployment's pods");
    for (const p of s.spec?.ports ?? []) {
      if (typeof p.targetPort !== "string") continue;
      const named = targets.some((d) => d.spec.template.spec.containers.some((c) => (c.ports ?? []).some((cp) => cp.name === p.targetPort)));
      if (!named) fail(id(s), `targetPort ${p.targetPort} is no container port name`);
    }
  }
  for (const b of objs.filter((o) => o.kind === "PodDisruptionBudget")) {
    if (!workloads.some((d) => inNs(d, b.metadata?.namespace) && matches(b.spec?.selector?.matchLabels, podLabels(d)))) fail(id(b), "its selector selects no Deployment's pods");
  }
  for (const a of objs.filter((o) => o.kind === "HorizontalPodAutoscaler" || o.kind === "ScaledObject")) {
    const ref = a.spec?.scaleTargetRef;
    const kind = ref?.kind ?? "Deployment";
    if (!objs.some((o) => o.kind === kind && o.metadata?.name === ref?.name && inNs(o, a.metadata?.namespace))) fail(id(a), `scaleTargetRef ${kind} ${ref?.name} is not among the objects`);
  }
  for (const m of objs.filter((o) => o.kind === "ServiceMonitor")) {
    const svcs = objs.filter((o) => o.kind === "Service" && inNs(o, m.metadata?.namespace) && matches(m.spec?.selector?.matchLabels, o.metadata?.labels));
    if (svcs.length !== 1) fail(id(m), `its selector selects ${svcs.length} Services (one wanted: each pod scraped once)`);
    for (const e of m.spec?.endpoints ?? []) {
      if (e.port && !svcs.some((s) => s.spec.ports.some((p) => p.name === e.port))) fail(id(m), `endpoint port ${e.port} is no port of the selected Service`);
    }
  }
  for (const s of objs.filter((o) => o.kind === "InferenceService")) {
    const m = s.spec?.predictor?.model;
    if (!m?.runtime) continue;
    const rt = objs.find((o) => (o.kind === "ClusterServingRuntime" || (o.kind === "ServingRuntime" && inNs(o, s.metadata?.namespace))) && o.metadata?.name === m.runtime);
    if (!rt) fail(id(s), `runtime ${m.runtime} is not among the objects`);
    else if (!(rt.spec?.supportedModelFormats ?? []).some((f) => f.name === m.modelFormat?.name)) fail(id(s), `runtime ${m.runtime} does not support model format ${m.modelFormat?.name}`);
  }
  const names = new Set();
  for (const o of objs) {
    const key = id(o);
    if (names.has(key)) fail(key, "defined twice");
    names.add(key);
  }
}

// ---- main

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: node validate_manifests.mjs FILE...");
  process.exit(2);
}
const objs = [];
for (const f of files) {
  for (const doc of YAML.parseAllDocuments(fs.readFileSync(f, "utf8"))) {
    if (doc.errors.length) {
      fail(f, `YAML: ${doc.errors[0].message}`);
      continue;
    }
    const o = doc.toJS();
    if (o !== null && o !== undefined) objs.push(o);
  }
}
if (objs.length === 0) fail(files.join(" "), "no objects");
for (const o of objs) {
  const where = `${o?.kind} ${o?.metadata?.name}`;
  if (!o?.apiVersion || !o?.kind) {
    fail(where, "no apiVersion or kind");
    continue;
  }
  if (o.apiVersion.startsWith("serving.kserve.io/")) {
    await checkKServe(o, where);
    continue;
  }
  const v = await modelValidator(modulesFor(o.apiVersion, o.kind), o.kind);
  if (!v) {
    fail(where, `no schema for ${o.apiVersion} ${o.kind}`);
    continue;
  }
  strictValidate(v, o, where);
  if (o.kind === "ScaledObject") checkKedaTriggers(o, where);
}
checkReferences(objs);
if (errors.length) {
  for (const e of errors) console.log(`FAIL ${e}`);
  process.exit(1);
}
console.log(`ok   ${objs.length} objects: ${objs.map((o) => o.kind).join(", ")}`);
