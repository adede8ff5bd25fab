"""The hostile-input probes of the reliability issue, run against this checkout: each probe runs
a real ``perfguard`` command in a scratch folder and prints its exit code and the first line of
stderr. Nothing here asserts (the tests do); the table is for a reviewer and the closing note.

    .venv/bin/python benchmarks/hostile_probes.py [--quick]

``--quick`` skips the probes that compile and measure (run, SIGTERM, the cache's linked entry, a
repeated night, a nested manifest).

The third round's probes (issue 44) are in ``hostile_probes_3.py``.

The second round's probes (issue 32: the artifact cache, shards and merge, the runner bundle, the
nightly) run each command under a 1 GiB address-space limit (``RLIMIT_AS`` in the child), so a
probe that would exhaust memory ends in a MemoryError, never in the machine's OOM killer."""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "v1" / "result-run.json"
PERFGUARD = [sys.executable, "-m", "perfguard"]

TINY = """
[suite]
name = "probe"
[measure]
workers = 1
rounds = 2
warmup = 1
min_time = "{min_time}"
timeout = "60s"
[models.{model}]
arch = "resnet"
params = {{ depth = 2, width = 8, image_size = 32, num_classes = 10 }}
[pipelines.{pipeline}]
passes = []
"""


def suite(folder: Path, model: str = "r", pipeline: str = "p", min_time: str = "1ms", extra: str = "") -> Path:
    path = folder / "suite.toml"
    path.write_text(TINY.format(model=json.dumps(model)[1:-1] if model.isidentifier() else json.dumps(model),
                                pipeline=pipeline if pipeline.isidentifier() else json.dumps(pipeline),
                                min_time=min_time) + extra)
    return path


MEMORY_CAP = 1 << 30  # bytes of address space a second-round probe may take


