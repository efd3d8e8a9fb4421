#!/usr/bin/env bash
# Regenerates the pictures of docs/gallery.md (docs/images/gallery/*.png): each mesh is textured by
# `gen3d texture` from one reference image (no model), rendered by gen3d's own renderer
# (scripts/gallery/render_views.json) and tiled by scripts/tile_images.py (numpy, no PIL).
# Usage: bash scripts/make_gallery.sh   (after bash scripts/build.sh; GEN3D=, OUT=, PYTHON= override)
# Every run is timed without the stage cache; the times go to $OUT/times.txt.
set -euo pipefail
cd "$(dirname "$0")/.."

GEN3D=${GEN3D:-build/gen3d}
OUT=${OUT:-out/gallery}
if [ -z "${PYTHON:-}" ]; then  # the first Python with numpy (a pyenv python3 may lack it; Debian's has it)
  for PYTHON in python3 /usr/bin/python3; do "$PYTHON" -c 'import numpy' 2>/dev/null && break; done
fi
DEST=docs/images/gallery
VIEWS=scripts/gallery/render_views.json
[ -x "$GEN3D" ] || { echo "make_gallery.sh: no $GEN3D (build it first: bash scripts/build.sh)" >&2; exit 2; }
"$PYTHON" -c 'import numpy' 2>/dev/null || { echo "make_gallery.sh: $PYTHON has no numpy" >&2; exit 2; }
mkdir -p "$OUT" "$DEST"
: > "$OUT/times.txt"

# front MESH PNG SIZE: the front view (elevation 0, azimuth 0) of MESH, unlit, as a reference image
front() {
  "$GEN3D" run "$VIEWS" --no-cache -q --set "mesh=$1" --set "dir=$OUT/front.tmp" --set "size=$3" \
    --set 'elevations=[0]' --set 'azimuths=[0]'
  mv "$OUT/front.tmp/albedo_0.png" "$2"
  rm -rf "$OUT/front.tmp"
}

# texture NAME ARGS...: gen3d texture ARGS, timed, its log in $OUT/NAME.log
texture() {
  local name=$1 t0 t1
  shift
  t0=$(date +%s%N)
  "$GEN3D" texture "$@" --no-cache > "$OUT/$name.log" 2>&1 || { cat "$OUT/$name.log" >&2; exit 1; }
  t1=$(date +%s%N)
  printf '%-14s %6.2f s\n' "$name" "$(( (t1 - t0) / 1000000 ))e-3" | tee -a "$OUT/times.txt"
}

# views NAME SIZE: the textured $OUT/NAME.glb from elevation 20 and azimuths -35, 80, 200 (albedo and lit)
views() {
  rm -rf "$OUT/views_$1"
  "$GEN3D" run "$VIEWS" --no-cache -q --set "mesh=$OUT/$1.glb" --set "dir=$OUT/views_$1" --set "size=$2"
}

# 1. The spider re-textured from its own front image (as docs/images/textured_spider.png).
texture spider --mesh assets/meshes/spider/spider.obj --image assets/images/spider_front.png \
  --reunwrap --texture-size 1024 --render-size 1024 -o "$OUT/spider.glb"
views spider 512
"$PYTHON" scripts/tile_images.py "$DEST/spider.png" assets/images/spider_front.png "$OUT"/views_spider/albedo_*.png

# 2. assimp's BoxTextured from one image of its front face, on a new atlas.
front assets/meshes/BoxTextured.glb "$OUT/box_front.png" 384
texture box --mesh assets/meshes/BoxTextured.glb --image "$OUT/box_front.png" \
  --reunwrap --texture-size 1024 --render-size 1024 -o "$OUT/box.glb"
views box 384
"$PYTHON" scripts/tile_images.py "$DEST/box.png" "$OUT/box_front.png" "$OUT"/views_box/albedo_*.png
# The same without the classical delighting, which the flat, unlit input does not need.
texture box_nodelight --mesh assets/meshes/BoxTextured.glb --image "$OUT/box_front.png" \
  --reunwrap --texture-size 1024 --render-size 1024 -o "$OUT/box_nodelight.glb" --set delight.method=none
views box_nodelight 384
"$PYTHON" scripts/tile_images.py "$DEST/box_nodelight.png" "$OUT/box_front.png" "$OUT"/views_box_nodelight/albedo_*.png

# 3. A CAD model: assimp's 2CylinderEngine (Draco-compressed glTF, 110k triangles, no UVs).
ENGINE=tests/data/mesh/meshes-assimp/glTF2/draco/2CylinderEngine.gltf
front "$ENGINE" "$OUT/engine_front.png" 512
texture engine --mesh "$ENGINE" --image "$OUT/engine_front.png" \
  --texture-size 1024 --render-size 1024 -o "$OUT/engine.glb"
views engine 512
"$PYTHON" scripts/tile_images.py "$DEST/engine.png" "$OUT/engine_front.png" "$OUT"/views_engine/albedo_*.png
"$PYTHON" scripts/tile_images.py "$DEST/engine_shaded.png" "$OUT/engine_front.png" "$OUT"/views_engine/shaded_*.png

# 4. Three materials, three textures, the mesh's own UVs kept (a leg, the chest and an eye of the spider).
front tests/data/mesh/spider_parts/spider_parts.obj "$OUT/parts_front.png" 512
texture spider_parts --mesh tests/data/mesh/spider_parts/spider_parts.obj --image "$OUT/parts_front.png" \
  --texture-size 1024 --render-size 1024 -o "$OUT/spider_parts.glb"
views spider_parts 512
"$PYTHON" scripts/tile_images.py "$DEST/spider_parts.png" "$OUT/parts_front.png" "$OUT"/views_spider_parts/albedo_*.png

ls -l "$DEST"
