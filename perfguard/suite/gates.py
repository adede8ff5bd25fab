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
artifact_size = "5%"                   # deterministic metrics: any change is reported, the gate fails
node_count = "5%"                      # when the change exceeds the threshold
include = "smoke.floors.toml"          # overrides written by `perfguard calibrate` (applied first)

[[thresholds.overrides]]
pattern = "^bert"                      # a regular expression searched in the case id
latency = "median:5%"
```
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from perfguard.errors import UserError, did_you_mean
from perfguard.stats.thresholds import MetricKind, Threshold, parse_threshold

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
    default: str
    unit: str


METRICS: dict[str, MetricSpec] = {
    "latency": MetricSpec("latency", "time", True, "median:2%", "s"),
    "compile_time": MetricSpec("compile_time", "time", True, "median:25%", "s"),
    "memory": MetricSpec("memory", "memory", False, "5%", "B"),
    "artifact_size": MetricSpec("artifact_size", "memory", False, "5%", "B"),
    "node_count": MetricSpec("node_count", "count", False, "5%", "nodes"),
}


@dataclass(frozen=True)
class Gate:
    """The floor of one metric: statistic plus relative and absolute amounts (either may be 0)."""

    statistic: str
    relative: float
    absolute: float
    text: str

    def threshold(self) -> Threshold:
        """As a single ``Threshold`` (for deterministic metrics: the relative amount if set)."""
        if self.relative > 0 or self.absolute == 0:
            return Threshold(self.statistic, relative=self.relative)
        return Threshold(self.statistic, absolute=self.absolute)


def parse_gate(value: Any, metric: str, where: str) -> Gate:
    spec = METRICS[metric]
    texts = value if isinstance(value, list) else [value]
    if not texts or not all(isinstance(t, str) for t in texts):
        raise UserError(f"{where}: {metric}: expected a threshold such as \"{spec.default}\" or a list of them")
    parsed: list[Threshold] = []
    for text in texts:
        try:
            parsed.append(parse_threshold(text, kind=spec.kind))
        except UserError as exc:
            raise UserError(f"{where}: {metric}: {exc}") from None
    statistics = {t.statistic for t in parsed}
    if len(statistics) > 1:
        raise UserError(f"{where}: {metric}: all thresholds of one metric must use the same statistic, "
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


@dataclass(frozen=True)
class ThresholdSet:
    """Default gates plus ordered overrides ``(regex, {metric: Gate})``; later overrides win."""

    defaults: Mapping[str, Gate] = field(default_factory=lambda: {
        name: parse_gate(spec.default, name, "default") for name, spec in METRICS.items()})
    overrides: tuple[tuple[str, Mapping[str, Gate]], ...] = ()

    def gate(self, case_id: str, metric: str) -> Gate:
        chosen = self.defaults[metric]
        for pattern, gates in self.overrides:
            if metric in gates and re.search(pattern, case_id):
                chosen = gates[metric]
        return chosen


def _check_keys(table: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in table:
        if key not in allowed:
            raise UserError(f"{where}.{key}: unknown key{did_you_mean(key, allowed, most=1)}; expected one of: {', '.join(allowed)}")


def parse_check(raw: Any, where: str) -> CheckSettings:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a table")
    _check_keys(raw, ("workers", "step_workers", "max_workers", "alpha"), where)
    values: dict[str, Any] = {}
    for key in ("workers", "step_workers", "max_workers"):
        if key in raw:
            if isinstance(raw[key], bool) or not isinstance(raw[key], int) or raw[key] < 1:
                raise UserError(f"{where}.{key}: expected an integer >= 1, found {raw[key]!r}")
            values[key] = raw[key]
    if "alpha" in raw:
        alpha = raw["alpha"]
        if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not 0 < alpha < 0.5:
            raise UserError(f"{where}.alpha: expected a probability between 0 and 0.5 such as 0.05, found {alpha!r}")
        values["alpha"] = float(alpha)
    settings = CheckSettings(**values)
    if settings.max_workers < settings.workers:
        raise UserError(f"{where}.max_workers ({settings.max_workers}) must be >= workers ({settings.workers})")
    return settings


def _parse_overrides(items: Any, where: str) -> list[tuple[str, dict[str, Gate]]]:
    if not isinstance(items, list):
        raise UserError(f"{where}: expected an array of tables [[thresholds.overrides]]")
    overrides = []
    for index, item in enumerate(items):
        key = f"{where} #{index + 1}"
        if not isinstance(item, dict):
            raise UserError(f"{key}: expected a table")
        _check_keys(item, ("pattern", *METRICS), key)
        pattern = item.get("pattern")
        if not isinstance(pattern, str) or not pattern:
            raise UserError(f"{key}: missing 'pattern' (a regular expression searched in the case id)")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UserError(f"{key}: pattern {pattern!r} is not a regular expression: {exc}") from None
        overrides.append((pattern, {m: parse_gate(v, m, key) for m, v in item.items() if m != "pattern"}))
    return overrides


def parse_thresholds(raw: Any, where: str, base_dir: Path) -> ThresholdSet:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: expected a table")
    _check_keys(raw, ("include", "overrides", *METRICS), where)
    defaults = dict(ThresholdSet().defaults)
    for metric in METRICS:
        if metric in raw:
            defaults[metric] = parse_gate(raw[metric], metric, where)
    overrides: list[tuple[str, dict[str, Gate]]] = []
    if "include" in raw:
        include = raw["include"]
        if not isinstance(include, str):
            raise UserError(f"{where}.include: expected a file name")
        path = base_dir / include
        try:
            included = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise UserError(f"{where}.include: file not found: {path} (write it with perfguard calibrate)") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise UserError(f"{path}: malformed TOML: {exc}") from None
        table = included.get("thresholds", {})
        _check_keys(table, ("overrides",), f"{path}: [thresholds]")
        overrides += _parse_overrides(table.get("overrides", []), f"{path}: [[thresholds.overrides]]")
    overrides += _parse_overrides(raw.get("overrides", []), f"{where} [[thresholds.overrides]]")
    return ThresholdSet(defaults, tuple(overrides))
