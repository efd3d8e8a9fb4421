#!/usr/bin/env bash
# Packs what scripts/device_check.sh runs into .device/gen3d-device.tar.xz (git-ignored): the gen3d
# executable, the cuda test binary, and the shared libraries they load that a bare CUDA machine
# lacks (its driver, CUDA runtime and cuBLAS are used as found there). xz keeps it inside a
# device machine's transfer limit.
#   scripts/device_pack.sh [build-dir]
# TESTS=0 leaves the cuda test binary out (2.6 MB packed) where a call runs benchmarks only.
# ASSETS="file ..." copies files for the texture benchmark into .device/assets/ beside the pack
# (e.g. ../shared/assets/hunyuan3d-2/1.glb and demo.png: carried to the device for a run, never
# added to the tree, whose licence they do not share).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
cp "$build/gen3d" "$stage/bin/"
[ "${TESTS:-1}" = 1 ] && cp "$build/tests/gen3d_cuda_tests" "$stage/bin/"
strip "$stage"/bin/*
for b in "$stage"/bin/*; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libcuda|libcublas|libcublasLt|libcudart)\.so' |
  grep -v -E '/ld-linux' | xargs -r -I{} cp -L {} "$stage/lib/"
mkdir -p .device
rm -rf .device/assets
if [ -n "${ASSETS:-}" ]; then
  mkdir -p .device/assets
  cp $ASSETS .device/assets/
fi
tar -cf - -C "$stage" bin lib | xz -9e -T2 > .device/gen3d-device.tar.xz
ls -l .device/gen3d-device.tar.xz
