"""The process boundary: the typed requests and responses, the worker process that compiles,
measures and profiles in isolation, and the parent's spawning of it (:mod:`.engine`).

It sits below the stages that send requests (compile, measure, profile), so none of them imports
another to reach a worker.
"""
