"""How long ``perfguard history site`` takes on a store of 500 series, and how fast its index loads.

Builds a synthetic store with ``history_scale.documents`` (the golden result's first case
re-keyed as 100 cases, 5 metrics each: 500 series; one runner; 60 nights by default; a +8 % latency
step in every tenth case), records the nights, upserts a change for every change point
``detect`` finds (what a nightly would store, confirmed), then times the site build (reading the
store, rendering, writing) and loads ``index.html`` and one series page in headless Chromium,
printing the navigation timing (``performance.getEntriesByType("navigation")``). Goal: build
<= 10 s, index load <= 1 s.

    python benchmarks/history_site.py                  # 100 cases x 5 metrics x 60 nights
    python benchmarks/history_site.py --nights 365
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

RUNNER = "cpu-a"


def build_store(url: str, nights: int, cases: int) -> dict[str, float]:
    from history_scale import documents  # type: ignore[import-not-found]

    from perfguard.history.changepoints import detect
    from perfguard.history.series_changes import MIN_STEP
    from perfguard.store import Store

    started = time.perf_counter()
    with Store.open(url) as store:
        for _, runner, doc in documents(nights, cases):
            if runner != RUNNER:
                continue
            done = store.ingest_json(doc, source="history_site benchmark")
            store.record_night(doc["suite"]["name"], doc["compiler"]["commit"], done.document_id)
        found = 0
        every = store.all_points()
        for series in store.series():
            points = every[series.id]
            for cp in detect([p.value for p in points], kind=series.key.kind,
                             min_size=MIN_STEP.get(series.key.metric, 0.01)):
                store.upsert_change(series.id, good_commit=points[cp.index - 1].commit,
                                    bad_commit=points[cp.index].commit, time=points[cp.index].time, ratio=cp.ratio,
                                    ci_low=cp.ci_low, ci_high=cp.ci_high, status="confirmed")
                found += 1
        return {"store_s": time.perf_counter() - started, "series": len(every), "changes": found}


def load_times(out: Path, page: str, profile: Path) -> dict[str, float]:
    from tests.test_report import Chromium, _chromium

    browser = Chromium(_chromium(), profile)
    try:
        url = (out / page).resolve().as_uri()
        browser.open_page(url)
        problems = browser.problems(url)
        timing = browser.evaluate("""(() => { const n = performance.getEntriesByType('navigation')[0];
            return {dom: n.domContentLoadedEventEnd, load: n.loadEventEnd,
                    rows: document.querySelectorAll('tr').length}; })()""")
    finally:
        browser.close()
    if problems:
        raise SystemExit(f"{page}: {problems}")
    return {"dom_ms": float(timing["dom"]), "load_ms": float(timing["load"]), "rows": float(timing["rows"])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nights", type=int, default=60)
    parser.add_argument("--cases", type=int, default=100)
    args = parser.parse_args()
    from perfguard.history import site as site_module
    from perfguard.store import Store

    with tempfile.TemporaryDirectory(prefix="perfguard-site-") as tmp:
        folder = Path(tmp)
        url = f"sqlite:///{folder / 'history.sqlite'}"
        made = build_store(url, args.nights, args.cases)
        out = folder / "site"
        with Store.open(url, create=False) as store:
            t0 = time.perf_counter()
            site = site_module.collect(store)
            t1 = time.perf_counter()
            files = site_module.render(site)
            t2 = time.perf_counter()
        shutil.rmtree(out, ignore_errors=True)
        with Store.open(url, create=False) as store:
            t3 = time.perf_counter()
            summary = site_module.build_site(store, out)
            t4 = time.perf_counter()
        size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
        index = load_times(out, "index.html", folder / "profile")
        series = load_times(out, f"series/{site.series[0].id}.html", folder / "profile2")
        print(f"store: {made['series']:.0f} series x {args.nights} nights, {made['changes']:.0f} changes "
              f"(built in {made['store_s']:.1f} s)")
        print(f"site build (build_site: read, render, write, swap): {t4 - t3:.2f} s; alone, reading the store "
              f"took {t1 - t0:.2f} s and rendering {t2 - t1:.2f} s")
        print(f"  {summary.pages} pages, {len(files)} files, {size / 1e6:.1f} MB; index.html "
              f"{(out / 'index.html').stat().st_size / 1e6:.2f} MB")
        print(f"index.html in headless Chromium: DOMContentLoaded {index['dom_ms']:.0f} ms, load "
              f"{index['load_ms']:.0f} ms ({index['rows']:.0f} table rows)")
        print(f"series page in headless Chromium: DOMContentLoaded {series['dom_ms']:.0f} ms, load "
              f"{series['load_ms']:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
