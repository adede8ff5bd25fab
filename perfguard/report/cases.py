"""Per-case detail of a report: the sides' distributions, pass traces and environment diff.

A case has one or more *sides* (baseline and candidate of a verdict, or the same case in several
result documents); everything here compares them: latency values as a distribution chart, pass
traces aligned by position (where the IR first diverges), and the environment fingerprints.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from markupsafe import Markup

from perfguard.jsonfields import JsonDict
from perfguard.report import format as fmt, svg
from perfguard.report.rows import SEVERITY, VerdictRow
from perfguard.results import CaseEntry


@dataclass
class SideView:
    """One side of a case: a label, its result entry and the document's environment."""

    label: str
    entry: CaseEntry
    environment: dict[str, JsonDict]
    document_index: int
    tone: str = "base"


@dataclass
class TraceCell:
    name: str
    source: str
    time_s: float | None
    nodes_before: int | None
    nodes_after: int | None
    changed: bool
    ir_hash: str
    bar: Markup


@dataclass
class TraceRow:
    index: int
    cells: list[TraceCell | None]
    diverges: bool  # same pass at this position on every side, different IR afterwards
    differs: bool  # different passes at this position


@dataclass(frozen=True)
class TraceTotal:
    """One side's whole trace as the report shows it: the total time (formatted), the input and
    final IR hashes, whether the per-pass replay was exact, and its note."""

    total: str
    input: str
    final: str
    exact: bool
    note: str


@dataclass
class TraceView:
    labels: list[str]
    rows: list[TraceRow]
    totals: list[TraceTotal]
    first_divergence: int | None
    same_final: bool


@dataclass
class EnvRow:
    key: str
    values: list[str]
    comparable: bool


@dataclass
class CaseDetail:
    """Everything the report says about one case."""

    anchor: str
    case: str
    runner: str
    state: str
    rows: list[VerdictRow]
    sides: list[SideView]
    distribution: Markup | None
    stats: list[dict[str, str]]
    trace: TraceView | None
    env_labels: list[str]
    env_rows: list[EnvRow]
    same_environment: bool
    errors: list[dict[str, str]]
    note: str = ""
    devices: list[JsonDict] = field(default_factory=list)  # device telemetry: free-form
    # Sides whose correctness check was blind (the reference does not depend on the inputs).
    blind: list[dict[str, str]] = field(default_factory=list)

    @property
    def open(self) -> bool:
        return self.state in ("regression", "failed")


def _per_worker(entry: CaseEntry) -> list[list[float]]:
    latency = entry.metrics.latency_s
    return [list(worker) for worker in latency.per_worker] if latency else []


def _stats(side: SideView) -> dict[str, str]:
    latency = side.entry.metrics.latency_s
    if latency is None:
        return {"label": side.label, "n": "", "workers": "0", "median": fmt.seconds(None), "p10": fmt.seconds(None),
                "p90": fmt.seconds(None), "cv": fmt.percent(None), "status": side.entry.status}
    return {"label": side.label, "n": str(latency.n), "workers": str(len(latency.per_worker)),
            "median": fmt.seconds(latency.median), "p10": fmt.seconds(latency.p10),
            "p90": fmt.seconds(latency.p90), "cv": fmt.percent(latency.cv), "status": side.entry.status}


def _distribution(sides: list[SideView]) -> Markup | None:
    samples = [svg.Samples(_per_worker(side.entry), side.tone) for side in sides]
    if not any(any(worker for worker in s.per_worker) for s in samples):
        return None
    return svg.distribution(samples, fmt.seconds)


def trace_view(sides: list[SideView]) -> TraceView | None:
    """The pass traces of every side, aligned by position."""
    traces = [side.entry.trace for side in sides]
    if not any(traces):
        return None
    passes = [list(trace.passes) if trace else [] for trace in traces]
    slowest = max((p.time_s or 0.0 for ps in passes for p in ps), default=0.0) or 1.0
    rows, first_divergence = [], None
    for index in range(max((len(p) for p in passes), default=0)):
        cells: list[TraceCell | None] = []
        for ps in passes:
            if index >= len(ps):
                cells.append(None)
                continue
            p = ps[index]
            time_s = fmt.finite(p.time_s)
            cells.append(TraceCell(p.name, p.source, time_s, p.nodes_before, p.nodes_after, p.changed, p.ir_hash,
                                   svg.bar((time_s or 0.0) / slowest)))
        present = [c for c in cells if c is not None]
        names = {c.name for c in present}
        differs = len(present) != len(cells) or len(names) > 1
        diverges = len(cells) > 1 and not differs and len({c.ir_hash for c in present}) > 1
        if diverges and first_divergence is None:
            first_divergence = index
        rows.append(TraceRow(index, cells, diverges, differs and len(cells) > 1))
    totals = [TraceTotal(fmt.seconds(t.total_time_s), t.input_hash, t.final_hash, t.exact, t.note) if t else
              TraceTotal(fmt.seconds(None), "", "", True, "") for t in traces]
    finals = {t.final for t in totals}
    return TraceView([s.label for s in sides], rows, totals, first_divergence, len(finals) == 1 and len(totals) > 1)


