"""Results: what a run leaves behind.

``documents``
    The result document: its format version and history, the one loader (refuses newer
    versions, migrates older ones, validates against the shipped schema), the atomic writers,
    latency summaries and time stamps. Its names are re-exported here.
``artifacts``
    Compile here, measure there: artifact folders with a manifest (``perfguard compile``,
    ``perfguard run --artifacts``). Import it as ``perfguard.results.artifacts``: it drives a
    measurement job, which itself writes result documents.
"""

from __future__ import annotations

from perfguard.results.documents import (
    RESULT_VERSION,
    check_writable,
    load_result,
    load_schema,
    schema_errors,
    summarize,
    utc_now,
    write_json_atomic,
    write_text_atomic,
)

__all__ = ["RESULT_VERSION", "check_writable", "load_result", "load_schema", "schema_errors", "summarize",
           "utc_now", "write_json_atomic", "write_text_atomic"]
