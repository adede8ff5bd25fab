"""The bottleneck dimension of a change: compute, memory, scheduling, compile-overhead or unclear,
with the evidence that named it.

The rules read a ``ProfileDiff`` (per-inference figures, see ``perfguard.profile.diff``) and,
where there is one, the compile-time change of the check. They are tried in this order and the
first that holds names the dimension:

1. **compile-overhead** (``compile``): the run is flat (both artifacts have one execution identity,
   so they run the same code; or the run time changed by less than ``SLOWER``), and the compile
   time or ORT's ``session_initialization`` (its own graph optimization at load) rose by at least
   ``COMPILE_UP`` with an interval above 0.
2. **unclear** (``no-slowdown``): the run is flat and nothing else rose.
3. **memory** (``data-movement``): data-movement ops (``DATA_MOVEMENT_OPS``: Transpose, Reshape,
   Cast, Concat, Split, Gather, Identity, copies, layout reorders...) explain at least ``DOMINANT``
   of the change in ``model_run``; or the op types whose node count changed are data-movement ops
   for at least ``DOMINANT`` of their change, and that is at least ``STRUCTURAL`` of the whole
   change (inserted layout transposes also slow the ops around them, through the caches: that
   collateral time sits in ops whose node count did not change, and the evidence names it).
4. **scheduling** (``more-kernels``): kernels per inference rose by at least ``MORE_KERNELS``, the
   added kernels are small (the kernel time they added, per added kernel, is at most
   ``SMALL_KERNEL`` of the mean kernel before) and the framework overhead (``model_run`` − Σ
   kernel time) explains at least ``STRUCTURAL`` of the change; or the framework overhead alone
   explains at least ``DOMINANT``.
5. **memory** (``bytes``): bytes moved per inference (activations read + outputs written) rose by
   at least ``MORE_BYTES``, and op types present on both sides whose bytes *per node* rose by more
   than 10 % (bigger tensors, not more nodes) explain at least ``DOMINANT``.
6. **compute** (``arithmetic``): arithmetic ops (``ARITHMETIC_OPS``: Conv, MatMul, Gemm, Add, Mul,
   normalizations, activations, pools...) explain at least ``DOMINANT``: the same work done
   slower, or more arithmetic (the evidence says whether their node count changed).
7. **unclear** (``mixed``): no class dominates; the evidence lists the largest contributors.

A backend without a runtime profiler here (``Capabilities.profile`` False: IREE, TVM, Inductor)
has its changes read from its artifact's counts instead (:func:`classify_counts`), in the
backend's own words (``Backend.count_wording``): IREE's dispatch count of each module
(``stream-aggregate`` / ``execution`` / ``dispatch-count``), TVM's PrimFuncs, Inductor's kernels;
deterministic and cheap. The count rising is **scheduling** (``more-dispatches``,
``more-primfuncs``...: more, smaller kernels, each a launch); compile time rising with the count
unchanged is **compile-overhead**; otherwise **unclear**, saying that the change is inside the
kernels and no profiler can tell compute from memory.

On the ``cuda`` runner, when the explanation has GPU evidence (``perfguard.profile.gpu_diff``: ORT's
``Kernel`` events or Nsight Systems' kernel summary, and Nsight Compute's throughputs where it
ran), rules G1-G5 take the place of rules 3-7: there the ``Node`` events time the host's
launches, not the kernels.

G1. **scheduling** (``more-launches``): kernel launches per inference rose by at least
    ``MORE_KERNELS``, and either the added launches are small (the kernel time they added, per added
    launch, is at most ``SMALL_KERNEL`` of the mean kernel before) or the GPU-busy fraction of
    ``model_run`` fell by at least ``BUSY_DROP``; or (``gpu-idle``) the busy fraction fell by at
    least ``BUSY_DROP`` while Σ kernel time explains less than ``DOMINANT`` of the change (the
    GPU waits on the host).
G2. **memory** (``dram-bound``): among the kernels whose time grew, those ncu measured with DRAM
    throughput at least ``HIGH_THROUGHPUT`` % of peak and above their SM throughput explain at
    least ``DOMINANT`` of the kernels' growth.
G3. **compute** (``sm-bound``): the same with SM throughput at least ``HIGH_THROUGHPUT`` % and at
    least the DRAM throughput.
G4. **compute** (``kernel-time``): no ncu metrics on the grown kernels, the launches flat (less
    than ``MORE_KERNELS`` more), and Σ kernel time explains at least ``DOMINANT`` of the change:
    the same kernels take longer (the evidence says that without ncu memory-bound kernels cannot
    be ruled out).
G5. **unclear** (``gpu-mixed``): nothing dominates (ncu saw both throughputs below
    ``HIGH_THROUGHPUT``: latency-bound kernels, or the growth is spread); the evidence lists the
    kernels that grew most.

Rules 3-7 and G1-G5 run when the run time rose by at least ``SLOWER``. When the workers disagree (the
interval of the change holds 0: on a loaded machine process-to-process noise reaches 20 %), the
first evidence line says so and the label stands on the shares alone. The profiler adds its own
cost per node, so shares, not absolute times, carry the judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from perfguard.results.explanation import CompileChange, Dimension, OpDelta, ProfileDiff
from perfguard.units import format_bytes, format_duration

if TYPE_CHECKING:
    from perfguard.backends.base import CountWording
    from perfguard.results.explanation import GpuDiff, KernelDelta

#: Ops that move or reshape data without arithmetic on it.
DATA_MOVEMENT_OPS = frozenset({
    "Transpose", "Reshape", "Cast", "Concat", "Split", "Gather", "GatherElements", "GatherND", "Identity",
    "Copy", "MemcpyToHost", "MemcpyFromHost", "Slice", "Squeeze", "Unsqueeze", "Flatten", "Expand", "Tile",
    "Pad", "DepthToSpace", "SpaceToDepth", "ScatterND", "ScatterElements", "ReorderInput", "ReorderOutput",
})
#: Ops whose cost is arithmetic on their data.
ARITHMETIC_OPS = frozenset({
    "Conv", "FusedConv", "ConvTranspose", "MatMul", "FusedMatMul", "MatMulInteger", "Gemm", "FusedGemm",
    "Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Exp", "Log", "Erf", "Tanh", "Sigmoid", "Relu", "LeakyRelu",
    "Clip", "Neg", "Abs", "Min", "Max", "Sum", "Mean", "Softmax", "LogSoftmax", "LayerNormalization",
    "SkipLayerNormalization", "SimplifiedLayerNormalization", "BatchNormalization", "InstanceNormalization",
    "ReduceMean", "ReduceSum", "ReduceMax", "Gelu", "BiasGelu", "FastGelu", "QuickGelu", "Attention",
    "MultiHeadAttention", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "LRN", "Einsum",
})

SLOWER = 0.03
DOMINANT = 0.5
MORE_KERNELS = 0.10
SMALL_KERNEL = 0.5
STRUCTURAL = 0.25
MORE_BYTES = 0.25
COMPILE_UP = 0.10
#: A fall of the GPU-busy fraction of ``model_run`` (absolute: 0.10 is 10 points) that counts.
BUSY_DROP = 0.10
#: % of peak above which ncu's SM or DRAM throughput counts as the bound (ncu's SpeedOfLight rule
#: reads "below 60.0% of peak typically indicate latency issues").
HIGH_THROUGHPUT = 60.0


def compile_rose(change: CompileChange) -> bool:
    """The compile time rose (rule 1): by at least ``COMPILE_UP``, and the check's interval of the
    ratio, where it gave one, lies above 1."""
    return change.ratio >= 1 + COMPILE_UP and (change.ci_low is None or change.ci_low > 1)


def us(value: float, sign: bool = True) -> str:
    """µs as a human duration, signed: ``+9.8 ms``."""
    text = format_duration(abs(value) / 1e6)
    return (("+" if value >= 0 else "-") if sign else "") + text


def _pct(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{(ratio - 1) * 100:+.0f}%"


def _nodes(row: OpDelta) -> str:
    return f"{row.nodes_delta:+d} nodes" if row.nodes_delta else f"same {row.nodes_after} nodes"


def _row_line(row: OpDelta) -> str:
    share = f", {row.share * 100:.0f}% of the change" if row.share is not None else ""
    return (f"{us(row.kernel_us.delta)} in {row.op_type} ({us(row.kernel_us.before.mean, False)} -> "
            f"{us(row.kernel_us.after.mean, False)}, {row.nodes_before} -> {row.nodes_after} nodes{share})")


def _class_share(diff: ProfileDiff, rows: Sequence[OpDelta]) -> float:
    total = diff.total_change_us
    return sum(r.kernel_us.delta for r in rows) / total if total else 0.0


def _top(rows: Sequence[OpDelta], count: int = 3) -> list[OpDelta]:
    return sorted((r for r in rows if r.kernel_us.delta > 0), key=lambda r: -r.kernel_us.delta)[:count]


def _flat(diff: ProfileDiff, identical: bool) -> bool:
    ratio = diff.model_run_us.ratio
    return identical or ratio is None or ratio < 1 + SLOWER


def _headline(rows: Sequence[OpDelta], label: str, fallback: str) -> str:
    top = _top(rows, 1)
    if not top:
        return f"{fallback}: {label}"
    row = top[0]
    return f"{us(row.kernel_us.delta)} in {row.op_type}, {_nodes(row)}: {label}"


def classify(diff: ProfileDiff | None, compile_change: CompileChange | None = None,
             identical: bool = False, gpu: GpuDiff | None = None) -> Dimension:
    """Name the bottleneck dimension of a change by the rules of this module's docstring;
    ``identical``: both artifacts have one execution identity (they run the same code); ``gpu``:
    the GPU evidence of a ``cuda`` pair (rules G1-G5 instead of 3-7)."""
    if diff is None:
        if compile_change is not None and compile_rose(compile_change):
            return _compile(None, compile_change)
        return Dimension("unclear", "no-profile", ("no profile of both sides to explain the change",),
                         "no profile: unclear")
    run = diff.model_run_us
    run_line = (f"model_run {us(run.before.mean, False)} -> {us(run.after.mean, False)} ({_pct(run.ratio)}, "
                f"workers [{us(run.delta_low)}, {us(run.delta_high)}])")
    if _flat(diff, identical):
        init = diff.session_init_us
        init_rose = (init.ratio is not None and init.ratio >= 1 + COMPILE_UP and init.delta_low > 0)
        if (compile_change is not None and compile_rose(compile_change)) or init_rose:
            return _compile(diff, compile_change)
        same = "; the artifacts are identical" if identical else ""
        return Dimension("unclear", "no-slowdown", (f"the profiles show no slowdown: {run_line}{same}",),
                         f"no slowdown in the profile ({_pct(run.ratio)}): unclear")
    dimension = _run_rules(diff, run_line) if gpu is None else _gpu_rules(diff, gpu, run_line)
    if run.delta_low <= 0:
        caution = (f"the profiled workers disagree: the change's interval [{us(run.delta_low)}, "
                   f"{us(run.delta_high)}] holds 0; the label rests on the shares of the mean change")
        dimension = replace(dimension, evidence=(caution, *dimension.evidence))
    return dimension


def _run_rules(diff: ProfileDiff, run_line: str) -> Dimension:
    """Rules 3-7: what the run time's change is made of."""
    rows = diff.ops
    moving = [r for r in rows if r.op_type in DATA_MOVEMENT_OPS]
    structural = [r for r in rows if r.nodes_delta]
    structural_change = sum(r.kernel_us.delta for r in structural)
    moved_nodes = [r for r in structural if r.op_type in DATA_MOVEMENT_OPS]
    inserted = (structural_change > 0 and sum(r.kernel_us.delta for r in moved_nodes) >= DOMINANT * structural_change
                and _class_share(diff, moved_nodes) >= STRUCTURAL)
    if _class_share(diff, moving) >= DOMINANT or inserted:
        evidence = [f"data-movement ops explain {_class_share(diff, moving) * 100:.0f}% of the change ({run_line})",
                    *(_row_line(r) for r in _top(moving)), _bytes_line(diff)]
        collateral = [r for r in _top(rows) if not r.nodes_delta]
        if inserted and collateral:
            evidence.append("ops whose node count did not change got slower too (the inserted data movement evicts "
                            "their inputs from the caches, or noise): " + "; ".join(_row_line(r) for r in collateral))
        return Dimension("memory", "data-movement", tuple(evidence), _headline(moving, "memory", "data movement"))
    kernels = diff.kernels
    added = kernels.delta
    before_mean = diff.kernel_us.before.mean / kernels.before.mean if kernels.before.mean else 0.0
    per_added = diff.kernel_us.delta / added if added > 0 else float("inf")
    more = kernels.ratio is not None and kernels.ratio >= 1 + MORE_KERNELS
    overhead_share = diff.overhead_share or 0.0
    if (more and per_added <= SMALL_KERNEL * before_mean and overhead_share >= STRUCTURAL) \
            or overhead_share >= DOMINANT:
        grown = [r for r in rows if r.kernels.delta > 0]
        evidence = [f"{added:+.0f} kernels per inference ({kernels.before.mean:.0f} -> {kernels.after.mean:.0f}, "
                    f"{_pct(kernels.ratio)}); each added kernel adds {us(per_added, False) if added > 0 else 'n/a'} "
                    f"of kernel time, against {us(before_mean, False)} per kernel before",
                    f"framework overhead {us(diff.overhead_us.before.mean, False)} -> "
                    f"{us(diff.overhead_us.after.mean, False)} ({overhead_share * 100:.0f}% of the change; {run_line})",
                    *(_row_line(r) for r in _top(grown))]
        top = sorted(grown, key=lambda r: -r.nodes_delta)[:1]
        headline = (f"{us(diff.total_change_us)} with {added:+.0f} kernels ({top[0].nodes_delta:+d} {top[0].op_type} "
                    "nodes): scheduling" if top else f"{us(diff.total_change_us)} in framework overhead: scheduling")
        return Dimension("scheduling", "more-kernels", tuple(evidence), headline)
    moved = _moved(diff)
    bytes_rose = moved[0] > 0 and moved[1] / moved[0] >= 1 + MORE_BYTES
    heavier = [r for r in rows if r.nodes_before and r.nodes_after and
               r.moved_bytes.after.mean / r.nodes_after > 1.1 * r.moved_bytes.before.mean / r.nodes_before]
    if bytes_rose and _class_share(diff, heavier) >= DOMINANT:
        evidence = [_bytes_line(diff), f"op types that move more bytes per node explain {_class_share(diff, heavier) * 100:.0f}% "
                    f"of the change ({run_line})", *(_row_line(r) for r in _top(heavier))]
        return Dimension("memory", "bytes", tuple(evidence), _headline(heavier, "memory", "more bytes"))
    arithmetic = [r for r in rows if r.op_type in ARITHMETIC_OPS]
    if _class_share(diff, arithmetic) >= DOMINANT:
        evidence = [f"arithmetic ops explain {_class_share(diff, arithmetic) * 100:.0f}% of the change ({run_line})",
                    *(_row_line(r) for r in _top(arithmetic))]
        return Dimension("compute", "arithmetic", tuple(evidence), _headline(arithmetic, "compute", "arithmetic"))
    evidence = [f"no class of ops explains {DOMINANT * 100:.0f}% of the change ({run_line}): data movement "
                f"{_class_share(diff, moving) * 100:.0f}%, arithmetic {_class_share(diff, arithmetic) * 100:.0f}%, "
                f"framework overhead {overhead_share * 100:.0f}%", *(_row_line(r) for r in _top(rows))]
    return Dimension("unclear", "mixed", tuple(evidence), _headline(rows, "unclear", "mixed"))