def flatten_fingerprint(fingerprint: JsonDict, prefix: str = "") -> JsonDict:
    out: JsonDict = {}
    for key, value in fingerprint.items():
        if isinstance(value, dict):
            out.update(flatten_fingerprint(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def env_text(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list):
        return ", ".join(env_text(v) for v in value)
    return str(value)


def environment_diff(sides: list[SideView], runner: str) -> tuple[list[EnvRow], bool]:
    """Fingerprint fields that differ between the sides' documents for this runner.

    Returns the rows and whether all sides come from one document (one job, one environment)."""
    from perfguard.runners.fingerprint import comparable_keys

    if len({s.document_index for s in sides}) <= 1:
        return [], True
    flat = [flatten_fingerprint(s.environment.get(runner) or {}) for s in sides]
    keys = sorted(set().union(*flat))
    rows = []
    for key in keys:
        values = [f.get(key) for f in flat]
        if any(v != values[0] for v in values[1:]):
            rows.append(EnvRow(key, [env_text(v) for v in values], key.split(".")[0] in comparable_keys))
    rows.sort(key=lambda r: (not r.comparable, r.key))
    return rows, False


def _errors(sides: list[SideView]) -> list[dict[str, str]]:
    errors = []
    for side in sides:
        error = side.entry.error
        if error:
            errors.append({"label": side.label, "stage": error.stage, "message": error.message})
        correctness = side.entry.correctness
        if correctness is not None and not correctness.passed and not error:
            errors.append({"label": side.label, "stage": "correctness", "message": correctness.reason})
    return errors


def blind_checks(sides: list[SideView]) -> list[dict[str, str]]:
    """Per side whose correctness check was blind: its label and the reason. Such a case matched
    the reference, but the reference cannot tell a wrong pass apart: never shown as verified."""
    out = []
    for side in sides:
        correctness = side.entry.correctness
        if correctness is not None and correctness.status == "blind":
            out.append({"label": side.label, "reason": correctness.reason})
    return out


def device_states(sides: list[SideView]) -> list[JsonDict]:
    """Per side, the device state recorded with the measurement (GPU/NPU runners): clean, flagged
    (with the reasons) or unmonitored, and the telemetry ranges worth reading (clocks, temperature,
    power, throttling). Empty when no side carries telemetry (CPU runners)."""
    out = []
    for side in sides:
        measurement = side.entry.measurement
        state = measurement.device_state if measurement else None
        summary = (measurement.telemetry_summary if measurement else None) or {}
        if not summary and (state is None or state.state == "unmonitored"):
            continue
        ranges = []
        for key, label, unit in (("sm_clock_mhz", "SM clock", "MHz"), ("mem_clock_mhz", "memory clock", "MHz"),
                                 ("temperature_c", "temperature", "°C"), ("power_w", "power", "W"),
                                 ("gpu_util_pct", "utilization", "%")):
            value = summary.get(key)
            if isinstance(value, dict) and value.get("median") is not None:
                ranges.append({"label": label, "text": f"{value.get('min'):g} / {value.get('median'):g} / "
                                                       f"{value.get('max'):g} {unit}"})
        throttle = summary.get("throttle")
        out.append({"label": side.label, "state": state.state if state else "unmonitored",
                    "reasons": list(state.reasons) if state else [], "notes": list(state.notes) if state else [],
                    "ranges": ranges, "samples": summary.get("samples"), "clock_lock": summary.get("clock_lock"),
                    "throttled": throttle.get("throttled_samples") if isinstance(throttle, Mapping) else None})
    return out


def case_detail(anchor: str, case: str, runner: str, rows: list[VerdictRow], sides: list[SideView]) -> CaseDetail:
    """The detail of one case: verdict ``rows`` (none for plain results) and its ``sides``."""
    if rows:
        state, note = min((r.state for r in rows), key=lambda s: SEVERITY[s]), ""
    else:  # plain results: no verdict, only whether every side was measured
        state = "failed" if any(not s.entry.ok for s in sides) else "ok"
        medians = [fmt.seconds(s.entry.metrics.latency_s.median if s.entry.metrics.latency_s else None)
                   for s in sides]
        note = "median " + " → ".join(m or "—" for m in medians) if any(medians) else ""
    env_rows, same_env = environment_diff(sides, runner)
    return CaseDetail(anchor, case, runner, state, rows, sides, _distribution(sides),
                      [_stats(s) for s in sides], trace_view(sides), [s.label for s in sides], env_rows,
                      same_env, _errors(sides), note, device_states(sides), blind_checks(sides))
