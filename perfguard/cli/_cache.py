"""``--artifact-cache DIR`` and ``--cache-max SIZE``: the options of the commands that compile
(run, check, nightly, bisect, tune), and the cache they put in place while the command runs
(``perfguard.compile.cache``). ``main`` wraps every command in :func:`artifact_cache`; a command
without the options is left as it is. The same commands take ``--counts`` and ``--counts-cache``
(counted measurement under Valgrind, ``perfguard.counting``), read as the typed mode of their
sampling options (``cli._sampling.count_mode``) and applied to the suite the command loaded.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: The environment variable that names the folder when ``--artifact-cache`` is not given.
CACHE_ENV = "PERFGUARD_ARTIFACT_CACHE"


def add_cache_arguments(parser: argparse.ArgumentParser) -> None:
    """The artifact cache's options and ``--counts``: every command that compiles and measures
    takes both."""
    parser.add_argument("--counts", action="store_true",
                        help="also count every case under Valgrind (callgrind): instructions per inference and "
                             "of the compile, compared as exact metrics (needs valgrind)")
    parser.add_argument("--counts-cache", action="store_true",
                        help="--counts with callgrind's cache simulation: L1/LL misses and estimated cycles per "
                             "inference too (about 1.7x the cost of --counts on a large model)")
    parser.add_argument("--artifact-cache", metavar="DIR",
                        help="reuse compiled artifacts (with their trace and correctness record) from DIR and store "
                             f"new ones there; safe for concurrent jobs (default: ${CACHE_ENV}, else no cache)")
    parser.add_argument("--cache-max", metavar="SIZE",
                        help="bound of the artifact cache, least recently used entries out (e.g. 500MB, 5GB; "
                             "default 5GB)")


def _warn(message: str) -> None:
    sys.stderr.write(f"perfguard: {message}\n")


@contextmanager
def artifact_cache(args: argparse.Namespace) -> Iterator[None]:
    """The command's artifact cache in place while it runs (nothing for a command without the
    options, or without a folder); then one line on stderr: hits, misses, evictions, size."""
    if not hasattr(args, "artifact_cache"):
        yield
        return
    from perfguard.errors import UserError

    folder = args.artifact_cache or os.environ.get(CACHE_ENV) or None
    if folder is None:
        if args.cache_max is not None:
            raise UserError(f"--cache-max needs an artifact cache: add --artifact-cache DIR or set ${CACHE_ENV}")
        yield
        return
    from pathlib import Path

    from perfguard.compile.cache import DEFAULT_MAX_BYTES, CompileCache, using_cache
    from perfguard.results import check_writable
    from perfguard.units import parse_size

    max_bytes = DEFAULT_MAX_BYTES if args.cache_max is None else parse_size(args.cache_max, "--cache-max")
    option = "--artifact-cache" if args.artifact_cache else f"${CACHE_ENV}"
    check_writable(folder, option, directory=True)
    try:
        cache = CompileCache(Path(folder), max_bytes, warn=_warn)
    except OSError as exc:
        raise UserError(f"{option} {folder} is not usable: {exc.strerror or exc}") from None
    with using_cache(cache):
        try:
            yield
        finally:
            if not getattr(args, "quiet", False):
                try:
                    _warn(cache.describe())
                except OSError:  # the folder went away meanwhile: the command's own outcome stands
                    pass
