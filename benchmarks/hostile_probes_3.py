"""The third round of hostile probes (issue 44), run by ``hostile_probes.py`` after the first two:
planted counts documents, nested JSON, merge settings, a misbehaving ``valgrind``, a SQLite URL a
slash short, two nightlies started together. The probes that need no command line (the counts
cache, the callgrind reader, notify's marker) call the function a command calls, in a child capped
at 1 GiB of address space; ``--quick`` skips the ones that compile and measure."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from hostile_probes import GOLDEN, PERFGUARD, ROOT, _night_repo, _shard_document, perfguard, suite

PROBE_API = """
import json, os, resource, sys
from pathlib import Path
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from perfguard.compile.cache import CompileCache
from perfguard.counting.served import CountsDocument, CountsKey, _read
from perfguard.results.counts import COUNT_PROTOCOL, CompileCounts, Counts
here = Path(sys.argv[1])
key = CountsKey(sys.argv[3], "e" * 16, "c" * 64 if sys.argv[3] == "compile" else "", "[]", 0, 3, 3, COUNT_PROTOCOL,
                "valgrind-3.19.0", "0.1")
def counts(**changed):
    return Counts(**{**dict(instructions=5e6, data_reads=1.0, data_writes=2.0, l1_misses=3.0, ll_misses=4.0,
                            estimated_cycles=5e6, inferences=3, method="window", tool="valgrind-3.19.0",
                            protocol=COUNT_PROTOCOL), **changed})
def plant(data, folder=None):
    cache = CompileCache(here / "cache")
    folder = folder or here / "cache" / "counts"
    folder.mkdir(exist_ok=True)
    (folder / f"{key.digest}.json").write_bytes(data if isinstance(data, bytes) else json.dumps(data).encode())
    return cache
