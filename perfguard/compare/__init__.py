"""The compare stage: baseline against candidate, verdicts, the gate.

``check``
    Verdicts per case and metric, adaptive (sequential) sampling, Benjamini-Hochberg within each
    family of metrics, the verdicts document and its exit code.
``documents``
    ``compare`` of two result documents measured apart, and the environment rule.

It receives documents and never measures or opens the store: the flows that do
(``perfguard check`` against a ref, a pipeline or a stored baseline; ``calibrate``) are
:mod:`perfguard.flows.check`.
"""
