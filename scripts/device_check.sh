#!/usr/bin/env bash
# On a machine with an NVIDIA GPU, each part switched by an environment variable (1 runs it):
#   TESTS (1)   the cuda-labelled tests (failing ones again under compute-sanitizer, SANITIZE=1);
#   DIT (0)     `gen3d bench dit --device cuda` at the official 2.0 DiT size beside PyTorch (eager
#               and torch.compile, bf16, the same shapes and random weights;
#               bench/dit_torch_bench.py) on the same card;
#   DIT21 (0)   the 2.1 DiT (mixture of experts) at its official size, gen3d only;
#   SHAPE (0)   image -> mesh end to end (`gen3d bench shape --device cuda`: 50 steps with CFG, and
#               5 steps without, at octree 384, FlashVDM; SHAPE_STEPS / SHAPE_GUIDANCE change
#               them, SHAPE_CHUNK lists the points per decoder call, e.g. 65536,262144);
#   SHAPE21 (0) the same for the 2.1 model (50 steps with CFG);
#   TURBO (1)   the same for the 2.0 turbo model as the official pipeline runs it (5 steps of the
#               step-distilled DiT, guidance embedded, the turbo VAE's narrower geometry decoder,
#               FlashVDM at octree 384), with the decode profiled;
#   PAINT (0)   the networks of a turbo texture (`gen3d bench paint --device cuda`: delight, 50
#               steps, then the turbo paint model on 6 views at 512 px);
#   TEXTURE (1) a turbo texture end to end: the same random networks written as model folders in
#               the official layout (`bench paint --write-models`), then `gen3d texture --models
#               --turbo --device cuda` on TEXTURE_MESH with TEXTURE_IMAGE (one cold process), and
#               `gen3d batch` of TEXTURE_JOBS such jobs in one process, one and then two at a time.
#               The mesh and image are packed beside the binaries (scripts/device_pack.sh ASSETS=...).
# The defaults (the tests, the turbo shape and the turbo texture) fit one call of about 5
# minutes; the parts measured before run on request, e.g. TESTS=0 TEXTURE=0 TURBO=0 DIT=1 SHAPE=1. Runs the binaries that scripts/device_pack.sh packed into
# .device/ (the machine needs only its driver, the CUDA runtime libraries and, for the comparison,
# PyTorch). Logs go to $OUT (or /tmp/gen3d-device); a short table is printed last.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/gen3d-device}
mkdir -p "$out"
root=$(mktemp -d)
tar -xJf .device/gen3d-device.tar.xz -C "$root" || { echo "no .device/gen3d-device.tar.xz"; exit 2; }
cublas=$(ls /usr/local/cuda/lib64/libcublasLt.so.13 2>/dev/null ||
  find / -xdev -name 'libcublasLt.so.13' 2>/dev/null | head -1)
libs="$root/lib:$(dirname "$cublas")"
run() { LD_LIBRARY_PATH="$libs" "$@"; }
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
# The golden sets of this tree, whatever source path the packed binaries were built in.
export GEN3D_GOLDEN_DIR=$PWD/tests/data/golden GEN3D_GOLDEN_H21_DIR=$PWD/tests/data/golden/hunyuan3d-2.1 \
  GEN3D_LOG_LEVEL=warn

if [ "${TESTS:-1}" = 1 ] && [ ! -x "$root/bin/gen3d_cuda_tests" ]; then
  echo "TESTS=1, but the pack has no test binary (packed with TESTS=0)"; exit 2
fi
if [ "${TESTS:-1}" = 1 ]; then
  timeout 180 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d_cuda_tests" --gtest_color=no 2>&1 |
    tee "$out/cuda_tests.log"
  tests_rc=${PIPESTATUS[0]}
  # A failing test runs again under compute-sanitizer (where the machine has it), which names a
  # bad memory access by kernel and address.
  failed=$(grep -oP '^\[  FAILED  \] \K[A-Za-z0-9_./]+' "$out/cuda_tests.log" | sort -u | paste -sd:)
  sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  if [ -n "$failed" ] && [ -n "$sanitizer" ] && [ "${SANITIZE:-1}" = 1 ]; then
    timeout 150 env LD_LIBRARY_PATH="$libs" "$sanitizer" --tool memcheck \
      "$root/bin/gen3d_cuda_tests" --gtest_color=no --gtest_filter="$failed" 2>&1 |
      tail -60 | tee "$out/cuda_tests_sanitizer.log"
  fi
else
  : > "$out/cuda_tests.log"; tests_rc=skipped
fi

if [ "${DIT:-0}" = 1 ]; then
  reps=${REPS:-10}
  sizes="--hidden 1024 --heads 16 --depth 16 --single 32 --tokens 3072 --context-tokens 1370
         --context-dim 1536 --in-channels 64 --batch 2"
  timeout 240 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" bench dit --device cuda \
    --precision bf16 $sizes --reps "$reps" 2>&1 | tee "$out/bench_gen3d.json"
  timeout 120 python3 bench/dit_torch_bench.py --device cuda $sizes --reps "$reps" 2>&1 |
    tee "$out/bench_eager.json"
  timeout 240 python3 bench/dit_torch_bench.py --device cuda --compile $sizes --reps "$reps" 2>&1 |
    tail -3 | tee "$out/bench_compile.json"