"""


def _api(folder: Path, code: str, kind: str = "run") -> tuple[int, str]:
    """Run ``code`` after :data:`PROBE_API` in a child capped at 1 GiB: its exit code and the last
    line it printed (or of its stderr)."""
    folder.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-c", PROBE_API + code, str(folder), "", kind], cwd=folder,
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)
    lines = (proc.stdout.strip() or proc.stderr.strip() or "(nothing)").splitlines()
    return proc.returncode, lines[-1]


def _served(document: str) -> str:
    return f"cache = plant({document})\nprint('SERVED' if _read(cache, key) else 'dropped, counted again')"


def counts_probes(scratch: Path):
    """Issue 44, items 1 and 4: planted counts documents, through a link and in the cache."""
    yield "counts: counts/ a link to planted documents", _api(scratch / "k0", (
        "CompileCache(here / 'cache')\n(here / 'elsewhere').mkdir()\nos.symlink(here / 'elsewhere', here / 'cache' / 'counts')\n"
        "cache = plant(CountsDocument(key, counts=counts()).to_json(), here / 'elsewhere')\n"
        "print('SERVED' if _read(cache, key) else 'not read')"))
    for i, (name, document, kind) in enumerate((
            ("inferences: 0", "CountsDocument(key, counts=counts(inferences=0)).to_json()", "run"),
            ("21 functions", "{**CountsDocument(key, counts=counts()).to_json(), 'counts': {**counts().to_json(), "
             "'functions': [{'name': f'f{i}', 'object': 'x', 'instructions': 1.0} for i in range(21)]}}", "run"),
            ("16 MB, 250 k functions", "{**CountsDocument(key, counts=counts()).to_json(), 'counts': {**counts()"
             ".to_json(), 'functions': [{'name': f'f{i}', 'object': 'x', 'instructions': 1.0} for i in "
             "range(250_000)]}}", "run"),
            ("a negative per-pass count", "CountsDocument(key, compile=CompileCounts(5, {0: -1}, {})).to_json()",
             "compile"),
            ("a negative compile total", "CountsDocument(key, compile=CompileCounts(-5, {0: 1}, {})).to_json()",
             "compile"),
            ("'[' x 200,000", "b'[' * 200_000 + b']' * 200_000", "run"),
            ("nested in an object", "b'{\"key\": ' + b'[' * 200_000 + b']' * 200_000 + b'}'", "run"))):
        yield f"counts: {name}", _api(scratch / f"k{i + 1}", _served(document), kind)


def third_round(quick: bool):
    scratch = Path(tempfile.mkdtemp(prefix="hostile-probes-3-"))
    try:
        yield from counts_probes(scratch)
        yield "notify: a marker of 50,000 %5B", _api(scratch / "n", (
            "from perfguard.history.notify import last_reported\n"
            "print(last_reported(['<!-- perfguard-reported:' + '%5B' * 50_000 + ' -->']) or 'ignored')"))
        for name, change in (("alpha = -3", {"alpha": -3}), ("alpha = 2.0", {"alpha": 2.0}),
                             ("no history", {"history": None})):
            document = _shard_document("verdicts-pipeline.json")
            document["settings"] = {k: v for k, v in {**document["settings"], **change}.items() if v is not None}
            shard = scratch / "shard.json"
            shard.write_text(json.dumps(document))
            yield f"merge: {name}", perfguard("merge", str(shard), "--json", str(scratch / "m.json"), cwd=scratch)
        profile = ("events: Ir\nsummary: 10\ndesc: Trigger: Client Request: w\nfn=f\n{}\n")
        for name, code in (
                ("an unparseable cost line", f"(here / 'callgrind.out.1.1-01').write_text({profile.format('+3 x 7')!r})"),
                ("a profile -> /dev/zero", "os.symlink('/dev/zero', here / 'callgrind.out.1.1-01')")):
            yield f"callgrind: {name}", _api(scratch / name.replace(" ", "-"), (
                f"{code}\nfrom perfguard.counting.dumps import read_dumps, window_functions\n"
                "functions = window_functions(here, 1, 'w', 1)\n"
                "try:\n    read_dumps(here, 1)\nexcept ValueError as exc:\n"
                "    print(f'count failed: {exc}; functions: {len(functions)}')"))
        yield "callgrind: valgrind --version of 3 MB", _api(scratch / "v", (
            "(here / 'valgrind').write_text('#!/bin/sh\\nhead -c 3000000 /dev/zero | tr \"\\\\0\" x\\n')\n"
            "(here / 'valgrind').chmod(0o755)\nfrom perfguard.counting.valgrind import valgrind_version\n"
            "print(f'tool string of {len(valgrind_version(str(here / \"valgrind\")))} characters')"))
        yield "callgrind: a user's GLIBC_TUNABLES", _api(scratch / "g", (
            "from perfguard.counting.valgrind import counted_env\n"
            "print(counted_env(['x'], {'GLIBC_TUNABLES': 'glibc.pthread.rseq=0'})['GLIBC_TUNABLES'])"))
        yield "history ingest --store sqlite://", perfguard("history", "ingest", str(GOLDEN), "--store", "sqlite://",
                                                          cwd=scratch)
        if not quick:
            folder = scratch / "m"
            folder.mkdir()
            path, cache = suite(folder), folder / "cache"
            perfguard("run", str(path), "--out", str(folder / "a.json"), "--artifact-cache", str(cache), cwd=folder)
            for manifest in cache.glob("??/*/manifest.json"):
                manifest.write_text("[" * 200_000 + "]" * 200_000)
            proc = subprocess.run([*PERFGUARD, "run", str(path), "--out", str(folder / "b.json"), "--artifact-cache",
                                   str(cache)], cwd=folder, capture_output=True, text=True, timeout=600)
            said = next((x for x in proc.stderr.splitlines() if "failed verification" in x), "(no warning)")
            yield "cache: manifest.json nested 200,000 deep", (proc.returncode, said)
            yield "nightly: two started together", _two_nightlies(scratch / "nights")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _two_nightlies(folder: Path) -> tuple[int, str]:
    """Two nightlies of one suite at one commit started together: the exit codes, the nights and
    documents the store holds, and the loser's line."""
    import sqlite3

    path, store = _night_repo(folder)
    args = [*PERFGUARD, "nightly", str(path), "--store", store, "--quiet", "--no-bisect"]
    procs = [subprocess.Popen(args, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [proc.communicate(timeout=600) for proc in procs]
    with sqlite3.connect(folder / "h.sqlite") as db:
        nights, documents = (db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("nights", "documents"))
    said = next((x for out, err in outs for x in (out + err).splitlines() if "already has a night" in x), "(none)")
    codes = sorted(proc.returncode for proc in procs)
    return codes[-1], f"exits {codes}; {nights} night(s), {documents} document(s); {said}"
