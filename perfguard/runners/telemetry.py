"""Device telemetry sampled during measurement, its summary, and the device-state verdict.

A GPU number is only as good as the state the GPU was in: a board that throttled (power cap,
heat) or whose clocks moved between the baseline and the candidate measures the weather, not the
compiler. perfguard therefore samples the device in a background thread of each measurement
worker while the timed rounds run, stores the samples with the result, and judges them:

``clean``
    Telemetry covered the run; no throttling; clocks steady and (against a baseline) equal
    within the tolerance.
``flagged``
    One or more reasons (listed) make the numbers untrustworthy; a comparison that uses them
    becomes UNKNOWN with these reasons instead of a verdict.
``unmonitored``
    The runner has no telemetry source (the CPU, an NPU without a vendor plug-in), or NVML could
    not start. Numbers are compared as before; nothing is claimed about the device.

perfguard never changes clocks or power limits; it reports whether clocks look locked and says
how to lock them (``nvidia-smi --lock-gpu-clocks``).

Pieces: ``TelemetrySource`` (one thing that can be read: NVML for one GPU in
``perfguard.runners.cuda.NvmlSource``, or a vendor plug-in); ``TelemetrySampler`` (the thread);
``summarize_telemetry`` and ``judge_device_state`` (pure functions over the stored records);
``register_telemetry`` (the plug-in point, also reachable through the entry-point group
``perfguard.telemetry``).
"""

from __future__ import annotations

import statistics
import threading
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Protocol

from perfguard.errors import first_line
from perfguard.jsonfields import JsonDict
from perfguard.runners.options import RunnerOptions

# Clock-event ("throttle") reason bits of NVML's nvmlDeviceGetCurrentClocksEventReasons.
THROTTLE_REASONS: dict[int, str] = {
    0x0001: "gpu_idle",
    0x0002: "applications_clocks_setting",
    0x0004: "sw_power_cap",
    0x0008: "hw_slowdown",
    0x0010: "sync_boost",
    0x0020: "sw_thermal_slowdown",
    0x0040: "hw_thermal_slowdown",
    0x0080: "hw_power_brake_slowdown",
    0x0100: "display_clock_setting",
    0x0200: "board_limit",
    0x0400: "reliability",
}
# Reasons that do not mean "slowed down against the user's wishes": idle, a clock setting the user
# chose (locked or application clocks), a sync-boost group, the display clock. Any other bit,
# including bits a newer driver may add, counts as throttling.
BENIGN_REASONS = frozenset({"gpu_idle", "applications_clocks_setting", "sync_boost", "display_clock_setting"})
GPU_IDLE_BIT = 0x0001
LOCKED_BIT = 0x0002
CLOCK_FIELDS = ("sm_clock_mhz", "mem_clock_mhz")

DEFAULT_CLOCK_TOLERANCE = 0.02
DEFAULT_INTERVAL_S = 0.1
MAX_SAMPLES = 2000
LOCK_HINT = ("lock the clocks for benchmarking: `sudo nvidia-smi --lock-gpu-clocks=<MHz>` (and "
             "`--lock-memory-clocks=<MHz>` where supported; list valid values with "
             "`nvidia-smi -q -d SUPPORTED_CLOCKS`); undo with `--reset-gpu-clocks`. perfguard never changes "
             "clocks itself")


