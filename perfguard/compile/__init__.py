"""The compile stage: the compiler under test turns a model into an artifact.

``case``
    One case compiled in its own worker process: its key and key hash, hybrid (pass-bisection)
    compiles, the memory probes of the artifact; the ``Side`` (version of the compiler) and the
    ``RunContext`` a job compiles in.
``preflight``
    Everything that can be checked before any work (``perfguard validate``, every job).
``checkout``
    The compiler under test at a git ref: worktrees, build commands, pass paths.
``user_passes``
    User passes (``package.module:function``) imported up front, in a child process.
``cache``
    The content-addressed artifact cache (``--artifact-cache``): a compile done before, by this
    job or another, served with its trace and correctness record instead of compiling again.

The backends that compile (``perfguard.backends``) stay a top-level package: they are the public
plugin API (third-party backends subclass ``perfguard.backends.base.Backend`` and register in the
``perfguard.backends`` entry-point group).
"""
