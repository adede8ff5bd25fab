"""The typed documents at the seams (issue 24): each value perfguard passes between stages is a
frozen dataclass whose ``from_json(to_json())`` is itself, read from the golden documents where
they are persisted; one ``document_kind``, one versioned loader, one regression rule, one
``levels``; and the budget of untyped JSON objects in ``perfguard/``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from perfguard.bisect.document import VerdictSummary
from perfguard.bisect.search import SearchCulprit, SearchProbe, SearchResult, SequenceBisector
from perfguard.bisect.state import ProbeEntry, ProbeRecord, StateFile
from perfguard.compare.check import Sampling
from perfguard.errors import StorageError
from perfguard.results.documents import current_format, document_kind
from perfguard.stats.adaptive import Look
from perfguard.stats.verdict import is_regression

ROOT = Path(__file__).resolve().parent.parent
GOLDEN = ROOT / "tests" / "golden"


def _golden(name: str) -> dict:
    return json.loads((GOLDEN / "v1" / name).read_text())


# --- round trips ------------------------------------------------------------------------------------

def test_a_look_and_a_sampling_round_trip_and_read_a_golden_verdicts_history():
    look = Look(2, 12, 1)
    assert Look.from_json(look.to_json()) == look
    settings = _golden("verdicts-compare.json")["settings"]
    sampling = Sampling.from_json(settings)
    assert sampling.history and all(isinstance(h, Look) for h in sampling.history)
    assert Sampling.from_json(sampling.to_json()) == sampling
    # what the check writes of its sampling is what it read: nothing dropped, nothing added
    written = sampling.to_json()
    assert {k: settings[k] for k in written} == written


def test_the_looks_of_a_golden_state_file_are_typed_and_written_back_as_read():
    data = _golden("bisect-state.json")
    state = StateFile.from_json(data)
    looks = [look for record in state.probes.values() for look in record.looks]
    assert looks and all(isinstance(look, Look) for look in looks)
    assert state.to_json() == data


def _summary(ratio: float, decision: str = "different", direction: str = "regression") -> VerdictSummary:
    return VerdictSummary("a", "b", decision, direction, ratio, ratio - 0.01, ratio + 0.01, 0.001, 0.02, 8, "")


def test_search_results_round_trip():
    record = ProbeRecord("ok", verdicts={"v0->v1": _summary(1.2)}, entries={"v1": ProbeEntry(median_s=0.01)},
                         looks=[Look(1, 8, 0)])
    probe = SearchProbe("pair", (0, 1), record, uncertain=True)
    culprit = SearchCulprit(1, None, False, _summary(1.2), True, {"v1": ProbeEntry(median_s=0.01, node_count=3)})
    result = SearchResult([culprit, SearchCulprit(4, (2, 4), True)], [probe], {3})
    assert SearchProbe.from_json(probe.to_json()) == probe
    assert SearchCulprit.from_json(culprit.to_json()) == culprit
    assert SearchResult.from_json(json.loads(json.dumps(result.to_json()))) == result


def test_the_search_takes_typed_probe_records_and_returns_typed_culprits():
    def probe(positions, comparisons):
        return ProbeRecord("ok", verdicts={f"v{a}->v{b}": _summary(1.2) if a < 3 <= b
                                           else _summary(1.0, "same", "none") for a, b in comparisons})

    bisector = SequenceBisector(4, probe, lambda i: f"v{i}")
    assert bisector.confirm_endpoints() is not None
    result = bisector.run()
    assert [(c.position, c.confirmed) for c in result.culprits] == [(3, True)]
    assert isinstance(result.culprits[0].confirmation, VerdictSummary)


# --- one of each ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "kind"), [
    ("result-run.json", "result"), ("verdicts-compare.json", "verdicts"), ("bisect-passes.json", "bisect"),
    ("bisect-state.json", "bisect-state"), ("manifest.json", "manifest")])
def test_one_document_kind_tells_every_golden_document_apart(name, kind):
    assert document_kind(_golden(name)) == kind


def test_a_manifest_is_not_taken_for_a_result_by_the_report():
    from perfguard.report import parse_document

    with pytest.raises(StorageError, match="not a perfguard result, verdicts, bisect or tune document"):
        parse_document(_golden("manifest.json"), "manifest.json")


def test_the_versioned_loader_refuses_newer_and_unknown_older_versions_in_one_line():
    migrated = current_format({"version": 1, "x": 1}, "f.json", kind="thing", title="perfguard thing", version=2,
                              migrations={1: lambda d: {**d, "version": 2, "y": 2}})
    assert migrated == {"version": 2, "x": 1, "y": 2}
    with pytest.raises(StorageError, match=r"f.json: thing format version 3 is newer than this perfguard reads "
                                           r"\(2\); upgrade perfguard, or delete it$"):
        current_format({"version": 3}, "f.json", kind="thing", title="perfguard thing", version=2, migrations={},
                       newer_hint=", or delete it")
    for data in ({"version": 0}, {"version": True}, {"x": 1}, [1]):
        with pytest.raises(StorageError, match="f.json: not a perfguard thing") as caught:
            current_format(data, "f.json", kind="thing", title="perfguard thing", version=2, migrations={})
        assert "\n" not in str(caught.value)


def test_a_newer_tune_document_goes_through_the_one_loader():
    from perfguard.tune.document import tune_from_json

    with pytest.raises(StorageError, match="tune format version 99 is newer than this perfguard reads"):
        tune_from_json({"kind": "tune", "version": 99}, "t.json")


def test_one_regression_rule_for_every_form_of_a_verdict():
    assert is_regression("different", "regression")
    assert not is_regression("different", "improvement") and not is_regression("unknown", "regression")
    assert _summary(1.2).is_regression and not _summary(1.0, "same", "none").is_regression
    sources = "\n".join(p.read_text() for p in (ROOT / "perfguard").rglob("*.py"))
    assert len(re.findall(r'== "different" and \w+(?:\.\w+)? == "regression"', sources)) == 1


def test_one_levels_for_the_site_and_the_history_command():
    import perfguard.cli.history as cli_history

    assert not hasattr(cli_history, "levels")
    sources = "\n".join(p.read_text() for p in (ROOT / "perfguard").rglob("*.py"))
    assert len(re.findall(r"^def _?levels\(", sources, re.M)) == 1


# --- the budget -------------------------------------------------------------------------------------

#: ``dict[str, Any]`` is left only where another tool's JSON is read or written (asv,
#: pytest-benchmark, ONNX Runtime and Chrome traces, IREE's tools, JSON Schema), where a suite's
#: TOML table is read before it is checked, and for keyword bags. Perfguard's own JSON is
#: ``JsonDict`` (no ``Any``), a free-form part of it too (fingerprint, telemetry, a backend's settings).
MAX_UNTYPED = 18

#: ``JsonObject`` was ``dict[str, Any]`` by another name; issue 36 removed it: it may not come back.
MAX_JSON_OBJECT = 0


def _count(pattern: str) -> int:
    return sum(len(re.findall(pattern, p.read_text())) for p in (ROOT / "perfguard").rglob("*.py"))


def test_untyped_json_objects_stay_within_the_budget():
    untyped = _count(r"dict\[str, Any\]")
    assert untyped <= MAX_UNTYPED, f"{untyped} `dict[str, Any]` in perfguard/ (budget {MAX_UNTYPED})"
    aliased = _count(r"\bJsonObject\b")
    assert aliased <= MAX_JSON_OBJECT, f"{aliased} `JsonObject` in perfguard/ (budget {MAX_JSON_OBJECT})"
