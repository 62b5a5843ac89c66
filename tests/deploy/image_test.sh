#!/usr/bin/env bash
# The container image: scripts/image.sh builds it here (Debian base images from mmdebstrap the
# first time, then cached; the compiler cache makes a rebuild after a source change compile only
# what changed), then
#  - a container of it, with the tiny shared model mounted at /models/model.gguf, answers
#    /health, /v1/models and a completion, runs as uid 10001, its HEALTHCHECK passes, and it
#    exits 0 on `podman stop` (SIGTERM);
#  - `podman kube play` of the rendered base (deploy/kubernetes/base, with this image, one CPU,
#    1 GiB and the model in a podman volume for the ll3-models claim) runs a pod that answers a
#    completion, as a non-root user on a read-only root, and exits 0 when the pod stops.
# Prints the time of each step. Everything it starts is removed on exit, failed or not; the
# image (localhost/ll3:ctest) stays as the next run's cache.
# shellcheck source=tests/deploy/lib.sh
source "$(dirname "$0")/lib.sh"
need podman "Debian: apt-get install podman runc catatonit mmdebstrap (scripts/setup.sh)"
need mmdebstrap "Debian: apt-get install mmdebstrap"
need curl "apt-get install curl"
need timeout "coreutils"
need_kubectl
need_js
need_model
# Every podman call, including the cleanups, within a deadline (a wedged podman fails the test
# instead of holding it to CTest's timeout).
PODMAN="$(command -v podman)"
podman() { timeout 600 "$PODMAN" "$@"; }

tag=localhost/ll3:ctest
run="ll3-ctest-$$"
t0=$SECONDS
timeout 2400 "$REPO/scripts/image.sh" --tag "$tag" --prune >"$TMP/build.log" 2>&1 ||
  { tail -40 "$TMP/build.log"; die "scripts/image.sh failed (above: the end of its log)"; }
grep "^image.sh:" "$TMP/build.log" | sed "s/^/[$TEST_NAME] /"
build_s=$((SECONDS - t0))
size_mb="$(podman image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.0f", $1 / 1e6}')"
[ "$(podman image inspect --format '{{.Config.User}}' "$tag")" = "10001:10001" ] || die "the image does not run as 10001:10001"
podman image inspect --format '{{json .Config.ExposedPorts}}' "$tag" | grep -q '8080/tcp' || die "the image exposes no 8080/tcp"
podman image inspect --format '{{json .Config.Healthcheck}}' "$tag" | grep -q '/health' || die "the image has no HEALTHCHECK on /health"

# ---- podman run
on_exit "podman rm -f -t 0 $run"
t1=$(date +%s%N)
podman run -d --name "$run" -p 127.0.0.1::8080 -v "$MODEL:/models/model.gguf:ro" "$tag" -t 1 -c 2048 >/dev/null 2>"$TMP/run.err" ||
  die "podman cannot run the image: $(cat "$TMP/run.err")"
# (`podman port` of podman 4.3 prints nothing for a port published on 127.0.0.1.)
port="$(podman inspect --format '{{(index (index .NetworkSettings.Ports "8080/tcp") 0).HostPort}}' "$run")"
[ -n "$port" ] || die "no published port: $(podman inspect --format '{{json .NetworkSettings.Ports}}' "$run")"
url="http://127.0.0.1:$port"
wait_200 "$url/health" 60 || die "the container did not become ready: $(podman logs "$run" 2>&1 | tail -5)"
ready_ms=$((($(date +%s%N) - t1) / 1000000))
curl -sf "$url/health" | grep -q '"status":"ok"' || die "/health: $(curl -s "$url/health")"
curl -sf "$url/v1/models" | grep -q '"id":"tiny-llama3"' || die "/v1/models: $(curl -s "$url/v1/models")"
curl -sf -m 30 "$url/v1/completions" -d '{"prompt": "Hello", "max_tokens": 4}' | grep -q '"finish_reason":"length"' ||
  die "completion: $(curl -s -m 30 "$url/v1/completions" -d '{"prompt": "Hello", "max_tokens": 4}')"
