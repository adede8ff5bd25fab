"""``--shard K/N``: the option run, check and nightly share, parsed and applied in one place
(the parse: ``perfguard.suite.shards.ShardSpec``, N at most ``MAX_SHARDS``; the partition:
``perfguard.flows.shards``)."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.results.shard import ShardInfo
    from perfguard.store import Store
    from perfguard.suite import Suite
    from perfguard.suite.model import CaseSpec


#: ``perfguard.suite.shards.MAX_SHARDS``, written out: importing ``perfguard.suite`` loads numpy,
#: and building the parser must stay light (tests/test_cli_startup.py); a test keeps the two equal.
HELP_MAX_SHARDS = 10_000


def shard_option(parser: argparse.ArgumentParser, after: str) -> None:
    parser.add_argument("--shard", metavar="K/N",
                        help=f"run only the K-th of N disjoint parts of the selected cases (1 <= K <= N <= {HELP_MAX_SHARDS}), "
                             "balanced by expected cost; the pipelines of a model on a runner stay in one part. The "
                             f"document records the part; {after}")


def select_part(args: argparse.Namespace, suite: Suite, cases: list[CaseSpec], *, command: str,
                decided: Mapping[str, object], store: Store | None = None,
                ) -> tuple[list[CaseSpec], ShardInfo | None]:
    """The cases of ``--shard K/N`` and its ShardInfo (``cases`` and None without the option).
    ``decided``: the settings that decide what every part measures (hashed into the document, so
    merge refuses parts of different runs); ``store``: balance by its past times (a night, whose
    own head commit's times are left out). A bad value is a ``UserError`` (exit 2, one line)."""
    from perfguard.flows.shards import head_commit, select_shard
    from perfguard.suite.shards import ShardSpec

    if args.shard is None:
        return cases, None
    spec = ShardSpec.parse(args.shard)
    exclude = head_commit(suite) if store is not None else None
    return select_shard(suite, cases, spec, command=command, settings=decided, store=store, exclude_commit=exclude)
