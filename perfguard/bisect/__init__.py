"""Bisection: the search over commits and passes, its state file and its document. The drivers
that probe real compilers are flows (:mod:`perfguard.flows.bisection.commit_search`, ``pass_search``,
``version_search``, ``culprit_explain`` of ``perfguard.flows.bisection``).

The documents it writes, the result of ``perfguard bisect --json`` and the state file, their
format versions and histories live in :mod:`perfguard.bisect.document`.
"""

from perfguard.bisect.document import BISECT_VERSION as BISECT_VERSION
