"""Why it got slower: profiles measured apart from timing, diffed per op type, and a named
bottleneck dimension.

* ``nsight``: Nsight Systems / Nsight Compute around a profile worker on ``cuda`` when they are on
  PATH, and their CSV outputs parsed (skipped, with the reason, when they are not);
* ``gpu_diff``: the GPU section of an explanation: kernels before/after, Nsight metrics, skip reasons;
* ``collect``: fresh profiling workers for both sides (the worker's side, the trace reader and its
  GPU events are :mod:`perfguard.workers.profile`, ``trace`` and ``gpu``);
* ``diff``: per (op type, provider) before/after with an interval across workers (pure);
* ``dimension``: the documented rules that label a change compute / memory / scheduling /
  compile-overhead / unclear, with the evidence that triggered them (pure);
* ``explain``: a pair of compiled cases -> profiles -> diff -> dimension, as one document;
* ``perfetto``: both sides as one Chrome / Perfetto trace file.

Only ONNX Runtime artifacts are profiled: on the CPU provider from the ``Node`` events, on ``cuda``
also from the GPU's kernels (ORT's ``Kernel`` events, or nsys), with ncu's throughputs where it runs.
"""
