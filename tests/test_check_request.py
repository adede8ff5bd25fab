"""The typed request of a check (``perfguard.flows.check_request``): the front ends build it, the
flows take no ``argparse.Namespace``. Pure values: no suite is compiled here."""

from __future__ import annotations

import pytest

from perfguard.errors import UserError
from perfguard.flows.check_request import Against, CheckRequest, SamplingOptions
from perfguard.profile.explain import ProfileSettings
from perfguard.suite.gates import CheckSettings


def test_sampling_options_change_only_what_is_given():
    suite = CheckSettings(workers=8, step_workers=4, max_workers=20, alpha=0.05)
    assert SamplingOptions().applied(suite) == suite
    assert SamplingOptions(workers=30).applied(suite) == CheckSettings(30, 4, 30, 0.05)  # the budget follows
    assert SamplingOptions(max_workers=12, measure_identical=True, alpha=0.01).applied(suite) == \
        CheckSettings(8, 4, 12, 0.01, measure_identical=True)
    with pytest.raises(UserError, match=r"^max workers \(4\) must be >= the first-look workers \(8\)$"):
        SamplingOptions(max_workers=4).applied(suite)


def test_counts_are_a_typed_mode_applied_to_the_suite_on_top_of_its_own():
    import dataclasses

    from perfguard.suite import builtin_suite_path, load_suite

    smoke = load_suite(builtin_suite_path("smoke"))
    assert smoke.counts is None and SamplingOptions().counted(smoke) is smoke
    counted = SamplingOptions(counts="instructions").counted(smoke)
    assert counted.counts == "instructions" and counted.cases == smoke.cases
    assert SamplingOptions(counts="cache").counted(counted).counts == "cache"  # the cache simulation too
    cached = dataclasses.replace(smoke, counts="cache")  # [measure] counts = "cache"
    assert SamplingOptions(counts="instructions").counted(cached) is cached


def test_one_baseline_or_the_default_ref():
    assert Against.one_of(base_ref=None, against_pipeline="none", baseline=None) == Against("pipeline", "none")
    assert Against.one_of(base_ref=None, against_pipeline=None, baseline=None, default_ref="HEAD") == \
        Against("base-ref", "HEAD")
    with pytest.raises(UserError, match="at most one baseline"):
        Against.one_of(base_ref="main", against_pipeline=None, baseline="b.json")
    with pytest.raises(UserError, match="give a baseline"):
        Against.one_of(base_ref=None, against_pipeline=None, baseline=None)


def test_a_stored_baseline_cannot_be_explained():
    with pytest.raises(UserError, match="a stored baseline's artifacts are not here"):
        CheckRequest(Against("baseline", "b.json"), CheckSettings(), explain=ProfileSettings())
    assert CheckRequest(Against("base-ref", "main"), CheckSettings(), explain=ProfileSettings()).explain is not None
