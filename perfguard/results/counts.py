"""Counted evidence: what Valgrind's callgrind counts of one artifact per inference (:class:`Counts`),
and of one compile per pass (:class:`CompileCounts`) (``docs/guides/exact-evidence.md``; they are
taken by ``perfguard.counting``).

Counts are exact in the sense node count is: the same artifact on the same machine, library and
Valgrind gives the same figure within a few parts in 10^5 (``docs/measured.md``, "Counted
evidence"), so a change beyond its floor is a change of the code that ran, with no repetition
and no test. They are *not* time: Valgrind runs the program on a simulated CPU (no AVX-512,
a simulated two-level cache) and ``estimated_cycles`` is a weighting of its events, not a
measurement of a clock.

``estimated_cycles`` is iai-callgrind's (after Itamar Turner-Trauring, "consistent benchmarking
in CI"): ``L1 hits + 5 x LL hits + 35 x RAM hits``, where the accesses are ``Ir + Dr + Dw``,
the L1 misses ``I1mr + D1mr + D1mw``, the last-level misses ``ILmr + DLmr + DLmw`` (RAM hits), L1 hits
are the accesses that did not miss L1 and LL hits the L1 misses that did not miss LL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from perfguard import jsonfields as f
from perfguard.jsonfields import JsonDict
from perfguard.results.counted_functions import FunctionCount, functions_from_json, functions_json

#: The callgrind events a counted window records (``--cache-sim=yes``), in its output's order.
EVENTS = ("Ir", "Dr", "Dw", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")
#: The figures of ``Counts`` that are metrics of their own (compared, gated, stored in the history).
COUNTED_FIGURES = ("instructions", "estimated_cycles")
#: How a count is taken (``perfguard.counting``): counts of two protocols are not compared
#: (a figure includes the window's fixed cost over N and the state warm-up leaves). 1: a warm-up
#: of 2 inferences each side of the instrumentation switch, windows of 1 and 5 (until
#: 2026-12-06; documents without ``protocol`` are of 1). 2: three warm-up inferences before the
#: switch and one after, one window of 3. 3 (2026-12-06): as 2, with the runtime imported once in
#: the counted process before its children fork (``Backend.preload``), not in each child.
#: 4 (2026-12-07): the window calls the backend's bound step (``BindableExecutable``: ORT's
#: IOBinding, no conversion or allocation per call) and prepared client requests; targets staged
#: under names of one length in a folder of the system's; glibc's tcache holds every freed
#: chunk; warm-up and window sized by the model (``counting.plan.count_plan``: 1 and 1 from
#: 100 M MACs), the cache simulation only on request (``cache``), and then one instrumented
#: warm-up inference. 5 (2026-12-07): a job's counted compiles are forked from a rehearsal
#: (``Backend.rehearse_counted_compile``: ONNX Runtime's session step on fixed models, instrumented,
#: nothing counted), so a compile's windows no longer hold the runtime's first-session set-up,
#: and a counted compile computes no trace (``onnx_passes.apply_pipeline``). Also 5: ONNX Runtime's
#: telemetry off in the counted process (``counting.valgrind.COUNTED_ENV``), whose thread moved a
#: run's count between processes by up to 0.03 %.
COUNT_PROTOCOL = 5
#: The weights of ``estimated_cycles``: an L1 hit, a last-level hit, a RAM access.
L1_WEIGHT, LL_WEIGHT, RAM_WEIGHT = 1, 5, 35


def estimated_cycles(events: Mapping[str, float]) -> float:
    """``L1 hits + 5 x LL hits + 35 x RAM hits`` from callgrind's events (see the module's
    docstring); events that are absent count 0."""
    def total(*names: str) -> float:
        return sum(float(events.get(name, 0)) for name in names)

    accesses, l1_misses, ll_misses = total("Ir", "Dr", "Dw"), total("I1mr", "D1mr", "D1mw"), total("ILmr", "DLmr", "DLmw")
    return L1_WEIGHT * (accesses - l1_misses) + LL_WEIGHT * (l1_misses - ll_misses) + RAM_WEIGHT * ll_misses


@dataclass(frozen=True)
class Counts:
    """Callgrind's counts of one artifact, per inference: ``instructions`` (Ir), data reads and
    writes, L1 and last-level misses, ``estimated_cycles``.

    ``inferences`` is the N of the count; ``method`` how the per-inference figure was made
    (``least``, protocol 4: the least of N windows of one inference each; ``window``: a window of
    N inferences after warm-up, divided by N; ``difference``: the window of N minus a window of 1,
    over N - 1); ``tool`` the Valgrind that counted;
    ``protocol`` how the count was taken (:data:`COUNT_PROTOCOL`; 1 in documents without it).
    ``functions`` (optional, absent in older documents): the largest functions of the window
    by their own instructions per inference (``perfguard.results.counted_functions``).
    ``cache``: whether callgrind simulated the caches (``--counts-cache``; documents before
    protocol 4 always did); without it the misses are 0 and ``estimated_cycles`` is no metric
    (:meth:`value` is None)."""

    instructions: float
    data_reads: float
    data_writes: float
    l1_misses: float
    ll_misses: float
    estimated_cycles: float
    inferences: int
    method: str
    tool: str
    functions: tuple[FunctionCount, ...] = ()
    protocol: int = 1
    cache: bool = True

    @property
    def taken(self) -> str:
        """How it was counted, as a line names it: ``valgrind-3.19.0, window of 3, protocol 2``."""
        return f"{self.tool}, {self.method} of {self.inferences}, protocol {self.protocol}"

    def incomparable(self, other: Counts) -> str | None:
        """Why this count and ``other`` cannot be compared (taken by different Valgrinds, methods,
        windows or protocols), or None."""
        if self.taken == other.taken:
            return None
        return f"counted differently ({self.taken} against {other.taken}): count both sides with one perfguard"

    @classmethod
    def from_events(cls, events: Mapping[str, float], inferences: int, method: str, tool: str,
                    cache: bool = True, windows: int | None = None) -> Counts:
        """Per-inference counts from the events of a window that ran ``inferences`` inferences
        (already a per-inference difference when ``inferences`` is 1); ``cache``: whether the
        caches were simulated; ``windows``: the N recorded (``least`` of N windows of one
        inference: the events are of one window, N is how many were counted)."""
        def per(*names: str) -> float:
            return sum(float(events.get(name, 0)) for name in names) / inferences

        cycles = estimated_cycles(events) / inferences if cache else 0.0
        return cls(per("Ir"), per("Dr"), per("Dw"), per("I1mr", "D1mr", "D1mw"), per("ILmr", "DLmr", "DLmw"),
                   cycles, windows or inferences, method, tool, protocol=COUNT_PROTOCOL, cache=cache)

    def value(self, metric: str) -> float | None:
        """The figure of a counted metric by its name (``instructions``, ``estimated_cycles``);
        None for ``estimated_cycles`` of a count without the cache simulation."""
        if metric == "estimated_cycles" and not self.cache:
            return None
        return float(getattr(self, metric))

    def to_json(self) -> JsonDict:
        return {"instructions": self.instructions, "data_reads": self.data_reads, "data_writes": self.data_writes,
                "l1_misses": self.l1_misses, "ll_misses": self.ll_misses, "estimated_cycles": self.estimated_cycles,
                "inferences": self.inferences, "method": self.method, "tool": self.tool, "protocol": self.protocol,
                **({"functions": functions_json(self.functions)} if self.functions else {}),
                **({} if self.cache else {"cache": False})}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> Counts:
        kind = "counts"

        def figure(key: str) -> float:
            value = f.finite(data, key, kind)
            if value < 0:
                raise f.wrong_type(kind, key, "a count >= 0", value)
            return value

        return cls(figure("instructions"), figure("data_reads"), figure("data_writes"), figure("l1_misses"),
                   figure("ll_misses"), figure("estimated_cycles"), f.count(data, "inferences", kind),
                   f.string(data, "method", kind), f.string(data, "tool", kind), functions_from_json(data, kind),
                   f.count(data, "protocol", kind) if "protocol" in data else 1,
                   f.boolean(data, "cache", kind) if "cache" in data else True)


@dataclass(frozen=True)
class CompileCounts:
    """A counted compile: ``total`` instructions of its real work (every pass, or onnxoptimizer
    group, and the backend's own steps), ``per_pass`` by pass index, ``steps`` by name."""

    total: int
    per_pass: Mapping[int, int]
    steps: Mapping[str, int]

    def to_json(self) -> JsonDict:
        return {"total": self.total, "per_pass": {str(k): v for k, v in self.per_pass.items()},
                "steps": dict(self.steps)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> CompileCounts:
        kind = "compile counts"
        per_pass = f.int_map(data, "per_pass", kind)
        if not all(index.isdigit() for index in per_pass):
            raise ValueError(f"{kind}: per_pass is not a count by pass index")
        return cls(f.integer(data, "total", kind), {int(index): value for index, value in per_pass.items()},
                   f.int_map(data, "steps", kind))
