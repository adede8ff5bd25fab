"""Gates: the suite's ``[check]`` settings and per-metric ``[thresholds]``.

```toml
[check]
workers = 8          # worker processes of the first look of an A/B comparison
step_workers = 4     # workers added per look while a comparison is undecided
max_workers = 20     # budget per case; the number of looks K is planned from these three
alpha = 0.05         # false-discovery level of each metric family over the check (Benjamini-Hochberg:
                     # all latency comparisons, all compile-time ones), spent over the looks
                     # (half at the first, the rest split equally); intervals at 1 - level

[thresholds]         # the practical floor of each metric: smaller changes are never DIFFERENT
latency = "median:2%"                  # or a list: ["median:2%", "median:20us"] (the larger wins)
compile_time = "median:25%"
memory = "5%"                          # peak RSS of fresh processes holding one artifact
artifact_size = "5%"                   # exact metrics: any change is reported, the gate fails when the
node_count = "5%"                      # change exceeds the threshold (the nightly's history too: one table)
instructions = ["0.25%", "750"]        # counted (--counts): callgrind's instructions per inference
estimated_cycles = "0.5%"              # counted: L1 hits + 5 x LL hits + 35 x RAM hits per inference
compile_instructions = "0.5%"          # counted: instructions of the compile's passes and own steps
include = "smoke.floors.toml"          # overrides written by `perfguard calibrate` (applied first)

[[thresholds.overrides]]
pattern = "^bert"                      # a regular expression searched in the case id
latency = "median:5%"
```
"""

from __future__ import annotations

import dataclasses
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

from perfguard.errors import UserError
from perfguard.stats.thresholds import ACROSS_RUNS_FLOOR, MetricKind, Threshold, parse_threshold
from perfguard.suite.reader import Reader, describe

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


@dataclass(frozen=True)
class MetricSpec:
    """How a metric is read, compared and gated."""

    name: str
    kind: MetricKind
    noisy: bool
    #: The floor when the suite sets none: a threshold text, or several (the larger wins).
    default: str | tuple[str, ...]
    unit: str
    #: Counted under Valgrind (``--counts``): compared only when a side has it.
    counted: bool = False
    #: No noise: the same compile gives the same number again, so a change past the floor is real
    #: the night it appears (memory is compared as one value too, but varies between processes).
    exact: bool = False


#: The absolute part of the default instructions floor (per inference): see ``METRICS``.
INSTRUCTIONS_FLOOR = "750"

METRICS: dict[str, MetricSpec] = {
    "latency": MetricSpec("latency", "time", True, "median:2%", "s"),
    "compile_time": MetricSpec("compile_time", "time", True, "median:25%", "s"),
    "memory": MetricSpec("memory", "memory", False, "5%", "B"),
    "artifact_size": MetricSpec("artifact_size", "memory", False, "5%", "B", exact=True),
    "node_count": MetricSpec("node_count", "count", False, "5%", "nodes", exact=True),
    # Per inference; floors about 3x the widest A/A spread of benchmarks/counts.py over 10 counts
    # with one core busy (0.084 % instructions, 0.095 % cycles, 0.12 % a compile pass: docs/measured.md).
    # Instructions also have an absolute part: 3x the widest spread in instructions an inference of
    # one artifact counted in separate processes, which is about the same whatever the model's size
    # (248 on 0.77 M, 69 on 0.13 M, 109 on 0.10 M; docs/measured.md "Exact on every model"): below
    # 0.3 M instructions an inference, 0.25 % alone would be within 2-3x of that movement.
    "instructions": MetricSpec("instructions", "count", False, ("0.25%", INSTRUCTIONS_FLOOR), "instr", counted=True,
                               exact=True),
    "estimated_cycles": MetricSpec("estimated_cycles", "count", False, "0.5%", "cycles", counted=True, exact=True),
    # The compile's real work (passes, the backend's own steps), counted once: gateable compile time.
    "compile_instructions": MetricSpec("compile_instructions", "count", False, "0.5%", "instr", counted=True,
                                       exact=True),
}
#: The counted metrics (``--counts``): exact, one value a side, like node count.
COUNTED_METRICS = tuple(name for name, spec in METRICS.items() if spec.counted)
#: The exact metrics. One table of floors decides them everywhere: the suite's gates (these
#: defaults, its ``[thresholds]`` and overrides), read by ``check`` (``compare_deterministic``)
#: and by the history's exact steps (``perfguard.history.series_changes``: the nightly, its
#: alerts, ``history show``, the site), with the same comparison. Two floors for one metric made
#: a +0.5 % instruction step a REGRESSION in the check and nothing in the history.
EXACT_METRICS = tuple(name for name, spec in METRICS.items() if spec.exact)


