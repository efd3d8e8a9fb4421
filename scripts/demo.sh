#!/usr/bin/env bash
# Builds everything and runs the demo: re-texture the spider from its own albedo views (unwrap a
# fresh copy, bake 6 views, merge, inpaint, save a GLB), then report the PSNR of the re-rendered
# views, the stage summary, a Chrome trace and an HTML report, all under out/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
mkdir -p out
./build/gen3d texture \
  --mesh assets/meshes/spider/spider.obj --source-mesh assets/meshes/spider/spider.obj --reunwrap \
  --texture-size 1024 --render-size 1024 \
  -o out/spider_retextured.glb --trace out/demo.trace.json --metrics out/demo.metrics.json \
  --report out/demo.report.html "$@"
echo "demo: out/spider_retextured.glb, out/demo.report.html, out/demo.trace.json (https://ui.perfetto.dev)"
