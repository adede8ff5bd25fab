"""Alembic's environment for the history store: runs the migrations on the connection ``Store.open``
hands over (``config.attributes["connection"]``, already inside its locked transaction).

For a developer writing a new revision, ``alembic -c ALEMBIC_INI -x url=sqlite:///scratch.sqlite
upgrade head`` (an ini whose ``script_location`` is this folder) opens its own connection instead.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection

from perfguard.store.schema import metadata


def run_migrations(connection: Connection) -> None:
    # Batch mode: SQLite cannot ALTER most things; Alembic then rebuilds the table.
    context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    if context.is_offline_mode():
        raise SystemExit("the history store's migrations run online only (perfguard opens the store)")
    connection = context.config.attributes.get("connection")
    if connection is not None:
        run_migrations(connection)
        return
    url = context.get_x_argument(as_dictionary=True).get("url") or context.config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("give the store: alembic -x url=sqlite:///PATH ...")
    engine = create_engine(url)
    try:
        with engine.connect() as own:
            run_migrations(own)
            own.commit()
    finally:
        engine.dispose()


main()
