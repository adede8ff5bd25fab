"""The history store, against SQLite and a real PostgreSQL server (``tests/pg.py``).

Every golden document kind round-trips; ingest is idempotent and one transaction per document;
eight processes writing a fresh store at once lose nothing; a writer killed with SIGKILL leaves a
consistent store that the same ingest then completes; a schema newer than this perfguard is
refused and an older one is migrated; bad URLs, unreachable servers and wrong credentials are one
line without the password; and each query answers what was stored.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from perfguard.errors import StorageError, StoreError
from perfguard.runners.fingerprint import fingerprint_hash
from perfguard.store import (
    DEFAULT_STORE,
    Store,
    display_url,
    schema,
    store_url,
)

from .conftest import REPO
from .pg import PASSWORD, create_database

GOLDEN = Path(__file__).parent / "golden" / "v1"
# Points each golden document gives: ok cases x measured metrics; verdicts: the candidate's
# absolute points plus one ratio per paired latency row.
EXPECTED_POINTS = {
    "result-run.json": 20, "result-failed.json": 5, "result-iree.json": 5, "result-artifacts.json": 5,
    # A pipeline check gives no ratio points: ratio series chain versions (check --base-ref) only.
    "verdicts-baseline.json": 5, "verdicts-compare.json": 20, "verdicts-pipeline.json": 20,
    "bisect-commits.json": 0, "bisect-commits-no-regression.json": 0, "bisect-commits-unbuildable.json": 0,
    "bisect-passes.json": 0, "bisect-pipelines.json": 0,
}
NOT_DOCUMENTS = ["bisect-state.json", "bisect-passes-state.json", "bisect-commits-unbuildable-state.json",
                 "manifest.json"]
SMALL_POINTS = 5  # points of one small_result(): the one ok case of result-failed.json


def _raw(name: str) -> Any:
    return json.loads((GOLDEN / name).read_text())


def small_result(index: int) -> dict[str, Any]:
    """A small valid result document, distinct per ``index`` (its time and compiler commit)."""
    data = _raw("result-failed.json")
    data["finished_at"] = f"2026-01-01T00:{index // 60 % 60:02d}:{index % 60:02d}.{index:06d}Z"
    data["compiler"]["commit"] = f"{index:040x}"
    return data


def _sa_url(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store location: a SQLite file or a new PostgreSQL database."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'history.sqlite'}"
    admin = request.getfixturevalue("postgres_url")
    return create_database(admin, f"t_{uuid.uuid4().hex[:16]}")


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    with Store.open(url) as opened:
        yield opened


def _query(url: str, statement: str) -> list[Any]:
    engine = sa.create_engine(_sa_url(url))
    try:
        with engine.begin() as conn:
            result = conn.exec_driver_sql(statement)
            return list(result) if result.returns_rows else []
    finally:
        engine.dispose()


def _count(url: str, table: str) -> int:
    return int(_query(url, f"SELECT count(*) FROM {table}")[0][0])


def assert_consistent(url: str) -> None:
    """Every stored document has exactly its points, no point lacks its document, and SQLite's
    own check passes."""
    mismatched = _query(url, "SELECT d.id, d.points, count(p.id) FROM documents d LEFT JOIN points p "
                             "ON p.document_id = d.id GROUP BY d.id, d.points HAVING count(p.id) <> d.points")
    assert mismatched == []
    orphans = _query(url, "SELECT count(*) FROM points p LEFT JOIN documents d ON d.id = p.document_id "
                          "WHERE d.id IS NULL")
    assert orphans[0][0] == 0
    if url.startswith("sqlite"):
        assert _query(url, "PRAGMA integrity_check") == [("ok",)]


# --- documents --------------------------------------------------------------------------------------

def test_every_golden_document_kind_round_trips_and_twice_is_one_record(store: Store, url: str) -> None:
    assert PASSWORD not in store.url and store.url == display_url(url)
    ids = {}
    for name, points in EXPECTED_POINTS.items():
        done = store.ingest_file(GOLDEN / name)
        assert (done.new, done.points, done.kind) == (True, points, name.split("-")[0]), name
        assert store.document(done.document_id) == _raw(name)
        ids[name] = done.document_id
    for name in EXPECTED_POINTS:
        again = store.ingest_json(_raw(name), source="again")
        assert (again.document_id, again.new, again.points) == (ids[name], False, 0)
    assert _count(url, "documents") == len(EXPECTED_POINTS)
    assert _count(url, "points") == sum(EXPECTED_POINTS.values())
    assert_consistent(url)


@pytest.mark.parametrize("name", ["result-run.json", "verdicts-compare.json", "bisect-commits.json"])
def test_a_typed_document_gives_the_points_of_its_json_and_a_file_is_kept_as_written(tmp_path: Path,
                                                                                     name: str) -> None:
    from perfguard.store.extract import parse_stored

    raw = _raw(name)
    typed = parse_stored(raw, name)
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        made = store.ingest(typed, source="nightly")  # made in this process: stored as its to_json()
        assert (made.new, made.points, made.kind) == (True, EXPECTED_POINTS[name], name.split("-")[0])
        assert store.document(made.document_id) == typed.to_json()
        assert store.ingest_json(typed.to_json(), source="again").new is False
        # Read from a file: stored as written (a version-1 result stays version 1), one record
        # with the same file ingested again.
        kept = store.ingest(typed, source=name, as_read=raw)
        assert store.document(kept.document_id) == raw
        assert kept.new == (typed.to_json() != raw) and kept.points == (made.points if kept.new else 0)
        assert store.ingest_file(GOLDEN / name).document_id == kept.document_id
        if kept.new:  # the typed document and its file give the same points
            for series in store.series():
                a, b = (tuple(replace(p, document_id=0) for p in store.points(series.id)
                              if p.document_id == d) for d in (made.document_id, kept.document_id))
                assert a == b, series.key


def test_a_typed_verdicts_document_without_a_candidate_side_is_refused_in_one_line(store: Store, url: str) -> None:
    from perfguard.compare.verdicts import parse_verdicts

    raw = _raw("verdicts-compare.json")
    raw["results"] = {f"side {label}": result for label, result in raw["results"].items()}
    raw["verdicts"] = []
    with pytest.raises(StorageError, match=r"^x\.json: corrupt verdicts document: no candidate result among"):
        store.ingest(parse_verdicts(raw, "x.json"), source="x.json")
    assert _count(url, "documents") == 0


@pytest.mark.parametrize("name", NOT_DOCUMENTS)
def test_state_files_and_manifests_are_refused_in_one_line(tmp_path: Path, name: str) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        with pytest.raises(StoreError) as info:
            store.ingest_file(GOLDEN / name)
        assert store.series() == []
    message = str(info.value)
    assert "\n" not in message and name in message
    assert ("bisection state file" if "state" in name else "artifact manifest") in message


def test_corrupt_and_newer_documents_are_refused_with_their_parsers_messages(store: Store, url: str) -> None:
    corrupt = _raw("result-run.json")
    corrupt["cases"][0]["status"] = "maybe"
    newer = {**_raw("verdicts-compare.json"), "version": 99}
    bad_bisect = {**_raw("bisect-commits.json"), "total_probes": "four"}
    for data, expected in ((corrupt, "corrupt result"), (newer, "upgrade perfguard"), (bad_bisect, "corrupt bisect"),
                           ([1, 2], "not a perfguard result, verdicts or bisect document")):
        with pytest.raises(StoreError, match=expected) as info:
            store.ingest_json(data, source="bad.json")
        assert "\n" not in str(info.value) and str(info.value).startswith("bad.json: ")
    assert _count(url, "documents") == 0


def test_a_failure_mid_document_leaves_nothing_of_it(store: Store, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    original = Store._insert_points

    def fail_after_points(conn: Any, document_id: int, rows: Any) -> None:
        original(conn, document_id, rows)
        raise RuntimeError("the machine went away")

    monkeypatch.setattr(Store, "_insert_points", staticmethod(fail_after_points))
    with pytest.raises(RuntimeError):
        store.ingest_json(_raw("result-run.json"))
    assert (_count(url, "documents"), _count(url, "points"), _count(url, "series")) == (0, 0, 0)
    monkeypatch.undo()
    assert store.ingest_json(_raw("result-run.json")).points == 20
    assert_consistent(url)


def test_absolute_points_hold_the_documents_numbers(tmp_path: Path) -> None:
    raw = _raw("result-run.json")
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        document_id = store.ingest_json(raw).document_id
        case = raw["cases"][0]
        found = {s.key.metric: s for s in store.series(case=case["id"])}
        assert sorted(found) == ["artifact_size", "compile_time", "latency", "memory", "node_count"]
        key = found["latency"].key
        assert key.suite == "smoke" and key.case == case["id"] and key.kind == "absolute"
        assert key.model_hash == case["key"]["model"]["sha256"] and key.pipeline_hash == case["key"]["pipeline"]["sha256"]
        assert key.backend == "ort onnx=1.23.2,onnxoptimizer=0.4.2,onnxruntime=1.32.0"
        assert key.runner_class == f"cpu:{fingerprint_hash(raw['environment']['cpu'])}"
        latency = store.points(found["latency"].id)[0]
        metrics = case["metrics"]
        assert (latency.document_id, latency.time, latency.commit) == (document_id, raw["finished_at"], None)
        assert latency.value == metrics["latency_s"]["median"]
        assert latency.values == tuple(statistics.median(w) for w in metrics["latency_s"]["per_worker"])
        assert (latency.ci_low, latency.base_commit, latency.decision) == (None, None, None)
        compile_time = store.points(found["compile_time"].id)[0]
        assert compile_time.value == statistics.median(metrics["compile_times_s"])
        assert compile_time.values == tuple(metrics["compile_times_s"])
        memory = store.points(found["memory"].id)[0]
        assert (memory.value, memory.values) == (metrics["peak_rss_bytes"], tuple(metrics["peak_rss_bytes_probes"]))
        assert store.points(found["artifact_size"].id)[0].value == metrics["artifact_size_bytes"]
        assert store.points(found["node_count"].id)[0].value == metrics["node_count"]


def test_failed_cases_give_no_points(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest_json(_raw("result-failed.json"))
        assert {s.key.case for s in store.series()} == {"tiny/none/cpu"}


def _per_worker_medians(result: dict[str, Any], case_id: str) -> dict[int, float]:
    case = next(c for c in result["cases"] if c["id"] == case_id)
    return {w: statistics.median(v) for w, v in zip(case["measurement"]["worker_ids"],
                                                    case["metrics"]["latency_s"]["per_worker"], strict=True)}


def _as_base_ref(raw: dict[str, Any]) -> dict[str, Any]:
    """The golden pipeline check relabelled as a check of two compiler versions (its paired rows
    are what a base-ref check writes); ingest takes ratio points from base-ref checks only."""
    raw = copy.deepcopy(raw)
    raw["mode"]["kind"] = "base-ref"
    return raw


def test_paired_latency_rows_give_ratio_points(tmp_path: Path) -> None:
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest_json(_raw("verdicts-pipeline.json"))
        assert store.series(kind="ratio") == []  # a pipeline check compares pipelines, not versions
        raw = _as_base_ref(_raw("verdicts-pipeline.json"))
        store.ingest_json(raw)
        ratios = store.series(kind="ratio")
        rows = [v for v in raw["verdicts"] if v["metric"] == "latency" and v["paired"]]
        assert sorted(s.key.case for s in ratios) == sorted(r["case"] for r in rows)
        for series in ratios:
            row = next(r for r in rows if r["case"] == series.key.case)
            assert series.key.runner_class == "cpu" and series.key.metric == "latency"
            (point,) = store.points(series.id)
            c = row["comparison"]
            assert (point.value, point.ci_low, point.ci_high) == (c["ratio"], c["ci_low"], c["ci_high"])
            assert (point.decision, point.time) == (row["decision"], raw["created_at"])
            head = raw["results"]["head"]
            model, _, runner = series.key.case.split("/")
            candidate = _per_worker_medians(head, series.key.case)
            baseline = _per_worker_medians(head, f"{model}/{row['baseline']}/{runner}")
            assert point.values == tuple(candidate[w] / baseline[w] for w in candidate)


def test_identity_rows_are_exactly_one_and_failed_rows_give_nothing(tmp_path: Path) -> None:
    raw = _as_base_ref(_raw("verdicts-pipeline.json"))
    raw["mode"].update(base_commit="a" * 40, head_commit="b" * 40)
    latency = [v for v in raw["verdicts"] if v["metric"] == "latency"]
    latency[0]["comparison"].update(method="identity", ratio=1.0, ci_low=1.0, ci_high=1.0, decision="same",
                                    direction="none")
    latency[0]["decision"] = "same"
    latency[1]["decision"] = "failed"
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        assert store.ingest_json(raw).points == 20 + 2
        by_case = {s.key.case: store.points(s.id)[0] for s in store.series(kind="ratio")}
    assert latency[1]["case"] not in by_case
    identity = by_case[latency[0]["case"]]
    assert (identity.value, identity.ci_low, identity.ci_high, identity.decision) == (1.0, 1.0, 1.0, "same")
    assert (identity.base_commit, identity.commit) == ("a" * 40, "b" * 40)


def test_the_baseline_side_of_a_verdicts_document_gives_no_points(tmp_path: Path) -> None:
    raw = _raw("verdicts-baseline.json")
    with Store.open(f"sqlite:///{tmp_path / 'h.sqlite'}") as store:
        store.ingest_json(raw)
        times = {p.time for points in store.all_points().values() for p in points}
    assert times == {raw["results"]["candidate"]["finished_at"]} != {raw["results"]["baseline"]["finished_at"]}


# --- concurrency and crashes ------------------------------------------------------------------------

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from tests.test_history_store import small_result
    from perfguard.store import Store

    url, first, count, ready, go = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
    Path(ready).touch()
    while go != "-" and not Path(go).exists():
        time.sleep(0.005)
    with Store.open(url) as store:
        for i in range(first, first + count):
            store.ingest_json(small_result(i), source=f"writer {first}")
            print(i, flush=True)
""")


