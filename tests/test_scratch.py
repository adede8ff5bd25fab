"""perfguard's temporary folders after a killed job (issue 44, item 9): a folder whose process
was killed with SIGKILL (no cleanup ran) is reclaimed by the next job; a folder in use, one
without perfguard's marker, a link and another user's folder are left alone. Real processes and
real signals."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from perfguard.measure.job import Job
from perfguard.progress import Progress
from perfguard.scratch import OWNER_MARKER, reclaim_stale
from perfguard.suite import load_suite

MAKE = ("import sys, time; from perfguard.scratch import scratch_folder; "
        "print(scratch_folder('count-'), flush=True); time.sleep(600)")


def _held_folder(root: Path) -> tuple[subprocess.Popen[str], Path]:
    """A process that made a marked folder in ``root`` and holds it (sleeps)."""
    proc = subprocess.Popen([sys.executable, "-c", MAKE], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "TMPDIR": str(root)})
    assert proc.stdout is not None
    with proc.stdout:
        return proc, Path(proc.stdout.readline().strip())


def test_a_killed_process_folder_is_reclaimed_and_nothing_else(tmp_path: Path) -> None:
    killed, stale = _held_folder(tmp_path)
    alive, held = _held_folder(tmp_path)
    try:
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        foreign = tmp_path / "perfguard-by-hand"  # no marker: a user's folder
        foreign.mkdir()
        link = tmp_path / "perfguard-link"
        link.symlink_to(stale, target_is_directory=True)
        assert stale.is_dir() and (stale / OWNER_MARKER).is_file()
        assert reclaim_stale(tmp_path) == 1
        assert not stale.exists() and held.is_dir() and foreign.is_dir() and link.is_symlink()
    finally:
        alive.kill()
        alive.wait()
    assert reclaim_stale(tmp_path) == 1 and not held.exists()  # its process ended too


def test_a_job_reclaims_the_folders_of_killed_jobs_when_it_starts(tmp_path: Path, monkeypatch) -> None:
    killed, stale = _held_folder(tmp_path)
    killed.send_signal(signal.SIGKILL)
    killed.wait()
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    suite = tmp_path / "s.toml"
    suite.write_text('[suite]\nname = "s"\nbackend = "mock"\nrunners = ["cpu"]\n\n[models.m]\narch = "resnet"\n'
                     'params = { depth = 2, width = 8, image_size = 32 }\n\n[pipelines.none]\npasses = []\n\n'
                     '[[cases]]\nmodel = "m"\n')
    job = Job(load_suite(suite), list(load_suite(suite).cases), progress=Progress(), check=False)
    try:
        assert not stale.exists()
        assert job.ctx.workdir.parent == tmp_path and (job.ctx.workdir / OWNER_MARKER).is_file()
    finally:
        job.close()
    assert not job.ctx.workdir.exists()
