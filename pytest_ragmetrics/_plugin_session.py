"""The pytest side of a run that has a ragmetrics session: the per-test recorder registered when the
run first uses the plugin, a golden set's parametrization, the marker's metric names, the end of the
run's JUnit properties and terminal lines, and the warning for a score never compared.

Loaded by :mod:`pytest_ragmetrics.plugin` when the run first needs one of them: a run that never uses
the plugin loads none of it (pytest reads every module of a plugin's package through its own importer,
which costs in proportion to the code loaded).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections.abc import Generator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import _scope
from ._suite import is_worker

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from ._scope import Check
    from ._suite import SuiteRecord
    from .session import RagmetricsSession
    from .specs import MetricCatalog


def start_session(
    config: pytest.Config,
    suite: SuiteRecord,
    rows_key: pytest.StashKey[list[dict[str, Any]]],
    suite_property_key: pytest.StashKey[Callable[[str, object], None]],
) -> RagmetricsSession:
    """The run's ragmetrics session, made and started with the hooks it needs: the built-in ones, the
    end of the run's (:class:`SessionHooks`), and the per-test :class:`Recorder` once the run uses
    the plugin."""
    from . import builtin_hooks
    from .session import RagmetricsSession

    builtin_hooks.register(config.pluginmanager)
    session = RagmetricsSession(config, suite)
    manager = config.pluginmanager
    session.on_activate = lambda: manager.register(Recorder(session, rows_key), "ragmetrics-recorder")
    session.start()
    manager.register(SessionHooks(session, suite_property_key), "ragmetrics-session")
    return session


def parametrize_golden_set(metafunc: pytest.Metafunc, name: object, session: RagmetricsSession) -> None:
    """``@pytest.mark.ragmetrics(samples=PATH)``: one test per sample of the golden set."""
    from .loaders import marker_samples_path

    # Problems are usage errors (exit 4, no traceback), raised once collection is over: raised here,
    # they would be collection errors with a chained traceback.
    problems = session.usage_errors
    where = metafunc.definition.nodeid
    if "rag_sample" not in metafunc.fixturenames:
        problems.append(
            f"{where}: @pytest.mark.ragmetrics(samples=...) needs the test to take the rag_sample fixture"
        )
        return
    if not isinstance(name, (str, os.PathLike)):
        problems.append(
            f"{where}: @pytest.mark.ragmetrics(samples=...) must be the path of a samples file, got {name!r}"
        )
        return
    try:
        path = marker_samples_path(name, Path(str(metafunc.definition.path)), metafunc.config.rootpath)
        session.suite.sources.add(path)  # the golden set as collected, for `report merge` to compare
        samples = session.golden_set(name, path)  # parsed once per run, whichever tests use it
    except ValueError as exc:
        problems.append(f"{where}: {exc}")
        samples = []
    metafunc.parametrize("rag_sample", samples, ids=[s.id or str(i) for i, s in enumerate(samples)])


def check_marker(item: pytest.Item, mark: pytest.Mark) -> None:
    """A marker's arguments, checked once collection is over: a bad one is a usage error (exit 4)."""
    from .errors import ConfigError
    from .settings import check_marker as check

    try:
        check(mark.args, mark.kwargs, _metric_catalog(item.config, mark.kwargs))
    except ConfigError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {exc}") from None


def _metric_catalog(config: pytest.Config, kwargs: Mapping[str, Any]) -> MetricCatalog | None:
    """The metrics a marker's ``metrics=`` may name (asked of the hooks only when it names some)."""
    if "metrics" not in kwargs:
        return None
    from . import builtin_hooks
    from .specs import BUILTIN_CATALOG, MetricCatalog as Catalog, registered_metrics

    builtin_hooks.register(config.pluginmanager)
    registered = registered_metrics(config.hook.pytest_ragmetrics_metrics())
    return BUILTIN_CATALOG.merged(Catalog.of(registered))


def warn_unused(checks: list[Check]) -> None:
    """Warn of each score a test took and never compared with a threshold, where it took it."""
    from .errors import RagMetricsWarning

    for check in checks:
        filename, lineno = check.where or ("<unknown>", 0)
        warnings.warn_explicit(
            RagMetricsWarning(
                f"{check.name} result was never compared with a threshold "
                f"({os.path.basename(filename)}:{lineno}); write e.g. `assert_...(sample) >= 0.8`"
            ),
            RagMetricsWarning,
            filename,
            lineno,
        )


