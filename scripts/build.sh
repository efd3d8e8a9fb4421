#!/usr/bin/env bash
# Configures and builds gen3d (Release) into build/, incrementally.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"${GEN3D_BUILD_JOBS:-2}"
