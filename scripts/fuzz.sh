#!/usr/bin/env bash
# Runs the libFuzzer targets of the `fuzz` preset, each for a fixed time, two at a time and at the
# lowest CPU priority, then prints per target: inputs run, coverage (cov: edges, ft: features),
# corpus size and what it found.
#
#   bash scripts/fuzz.sh [SECONDS] [TARGET...]     (default: 600 s, every target)
#
# Targets: config, manifest, mesh, gltf, image, model_config, safetensors, torch. Needs
# `cmake --preset fuzz && cmake --build --preset fuzz`. The committed seeds in
# tests/fuzz/corpus/<target>/ are copied to build/fuzz/corpus/<target>/ first (new inputs go
# there); logs go to build/fuzz/logs/<target>.log and anything found to build/fuzz/artifacts/.
# Leaks inside assimp are not ours and are suppressed (tests/fuzz/lsan.supp); every other leak,
# crash or hang fails the run. A hang is an input still running after 60 s: at the lowest
# priority on a busy machine a normal input can wait many seconds for a core. The memory limit is
# 4 GiB: an image header may declare up to 16384 x 16384 pixels, whose 16-bit RGBA rows alone take
# 2 GiB before its data is read.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-600}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config manifest mesh gltf image model_config safetensors torch)
fi
fuzz="$root/build/fuzz"
mkdir -p "$fuzz/logs" "$fuzz/artifacts"
for t in "${targets[@]}"; do
  if [ ! -x "$fuzz/fuzz/fuzz_$t" ]; then
    echo "fuzz: build/fuzz/fuzz/fuzz_$t is missing (cmake --build --preset fuzz)" >&2
    exit 2
  fi
  mkdir -p "$fuzz/corpus/$t"
  cp -n "$root/tests/fuzz/corpus/$t/"* "$fuzz/corpus/$t/" 2>/dev/null || true
done

run_one() {
  local t="$1"
  cd "$fuzz"
  LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan.supp:print_suppressions=0" \
    nice -n 19 "$fuzz/fuzz/fuzz_$t" -max_total_time="$seconds" -print_final_stats=1 -timeout=60 \
    -rss_limit_mb=4096 \
    -report_slow_units=60 -artifact_prefix="$fuzz/artifacts/$t-" "$fuzz/corpus/$t" >"$fuzz/logs/$t.log" 2>&1
}
export -f run_one
export root fuzz seconds
status=0
printf '%s\n' "${targets[@]}" | xargs -P 2 -I{} bash -c 'run_one {}' || status=1

printf '%-14s %10s %8s %8s %8s  %s\n' target runs cov ft corpus result
for t in "${targets[@]}"; do
  log="$fuzz/logs/$t.log"
  runs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo ?)"
  last="$(grep -E '^#[0-9]+' "$log" | tail -n 1)"
  cov="$(grep -o 'cov: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo ?)"
  ft="$(grep -o 'ft: [0-9]*' <<<"$last" | grep -o '[0-9]*' || echo ?)"
  corpus="$(ls "$fuzz/corpus/$t" | wc -l)"
  result="no crash, hang or leak"
  found='^==[0-9]+==ERROR|^SUMMARY: |ALARM: working on the last Unit|written to .*/[a-z_]+-(crash|leak|timeout|oom)-'
  if grep -qE "$found" "$log"; then
    result="FOUND: $(grep -m1 -E "$found" "$log")"
    status=1
  fi
  printf '%-14s %10s %8s %8s %8s  %s\n' "$t" "$runs" "$cov" "$ft" "$corpus" "$result"
done
exit $status
