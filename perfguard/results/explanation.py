"""The explanation document types: why one compared case changed, as data.

These are the objects ``perfguard profile --json`` writes, and that a verdicts document
(``check --explain``) and a bisect document (a culprit, explained) hold under ``explanations``.
They live here, beside the documents that persist them, so that ``compare`` and ``bisect`` (which
sit below ``profile``) hold them typed; the computing (profiles -> diff -> dimension, the GPU
section, the Nsight parsers) stays in ``perfguard.profile``. Each class owns its JSON:
``to_json(from_json(d)) == d`` for every explanation perfguard writes (``tests/golden/explained``).

Format history: see ``perfguard.profile.explain.PROFILE_VERSION`` (version 1; the optional
``gpu`` key of a ``cuda`` pair and the optional ``counted`` key of a counted pair were added
without a version change: older readers ignore them).

An explanation inside a verdicts or bisect document that does not read (hand-edited, cut, a
dimension this perfguard does not know) does not fail the document: it loads as an
``UnreadableExplanation`` that keeps its JSON as found (written back unchanged) with the reason,
and the report and the CLI show that reason as a warning (what they did when they parsed it).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeAlias

from perfguard import jsonfields as f
from perfguard.errors import FieldError
from perfguard.jsonfields import JsonDict
from perfguard.results.counted_functions import CountedPair, CountedWhy

#: The bottleneck dimensions the rules of ``perfguard.profile.dimension`` name.
DIMENSIONS = ("compute", "memory", "scheduling", "compile-overhead", "unclear")


# --- the profile diff (computed by ``perfguard.profile.diff``) ---------------------------------------

@dataclass(frozen=True)
class Spread:
    """A per-inference figure of one side: the mean across workers and the workers' range."""

    mean: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            return cls(0.0, 0.0, 0.0)
        return cls(sum(values) / len(values), min(values), max(values))

    def to_json(self) -> JsonDict:
        return {"mean": self.mean, "low": self.low, "high": self.high}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Spread:
        return cls(f.number(data, "mean", "spread"), f.number(data, "low", "spread"), f.number(data, "high", "spread"))


@dataclass(frozen=True)
class Change:
    """One figure before and after: the change of the means and its interval across workers
    (``delta``... are written for the reader of the JSON and recomputed on reading)."""

    before: Spread
    after: Spread

    @property
    def delta(self) -> float:
        return self.after.mean - self.before.mean

    @property
    def delta_low(self) -> float:
        return self.after.low - self.before.high

    @property
    def delta_high(self) -> float:
        return self.after.high - self.before.low

    @property
    def ratio(self) -> float | None:
        return self.after.mean / self.before.mean if self.before.mean > 0 else None

    def to_json(self) -> JsonDict:
        return {"before": self.before.to_json(), "after": self.after.to_json(), "delta": self.delta,
                "delta_low": self.delta_low, "delta_high": self.delta_high}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Change:
        kind = "profile change"
        return cls(Spread.from_json(f.obj(data, "before", kind)), Spread.from_json(f.obj(data, "after", kind)))


@dataclass(frozen=True)
class OpDelta:
    """One (op type, provider) row: nodes before/after, kernel time (µs per inference), kernels
    per inference, bytes moved (activations read + outputs written) per inference, and the
    row's ``share`` of the total change in ``model_run`` (None when that did not change)."""

    op_type: str
    provider: str
    nodes_before: int
    nodes_after: int
    kernel_us: Change
    kernels: Change
    moved_bytes: Change
    share: float | None

    @property
    def nodes_delta(self) -> int:
        return self.nodes_after - self.nodes_before

    def to_json(self) -> JsonDict:
        return {"op_type": self.op_type, "provider": self.provider, "nodes_before": self.nodes_before,
                "nodes_after": self.nodes_after, "kernel_us": self.kernel_us.to_json(),
                "kernels": self.kernels.to_json(), "moved_bytes": self.moved_bytes.to_json(), "share": self.share}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> OpDelta:
        kind = "op delta"
        return cls(f.string(data, "op_type", kind), f.string(data, "provider", kind),
                   f.integer(data, "nodes_before", kind), f.integer(data, "nodes_after", kind),
                   Change.from_json(f.obj(data, "kernel_us", kind)), Change.from_json(f.obj(data, "kernels", kind)),
                   Change.from_json(f.obj(data, "moved_bytes", kind)), f.opt_number(data, "share", kind))