@dataclass(frozen=True)
class Gate:
    """The floor of one metric: statistic plus relative and absolute amounts (either may be 0)."""

    statistic: str
    relative: float
    absolute: float
    text: str

    def threshold(self, baseline: float | None = None) -> Threshold:
        """As a single ``Threshold`` of an exact metric whose base value is ``baseline``: the larger
        of the relative and the absolute amount there (without ``baseline``: the relative amount
        if set)."""
        relative = Threshold(self.statistic, relative=self.relative)
        if self.absolute == 0 or (self.relative > 0 and (baseline is None or self.relative * baseline >= self.absolute)):
            return relative
        return Threshold(self.statistic, absolute=self.absolute)

    def relative_at(self, baseline: float) -> float:
        """The smallest relative change past this floor at ``baseline`` (an exact bisection's step)."""
        if baseline <= 0:
            return self.relative
        return max(self.relative, self.absolute / baseline)


def parse_gate(value: object, metric: str, where: str) -> Gate:
    """The gate of ``metric`` from a threshold text (or a list of them); ``where`` prefixes errors."""
    try:
        return _gate(value, metric)
    except UserError as exc:
        raise UserError(f"{where}: {metric}: {exc}") from None


def _gate(value: object, metric: str) -> Gate:
    spec = METRICS[metric]
    items: list[object] = value if isinstance(value, list) else [value]
    texts = [t for t in items if isinstance(t, str)]
    if not texts or len(texts) != len(items):
        example = spec.default if isinstance(spec.default, str) else spec.default[0]
        raise UserError(f"expected a threshold such as \"{example}\" or a list of them, found {describe(value)}")
    parsed = [parse_threshold(text, kind=spec.kind) for text in texts]
    statistics = {t.statistic for t in parsed}
    if len(statistics) > 1:
        raise UserError(f"all thresholds of one metric must use the same statistic, "
                        f"found {', '.join(sorted(statistics))}")
    relative = max((t.relative or 0.0) for t in parsed)
    absolute = max((t.absolute or 0.0) for t in parsed)
    return Gate(parsed[0].statistic, relative, absolute, " + ".join(str(t) for t in parsed))


@dataclass(frozen=True)
class CheckSettings:
    workers: int = 8
    step_workers: int = 4
    max_workers: int = 20
    alpha: float = 0.05
    # Time artifacts whose execution identity equals their pair's anyway (an A/A sentinel).
    measure_identical: bool = False


@dataclass(frozen=True)
class ThresholdSet:
    """Default gates plus ordered overrides ``(regex, {metric: Gate})``; later overrides win."""

    defaults: Mapping[str, Gate] = field(default_factory=lambda: {
        name: parse_gate(spec.default if isinstance(spec.default, str) else list(spec.default), name, "default")
        for name, spec in METRICS.items()})
    overrides: tuple[tuple[str, Mapping[str, Gate]], ...] = ()
    #: The least relative latency floor of an unpaired comparison (``[thresholds] across_runs``).
    across_runs: float = ACROSS_RUNS_FLOOR

    def gate(self, case_id: str, metric: str) -> Gate:
        chosen = self.defaults[metric]
        for pattern, gates in self.overrides:
            if metric in gates and re.search(pattern, case_id):
                chosen = gates[metric]
        return chosen


