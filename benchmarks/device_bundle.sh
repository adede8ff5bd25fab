#!/usr/bin/env bash
# Runner bundle: one folder that a bare, air-gapped GPU machine (Python 3.12 x86-64, an NVIDIA driver,
# no package index) needs to run the GPU check. Built here, where PyPI and the compilers are.
#
#   benchmarks/device_bundle.sh OUT            the cuda bundle (manylinux x86-64 CPython 3.12 wheels)
#   benchmarks/device_bundle.sh --cpu OUT      the same for the cpu runner and this machine's Python (CI)
#
# OUT holds:
#   artifacts/iree/   `perfguard compile` of suites/iree-gpu.toml (IREE CUDA modules for sm_89 and sm_80,
#                     O0 and O2, with the ORT-CPU reference outputs); --cpu: IREE llvm-cpu, O0 vs O2
#   artifacts/ort/    a small ORT suite (none vs all graph optimizations), for machines with onnxruntime-gpu
#   wheels/           perfguard itself and what a measuring machine may lack: iree-base-runtime,
#                     jsonschema and its dependencies, gitpython/gitdb/smmap (the fingerprint reads git)
#   run.sh            installs the wheels with --no-index --no-deps into a temporary folder, then runs
#                     `perfguard runners`, `perfguard run --artifacts` of both folders (telemetry on the
#                     cuda runner), `perfguard check --artifacts` of the pair (O0 vs O2, paired) and ncu on
#                     the first kernel launches when ncu is on PATH; at most 8 files in its output folder
#
# The machine must have what the GPU machine lists: numpy, onnx, onnxruntime, scipy, rich, jinja2,
# psutil, nvidia-ml-py. Environment: PYTHON (default .venv/bin/python, else python3).
#
# OUT is relative to the directory the script is called from, and appears whole or not at all: the
# bundle is built in a temporary folder beside OUT (.OUT.partial.XXXXXX) and renamed into place at
# the end, so a failed build leaves nothing behind and the next try is not refused.
set -euo pipefail