def _moved(diff: ProfileDiff) -> tuple[float, float]:
    return (sum(r.moved_bytes.before.mean for r in diff.ops), sum(r.moved_bytes.after.mean for r in diff.ops))


def _bytes_line(diff: ProfileDiff) -> str:
    before, after = _moved(diff)
    ratio = after / before if before else None
    return f"bytes moved per inference {format_bytes(before)} -> {format_bytes(after)} ({_pct(ratio)})"


def _compile(diff: ProfileDiff | None, change: CompileChange | None) -> Dimension:
    evidence = []
    if change is not None:
        evidence.append(f"compile time {format_duration(change.before_s)} -> {format_duration(change.after_s)} "
                        f"({_pct(change.ratio)})")
    if diff is not None:
        init, run = diff.session_init_us, diff.model_run_us
        evidence.append(f"ORT session_initialization {us(init.before.mean, False)} -> {us(init.after.mean, False)} "
                        f"({_pct(init.ratio)})")
        evidence.append(f"run time flat: model_run {us(run.before.mean, False)} -> {us(run.after.mean, False)} "
                        f"({_pct(run.ratio)}, workers [{us(run.delta_low)}, {us(run.delta_high)}])")
    lead = (f"compile {_pct(change.ratio)}" if change is not None and compile_rose(change)
            else f"session init {_pct(diff.session_init_us.ratio)}" if diff is not None else "compile")
    return Dimension("compile-overhead", "compile", tuple(evidence), f"{lead}, run flat: compile-overhead")


