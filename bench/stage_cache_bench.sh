#!/usr/bin/env bash
# Stage cache benchmark, side by side in one run:
#   cold overhead: `gen3d texture` with an empty cache vs --no-cache (REPS each, interleaved);
#   re-run: after a cold run, the same texture with one downstream parameter changed
#   (--set inpaint.algorithm=telea) vs that first run.
# Usage: bench/stage_cache_bench.sh [GEN3D] [MESH] [IMAGE] [SIZE] [REPS]
set -euo pipefail
gen3d=${1:-build/gen3d}
mesh=${2:-assets/meshes/spider/spider.obj}
image=${3:-assets/images/spider_front.png}
size=${4:-2048}
reps=${5:-3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

wall() {  # seconds of wall time of one gen3d run
  local start end
  start=$(date +%s.%N)
  "$gen3d" texture --mesh "$mesh" --image "$image" --texture-size "$size" -q "$@" >/dev/null
  end=$(date +%s.%N)
  echo "$end - $start" | bc -l
}
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

: >"$work/plain"
: >"$work/cold"
: >"$work/rerun"
for r in $(seq "$reps"); do
  wall -o "$work/p.glb" --no-cache >>"$work/plain"
  rm -rf "$work/cache"
  cold=$(wall -o "$work/c.glb" --cache "$work/cache")
  echo "$cold" >>"$work/cold"
  again=$(wall -o "$work/r.glb" --cache "$work/cache" --set inpaint.algorithm=telea)
  echo "$again $cold" >>"$work/rerun"
done
plain=$(median <"$work/plain")
cold=$(median <"$work/cold")
printf 'runs (s)         %s\n' "plain: $(tr '\n' ' ' <"$work/plain")"
printf '                 %s\n' "cold cache: $(tr '\n' ' ' <"$work/cold")"
printf '                 %s\n' "re-run: $(cut -d' ' -f1 "$work/rerun" | tr '\n' ' ')"
printf 'cold overhead    %.1f %% (median %.3f s with the cache vs %.3f s without)\n' \
  "$(echo "100 * ($cold - $plain) / $plain" | bc -l)" "$cold" "$plain"
ratio=$(awk '{print 100 * $1 / $2}' "$work/rerun" | median)
printf 're-run / first   %.1f %% (median over %s pairs)\n' "$ratio" "$reps"
printf 'cache size       %s\n' "$(du -sh "$work/cache" | cut -f1)"