else
  : > "$out/bench_gen3d.json"; : > "$out/bench_eager.json"; : > "$out/bench_compile.json"
fi

if [ "${DIT21:-0}" = 1 ]; then
  sizes21="--arch 2.1 --hidden 2048 --heads 16 --depth 21 --moe-layers 6 --experts 8 --top-k 2
           --tokens 4096 --context-tokens 1370 --context-dim 1024 --in-channels 64 --batch 2"
  timeout 180 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" bench dit --device cuda \
    --precision bf16 $sizes21 --reps "${REPS:-10}" 2>&1 | tee "$out/bench_dit21.json"
else
  : > "$out/bench_dit21.json"
fi

shape_reps=${SHAPE_REPS:-3}
if [ "${SHAPE:-0}" = 1 ]; then
  timeout 240 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" -q bench shape --device cuda \
    --volume flashvdm --steps "${SHAPE_STEPS:-50,5}" --guidance "${SHAPE_GUIDANCE:-5,-1}" \
    --octree 384 --chunk "${SHAPE_CHUNK:-65536}" --reps "$shape_reps" --profile \
    2>&1 | tee "$out/bench_shape.json"
else
  : > "$out/bench_shape.json"
fi
if [ "${SHAPE21:-0}" = 1 ]; then
  timeout 300 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" -q bench shape --device cuda \
    --model 2.1 --volume flashvdm --steps 50 --guidance 5 --octree 384 --reps "$shape_reps" \
    2>&1 | tee "$out/bench_shape21.json"
else
  : > "$out/bench_shape21.json"
fi

if [ "${TURBO:-1}" = 1 ]; then
  timeout 180 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" -q bench shape --device cuda \
    --model turbo --octree 384 --chunk "${SHAPE_CHUNK:-65536}" --reps "$shape_reps" --profile \
    2>&1 | tee "$out/bench_turbo.json"
else
  : > "$out/bench_turbo.json"
fi

if [ "${PAINT:-0}" = 1 ]; then
  timeout 240 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" -q bench paint --device cuda \
    --reps "${PAINT_REPS:-3}" 2>&1 | tee "$out/bench_paint.json"
else
  : > "$out/bench_paint.json"
fi

mesh=${TEXTURE_MESH:-.device/assets/1.glb} image=${TEXTURE_IMAGE:-.device/assets/demo.png}
if [ "${TEXTURE:-1}" = 1 ] && { [ ! -f "$mesh" ] || [ ! -f "$image" ]; }; then
  echo "TEXTURE=1 needs $mesh and $image (scripts/device_pack.sh ASSETS=...): skipped"
elif [ "${TEXTURE:-1}" = 1 ]; then
  models=$(mktemp -d)
  timeout 240 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" bench paint --write-models "$models" \
    2>&1 | tail -3 | tee "$out/texture_models.log"
  timeout 150 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" texture --mesh "$mesh" \
    --image "$image" --models "$models" --turbo --device cuda --no-cache -o "$out/cold.glb" \
    --metrics "$out/texture_cold.json" > "$out/texture_cold.log" 2>&1
  echo "texture (cold process) rc $?"; tail -28 "$out/texture_cold.log"
  for i in $(seq 1 "${TEXTURE_JOBS:-3}"); do
    printf '{"id":"t%s","mesh":"%s","image":"%s","set":{"paint_model":"%s","turbo":true,"delight_method":"model","delight_model":"%s","device":"cuda"}}\n' \
      "$i" "$mesh" "$image" "$models/hunyuan3d-paint-v2-0-turbo" "$models/hunyuan3d-delight-v2-0"
  done > "$out/texture_jobs.jsonl"
  for jobs in 1 2; do
    timeout 200 env LD_LIBRARY_PATH="$libs" "$root/bin/gen3d" batch "$out/texture_jobs.jsonl" \
      --pipeline assets/pipelines/texgen_models.json --out "$(mktemp -d)" --jobs "$jobs" \
      --no-cache --metrics "$out/texture_batch$jobs.json" > "$out/texture_batch$jobs.log" 2>&1
    echo "texture batch, $jobs at a time: rc $?"; tail -25 "$out/texture_batch$jobs.log"
  done
  rm -rf "$models"
fi

