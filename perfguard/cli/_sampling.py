"""``--workers``, ``--max-workers`` and ``--measure-identical``: the sampling options ``check`` and
``nightly`` share (``tune`` and ``bisect step`` take the first two), with ``--counts`` and
``--counts-cache`` (``cli._cache.add_cache_arguments``; ``profile`` has its own ``--counts``), read in
one place into the typed :class:`perfguard.flows.check_request.SamplingOptions` the flows apply."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.flows.check_request import SamplingOptions
    from perfguard.suite.model import CountMode


def add_sampling_arguments(parser: argparse.ArgumentParser) -> None:
    """--workers, --max-workers and --measure-identical (``check`` and ``nightly``)."""
    parser.add_argument("--workers", type=int, metavar="N", help="first-look workers (suite [check] workers; 1 to 1024)")
    parser.add_argument("--max-workers", type=int, metavar="N", help="worker budget per case ([check] max_workers; up to 1024)")
    parser.add_argument("--measure-identical", action="store_true",
                        help="time both sides even where their artifacts are identical (an A/A sentinel, and "
                             "absolute history values every night; default: identical artifacts are SAME "
                             "without timing)")


def sampling_options(args: argparse.Namespace, alpha: float | None = None) -> SamplingOptions:
    """The options as given, each whole number in its range (a ``UserError`` naming the option)."""
    from perfguard.cli._bounds import MAX_WORKERS, in_range
    from perfguard.flows.check_request import SamplingOptions

    return SamplingOptions(in_range(args.workers, "--workers", 1, MAX_WORKERS),
                           in_range(args.max_workers, "--max-workers", 1, MAX_WORKERS),
                           bool(getattr(args, "measure_identical", False)), alpha, count_mode(args))


def count_mode(args: argparse.Namespace) -> CountMode | None:
    """``--counts`` / ``--counts-cache`` as the typed mode (None: neither given). A missing Valgrind
    is the one-line ``UserError`` here, before any work."""
    mode: CountMode | None = ("cache" if getattr(args, "counts_cache", False)
                              else "instructions" if getattr(args, "counts", False) else None)
    if mode is not None:
        from perfguard.counting.valgrind import valgrind_path

        valgrind_path()
    return mode
