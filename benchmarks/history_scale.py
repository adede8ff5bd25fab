"""How the history store scales: one year of nightlies x 100 cases x 5 metrics x 3 runners.

Builds real result documents (the golden result file's first case, re-keyed: 100 cases, each
night's latency drawn around a per-case level with 1.5 % noise, one +8 % step in some cases),
ingests them through ``Store.ingest`` (the code ``perfguard history ingest`` runs), then times
change detection over the whole store (``Store.all_points`` + ``changepoints.detect`` per series,
what a nightly does over every series), ``perfguard history list`` and ``history changes`` as
commands, and prints the store size. SQLite always; PostgreSQL too where a throwaway server can be
started (the tests' helper, ``tests/pg.py``: a throwaway cluster with fsync off, so its ingest rate is
an upper bound for a server that syncs).

    python benchmarks/history_scale.py                 # 365 nights (about 550k points)
    python benchmarks/history_scale.py --nights 60     # a quicker look
    python benchmarks/history_scale.py --backends sqlite
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GOLDEN = REPO / "tests" / "golden" / "v1" / "result-run.json"
RUNNERS = ("cpu-a", "cpu-b", "cpu-c")  # three machines: three fingerprint classes


def documents(nights: int, cases: int, seed: int = 0):  # type: ignore[no-untyped-def]
    """Yield (night, runner, result JSON) for every night and runner, oldest first."""
    golden = json.loads(GOLDEN.read_text())
    template = golden["cases"][0]
    rng = np.random.default_rng(seed)
    level = rng.uniform(0.5e-3, 20e-3, size=cases)
    step_at = {c: int(rng.integers(nights // 4, 3 * nights // 4)) for c in range(0, cases, 10)}
    start = datetime(2026, 1, 1, 3, 17, tzinfo=timezone.utc)
    for night in range(nights):
        stamp = (start + timedelta(days=night)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        commit = f"{night:08x}".ljust(40, "0")
        for r, runner in enumerate(RUNNERS):
            doc = copy.deepcopy({k: v for k, v in golden.items() if k != "cases"})
            doc["started_at"] = doc["finished_at"] = stamp
            doc["compiler"] = {"label": "head", "commit": commit, "subject": f"night {night}", "pass_path": None}
            env = doc["environment"]["cpu"]
            env["cpu_model"] = f"Synthetic CPU {runner}"
            entries = []
            for c in range(cases):
                entry = copy.deepcopy(template)
                entry["id"] = f"m{c:03d}/p/cpu"
                entry["model"] = f"m{c:03d}"
                entry["key"]["model"]["name"] = entry["model"]
                entry["key"]["model"]["sha256"] = f"{c:064x}"
                entry["started_at"] = entry["finished_at"] = stamp
                true = level[c] * (1 + 0.03 * r) * (1.08 if c in step_at and night >= step_at[c] else 1.0)
                per_worker = [[float(v) for v in true * (1 + rng.normal(0, 0.015, 3))] for _ in range(2)]
                flat = sorted(v for w in per_worker for v in w)
                latency = entry["metrics"]["latency_s"]
                latency.update(per_worker=per_worker, median=flat[len(flat) // 2], mean=float(np.mean(flat)),
                               min=flat[0], max=flat[-1])
                entry["metrics"]["compile_times_s"] = [float(v) for v in 0.05 * (1 + rng.normal(0, 0.05, 5))]
                entry["metrics"]["compile_time_s"] = sorted(entry["metrics"]["compile_times_s"])[2]
                entries.append(entry)
            doc["cases"] = entries
            yield night, runner, doc


def bench(url: str, nights: int, cases: int, workdir: Path) -> dict[str, float]:
    from perfguard.history.changepoints import detect
    from perfguard.history.series_changes import MIN_STEP
    from perfguard.store import Store

    out: dict[str, float] = {}
    count = points = 0
    started = time.perf_counter()
    with Store.open(url) as store:
        for _, _, doc in documents(nights, cases):
            done = store.ingest_json(doc, source="history_scale")
            count += 1
            points += done.points
        out["ingest_s"] = time.perf_counter() - started
        out["documents"], out["points"] = count, points
        t0 = time.perf_counter()
        series = {s.id: s for s in store.series()}
        every = store.all_points()
        t1 = time.perf_counter()
        found = 0
        for series_id, pts in every.items():
            key = series[series_id].key
            found += len(detect([p.value for p in pts], kind=key.kind, min_size=MIN_STEP.get(key.metric, 0.01)))
        t2 = time.perf_counter()
        out.update(read_all_s=t1 - t0, detect_s=t2 - t1, changes_found=found, series=len(series))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    for what in ("list", "changes"):
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "perfguard", "history", what, "--store", url,
                               "--json", str(workdir / f"{what}.json")], capture_output=True, text=True, env=env,
                              check=False)
        out[f"history_{what}_s"] = time.perf_counter() - t0
        if proc.returncode != 0:
            raise SystemExit(f"history {what} failed: {proc.stderr.strip()[-300:]}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--cases", type=int, default=100)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perfguard-scale-") as tmp:
        workdir = Path(tmp)
        rows = []
        for backend in args.backends.split(","):
            if backend == "sqlite":
                path = workdir / "history.sqlite"
                figures = bench(f"sqlite:///{path}", args.nights, args.cases, workdir)
                figures["size_mb"] = path.stat().st_size / 1e6
                rows.append(("sqlite", figures))
            elif backend == "postgresql":
                sys.path.insert(0, str(REPO / "tests"))
                from pg import PostgresUnavailable, start_server  # the tests' throwaway cluster

                try:
                    server = start_server()
                except PostgresUnavailable as exc:
                    print(f"postgresql: skipped ({exc})")
                    continue
                try:
                    url = server.url()
                    figures = bench(url, args.nights, args.cases, workdir)
                    import psycopg

                    with psycopg.connect(url) as conn:
                        row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                    figures["size_mb"] = (row[0] if row else 0) / 1e6
                finally:
                    server.stop()
                rows.append(("postgresql", figures))
        print()
        print(f"{args.nights} nights x {args.cases} cases x {len(RUNNERS)} runners")
        print("| store | documents | points | series | ingest (docs/s) | points/s | read all (s) | detect all (s) | "
              "changes found | `history list` (s) | `history changes` (s) | size (MB) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, f in rows:
            print(f"| {name} | {f['documents']:.0f} | {f['points']:.0f} | {f['series']:.0f} | "
                  f"{f['documents'] / f['ingest_s']:.1f} | {f['points'] / f['ingest_s']:.0f} | {f['read_all_s']:.2f} | "
                  f"{f['detect_s']:.2f} | {f['changes_found']:.0f} | {f['history_list_s']:.2f} | "
                  f"{f['history_changes_s']:.2f} | {f['size_mb']:.1f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
