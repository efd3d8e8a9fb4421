#!/usr/bin/env bash
# Builds oneTBB with ThreadSanitizer from Debian's own source package, once, for the `tsan` preset.
#
#   bash scripts/build_tsan_tbb.sh [PREFIX]      (default: build/tsan/_tbb)
#
# Debian's libtbb is not instrumented, so TSan cannot see the ordering TBB gives between spawning,
# running and waiting for a task. This fetches the source of the installed libtbb version
# (`apt-get source onetbb`, after adding a deb-src entry for the same Debian suite if there is
# none) into PREFIX-src, builds it there with clang and TBB_SANITIZE=thread and installs it into
# PREFIX, where the `tsan` preset (GEN3D_TSAN_TBB_DIR) finds it. The gen3d tsan
# build uses the same compiler (clang), so both link the same TSan runtime. A finished install is
# kept: the script returns at once when PREFIX holds it.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
prefix="${1:-$root/build/tsan/_tbb}"
mkdir -p "$(dirname "$prefix")"
prefix="$(cd "$(dirname "$prefix")" && pwd)/$(basename "$prefix")"
src_parent="$prefix-src"
stamp="$prefix/.gen3d-tsan-tbb"

version="$(dpkg-query -W -f='${Version}' libtbb-dev 2>/dev/null || true)"
if [ -z "$version" ]; then
  echo "build_tsan_tbb: libtbb-dev is not installed (run scripts/setup.sh)" >&2
  exit 1
fi
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$version" ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
export DEBIAN_FRONTEND=noninteractive

for tool in clang clang++ dpkg-source; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "build_tsan_tbb: installing clang and dpkg-dev"
    $sudo apt-get install -y -qq --no-install-recommends clang dpkg-dev >/dev/null
    break
  fi
done

# A deb-src entry for the suite the binary packages come from, unless one exists already.
if ! grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/; then
  suite="$(. /etc/os-release && echo "$VERSION_CODENAME")"
  echo "build_tsan_tbb: adding a deb-src entry for Debian $suite"
  $sudo tee /etc/apt/sources.list.d/gen3d-deb-src.sources >/dev/null <<EOF
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: $suite $suite-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: $suite-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $sudo apt-get update -qq
fi

# The source of exactly the installed version (its headers are what gen3d compiles against).
upstream="${version%%-*}"
src="$src_parent/onetbb-$upstream"
if [ ! -f "$src/CMakeLists.txt" ]; then
  rm -rf "$src_parent"
  mkdir -p "$src_parent"
  echo "build_tsan_tbb: fetching the source of onetbb $version"
  (cd "$src_parent" && apt-get source -qq "onetbb=$version" >/dev/null)
fi

echo "build_tsan_tbb: building oneTBB $upstream with ThreadSanitizer (clang)"
cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_COMPILER=clang++ -DTBB_SANITIZE=thread \
  -DTBB_TEST=OFF -DTBB_EXAMPLES=OFF -DTBB_STRICT=OFF -DTBBMALLOC_BUILD=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib >/dev/null
cmake --build "$src/build" -j "${GEN3D_TBB_JOBS:-2}" >/dev/null
rm -rf "$prefix"
cmake --install "$src/build" >/dev/null
echo "$version" >"$stamp"
echo "build_tsan_tbb: installed into $prefix"