def decode_reasons(mask: int) -> list[str]:
    """Names of the reason bits set in ``mask``; unknown bits become ``reason_0x...``."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    bit = 1
    while unknown >= bit:
        if unknown & bit:
            names.append(f"reason_{bit:#x}")
        bit <<= 1
    return names


def throttling_reasons(mask: int) -> list[str]:
    """The reasons in ``mask`` that mean the device slowed itself down (benign ones left out)."""
    return [name for name in decode_reasons(mask) if name not in BENIGN_REASONS]


# --------------------------------------------------------------------------------------------
# Sources and the sampler thread
# --------------------------------------------------------------------------------------------


class TelemetrySource(ABC):
    """One thing that can be read periodically: NVML for one GPU, a vendor counter tool, ...

    ``read`` returns numbers by field name. NVML's fields are the canonical names the verdict
    understands (``sm_clock_mhz``, ``mem_clock_mhz``, ``temperature_c``, ``power_w``,
    ``gpu_util_pct``, ``mem_util_pct``, ``memory_used_bytes``, ``throttle_reasons``); plug-ins
    should namespace theirs (``qnn.hvx_util_pct``). A field the device does not support is None.
    """

    name: str = "source"

    def open(self) -> JsonDict:
        """Start reading; return static facts about the device (JSON-ready). May raise."""
        return {}

    @abstractmethod
    def read(self) -> dict[str, float | int | None]:
        """One sample. Raising stops this source for the rest of the run (the error is recorded)."""

    def close(self) -> None:
        """Release what ``open`` took."""


@dataclass
class _SourceState:
    source: TelemetrySource
    active: bool = True
    opened: bool = False
    samples: int = 0


class TelemetrySampler:
    """Samples ``sources`` every ``interval_s`` seconds in a daemon thread between start and stop.

    One sample is taken at ``start`` and one at ``stop``, so even a short run has two. A source that
    fails to open or raises while reading is dropped and its error recorded; the others go on. Past
    ``max_samples`` rows every other row is dropped and the interval doubled, so coverage stays even
    and a long run stays small. The thread holds the GIL only while it builds a row (NVML calls go
    through ctypes, which releases it), a small cost every ``interval_s`` that falls on all
    interleaved variants alike.
    """

    def __init__(self, sources: Sequence[TelemetrySource], *, interval_s: float = DEFAULT_INTERVAL_S,
                 clock_tolerance: float = DEFAULT_CLOCK_TOLERANCE, max_samples: int = MAX_SAMPLES,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._states = [_SourceState(s) for s in sources]
        self.interval_s = interval_s
        self.clock_tolerance = clock_tolerance
        self.max_samples = max(2, max_samples)
        self._clock = clock
        self._rows: list[dict[str, float | None]] = []
        self._device: dict[str, JsonDict] = {}
        self._errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0

    def start(self) -> None:
        self._t0 = self._clock()
        for state in self._states:
            try:
                facts = state.source.open()
            except Exception as exc:
                state.active = False
                self._errors.append(f"{state.source.name}: could not start: {first_line(exc)}")
                continue
            state.opened = True
            if facts:
                self._device[state.source.name] = facts
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="perfguard-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            if not any(state.active for state in self._states):
                return
            self.sample()

    def sample(self) -> None:
        """Read every active source once and append one row (also called by the thread)."""
        row: dict[str, float | None] = {"t": round(self._clock() - self._t0, 6)}
        for state in self._states:
            if not state.active:
                continue
            try:
                values = state.source.read()
            except Exception as exc:
                state.active = False
                self._errors.append(f"{state.source.name}: failed after {state.samples} samples "
                                    f"({row['t']:.2f} s into the run): {first_line(exc)}")
                continue
            state.samples += 1
            for key, value in values.items():
                row.setdefault(key, value)
        if len(row) > 1:
            self._rows.append(row)
        if len(self._rows) > self.max_samples:
            self._rows = self._rows[::2]
            self.interval_s *= 2

    def stop(self) -> JsonDict:
        """Stop the thread, take a last sample, close the sources and return the record."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=max(5.0, self.interval_s * 2))
        self.sample()
        for state in self._states:
            if not state.opened:
                continue
            try:
                state.source.close()
            except Exception:  # closing is best effort; the samples are what matter
                pass
        return {
            "sources": [state.source.name for state in self._states],
            "interval_s": self.interval_s,
            "clock_tolerance": self.clock_tolerance,
            "device": self._device,
            "columns": _columns(self._rows),
            "errors": list(self._errors),
        }


def _columns(rows: list[dict[str, float | None]]) -> dict[str, list[float | None]]:
    names: list[str] = []
    for row in rows:
        names.extend(k for k in row if k not in names)
    return {name: [row.get(name) for row in rows] for name in names}


# --------------------------------------------------------------------------------------------
# Plug-ins
# --------------------------------------------------------------------------------------------

class TelemetryTarget(Protocol):
    """What a plug-in is shown of the runner it is asked about: its name and the suite's settings.

    The measurement worker passes the ``Runner`` itself; typing it by this view keeps telemetry
    free of the runner contract (``Runner`` samples telemetry, so the dependency runs that way)."""

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> RunnerOptions: ...


TelemetryFactory = Callable[[TelemetryTarget], "TelemetrySource | None"]
_PLUGINS: dict[str, TelemetryFactory] = {}


def register_telemetry(name: str, factory: TelemetryFactory) -> None:
    """Register a vendor telemetry plug-in.

    ``factory(runner)`` is called in each measurement worker and returns a ``TelemetrySource`` for
    that runner (look at ``runner.name`` and ``runner.options``) or None when it does not apply.
    Packages can also register through the entry-point group ``perfguard.telemetry``
    (``myvendor = "mypkg.telemetry:make_source"``).
    """
    _PLUGINS[name] = factory


@lru_cache(maxsize=1)
def _entry_point_factories() -> tuple[tuple[str, TelemetryFactory], ...]:
    from importlib.metadata import entry_points

    found = []
    for entry in entry_points(group="perfguard.telemetry"):
        try:
            found.append((entry.name, entry.load()))
        except Exception as exc:  # a broken plug-in must not stop measurement
            warnings.warn(f"perfguard: telemetry plug-in {entry.name!r} cannot be loaded: {exc}", stacklevel=2)
    return tuple(found)