@dataclass(frozen=True)
class ProfileDiff:
    """Both sides' profiles compared: the op rows (largest change first), ``model_run``, Σ
    kernel time, framework overhead, kernels per inference and ``session_initialization`` (µs),
    and how many worker profiles each side had."""

    ops: tuple[OpDelta, ...]
    model_run_us: Change
    kernel_us: Change
    overhead_us: Change
    kernels: Change
    session_init_us: Change
    workers_before: int
    workers_after: int

    @property
    def total_change_us(self) -> float:
        return self.model_run_us.delta

    @property
    def overhead_share(self) -> float | None:
        total = self.total_change_us
        return self.overhead_us.delta / total if total else None

    def to_json(self) -> JsonDict:
        return {"ops": [o.to_json() for o in self.ops], "model_run_us": self.model_run_us.to_json(),
                "kernel_us": self.kernel_us.to_json(), "overhead_us": self.overhead_us.to_json(),
                "kernels": self.kernels.to_json(), "session_init_us": self.session_init_us.to_json(),
                "workers_before": self.workers_before, "workers_after": self.workers_after}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> ProfileDiff:
        kind = "profile diff"

        def change(key: str) -> Change:
            return Change.from_json(f.obj(data, key, kind))

        return cls(tuple(OpDelta.from_json(o) for o in f.objects(data, "ops", kind)), change("model_run_us"),
                   change("kernel_us"), change("overhead_us"), change("kernels"), change("session_init_us"),
                   f.integer(data, "workers_before", kind), f.integer(data, "workers_after", kind))


# --- the dimension (named by ``perfguard.profile.dimension``) ---------------------------------------

@dataclass(frozen=True)
class CompileChange:
    """Compile time before and after (seconds; the check's ``compile_time`` medians), with the
    interval of the ratio where the check gave one (whether it rose is a rule of
    ``perfguard.profile.dimension.compile_rose``)."""

    before_s: float
    after_s: float
    ci_low: float | None = None

    @property
    def ratio(self) -> float:
        return self.after_s / self.before_s if self.before_s > 0 else float("inf")

    def to_json(self) -> JsonDict:
        return {"before_s": self.before_s, "after_s": self.after_s, "ci_low": self.ci_low}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileChange:
        kind = "compile change"
        return cls(f.number(data, "before_s", kind), f.number(data, "after_s", kind), f.opt_number(data, "ci_low", kind))


@dataclass(frozen=True)
class Dimension:
    """What the rules named: ``label`` (one of ``DIMENSIONS``), the ``rule`` that fired, the
    evidence lines, and ``headline``, one line for a PR comment."""

    label: str
    rule: str
    evidence: tuple[str, ...]
    headline: str

    def to_json(self) -> JsonDict:
        return {"label": self.label, "rule": self.rule, "evidence": list(self.evidence), "headline": self.headline}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Dimension:
        kind = "dimension"
        label = f.string(data, "label", kind)
        if label not in DIMENSIONS:
            raise f.wrong_type(kind, "label", f"one of {', '.join(DIMENSIONS)}", label)
        return cls(label, f.string(data, "rule", kind), f.string_list(data, "evidence", kind),
                   f.string(data, "headline", kind))


# --- the GPU section of a ``cuda`` pair (``perfguard.profile.gpu_diff``, ``perfguard.profile.nsight``)

@dataclass(frozen=True)
class NsysKernel:
    """One row of ``cuda_gpu_kern_sum``: a kernel name, its launches and total time (ns)."""

    name: str
    instances: int
    total_ns: float

    def to_json(self) -> JsonDict:
        return {"name": self.name, "instances": self.instances, "total_ns": self.total_ns}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NsysKernel:
        kind = "nsys kernel"
        return cls(f.string(data, "name", kind), f.integer(data, "instances", kind), f.number(data, "total_ns", kind))


