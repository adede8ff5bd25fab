"""Why it got slower: profiles measured apart from timing, diffed per op type, and a named
bottleneck dimension.

* ``trace``: read ONNX Runtime's profiler file and aggregate it per inference (pure);
* ``collect``: the worker that profiles one artifact, and fresh workers for both sides;
* ``diff``: per (op type, provider) before/after with an interval across workers (pure);
* ``dimension``: the documented rules that label a change compute / memory / scheduling /
  compile-overhead / unclear, with the evidence that triggered them (pure);
* ``explain``: a pair of compiled cases -> profiles -> diff -> dimension, as one document;
* ``perfetto``: both sides as one Chrome / Perfetto trace file.

Only ONNX Runtime artifacts are profiled (CPU here: no GPU profiler path is implemented yet).
"""