def telemetry_plugins() -> dict[str, TelemetryFactory]:
    """Every registered plug-in by name (explicit registrations win over entry points)."""
    plugins = dict(_entry_point_factories())
    plugins.update(_PLUGINS)
    return plugins


def plugin_sources(runner: TelemetryTarget) -> list[TelemetrySource]:
    """The plug-in sources that apply to ``runner``."""
    sources = []
    for factory in telemetry_plugins().values():
        source = factory(runner)
        if source is not None:
            sources.append(source)
    return sources


# --------------------------------------------------------------------------------------------
# Summary and verdict (pure functions)
# --------------------------------------------------------------------------------------------


def _range(values: Iterable[float | None]) -> dict[str, float] | None:
    data = [float(v) for v in values if v is not None]
    if not data:
        return None
    return {"min": min(data), "median": float(statistics.median(data)), "max": max(data)}


def _mask(value: object) -> int:
    """A sample's NVML throttle-reason bits."""
    if not isinstance(value, (int, float, str)):
        raise TypeError(f"telemetry: throttle_reasons must be a number, found {value!r}")
    return int(value)


def summarize_telemetry(records: Sequence[Mapping[str, Any] | None]) -> JsonDict | None:
    """Pool the telemetry records of a case's workers into one summary; None without any record.

    Per numeric field: min, median and max over all samples. The clock fields (``sm_clock_mhz``,
    ``mem_clock_mhz``) use only *busy* samples — those without NVML's ``gpu_idle`` reason — because
    a GPU drops its clocks between kernels and that is not throttling; when no sample is busy (or
    the reasons are unknown) they use all samples. ``throttle`` counts samples with a non-benign
    reason and how often each reason was seen. ``clock_lock`` is inferred, since NVML has no query
    for locked clocks: ``locked`` when every busy sample reports ``applications_clocks_setting``
    (clocks held by a user setting, as ``nvidia-smi --lock-gpu-clocks`` does), ``unlocked`` when
    some busy sample does not, ``unknown`` without reasons.
    """
    present = [r for r in records if r is not None]
    if not present:
        return None
    rows: list[dict[str, object]] = []
    errors: list[str] = []
    sources: list[str] = []
    tolerance = DEFAULT_CLOCK_TOLERANCE
    for record in present:
        columns = record.get("columns", {})
        count = max((len(v) for v in columns.values()), default=0)
        rows.extend({k: v[i] for k, v in columns.items()} for i in range(count))
        errors.extend(record.get("errors", []))
        sources.extend(s for s in record.get("sources", []) if s not in sources)
        tolerance = float(record.get("clock_tolerance", tolerance))
    summary: JsonDict = {"samples": len(rows), "workers": len(present),
                               "workers_unmonitored": len(records) - len(present), "sources": sources,
                               "errors": errors, "clock_tolerance": tolerance}
    known = [(row, _mask(row["throttle_reasons"])) for row in rows if row.get("throttle_reasons") is not None]
    busy_known = [(row, mask) for row, mask in known if not mask & GPU_IDLE_BIT]
    busy = [row for row, _ in busy_known]
    summary["busy_samples"] = len(busy) if known else None
    fields = sorted({k for row in rows for k in row if k not in ("t", "throttle_reasons")})
    for name in fields:
        pool = busy if name in CLOCK_FIELDS and busy else rows
        values = [row.get(name) for row in pool]
        numbers = [v for v in values if isinstance(v, (int, float)) or v is None]
        if len(numbers) == len(values):
            summary[name] = _range(numbers)
    counts: dict[str, int] = {}
    throttled = 0
    for _, mask in known:
        bad = throttling_reasons(mask)
        throttled += bool(bad)
        for name in decode_reasons(mask):
            counts[name] = counts.get(name, 0) + 1
    summary["throttle"] = {"samples_with_reasons": len(known), "throttled_samples": throttled,
                           "fraction": throttled / len(known) if known else None, "reasons": counts}
    if not known:
        summary["clock_lock"] = "unknown"
    else:
        pool_masks = [m for _, m in busy_known] or [m for _, m in known]
        summary["clock_lock"] = "locked" if all(m & LOCKED_BIT for m in pool_masks) else "unlocked"
    return summary


@dataclass(frozen=True)
class DeviceState:
    """What the telemetry says about a measurement.

    ``state`` is ``clean``, ``flagged`` or ``unmonitored``; ``reasons`` say why it is flagged (or
    unmonitored); ``notes`` are advice that does not flag (clocks not locked, how to lock them).
    """

    state: str
    reasons: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def flagged(self) -> bool:
        return self.state == "flagged"

    def to_json(self) -> JsonDict:
        return {"state": self.state, "reasons": list(self.reasons), "notes": list(self.notes)}

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> DeviceState:
        from perfguard import jsonfields as f

        kind = "device_state"
        return cls(f.string(data, "state", kind), f.string_list(data, "reasons", kind) if "reasons" in data else (),
                   f.string_list(data, "notes", kind) if "notes" in data else ())