def classify_counts(before: int | None, after: int | None, change: CompileChange | None,
                    wording: CountWording) -> Dimension:
    """The dimension of a change of a backend without a runtime profiler, from its artifact's
    counts (module docstring), worded by the backend (``Backend.count_wording``)."""
    if before is None or after is None:
        return classify(None, change)
    many = wording.many
    line = (f"{many} {before} -> {after} ({after - before:+d}), from {wording.source}; "
            f"no runtime profiler for {wording.runtime}")
    if after > before:
        return Dimension("scheduling", f"more-{wording.rule}",
                         (line, f"each {wording.one} is a kernel launch with its own scheduling cost: more of them "
                                "for the same model is more, smaller kernels"), f"+{after - before} {many}: scheduling")
    if change is not None and compile_rose(change):
        compiled = _compile(None, change)
        return replace(compiled, evidence=(*compiled.evidence, line))
    inside = (f"the same number of {many}" if after == before else f"fewer {many}")
    return Dimension("unclear", f"same-{wording.rule}" if after == before else f"fewer-{wording.rule}",
                     (line, f"{inside}: the change is inside the kernels, and without a runtime profiler compute "
                            "cannot be told from memory"), f"{inside} ({before} -> {after}): unclear")


def _kernel_line(row: KernelDelta) -> str:
    metrics = ""
    if row.sm_pct is not None or row.dram_pct is not None:
        sm = "n/a" if row.sm_pct is None else f"{row.sm_pct:.0f}%"
        dram = "n/a" if row.dram_pct is None else f"{row.dram_pct:.0f}%"
        metrics = f", ncu SM {sm} DRAM {dram} of peak"
    name = row.name if len(row.name) <= 80 else row.name[:77] + "..."
    return (f"{us(row.us.delta)} in kernel {name} ({row.launches.before.mean:.0f} -> {row.launches.after.mean:.0f} "
            f"launches{metrics})")


