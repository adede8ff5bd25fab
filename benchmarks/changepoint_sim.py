"""Change-point detection on simulated nightly series with known truth: perfguard vs asv.

Each scenario draws ``reps`` series with fixed seeds (nightly noise like the project's stable
machine: absolute latency cv 1-3 % a night; paired ratios sd 0.5-1.5 % a night), with steps at
known nights, slow drift, single-night outliers or bimodal nights, and runs every method on the
same series. A *hit* is a reported change within +-2 nights of a true step with the right
direction; every other reported change is a false alarm. Printed per scenario: hit rate, false
alarms per 100 nights, mean |position error| of the hits, and ms per series.

    .venv/bin/python benchmarks/changepoint_sim.py            # about 45 s on 2 cores
    .venv/bin/python benchmarks/changepoint_sim.py --quick    # about 10 s
    .venv/bin/python benchmarks/changepoint_sim.py --sweep    # about 15 s: Z_KEEP / Z_RATIO trade-off (ours only)

Methods: ``perfguard`` is :func:`perfguard.history.changepoints.detect`; ``asv`` is
``asv.step_detect.detect_steps`` (exact L1 Potts, automatic gamma) on the values - on the chained
index for ratio series - with every boundary between two steps of relative size >= ``min_size``
reported as a change. ``perfguard-noci`` is perfguard on ratio series without the nights'
paired intervals.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from asv.step_detect import detect_steps  # noqa: E402

from perfguard.history import changepoints as cp  # noqa: E402

MIN_SIZE = 0.01
TOLERANCE = 2  # nights either side of the true step that still count as a hit
BASE_SECONDS = 5e-3
WORKERS = 10  # worker processes of one night's paired check
T975 = {9: 2.2621571627409915}  # Student t quantile for the check's interval


@dataclass(frozen=True)
class Scenario:
    name: str
    kind: str  # "absolute" or "ratio"
    n: int
    steps: tuple[tuple[float, float], ...] = ()  # (position as a fraction of n or -k from the end, size)
    noise: float = 0.01  # absolute: cv per night; ratio: sd of the night's paired log ratio
    drift: float = 0.0  # relative drift per year (365 nights)
    outliers: float = 0.0  # probability of an outlier night
    bimodal: float = 0.0  # probability of the other mode (3 % apart)


@dataclass
class Series:
    values: list[float]
    ci: list[tuple[float | None, float | None]] | None
    truth: list[tuple[int, int]]  # (index of the first night after the step, sign)


@dataclass
class Tally:
    steps: int = 0
    hits: int = 0
    nights: int = 0
    false_alarms: int = 0
    position_errors: list[int] = field(default_factory=list)
    seconds: float = 0.0
    series: int = 0

    def row(self) -> str:
        hit = f"{self.hits / self.steps:6.1%}" if self.steps else "     -"
        err = f"{np.mean(self.position_errors):4.2f}" if self.position_errors else "   -"
        fa = 100.0 * self.false_alarms / self.nights
        return f"{hit}  {fa:6.2f}  {err}  {1e3 * self.seconds / self.series:7.2f}"


def _positions(rng: np.random.Generator, scenario: Scenario) -> list[tuple[int, float]]:
    out = []
    for where, size in scenario.steps:
        if where < 0:
            pos = scenario.n + int(where)
        elif where == 0:  # anywhere, at least 10 nights from either end
            pos = int(rng.integers(10, scenario.n - 10))
        else:
            pos = int(round(where * scenario.n))
        out.append((pos, size))
    return out


def simulate(rng: np.random.Generator, scenario: Scenario) -> Series:
    n = scenario.n
    steps = _positions(rng, scenario)
    t = np.arange(n)
    truth = [(pos, 1 if size > 0 else -1) for pos, size in steps]
    if scenario.kind == "absolute":
        level = np.ones(n) * (1.0 + scenario.drift * t / 365)
        for pos, size in steps:
            level[pos:] *= 1.0 + size
        noise = np.exp(scenario.noise * rng.standard_normal(n))
        noise *= np.where(rng.random(n) < scenario.outliers, 1.2, 1.0)
        noise *= np.where(rng.random(n) < scenario.bimodal, 1.03, 1.0)
        return Series(list(BASE_SECONDS * level * noise), None, truth)
    # ratio: each night's paired check against the previous night's commit: WORKERS worker processes,
    # each a log ratio head/base; the night's ratio is their mean, its interval the t interval.
    per_worker = scenario.noise * np.sqrt(WORKERS)
    lr = per_worker * rng.standard_normal((n, WORKERS)) + np.log1p(scenario.drift) / 365
    # outlier night: one worker's head is 20 % slow (a burst on the machine during that process)
    disturbed = rng.random(n) < scenario.outliers
    lr[disturbed, 0] += np.log(1.2)
    # bimodal: each worker process lands in the slow mode (3 % slower) with p, head and base apart
    modes = (rng.random((n, WORKERS, 2)) < scenario.bimodal) * np.log(1.03)
    lr += modes[:, :, 0] - modes[:, :, 1]
    for pos, size in steps:
        lr[pos] += np.log1p(size)
    mean = lr.mean(axis=1)
    half = T975[WORKERS - 1] * lr.std(axis=1, ddof=1) / np.sqrt(WORKERS)
    ci: list[tuple[float | None, float | None]] = [
        (float(np.exp(m - h)), float(np.exp(m + h))) for m, h in zip(mean, half, strict=True)
    ]
    return Series(list(np.exp(mean)), ci, truth)


# --------------------------------------------------------------------------------------------
# methods: each returns [(index, sign)]

Method = Callable[[Series, str], list[tuple[int, int]]]


def perfguard_method(series: Series, kind: str) -> list[tuple[int, int]]:
    found = cp.detect(series.values, kind=kind, ci=series.ci, min_size=MIN_SIZE)
    return [(c.index, {"regression": 1, "improvement": -1}.get(c.direction, 0)) for c in found]


def perfguard_noci(series: Series, kind: str) -> list[tuple[int, int]]:
    return perfguard_method(Series(series.values, None, series.truth), kind)


def asv_method(series: Series, kind: str) -> list[tuple[int, int]]:
    y = cp.chained_index(series.values) if kind == "ratio" else series.values
    steps = detect_steps(y)
    out = []
    for (_, _, before, _, _), (left, _, after, _, _) in zip(steps, steps[1:], strict=False):
        ratio = after / before
        if abs(ratio - 1.0) >= MIN_SIZE:
            out.append((left, 1 if ratio > 1.0 else -1))
    return out


def score(found: Sequence[tuple[int, int]], truth: Sequence[tuple[int, int]], tally: Tally, n: int) -> None:
    used: set[int] = set()
    for pos, sign in truth:
        tally.steps += 1
        near = [
            (abs(i - pos), k)
            for k, (i, s) in enumerate(found)
            if k not in used and s == sign and abs(i - pos) <= TOLERANCE
        ]
        if near:
            err, k = min(near)
            used.add(k)
            tally.hits += 1
            tally.position_errors.append(err)
    tally.false_alarms += len(found) - len(used)
    tally.nights += n


def scenarios(quick: bool) -> list[Scenario]:
    out = []
    for n in (365,) if quick else (60, 365):
        a = "absolute"
        out += [
            Scenario(f"A/A cv1% n={n}", a, n),
            Scenario(f"A/A cv3% n={n}", a, n, noise=0.03),
            Scenario(f"drift+3%/yr cv1% n={n}", a, n, drift=0.03),
            Scenario(f"drift+10%/yr cv1% n={n}", a, n, drift=0.10),
            Scenario(f"outliers 1/30 +20% n={n}", a, n, outliers=1 / 30),
            Scenario(f"bimodal p.3 3% n={n}", a, n, bimodal=0.3),
            Scenario(f"+2% cv1% n={n}", a, n, ((0, 0.02),)),
            Scenario(f"+5% cv1% n={n}", a, n, ((0, 0.05),)),
            Scenario(f"+10% cv1% n={n}", a, n, ((0, 0.10),)),
            Scenario(f"-5% cv1% n={n}", a, n, ((0, -0.05),)),
            Scenario(f"+5% cv3% n={n}", a, n, ((0, 0.05),), noise=0.03),
            Scenario(f"+5% 4 nights ago n={n}", a, n, ((-4, 0.05),)),
            Scenario(f"+5%,+10% two steps n={n}", a, n, ((1 / 3, 0.05), (2 / 3, 0.10))),
            Scenario(f"+5%,-5% two steps n={n}", a, n, ((1 / 3, 0.05), (2 / 3, -0.05))),
            Scenario(
                f"+5% drift+outl+bimod n={n}", a, n, ((0, 0.05),), drift=0.03, outliers=1 / 30, bimodal=0.3
            ),
        ]
        r = "ratio"
        out += [
            Scenario(f"ratio A/A sd0.5% n={n}", r, n, noise=0.005),
            Scenario(f"ratio A/A sd1.5% n={n}", r, n, noise=0.015),
            Scenario(f"ratio drift+3%/yr n={n}", r, n, noise=0.01, drift=0.03),
            Scenario(f"ratio outliers 1/30 +20% n={n}", r, n, noise=0.01, outliers=1 / 30),
            Scenario(f"ratio bimodal p.3 n={n}", r, n, noise=0.005, bimodal=0.3),
            Scenario(f"ratio +2% sd0.5% n={n}", r, n, ((0, 0.02),), noise=0.005),
            Scenario(f"ratio +5% sd0.5% n={n}", r, n, ((0, 0.05),), noise=0.005),
            Scenario(f"ratio +5% sd1% n={n}", r, n, ((0, 0.05),), noise=0.01),
            Scenario(f"ratio +10% sd1.5% n={n}", r, n, ((0, 0.10),), noise=0.015),
            Scenario(f"ratio -5% sd0.5% n={n}", r, n, ((0, -0.05),), noise=0.005),
            Scenario(f"ratio +5%,+10% sd1% n={n}", r, n, ((1 / 3, 0.05), (2 / 3, 0.10)), noise=0.01),
        ]
    return out


def run(quick: bool, methods: dict[str, Method], reps_ours: int, reps_asv: int) -> None:
    print(
        f"min_size {MIN_SIZE:.0%}, hit = right direction within +-{TOLERANCE} nights; FA = false alarms per"
        f" 100 nights; err = mean |position error| of hits; ms = per series"
    )
    header = f"{'scenario':32s}" + "".join(f" | {name:^31s}" for name in methods)
    print(header)
    print(f"{'':32s}" + " | {:>6s}  {:>6s}  {:>4s}  {:>7s}".format("hit", "FA", "err", "ms") * len(methods))
    print("-" * len(header))
    for k, scenario in enumerate(scenarios(quick)):
        cells = []
        for name, method in methods.items():
            if name == "perfguard-noci" and scenario.kind != "ratio":
                cells.append(f"{'':31s}")
                continue
            reps = reps_asv if name == "asv" else reps_ours
            rng = np.random.default_rng(1000 + k)  # every method sees the same series
            tally = Tally()
            for _ in range(reps):
                series = simulate(rng, scenario)
                start = time.perf_counter()
                found = method(series, scenario.kind)
                tally.seconds += time.perf_counter() - start
                tally.series += 1
                score(found, series.truth, tally, scenario.n)
            cells.append(tally.row())
        print(f"{scenario.name:32s}" + "".join(f" | {c}" for c in cells), flush=True)


def store_pass(series_count: int = 1500, n: int = 365) -> None:
    """Wall time of ``detect`` over a store's worth of series: half absolute, half ratio, mixed noise."""
    rng = np.random.default_rng(99)
    kinds = [s for s in scenarios(quick=True) if s.n == n]
    batch = [(s.kind, simulate(rng, s)) for s in (kinds[k % len(kinds)] for k in range(series_count))]
    start = time.perf_counter()
    changes = sum(len(cp.detect(x.values, kind=kind, ci=x.ci, min_size=MIN_SIZE)) for kind, x in batch)
    seconds = time.perf_counter() - start
    print(
        f"\nstore pass: {series_count} series x {n} nights (every scenario above in turn): {seconds:.2f} s,"
        f" {1e3 * seconds / series_count:.2f} ms per series, {changes} changes"
    )


