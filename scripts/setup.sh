#!/usr/bin/env bash
# Installs what gen3d builds and tests with, from Debian's packages, skipping what is present.
# Runs as root, or through sudo otherwise. Never prompts.
#
#   bash scripts/setup.sh          # what the build and the default test run need (CI)
#   bash scripts/setup.sh --slow   # and the tools only the long tests (`ctest -L slow`) use
#
# ocl-icd-opencl-dev: Debian's oneDNN CMake package requires OpenCL (it only recommends it, and
# recommends are not installed here).
# libjs-three: three.js, compiled into `gen3d serve`'s web studio for its 3D viewer.
# chromium, chromium-driver: the headless browser the studio's test drives (it skips without one).
# With --slow, blender and python3-numpy: Debian's Blender, for the Blender add-on test (it skips
# without one), and NumPy, which Blender's glTF add-on imports though the package does not depend
# on it. On top of the rest Blender is 52 packages, some 80 MB to download and 390 MB installed:
# the default run (CI's) leaves it out.
set -euo pipefail

slow=0
for arg in "$@"; do
  case "$arg" in
    --slow) slow=1 ;;
    *) echo "setup: unknown argument $arg (expected --slow)" >&2; exit 2 ;;
  esac
done

packages=(
  build-essential cmake pkg-config
  libtbb-dev libopencv-dev libassimp-dev libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev
  libopenblas-dev libmeshoptimizer-dev libeigen3-dev libminizip-dev libxxhash-dev libdnnl-dev
  ocl-icd-opencl-dev libpng-dev libturbojpeg0-dev libwebp-dev libtinygltf-dev libdraco-dev
  libyaml-cpp-dev libcpp-httplib-dev libjs-three
  libgtest-dev libgmock-dev libbenchmark-dev chromium chromium-driver
)
if [ "$slow" -eq 1 ]; then packages+=(blender python3-numpy); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

# Node.js may come from elsewhere (e.g. NodeSource, whose nodejs bundles npm and conflicts with
# Debian's npm): only ask apt for it when there is no npm at all.
if ! command -v npm >/dev/null 2>&1; then missing+=(nodejs npm); fi

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The Khronos glTF validator (an npm library) checks every GLB the tests write. It lives in
# build/node, beside the build it serves.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/build/node/node_modules/gltf-validator" ]; then
  echo "setup: installing gltf-validator (npm) into build/node"
  mkdir -p "$root/build/node"
  npm install --silent --no-audit --no-fund --prefix "$root/build/node" gltf-validator >/dev/null
fi