def _bound(row: KernelDelta, unit: str) -> bool:
    """ncu says ``unit`` (``dram`` or ``sm``) bounds this kernel (rules G2, G3)."""
    if row.sm_pct is None or row.dram_pct is None:
        return False
    if unit == "dram":
        return row.dram_pct >= HIGH_THROUGHPUT and row.dram_pct > row.sm_pct
    return row.sm_pct >= HIGH_THROUGHPUT and row.sm_pct >= row.dram_pct


def _gpu_rules(diff: ProfileDiff, gpu: GpuDiff, run_line: str) -> Dimension:
    """Rules G1-G5: what the run time's change is made of on the GPU."""
    launches, kernel = gpu.launches, gpu.kernel_us
    total = diff.total_change_us
    kernel_share = kernel.delta / total if total else 0.0
    added = launches.delta
    per_before = kernel.before.mean / launches.before.mean if launches.before.mean else 0.0
    per_added = kernel.delta / added if added > 0 else float("inf")
    more = launches.ratio is not None and launches.ratio >= 1 + MORE_KERNELS
    busy_drop = gpu.busy.before.mean - gpu.busy.after.mean if gpu.busy is not None else 0.0
    launch_line = (f"{added:+.0f} kernel launches per inference ({launches.before.mean:.0f} -> "
                   f"{launches.after.mean:.0f}, {_pct(launches.ratio)}; from {gpu.source}); Σ kernel time "
                   f"{us(kernel.before.mean, False)} -> {us(kernel.after.mean, False)}, "
                   f"{kernel_share * 100:.0f}% of the change ({run_line})")
    busy_line = ("GPU-busy fraction of model_run unknown (nsys counts kernels, not the runs)" if gpu.busy is None else
                 f"GPU busy {gpu.busy.before.mean * 100:.0f}% -> {gpu.busy.after.mean * 100:.0f}% of model_run")
    grown = sorted((r for r in gpu.kernels if r.us.delta > 0), key=lambda r: -r.us.delta)
    if (more and (per_added <= SMALL_KERNEL * per_before or busy_drop >= BUSY_DROP)) or \
            (busy_drop >= BUSY_DROP and kernel_share < DOMINANT):
        rule = "more-launches" if more else "gpu-idle"
        evidence = [launch_line, busy_line]
        if more:
            evidence.append(f"each added launch adds {us(per_added, False) if added > 0 else 'n/a'} of kernel time, "
                            f"against {us(per_before, False)} per launch before")
        evidence += [_kernel_line(r) for r in sorted(gpu.kernels, key=lambda r: -r.launches.delta)[:3]
                     if r.launches.delta > 0]
        lead = f"{added:+.0f} kernel launches" if more else f"GPU busy -{busy_drop * 100:.0f} points"
        return Dimension("scheduling", rule, tuple(evidence), f"{us(total)} with {lead}: scheduling")
    growth = sum(r.us.delta for r in grown)
    measured = [r for r in grown if r.sm_pct is not None or r.dram_pct is not None]
    for unit, label, rule in (("dram", "memory", "dram-bound"), ("sm", "compute", "sm-bound")):
        bound = [r for r in grown if _bound(r, unit)]
        if growth > 0 and sum(r.us.delta for r in bound) >= DOMINANT * growth:
            share = sum(r.us.delta for r in bound) / growth
            evidence = [f"kernels ncu measured as {unit.upper()}-bound (>= {HIGH_THROUGHPUT:.0f}% of peak) explain "
                        f"{share * 100:.0f}% of the kernels' growth", launch_line, *(_kernel_line(r) for r in bound[:3])]
            return Dimension(label, rule, tuple(evidence),
                             f"{us(bound[0].us.delta)} in {_kernel_name(bound[0])}, {unit.upper()}-bound: {label}")
    if not measured and not more and kernel_share >= DOMINANT and grown:
        evidence = [launch_line, "the same launches take longer; no ncu metrics on the grown kernels, so memory-bound "
                    "kernels cannot be ruled out (run with ncu on PATH to tell)", *(_kernel_line(r) for r in grown[:3])]
        return Dimension("compute", "kernel-time", tuple(evidence),
                         f"{us(grown[0].us.delta)} in {_kernel_name(grown[0])}, same launches: compute")
    evidence = [f"no GPU rule holds: {launch_line}", busy_line, *(_kernel_line(r) for r in grown[:3])]
    if measured:
        evidence.insert(1, f"ncu: neither SM nor DRAM throughput reaches {HIGH_THROUGHPUT:.0f}% of peak on most of the "
                           "grown kernels' time (latency-bound, or a spread change)")
    top = f"{us(grown[0].us.delta)} in {_kernel_name(grown[0])}" if grown else f"{us(total)} on the GPU"
    return Dimension("unclear", "gpu-mixed", tuple(evidence), f"{top}: unclear")


def _kernel_name(row: KernelDelta) -> str:
    """A kernel's name for a headline: the function, without template arguments and parameters."""
    name = row.name.split("(")[0].split("<")[0].strip()
    name = name.removeprefix("void ").split("::")[-1]
    return name or row.name[:40]
