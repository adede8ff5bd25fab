"""perfguard: performance-regression CI for AI compilers."""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__", "quiet_known_warnings"]


def quiet_known_warnings() -> None:
    """Silence the one warning a dependency prints on every import of torch.cuda: the ``pynvml``
    shim (installed for NVML telemetry) warns that it is deprecated. It reached stderr of every
    command that imports torch (the inductor backend, TVM's frontends) and broke the one-line
    error promise. Called by the CLI's and the worker's entry points, never at import."""
    import warnings

    warnings.filterwarnings("ignore", message="The pynvml package is deprecated", category=FutureWarning)
