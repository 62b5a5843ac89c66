#!/usr/bin/env bash
# Builds the ll3 container image with podman where no container registry can be reached (this
# repository's CI machine): the Debian base images the Containerfile names are made from
# mmdebstrap rootfs tarballs, once (kept in podman's storage; later runs reuse them), then
# `podman build` runs the Containerfile unchanged. With a registry, plain `podman build` or
# `docker build` needs none of this (docs/DEPLOYMENT.md).
#
#   scripts/image.sh                       # -> localhost/ll3:latest (Containerfile)
#   scripts/image.sh --tag ll3:test        # another name
#   scripts/image.sh --cuda                # -> localhost/ll3-cuda:latest (Containerfile.cuda)
#   scripts/image.sh --prune               # then remove earlier builds' leftover layers
#   scripts/image.sh -- --no-cache         # anything after -- goes to podman build
#
# --prune removes the untagged images that earlier ll3 builds left (each source change leaves
# a build stage of about 1 GB); the Debian images and the package layer stay, and the compiler
# cache (a build cache mount) makes the next build compile only what changed.
# It also makes podman able to run containers here if it cannot yet: on hosts where crun fails
# (hybrid cgroups) or where podman may not raise RLIMIT_NOFILE, a containers.conf drop-in sets
# runtime = "runc" and default ulimits. Prints the image's size and the build time last.
set -euo pipefail
cd "$(dirname "$0")/.."

cuda=0
prune=0
tag=""
extra=()
while (($#)); do
  case "$1" in
    --cuda) cuda=1 ;;
    --prune) prune=1 ;;
    --tag) tag="$2"; shift ;;
    --) shift; extra=("$@"); break ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if ((cuda)); then
  containerfile=Containerfile.cuda
  tag="${tag:-localhost/ll3-cuda:latest}"
else
  containerfile=Containerfile
  tag="${tag:-localhost/ll3:latest}"
fi

say() { echo "image.sh: $*" >&2; }
die() { say "$*"; exit 1; }
command -v podman >/dev/null || die "podman is not installed (scripts/setup.sh --tests installs it: apt-get install podman runc catatonit mmdebstrap)"

# --- the Debian base images, under the names the Containerfiles use
debian_image() { echo "docker.io/library/debian:$1"; }

# Debian's slim images are minbase without documentation, manuals and translations.
slim_opts=(--dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright'
           --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/info/*'
           --dpkgopt='path-exclude=/usr/share/groff/*' --dpkgopt='path-exclude=/usr/share/lintian/*'
           --dpkgopt='path-exclude=/usr/share/locale/*')

make_base() {  # TAG [mmdebstrap options...]
  local name
  name="$(debian_image "$1")"
  shift
  if podman image exists "$name"; then
    say "$name is present"
    return
  fi
  command -v mmdebstrap >/dev/null || die "$name is absent and mmdebstrap is not installed (apt-get install mmdebstrap)"
  local tmp
  tmp="$(mktemp -d /var/tmp/ll3-rootfs.XXXXXX)"
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  say "making $name: mmdebstrap --variant=minbase bookworm (about 2 minutes)"
  local t0=$SECONDS
  mmdebstrap --quiet --variant=minbase "$@" bookworm "$tmp/rootfs.tar" http://deb.debian.org/debian
  podman import --quiet --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    "$tmp/rootfs.tar" "$name" >/dev/null
  rm -rf "$tmp"
  trap - EXIT
  say "made $name in $((SECONDS - t0)) s"
}

make_base bookworm
make_base bookworm-slim "${slim_opts[@]}"

# --- can podman run a container here? If not, the settings that make it work, then again.
can_run() { podman run --rm --network none "$(debian_image bookworm-slim)" true >/dev/null 2>"$1"; }
err="$(mktemp)"
if ! can_run "$err"; then
  if [ "$(id -u)" = 0 ]; then conf_dir=/etc/containers/containers.conf.d
  else conf_dir="${XDG_CONFIG_HOME:-$HOME/.config}/containers/containers.conf.d"; fi
  say "podman cannot run a container ($(tail -1 "$err")); writing $conf_dir/50-ll3.conf"
  mkdir -p "$conf_dir"
  cat >"$conf_dir/50-ll3.conf" <<'EOF'
# Written by ll3's scripts/image.sh: crun fails on hybrid cgroups, and without default ulimits
# podman cannot raise RLIMIT_NOFILE in a container here.
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
EOF
  can_run "$err" || { cat "$err" >&2; rm -f "$err"; die "podman still cannot run a container; see the error above"; }
fi
rm -f "$err"

# --- the CUDA build stage takes the toolkit from an image (CUDA_DEVEL_IMAGE, nvidia/cuda by
# default). Without a registry, one is made from this machine's toolkit when it has one.
build_args=()
if ((cuda)); then
  cuda_image="${CUDA_DEVEL_IMAGE:-}"
  if [ -z "$cuda_image" ]; then
    default_image="$(sed -n 's/^ARG CUDA_DEVEL_IMAGE=//p' Containerfile.cuda)"
    if podman image exists "$default_image"; then
      cuda_image="$default_image"
    else
      scripts/dev/cuda-toolkit-image.sh
      cuda_image="$(scripts/dev/cuda-toolkit-image.sh --name)"
    fi
  fi
  build_args+=(--build-arg "CUDA_DEVEL_IMAGE=$cuda_image")
fi

t0=$SECONDS
# The build stage's packages under a name of their own, so that --prune keeps them.
say "podman build -f $containerfile --target build-deps -t ${tag%%:*}-build-deps:latest"
podman build --format docker --pull=never -f "$containerfile" --target build-deps -t "${tag%%:*}-build-deps:latest" \
  "${build_args[@]}" "${extra[@]}" . >/dev/null
say "podman build -f $containerfile -t $tag"
podman build --format docker --pull=never -f "$containerfile" -t "$tag" "${build_args[@]}" "${extra[@]}" .
say "built $tag in $((SECONDS - t0)) s; $(podman image inspect --format '{{.Size}}' "$tag" | awk '{printf "%.1f MB", $1 / 1e6}')"
if ((prune)); then
  # Untagged images of ll3's stages (LABEL ll3.stage), repeatedly: removing a leaf leaves its
  # parent untagged and childless.
  for _ in 1 2 3 4 5 6 7 8 9 10 11 12; do
    removed="$(podman image prune -f --filter label=ll3.stage 2>/dev/null | wc -l)"
    ((removed > 0)) || break
  done
fi
