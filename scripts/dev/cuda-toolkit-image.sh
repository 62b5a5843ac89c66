#!/usr/bin/env bash
# Makes a CUDA toolkit image from this machine's CUDA (CUDA_HOME, default /usr/local/cuda) for
# Containerfile.cuda's build stage where NVIDIA's devel image cannot be pulled (no registry):
# only what building ll3 uses (nvcc and its tools, nvvm, the headers, the static runtime and
# the driver stub), at /usr/local/cuda-X.Y as in NVIDIA's images. Once: kept in podman's storage.
#
#   scripts/dev/cuda-toolkit-image.sh           # makes localhost/ll3-cuda-toolkit:X.Y if absent
#   scripts/dev/cuda-toolkit-image.sh --name    # prints that name
set -euo pipefail
cuda="$(readlink -f "${CUDA_HOME:-/usr/local/cuda}")"
[ -x "$cuda/bin/nvcc" ] || { echo "cuda-toolkit-image.sh: no nvcc in $cuda (set CUDA_HOME)" >&2; exit 1; }
version="$("$cuda/bin/nvcc" --version | sed -n 's/.*release \([0-9]*\.[0-9]*\),.*/\1/p')"
name="localhost/ll3-cuda-toolkit:$version"
if [ "${1:-}" = --name ]; then echo "$name"; exit 0; fi
if podman image exists "$name"; then
  echo "cuda-toolkit-image.sh: $name is present" >&2
  exit 0
fi
tmp="$(mktemp -d /var/tmp/ll3-cuda.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
root="$tmp/root/usr/local/cuda-$version"
mkdir -p "$root/lib"
cp -a "$cuda/bin" "$cuda/include" "$cuda/nvvm" "$root/"
[ -d "$cuda/targets" ] && cp -a "$cuda/targets" "$root/"
[ -e "$cuda/lib64" ] && [ ! -L "$cuda/lib64" ] && { echo "cuda-toolkit-image.sh: expected lib64 -> lib in $cuda" >&2; exit 1; }
ln -s lib "$root/lib64"
# The static runtime and device runtime, the driver stub to link against, CMake's files, and the
# shared runtime (FindCUDAToolkit reads its version); no cuBLAS, cuDNN, NCCL... (gigabytes).
for f in libcudart_static.a libcudadevrt.a libculibos.a stubs cmake; do
  [ -e "$cuda/lib/$f" ] && cp -a "$cuda/lib/$f" "$root/lib/"
done
cp -a "$cuda"/lib/libcudart.so* "$root/lib/"
echo "cuda-toolkit-image.sh: making $name from $cuda ($(du -sh "$tmp/root" | cut -f1))" >&2
tar -C "$tmp/root" -cf "$tmp/toolkit.tar" usr
podman import --quiet "$tmp/toolkit.tar" "$name" >/dev/null
echo "cuda-toolkit-image.sh: made $name" >&2