def _cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def perfguard(*args: str, cwd: Path, env: dict[str, str] | None = None, capped: bool = False) -> tuple[int, str]:
    proc = subprocess.run([*PERFGUARD, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=600, preexec_fn=_cap_memory if capped else None)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    first = (lines[0] if proc.returncode else lines[-1]) if lines else "(no stderr)"
    if "Traceback" in proc.stderr:
        first = "TRACEBACK: " + lines[-1]
    return proc.returncode, first


def result_with(folder: Path, name: str, change) -> Path:
    data = json.loads(GOLDEN.read_text())
    change(data["cases"][0])
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def probes(quick: bool):
    scratch = Path(tempfile.mkdtemp(prefix="hostile-probes-"))

    def fresh(name: str) -> Path:
        path = scratch / name
        path.mkdir()
        return path

    yield "validate: pipeline named a[/bold]b", perfguard("validate", str(suite(fresh("v1"), pipeline="a[/bold]b")), cwd=scratch)
    yield "validate: model named a/b", perfguard("validate", str(suite(fresh("v2"), model="a/b")), cwd=scratch)
    yield "validate: model named ../../x", perfguard("validate", str(suite(fresh("v3"), model="../../x")), cwd=scratch)
    yield "validate: min_time = 1e400s", perfguard("validate", str(suite(fresh("v4"), min_time="1e400s")), cwd=scratch)
    folder = fresh("v5")
    (folder / "suite.toml").write_text('[suite]\nname = "p"\n[models.m]\npath = "/etc/passwd"\n[pipelines.p]\npasses = []\n')
    yield "validate: model path /etc/passwd", perfguard("validate", str(folder / "suite.toml"), cwd=scratch)

    def nan(case):
        case["metrics"]["latency_s"]["per_worker"] = [[float("nan")] * 3, [float("inf")] * 3]
    folder = fresh("c1")
    base = folder / "base.json"
    shutil.copy(GOLDEN, base)
    bad = result_with(folder, "nan.json", nan)
    yield "compare: NaN/Infinity latencies", perfguard("compare", str(base), str(bad), cwd=folder)
    yield "report: NaN/Infinity latencies", perfguard("report", str(bad), "--out", str(folder / "r.html"), cwd=folder)
    yield "history ingest: NaN/Infinity latencies", perfguard("history", "ingest", str(bad), "--store", str(folder / "h.db"), cwd=folder)
    huge = folder / "huge.json"
    huge.write_text(GOLDEN.read_text().replace('"node_count": 41', '"node_count": 1' + "0" * 400, 1))
    yield "compare: node_count 10**400", perfguard("compare", str(base), str(huge), cwd=folder)
    yield "report: node_count 10**400", perfguard("report", str(huge), "--out", str(folder / "r2.html"), cwd=folder)
    yield "history ingest: node_count 10**400", perfguard("history", "ingest", str(huge), "--store", str(folder / "h2.db"), cwd=folder)
    deep = folder / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    yield "compare: JSON nested 100,000 deep", perfguard("compare", str(base), str(deep), cwd=folder)
    folder = fresh("s1")
    yield "internal error with --store URL password", perfguard(
        "history", "list", "--store", "postgresql://user:S3cretPW@127.0.0.1:1/db", cwd=folder)
    leaked = [p for p in Path(tempfile.gettempdir()).glob("perfguard-traceback-*") if "S3cretPW" in p.read_text()]
    yield "traceback files holding the password", (len(leaked), ", ".join(map(str, leaked)) or "none")
    if quick:
        return
    folder = fresh("r1")
    yield "run: pipeline named a[/bold]b", perfguard("run", str(suite(folder, pipeline="a[/bold]b")), "--out", str(folder / "o.json"), cwd=folder)
    folder = fresh("r2")
    yield "run: pipeline named test_sum[float32]", perfguard("run", str(suite(folder, pipeline="test_sum[float32]")), "--out", str(folder / "o.json"), cwd=folder)
    folder = fresh("t1")
    tmp = fresh("t1-tmp")
    slow = suite(folder, min_time="200ms").read_text().replace("workers = 1\nrounds = 2", "workers = 4\nrounds = 30")
    (folder / "suite.toml").write_text(slow)
    proc = subprocess.Popen([*PERFGUARD, "run", str(folder / "suite.toml"), "--out", str(folder / "o.json")],
                            cwd=folder, env={**os.environ, "TMPDIR": str(tmp)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(3.5)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    time.sleep(1)
    left = sorted(p.name for p in tmp.iterdir() if p.name != ".ses")  # ONNX Runtime 1.32 writes .ses on import
    try:
        os.killpg(proc.pid, 0)
        group = "processes of its group still alive"
    except ProcessLookupError:
        group = "no process of its group left"
    yield "run: SIGTERM after 3.5 s", (proc.returncode, f"{(err.strip().splitlines() or ['(none)'])[-1]}; "
                                     f"{group}; TMPDIR left: {left or 'nothing'}")
    shutil.rmtree(scratch, ignore_errors=True)


# --- second round (issue 32): the artifact cache, shards and merge, the bundle, the nightly ---------


def _old_files(folder: Path, size: int) -> Path:
    folder.mkdir(parents=True)
    for n in range(3):
        (folder / f"f{n}.bin").write_bytes(b"x" * size)
    old = time.time() - 86_400
    for path in [folder, *folder.iterdir()]:
        os.utime(path, (old, old))
    return folder


def _kept(*folders: Path) -> str:
    return "; ".join(f"{p.name}: {'kept' if p.is_dir() and len(list(p.iterdir())) == 3 else 'DELETED'}"
                     for p in folders)


def cache_probes(scratch: Path, quick: bool):
    """Issue 32, items 1 and 2: a project folder as the cache, a ``tmp`` link, a ``lock`` folder,
    and (not --quick) an entry's artifact replaced by a link to /dev/zero."""
    proj = scratch / "proj"
    customers, notes = _old_files(proj / "db" / "customers", 1_000_000), _old_files(proj / "tmp" / "notes", 1000)
    (scratch / "c0").mkdir()
    code, line = perfguard("run", str(suite(scratch / "c0")), "--artifact-cache", str(proj), "--cache-max", "1MB",
                           cwd=scratch, capped=True)
    yield "cache: --artifact-cache proj (user data)", (code, f"{line}; {_kept(customers, notes)}")
    linked = scratch / "linked"
    linked.mkdir()
    (linked / "perfguard-cache.json").write_text("{}")  # a cache already: the link itself is the probe
    elsewhere = _old_files(scratch / "elsewhere", 1000)
    (linked / "tmp").symlink_to(elsewhere)
    code, line = perfguard("run", "suite.toml", "--artifact-cache", str(linked), cwd=scratch, capped=True)
    yield "cache: DIR/tmp a link to old files", (code, f"{line}; {_kept(elsewhere)}")
    locked = scratch / "locked"
    (locked / "lock").mkdir(parents=True)
    (locked / "perfguard-cache.json").write_text("{}")
    yield "cache: DIR/lock a folder", perfguard("run", "suite.toml", "--artifact-cache", str(locked), cwd=scratch,
                                                capped=True)
    if quick:
        return
    folder = scratch / "c1"
    folder.mkdir()
    path = suite(folder)
    cache = folder / "cache"
    perfguard("run", str(path), "--out", str(folder / "a.json"), "--artifact-cache", str(cache), cwd=folder)
    for artifact in cache.glob("??/*/files/*.onnx"):
        artifact.unlink()
        artifact.symlink_to("/dev/zero")
    proc = subprocess.run([*PERFGUARD, "run", str(path), "--out", str(folder / "b.json"), "--artifact-cache",
                           str(cache)], cwd=folder, capture_output=True, text=True, timeout=600, preexec_fn=_cap_memory)
    said = next((x for x in proc.stderr.splitlines() if "failed verification" in x), "(no warning)")
    yield "cache: entry's artifact -> /dev/zero", (proc.returncode, said)


def _shard_document(name: str, drop_row: bool = False, n: int = 1, adjusted: float | None = None) -> dict:
    """The golden verdicts document as shard 1 of ``n`` (shard format 2), optionally tampered."""
    data = json.loads((ROOT / "tests" / "golden" / "v1" / name).read_text())
    ids = [c["id"] for c in data["results"]["head"]["cases"]]
    data["shard"] = {"version": 2, "k": 1, "n": n, "cases": ids, "part": ids, "suite_sha256": "s" * 64,
                     "settings_sha256": "t" * 64, "head_commit": None, "base_commit": None, "costs": "static",
                     "rows": [[v["case"], v["metric"]] for v in data["verdicts"]]}
    if drop_row:
        data["verdicts"] = data["verdicts"][1:]
    if adjusted is not None:
        data["verdicts"][0]["bh_adjusted_p"] = adjusted
    return data


def shard_probes(scratch: Path):
    """Issue 32, items 3 and 10: hostile --shard values, shard documents that claim a billion shards,
    lost their rows or hold a p-value of 7.5."""
    folder = scratch / "sh"
    folder.mkdir()
    path = suite(folder)
    for shard in ("1/100000000", "1/99999999999999999999999", "99999999999999999999/3"):
        yield f"run --shard {shard[:24]}", perfguard("run", str(path), "--shard", shard, "--out",
                                                      str(folder / "o.json"), cwd=folder, capped=True)
    yield "run --workers 99999999999999999999", perfguard("run", str(path), "--workers", "99999999999999999999",
                                                         cwd=folder, capped=True)
    for name, document in (("merge: shard claiming n = 10**9", _shard_document("verdicts-pipeline.json", n=10**9)),
                           ("merge: a verdict row removed", _shard_document("verdicts-pipeline.json", drop_row=True)),
                           ("merge: bh_adjusted_p = 7.5", _shard_document("verdicts-pipeline.json", adjusted=7.5))):
        shard = folder / "shard.json"
        shard.write_text(json.dumps(document))
        yield name, perfguard("merge", str(shard), "--json", str(folder / "m.json"), cwd=folder, capped=True)


def bundle_probe(scratch: Path):
    """Issue 32, item 11: a relative OUT from another folder, and a failed build's leftovers."""
    folder = scratch / "bundle"
    folder.mkdir()
    script = ROOT / "benchmarks" / "device_bundle.sh"
    codes = []
    for _ in range(2):  # PYTHON=false: the first step fails; the retry must not be refused
        proc = subprocess.run(["bash", str(script), "--cpu", "relout"], cwd=folder, capture_output=True, text=True,
                              env={**os.environ, "PYTHON": "false"}, timeout=120, preexec_fn=_cap_memory)
        codes.append(proc.returncode)
    left = sorted(p.name for p in folder.iterdir()) + (["REPO/relout"] if (ROOT / "relout").exists() else [])
    refused = "refused" if "not empty" in proc.stderr else "not refused"
    yield "bundle: relative OUT, failed build twice", (codes[-1], f"retry {refused}; left behind: {left or 'nothing'}")


def _night_repo(folder: Path) -> tuple[Path, str]:
    """A tiny suite committed in its own git repository in ``folder``, and a store URL beside it."""
    folder.mkdir()
    path = suite(folder)
    for args in (["init", "-q", "-b", "main"], ["add", "suite.toml"],
                 ["-c", "user.name=p", "-c", "user.email=p@p", "commit", "-qm", "suite"]):
        subprocess.run(["git", "-C", str(folder), *args], check=True)
    return path, f"sqlite:///{folder / 'h.sqlite'}"


def nightly_probe(scratch: Path):
    """Issue 32, item 12: a second nightly at the same commit (a real git repository)."""
    folder = scratch / "night"
    path, store = _night_repo(folder)
    perfguard("nightly", str(path), "--store", store, "--quiet", "--no-bisect", cwd=folder)
    proc = subprocess.run([*PERFGUARD, "nightly", str(path), "--store", store, "--quiet", "--no-bisect"], cwd=folder,
                          capture_output=True, text=True, timeout=600, preexec_fn=_cap_memory)
    said = next((x for x in proc.stdout.splitlines() if "already has a night" in x), "(measured again)")
    yield "nightly: twice at one commit", (proc.returncode, said)


def second_round(quick: bool):
    scratch = Path(tempfile.mkdtemp(prefix="hostile-probes-2-"))
    try:
        yield from cache_probes(scratch, quick)
        yield from shard_probes(scratch)
        yield from bundle_probe(scratch)
        if not quick:
            yield from nightly_probe(scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

# --- issue 32, second round: notify, triage, TVM pass strings (items 3 (notify) to 9) -------------------

NOTIFY_SECRET = "S3CRETwebhookPath"


class _HostileGitHub:
    """A local HTTP server that fakes GitHub's REST API as a hostile or broken host would answer
    it (``mode``): ``deep`` (JSON nested 100,000 deep, ``status`` 200 or 500), ``huge`` (pages of
    300 MB, no Content-Length), ``redirect`` (every answer a 302 to another host), ``drip`` (a byte
    every 5 s), ``ansi`` (a created issue's html_url holds ANSI escapes and ``\\n::warning::``),
    ``fine`` (an empty repository that opens issues). ``GET /user`` is 403, as for Actions' token."""

    def __init__(self, mode: str, status: int = 200) -> None:
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        fake = self
        self.mode, self.status, self.requests = mode, status, 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _send(self, status: int, raw: bytes, length: bool = True) -> None:
                self.send_response(status)
                if length:
                    self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                try:
                    self.wfile.write(raw)
                except OSError:
                    pass

            def _handle(self) -> None:
                fake.requests += 1
                if self.headers.get("Content-Length"):
                    self.rfile.read(int(self.headers["Content-Length"]))
                fake.answer(self)

            do_GET = do_POST = do_PATCH = _handle

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, handler) -> None:
        if self.mode == "deep":
            return handler._send(self.status, b"[" * 100_000 + b"]" * 100_000)
        if self.mode == "redirect":
            handler.send_response(302)
            handler.send_header("Location", "http://elsewhere.invalid/repos/o/n/issues/99")
            handler.send_header("Content-Length", "0")
            return handler.end_headers()
        if self.mode == "drip":
            handler.send_response(200)
            handler.send_header("Content-Length", "100")
            handler.end_headers()
            try:
                for _ in range(100):
                    handler.wfile.write(b" ")
                    handler.wfile.flush()
                    time.sleep(5)
            except OSError:
                pass
            return None
        if handler.path == "/user":
            return handler._send(403, b'{"message": "Resource not accessible by integration"}')
        if self.mode == "huge" and "/issues?" in handler.path:
            item = json.dumps({"number": 7, "title": "x" * 900, "body": "", "state": "open", "labels": []}).encode()
            block = b"[" + b",".join([item] * 1000) + b","
            handler._send(200, b"", length=False)
            try:
                for _ in range(300 * 2**20 // len(block)):
                    handler.wfile.write(block)
                handler.wfile.write(item + b"]")
            except OSError:
                pass
            return None
        if handler.command == "POST" and handler.path.endswith("/issues"):
            url = "https://github.example/o/n/issues/1" + ("\x1b[2J\n::warning::pwned" if self.mode == "ansi" else "")
            issue = {"number": 1, "title": "t", "body": "", "state": "open", "labels": [], "html_url": url}
            return handler._send(201, json.dumps(issue).encode())
        return handler._send(200, b"[]")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _alert_store(folder: Path) -> str:
    """A SQLite store holding one open regression alert (the notify tests' three nights)."""
    sys.path.insert(0, str(ROOT))
    from perfguard.store import Store
    from tests.test_history_site import SUITE, commit_of, night_document

    url = f"sqlite:///{folder / 'history.sqlite'}"
    with Store.open(url) as store:
        for night in range(3):
            done = store.ingest_json(night_document(night), source=f"night {night}")
            store.record_night(SUITE, commit_of(night), done.document_id)
        series = sorted(store.series(kind="ratio", metric="latency"), key=lambda s: s.key.case)[0]
        store.upsert_change(series.id, good_commit=commit_of(1), bad_commit=commit_of(2),
                            time="2026-03-03T03:00:00.000000Z", ratio=1.08, ci_low=1.06, ci_high=1.10,
                            status="confirmed")
        store.raise_alerts(SUITE)
    return url


CAPPED = """
import atexit, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))  # 1 GiB: a failure is MemoryError, not the OOM killer
atexit.register(lambda: print(f"peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB",
                              file=sys.stderr))
from perfguard.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _capped(args: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """A perfguard command in a child capped at 1 GiB of address space: its exit code, and its
    peak resident memory with its last warning."""
    proc = subprocess.run([sys.executable, "-c", CAPPED, *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, timeout=600)
    peak = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "peak unknown"
    warning = next((x for x in proc.stdout.splitlines() if x.startswith("warning")), proc.stderr.strip()[-160:])
    return proc.returncode, f"{peak}; {warning}"


def notify_probes(scratch: Path, quick: bool):
    """The probes of issue 32's notify, triage and TVM items; each yields (name, (exit, line))."""
    folder = scratch / "n32"
    folder.mkdir()
    store = _alert_store(folder)
    env = {"GITHUB_TOKEN": "ghp_probeTokenNotReal1234", "TMPDIR": str(folder)}
    notify = ["history", "notify", "--repo", "o/n", "--store", store]
    for name, api in (("--api-url :abc", ":abc"), ("--api-url http://[::1", "http://[::1")):
        yield f"notify: {name}", perfguard(*notify, "--api-url", api, cwd=folder, env=env)
    hook = f"http://hooks.example/services/T0/B0/{NOTIFY_SECRET} x"
    fine = _HostileGitHub("fine")
    code, line = perfguard(*notify, "--api-url", fine.url, "--webhook", hook, cwd=folder, env=env)
    yield "notify: --webhook with a space", (code, line.replace(NOTIFY_SECRET, "<SECRET>"))
    yield "  requests sent before the refusal", (fine.requests, f"secret on stderr: {NOTIFY_SECRET in line}")
    fine.close()
    for label, server in (("JSON nested 100,000 deep (200)", _HostileGitHub("deep", 200)),
                          ("JSON nested 100,000 deep (500)", _HostileGitHub("deep", 500)),
                          ("a 302 to another host", _HostileGitHub("redirect"))):
        proc = subprocess.run([*PERFGUARD, *notify, "--api-url", server.url], cwd=folder, capture_output=True,
                              text=True, env={**os.environ, **env}, timeout=600)
        warning = next((x for x in proc.stdout.splitlines() if x.startswith("warning")), proc.stderr.strip()[-160:])
        yield f"notify: {label}", (proc.returncode, warning)
        server.close()
    huge = _HostileGitHub("huge")
    yield "notify: 300 MB pages, 1 GiB cap", _capped([*notify, "--api-url", huge.url], folder, env)
    huge.close()
    ansi = _HostileGitHub("ansi")
    proc = subprocess.run([*PERFGUARD, *notify, "--api-url", ansi.url], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)
    raw = "\x1b" in proc.stdout or any(x.startswith("::") for x in proc.stdout.splitlines())
    yield "notify: html_url with ANSI and ::warning::", (proc.returncode, f"raw control or '::' line: {raw}")
    ansi.close()
    proc = subprocess.run([*PERFGUARD, "history", "triage", "1", "--note", "seen", "--store", store], cwd=folder,
                          capture_output=True, text=True, timeout=600)
    raw = "\x1b" in proc.stdout or any(x.startswith("::") for x in proc.stdout.splitlines())
    yield "history triage: that html_url", (proc.returncode, f"raw control or '::' line: {raw}")
    for alert_id in ("99999999999999999999999", "9223372036854775808", "\u00b2"):
        yield f"history triage {alert_id}", perfguard("history", "triage", alert_id, "--note", "x", "--store", store,
                                                       cwd=folder)
    crash = ("import sys, perfguard.history.notify as n\n"
             "def boom(*a, **k): raise RuntimeError('exploded at ' + sys.argv[sys.argv.index('--webhook') + 1])\n"
             "n.IssueIndex.build = boom\nfrom perfguard.cli import main\nsys.exit(main(sys.argv[1:]))")
    fine = _HostileGitHub("fine")
    proc = subprocess.run([sys.executable, "-c", crash, *notify, "--api-url", fine.url, "--webhook",
                           f"{fine.url}/services/T0/B0/{NOTIFY_SECRET}"], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env, "PYTHONPATH": str(ROOT)}, timeout=600)
    leaked = [p.name for p in folder.rglob("*") if p.is_file() and NOTIFY_SECRET in p.read_text(errors="replace")]
    yield "notify: internal error with a webhook", (proc.returncode, f"secret on stderr: {NOTIFY_SECRET in proc.stderr}; "
                                                     f"files holding it: {leaked or 'none'}")
    fine.close()
    tvm = folder / "tvm"
    tvm.mkdir()
    for label, hostile in (("{[1]:2}", "FuseOps(fuse_opt_level={[1]:2})"), ("{[]}", "FuseOps(fuse_opt_level={[]})"),
                           ("100,000 unary minus", "FuseOps(fuse_opt_level=" + "-" * 100_000 + "1)"),
                           ("a call, then __import__('os')", "FuseOps(fuse_opt_level=2), __import__('os')")):
        (tvm / "suite.toml").write_text('[suite]\nname = "p"\nbackend = "tvm"\n[models.r]\narch = "resnet"\n'
                                         "params = { depth = 1, width = 4, image_size = 16, num_classes = 4 }\n"
                                         f"[pipelines.p]\npasses = {json.dumps(['LegalizeOps', hostile])}\n")
        code, line = perfguard("validate", str(tvm / "suite.toml"), cwd=tvm)
        yield f"validate: tvm pass {label}", (code, line[:150])
    if quick:
        return
    drip = _HostileGitHub("drip")
    start = time.monotonic()
    proc = subprocess.run([*PERFGUARD, *notify, "--api-url", drip.url], cwd=folder, capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)
    warning = next((x for x in proc.stdout.splitlines() if x.startswith("warning")), "(none)")
    yield "notify: a byte every 5 s", (proc.returncode, f"{time.monotonic() - start:.0f} s; {warning}")
    drip.close()


def main() -> None:
    from hostile_probes_3 import third_round  # the third round (issue 44), in its own module

    quick = "--quick" in sys.argv
    width = 44
    print(f"{'probe':<{width}} exit  first line of stderr")
    for name, (code, line) in [*probes(quick), *second_round(quick), *third_round(quick)]:
        print(f"{name:<{width}} {code:>4}  {line[:160]}")
    for name, (code, line) in notify_probes(Path(tempfile.mkdtemp(prefix="hostile-probes-32-")), quick):
        print(f"{name:<{width}} {code:>4}  {line[:160]}")


if __name__ == "__main__":
    main()
