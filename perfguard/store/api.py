"""The one class callers use: :class:`Store`, the store's parts on one connection.

Importing this module loads SQLAlchemy (its parts import it and the tables at their top);
:mod:`perfguard.store` loads it on the first use of ``Store``.
"""

from __future__ import annotations

from perfguard.store.alerts import Alerting
from perfguard.store.edits import Editing
from perfguard.store.ingest import Ingesting
from perfguard.store.prune import Pruning
from perfguard.store.queries import Querying


class Store(Alerting, Editing, Ingesting, Querying, Pruning):
    """An open history store. Open with :meth:`open`; close with :meth:`close` or ``with``.

    Each part is one module of this package (documents in :mod:`.ingest`, series, nights and
    changes in :mod:`.queries`, alerts in :mod:`.alerts`, pipeline edits in :mod:`.edits`, retention in :mod:`.prune`), all on one connection
    (:class:`.engine.StoreConnection`)."""
