"""Compile here, measure there: `perfguard compile --out DIR`, then `perfguard run --artifacts DIR`."""

from __future__ import annotations

import json

import pytest

from .conftest import FAST_MEASURE, TINY_MODELS, run_cli
from .factories import result_json

pytestmark = pytest.mark.slow

SUITE = TINY_MODELS + FAST_MEASURE.replace('compile_timeout = "60s"', 'compile_timeout = "60s"\nmemory_probes = 1') + """
[pipelines.none]
passes = []
[pipelines.folded]
passes = ["fuse_bn_into_conv", "constant_folding"]
"""


def test_compile_then_measure_elsewhere(write_suite, tmp_path):
    suite = write_suite(SUITE)
    folder = tmp_path / "artifacts"
    proc = run_cli("compile", str(suite), "--out", str(folder), "--quiet")
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["version"] == 1 and len(manifest["cases"]) == 2
    assert all((folder / c["artifact_file"]["path"]).is_file() for c in manifest["cases"])
    assert list((folder / "refs").glob("*.npz")) and (folder / "suite.toml").is_file()
    assert not (folder / ".work").exists()
    # Measure somewhere else: the suite file and the models are not needed any more.
    moved = tmp_path / "elsewhere" / "artifacts"
    moved.parent.mkdir()
    folder.rename(moved)
    suite.unlink()
    out = tmp_path / "r.json"
    proc = run_cli("run", "--artifacts", str(moved), "--out", str(out), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    document = result_json(out)
    folded = next(c for c in document["cases"] if c["pipeline"] == "folded")
    assert folded["correctness_on_runner"]["passed"] and folded["metrics"]["latency_s"]["n"] > 0
    assert [p["name"] for p in folded["trace"]["passes"]] == ["fuse_bn_into_conv", "constant_folding"]
    # A damaged artifact is refused before any measurement.
    artifact = moved / manifest["cases"][0]["artifact_file"]["path"]
    artifact.write_bytes(artifact.read_bytes()[:-10])
    proc = run_cli("run", "--artifacts", str(moved), "--quiet", cwd=tmp_path)
    assert proc.returncode == 2 and "does not match its sha256" in proc.stderr


def test_compile_refuses_a_non_empty_folder(write_suite, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep me")
    proc = run_cli("compile", str(write_suite(SUITE)), "--out", str(tmp_path / "full"))
    assert proc.returncode == 2 and "not empty" in proc.stderr
    assert (tmp_path / "full" / "x").read_text() == "keep me"
    proc = run_cli("run", "--artifacts", str(tmp_path / "nothing"))
    assert proc.returncode == 2 and "no manifest.json" in proc.stderr


def test_check_of_an_artifact_folder_pairs_its_pipelines(write_suite, tmp_path):
    """`perfguard check --artifacts DIR --against-pipeline NAME`: the folder's suite, verified and measured here."""
    folder = tmp_path / "artifacts"
    assert run_cli("compile", str(write_suite(SUITE)), "--out", str(folder), "--quiet").returncode == 0
    out = tmp_path / "verdicts.json"
    proc = run_cli("check", "--artifacts", str(folder), "--against-pipeline", "none", "--json", str(out), "--quiet",
                   cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    document = json.loads(out.read_text())
    latency = [v for v in document["verdicts"] if v["metric"] == "latency"]
    assert [(v["case"], v["baseline"], v["candidate"]) for v in latency] == [("resnet_t/folded/cpu", "none", "folded")]
    assert latency[0]["comparison"]["method"].startswith("paired") and document["mode"]["artifacts"] == str(folder)
    for args, message in ((["--against-pipeline", "none", "suite.toml"], "give no SUITE file"),
                          (["--base-ref", "HEAD"], "add --against-pipeline NAME"),
                          (["--against-pipeline", "nope"], "unknown pipeline 'nope'")):
        proc = run_cli("check", "--artifacts", str(folder), *args, "--quiet", cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
