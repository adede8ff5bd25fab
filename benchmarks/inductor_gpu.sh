#!/usr/bin/env bash
# The GPU row of issue 35 in one prepared run with short timeouts, for the few minutes a GPU machine
# is lent: Inductor's readiness on the cuda runner, a check of two inductor pipelines on the GPU
# (Triton kernels), and the IREE CUDA run of a runner bundle when one was carried along.
#
#   benchmarks/inductor_gpu.sh [OUT] [BUNDLE]     (default OUT: inductor-gpu)
#
#   OUT/runners.json   `perfguard runners cuda --backend inductor`: torch.cuda, Triton, NVML
#   OUT/check.json     `perfguard check suites/inductor-gpu.toml --against-pipeline default` of
#                      resnet under default and max_autotune (compiled and measured on this GPU)
#   OUT/check.txt      its printout, with the pass traces' phase times and kernel counts
#   OUT/iree/          BUNDLE/run.sh's output (benchmarks/device_bundle.sh BUNDLE, built where
#                      PyPI is): IREE's CUDA modules run and checked here; skipped without BUNDLE
#
# Needs a CUDA build of torch with Triton (the GPU machine has them) and perfguard importable (this
# checkout: PYTHONPATH is set to it when perfguard is not installed). Without a GPU it stops after the
# first step with `perfguard runners`' reason (exit 2). Environment: PYTHON (default .venv/bin/python
# if present, else python3), CHECK_TIMEOUT (default 300 s), BUNDLE_TIMEOUT (default 200 s).
# It only reads the GPU's state (no clock or power settings).
set -uo pipefail

cd "$(dirname "$0")/.."
OUT="${1:-inductor-gpu}"
BUNDLE="${2:-}"
if [[ -z "${PYTHON:-}" ]]; then
  if [[ -x .venv/bin/python ]]; then PYTHON=.venv/bin/python; else PYTHON=python3; fi
fi
if ! "$PYTHON" -c "import perfguard" 2>/dev/null; then export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"; fi
export CUDA_DEVICE_ORDER=PCI_BUS_ID   # NVML's order: telemetry watches the GPU that runs the work
mkdir -p "$OUT"

echo "== perfguard runners cuda (inductor: torch.cuda, Triton)"
if ! timeout 120 "$PYTHON" -m perfguard runners cuda --backend inductor --json "$OUT/runners.json"; then
  echo "inductor_gpu: the cuda runner cannot serve inductor cases here (the line above says why)" >&2
  exit 2
fi
"$PYTHON" -c "import torch, triton; print('torch', torch.__version__, '| CUDA', torch.version.cuda, '| triton',
triton.__version__, '|', torch.cuda.get_device_name(0))" || true

status=0
echo "== perfguard check suites/inductor-gpu.toml: resnet, max_autotune against default, on the GPU"
timeout "${CHECK_TIMEOUT:-300}" "$PYTHON" -m perfguard check suites/inductor-gpu.toml --against-pipeline default \
  --case 'resnet/[dm]*/cuda' --json "$OUT/check.json" > "$OUT/check.txt" 2>&1 || status=$?
cat "$OUT/check.txt"
echo "check: exit $status (0 same, 1 regression; 124: past CHECK_TIMEOUT)"

if [[ -n "$BUNDLE" ]]; then
  echo "== IREE CUDA: $BUNDLE/run.sh"
  timeout "${BUNDLE_TIMEOUT:-200}" "$BUNDLE/run.sh" "$OUT/iree" || echo "bundle run.sh: exit $?"
else
  echo "== IREE CUDA: no BUNDLE given (benchmarks/device_bundle.sh BUNDLE builds one where PyPI is)"
fi
echo "files: $(ls "$OUT" | tr '\n' ' ')"
exit "$status"
