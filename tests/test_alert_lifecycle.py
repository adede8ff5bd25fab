"""The alert a team acts on (issue 33, items 1-3): the nightly explains each new culprit once, a
revert closes an open (even acknowledged) alert as ``fixed`` with no improvement alert of its own,
and an exact change (node count, artifact size) is bisected by compiling only.

The store-level rules first, on the golden run's series; then one replay of a small real compiler
history (a slowdown, its triage, the revert, an exact-only change) through ``perfguard nightly``."""

from __future__ import annotations


def test_nightly_explains_new_culprits_unless_told_not_to() -> None:
    from perfguard.cli import build_parser
    from perfguard.cli.nightly import _explain
    from perfguard.profile.explain import ProfileSettings

    parse = build_parser().parse_args
    assert _explain(parse(["nightly", "s.toml"])) == ProfileSettings()
    assert _explain(parse(["nightly", "s.toml", "--profile-runs", "5"])) == ProfileSettings(runs=5)
    assert _explain(parse(["nightly", "s.toml", "--no-explain"])) is None
