"""NVIDIA Nsight Systems (``nsys``) and Nsight Compute (``ncu``) around a profile worker, on the
``cuda`` runner only, and only when the tool is on PATH; otherwise the side records
``skipped: <reason>`` (never an error).

* **nsys**: one fresh profile worker per side (that side's artifact alone, so the report holds
  only its kernels) runs under ``nsys profile -t cuda``; ``nsys stats --report cuda_gpu_kern_sum
  --format csv`` then sums the report per kernel name. Its CSV (Nsight Systems Analysis Guide,
  "cuda_gpu_kern_sum"): a header ``"Time (%)","Total Time (ns)","Instances","Avg (ns)","Med
  (ns)","Min (ns)","Max (ns)","StdDev (ns)","Name"`` after whatever progress lines nsys prints;
  times in ns unless ``--timeunit`` (the unit is read from the header). The worker's every
  inference is counted, warm-up included (the per-inference figures divide by all of them).
* **ncu**: a second worker per side runs under ``ncu --csv --metrics gpu__time_duration.sum,
  sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
  -k regex:<top kernels> --launch-count N`` (ncu replays each kernel, so only the top kernels and
  a few launches). Its CSV ("details" page, Nsight Compute CLI manual): one row per kernel launch
  and metric, with the columns ``"ID"`` (the launch), ``"Kernel Name"``, ``"Metric Name"``,
  ``"Metric Unit"``, ``"Metric Value"`` among others, after ``==PROF==`` lines; numbers may carry
  thousands separators, and a metric the GPU lacks reads ``n/a``.

The parsers are pure; ``nsight_side`` runs the tools through ``run`` (``perfguard.children.run``
by default: ``subprocess.run`` in a process group a signal stops) so tests can fake them.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from perfguard import children
from perfguard.errors import NsightError
from perfguard.results.explanation import NcuKernel, NsightSide, NsysKernel
from perfguard.runners import runner_class

if TYPE_CHECKING:
    from perfguard.compile.case import CompiledCase
    from perfguard.suite import Suite
    from perfguard.workers.protocol import ProfileRequest

NSYS_REPORT = "cuda_gpu_kern_sum"
NCU_TIME, NCU_SM, NCU_DRAM = ("gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed",
                              "dram__throughput.avg.pct_of_peak_sustained_elapsed")
#: Kernel launches ncu profiles per top kernel (each is replayed once per metric pass).
NCU_LAUNCHES_PER_KERNEL = 3
_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}

Which = Callable[[str], "str | None"]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None  # "n/a", "", "-"


def _table(text: str, starts: Callable[[str], bool], what: str) -> list[dict[str, str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if starts(line)), None)
    if start is None:
        raise NsightError(f"no {what} header in the output ({len(lines)} lines)")
    return list(csv.DictReader(io.StringIO("\n".join(lines[start:]))))


def parse_kern_sum(text: str) -> tuple[NsysKernel, ...]:
    """The kernels of an ``nsys stats --report cuda_gpu_kern_sum --format csv`` output, by total
    time; ``NsightError`` when it holds no such table."""
    rows = _table(text, lambda line: "Total Time (" in line and "Instances" in line, NSYS_REPORT)
    total = next(key for key in rows[0] if key.startswith("Total Time (")) if rows else "Total Time (ns)"
    unit = total[len("Total Time ("):].rstrip(")")
    if unit not in _NS:
        raise NsightError(f"{NSYS_REPORT}: unknown time unit {unit!r} in column {total!r}")
    kernels = []
    for row in rows:
        time, count = _number(row.get(total) or ""), _number(row.get("Instances") or "")
        if time is None or count is None or not row.get("Name"):
            continue
        kernels.append(NsysKernel(str(row["Name"]), int(count), time * _NS[unit]))
    return tuple(sorted(kernels, key=lambda k: (-k.total_ns, k.name)))


def parse_ncu_csv(text: str) -> tuple[NcuKernel, ...]:
    """The per-kernel means of an ``ncu --csv --metrics ...`` output (details page, one row per
    launch and metric); ``NsightError`` when it holds no such table."""
    rows = _table(text, lambda line: line.startswith('"ID"'), "ncu details")
    launches: dict[str, dict[str, float | None]] = {}
    names: dict[str, str] = {}
    for row in rows:
        launch, metric = row.get("ID") or "", row.get("Metric Name") or ""
        if not launch or not metric:
            continue
        names[launch] = row.get("Kernel Name") or "?"
        value = _number(row.get("Metric Value") or "")
        if metric == NCU_TIME and value is not None:
            value *= _NS.get((row.get("Metric Unit") or "ns").strip(), 1.0)
        launches.setdefault(launch, {})[metric] = value
    by_name: dict[str, list[dict[str, float | None]]] = {}
    for launch, metrics in launches.items():
        by_name.setdefault(names[launch], []).append(metrics)

    def mean(samples: list[dict[str, float | None]], metric: str) -> float | None:
        values = [v for v in (s.get(metric) for s in samples) if v is not None]
        return sum(values) / len(values) if values else None

    kernels = [NcuKernel(name, len(s), mean(s, NCU_TIME), mean(s, NCU_SM), mean(s, NCU_DRAM)) for name, s in by_name.items()]
    return tuple(sorted(kernels, key=lambda k: (-(k.time_ns or 0.0), k.name)))


def tool_skips(runner: str, which: Which = shutil.which) -> dict[str, str | None]:
    """Per tool (``nsys``, ``ncu``): its path, or ``skipped: <reason>`` when it cannot run here."""
    result: dict[str, str | None] = {}
    for tool in ("nsys", "ncu"):
        if not runner_class(runner).cuda_kernels:
            result[tool] = f"skipped: {tool} profiles CUDA kernels; runner {runner!r} is not cuda"
        else:
            path = which(tool)
            result[tool] = path if path else f"skipped: {tool} not on PATH"
    return result


def kernel_regex(names: Sequence[str]) -> str:
    """An ncu ``-k regex:`` that matches exactly these demangled kernel names."""
    return "^(" + "|".join(re.escape(n) for n in names) + ")$"


def nsys_commands(nsys: str, report: Path, worker: Sequence[str]) -> tuple[list[str], list[str]]:
    """The ``nsys profile`` command around ``worker`` and the ``nsys stats`` command on its report."""
    profile = [nsys, "profile", "-t", "cuda", "--force-overwrite", "true", "-o", str(report), *worker]
    stats = [nsys, "stats", "--report", NSYS_REPORT, "--format", "csv", "--force-export", "true",
             f"{report}.nsys-rep"]
    return profile, stats


def ncu_command(ncu: str, log: Path, kernels: Sequence[str], worker: Sequence[str]) -> list[str]:
    """``ncu`` around ``worker``: the three metrics of ``kernels`` (demangled names), a few launches each."""
    return [ncu, "--csv", "--log-file", str(log), "--kernel-name-base", "demangled",
            "--metrics", ",".join((NCU_TIME, NCU_SM, NCU_DRAM)), "-k", f"regex:{kernel_regex(kernels)}",
            "--launch-count", str(NCU_LAUNCHES_PER_KERNEL * len(kernels)), *worker]


Run = Callable[..., "subprocess.CompletedProcess[str]"]


def _run_worker(prefix: Callable[[list[str]], list[str]], request: ProfileRequest, folder: Path, timeout: float,
                run: Run) -> str | None:
    """Run one profile worker inside ``prefix(worker command)``; its failure in one line, or None."""
    from perfguard.errors import first_line
    from perfguard.workers.protocol import decode_response

    folder.mkdir(parents=True, exist_ok=True)
    request_path, response_path = folder / "request.json", folder / "response.json"
    request_path.write_text(json.dumps(request.to_json()))
    command = prefix([sys.executable, "-m", "perfguard.workers.worker", str(request_path), str(response_path)])
    try:
        proc = run(command, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return first_line(exc)
    if proc.returncode != 0:
        tail = (proc.stderr or "").strip().splitlines()
        return f"exit code {proc.returncode}" + (f": {tail[-1][:200]}" if tail else "")
    try:
        _, error = decode_response(json.loads(response_path.read_text()), request.parse_response)
    except (OSError, ValueError) as exc:
        return f"the worker wrote no readable response: {first_line(exc)}"
    return None if error is None else error.message


def nsight_side(label: str, request: ProfileRequest, folder: Path, timeout: float, top_kernels: Sequence[str],
                which: Which = shutil.which, run: Run = children.run) -> NsightSide:
    """nsys, then ncu on ``top_kernels``, around a fresh profile worker of one side (``request``
    holds that side's variant alone); whatever cannot run is recorded as skipped, with the reason."""
    from perfguard.errors import first_line

    tools = tool_skips(request.runner, which)
    skipped = [reason for reason in tools.values() if reason and reason.startswith("skipped:")]
    inferences = max(1, request.warmup) + max(1, request.runs)
    nsys_rows: tuple[NsysKernel, ...] | None = None
    ncu_rows: tuple[NcuKernel, ...] | None = None
    nsys, ncu = tools["nsys"], tools["ncu"] or ""
    if nsys and not nsys.startswith("skipped:"):
        profile, stats = nsys_commands(nsys, folder / "nsys" / "report", [])
        failure = _run_worker(lambda worker: profile + worker, request, folder / "nsys", timeout, run)
        if failure is None:
            try:
                proc = run(stats, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
                           check=False)
                nsys_rows = parse_kern_sum(proc.stdout or "")
            except (OSError, subprocess.TimeoutExpired, NsightError) as exc:
                failure = f"nsys stats: {first_line(exc)}"
            else:
                (folder / "nsys" / f"{NSYS_REPORT}.csv").write_text(proc.stdout)
        if failure is not None:
            skipped.append(f"skipped: nsys run failed: {failure}")
    names = list(top_kernels) or [k.name for k in (nsys_rows or ())[:3]]
    if ncu and not ncu.startswith("skipped:"):
        if not names:
            skipped.append("skipped: ncu has no top kernels to profile (no Kernel events and no nsys summary)")
        else:
            log = folder / "ncu" / "metrics.csv"
            failure = _run_worker(lambda worker: ncu_command(ncu, log, names, worker), request, folder / "ncu",
                                  timeout * 4, run)
            try:
                ncu_rows = parse_ncu_csv(log.read_text()) if failure is None else None
            except (OSError, NsightError) as exc:
                failure = f"ncu output: {exc}"
            if failure is not None:
                skipped.append(f"skipped: ncu run failed: {failure}")
    return NsightSide(label, inferences, nsys_rows, ncu_rows, tuple(skipped))


def nsight_sides(suite: Suite, sides: Sequence[tuple[str, CompiledCase]], runs: int, workdir: Path,
                 top_kernels: Sequence[str], which: Which = shutil.which, run: Run = children.run) -> list[NsightSide]:
    """``nsight_side`` for each side of a pair, each in its own fresh worker (that side alone)."""
    from perfguard.workers.protocol import MeasureVariant
    from perfguard.workers.requests import profile_request

    results = []
    for index, (label, compiled) in enumerate(sides):
        if compiled.artifact is None:
            results.append(NsightSide(label, 0, skipped=("skipped: no artifact to profile",)))
            continue
        request = profile_request(suite, compiled.case, [MeasureVariant(compiled.variant_id, compiled.artifact)],
                                  compiled.model.inputs, 0, runs, None)
        results.append(nsight_side(label, request, workdir / f"side{index}", compiled.case.measure.timeout,
                                   top_kernels, which, run))
    return results
