"""Everything about a suite that can be checked before any work: backends, pipelines, runners,
model files and their inputs, the compiler path, and that user passes import."""

from __future__ import annotations

from perfguard.backends import available_backends, check_case_runner, get_backend
from perfguard.compile.user_passes import UserPassCheck
from perfguard.errors import UserError
from perfguard.models.inputs import input_specs
from perfguard.models.loader import read_model_file
from perfguard.runners import get_runner
from perfguard.suite import CaseSpec, Suite


def check_suite(suite: Suite, cases: list[CaseSpec], *, runners: bool = True) -> None:
    """Everything that can be checked before work: backends, passes, options, runners, files,
    the inputs of model files (every dynamic dimension given), and that user passes import.

    ``runners``: check that this machine can serve each case's runner for its backend (the
    device and ``Backend.check_runner``); False when compiling here to measure elsewhere."""
    start_check_suite(suite, cases, runners=runners).wait()


def start_check_suite(suite: Suite, cases: list[CaseSpec], *, runners: bool = True) -> UserPassCheck:
    """:func:`check_suite` with the import of the user passes started, not waited for: the caller
    waits (``.wait()``, which refuses as ``check_suite`` does) before any compile, and may build
    its models meanwhile. Every other check has been made when this returns."""
    # User passes resolve from the working tree's [compiler] path, imported in a child process so
    # this process's sys.modules stays clean for compiles from other checkouts (check --base-ref).
    # The child starts first: its imports overlap the checks below and the caller's model builds.
    user: dict[str, list[str]] = {}
    for pipeline in {c.pipeline.name: c.pipeline for c in cases}.values():
        if get_backend(pipeline.backend).capabilities.user_passes:
            names = [name for name in pipeline.passes if ":" in name]
            if names:
                user[f"{suite.path}: [pipelines.{pipeline.name}] passes"] = names
    # A model's callable (``[models.NAME] torch``) imports from the same path: checked with them.
    nouns = {}
    for model in {c.model.name: c.model for c in cases}.values():
        if model.torch is not None:
            where = f"{suite.path}: [models.{model.name}] torch"
            user[where], nouns[where] = [model.torch], "model callable"
    pending = UserPassCheck(user, suite.compiler.path, nouns)
    try:
        for case in cases:
            backend = get_backend(case.pipeline.backend)
            backend.check_pipeline(case.pipeline)
            check_model_backend(suite, case)
            if runners:
                check_case_runner(backend, get_runner(case.runner, options=suite.runner_options(case.runner)))
        for model in {c.model.name: c.model for c in cases}.values():
            if model.path is not None:
                proto = read_model_file(model.path, f"{suite.path}: [models.{model.name}] path")
                input_specs(proto, model.input_settings)  # every dynamic dimension given
        if suite.compiler.path is not None and not suite.compiler.path.is_dir():
            raise UserError(f"{suite.path}: [compiler] path: folder not found: {suite.compiler.path}")
    except BaseException:
        pending.close()
        raise
    return pending


def check_model_backend(suite: Suite, case: CaseSpec) -> None:
    """Refuse a PyTorch-callable model on a backend that compiles ONNX models only, in one line
    naming the backends that would compile it (``Capabilities.torch_models``)."""
    if case.model.torch is None or get_backend(case.pipeline.backend).capabilities.torch_models:
        return
    able = []
    for name in available_backends():
        try:
            if get_backend(name).capabilities.torch_models:
                able.append(name)
        except UserError:  # a third-party backend that does not load here
            continue
    only = f"only the {', '.join(able)} backend{'s' if len(able) > 1 else ''} compile{'' if len(able) > 1 else 's'}" \
        if able else "no backend installed here compiles"
    raise UserError(f"{suite.path}: [models.{case.model.name}]: model {case.model.name!r} is a PyTorch callable "
                    f"(torch = {case.model.torch!r}); {only} those, and pipeline {case.pipeline.name!r} is on "
                    f"backend {case.pipeline.backend!r}")
