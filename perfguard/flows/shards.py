"""``--shard K/N`` for run, check and nightly: which cases this shard runs, and its ``ShardInfo``.

The partition itself is pure (:mod:`perfguard.suite.shards`: measurement groups onto N shards by
greedy LPT). Here are its costs, an estimate in seconds of each case's compile and measurement:

* ``history_costs``: the last known compile time and median latency of each case in the history
  store (its absolute series), turned into seconds by the case's measurement settings. Points of
  ``exclude_commit`` (tonight's commit, which the shards of tonight write while others still
  partition) are skipped, so every shard of one night sees the same costs.
* ``static_costs``: without a store, or for a case the store has not seen, an estimate from the
  suite alone (no model is built): the compute of a zoo model from its parameters (or the size of
  an ``.onnx`` file), times the compiles and timed runs its settings ask for.

Every shard must compute the same partition: the costs depend only on the suite, the selection and
the store's past, never on this machine. ``perfguard merge`` checks it afterwards: the shards'
cases must be disjoint and cover the whole (``ShardInfo.cases``).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from perfguard.errors import UserError
from perfguard.results.shard import ShardInfo
from perfguard.suite import CaseSpec, Suite
from perfguard.suite.shards import ShardSpec, shard_cases

if TYPE_CHECKING:
    from perfguard.store import Night, Store

#: Seconds of a compile that does nothing (a worker process, the backend's session): every case pays it.
COMPILE_BASE_S = 0.3
#: Seconds of compile, and of one inference, per giga multiply-accumulate of the model (a rough CPU figure:
#: only the ratios between cases matter).
COMPILE_S_PER_GMAC = 0.5
RUN_S_PER_GMAC = 0.02
#: Seconds to start one measurement worker (paid once per worker of a group, not per case).
WORKER_START_S = 0.6


def model_gmacs(case: CaseSpec) -> float:
    """A rough compute size of the case's model in giga multiply-accumulates, from the suite alone:
    a zoo architecture's parameters (its defaults filled in), or an ``.onnx`` file's size (one MAC
    per weight byte); 0.001 where neither says anything."""
    model = case.model
    if model.path is not None:
        try:
            return max(0.001, model.path.stat().st_size / 1e9)
        except OSError:
            return 0.001
    from perfguard.models.zoo import architecture_params

    try:
        params = {**architecture_params(model.arch or ""), **model.params}
    except UserError:
        return 0.001

    def number(name: str, default: float) -> float:
        value = params.get(name)
        return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default

    if model.arch == "resnet":
        size = number("width", 64) ** 2 * number("image_size", 224) ** 2 * 9 * number("depth", 18) / 4
    elif model.arch == "bert":
        hidden, seq = number("hidden", 256), number("seq_len", 128)
        size = number("layers", 4) * seq * (12 * hidden ** 2 + 2 * seq * hidden)
    elif model.arch == "yolo":
        size = number("width", 16) ** 2 * number("image_size", 256) ** 2 * 9 * 4
    else:
        size = 1e6
    return max(0.001, size * number("batch", 1) / 1e9)


def _measure_s(case: CaseSpec, latency_s: float) -> float:
    """Seconds to time one case in its group: every worker runs its warm-up and rounds, each value
    at least ``min_time`` long (the early stop of ``max_time`` caps a worker's rounds)."""
    m = case.measure
    value = max(m.min_time, latency_s)
    per_worker = m.warmup * value + min(m.rounds * value, max(m.max_time, m.min_rounds * value))
    return m.workers * per_worker


def static_costs(cases: Sequence[CaseSpec]) -> dict[str, float]:
    """Each case's estimated seconds from the suite alone (see the module docstring)."""
    out = {}
    for case in cases:
        gmacs = model_gmacs(case)
        compile_s = case.measure.compile_repeats * (COMPILE_BASE_S + COMPILE_S_PER_GMAC * gmacs)
        out[case.id] = compile_s + _measure_s(case, RUN_S_PER_GMAC * gmacs) + case.measure.workers * WORKER_START_S
    return out


def history_costs(store: Store, suite: Suite, cases: Sequence[CaseSpec], exclude_commit: str | None) -> dict[str, float]:
    """Each case's seconds from its last known compile time and median latency in ``store`` (the
    newest point of its absolute series not at ``exclude_commit``); cases the store lacks are
    left out (the caller falls back to :func:`static_costs`)."""
    wanted = {c.id: c for c in cases}
    newest: dict[tuple[str, str], tuple[str, float]] = {}
    for series in store.series(suite=suite.name, kind="absolute"):
        key = (series.key.case, series.key.metric)
        if series.key.case not in wanted or series.key.metric not in ("latency", "compile_time"):
            continue
        for point in store.points(series.id):
            if point.commit is not None and point.commit == exclude_commit or not math.isfinite(point.value):
                continue
            if key not in newest or (point.time, point.value) > newest[key]:
                newest[key] = (point.time, point.value)
    out = {}
    for case_id, case in wanted.items():
        latency, compile_s = newest.get((case_id, "latency")), newest.get((case_id, "compile_time"))
        if latency is None or compile_s is None:
            continue
        out[case_id] = (case.measure.compile_repeats * compile_s[1] + _measure_s(case, latency[1])
                        + case.measure.workers * WORKER_START_S)
    return out


def settings_sha256(command: str, settings: Mapping[str, object]) -> str:
    """The hash of what decides a shard's work beyond the suite file: the command and its settings."""
    text = json.dumps({"command": command, **settings}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def head_commit(suite: Suite) -> str | None:
    """The commit the compiler's working tree is at, None outside git (or before the first commit)."""
    from perfguard.compile.checkout import working_tree

    try:
        return working_tree(suite).commit
    except UserError:
        return None


def select_shard(suite: Suite, cases: list[CaseSpec], spec: ShardSpec, *, command: str, settings: Mapping[str, object],
                 store: Store | None = None, exclude_commit: str | None = None,
                 base_commit: str | None = None) -> tuple[list[CaseSpec], ShardInfo]:
    """The cases of shard ``spec`` of ``cases`` and its ``ShardInfo`` (head commit: the working tree's).
    A shard that gets no case (fewer measurement groups than shards) is a ``UserError``."""
    costs = static_costs(cases)
    source = "static"
    if store is not None:
        known = history_costs(store, suite, cases, exclude_commit)
        if known:
            costs, source = {**costs, **known}, "history"
    mine = shard_cases(cases, spec, costs)
    if not mine:
        raise UserError(f"--shard {spec}: this shard gets no case ({len(cases)} case(s) in "
                        f"{len({(c.model.name, c.runner) for c in cases})} measurement group(s) over {spec.n} shards); "
                        "use fewer shards")
    info = ShardInfo(spec.k, spec.n, tuple(c.id for c in cases), suite.sha256, settings_sha256(command, settings),
                     head_commit(suite), base_commit, source, part=tuple(c.id for c in mine))
    return mine, info


def shard_costs(costs: Mapping[str, float], cases: Sequence[CaseSpec], n: int) -> list[float]:
    """The estimated seconds of each of ``n`` shards of ``cases`` (what the balance is judged by)."""
    return [sum(costs[c.id] for c in shard_cases(cases, ShardSpec(k, n), costs)) for k in range(1, n + 1)]


def stored_shard(store: Store, night: Night) -> ShardInfo | None:
    """The ``ShardInfo`` of the document a night stored (None: not a shard, or no document)."""
    if night.document_id is None:
        return None
    data = store.document(night.document_id)
    shard = data.get("shard") if isinstance(data, dict) else None
    return ShardInfo.from_json(shard) if isinstance(shard, dict) else None


def shard_base(store: Store, suite: str, shard: ShardInfo) -> Night | None:
    """The night a part of a sharded night (``nightly --shard K/N``) is checked against: the newest
    good night that is not another part of tonight (same N, another K, tonight's head commit,
    stored while this one started); None before the first night."""
    for night in reversed(store.nights(suite)):
        if night.broken:
            continue
        other = stored_shard(store, night)
        if (other is not None and other.n == shard.n and other.k != shard.k
                and night.commit == shard.head_commit):
            continue
        return night
    return None
