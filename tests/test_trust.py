"""Trusted and untrusted input (issue 23, item 3): an artifact folder is data, whose paths must stay
inside it; ``validate`` refuses a model path that is not an ONNX model, as ``run`` does; credentials
never reach a traceback file, an error document or an error line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import assume, given, settings, strategies as st

from perfguard.redact import redact, redact_url
from perfguard.store import display_url

from .conftest import REPO, TINY_MODELS, run_cli, smallest_measure


def _one_error_line(proc: subprocess.CompletedProcess[str], *fragments: str) -> str:
    """Exit 2, no traceback, one stderr line holding every fragment."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and len(lines) == 1, proc.stderr
    assert lines[0].startswith("perfguard: error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------------------------
# An artifact folder is data: every path it names resolves inside it


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An artifact folder of one real compiled case (a tiny zoo ResNet through ONNX Runtime)."""
    root = tmp_path_factory.mktemp("compiled")
    suite = root / "suite.toml"
    suite.write_text(textwrap.dedent(TINY_MODELS + smallest_measure() + "[pipelines.none]\npasses = []\n"))
    proc = run_cli("compile", str(suite), "--out", str(root / "art"), "--quiet")
    assert proc.returncode == 0, proc.stderr
    return root / "art"


def _copy(compiled: Path, tmp_path: Path) -> tuple[Path, Path, dict]:
    """A fresh copy of the artifact folder, a folder beside it ("outside"), and the manifest."""
    folder = tmp_path / "art"
    shutil.copytree(compiled, folder, symlinks=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    return folder, outside, json.loads((folder / "manifest.json").read_text())


def _write_manifest(folder: Path, manifest: dict) -> None:
    (folder / "manifest.json").write_text(json.dumps(manifest))


def _relative_escape(folder: Path, outside: Path, manifest: dict) -> str:
    artifact = folder / manifest["cases"][0]["artifact_file"]["path"]
    shutil.copy(artifact, outside / artifact.name)  # the same bytes: its sha256 still matches
    manifest["cases"][0]["artifact_file"]["path"] = f"../outside/{artifact.name}"
    _write_manifest(folder, manifest)
    return "has a '..' component"


def _absolute_path(folder: Path, outside: Path, manifest: dict) -> str:
    artifact = folder / manifest["cases"][0]["artifact_file"]["path"]
    shutil.copy(artifact, outside / artifact.name)
    manifest["cases"][0]["artifact_file"]["path"] = str(outside / artifact.name)
    _write_manifest(folder, manifest)
    return "is an absolute path"


def _symlinked_file(folder: Path, outside: Path, manifest: dict) -> str:
    artifact = folder / manifest["cases"][0]["artifact_file"]["path"]
    shutil.move(artifact, outside / artifact.name)
    artifact.symlink_to(outside / artifact.name)
    return "leads outside the folder through a symlink"


def _symlinked_folder(folder: Path, outside: Path, manifest: dict) -> str:
    artifact = folder / manifest["cases"][0]["artifact_file"]["path"]
    moved = outside / artifact.parent.name
    shutil.move(artifact.parent, moved)
    artifact.parent.symlink_to(moved, target_is_directory=True)
    return "leads outside the folder through a symlink"


def _external_data_outside(folder: Path, outside: Path, manifest: dict) -> str:
    """The artifact keeps its weights in a data file whose location (written inside the ONNX file,
    not the manifest) leaves the folder."""
    import onnx

    from perfguard.models.onnx_files import artifact_sha256

    entry = manifest["cases"][0]["artifact_file"]
    artifact = folder / entry["path"]
    model = onnx.load(str(artifact))
    location = os.path.relpath(outside / "weights.data", artifact.parent)
    onnx.save(model, str(artifact), save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.data", size_threshold=0)
    shutil.move(artifact.parent / "weights.data", outside / "weights.data")
    skeleton = onnx.load(str(artifact), load_external_data=False)
    for tensor in skeleton.graph.initializer:
        for item in tensor.external_data:
            if item.key == "location":
                item.value = location
    onnx.save(skeleton, str(artifact))
    entry["sha256"] = artifact_sha256(artifact)  # whoever made the folder vouches for the outside file
    _write_manifest(folder, manifest)
    return "leads outside the folder"


@pytest.mark.parametrize("escape", [_relative_escape, _absolute_path, _symlinked_file, _symlinked_folder,
                                    _external_data_outside])
def test_an_artifact_folder_that_names_a_file_outside_it_is_refused_before_measuring(
        compiled: Path, tmp_path: Path, escape: Callable[[Path, Path, dict], str]) -> None:
    folder, outside, manifest = _copy(compiled, tmp_path)
    reason = escape(folder, outside, manifest)
    out = tmp_path / "result.json"
    proc = run_cli("run", "--artifacts", str(folder), "--out", str(out), "--quiet", cwd=tmp_path)
    case = manifest["cases"][0]["id"]
    _one_error_line(proc, str(folder / "manifest.json"), f"artifact of {case}", reason)
    assert not out.exists()  # nothing measured, nothing written


@pytest.mark.slow
def test_a_symlink_that_stays_inside_the_folder_is_measured(compiled: Path, tmp_path: Path) -> None:
    folder, _, manifest = _copy(compiled, tmp_path)
    artifact = folder / manifest["cases"][0]["artifact_file"]["path"]
    shutil.move(artifact, folder / "kept.onnx")
    artifact.symlink_to(Path("..") / ".." / "kept.onnx")  # a relative link, resolving inside
    out = tmp_path / "result.json"
    proc = run_cli("run", "--artifacts", str(folder), "--out", str(out), "--quiet", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(out.read_text())["cases"][0]["status"] == "ok"


def test_a_manifest_model_hash_that_is_not_a_sha256_is_refused(compiled: Path, tmp_path: Path) -> None:
    """A reference file's name is built from the model's sha256: ``../../x`` would name a file outside."""
    folder, _, manifest = _copy(compiled, tmp_path)
    name = next(iter(manifest["models"]))
    manifest["models"][name]["sha256"] = "../../../../etc/x"
    _write_manifest(folder, manifest)
    proc = run_cli("run", "--artifacts", str(folder), "--quiet", cwd=tmp_path)
    _one_error_line(proc, str(folder / "manifest.json"), f"models.{name}.sha256", "is not a sha256")


def test_a_case_whose_model_the_manifest_does_not_hold_is_refused(compiled: Path, tmp_path: Path) -> None:
    """Was an internal error (a KeyError on the manifest's models) when measuring the folder."""
    folder, _, manifest = _copy(compiled, tmp_path)
    name = next(iter(manifest["models"]))
    del manifest["models"][name]
    _write_manifest(folder, manifest)
    proc = run_cli("run", "--artifacts", str(folder), "--quiet", cwd=tmp_path)
    _one_error_line(proc, str(folder / "manifest.json"), f"names model {name!r}, which the manifest's models do not hold")


@pytest.mark.parametrize("entry", ["suite.toml", "manifest.json"])
def test_a_fixed_entry_symlinked_out_of_the_folder_is_refused(compiled: Path, tmp_path: Path, entry: str) -> None:
    folder, outside, _ = _copy(compiled, tmp_path)
    shutil.move(folder / entry, outside / entry)
    (folder / entry).symlink_to(outside / entry)
    proc = run_cli("run", "--artifacts", str(folder), "--quiet", cwd=tmp_path)
    _one_error_line(proc, f"{folder}: '{entry}' leads outside the folder through a symlink")


# --------------------------------------------------------------------------------------------
# validate refuses a model path that is not an ONNX model, with the same line as run


@pytest.mark.parametrize("model, reason", [
    ("/etc/passwd", "/etc/passwd is not a readable ONNX model (DecodeError); give an .onnx file"),
    ("afolder", "is a folder, not an ONNX model file"),
    ("missing.onnx", "file not found: "),
])
def test_validate_refuses_a_model_path_that_is_not_an_onnx_model(write_suite, tmp_path: Path, model: str,
                                                                   reason: str) -> None:
    if model == "/etc/passwd" and not Path(model).is_file():
        pytest.skip("no /etc/passwd on this machine")
    (tmp_path / "afolder").mkdir()
    suite = write_suite(f'[models.m]\npath = "{model}"\n[pipelines.none]\npasses = []\n')
    line = _one_error_line(run_cli("validate", str(suite)), f"{suite}: [models.m] path: ", reason)
    out = tmp_path / "never.json"
    assert _one_error_line(run_cli("run", str(suite), "--out", str(out), "--quiet")) == line  # the same check
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# One redaction for every URL form the store accepts, and other secrets in URLs

REDACTED = [
    ("sqlite:///relative/history.sqlite", "sqlite:///relative/history.sqlite"),
    ("sqlite:////abs/a:b@c/history.sqlite", "sqlite:////abs/a:b@c/history.sqlite"),  # a path, no password
    ("postgresql://perf:S3cretPW@db.example:5432/perf", "postgresql://perf:***@db.example:5432/perf"),
    ("postgresql+psycopg://perf:S3cretPW@db/perf", "postgresql+psycopg://perf:***@db/perf"),
    ("postgres://perf:S3cretPW@db/perf", "postgres://perf:***@db/perf"),
    ("postgresql://perf@db/perf", "postgresql://perf@db/perf"),  # a user name alone is no secret
    ("postgresql://db/perf?user=perf&password=S3cretPW", "postgresql://db/perf?user=perf&password=***"),
    ("postgresql://perf:p%40ss%3Aw0rd@db/perf?sslpassword=K3yPass&sslmode=require",
     "postgresql://perf:***@db/perf?sslpassword=***&sslmode=require"),
    ("postgresql://perf:p@ss:w/o?r#d@db:5432/perf", "postgresql://perf:***@db:5432/perf"),  # raw @ : / ? #
    ("--store=postgresql://perf:S3cretPW@db/perf", "--store=postgresql://perf:***@db/perf"),
    ("https://x-access-token:ghs_T0ken@github.com/org/repo.git", "https://x-access-token:***@github.com/org/repo.git"),
    ("https://ghp_T0ken@github.com/org/repo", "https://***@github.com/org/repo"),
    ("https://api.example/v1?token=T0k&access_token=T0k2", "https://api.example/v1?token=***&access_token=***"),
    ("ssh://git@github.com/org/repo.git", "ssh://git@github.com/org/repo.git"),
    ("https://github.com/org/repo@v1", "https://github.com/org/repo@v1"),  # an @ in a path
]


@pytest.mark.parametrize("url, expected", REDACTED)
def test_redact_masks_the_secret_of_every_url_form(url: str, expected: str) -> None:
    assert redact_url(url) == expected
    assert display_url(url) == expected  # the store shows its URL through the same function
    assert redact(f"cannot open {url} (retrying)") == f"cannot open {expected} (retrying)"
    assert redact(f"url='{url}', other='x'") == f"url='{expected}', other='x'"  # as a repr shows it


def test_redact_also_scrubs_an_echoed_password_and_keeps_code() -> None:
    url = "postgresql://perf:p%40ssW0rd@db/perf"
    text = 'FATAL: password "p@ssW0rd" rejected\n    connect(password=password)\n'
    assert redact(text, values=["--store", url]) == 'FATAL: password "***" rejected\n    connect(password=password)\n'


@pytest.mark.parametrize("url, expected", [
    ("https://hooks.slack.com/services/T0/B0/S3cretPath", "https://hooks.slack.com/***"),
    ("--webhook=http://h:8080/services/T0/B0/S3cret?y=1#z", "--webhook=http://h:8080/***"),
    ("https://ghp_T0ken@github.com/org/repo?token=T0k", "https://***@github.com/***"),
    ("postgresql://perf:S3cretPW@db/history", "postgresql://perf:***@db/***"),
    ("https://api.github.com", "https://api.github.com"),
    ("https://api.github.com/", "https://api.github.com/"),
])
def test_redact_with_paths_masks_every_urls_path_and_query(url: str, expected: str) -> None:
    """What an internal error writes masks every URL's path and query too: a webhook's path is its
    secret, and one holding a space is masked whole, wherever else the message echoes it."""
    assert redact_url(url, paths=True) == expected
    assert redact(f"cannot open {url} (retrying)", paths=True) == f"cannot open {expected} (retrying)"
    webhook = "http://h/services/T0/B0/S3cret x"
    echoed = f"InvalidURL: can't contain control characters. '/services/T0/B0/S3cret x' {webhook}"
    masked = redact(echoed, values=["--webhook", webhook], paths=True)
    assert "S3cret" not in masked and "services/T0" not in masked and masked.endswith(" http://h/***")


USERS = st.text(st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":/?#@&;"), max_size=12)
PASSWORDS = st.text(st.characters(min_codepoint=33, max_codepoint=0x24F, exclude_categories=("Cc", "Cs", "Zs")),
                    min_size=6, max_size=24)


@settings(max_examples=200, derandomize=True, deadline=None)
@given(user=USERS, password=PASSWORDS, scheme=st.sampled_from(["postgresql", "postgres", "postgresql+psycopg"]),
       escaped=st.booleans())
def test_a_generated_password_never_survives_redaction(user: str, password: str, scheme: str, escaped: bool) -> None:
    from urllib.parse import quote

    written = quote(password, safe="") if escaped else password
    url = f"{scheme}://{user}:{written}@db.example:5432/perf"
    expected = f"{scheme}://{user}:***@db.example:5432/perf"
    assume(password not in expected and written not in expected)
    assert redact_url(url) == expected
    for text in (redact(f"perfguard nightly s.toml --store {url}"), redact(f"x {password} y", values=[url])):
        assert written not in text and password not in text


# --------------------------------------------------------------------------------------------
# An internal error records no credential


CRASH_IN_STORE = """
import perfguard.store
from sqlalchemy.engine import make_url
def crash(url, **kwargs):
    raise RuntimeError(f"driver exploded on {url}\\nserver said: password {make_url(url).password!r} expired")
perfguard.store.Store.open = crash
"""


@pytest.mark.parametrize("url, secret", [("postgresql://user:S3cretPW@127.0.0.1:1/db", "S3cretPW"),
                                         ("postgresql://user:S3cret%40PW@127.0.0.1:1/db", "S3cret@PW")])
def test_an_internal_error_writes_no_credential_anywhere(write_suite, tmp_path: Path, url: str, secret: str) -> None:
    suite = write_suite(TINY_MODELS + "[pipelines.none]\npasses = []\n")
    out = tmp_path / "error.json"
    env = dict(os.environ, TMPDIR=str(tmp_path), COLUMNS="200",
               PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    command = [sys.executable, "-c", f"{CRASH_IN_STORE}\nimport sys\nfrom perfguard.cli import main\n"
               "sys.exit(main(sys.argv[1:]))", "nightly", str(suite), "--store", url, "--json", str(out), "--quiet"]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300, check=False)
    assert proc.returncode == 70, proc.stderr
    # Every URL's path and query are masked in what an internal error writes (issue 32).
    assert "perfguard: internal error: RuntimeError: driver exploded on postgresql://user:***@127.0.0.1:1/***" \
        in proc.stderr
    traceback_file = Path(proc.stderr.rsplit("traceback written to ", 1)[1].strip())
    text = traceback_file.read_text()
    assert "command: perfguard nightly" in text and "--store 'postgresql://user:***@127.0.0.1:1/***'" in text
    assert "Traceback (most recent call last)" in text and "password '***' expired" in text
    document = json.loads(out.read_text())
    assert document["kind"] == "error" and "postgresql://user:***@127.0.0.1:1/***" in document["command"]
    for where in (proc.stderr, text, out.read_text()):
        assert secret not in where and "S3cret" not in where
