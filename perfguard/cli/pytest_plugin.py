"""perfguard as a pytest plugin (entry point ``pytest11``): checks written as tests. A front end
like the command line, so it lives beside it.

    def test_resnet_is_not_slower(perfguard):
        perfguard.check("suites/mycompiler.toml", case="resnet/*")

``perfguard.check`` runs ``perfguard check`` in the test: the compiler under test in the working
tree against a git ref (``base_ref``, default ``--perfguard-base-ref`` or ``HEAD``: did my
uncommitted change make anything slower?), or against another pipeline (``against_pipeline``),
or a stored baseline (``baseline``: a result file or ``store:[URL]``). A regression fails the
test with the verdict table in the failure message and the path of the HTML report; an undecided
case fails it only with ``fail_on_unknown=True``. It returns the verdicts document
(``perfguard.compare.verdicts.VerdictsDocument``) for further asserts.

Options: ``--perfguard-base-ref REF`` (the default ref), ``--perfguard-report DIR`` (where each
test's report goes; default: a temporary folder per test). Importing this module costs nothing:
perfguard's measurement stack loads on the first ``check``.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from perfguard.compare.verdicts import VerdictsDocument


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("perfguard", "performance regressions (perfguard)")
    group.addoption("--perfguard-base-ref", metavar="REF", default=None,
                    help="git ref the perfguard fixture's check compares the working tree with (default HEAD)")
    group.addoption("--perfguard-report", metavar="DIR", default=None,
                    help="folder for the perfguard fixture's HTML reports (default: a temporary folder per test)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "perfguard: a performance check (uses the perfguard fixture)")


class PerfguardChecker:
    """What the ``perfguard`` fixture gives a test: :meth:`check`."""

    def __init__(self, base_ref: str | None, report_dir: Path) -> None:
        self.base_ref = base_ref
        self.report_dir = report_dir
        self.documents: list[VerdictsDocument] = []

    def check(self, suite: str | Path, *, case: str | None = None, base_ref: str | None = None,
              against_pipeline: str | None = None, baseline: str | None = None, workers: int | None = None,
              max_workers: int | None = None, fail_on_unknown: bool = False, strict_env: bool = False
              ) -> VerdictsDocument:
        """Run a check and fail the test on a regression (see the module docstring)."""
        from perfguard.cli._bounds import MAX_WORKERS, in_range
        from perfguard.cli._progress import RichProgress
        from perfguard.cli._verdicts import print_verdicts
        from perfguard.cli.report import write_report
        from perfguard.compare.check import exit_code
        from perfguard.errors import UserError
        from perfguard.exit_codes import ExitCode
        from perfguard.flows.check_request import Against, CheckRequest, SamplingOptions, run_check
        from perfguard.suite import load_suite

        try:
            against = Against.one_of(base_ref=base_ref, against_pipeline=against_pipeline, baseline=baseline,
                                     default_ref=self.base_ref or "HEAD")
            loaded = load_suite(suite)
            cases = loaded.select(case)
            options = SamplingOptions(in_range(workers, "workers", 1, MAX_WORKERS),
                                      in_range(max_workers, "max_workers", 1, MAX_WORKERS))
            request = CheckRequest(against, options.applied(loaded.check), strict_env=strict_env)
            progress = RichProgress(quiet=True)
            try:
                document = run_check(loaded, cases, request, progress)
            finally:
                progress.stop()
        except UserError as exc:  # bad input is the test's setup, said in one line
            pytest.fail(f"perfguard: {exc}", pytrace=False)
        self.documents.append(document)
        folder = self.report_dir / f"check-{len(self.documents)}"
        written = write_report([document], str(folder))
        code = exit_code(document, fail_on_unknown)
        if code != ExitCode.OK:
            table = io.StringIO()
            with contextlib.redirect_stdout(table):
                print_verdicts(document)
            what = {ExitCode.REGRESSION: "a performance regression", ExitCode.UNKNOWN: "undecided cases"}.get(
                code, f"perfguard check exit {int(code)}")
            pytest.fail(f"perfguard: {what} ({document.mode.baseline} -> {document.mode.candidate})\n"
                        f"{table.getvalue()}report: {written['html']}", pytrace=False)
        return document


@pytest.fixture
def perfguard(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> PerfguardChecker:
    """A :class:`PerfguardChecker`: ``perfguard.check(SUITE, case=...)`` fails the test on a regression."""
    from perfguard.names import safe_filename

    option = request.config.getoption("perfguard_report")
    name = safe_filename(request.node.name)  # a test id such as test_sum[float32] or test_x[a/b]
    folder = Path(option) / name if option else tmp_path_factory.mktemp(f"perfguard-{name[:30]}")
    return PerfguardChecker(request.config.getoption("perfguard_base_ref"), folder)