class Recorder:
    """Per-test hooks of a run that uses the plugin (registered when the run first uses it).

    ``rows_key`` is where a test's comparisons wait in its stash for the report of their phase.
    """

    def __init__(self, session: RagmetricsSession, rows_key: pytest.StashKey[list[dict[str, Any]]]) -> None:
        self.session = session
        self.rows_key = rows_key

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report = yield
        if self.session.batch is not None and call.when in ("setup", "call") and not report.skipped:
            self._skip_if_pending(item, call, report)
        stash = item.stash
        if self.rows_key in stash:
            # Plain data on the report travels to the xdist controller with it. Comparisons made in a
            # fixture go with the setup or teardown report of the phase that made them. Handed over,
            # not copied: the test keeps no list of its own to the end of the run.
            report.ragmetrics = stash[self.rows_key]
            del stash[self.rows_key]
        if call.excinfo is not None:  # a phase that passed stopped at no ragmetrics error
            error = self.session.error_of(item, call, report)
            if error is not None:  # the test never got to its comparison: the report says so
                report.ragmetrics_error = error
        return report

    def _skip_if_pending(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> None:
        """``--rag-batch``: a test that needs judgments written to the batch file is skipped, with a
        reason naming the file, as ``pytest.skip`` reports it."""
        scope = _scope.current_test.get()
        reason = self.session.pending_reason(call, scope.checks if scope is not None else ())
        if reason is not None:
            line = item.location[1]
            report.outcome = "skipped"
            report.longrepr = (str(item.path), (line or 0) + 1, f"Skipped: {reason}")

    @pytest.hookimpl(trylast=True)  # after the session has counted a failure towards -x / --maxfail
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Taken off the report, which pytest keeps to the end of the run: the session holds them now.
        rows = report.__dict__.pop("ragmetrics", None)
        error = getattr(report, "ragmetrics_error", None)
        if rows is not None or error is not None or report.outcome == "failed":  # else nothing to take
            self.session.take_comparisons(report, rows, error)


class SessionHooks:
    """Hooks of a run that has a ragmetrics session (registered when it is made): the gates' JUnit
    properties, the xdist workers' output, and the end of the run.

    ``suite_property_key`` is where the ``_ragmetrics_suite_properties`` fixture leaves pytest's
    ``record_testsuite_property``.
    """

    def __init__(
        self,
        session: RagmetricsSession,
        suite_property_key: pytest.StashKey[Callable[[str, object], None]],
    ) -> None:
        self.session = session
        self.suite_property_key = suite_property_key

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        ragmetrics = self.session
        if (ragmetrics.gates or ragmetrics.regression_gates) and session.config.getoption("xmlpath", None):
            session.add_marker(pytest.mark.usefixtures("_ragmetrics_suite_properties"))

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker finished; the controller takes its judge figures and the judgments it used."""
        self.session.worker_finished(getattr(node, "workeroutput", None), error is not None)

    @pytest.hookimpl(tryfirst=True)  # before junitxml and the terminal summary read the exit status
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.session.finish(session)
        record = session.config.stash.get(self.suite_property_key, None)
        if record is not None:
            _record_gate_properties(self.session, record)


def _record_gate_properties(ragmetrics: RagmetricsSession, record: Callable[[str, object], None]) -> None:
    """The gates' and regression gates' outcomes as JUnit XML properties of the test suite."""
    regression = ((ragmetrics.final_report or {}).get("summary") or {}).get("regression_gates") or []
    if ragmetrics.gate_results or regression:
        from .report.junit import gate_properties, regression_gate_properties

        for number, gate in enumerate(ragmetrics.gate_results, start=1):
            for name, value in gate_properties(number, gate):
                record(name, value)
        for number, gate in enumerate(regression, start=1):
            for name, value in regression_gate_properties(number, gate):
                record(name, value)


def terminal_summary(terminalreporter: Any, config: pytest.Config, session: RagmetricsSession) -> None:
    """The report (``--rag-report``) and the session's closing lines, in the terminal."""
    report = session.final_report
    if is_worker(config) or (
        report is None and session.batch_summary is None and session.batch_kept is None
    ):
        return
    if report is not None and session.settings.report:
        from .report.terminal import render_terminal

        render_terminal(
            report,
            _ReporterWriter(terminalreporter),
            verbosity=int(config.getoption("verbose")),  # Config.get_verbosity is pytest 8+
            rootdir=config.rootpath,
        )
    for line, colour in session.summary_lines():
        terminalreporter.write_line(line, **{colour: True})


class _ReporterWriter:
    """Adapts pytest's TerminalReporter (public write_line / write_sep) to the renderer's writer."""

    def __init__(self, reporter: Any) -> None:
        self._reporter = reporter
        # The terminal's width as pytest's own writer measures it (narrower than 40: 80).
        columns = shutil.get_terminal_size(fallback=(80, 24)).columns
        self.fullwidth = columns if columns >= 40 else 80

    def line(self, s: str = "", **markup: bool) -> None:
        self._reporter.write_line(s, **markup)

    def sep(
        self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
    ) -> None:
        self._reporter.write_sep(sepchar, title, **markup)