def sweep(quick: bool) -> None:
    """Hit rate and false alarms of perfguard as its two thresholds move (everything else fixed)."""
    reps = 100 if quick else 300
    names = {
        "absolute": [
            "A/A cv1% n=365",
            "outliers 1/30 +20% n=365",
            "bimodal p.3 3% n=365",
            "drift+10%/yr cv1% n=365",
            "+2% cv1% n=365",
            "+5% cv3% n=365",
            "+5% 4 nights ago n=365",
        ],
        "ratio": [
            "ratio A/A sd1.5% n=365",
            "ratio outliers 1/30 +20% n=365",
            "ratio bimodal p.3 n=365",
            "ratio +2% sd0.5% n=365",
            "ratio +5% sd1% n=365",
        ],
    }
    table = {s.name: s for s in scenarios(quick=True)}
    for kind, attr in (("absolute", "Z_KEEP"), ("ratio", "Z_RATIO")):
        print(f"\n{attr}: hit rate / false alarms per 100 nights ({reps} series each)")
        print(f"{attr:>8s}" + "".join(f" | {n[:26]:>26s}" for n in names[kind]))
        original = getattr(cp, attr)
        for z in (3.0, 3.5, 4.0, 4.5, 5.0):
            setattr(cp, attr, z)
            cells = []
            for k, name in enumerate(names[kind]):
                rng = np.random.default_rng(5000 + k)
                tally = Tally()
                for _ in range(reps):
                    series = simulate(rng, table[name])
                    score(perfguard_method(series, kind), series.truth, tally, table[name].n)
                    tally.series += 1
                hit = f"{tally.hits / tally.steps:.1%}" if tally.steps else "-"
                cells.append(f"{hit:>6s} / {100 * tally.false_alarms / tally.nights:5.2f}")
            print(f"{z:8.1f}" + "".join(f" | {c:>26s}" for c in cells), flush=True)
        setattr(cp, attr, original)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="365 nights only, fewer series")
    parser.add_argument("--sweep", action="store_true", help="threshold trade-off of perfguard instead")
    args = parser.parse_args()
    if args.sweep:
        sweep(args.quick)
        return
    methods: dict[str, Method] = {
        "perfguard": perfguard_method,
        "perfguard-noci": perfguard_noci,
        "asv": asv_method,
    }
    reps_ours, reps_asv = (100, 10) if args.quick else (300, 40)
    run(args.quick, methods, reps_ours, reps_asv)
    store_pass()


if __name__ == "__main__":
    main()
