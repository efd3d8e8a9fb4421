#!/usr/bin/env bash
# Builds everything and runs the demo pipeline with a trace and metrics written to out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
mkdir -p out
./build/gen3d run assets/pipelines/mesh_info.json \
  --trace out/demo.trace.json --metrics out/demo.metrics.json "$@"
echo "demo: wrote out/spider.glb, out/demo.trace.json (open in https://ui.perfetto.dev), out/demo.metrics.json"
