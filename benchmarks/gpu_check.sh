#!/usr/bin/env bash
# GPU check: run the `cuda` runner with NVML telemetry on this machine's NVIDIA GPU, write the result
# and a short table of latency and device state (clocks, throttling, clock lock).
#
#   benchmarks/gpu_check.sh [OUT_DIR]          (default OUT_DIR: gpu-check)
#
# Then `perfguard profile` of resnet/ort_all/cuda against pipeline none, for the GPU path of the
# profiles (ORT Kernel events, nsys/ncu when on PATH): OUT/profile.json (--json), OUT/traces/ (the
# Perfetto trace, the raw ORT profiles ort-baseline.json / ort-candidate.json, and nsys-*.csv /
# ncu-*.csv when the tools ran) and OUT/profile.txt (the printout). Copy those raw files into
# tests/data/ to replace the constructed fixtures of tests/test_profile_gpu.py with recordings.
#
# Environment: PYTHON (default: .venv/bin/python if present, else python3), DEVICE (CUDA device
# index, default 0), WORKERS (default 3), ROUNDS (default 10).
#
# Needs onnxruntime-gpu (`perfguard[gpu]`, installed in place of onnxruntime) and an NVIDIA driver.
# A GPU runner without onnxruntime-gpu or without a package index: build the runner bundle instead
# (benchmarks/device_bundle.sh OUT here, then OUT/run.sh there; IREE CUDA needs no onnxruntime-gpu).
# This script only reads the GPU's state: it never changes clocks, power limits or any other
# setting (no nvidia-smi -lgc/-pl/-pm). To benchmark with locked clocks, lock them yourself first
# (README, "Locking clocks") and the table will say "locked".
set -euo pipefail

cd "$(dirname "$0")/.."
OUT="${1:-gpu-check}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
DEVICE="${DEVICE:-0}"
WORKERS="${WORKERS:-3}"
ROUNDS="${ROUNDS:-10}"
# NVML numbers GPUs in PCI order; make CUDA agree so telemetry watches the GPU that runs the work.
export CUDA_DEVICE_ORDER=PCI_BUS_ID
mkdir -p "$OUT"

echo "== runners"
# Exits 2 with the reason (no driver, NVML not loadable, CUDA provider not in this onnxruntime).
"$PYTHON" -m perfguard runners cuda --json "$OUT/runners.json"

if command -v nvidia-smi >/dev/null 2>&1; then
  echo "== GPU state before the run (read only)"
  nvidia-smi --id="$DEVICE" --format=csv \
    --query-gpu=name,driver_version,persistence_mode,ecc.mode.current,clocks.sm,clocks.max.sm,clocks.mem,power.draw,power.limit,temperature.gpu \
    | tee "$OUT/nvidia-smi-before.csv" || true
fi

cat > "$OUT/gpu_check.toml" <<EOF
# Written by benchmarks/gpu_check.sh: small zoo models on the cuda runner, telemetry on.
[suite]
name = "gpu_check"
backend = "ort"
runners = ["cuda"]

[runners.cuda]
device_id = $DEVICE
clock_tolerance = "2%"
telemetry_interval = "50ms"

[measure]
workers = $WORKERS
rounds = $ROUNDS
warmup = 10
min_time = "20ms"
timeout = "300s"

[models.resnet]
arch = "resnet"
params = { depth = 8, width = 64, image_size = 224, num_classes = 1000 }

[models.bert]
arch = "bert"
params = { layers = 4, hidden = 256, heads = 4, seq_len = 128, vocab = 8000 }

[pipelines.none]
passes = []

[pipelines.ort_all]
passes = []
options = { graph_optimization_level = "all" }
EOF

echo "== run"
status=0
"$PYTHON" -m perfguard run "$OUT/gpu_check.toml" --out "$OUT/result.json" --quiet || status=$?
if [[ ! -f "$OUT/result.json" ]]; then
  echo "gpu_check: the run wrote no result (exit code $status)" >&2
  exit "$status"
