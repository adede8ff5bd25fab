"""Bisection: attribute a regression to a commit and a pass (see perfguard.cli.bisect).

The documents it writes, the result of ``perfguard bisect --json`` and the state file, their
format versions and histories live in :mod:`perfguard.bisect.document`.
"""

from perfguard.bisect.document import BISECT_VERSION as BISECT_VERSION