@dataclass(frozen=True)
class NcuKernel:
    """ncu's metrics of one kernel name, means over its profiled launches: duration (ns), SM and
    DRAM throughput in % of peak (None where the GPU did not report them)."""

    name: str
    launches: int
    time_ns: float | None
    sm_pct: float | None
    dram_pct: float | None

    def to_json(self) -> JsonDict:
        return {"name": self.name, "launches": self.launches, "time_ns": self.time_ns, "sm_pct": self.sm_pct,
                "dram_pct": self.dram_pct}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NcuKernel:
        kind = "ncu kernel"
        return cls(f.string(data, "name", kind), f.integer(data, "launches", kind), f.opt_number(data, "time_ns", kind),
                   f.opt_number(data, "sm_pct", kind), f.opt_number(data, "dram_pct", kind))


@dataclass(frozen=True)
class NsightSide:
    """What nsys and ncu saw of one side: ``inferences`` the nsys worker ran, the kernel summary
    (None: not run), ncu's metrics of the top kernels (None: not run), and why a tool was skipped."""

    label: str
    inferences: int
    nsys: tuple[NsysKernel, ...] | None = None
    ncu: tuple[NcuKernel, ...] | None = None
    skipped: tuple[str, ...] = ()

    @property
    def launches(self) -> float:
        """Kernel launches per inference (nsys)."""
        return sum(k.instances for k in self.nsys or ()) / max(1, self.inferences)

    @property
    def kernel_us(self) -> float:
        """Σ kernel time per inference, µs (nsys)."""
        return sum(k.total_ns for k in self.nsys or ()) / 1e3 / max(1, self.inferences)

    def to_json(self) -> JsonDict:
        return {"label": self.label, "inferences": self.inferences,
                "nsys": None if self.nsys is None else [k.to_json() for k in self.nsys],
                "ncu": None if self.ncu is None else [k.to_json() for k in self.ncu], "skipped": list(self.skipped)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> NsightSide:
        kind = "nsight side"
        nsys, ncu = data.get("nsys"), data.get("ncu")
        return cls(f.string(data, "label", kind), f.integer(data, "inferences", kind),
                   None if nsys is None else tuple(NsysKernel.from_json(k) for k in f.objects(data, "nsys", kind)),
                   None if ncu is None else tuple(NcuKernel.from_json(k) for k in f.objects(data, "ncu", kind)),
                   f.string_list(data, "skipped", kind))


@dataclass(frozen=True)
class KernelDelta:
    """One kernel name: launches and µs per inference before/after, and ncu's SM and DRAM
    throughput (% of peak) of the candidate's launches where ncu ran."""

    name: str
    launches: Change
    us: Change
    sm_pct: float | None = None
    dram_pct: float | None = None

    def to_json(self) -> JsonDict:
        return {"name": self.name, "launches": self.launches.to_json(), "us": self.us.to_json(),
                "sm_pct": self.sm_pct, "dram_pct": self.dram_pct}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> KernelDelta:
        kind = "kernel delta"
        return cls(f.string(data, "name", kind), Change.from_json(f.obj(data, "launches", kind)),
                   Change.from_json(f.obj(data, "us", kind)), f.opt_number(data, "sm_pct", kind),
                   f.opt_number(data, "dram_pct", kind))


@dataclass(frozen=True)
class GpuDiff:
    """Both sides' GPU kernels: launches, Σ kernel time (µs) and the GPU-busy fraction of
    ``model_run`` per inference (None from nsys), and the kernel rows, largest change first."""

    source: str
    launches: Change
    kernel_us: Change
    busy: Change | None
    kernels: tuple[KernelDelta, ...]

    def to_json(self) -> JsonDict:
        return {"source": self.source, "launches": self.launches.to_json(), "kernel_us": self.kernel_us.to_json(),
                "busy": None if self.busy is None else self.busy.to_json(),
                "kernels": [k.to_json() for k in self.kernels]}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GpuDiff:
        kind = "gpu diff"
        busy = f.opt_obj(data, "busy", kind)
        return cls(f.string(data, "source", kind), Change.from_json(f.obj(data, "launches", kind)),
                   Change.from_json(f.obj(data, "kernel_us", kind)), None if busy is None else Change.from_json(busy),
                   tuple(KernelDelta.from_json(k) for k in f.objects(data, "kernels", kind)))


@dataclass(frozen=True)
class GpuSection:
    """The GPU part of one explanation: the diff (None: no kernel source on both sides), what the
    Nsight tools saw of each side (before, after; empty when they did not run), and the reasons
    (``skipped: ...``) for what is missing."""

    diff: GpuDiff | None
    nsight: tuple[NsightSide, ...] = ()
    skipped: tuple[str, ...] = ()

    def to_json(self) -> JsonDict:
        return {"diff": None if self.diff is None else self.diff.to_json(),
                "nsight": [s.to_json() for s in self.nsight], "skipped": list(self.skipped)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> GpuSection:
        kind = "gpu section"
        diff = f.opt_obj(data, "diff", kind)
        return cls(None if diff is None else GpuDiff.from_json(diff),
                   tuple(NsightSide.from_json(s) for s in f.objects(data, "nsight", kind)),
                   f.string_list(data, "skipped", kind))


# --- the explanation ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Explanation:
    """Why one case changed: the dimension with its evidence, the profile diff it read (None
    when a side could not be profiled: ``failures`` says why), the compile-time change, on
    the ``cuda`` runner the GPU section (kernels, Nsight metrics, what was skipped and why), and
    where both sides were counted (``--counts``) and their instructions moved past the floor,
    the change attributed to functions (``counted``: "why, counted")."""

    case: str
    baseline: str
    candidate: str
    dimension: Dimension
    diff: ProfileDiff | None
    compile: CompileChange | None = None
    failures: tuple[str, ...] = ()
    trace_file: str | None = None
    gpu: GpuSection | None = None
    counted: CountedWhy | None = None

    @property
    def counted_pair(self) -> CountedPair | None:
        """The counted attribution with this explanation's case and sides (None: not counted)."""
        if self.counted is None:
            return None
        return CountedPair(self.case, self.baseline, self.candidate, self.counted)

    def to_json(self) -> JsonDict:
        data: JsonDict = {"case": self.case, "baseline": self.baseline, "candidate": self.candidate,
                          "dimension": self.dimension.to_json(),
                          "diff": None if self.diff is None else self.diff.to_json(),
                          "compile": None if self.compile is None else self.compile.to_json(),
                          "failures": list(self.failures), "trace_file": self.trace_file}
        if self.gpu is not None:
            data["gpu"] = self.gpu.to_json()
        if self.counted is not None:
            data["counted"] = self.counted.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Explanation:
        """Read what ``to_json`` writes. As the report always has, a hand-written explanation may
        be cut to its dimension: an absent case, side label or failure list reads as empty (and
        is written back in full); a field of the wrong type is a one-line ``FieldError``."""
        kind = "explanation"
        diff, change = f.opt_obj(data, "diff", kind), f.opt_obj(data, "compile", kind)
        gpu, counted = f.opt_obj(data, "gpu", kind), f.opt_obj(data, "counted", kind)

        def text(key: str) -> str:
            return f.opt_string(data, key, kind) or ""

        return cls(text("case"), text("baseline"), text("candidate"), Dimension.from_json(f.obj(data, "dimension", kind)),
                   None if diff is None else ProfileDiff.from_json(diff),
                   None if change is None else CompileChange.from_json(change),
                   f.string_list(data, "failures", kind) if data.get("failures") is not None else (),
                   f.opt_string(data, "trace_file", kind), None if gpu is None else GpuSection.from_json(gpu),
                   None if counted is None else CountedWhy.from_json(counted))


@dataclass(frozen=True)
class UnreadableExplanation:
    """An explanation of a verdicts or bisect document that does not read as an ``Explanation``:
    its JSON as found (written back unchanged), and ``problem``, the one-line reason, which the
    report and the CLI show as a warning instead of failing the whole document."""

    data: JsonDict
    problem: str

    @property
    def case(self) -> str:
        """The case it names, where it names one as a string (else ``?``)."""
        case = self.data.get("case")
        return case if isinstance(case, str) and case else "?"

    def to_json(self) -> JsonDict:
        return self.data


#: What a document's ``explanations`` hold: each read once, when the document is loaded.
StoredExplanation: TypeAlias = "Explanation | UnreadableExplanation"


def read_explanation(data: Mapping[str, object]) -> StoredExplanation:
    """One explanation of a document, typed; one that does not read is kept as found, with why."""
    try:
        return Explanation.from_json(data)
    except (FieldError, TypeError, ValueError) as exc:
        return UnreadableExplanation(f.json_object(data, "explanation"), str(exc))
