"""A throwaway PostgreSQL server for the history-store tests.

:func:`start_server` finds the server binaries (``initdb`` on PATH, else
``/usr/lib/postgresql/*/bin``, newest first), creates a cluster in a temporary folder with a user
``perfguard`` whose password is :data:`PASSWORD` (scram-sha-256, so a wrong password is refused),
and starts ``postgres`` on 127.0.0.1 on a free port with its socket in that folder, fsync off (a
test cluster: nothing in it needs to survive the machine). PostgreSQL refuses to run as root, and
CI runs as root: the cluster then belongs to the ``postgres`` user (Debian's package creates it),
else ``nobody``. Every failure is a :class:`PostgresUnavailable` that says why, for the fixture's
skip (or, on CI, failure) message.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

USER = "perfguard"
PASSWORD = "pg-test-secret"


class PostgresUnavailable(Exception):
    """No PostgreSQL server can be started here; the message says why."""


def find_bin_dir() -> Path | None:
    """The folder holding ``initdb`` and ``postgres``, or None."""
    on_path = shutil.which("initdb")
    if on_path and shutil.which("postgres"):
        return Path(on_path).resolve().parent
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"),
                        key=lambda p: int(p.parent.name) if p.parent.name.isdigit() else 0, reverse=True)
    return next((c for c in candidates if (c / "initdb").exists() and (c / "postgres").exists()), None)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class PostgresServer:
    """A running throwaway server; :meth:`url` names a database on it, :meth:`stop` ends it."""

    root: Path
    port: int
    process: subprocess.Popen[bytes]

    def url(self, database: str = "postgres", *, password: str = PASSWORD) -> str:
        return f"postgresql://{USER}:{password}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(2)  # SIGINT: fast shutdown
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        shutil.rmtree(self.root, ignore_errors=True)


def create_database(url: str, name: str) -> str:
    """Create an empty database ``name`` (letters, digits, underscores) on the server of ``url``
    (a ``postgresql://`` URL of a user allowed to create databases); returns the new one's URL."""
    import psycopg

    if not name.replace("_", "").isalnum():
        raise ValueError(f"database name {name!r}: letters, digits and underscores only")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return url.rsplit("/", 1)[0] + "/" + name


def _run_as() -> tuple[int, int] | None:
    """(uid, gid) to run the server as: None unless this process is root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        return entry.pw_uid, entry.pw_gid
    raise PostgresUnavailable("running as root and there is no 'postgres' or 'nobody' user to run the server as")


def start_server(timeout: float = 60.0) -> PostgresServer:
    """Create and start a cluster (see the module docstring); ``PostgresUnavailable`` otherwise."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise PostgresUnavailable("no PostgreSQL server binaries (initdb, postgres) on PATH or in "
                                  "/usr/lib/postgresql/*/bin; install Debian's postgresql package")
    owner = _run_as()
    # The server's user must reach its folder: under /tmp, not a $TMPDIR that only root can enter.
    root = Path(tempfile.mkdtemp(prefix="perfguard-pg-", dir="/tmp" if owner and Path("/tmp").is_dir() else None))
    as_user: dict[str, int] = {} if owner is None else {"user": owner[0], "group": owner[1]}
    try:
        if owner is not None:
            os.chown(root, *owner)
        password_file = root / "password"
        password_file.write_text(PASSWORD + "\n")
        if owner is not None:
            os.chown(password_file, *owner)
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        init = subprocess.run([str(bin_dir / "initdb"), "-D", str(root / "data"), "-U", USER, f"--pwfile={password_file}",
                               "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"], capture_output=True, text=True,
                              env=env, cwd=root, timeout=120, check=False, **as_user)
        if init.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {(init.stderr or init.stdout).strip()[-500:]}")
        port = _free_port()
        log = open(root / "server.log", "wb")  # noqa: SIM115 - the server writes it until stop
        process = subprocess.Popen(
            [str(bin_dir / "postgres"), "-D", str(root / "data"), "-p", str(port), "-k", str(root),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", "max_connections=60", "-c", "shared_buffers=32MB"],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root, **as_user)
        log.close()
        server = PostgresServer(root, port, process)
        _wait_ready(server, timeout)
        return server
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise


def _wait_ready(server: PostgresServer, timeout: float) -> None:
    import psycopg

    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = (server.root / "server.log").read_text(errors="replace").strip()
            raise PostgresUnavailable(f"postgres exited with code {server.process.returncode}: {log[-500:]}")
        try:
            psycopg.connect(f"host=127.0.0.1 port={server.port} user={USER} password={PASSWORD} dbname=postgres",
                            connect_timeout=2).close()
            return
        except psycopg.OperationalError as exc:
            last = str(exc).strip()
            time.sleep(0.2)
    server.stop()
    raise PostgresUnavailable(f"postgres did not accept connections within {timeout:.0f} s: {last}")