[ "$(podman exec "$run" id -u)" = 10001 ] || die "the server does not run as uid 10001"
podman healthcheck run "$run" >/dev/null 2>&1 || die "the image's HEALTHCHECK fails on a ready server"
podman stop -t 20 "$run" >/dev/null 2>&1
rc="$(podman inspect --format '{{.State.ExitCode}}' "$run")"
[ "$rc" = 0 ] || die "exit status $rc after podman stop: $(podman logs "$run" 2>&1 | tail -5)"
podman logs "$run" 2>&1 | grep -q "ll3 serve: stopped" || die "no clean shutdown in the log: $(podman logs "$run" 2>&1 | tail -5)"
log "podman run: ready (/health 200) ${ready_ms} ms after podman run; /v1/models, a completion, the HEALTHCHECK, exit 0 on stop"

# ---- podman kube play of the rendered base
kp="$TMP/kube"
mkdir -p "$kp/model"
rel="$(realpath --relative-to="$kp" "$REPO/deploy/kubernetes/base")"
vol="ll3-ctest-models-$$"
# Podman 4.3 passes $(LL3_THREADS) in args through unexpanded (Kubernetes expands it), so the
# thread count is written in; the Namespace object is not a kind kube play takes.
cat >"$kp/kustomization.yaml" <<EOF
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
namePrefix: ctest-
resources:
  - $rel
images:
  - name: localhost/ll3
    newTag: ctest
patches:
  - target: {kind: Deployment, name: ll3}
    patch: |-
      - op: replace
        path: /spec/template/spec/containers/0/resources
        value: {requests: {cpu: "1", memory: 1Gi}, limits: {cpu: "1", memory: 1Gi}}
      - op: test
        path: /spec/template/spec/containers/0/args/3
        value: \$(LL3_THREADS)
      - op: replace
        path: /spec/template/spec/containers/0/args/3
        value: "1"
      - op: replace
        path: /spec/template/spec/volumes/0/persistentVolumeClaim/claimName
        value: $vol
  - target: {kind: Namespace}
    patch: |-
      \$patch: delete
      apiVersion: v1
      kind: Namespace
      metadata: {name: ll3}
EOF
kubectl kustomize "$kp" >"$kp/rendered.yaml" || die "the kube play kustomization does not render"
cp "$MODEL" "$kp/model/model.gguf"
tar -C "$kp/model" -cf "$kp/model.tar" model.gguf
on_exit "podman volume rm -f $vol"
podman volume create "$vol" >/dev/null && podman volume import "$vol" "$kp/model.tar" || die "could not make the model volume"
rm -rf "$kp/model" "$kp/model.tar"
on_exit "podman kube down $kp/rendered.yaml"
t2=$(date +%s%N)
podman kube play "$kp/rendered.yaml" >"$TMP/play.log" 2>&1 || die "podman kube play failed: $(cat "$TMP/play.log")"
pod="ctest-ll3-pod-0"
ctr="$pod-ll3"
infra="$(podman pod inspect "$pod" --format '{{.InfraContainerID}}')" || die "no pod $pod: $(podman pod ps)"
ip="$(podman inspect "$infra" --format '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}')"
[ -n "$ip" ] || die "the pod has no IP address"
wait_200 "http://$ip:8080/health" 60 || die "the pod did not become ready: $(podman logs "$ctr" 2>&1 | tail -5)"
play_ms=$((($(date +%s%N) - t2) / 1000000))
curl -sf -m 30 "http://$ip:8080/v1/completions" -d '{"prompt": "Hello", "max_tokens": 4}' | grep -q '"finish_reason":"length"' ||
  die "completion in the pod failed"
[ "$(podman inspect "$ctr" --format '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}')" = "true 10001:10001" ] ||
  die "the pod's container is not read-only root as 10001: $(podman inspect "$ctr" --format '{{.HostConfig.ReadonlyRootfs}} {{.Config.User}}')"
podman pod stop -t 30 "$pod" >/dev/null 2>&1
rc="$(podman inspect --format '{{.State.ExitCode}}' "$ctr")"
[ "$rc" = 0 ] || die "the pod's ll3 exited $rc: $(podman logs "$ctr" 2>&1 | tail -5)"
log "podman kube play of base: ready ${play_ms} ms after kube play; a completion; read-only root as 10001; exit 0 on stop"
log "ok: image $tag ${size_mb} MB, built in ${build_s} s; whole test $((SECONDS - t0)) s"