fi

echo "== device state"
"$PYTHON" - "$OUT/result.json" "$OUT/table.md" <<'EOF'
import json
import sys

result_path, table_path = sys.argv[1], sys.argv[2]
document = json.load(open(result_path))
gpu = document["environment"].get("cuda", {}).get("gpu", {})
lines = [f"GPU: {gpu.get('name')} | driver {gpu.get('driver')} | CUDA {gpu.get('cuda_driver_version')} | "
         f"ECC {gpu.get('ecc')} | persistence {gpu.get('persistence_mode')} | power limit {gpu.get('power_limit_w')} W",
         "",
         "| case | median | p90 | SM clock min/med/max (MHz) | throttled | clocks | temp max (C) | power med (W) | device state |",
         "|---|---|---|---|---|---|---|---|---|"]


def rng(stats):
    return "n/a" if not stats else f"{stats['min']:.0f}/{stats['median']:.0f}/{stats['max']:.0f}"


def num(stats, key):
    return "n/a" if not stats else f"{stats[key]:.0f}"


for case in document["cases"]:
    if case["status"] != "ok":
        lines.append(f"| {case['id']} | failed: {case['error']['message'][:80]} | | | | | | | |")
        continue
    latency = case["metrics"]["latency_s"]
    measurement = case["measurement"]
    summary = (measurement.get("telemetry") or {}).get("summary") or {}
    throttle = summary.get("throttle") or {}
    state = measurement.get("device_state") or {}
    fraction = throttle.get("fraction")
    verdict = state.get("state", "n/a")
    if state.get("reasons"):
        verdict += ": " + "; ".join(state["reasons"])
    lines.append(
        f"| {case['id']} | {latency['median'] * 1e3:.3f} ms | {latency['p90'] * 1e3:.3f} ms | "
        f"{rng(summary.get('sm_clock_mhz'))} | {'n/a' if fraction is None else f'{fraction:.0%}'} | "
        f"{summary.get('clock_lock', 'n/a')} | "
        f"{num(summary.get('temperature_c'), 'max')} | {num(summary.get('power_w'), 'median')} | {verdict} |")
notes = {n for case in document["cases"] for n in ((case.get("measurement") or {}).get("device_state") or {}).get("notes", [])}
lines += [""] + [f"note: {n}" for n in sorted(notes)]
text = "\n".join(lines) + "\n"
open(table_path, "w").write(text)
print(text)
EOF

echo "== profile (GPU path: ORT Kernel events; nsys: $(command -v nsys || echo 'not on PATH'); ncu: $(command -v ncu || echo 'not on PATH'))"
profile_status=0
"$PYTHON" -m perfguard profile "$OUT/gpu_check.toml" --case resnet/ort_all/cuda --against-pipeline none \
  --profile-workers 2 --profile-runs 20 --quiet --json "$OUT/profile.json" --trace-out "$OUT/traces" \
  > "$OUT/profile.txt" || profile_status=$?
cat "$OUT/profile.txt"
if [[ -f "$OUT/profile.json" ]]; then
  "$PYTHON" - "$OUT/profile.json" <<'EOF'
import json
import sys

(explanation,) = json.load(open(sys.argv[1]))["explanations"]
gpu = explanation.get("gpu") or {}
diff = gpu.get("diff") or {}
print("gpu section:", "present" if gpu else "absent", "| source:", diff.get("source"),
      "| launches per inference:", (diff.get("launches") or {}).get("after", {}).get("mean"))
for reason in gpu.get("skipped", []):
    print("  ", reason)
EOF
fi
ls -l "$OUT"/traces/*/ 2>/dev/null || true

echo "results: $OUT/result.json, table: $OUT/table.md, profile: $OUT/profile.json, traces: $OUT/traces"
if [[ "$status" == 0 && "$profile_status" != 0 ]]; then status=$profile_status; fi
exit "$status"
