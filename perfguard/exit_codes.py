"""Every exit code of the ``perfguard`` command, in one enum (the site's
exit-code page, docs/reference/exit-codes.md, is generated from the table below).

===  ==================  =================================================================
 0   ``OK``              success, no regression (``bisect``: ``FOUND``, a culprit found and
                         confirmed; ``bisect step``: ``STEP_GOOD``)
 1   ``REGRESSION``      a regression, or a failed candidate (``bisect step``: ``STEP_BAD``)
 2   ``USAGE``           bad usage or bad input, or an output that cannot be written
 3   ``UNKNOWN``         a case stays undecided, with ``--fail-on-unknown`` (``bisect``:
                         ``INCONCLUSIVE``)
 4   ``CASE_FAILED``     the run completed but some cases failed (compile error, wrong
                         answer, every worker crashed)
 5   ``NO_REGRESSION``   ``bisect``: no reproducible regression between good and bad
 6   ``UNDECIDED``       ``bisect``: good -> bad stayed undecided (too noisy to say regression
                         or none): nothing bisected; the output names the ``--metric`` that
                         would decide it where an exact metric changed between the ends
70   ``INTERNAL``        a bug in perfguard (``EX_SOFTWARE`` of sysexits.h); never a verdict
125  ``STEP_SKIP``       ``bisect step``: this commit cannot be judged (``git bisect run`` skips it)
128  ``STEP_ABORT``      ``bisect step``: every error of the tool, bad input or internal
129  ``HUNG_UP``         stopped by SIGHUP, its terminal or session gone (128 + SIGHUP)
130  ``INTERRUPTED``     Ctrl-C (128 + SIGINT)
141  ``BROKEN_PIPE``     stdout closed early, ``perfguard ... | head`` (128 + SIGPIPE)
143  ``TERMINATED``      stopped by SIGTERM, e.g. a cancelled CI job (128 + SIGTERM)
===  ==================  =================================================================

A number that means different things to different commands has one member and aliases named for
those commands (``FOUND`` is ``OK``, ``INCONCLUSIVE`` is ``UNKNOWN``). ``bisect step`` speaks
``git bisect run``, for which every code from 1 to 127 except 125 means "bad": so a tool error
there exits 128, which makes ``git bisect run`` abort instead of blaming a commit, and 70 is used
by no command for anything but a bug. Which error leaves with which code is decided in one table,
``perfguard.cli.ERROR_EXIT_CODES``.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """The exit status of a ``perfguard`` command (an ``int``: ``sys.exit`` takes it as it is)."""

    OK = 0
    REGRESSION = 1
    USAGE = 2
    UNKNOWN = 3
    CASE_FAILED = 4
    NO_REGRESSION = 5
    UNDECIDED = 6
    INTERNAL = 70
    STEP_SKIP = 125
    STEP_ABORT = 128
    HUNG_UP = 129
    INTERRUPTED = 130
    BROKEN_PIPE = 141
    TERMINATED = 143
    # Aliases: the same number, named for the command that gives it its meaning.
    FOUND = 0
    INCONCLUSIVE = 3
    STEP_GOOD = 0
    STEP_BAD = 1
