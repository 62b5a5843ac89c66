#!/usr/bin/env bash
# deploy/kubernetes: the base, every overlay, the KServe and Gateway API / Istio objects and all
# components together render with `kubectl kustomize`, and every rendered object validates
# strictly against its schema (tests/deploy/js/validate_manifests.mjs: unknown fields fail,
# references between the objects must resolve). Then the checker is shown to reject what it
# must: a typo'd field at several depths and kinds, a wrong type, a port or target that is not
# there.
# shellcheck source=tests/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
need_kubectl
need_js

validate() { node "$JS/validate_manifests.mjs" "$@"; }

# Every overlay, and base, kserve and gateway.
overlays=(base kserve gateway)
for d in "$REPO"/deploy/kubernetes/overlays/*/; do overlays+=("overlays/$(basename "$d")"); done
((${#overlays[@]} >= 9)) || die "expected base, kserve, gateway and six overlays, found: ${overlays[*]}"
for o in "${overlays[@]}"; do
  out="$TMP/$(echo "$o" | tr / -).yaml"
  render "$o" "$out"
  res="$(validate "$out")" || die "$o does not validate: $res"
  log "$o: $res"
done

# All components at once (keda, not hpa: both would own the replica count), as
# docs/DEPLOYMENT.md's "Combining" example does.
mkdir -p "$TMP/combined"
rel="$(realpath --relative-to="$TMP/combined" "$REPO/deploy/kubernetes")"
cat >"$TMP/combined/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namespace: ll3
resources:
  - $rel/base
components:
  - $rel/components/gpu
  - $rel/components/keda
  - $rel/components/sessions
  - $rel/components/monitoring
EOF
timeout 60 kubectl kustomize "$TMP/combined" >"$TMP/combined.yaml" || die "the combined kustomization does not render"
res="$(validate "$TMP/combined.yaml")" || die "combined: $res"
log "gpu+keda+sessions+monitoring: $res"

# What the overlays must say, beyond the schema.
grep -q "sessionAffinity: ClientIP" "$TMP/overlays-sessions.yaml" || die "sessions: no ClientIP session affinity"
grep -q -- "--session-dir" "$TMP/overlays-sessions.yaml" || die "sessions: no --session-dir"
grep -q "ReadWriteMany" "$TMP/overlays-sessions.yaml" || die "sessions: no ReadWriteMany volume"
grep -q "type: Recreate" "$TMP/overlays-gpu.yaml" || die "gpu: not Recreate"
grep -q -- "--lora-dir" "$TMP/overlays-lora.yaml" && grep -q "claimName: ll3-adapters" "$TMP/overlays-lora.yaml" ||
  die "lora: no --lora-dir over the ll3-adapters volume"
grep -q "nvidia.com/gpu: \"1\"" "$TMP/overlays-gpu.yaml" || die "gpu: no nvidia.com/gpu"
grep -q "runtimeClassName: nvidia" "$TMP/overlays-gpu.yaml" || die "gpu: no runtimeClassName"
for o in keda hpa; do
  node -e '
    const YAML = require(process.argv[1] + "/node_modules/yaml");
    const d = YAML.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((x) => x.toJS()).find((o) => o.kind === "Deployment");
    if ("replicas" in d.spec) { console.error("the Deployment keeps spec.replicas, which the autoscaler owns"); process.exit(1); }' \
    "$JS" "$TMP/overlays-$o.yaml" || die "$o: Deployment still sets replicas"
done
grep -q "ll3_requests_waiting" "$TMP/overlays-keda.yaml" || die "keda: not on ll3_requests_waiting"
grep -q "ll3_requests_waiting" "$TMP/overlays-hpa.yaml" || die "hpa: not on ll3_requests_waiting"
# terminationGracePeriodSeconds covers preStop + --shutdown-grace.
node -e '
  const YAML = require(process.argv[1] + "/node_modules/yaml");
  const d = YAML.parseAllDocuments(require("fs").readFileSync(process.argv[2], "utf8")).map((x) => x.toJS()).find((o) => o.kind === "Deployment");
  const pod = d.spec.template.spec, c = pod.containers[0];
  const grace = Number(c.args[c.args.indexOf("--shutdown-grace") + 1]);
  const pre = Number(c.lifecycle.preStop.exec.command[1]);
  if (!(pod.terminationGracePeriodSeconds > grace + pre)) { console.error(`terminationGracePeriodSeconds ${pod.terminationGracePeriodSeconds} <= preStop ${pre} + --shutdown-grace ${grace}`); process.exit(1); }
  if (!c.startupProbe || !c.readinessProbe || !c.livenessProbe) { console.error("a probe is missing"); process.exit(1); }
  if (!pod.securityContext.runAsNonRoot || !c.securityContext.readOnlyRootFilesystem) { console.error("not non-root / read-only root"); process.exit(1); }' \
  "$JS" "$TMP/base.yaml" || die "base: lifecycle"

# The checker rejects mistakes. Each line: the rendered file, a sed edit, and what the checker
# must say.
negatives=(
  "overlays-sessions|s/^  sessionAffinity: ClientIP/  sessionAfinity: ClientIP/|spec.sessionAfinity: unknown field"
  "base|s/readinessProbe:/readinesProbe:/|containers[0].readinesProbe: unknown field"
  "base|s/failureThreshold: 120/failureTreshold: 120/|startupProbe.failureTreshold: unknown field"
  "base|s/runAsNonRoot: true/runAsNonRoot: \"yes\"/|runAsNonRoot: must be boolean"
  "base|s/^  maxUnavailable: 1/  maxUnavailabe: 1/|spec.maxUnavailabe: unknown field"
  "overlays-keda|s/^  fallback:/  fallbak:/|spec.fallbak: unknown field"
  "overlays-keda|s/ignoreNullValues:/ignoreNullValue:/|metadata.ignoreNullValue: unknown prometheus scaler parameter"
  "overlays-hpa|s/^  behavior:/  behaviour:/|spec.behaviour: unknown field"
  "overlays-monitoring|s/- interval: 15s/- intervall: 15s/|endpoints[0].intervall: unknown field"
  "overlays-monitoring|s/^    - alert: LL3QueueBacklog/    - alrt: LL3QueueBacklog/|rules[0].alrt: unknown field"
  "kserve|s/storageUri:/storageURI:/|predictor.model.storageURI: unknown field"
  "kserve|s/autoSelect: true/autoselect: true/|supportedModelFormats[0].autoselect: unknown field"
  "gateway|s/httpHeaderName:/httpHeader:/|consistentHash.httpHeader: unknown field"
  "gateway|s/    timeouts:/    timeout:/|rules[0].timeout: unknown field"
  "base|s/targetPort: http/targetPort: htp/|targetPort htp is no container port name"
  "overlays-keda|s/^    name: ll3$/    name: ll4/|scaleTargetRef Deployment ll4 is not among the objects"
)
for n in "${negatives[@]}"; do
  IFS='|' read -r file edit want <<<"$n"
  sed "$edit" "$TMP/$file.yaml" >"$TMP/bad.yaml"
  cmp -s "$TMP/$file.yaml" "$TMP/bad.yaml" && die "negative case '$edit' changed nothing in $file"
  if out="$(validate "$TMP/bad.yaml")"; then die "the checker accepted $file with '$edit'"; fi
  grep -qF -- "$want" <<<"$out" || die "for '$edit' the checker said '$out', not '$want'"
  log "rejected ($edit): $(grep -F -- "$want" <<<"$out" | head -1)"
done
log "ok"
