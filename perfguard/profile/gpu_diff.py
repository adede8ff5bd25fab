"""The GPU part of an explanation (``cuda`` runner): kernels per inference before and after, from
ORT's ``Kernel`` events or else from Nsight Systems, with Nsight Compute's throughputs of the top
kernels, and why any of it is missing.

Figures are per inference. From ORT's events (``source: "ort"``) they come from every profiled
worker of a side, mean across workers with their range (``perfguard.results.explanation.Spread``); from
nsys (``source: "nsys"``) from the one nsys worker of each side, so the range is that one value
and the GPU-busy fraction is unknown (None). Kernels are matched by name (the demangled name both
ORT and the Nsight tools print); a kernel among the top of one side only counts as 0 on the other.
ncu's SM and DRAM throughput (% of peak) are the candidate's: the rules read them on the kernels
that grew (``perfguard.profile.dimension``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from perfguard.results.explanation import (
    Change,
    GpuDiff,
    GpuSection,
    KernelDelta,
    NcuKernel,
    NsightSide,
    Spread,
)
from perfguard.workers.gpu import GpuProfile, KernelStat

#: Kernel rows a GPU diff keeps (largest change of time first).
KERNEL_ROWS = 10


def _change(before: Sequence[float], after: Sequence[float]) -> Change:
    return Change(Spread.of(list(before)), Spread.of(list(after)))


def _rows(before: Sequence[Sequence[KernelStat]], after: Sequence[Sequence[KernelStat]]) -> tuple[KernelDelta, ...]:
    """Kernel rows matched by name; each side's lists are one per worker."""
    names = sorted({k.name for side in (*before, *after) for k in side})

    def values(side: Sequence[Sequence[KernelStat]], name: str, attr: str) -> list[float]:
        return [float(next((getattr(k, attr) for k in worker if k.name == name), 0.0)) for worker in side]

    rows = [KernelDelta(n, _change(values(before, n, "launches"), values(after, n, "launches")),
                        _change(values(before, n, "us"), values(after, n, "us"))) for n in names]
    rows.sort(key=lambda r: (-abs(r.us.delta), r.name))
    return tuple(rows[:KERNEL_ROWS])


def diff_kernel_events(before: Sequence[GpuProfile], after: Sequence[GpuProfile]) -> GpuDiff:
    """The GPU diff of the profiles' ``Kernel`` aggregates (ORT's events), one per worker of each side."""
    def of(value: Callable[[GpuProfile], float]) -> Change:
        return _change([value(p) for p in before], [value(p) for p in after])

    return GpuDiff("ort", of(lambda p: p.launches), of(lambda p: p.kernel_us), of(lambda p: p.busy),
                   _rows([p.top for p in before], [p.top for p in after]))


def diff_nsys(before: NsightSide, after: NsightSide) -> GpuDiff:
    """The GPU diff of the nsys kernel summaries of both sides (per inference of each worker)."""
    def stats(side: NsightSide) -> list[KernelStat]:
        runs = max(1, side.inferences)
        return [KernelStat(k.name, k.instances / runs, k.total_ns / 1e3 / runs) for k in side.nsys or ()]

    return GpuDiff("nsys", _change([before.launches], [after.launches]), _change([before.kernel_us], [after.kernel_us]),
                   None, _rows([stats(before)], [stats(after)]))


def _ncu_match(name: str, metrics: Sequence[NcuKernel]) -> NcuKernel | None:
    exact = next((m for m in metrics if m.name == name), None)
    return exact or next((m for m in metrics if name.startswith(m.name) or m.name.startswith(name)), None)


def with_ncu(diff: GpuDiff, after: NsightSide | None) -> GpuDiff:
    """``diff`` with ncu's throughputs of the candidate's kernels set on the matching rows."""
    if after is None or not after.ncu:
        return diff
    rows = []
    for row in diff.kernels:
        found = _ncu_match(row.name, after.ncu)
        rows.append(row if found is None else replace(row, sm_pct=found.sm_pct, dram_pct=found.dram_pct))
    return replace(diff, kernels=tuple(rows))


def build_section(before: Sequence[GpuProfile | None], after: Sequence[GpuProfile | None],
                  nsight: Sequence[NsightSide] = (), skipped: Sequence[str] = ()) -> GpuSection:
    """The GPU section: ORT's kernels where every worker of both sides has them, else nsys's."""
    reasons = list(skipped)
    profiled_before = [p for p in before if p is not None]
    profiled_after = [p for p in after if p is not None]
    diff = None
    if profiled_before and profiled_after and len(profiled_before) == len(before) \
            and len(profiled_after) == len(after):
        diff = diff_kernel_events(profiled_before, profiled_after)
    else:
        reasons.append("skipped: ORT kernels: the profiles hold no Kernel events (ONNX Runtime records them only in "
                       "builds made with --enable_cuda_profiling)")
        if len(nsight) == 2 and nsight[0].nsys is not None and nsight[1].nsys is not None:
            diff = diff_nsys(nsight[0], nsight[1])
    for side in nsight:  # a reason every side shares is said once, without the side's label
        reasons.extend(reason if all(reason in other.skipped for other in nsight) else f"{side.label}: {reason}"
                       for reason in side.skipped)
    if diff is not None and len(nsight) == 2:
        diff = with_ncu(diff, nsight[1])
    return GpuSection(diff, tuple(nsight), tuple(dict.fromkeys(reasons)))


def gpu_lines(section: GpuSection, us: Callable[[float, bool], str], rows: int = 3) -> list[str]:
    """The short GPU block of ``perfguard profile``'s printout (``us`` formats µs, signed or not)."""
    lines = []
    diff = section.diff
    if diff is not None:
        launches, kernel = diff.launches, diff.kernel_us
        line = (f"GPU ({diff.source}): {launches.before.mean:.0f} -> {launches.after.mean:.0f} kernel launches per "
                f"inference, kernel time {us(kernel.before.mean, False)} -> {us(kernel.after.mean, False)} "
                f"({us(kernel.delta, True)})")
        if diff.busy is not None:
            line += f", GPU busy {diff.busy.before.mean * 100:.0f}% -> {diff.busy.after.mean * 100:.0f}% of model_run"
        lines.append(line)
        for row in diff.kernels[:rows]:
            metrics = ""
            if row.sm_pct is not None or row.dram_pct is not None:
                metrics = f", ncu SM {_pct(row.sm_pct)} DRAM {_pct(row.dram_pct)}"
            lines.append(f"  {us(row.us.delta, True)} {_short(row.name)} ({row.launches.before.mean:.0f} -> "
                         f"{row.launches.after.mean:.0f} launches{metrics})")
    for side in section.nsight:
        if side.nsys is not None:
            lines.append(f"  nsys {side.label}: {side.launches:.0f} launches, {us(side.kernel_us, False)} of kernels "
                         f"per inference")
    lines.extend(f"  {reason}" for reason in section.skipped)
    return lines


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0f}%"


def _short(name: str, limit: int = 70) -> str:
    return name if len(name) <= limit else name[:limit - 3] + "..."
