"""``--workers``, ``--max-workers`` and ``--measure-identical``: the sampling options ``check`` and
``nightly`` share (``tune`` and ``bisect step`` take the first two), read in one place into the
typed :class:`perfguard.flows.check_request.SamplingOptions` the flows apply."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from perfguard.flows.check_request import SamplingOptions


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
                           bool(getattr(args, "measure_identical", False)), alpha)