def _writer(url: str, first: int, count: int, ready: Path, go: Path | None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, str(first), str(count), str(ready),
                             str(go) if go else "-"], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


@pytest.mark.slow
def test_eight_concurrent_writers_on_a_fresh_store_lose_nothing(url: str, tmp_path: Path) -> None:
    writers, each = 8, 50
    go = tmp_path / "go"
    ready = [tmp_path / f"ready{i}" for i in range(writers)]
    procs = [_writer(url, i * each, each, ready[i], go) for i in range(writers)]
    try:
        deadline = time.monotonic() + 120
        while not all(r.exists() for r in ready):  # every writer imported: now they race
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs)
            time.sleep(0.02)
        go.touch()
        outputs = [p.communicate(timeout=240) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0] * writers, [err for _, err in outputs]
    assert all(len(out.split()) == each for out, _ in outputs)
    assert _count(url, "documents") == writers * each
    assert _count(url, "points") == writers * each * SMALL_POINTS
    assert _count(url, "series") == SMALL_POINTS
    assert_consistent(url)
    with Store.open(url, create=False) as store:
        assert sum(s.points for s in store.series()) == writers * each * SMALL_POINTS


@pytest.mark.slow
def test_a_writer_killed_mid_ingest_leaves_a_consistent_store_and_rerunning_completes_it(
        url: str, tmp_path: Path) -> None:
    total = 300
    proc = _writer(url, 0, total, tmp_path / "ready", None)
    try:
        assert proc.stdout is not None
        done = 0
        for line in proc.stdout:  # wait until it has committed some, then kill it mid-stream
            done = int(line) + 1
            if done >= 25:
                break
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    assert proc.returncode == -signal.SIGKILL and done >= 25
    stored = _count(url, "documents")
    assert done <= stored < total
    assert_consistent(url)
    with Store.open(url) as store:
        new = sum(store.ingest_json(small_result(i), source="rerun").new for i in range(total))
    assert new == total - stored
    assert (_count(url, "documents"), _count(url, "points")) == (total, total * SMALL_POINTS)
    assert_consistent(url)


