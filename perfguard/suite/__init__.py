"""Suite files: TOML under ``suites/`` loaded into typed, validated objects.

A suite names models, pipelines (ordered pass lists pinned per backend), cases (model x pipeline x
runner), measurement settings and per-case overrides. Every error names the file, the key, what
was found and what was expected, with close valid names for a typo. The format is documented in
docs/reference/suite.md.

``model``
    The frozen specs a suite file becomes (``Suite``, ``CaseSpec``, ``ModelSpec``, ...).
``reader``
    Typed reads out of parsed TOML; every error names the file, the key, what was found and
    what was expected.
``parse``
    ``load_suite`` and ``parse_suite``: one function per table of the file.
``gates``
    The ``[check]`` settings and the per-metric ``[thresholds]``.
"""

from __future__ import annotations

from perfguard.suite.model import (
    CaseSpec,
    CompilerSpec,
    InputSetting,
    InputSettings,
    MeasureSettings,
    ModelSpec,
    PipelineSpec,
    Suite,
    Tolerance,
)
from perfguard.suite.parse import builtin_suite_path, load_suite, parse_suite

__all__ = ["CaseSpec", "CompilerSpec", "InputSetting", "InputSettings", "MeasureSettings", "ModelSpec",
           "PipelineSpec", "Suite", "Tolerance", "builtin_suite_path", "load_suite", "parse_suite"]