RUNNER=cuda
if [[ "${1:-}" == "--cpu" ]]; then RUNNER=cpu; shift; fi
OUT="${1:?usage: benchmarks/device_bundle.sh [--cpu] OUT}"
# Resolved before the cd below: a relative OUT is where the user meant, not under the repository.
case "$OUT" in /*) ;; *) OUT="$PWD/$OUT" ;; esac
OUT="${OUT%/}"
cd "$(dirname "$0")/.."
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if [[ -e "$OUT" ]] && [[ -n "$(ls -A "$OUT")" ]]; then
  echo "device_bundle: $OUT exists and is not empty; choose a new folder" >&2
  exit 2
fi
mkdir -p "$(dirname "$OUT")"
FINAL="$OUT"
OUT="$(mktemp -d "$(dirname "$FINAL")/.$(basename "$FINAL").partial.XXXXXX")"
mkdir -p "$OUT/wheels" "$OUT/artifacts"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK" "$OUT"' EXIT

echo "== wheels"
"$PYTHON" -m pip wheel -q --no-deps -w "$OUT/wheels" .
version() { "$PYTHON" -c "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))" "$1"; }
PINNED=()
for package in iree-base-runtime jsonschema jsonschema-specifications referencing rpds-py attrs typing-extensions \
               gitpython gitdb smmap; do
  if v="$(version "$package" 2>/dev/null)"; then PINNED+=("$package==$v"); fi
done
if [[ "$RUNNER" == cuda ]]; then
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$OUT/wheels" "${PINNED[@]}"
else
  "$PYTHON" -m pip download -q --no-deps --only-binary=:all: -d "$OUT/wheels" "${PINNED[@]}"
fi

echo "== artifacts"
if [[ "$RUNNER" == cuda ]]; then
  cp suites/iree-gpu.toml "$WORK/iree.toml"
else
  # The cpu runner's counterpart of suites/iree-gpu.toml: one small model, O0 vs O2, llvm-cpu.
  cat > "$WORK/iree.toml" <<EOF
[suite]
name = "iree-bundle-cpu"
backend = "iree"
runners = ["cpu"]

[measure]
workers = 2
rounds = 3
warmup = 2
min_time = "5ms"
timeout = "300s"
compile_repeats = 1
memory_probes = 0

[models.bert]
arch = "bert"
params = { layers = 1, hidden = 64, heads = 2, seq_len = 32, vocab = 100 }

[pipelines.sm89]
passes = []
options = { opt_level = "O0" }

[pipelines.sm89_o2]
passes = []
options = { opt_level = "O2" }
EOF
fi
cat > "$WORK/ort.toml" <<EOF
# Written by benchmarks/device_bundle.sh: ONNX Runtime on the $RUNNER runner (needs onnxruntime-gpu for cuda).
[suite]
name = "bundle-ort"
backend = "ort"
runners = ["$RUNNER"]

[measure]
workers = 2
rounds = 5
warmup = 5
min_time = "10ms"
timeout = "300s"
compile_repeats = 1
memory_probes = 0

[models.resnet]
arch = "resnet"
params = { depth = 2, width = 8, image_size = 32, num_classes = 10 }

[pipelines.none]
passes = []

[pipelines.ort_all]
passes = []
options = { graph_optimization_level = "all" }
EOF
"$PYTHON" -m perfguard compile "$WORK/iree.toml" --out "$OUT/artifacts/iree" --quiet
"$PYTHON" -m perfguard compile "$WORK/ort.toml" --out "$OUT/artifacts/ort" --quiet

echo "== run.sh"
cat > "$OUT/run.sh" <<'EOF'
#!/usr/bin/env bash
# Run the GPU check from this bundle on a machine without a package index (see benchmarks/device_bundle.sh).
#   ./run.sh [OUT]      results in OUT (default ./out): at most 8 files
# Environment: PYTHON (default python3), DEVICE (the GPU to use: CUDA_VISIBLE_DEVICES; default: as set).
set -uo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="${1:-$HERE/out}"
PYTHON="${PYTHON:-python3}"
RUNNER="$(cat "$HERE/RUNNER")"
mkdir -p "$OUT"
SITE="$(mktemp -d)"
trap 'rm -rf "$SITE"' EXIT
"$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$SITE" "$HERE"/wheels/*.whl || exit 2
export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
export CUDA_DEVICE_ORDER=PCI_BUS_ID   # NVML's order: telemetry watches the GPU that runs the work
if [[ -n "${DEVICE:-}" ]]; then export CUDA_VISIBLE_DEVICES="$DEVICE"; fi   # else the scheduler's choice
exec > >(tee "$OUT/log.txt") 2>&1
status=0
echo "== perfguard runners $RUNNER"
"$PYTHON" -m perfguard runners "$RUNNER" --json "$OUT/runners.json" || status=$?
for kind in iree ort; do
  echo "== perfguard run --artifacts $kind"
  "$PYTHON" -m perfguard run --artifacts "$HERE/artifacts/$kind" --out "$OUT/result-$kind.json" --quiet || {
    code=$?; echo "run --artifacts $kind: exit $code"; if [[ $kind == iree ]]; then status=$code; fi; }
done
echo "== perfguard check: every pipeline against sm89 (O0; the pair sm89_o2 = O2), measured here interleaved"
"$PYTHON" -m perfguard check --artifacts "$HERE/artifacts/iree" --against-pipeline sm89 \
  --json "$OUT/verdicts.json" --quiet || echo "check: exit $?"
if command -v ncu >/dev/null 2>&1 && [[ "$RUNNER" == cuda ]]; then
  echo "== ncu: the first 40 kernel launches of a measurement of the IREE modules (raw CSV)"
  timeout 300 ncu --csv --page raw --target-processes all --launch-count 40 \
    --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,launch__grid_size,launch__block_size,launch__registers_per_thread \
    "$PYTHON" -m perfguard run --artifacts "$HERE/artifacts/iree" --rounds 1 --workers 1 --quiet --out "$SITE/ncu-result.json" \
    > "$OUT/ncu.csv" 2> "$SITE/ncu.err" || { echo "ncu: exit $?"; tail -5 "$SITE/ncu.err"; }
else
  echo "== ncu: not on PATH (or the cpu runner): no kernel metrics"
fi
echo "files: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
EOF
chmod +x "$OUT/run.sh"
echo "$RUNNER" > "$OUT/RUNNER"
chmod 755 "$OUT"   # mktemp made it 700
# rename(2) replaces an empty folder (one the user made for it) and refuses a non-empty one.
mv -T "$OUT" "$FINAL"
du -sh "$FINAL"