# --- schema revisions -------------------------------------------------------------------------------

def test_a_store_of_a_newer_perfguard_is_refused(url: str) -> None:
    Store.open(url).close()
    _query(url, "UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError, match=r"written by a newer perfguard .*revision 9999.*: upgrade perfguard$"):
        Store.open(url)


def test_an_older_store_is_migrated_and_the_newer_one_then_refused_by_the_old_code(url: str, tmp_path: Path) -> None:
    with Store.open(url) as store:
        document_id = store.ingest_json(_raw("result-run.json")).document_id
    head = schema.head_revision()
    assert _query(url, "SELECT version_num FROM alembic_version") == [(head,)]
    newer = tmp_path / "migrations"
    shutil.copytree(schema.MIGRATIONS_DIR, newer, ignore=shutil.ignore_patterns("__pycache__"))
    (newer / "versions" / "9000_document_note.py").write_text(textwrap.dedent(f'''
        """Revision 9000 (a test's): a note on each document."""
        import sqlalchemy as sa
        from alembic import op

        revision = "9000"
        down_revision = "{head}"
        branch_labels = None
        depends_on = None


        def upgrade():
            with op.batch_alter_table("documents") as batch:
                batch.add_column(sa.Column("note", sa.String, nullable=True))
            op.create_index("ix_documents_kind", "documents", ["kind"])
    '''))
    assert schema.head_revision(newer) == "9000" and schema.head_revision() == head
    with Store.open(url, migrations=newer) as store:
        assert store.document(document_id) == _raw("result-run.json")
        assert len(store.series()) == 20
    assert _query(url, "SELECT version_num FROM alembic_version") == [("9000",)]
    engine = sa.create_engine(_sa_url(url))
    try:
        assert "note" in {c["name"] for c in sa.inspect(engine).get_columns("documents")}
    finally:
        engine.dispose()
    with pytest.raises(StoreError, match="upgrade perfguard"):
        Store.open(url)


def test_the_schema_module_describes_what_the_migrations_build(url: str) -> None:
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    Store.open(url).close()
    engine = sa.create_engine(_sa_url(url))
    try:
        with engine.connect() as conn:
            differences = compare_metadata(MigrationContext.configure(conn), schema.metadata)
    finally:
        engine.dispose()
    assert differences == []


def test_open_without_create_refuses_a_missing_sqlite_store(tmp_path: Path) -> None:
    missing = f"sqlite:///{tmp_path / 'none' / 'h.sqlite'}"
    with pytest.raises(StoreError, match=r"no history store at .* \(run `perfguard history ingest`"):
        Store.open(missing, create=False)
    assert not (tmp_path / "none").exists()


def test_open_without_create_refuses_an_empty_postgresql_database(postgres_url: str) -> None:
    empty = create_database(postgres_url, f"t_{uuid.uuid4().hex[:16]}")
    with pytest.raises(StoreError, match="no history store at"):
        Store.open(empty, create=False)
    Store.open(empty).close()
    Store.open(empty, create=False).close()


# --- URLs and errors --------------------------------------------------------------------------------

def test_store_url_takes_the_option_then_the_environment_then_the_default(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("PERFGUARD_STORE", raising=False)
    assert store_url(None) == f"sqlite:///{tmp_path / DEFAULT_STORE}"
    monkeypatch.setenv("PERFGUARD_STORE", "postgresql://u:p@h/db")
    assert store_url(None) == "postgresql://u:p@h/db"
    assert store_url("rel/x.sqlite") == f"sqlite:///{tmp_path / 'rel' / 'x.sqlite'}"
    assert store_url("sqlite:///y.sqlite") == "sqlite:///y.sqlite"
    with Store.open(store_url("rel/x.sqlite")) as store:
        store.ingest_json(_raw("result-iree.json"))
    assert (tmp_path / "rel" / "x.sqlite").is_file()


def test_display_url_masks_the_password() -> None:
    assert display_url("postgresql://u:secret@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert display_url("postgresql://u:s@c:r/et@h/db") == "postgresql://u:***@h/db"
    assert display_url("postgresql://h/db?user=u&password=secret") == "postgresql://h/db?user=u&password=***"
    assert display_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert display_url("sqlite:///x.sqlite") == "sqlite:///x.sqlite"


@pytest.mark.parametrize(("bad", "expected"), [
    ("foo://x", "unsupported kind 'foo'"),
    ("postgresql+psycopg2://u:secret@h/db", "unsupported kind"),
    ("postgresql://", "names no database"),
    ("postgresql://u:secret@host:port/db", "malformed history store URL"),
    ("postgresql://u:secret@127.0.0.1:1/db", "cannot open the history store postgresql://u:\\*\\*\\*@127.0.0.1:1/db"),
])
def test_bad_and_unreachable_urls_are_one_line_without_the_password(bad: str, expected: str) -> None:
    with pytest.raises(StoreError, match=expected) as info:
        Store.open(bad)
    message = str(info.value)
    assert "\n" not in message and "secret" not in message
    assert "sqlite:///PATH or postgresql://" in message or "check the URL" in message


def test_wrong_credentials_are_refused_without_the_password(postgres_url: str) -> None:
    wrong = postgres_url.replace(f":{PASSWORD}@", ":wrong-secret@")
    assert wrong != postgres_url
    with pytest.raises(StoreError, match="password authentication failed") as info:
        Store.open(wrong)
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


def test_an_unwritable_sqlite_path_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("not a folder")
    for path in (tmp_path / "file" / "h.sqlite", tmp_path / "file" / "deeper" / "h.sqlite"):
        with pytest.raises(StoreError, match="cannot create the history store .*: a file is in the way") as info:
            Store.open(f"sqlite:///{path}")
        assert "\n" not in str(info.value)
    with pytest.raises(StoreError, match="is a folder, not a SQLite file"):
        Store.open(f"sqlite:///{tmp_path}")
    (tmp_path / "junk.sqlite").write_text("this is not a database, but it is long enough to be read as one" * 20)
    with pytest.raises(StoreError, match="cannot open the history store .*file is not a database"):
        Store.open(f"sqlite:///{tmp_path / 'junk.sqlite'}")


# --- queries ----------------------------------------------------------------------------------------

def test_series_filters_by_suite_case_metric_and_kind(store: Store) -> None:
    for name in ("result-run.json", "result-iree.json"):
        store.ingest_file(GOLDEN / name)
    store.ingest_json(_as_base_ref(_raw("verdicts-pipeline.json")))
    everything = store.series()
    assert len(everything) == 20 + 5 + 3
    assert {s.key.suite for s in store.series(suite="iree-cpu")} == {"iree-cpu"}
    assert len(store.series(suite="iree-cpu")) == 5
    assert {s.key.case for s in store.series(case="resnet_s/bn_fused*")} == {
        "resnet_s/bn_fused_folded/cpu", "resnet_s/bn_fused_unfolded/cpu"}
    assert {s.key.case for s in store.series(case="ort_all")} == {"resnet_s/ort_all/cpu"}
    assert {s.key.metric for s in store.series(metric="memory")} == {"memory"} and len(store.series(metric="memory")) == 5
    ratio = store.series(kind="ratio", case="ort_all")
    assert len(ratio) == 1 and ratio[0].points == 1 and ratio[0].key.kind == "ratio"
    folded = store.series(case="resnet_s/bn_fused_folded/cpu", metric="latency", kind="absolute")
    # result-run and the head result inside verdicts-pipeline measured it: two points
    assert folded[0].points == 2 and folded[0].first_time < folded[0].last_time


def test_points_are_ordered_by_time_then_document(store: Store) -> None:
    late, early = small_result(30), small_result(10)
    same_time = copy.deepcopy(early)
    same_time["compiler"]["commit"] = "f" * 40
    ids = [store.ingest_json(d).document_id for d in (late, early, same_time)]
    (latency,) = store.series(metric="latency")
    points = store.points(latency.id)
    assert [p.document_id for p in points] == [ids[1], ids[2], ids[0]]
    assert [p.commit for p in points] == [early["compiler"]["commit"], "f" * 40, late["compiler"]["commit"]]
    assert latency.last_value == points[-1].value and latency.last_time == late["finished_at"]
    assert store.points(10_000) == []


def test_all_points_gives_every_series_in_one_answer(store: Store) -> None:
    store.ingest_file(GOLDEN / "result-run.json")
    store.ingest_json(_as_base_ref(_raw("verdicts-pipeline.json")))
    everything = store.all_points()
    assert set(everything) == {s.id for s in store.series()}
    for series in store.series():
        assert everything[series.id] == store.points(series.id)
    ratios = store.all_points(kind="ratio")
    assert set(ratios) == {s.id for s in store.series(kind="ratio")} and len(ratios) == 3
    assert sum(map(len, store.all_points(kind="absolute").values())) == 20 + 20


def test_nights_are_recorded_once_per_document_in_time_order(store: Store) -> None:
    a = store.ingest_json(small_result(1)).document_id
    b = store.ingest_json(small_result(2)).document_id
    assert store.last_night("golden") is None
    second = store.record_night("golden", "b" * 40, b)
    first = store.record_night("golden", "a" * 40, a, time="2025-12-31T23:00:00+00:00")
    assert store.record_night("golden", "b" * 40, b) == second
    assert first.time == "2025-12-31T23:00:00.000000Z" and second.time == small_result(2)["finished_at"]
    assert [n.commit for n in store.nights("golden")] == ["a" * 40, "b" * 40]
    assert store.last_night("golden") == second and store.nights("other") == []
    with pytest.raises(StoreError, match="no document 999"):
        store.record_night("golden", "c" * 40, 999)


def test_changes_upsert_on_series_and_bad_commit_and_keep_their_status_and_culprit(store: Store) -> None:
    store.ingest_file(GOLDEN / "result-run.json")
    store.ingest_file(GOLDEN / "result-iree.json")
    smoke = store.series(suite="smoke", metric="latency")[0]
    iree = store.series(suite="iree-cpu", metric="latency")[0]
    first = store.upsert_change(smoke.id, good_commit="a", bad_commit="b", time="2026-12-02T00:00:00Z", ratio=1.2,
                                ci_low=1.1, ci_high=1.3, status="pending", note="seen once")
    again = store.upsert_change(smoke.id, good_commit=None, bad_commit="b", time="2026-12-03T00:00:00Z", ratio=1.25,
                                ci_low=1.15, ci_high=1.35, status="confirmed")
    assert again.id == first.id and (again.status, again.ratio, again.ci_low, again.ci_high) == ("confirmed", 1.25, 1.15, 1.35)
    assert (again.good_commit, again.note, again.key) == ("a", "seen once", smoke.key)
    unknown_bad = store.upsert_change(iree.id, good_commit="x", bad_commit=None, time="2026-12-04T00:00:00Z",
                                      ratio=0.8, ci_low=None, ci_high=None, status="pending")
    assert unknown_bad.bad_commit is None and unknown_bad.id != first.id
    assert store.upsert_change(iree.id, good_commit="x", bad_commit=None, time="2026-12-04T00:00:00Z", ratio=0.7,
                               ci_low=None, ci_high=None, status="pending").id == unknown_bad.id
    assert [c.id for c in store.changes()] == [first.id, unknown_bad.id]
    assert [c.id for c in store.changes(suite="iree-cpu")] == [unknown_bad.id]
    store.set_change_status(unknown_bad.id, "closed", "did not hold")
    assert [c.id for c in store.changes()] == [first.id]
    (closed,) = store.changes(status="closed")
    assert (closed.note, closed.ratio) == ("did not hold", 0.7)
    bisect = store.ingest_file(GOLDEN / "bisect-commits.json").document_id
    store.link_bisect(first.id, bisect, "c" * 40, "fuse_bn")
    (linked,) = store.changes(status="confirmed")
    assert (linked.bisect_document_id, linked.culprit_commit, linked.culprit_pass) == (bisect, "c" * 40, "fuse_bn")
    with pytest.raises(StoreError, match="no change 999"):
        store.set_change_status(999, "closed")
    with pytest.raises(StoreError, match="no change 999"):
        store.link_bisect(999, bisect, None, None)
    with pytest.raises(ValueError, match="not one of pending, confirmed, closed"):
        store.set_change_status(first.id, "done")


def test_latest_results_include_the_candidates_inside_verdicts_newest_first(store: Store) -> None:
    ids = {name: store.ingest_file(GOLDEN / name).document_id
           for name in ("result-run.json", "verdicts-compare.json", "result-artifacts.json", "verdicts-baseline.json",
                        "result-iree.json", "bisect-commits.json")}
    found = store.latest_results("smoke")
    # newest first: verdicts-baseline (12:21:30), verdicts-compare (12:21:33 is newer) ...
    expected = sorted(["verdicts-compare.json", "verdicts-baseline.json", "result-artifacts.json", "result-run.json"],
                      key=lambda n: _raw(n).get("created_at") or _raw(n)["finished_at"], reverse=True)
    assert [i for i, _ in found] == [ids[n] for n in expected]
    by_id = dict(found)
    assert by_id[ids["verdicts-compare.json"]] == _raw("verdicts-compare.json")["results"]["candidate"]
    assert by_id[ids["result-run.json"]] == _raw("result-run.json")
    assert store.latest_results("nothing") == []


def test_prune_deletes_old_documents_but_keeps_what_open_changes_and_the_last_night_need(store: Store,
                                                                                         url: str) -> None:
    docs = [small_result(i) for i in range(4)]  # 4 nights, one second apart
    ids = [store.ingest_json(d).document_id for d in docs]
    for d, i in zip(docs, ids, strict=True):
        store.record_night("golden", d["compiler"]["commit"], i)
    (latency,) = store.series(metric="latency")
    change = store.upsert_change(latency.id, good_commit=docs[1]["compiler"]["commit"],
                                 bad_commit=docs[2]["compiler"]["commit"], time=docs[2]["finished_at"], ratio=1.3,
                                 ci_low=1.2, ci_high=1.4, status="confirmed")
    later = "2030-01-01T00:00:00Z"
    assert store.prune(later) == {"documents": 1, "points": SMALL_POINTS, "nights": 1}
    assert [p.document_id for p in store.points(latency.id)] == ids[1:]
    with pytest.raises(StoreError, match=f"no document {ids[0]}"):
        store.document(ids[0])
    assert store.prune("2000-01-01") == {"documents": 0, "points": 0, "nights": 0}
    store.set_change_status(change.id, "closed")
    assert store.prune(later) == {"documents": 2, "points": 2 * SMALL_POINTS, "nights": 2}
    assert [p.document_id for p in store.points(latency.id)] == [ids[3]]
    assert store.last_night("golden") is not None and store.last_night("golden").document_id == ids[3]  # type: ignore[union-attr]
    assert store.changes(status="closed")[0].id == change.id
    assert_consistent(url)
    with pytest.raises(StoreError, match="not an ISO-8601 time"):
        store.prune("last tuesday")


def test_utc_stamps_have_one_width_and_sort_in_time_order() -> None:
    assert schema.utc_stamp("2026-12-01T12:20:45.161989Z") == "2026-12-01T12:20:45.161989Z"
    assert schema.utc_stamp("2026-12-01T13:20:45+01:00") == "2026-12-01T12:20:45.000000Z"
    assert schema.utc_stamp("2026-12-01") == "2026-12-01T00:00:00.000000Z"
    stamps = [schema.utc_stamp(t) for t in ("0999-01-01T00:00:00Z", "2026-01-01T09:00:00+10:00", "2026-01-01")]
    assert sorted(stamps) == [stamps[0], stamps[1], stamps[2]] and len({len(s) for s in stamps}) == 1
    with pytest.raises(ValueError):
        schema.utc_stamp("yesterday")


@pytest.mark.slow
def test_all_points_reads_half_a_million_points_in_seconds(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'big.sqlite'}"
    with Store.open(url) as store:
        document_id = store.ingest_json(small_result(0)).document_id
    engine = sa.create_engine(url)
    per_series, n_series = 1100, 500
    try:
        with engine.begin() as conn:
            conn.execute(schema.series.insert(), [
                {"key_hash": f"{i:064x}", "suite": "big", "case_id": f"m{i}/p/cpu", "model_hash": "m",
                 "pipeline_hash": "p", "backend": "mock", "runner_class": "cpu", "metric": "latency",
                 "kind": "ratio"} for i in range(n_series)])
            first = conn.execute(sa.select(sa.func.min(schema.series.c.id)).where(schema.series.c.suite == "big")).scalar()
            # The driver's own executemany: SQLAlchemy's per-row processing would triple the setup time.
            conn.exec_driver_sql(
                "INSERT INTO points (series_id, document_id, time, commit_sha, value, ci_low, ci_high, worker_values, "
                "base_commit, decision) VALUES (?, ?, ?, 'c', ?, 0.9, 1.1, '[1.0, 1.01, 0.99, 1.02]', 'b', 'same')",
                [(first + s, document_id, f"2026-01-01T00:00:00.{n:06d}Z", 1.0 + n * 1e-6)
                 for s in range(n_series) for n in range(per_series)])
    finally:
        engine.dispose()
    with Store.open(url, create=False) as store:
        started = time.perf_counter()
        found = store.all_points(kind="ratio")
        elapsed = time.perf_counter() - started
    assert sum(map(len, found.values())) == per_series * n_series == 550_000
    assert found[first][5].values == (1.0, 1.01, 0.99, 1.02)
    print(f"all_points: {elapsed:.2f} s for 550k points")
    assert elapsed < 15, f"all_points took {elapsed:.1f} s for 550k points"


def test_importing_the_store_loads_no_database_library() -> None:
    code = ("import sys, perfguard.store\n"
            "print(sorted(m for m in ('sqlalchemy', 'alembic', 'psycopg') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert out.strip() == "[]"
