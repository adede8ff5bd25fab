"""The history store's connection: its URL, an engine per backend with its settings, one
transaction at a time, and the schema brought to this perfguard's head revision under a lock.

SQLite: every write transaction starts with ``BEGIN IMMEDIATE`` (writers queue on the file lock,
up to a 60 s busy timeout, instead of failing on a lock upgrade) in WAL mode (readers never wait
for a writer); the first open's switch of a new file to WAL, which SQLite refuses at once instead
of waiting, is retried up to the same timeout, and the schema is created under ``BEGIN
IMMEDIATE``. PostgreSQL: the first schema creation is serialized by an advisory lock.

Every failure is a :class:`~perfguard.errors.StoreError`: one line that names the store (its
password masked, here and in every driver message) and what to fix. SQLAlchemy, Alembic and
psycopg load when a store is opened, not when this module is imported.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Self

from perfguard.errors import StoreError, one_line
from perfguard.redact import redact, redact_url

if TYPE_CHECKING:
    from sqlalchemy.engine import Connection, Engine

DEFAULT_STORE = Path(".perfguard") / "history.sqlite"
STORE_ENV = "PERFGUARD_STORE"
URL_HINT = "use a file path, sqlite:///PATH or postgresql://USER:PASSWORD@HOST[:PORT]/DATABASE"
# pg_advisory_xact_lock key of the schema migration: any constant that nothing else uses.
_MIGRATION_LOCK = 0x70657266  # "perf"
_SQLITE_BUSY_TIMEOUT_S = 60.0


def store_url(arg: str | None) -> str:
    """The store's URL: ``arg`` (``--store``), else ``$PERFGUARD_STORE``, else the SQLite file
    ``.perfguard/history.sqlite`` in the current folder. A value without ``://`` is a SQLite file."""
    value = arg or os.environ.get(STORE_ENV) or str(DEFAULT_STORE)
    if "://" in value:
        return value
    return f"sqlite:///{Path(value).expanduser().absolute()}"


def display_url(url: str) -> str:
    """``url`` with any password replaced by ``***`` (works on a malformed URL too): the one
    redaction of :mod:`perfguard.redact`, which the traceback file and error documents use too."""
    return redact_url(url)


class StoreConnection:
    """An open store's engine and how it is shown: what every part of
    :class:`perfguard.store.Store` builds on. Each transaction is one :meth:`_connect`."""

    def __init__(self, engine: Engine, url: str, password: str | None) -> None:
        self._engine = engine
        self._display = display_url(url)
        self._password = password

    @classmethod
    def open(cls, url: str, *, create: bool = True, migrations: Path | None = None) -> Self:
        """Connect to the store at ``url`` and bring its schema to this perfguard's head revision
        (create it when ``create``; migrate an older one). A store written by a newer perfguard is
        refused; with ``create=False`` a missing store is a ``StoreError`` saying how to make one.
        ``migrations`` (tests): another Alembic script folder instead of the shipped one."""
        from sqlalchemy.exc import SQLAlchemyError

        engine, password = _engine(url, create)
        store = cls(engine, url, password)
        try:
            store._migrate(create, migrations)
        except SQLAlchemyError as exc:
            engine.dispose()
            raise StoreError(f"cannot open the history store {store.url}: {reason(exc, password)}; check the "
                             "URL, that the server is up and the credentials (--store or $PERFGUARD_STORE)") from None
        except BaseException:
            engine.dispose()
            raise
        return store

    def _migrate(self, create: bool, migrations: Path | None) -> None:
        from alembic.runtime.migration import MigrationContext
        from alembic.script import ScriptDirectory

        from perfguard.store import schema

        folder = migrations or schema.MIGRATIONS_DIR
        script = ScriptDirectory(str(folder))
        head = script.get_current_head()

        def current(conn: Connection) -> tuple[str, ...]:
            revisions = MigrationContext.configure(conn).get_current_heads()
            for revision in revisions:
                if revision not in {s.revision for s in script.walk_revisions()}:
                    raise StoreError(f"the history store {self.url} was written by a newer perfguard (schema "
                                     f"revision {revision}; this one knows up to {head}): upgrade perfguard")
            return revisions

        with self._engine.connect() as conn:
            conn.execution_options(perfguard_read=True)
            if current(conn) == (head,):
                return
        if not create:
            raise StoreError(f"no history store at {self.url} (run `perfguard history ingest` or "
                             "`perfguard nightly` first)")
        from alembic import command
        from alembic.config import Config

        with self._engine.begin() as conn:  # SQLite: BEGIN IMMEDIATE, one migrator at a time
            if conn.dialect.name == "postgresql":
                import sqlalchemy as sa

                conn.execute(sa.select(sa.func.pg_advisory_xact_lock(_MIGRATION_LOCK)))
            if current(conn) == (head,):
                return  # a concurrent first writer created it while this one waited
            config = Config()
            config.set_main_option("script_location", str(folder))
            config.set_main_option("path_separator", "os")
            config.attributes["connection"] = conn
            command.upgrade(config, "head")

    def close(self) -> None:
        self._engine.dispose()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        """The store's URL as it may be shown (password masked)."""
        return self._display

    @contextmanager
    def _connect(self, write: bool) -> Iterator[Connection]:
        """One transaction: committed when the block ends, rolled back on an exception; database
        errors become ``StoreError``."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if write:
                with self._engine.begin() as conn:
                    yield conn
            else:
                with self._engine.connect() as conn:
                    conn.execution_options(perfguard_read=True)
                    yield conn
        except SQLAlchemyError as exc:
            raise StoreError(f"history store {self.url}: {reason(exc, self._password)}") from None


def reason(exc: BaseException, password: str | None) -> str:
    """One line from a driver's exception (without SQLAlchemy's statement and parameters), the
    password scrubbed even where a driver echoes it."""
    orig = getattr(exc, "orig", None)
    text = redact(one_line(orig if isinstance(orig, BaseException) else exc))
    return text.replace(password, "***") if password else text


def insert_ignoring(conn: Connection, table: Any) -> Any:
    """An INSERT of the connection's backend, which has ``on_conflict_do_nothing``."""
    if conn.dialect.name == "postgresql":
        from sqlalchemy.dialects.postgresql import insert as pg_insert

        return pg_insert(table)
    from sqlalchemy.dialects.sqlite import insert as sqlite_insert

    return sqlite_insert(table)


