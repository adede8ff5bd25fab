"""Results: what a run leaves behind.

``result``
    The result document, typed (``ResultDocument``, ``CaseEntry``, ``Metrics``, ``Latency``,
    ``Measurement``, ``Trace``...): its format version and history and the one loader (refuses
    newer versions, migrates older ones, validates against the shipped schema).
``explanation``
    The explanation document types (``Explanation``, ``ProfileDiff``, ``Dimension``, ``GpuSection``...):
    why a case changed, as the profile, verdicts and bisect documents hold it (computed in ``profile``).
``documents``
    What every persisted document shares: the JSON reader, schemas, atomic writers, time stamps.
``artifacts``
    Compile here, measure there: artifact folders with a manifest (``perfguard compile``,
    ``perfguard run --artifacts``). Import it as ``perfguard.results.artifacts``: it drives a
    measurement job, which itself writes result documents.
"""

from __future__ import annotations

from perfguard.results.documents import (
    check_writable,
    load_schema,
    read_json,
    schema_errors,
    utc_now,
    write_json_atomic,
    write_text_atomic,
)
from perfguard.results.result import (
    RESULT_VERSION,
    ArtifactInfo,
    CaseEntry,
    CaseError,
    CaseKey,
    CompilerInfo,
    Latency,
    Measurement,
    Metrics,
    ModelInfo,
    ResultDocument,
    SuiteInfo,
    Trace,
    load_result,
    parse_result,
)

__all__ = ["RESULT_VERSION", "ArtifactInfo", "CaseEntry", "CaseError", "CaseKey", "CompilerInfo", "Latency",
           "Measurement", "Metrics", "ModelInfo", "ResultDocument", "SuiteInfo", "Trace", "check_writable",
           "load_result", "parse_result", "load_schema", "read_json", "schema_errors", "utc_now",
           "write_json_atomic", "write_text_atomic"]
