"""Every timed Inductor value runs the artifact's compiled graph (issue 45).

A measuring worker loads a case's variants one after another. Each load used to reset Dynamo,
which dropped the compiled code of the variants loaded before it: each of them compiled again on
its first timed call (without its pipeline's passes, inside the calibration), and the values were
bimodal. The worker now proves before timing that no variant compiles again, and that nothing
compiled during the timed rounds (``perfguard.workers.jit``); a worker that cannot prove it fails
in one line. The proof's logic is tested with stand-in executables (no torch); the fix with a real
compile of a tiny model, skipped without torch.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest

from perfguard.errors import BackendError
from perfguard.workers.jit import check_still_compiled, jit_counts, prove_compiled

from .test_inductor import _torch_missing

TINY = {"depth": 1, "width": 4, "image_size": 16, "num_classes": 4}


class _Process:
    """Process-wide compile counts, as Dynamo's counters are."""

    def __init__(self) -> None:
        self.compiles = 0


class _Jitted:
    """An executable that compiles on its first ``compiles_on_first`` calls."""

    def __init__(self, process: _Process, compiles_on_first: int = 0) -> None:
        self.process, self.pending = process, compiles_on_first

    def run(self, feeds):
        if self.pending:
            self.pending -= 1
            self.process.compiles += 1
        return [np.zeros(1)]

    def jit_events(self) -> dict[str, int]:
        return {"Dynamo compiles": self.process.compiles, "graph breaks": 0}


class _Compiled:
    """An executable compiled before it loads (ORT, IREE, TVM): nothing to count."""

    def run(self, feeds):
        return [np.zeros(1)]


def test_a_variant_that_compiles_again_after_the_loads_is_refused_by_name():
    process = _Process()
    executables = {"m/a/cpu": _Jitted(process), "m/b/cpu": _Jitted(process, compiles_on_first=1)}
    with pytest.raises(BackendError, match=r"^m/b/cpu compiled again .*\(1 Dynamo compiles, 0 graph breaks\)"):
        prove_compiled(executables, {}, lambda: None)


def test_a_compile_during_the_timed_rounds_fails_the_workers_values():
    process = _Process()
    executables = {"m/a/cpu": _Jitted(process)}
    before = prove_compiled(executables, {}, lambda: None)
    assert before == {"Dynamo compiles": 0, "graph breaks": 0}
    check_still_compiled(executables, before)  # nothing moved
    process.compiles += 1
    with pytest.raises(BackendError, match="timed rounds compiled again"):
        check_still_compiled(executables, before)


def test_executables_compiled_ahead_are_not_checked():
    executables = {"m/a/cpu": _Compiled()}
    assert jit_counts(executables) == {} and prove_compiled(executables, {}, lambda: None) == {}
    check_still_compiled(executables, {})


# -- real compiles ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    if _torch_missing():
        pytest.skip(_torch_missing())
    import torch

    from perfguard.backends import get_backend
    from perfguard.models.zoo import build_model
    from perfguard.suite import PipelineSpec

    torch.set_num_threads(1)
    folder = tmp_path_factory.mktemp("inductor-timing")
    onnx.save(build_model("resnet", TINY), str(folder / "tiny.onnx"))
    out = get_backend("inductor").compile(folder / "tiny.onnx", PipelineSpec("default", "inductor", (), {}),
                                          folder / "a")
    return folder / "tiny.onnx", out.artifact


def _feeds(model: Path) -> dict[str, np.ndarray]:
    from perfguard.models.inputs import input_specs, make_feeds

    return make_feeds(input_specs(onnx.load(str(model))), 1)


@pytest.mark.slow
def test_loading_another_variant_keeps_the_first_ones_compiled_code(artifact):
    """The mechanism of issue 45: on today's main the second load reset Dynamo, and the first
    executable's next call compiled again (1 Dynamo compile, outside the artifact's config)."""
    from perfguard.backends import get_backend
    from perfguard.backends.inductor.torch_compile import dynamo_events
    from perfguard.runners import get_runner

    model, compiled = artifact
    backend, runner, feeds = get_backend("inductor"), get_runner("cpu"), _feeds(model)
    first = backend.load(compiled, runner, 1)
    first.run(feeds)
    second = backend.load(compiled, runner, 1)
    second.run(feeds)
    loaded = dynamo_events()
    for _ in range(3):
        first.run(feeds)
        second.run(feeds)
    assert dynamo_events() == loaded  # no recompilation, no graph break


@pytest.mark.slow
def test_a_measuring_worker_times_every_variant_without_compiling_again(artifact, monkeypatch):
    """``do_measure`` with two variants in one process: no compile between the loads' and the end of
    the timed rounds. With Dynamo reset on every load (today's main), the worker refuses, by name,
    the variant that compiled again, and keeps none of its values."""
    from torch._dynamo.utils import counters

    import perfguard.backends.inductor as inductor
    from perfguard.models.inputs import input_specs
    from perfguard.workers.protocol import MeasureRequest, MeasureVariant
    from perfguard.workers.worker import do_measure

    model, compiled = artifact
    request = MeasureRequest(variants=(MeasureVariant("m/a/cpu", compiled), MeasureVariant("m/b/cpu", compiled)),
                             runner="cpu", runner_options=None, threads=1, warmup=1, rounds=2, min_time=0.002, seed=0,
                             worker_index=0, input_specs=tuple(input_specs(onnx.load(str(model)))))
    frames = counters["frames"]["total"]
    response = do_measure(request)
    assert counters["frames"]["total"] - frames == 2  # one compile per load, none on a timed call
    assert all(len(values) == 2 for values in response.values.values())

    original = inductor.compile_model
    monkeypatch.setattr(inductor, "compile_model", lambda *a, **k: original(*a, **{**k, "keep_loaded": False}))
    with pytest.raises(BackendError, match=r"^m/a/cpu compiled again when run after the other variants loaded"):
        do_measure(request)