def _engine(url: str, create: bool) -> tuple[Engine, str | None]:
    """An engine for ``url`` with the backend's settings, and the URL's password (to scrub it from
    driver messages); a bad URL or SQLite path is a ``StoreError``."""
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    shown = display_url(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        raise StoreError(f"malformed history store URL {shown}; {URL_HINT}") from None
    backend, _, driver = parsed.drivername.partition("+")
    password = parsed.password if isinstance(parsed.password, str) and parsed.password else None
    if backend in ("postgresql", "postgres") and driver in ("", "psycopg"):
        if not parsed.database:
            raise StoreError(f"history store URL {shown} names no database; {URL_HINT}")
        engine = sa.create_engine(parsed.set(drivername="postgresql+psycopg"), pool_pre_ping=True,
                                  connect_args={"connect_timeout": 10})
        return engine, password
    if backend == "sqlite" and driver in ("", "pysqlite"):
        return _sqlite_engine(parsed, shown, create), None
    raise StoreError(f"history store URL {shown}: unsupported kind {parsed.drivername!r}; {URL_HINT}")


def _sqlite_engine(parsed: Any, shown: str, create: bool) -> Engine:
    import sqlalchemy as sa

    database = parsed.database
    if not database or database == ":memory:" or parsed.host:
        # sqlite:// is SQLAlchemy's in-memory database, sqlite://name/file a "host" SQLite ignores:
        # each a slash short of a file, and a store that keeps nothing would take a night and say 0.
        written = f"{parsed.host or ''}/{database or ''}".strip("/") if database != ":memory:" else ""
        example = f"sqlite:///{written}" if written else "sqlite:///PATH (sqlite:///history.sqlite, sqlite:////abs/path)"
        raise StoreError(f"history store URL {shown} names no SQLite file (in memory it would keep nothing); "
                         f"write three slashes and the file: {example}")
    if database:
        path = Path(database)
        if not path.exists():
            if not create:
                raise StoreError(f"no history store at {shown} (run `perfguard history ingest` or "
                                 "`perfguard nightly` first)")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                why = (f"{path.parent}: a file is in the way of its folder"
                       if isinstance(exc, FileExistsError | NotADirectoryError) else
                       f"{path.parent}: {exc.strerror or exc}")
                raise StoreError(f"cannot create the history store {shown}: {why}; choose a writable path "
                                 "(--store or $PERFGUARD_STORE)") from None
        elif path.is_dir():
            raise StoreError(f"history store {shown} is a folder, not a SQLite file; name a file inside it")
    engine = sa.create_engine(parsed.set(drivername="sqlite+pysqlite"),
                              connect_args={"timeout": _SQLITE_BUSY_TIMEOUT_S})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, record: Any) -> None:
        # Transactions are ours (the "begin" hook), not pysqlite's implicit ones.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(_SQLITE_BUSY_TIMEOUT_S * 1000)}")
            _switch_to_wal(cursor)
            cursor.execute("PRAGMA foreign_keys = ON")
            # WAL with NORMAL survives a killed process (the commit is in the log); only a power
            # loss can drop the last commits, never corrupt the file.
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        read = conn.get_execution_options().get("perfguard_read", False)
        conn.exec_driver_sql("BEGIN" if read else "BEGIN IMMEDIATE")

    return engine


def _switch_to_wal(cursor: Any) -> None:
    """Put the connection's database in WAL mode (a no-op once it is: the mode is stored in the file).

    SQLite answers "database is locked" at once, without its busy timeout, to a switch to WAL while
    another connection holds the write lock of a file not yet in WAL: another process's switch of
    the same fresh store (16 processes switching a new file at once: one failed in 5 of 30 rounds
    on 2 cores), or a program writing it without WAL. The switch is retried until the busy timeout,
    so the first open queues like any write."""
    import sqlite3
    import time

    deadline = time.monotonic() + _SQLITE_BUSY_TIMEOUT_S
    pause = 0.001
    while True:
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "database is locked" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)
