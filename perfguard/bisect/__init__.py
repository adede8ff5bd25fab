"""Bisection: attribute a regression to a commit and a pass (see perfguard.cli.bisect).

Format history of the bisect document (``BISECT_VERSION``), written by ``perfguard bisect --json``
in every mode (``commits``, ``passes`` between commits or pipelines): 1. first format.
"""

BISECT_VERSION = 1