#: The gates of a suite without ``[thresholds]``: what the history uses where it has no suite.
DEFAULT_THRESHOLDS = ThresholdSet()


_CHECK_KEYS = ("workers", "step_workers", "max_workers", "alpha", "measure_identical")


def parse_check(reader: Reader, raw: object, key: str = "[check]") -> CheckSettings:
    """The ``[check]`` table: worker counts of the sequential looks, the false-discovery level, and
    whether identical artifacts are timed anyway."""
    table = reader.table(raw, key, _CHECK_KEYS)
    base = CheckSettings()

    def count(name: str, default: int) -> int:
        return reader.positive_int(table[name], f"{key}.{name}") if name in table else default

    settings = CheckSettings(workers=count("workers", base.workers),
                             step_workers=count("step_workers", base.step_workers),
                             max_workers=count("max_workers", base.max_workers))
    if "alpha" in table:
        alpha = table["alpha"]
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
            raise reader.fail(f"{key}.alpha", f"expected a probability between 0 and 0.5 such as 0.05, "
                              f"found {describe(alpha)}")
        settings = dataclasses.replace(settings, alpha=float(alpha))
    if "measure_identical" in table:
        if not isinstance(table["measure_identical"], bool):
            raise reader.fail(f"{key}.measure_identical", f"expected true or false, found "
                              f"{describe(table['measure_identical'])}")
        settings = dataclasses.replace(settings, measure_identical=table["measure_identical"])
    if settings.max_workers < settings.workers:
        raise reader.fail(f"{key}.max_workers", f"expected an integer >= workers ({settings.workers}), "
                          f"found {settings.max_workers}")
    return settings


def parse_thresholds(reader: Reader, raw: object, key: str = "[thresholds]") -> ThresholdSet:
    """The ``[thresholds]`` table: default gates, then the overrides of an ``include`` file (written
    by ``perfguard calibrate``, relative to the suite), then the suite's own overrides."""
    table = reader.table(raw, key, ("include", "overrides", "across_runs", *METRICS))
    defaults = dict(DEFAULT_THRESHOLDS.defaults)
    for metric in METRICS:
        if metric in table:
            defaults[metric] = _read_gate(reader, table[metric], metric, key)
    overrides: list[tuple[str, dict[str, Gate]]] = []
    if "include" in table:
        path = reader.path.parent / reader.string(table["include"], f"{key}.include")
        try:
            included = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise reader.fail(f"{key}.include", f"file not found: {path} (write it with perfguard calibrate)") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: malformed TOML: {exc}") from None
        floors = Reader(path)
        included_table = floors.table(included.get("thresholds", {}), "[thresholds]", ("overrides",))
        overrides += _overrides(floors, included_table.get("overrides", []))
    overrides += _overrides(reader, table.get("overrides", []))
    if "across_runs" in table:
        return ThresholdSet(defaults, tuple(overrides), reader.percent(table["across_runs"], f"{key}.across_runs"))
    return ThresholdSet(defaults, tuple(overrides))


def _overrides(reader: Reader, items: object) -> list[tuple[str, dict[str, Gate]]]:
    """``[[thresholds.overrides]]``: a regular expression searched in the case id, and gates."""
    if not isinstance(items, list):
        raise reader.fail("[[thresholds.overrides]]", f"expected an array of tables, found {describe(items)}")
    overrides = []
    for index, item in enumerate(items):
        key = f"[[thresholds.overrides]] #{index + 1}"
        table = reader.table(item, key, ("pattern", *METRICS))
        pattern = table.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise reader.fail(key, "missing 'pattern' (a regular expression searched in the case id)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise reader.fail(f"{key}.pattern", f"{pattern!r} is not a regular expression: {exc}") from None
        overrides.append((pattern, {m: _read_gate(reader, v, m, key) for m, v in table.items() if m != "pattern"}))
    return overrides


def _read_gate(reader: Reader, value: object, metric: str, key: str) -> Gate:
    try:
        return _gate(value, metric)
    except UserError as exc:
        raise reader.fail(f"{key}.{metric}", str(exc)) from None
