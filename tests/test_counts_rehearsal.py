"""The counted compiles' rehearsal (``perfguard.counting.child._serve_rehearsed``): a batch's
counted compiles are children of one more child, which first compiles a fixed model with nothing
counted (``Backend.rehearse_counted_compile``), so that they find that code translated.

These tests run the batch natively, in this process (no Valgrind: every client request is a
no-op and ``valgrind`` reads 0), with real forks and a real ONNX Runtime compile of a tiny
ResNet: what they check is the batch's bookkeeping (which outcome reaches which item, a failed
rehearsal) and the rehearsal itself; what it saves under Valgrind is measured by
``benchmarks/counts.py --split`` (docs/measured.md, "Counted compiles, rehearsed").
"""

from __future__ import annotations

from pathlib import Path

import pytest

from perfguard.backends import get_backend
from perfguard.backends.ort import OrtBackend
from perfguard.counting.child import CountBatchRequest, CountCompileRequest, CountRequest, do_count_batch
from perfguard.counting.plan import Target, target_plan
from perfguard.counting.take import _items
from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.suite import load_suite

SUITE = """
[suite]
name = "rehearsal"
backend = "ort"
runners = ["cpu"]

[measure]
workers = 1
rounds = 1
warmup = 1
min_time = "1ms"
threads = 1

[models.tiny]
arch = "resnet"
params = { depth = 1, width = 2, image_size = 8, num_classes = 4 }

[pipelines.none]
passes = []

[pipelines.fused]
passes = ["fuse_bn_into_conv"]

[[cases]]
model = "tiny"
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> CountBatchRequest:
    """A batch of two runs and two counted compiles (``none`` and ``fused``), interleaved as
    ``count_targets`` builds them."""
    folder = tmp_path_factory.mktemp("rehearsal")
    (folder / "suite.toml").write_text(SUITE)
    suite = load_suite(folder / "suite.toml")
    job = Job(suite, list(suite.cases), workdir=folder / "job", progress=Progress())
    job.compile(memory=False)
    scratch = folder / "scratch"
    scratch.mkdir()
    items = [item for index, compiled in enumerate(job.compiled)
             for item in _items(suite, Target(compiled), scratch, index, target_plan(Target(compiled), False))]
    assert [type(item) for item in items] == [CountRequest, CountCompileRequest] * 2
    return CountBatchRequest(tuple(items), ("ort",), 2)


def test_every_item_gets_its_own_outcome_and_the_compiles_their_windows(batch: CountBatchRequest) -> None:
    outcomes = do_count_batch(batch).items
    assert len(outcomes) == 4 and all(o.response is not None for o in outcomes), outcomes
    runs, compiles = outcomes[0::2], outcomes[1::2]
    assert [o.response.windows[0] for o in runs if o.response] == ["0000|3|0", "0001|3|0"]  # a small model: 3
    none, fused = (o.response.windows for o in compiles if o.response)
    assert none == ("step|ort_session_optimization",)  # no pass: the session step alone
    assert fused[0] == "work|0" and fused[-1] == "step|ort_session_optimization"
    assert len({o.response.pid for o in outcomes if o.response}) == 4  # a child each


def test_a_failed_rehearsal_fails_the_compiles_in_one_line_and_the_runs_are_counted(
        batch: CountBatchRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: OrtBackend, folder: Path) -> bool:
        raise RuntimeError("no space left on device")

    monkeypatch.setattr(OrtBackend, "rehearse_counted_compile", broken)
    outcomes = do_count_batch(batch).items
    assert [o.response is not None for o in outcomes] == [True, False, True, False]
    failures = {o.failure for o in outcomes[1::2]}
    assert failures == {"the counted compiles' rehearsal failed: RuntimeError: no space left on device"}


def test_the_rehearsal_compiles_a_fixed_model_and_writes_only_in_its_folder(tmp_path: Path) -> None:
    from perfguard.backends.counting_hooks import COUNT_WINDOW

    seen: list[str] = []

    def window(label: str):  # type: ignore[no-untyped-def]
        from contextlib import nullcontext

        seen.append(label)
        return nullcontext()

    token = COUNT_WINDOW.set(window)
    try:
        assert get_backend("ort").rehearse_counted_compile(tmp_path) is True
    finally:
        COUNT_WINDOW.reset(token)
    # Two models at two levels each, the session step counted at "disabled" too.
    assert seen == ["step|ort_session_optimization"] * 4
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".onnx") == ["rehearsal-0.onnx",
                                                                                  "rehearsal-1.onnx"]


@pytest.mark.slow
def test_a_compile_counts_alike_in_a_job_of_its_own_and_beside_others(tmp_path: Path) -> None:
    """Under Valgrind (two real counted processes): the rehearsal is the same in every job, so
    a compile's count does not depend on what else its job counts (a base side served from the
    cache is compared with a head side counted in another job). The same compile in one job
    counted beside the other pipeline's, in the other alone: equal within a tenth of the
    ``compile_instructions`` floor (0.5 %)."""
    import shutil

    from perfguard.counting.take import count_targets

    if shutil.which("valgrind") is None:
        pytest.skip("needs Valgrind")
    (tmp_path / "suite.toml").write_text(SUITE)
    suite = load_suite(tmp_path / "suite.toml")
    job = Job(suite, list(suite.cases), workdir=tmp_path / "job", progress=Progress())
    try:
        job.compile(memory=False)
        none, fused = job.compiled
        both = count_targets(suite, [Target(none), Target(fused)], tmp_path / "both")
        alone = count_targets(suite, [Target(fused)], tmp_path / "alone")
    finally:
        job.close()
    beside, own = both[1].compile, alone[0].compile
    assert beside is not None and own is not None, (both[1].compile_failure, alone[0].compile_failure)
    assert own.steps["ort_session_optimization"] > 0 and own.per_pass[0] > 0
    assert abs(beside.total / own.total - 1) < 0.0005, (beside, own)
