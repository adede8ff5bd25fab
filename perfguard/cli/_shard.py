"""``--shard K/N``: the option run, check and nightly share (the partition: ``perfguard.flows.shards``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.suite.shards import ShardSpec


def shard_option(parser: argparse.ArgumentParser, after: str) -> None:
    parser.add_argument("--shard", metavar="K/N",
                        help="run only the K-th of N disjoint parts of the selected cases (1 <= K <= N), balanced "
                             "by expected cost; the pipelines of a model on a runner stay in one part. The document "
                             f"records the part; {after}")


def shard_spec(args: argparse.Namespace) -> ShardSpec | None:
    """The parsed ``--shard`` (None without it); a bad value is a ``UserError`` (exit 2, one line)."""
    from perfguard.suite.shards import ShardSpec

    return None if args.shard is None else ShardSpec.parse(args.shard)