def _relative_spread(low: float, high: float) -> float:
    return (high - low) / high if high > 0 else 0.0


def judge_device_state(summary: Mapping[str, Any] | None, *, baseline: Mapping[str, Any] | None = None,
                       clock_tolerance: float | None = None, max_throttled_fraction: float = 0.0) -> DeviceState:
    """Decide whether a measurement's device state is trustworthy.

    Rules, each adding one reason (any reason makes the state ``flagged``):

    1. *Telemetry failed mid-run* (an error recorded by a source that had started): the rest of
       the run is unobserved, so nothing can be vouched for.
    2. *Throttling*: the fraction of samples with a non-benign clock-event reason (power cap,
       thermal or hardware slowdown, power brake, ...) exceeds ``max_throttled_fraction``
       (default 0: a single throttled sample flags).
    3. *Clocks moved during the run*: over busy samples, ``(max - min) / max`` of the SM or memory
       clock exceeds the tolerance.
    4. *Clocks differ from the baseline's*: the relative difference of the median busy SM or
       memory clock against ``baseline`` (another summary) exceeds the tolerance. Without
       telemetry on the baseline side, a note says the comparison could not be made.

    ``clock_tolerance`` is a fraction (0.02 = 2 %); by default the one recorded with the telemetry
    (the runner's ``clock_tolerance``). Assumptions: samples are spread evenly over the timed rounds
    (the sampler's interval) and the clock fields are in MHz. Without a summary, or with one that
    holds no samples, the state is ``unmonitored``.
    """
    if summary is None:
        return DeviceState("unmonitored", ("this runner has no device telemetry",))
    errors = list(summary.get("errors", []))
    if not summary.get("samples"):
        return DeviceState("unmonitored", tuple(errors) or ("telemetry recorded no sample",))
    tolerance = float(summary.get("clock_tolerance", DEFAULT_CLOCK_TOLERANCE)) if clock_tolerance is None \
        else clock_tolerance
    reasons: list[str] = []
    notes: list[str] = []
    for error in errors:
        reasons.append(f"telemetry incomplete: {error}")
    if summary.get("workers_unmonitored"):
        reasons.append(f"{summary['workers_unmonitored']} of {summary['workers'] + summary['workers_unmonitored']}"
                       " workers have no telemetry")
    throttle = summary.get("throttle") or {}
    fraction = throttle.get("fraction")
    if fraction is not None and fraction > max_throttled_fraction:
        seen = sorted(name for name in throttle.get("reasons", {}) if name not in BENIGN_REASONS)
        reasons.append(f"throttled in {throttle['throttled_samples']} of {throttle['samples_with_reasons']} "
                       f"samples ({', '.join(seen)})")
    for name in CLOCK_FIELDS:
        stats = summary.get(name)
        if stats and _relative_spread(stats["min"], stats["max"]) > tolerance:
            reasons.append(f"{_label(name)} moved during the run: {stats['min']:.0f}-{stats['max']:.0f} MHz "
                           f"({_relative_spread(stats['min'], stats['max']) * 100:.1f}% > "
                           f"{tolerance * 100:g}% tolerance)")
    if baseline is not None:
        reasons.extend(clock_drift(summary, baseline, tolerance))
        if not any(baseline.get(name) for name in CLOCK_FIELDS):
            notes.append("the baseline has no clock telemetry; clocks could not be compared with it")
    if summary.get("clock_lock") == "unlocked":
        notes.append("GPU clocks are not locked, so boost clocks follow temperature and power; " + LOCK_HINT)
    return DeviceState("flagged" if reasons else "clean", tuple(reasons), tuple(notes))


def clock_drift(candidate: Mapping[str, Any], baseline: Mapping[str, Any], tolerance: float) -> list[str]:
    """Reasons for each clock whose median differs from the baseline's by more than ``tolerance``.

    Compares the median busy SM and memory clocks (MHz) of two summaries; relative difference
    ``candidate / baseline - 1``; a clock missing on either side is skipped.
    """
    reasons = []
    for name in CLOCK_FIELDS:
        ours, theirs = candidate.get(name), baseline.get(name)
        if not ours or not theirs or theirs["median"] <= 0:
            continue
        change = ours["median"] / theirs["median"] - 1
        if abs(change) > tolerance:
            reasons.append(f"{_label(name)} median {ours['median']:.0f} MHz vs baseline {theirs['median']:.0f} MHz "
                           f"({change * 100:+.1f}%, tolerance {tolerance * 100:g}%)")
    return reasons


def _label(name: str) -> str:
    return {"sm_clock_mhz": "SM clock", "mem_clock_mhz": "memory clock"}.get(name, name)