python3 - "$out" "$tests_rc" <<'PY'
import json, pathlib, re, sys
out, rc = pathlib.Path(sys.argv[1]), sys.argv[2]
log = (out / "cuda_tests.log").read_text(errors="replace")
passed = re.search(r"\[  PASSED  \] (\d+)", log)
failed = re.findall(r"\[  FAILED  \] (\S+)", log)
print("\n== device check ==")
print("gpu:", (out / "gpu.txt").read_text().strip())
print(f"cuda tests: rc {rc}, passed {passed.group(1) if passed else 0}, failed {sorted(set(failed))}")
rows = []
for name in ("bench_gen3d", "bench_eager", "bench_compile", "bench_dit21"):
    for line in (out / f"{name}.json").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            label = j.get("runtime", "gen3d " + j.get("device", ""))
            if name == "bench_dit21":
                label += " (2.1 DiT)"
            rows.append((label, j["ms_per_forward"],
                         j.get("ms_min"), j.get("ms_max"), j.get("gflops")))
print(f"{'runtime':32} {'median ms':>10} {'min':>8} {'max':>8} {'TFLOP/s':>8}")
for r in rows:
    tf = f"{r[4] / 1e3:.0f}" if r[4] else "-"
    print(f"{r[0]:32} {r[1]:10.2f} {r[2] or 0:8.2f} {r[3] or 0:8.2f} {tf:>8}")

# image -> mesh: the runs after the first (which also uploads the weights), median and range.
runs, profiles = {}, []
lines = []
for name in ("bench_shape", "bench_shape21", "bench_turbo"):
    lines += (out / f"{name}.json").read_text(errors="replace").splitlines()
for line in lines:
    if line.startswith("{"):
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("bench") == "shape-profile":
            profiles.append(j)
            continue
        runs.setdefault((j.get("model", ""), j["steps"], j["guidance"], j["volume"], j["octree"],
                         j.get("points_per_call", 0)), []).append(j)
print(f"\n{'image -> mesh':36} {'median s':>9} {'min':>7} {'max':>7}  stages (median run)")
for (model, steps, g, vol, octree, chunk), js in runs.items():
    timed = js[1:] if len(js) > 1 else js
    timed = sorted(timed, key=lambda j: j["total_s"])
    mid = timed[len(timed) // 2]
    st = " ".join(f"{k} {v:.2f}" for k, v in mid["stages"].items())
    guide = f"cfg {g}" if js[0].get("cfg") else "no cfg"
    label = f"{model} {steps} steps, {guide}, {vol} R{octree}"
    print(f"{label:36} {mid['total_s']:9.2f} {timed[0]['total_s']:7.2f} {timed[-1]['total_s']:7.2f}"
          f"  {st}; points {mid['points']}, faces {mid['faces']}, build {mid['build_s']:.0f} s,"
          f" first run {js[0]['total_s']:.2f} s; decoder calls {mid.get('volume_decoder_s', 0):.2f} s"
          f" ({mid.get('volume_decoder_calls', 0)} of {mid.get('points_per_call', 0)} points)")
paint = [json.loads(l) for l in (out / "bench_paint.json").read_text(errors="replace").splitlines()
         if l.startswith('{"bench"')]
if paint:
    timed = sorted(paint[1:] if len(paint) > 1 else paint, key=lambda j: j["total_s"])
    mid = timed[len(timed) // 2]
    print(f"\npaint networks ({mid['model']}, {mid['views']} views at {mid['size']} px, "
          f"{mid['delight_steps']} delight steps): median {mid['total_s']:.2f} s, range "
          f"{timed[0]['total_s']:.2f}-{timed[-1]['total_s']:.2f}; stages "
          + " ".join(f"{k} {v:.2f}" for k, v in mid["stages"].items())
          + f"; first run {paint[0]['total_s']:.2f} s")
cold = out / "texture_cold.json"
if cold.exists():
    j = json.loads(cold.read_text())
    print(f"\nturbo texture, one cold process: {j['wall_ms'] / 1e3:.2f} s wall, concurrency "
          f"{j.get('concurrency', 0):.2f}; nodes: "
          + " ".join(f"{n['id']} {n['wall_ms'] / 1e3:.2f}" for n in j.get("nodes", [])
                     if n.get("wall_ms", 0) >= 50))
for jobs in (1, 2):
    f = out / f"texture_batch{jobs}.json"
    if f.exists():
        j = json.loads(f.read_text())
        walls = sorted(x["wall_ms"] / 1e3 for x in j["jobs"])
        busy = sum(j["stage_ms"].values()) / 1e3
        print(f"turbo texture batch, {jobs} at a time: {j['done']} done in {j['wall_s']:.2f} s, "
              f"job walls {', '.join(f'{w:.2f}' for w in walls)} s, stage time / wall "
              f"{busy / j['wall_s']:.2f}")
for profile in profiles:
    ops = ", ".join(f"{k} {v:.0f}" for k, v in
                    sorted(profile["gpu_ms_by_op"].items(), key=lambda kv: -kv[1]))
    print(f"volume decode ({profile.get('model', '')}), profiled: {profile['wall_s']:.2f} s wall, in the decoder's calls "
          f"{profile.get('decoder_calls_s', 0):.2f} s ({profile.get('decoder_calls', 0)}); "
          f"GPU ms by op: {ops}")
PY
