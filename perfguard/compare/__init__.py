"""The compare stage: baseline against candidate, verdicts, the gate.

``check``
    Verdicts per case and metric, adaptive (sequential) sampling, Benjamini-Hochberg within each
    family of metrics, the verdicts document and its exit code.
``baselines``
    The three baselines of ``perfguard check`` (a pipeline, a git ref, a stored file) built on
    one job, ``compare`` of two result files, ``calibrate``, and the environment rule.
"""
