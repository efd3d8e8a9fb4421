#!/usr/bin/env bash
# End-to-end texgen timing on a real asset: gen3d's defaults (gather bake, chart-restricted
# inpainting) against the reference-parity methods (pixel-splat back-projection, whole-image
# OpenCV inpainting) run side by side, plus peak RSS. Prints one JSON object.
#   bench/texgen_bench.sh [MESH] [IMAGE] [SIZE]
# Defaults to the Hunyuan3D-2 example asset in ../shared (never copied into this repository); its
# example image is of another character (silhouette IoU 0.75, which texgen warns about), so the
# default pair measures time, not texture quality.
# The reference-parity inpainting is slow (minutes at 2048); GEN3D_BENCH_SKIP_REFERENCE=1 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
mesh=${1:-../shared/assets/hunyuan3d-2/1.glb}
image=${2:-../shared/assets/hunyuan3d-2/004.png}
size=${3:-2048}
gen3d=./build/gen3d
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

run() {  # name, extra args...
  local name=$1
  shift
  "$gen3d" -q texture --mesh "$mesh" --image "$image" --texture-size "$size" --render-size "$size" \
    -o "$tmp/$name.glb" --metrics "$tmp/$name.json" "$@" >/dev/null 2>&1
  cat "$tmp/$name.json"
}

ours=$(run ours)
if [ "${GEN3D_BENCH_SKIP_REFERENCE:-0}" = 1 ]; then
  reference=null
else
  reference=$(run reference --set bake_method=reference --set inpaint.method=reference)
fi
node -e '
const [ours, ref, mesh, size] = [JSON.parse(process.argv[1]), JSON.parse(process.argv[2]), process.argv[3], process.argv[4]];
const stages = (m) => Object.fromEntries(m.nodes.map((n) => [n.id, +n.wall_ms.toFixed(1)]));
const out = {mesh, size: +size, ours: {wall_ms: +ours.wall_ms.toFixed(1), peak_rss_mb: +ours.peak_rss_mb.toFixed(0), stages: stages(ours)}};
if (ref) {
  out.reference_methods = {wall_ms: +ref.wall_ms.toFixed(1), peak_rss_mb: +ref.peak_rss_mb.toFixed(0), stages: stages(ref)};
  out.speedup = +(ref.wall_ms / ours.wall_ms).toFixed(2);
}
console.log(JSON.stringify(out, null, 1));
' "$ours" "$reference" "$mesh" "$size"
