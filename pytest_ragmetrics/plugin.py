"""The pytest plugin (entry point ``ragmetrics``): options, marker, fixtures and report hooks.

Kept thin and cheap to import: the engine, the judge and the report renderers load inside the hooks
that need them, so a suite that never judges anything pays next to nothing for the plugin.
Disable it with ``-p no:ragmetrics``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from . import _scope  # stdlib only: the test scope is set around every test

if TYPE_CHECKING:
    from .assertions import ScoreCheck
    from .baseline import RegressionGate
    from .calibration.check import Floor
    from .calibration.labels import LabelledItem
    from .engine import Evaluator, LoopRunner
    from .gates import Gate
    from .judge.budget import CallBudget
    from .judge.stats import JudgeStats
    from .prefetch import Prefetcher
    from .settings import Settings
    from .specs import MetricCatalog

_MARKER_HELP = (
    "ragmetrics(samples=PATH, method=METHOD, **settings): per-test ragmetrics settings, e.g. "
    "judge_model='gpt-4o'; samples=PATH parametrizes the rag_sample fixture with a golden set"
)
_MARKER_KEYS_EXTRA = ("samples", "method")
#: Settings of the run as a whole (reports, gates): a marker or ragmetrics_config cannot change them.
RUN_WIDE = frozenset(
    {
        "report",
        "report_json",
        "report_md",
        "report_html",
        "github_summary",
        "gates",
        "baseline",
        "save_baseline",
        "regression_gates",
        "judge_check",
        "judge_agreement",
        "max_judge_calls",
    }
)


class RunState:
    """Per-run state, kept in ``config.stash``; registered as a plugin for its session's hooks.

    A plain class rather than a dataclass: it is built by every run with the plugin installed.
    """

    def __init__(
        self,
        config: pytest.Config,
        settings: Settings | None,
        gates: list[Gate],
        regression_gates: list[RegressionGate] | None = None,
        baseline: dict[str, Any] | None = None,
    ) -> None:
        self.config = config
        self._settings = settings
        self.gates = gates
        self.rows: list[dict[str, Any]] = []
        self.evaluators: dict[Settings, Evaluator] = {}
        self._last_evaluator: tuple[Settings | None, Evaluator | None] = (None, None)
        self.runner: LoopRunner | None = None
        self._stats: JudgeStats | None = None
        #: The run's judge call budget (``max_judge_calls``), shared by its xdist workers; None: no cap.
        self.budget: CallBudget | None = None
        self.worker_stats: list[dict[str, Any]] = []
        self.used_keys: set[str] = set()
        #: Keys held by the judgment store(s) this run used (None: no store); unused = these - used_keys.
        self.store_keys: set[str] | None = None
        self.deselected = False
        #: An xdist worker went down with an error: the judgments it used never reached this process.
        self.worker_crashed = False
        #: Tests (and modules) skipped: they never reached their comparisons.
        self.skipped = 0
        #: Set at the end: the store entries this run did not use, when it covered the whole suite
        #: (see ``_run.record_for_prune``); None otherwise.
        self.unused_store_entries: list[str] | None = None
        self.gate_results: list[dict[str, Any]] = []
        self.regression_gates: list[RegressionGate] = regression_gates or []
        #: The baseline report this run is compared with (controller only).
        self.baseline = baseline
        #: Tests stopped by a ragmetrics error (a judgment not recorded, the judge unavailable...).
        self.errors: list[dict[str, Any]] = []
        self.configured = False
        self.final_report: dict[str, Any] | None = None
        self.prefetcher: Prefetcher | None = None
        #: The collected tests, once collection is over (the prefetcher's order), and their session.
        self.items: Sequence[pytest.Item] | None = None
        self.session: pytest.Session | None = None
        #: The per-test recording hooks are registered: the run uses the plugin.
        self.active = False
        #: Usage errors found while generating tests, raised together once collection is over.
        self.usage_errors: list[str] = []
        #: The judge check: its labelled items (None: not configured), floors, and outcome.
        self.labels: list[LabelledItem] | None = None
        self.floors: list[Floor] = []
        self.judge_check: dict[str, Any] | None = None
        #: What every judgment the tests used decided, by cache key: (kind, answer classes).
        self.answer_classes: dict[str, tuple[str, tuple[str, ...]]] = {}
        #: Whether anything reads the comparisons' verdicts (see :meth:`verdicts_read`); None: not asked yet.
        self._verdicts_read: bool | None = None
        #: Whether a conftest, module, class or plugin overrides ``ragmetrics_config``; None: not asked yet.
        self._config_overridden: bool | None = None

    def release(self) -> None:
        """Drop what the run kept for its report (results, answers, evaluators and their answer
        maps): the run is over, and pytest's last garbage collections need not walk through it."""
        self.rows = []
        self.final_report = None
        self.answer_classes = {}
        self.evaluators = {}
        self._last_evaluator = (None, None)
        self.used_keys = set()
        self.store_keys = None
        self.prefetcher = None
        self.items = None

    def __dir__(self) -> list[str]:
        # pytest < 8 reads every attribute of a registered plugin while looking for fixtures, which
        # would run the lazy properties below and import what they put off; only hooks need be seen.
        return [name for name in super().__dir__() if name.startswith("pytest_")]

    @property
    def settings(self) -> Settings:
        """The run's settings; built-in defaults, resolved on first use, when nothing was configured."""
        if self._settings is None:
            from .settings import resolve

            self._settings = resolve()
        return self._settings

    @settings.setter
    def settings(self, settings: Settings) -> None:
        self._settings = settings

    @property
    def stats(self) -> JudgeStats:
        if self._stats is None:
            from .judge.stats import JudgeStats

            self._stats = JudgeStats(budget=self.budget)
        return self._stats

    def default_cache_dir(self) -> str:
        cache = getattr(self.config, "cache", None)
        if cache is not None:
            return str(cache.mkdir("ragmetrics"))
        return str(self.config.rootpath / ".ragmetrics_cache")

    # -- hooks of this run: the state is registered as a plugin for its session ------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Once per skipped test (in setup or call). An xfail test is not counted: replayed, it stops
        # where it stopped now, and needs the judgments it used now.
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped += 1

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.skipped:  # a module skipped as a whole (importorskip, allow_module_level)
            self.skipped += 1

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        if items:
            self.deselected = True  # a partial run: its used judgments say nothing about the store

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        """xdist: a worker finished; take its judge figures and the judgments it used."""
        if error is not None:
            self.worker_crashed = True
        data = (getattr(node, "workeroutput", None) or {}).get("ragmetrics")
        if data:
            self.deselected = self.deselected or bool(data.get("deselected"))
            self.worker_stats.append(data["stats"])
            self.used_keys.update(data["used_keys"])
            for key, (kind, classes) in (data.get("answer_classes") or {}).items():
                self.answer_classes[key] = (kind, tuple(classes))
            if data.get("store_keys") is not None:
                self.add_store_keys(data["store_keys"])

    def add_store_keys(self, keys: Any) -> None:
        self.store_keys = (self.store_keys or set()) | set(keys)

    def evaluator(self, settings: Settings) -> Evaluator:
        last_settings, evaluator = self._last_evaluator
        if settings is not last_settings:  # nearly every test has the last one's: no hash of each field
            evaluator = self.evaluators.get(settings)
        if evaluator is None:
            from .engine import Evaluator, LoopRunner

            if self.runner is None:
                progress = _progress(self)
                self.runner = LoopRunner(
                    on_wait=progress.waiting if progress else None,
                    on_wait_end=progress.done if progress else None,
                )
            evaluator = Evaluator(
                settings,
                hook=self.config.hook,
                stats=self.stats,
                runner=self.runner,
                default_cache_dir=self.default_cache_dir(),
            )
            self.evaluators[settings] = evaluator
            self.activate()
            evaluator.ahead = self.prefetcher
        self._last_evaluator = (settings, evaluator)
        return evaluator

    def activate(self) -> None:
        """The run uses the plugin: register the per-test hooks that record comparisons and, once
        the tests are collected, start judging ahead.

        Until then a test costs the plugin one cheap wrapper: a suite that never judges anything
        does not notice it.
        """
        if not self.active:
            self.active = True
            self.config.pluginmanager.register(_Recorder(self), "ragmetrics-recorder")
        if self.prefetcher is None and self.items is not None:
            from .prefetch import Prefetcher

            self.prefetcher = Prefetcher(self.settings, self.evaluator, active=not _is_worker(self.config))
            self.prefetcher.collected(self.items)
            for evaluator in self.evaluators.values():
                evaluator.ahead = self.prefetcher

    def results_read(self) -> bool:
        """Whether the report's comparisons are read: a report shown or written, a baseline compared
        with, or a ``pytest_ragmetrics_report`` hook."""
        from .report.build import report_wanted

        return bool(
            report_wanted(self.settings)
            or self.baseline is not None
            or self.config.hook.pytest_ragmetrics_report.get_hookimpls()
        )

    def verdicts_read(self) -> bool:
        """Whether a comparison keeps its samples' verdicts: when its report's comparisons are read
        (:meth:`results_read`, or a baseline named), pytest-html shows scores, or an xdist worker sends
        it (the controller decides what it reads). Otherwise it keeps each sample's score and key, all
        the summary and the gates use: turning every verdict into JSON and holding it to the end of
        the run would cost a warm run nearly as much as serving the scores.

        Decided at the first comparison, once every conftest is loaded, for the whole run.
        """
        if self._verdicts_read is None:
            self._verdicts_read = bool(
                _is_worker(self.config)
                or self.settings.baseline
                or self.config.pluginmanager.has_plugin("ragmetrics-pytest-html")
                or self.results_read()
            )
        return self._verdicts_read

    def config_overridden(self, session: pytest.Session) -> bool:
        """Whether ``ragmetrics_config`` is defined anywhere but in this plugin (a conftest, module,
        class or another plugin): only then can a test that does not ask for it get anything but
        ``{}``. Asked once the tests are running, when every definition has been collected."""
        if self._config_overridden is None:
            definitions = getattr(getattr(session, "_fixturemanager", None), "_arg2fixturedefs", None)
            if not isinstance(definitions, dict):
                self._config_overridden = True  # a pytest that keeps them elsewhere: ask for the fixture
            else:
                self._config_overridden = len(definitions.get("ragmetrics_config") or ()) != 1
        return self._config_overridden

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.items = session.items
        self.session = session
        if self.evaluators or any(_uses_marker(item) for item in session.items):
            self.activate()


class _Recorder:
    """Per-test hooks of a run that uses the plugin (registered by :meth:`RunState.activate`)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, Any, Any]:
        report = yield
        rows = item.stash.get(_rows_key, None)
        if rows:
            # Plain data on the report travels to the xdist controller with it. Comparisons made in a
            # fixture go with the setup or teardown report of the phase that made them.
            report.ragmetrics = list(rows)
            rows.clear()
        if call.excinfo is not None:
            from .errors import RagMetricsError

            if call.excinfo.errisinstance(RagMetricsError):
                # The test never got to its comparison: the report says so instead of staying silent.
                message = str(call.excinfo.value).strip().splitlines()
                report.ragmetrics_error = {
                    "nodeid": item.nodeid,
                    "when": call.when,
                    "error": call.excinfo.type.__name__,
                    "message": message[0] if message else "",
                    "xfail": hasattr(report, "wasxfail"),
                }
        return report

    @pytest.hookimpl(trylast=True)  # after the session has counted a failure towards -x / --maxfail
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        state = self.state
        session, prefetcher = state.session, state.prefetcher
        stopping = session is not None and (session.shouldfail or session.shouldstop)
        if prefetcher is not None and report.failed and stopping:
            # As soon as the run is known to stop, not once the failed test is torn down: the
            # tests after it are judged ahead meanwhile.
            prefetcher.stop()
        # Taken off the report, which pytest keeps to the end of the run: the run state holds them now.
        rows = report.__dict__.pop("ragmetrics", None)
        if rows:
            from ._run import counts

            if not counts(report):
                return  # an attempt a rerun plugin discarded: only the final attempt counts
            # Comparisons in an xfail test (a deliberately broken retriever, say) are reported but
            # kept out of aggregates and gates.
            xfail = hasattr(report, "wasxfail")
            for row in rows:  # the report gave them up: marked in place, not copied
                row["xfail"] = xfail
            state.rows.extend(rows)
        error = getattr(report, "ragmetrics_error", None)
        if error:
            state.errors.append(error)


state_key = pytest.StashKey[RunState]()
_rows_key = pytest.StashKey[list[dict[str, Any]]]()
_numbers_key = pytest.StashKey[int]()


def _state(config: pytest.Config) -> RunState:
    return config.stash[state_key]


# --- options ---------------------------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    from .options import OPTIONS

    group = parser.getgroup("ragmetrics", "ragmetrics: retrieval metrics judged by an LLM")
    for option in OPTIONS:
        if option.cli:
            kwargs: dict[str, Any] = {"dest": "rag_" + option.name, "default": None, "help": option.help}
            if option.flag:
                kwargs["action"] = "store_const"
                kwargs["const"] = True
            else:
                kwargs["metavar"] = option.metavar
            group.addoption(option.cli_name, **kwargs)
        if option.repeat:
            group.addoption(
                option.repeat,
                dest="rag_" + option.name,
                action="append",
                default=None,
                metavar=option.metavar,
                help=f"{option.help}; replaces {option.ini_name}",
            )
        parser.addini(
            option.ini_name,
            option.help + f" (env {option.env_name})",
            type=_ini_type(option.ini_type),  # type: ignore[arg-type]
            default=None,
        )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


#: pytest parses (and --help shows) "int" and "float" ini keys from 8.4 on; before, numbers are strings.
_NUMERIC_INI = getattr(pytest, "version_tuple", (0,)) >= (8, 4)


_INI_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "linelist": "lines"}


def _ini_type(kind: str | None) -> str:
    return kind if kind and (_NUMERIC_INI or kind not in ("int", "float")) else "string"


def _ini_values(config: pytest.Config) -> dict[str, Any]:
    from .options import OPTIONS

    values: dict[str, Any] = {}
    for option in OPTIONS:
        try:
            # Registered with default None, so an unset key reads as None (a set `false` stays False);
            # pytest < 8 returns [] for it instead.
            value = config.getini(option.ini_name)
        except (TypeError, ValueError, pytest.UsageError) as exc:  # pytest's own parsing of the ini value
            expected = _INI_WORDS.get(_ini_type(option.ini_type), "text")
            raise pytest.UsageError(f"ragmetrics: {option.ini_name} must be {expected} ({exc})") from None
        if value is not None and value != []:
            values[option.name] = value
    return values


def _cli_values(config: pytest.Config) -> dict[str, Any]:
    from .options import OPTIONS

    return {o.name: config.getoption("rag_" + o.name) for o in OPTIONS if o.cli or o.repeat}


def _absolute(settings: Settings, root: Path) -> Settings:
    # Paths in configuration are relative to the rootdir (where the ini file is), wherever pytest runs.
    changes = {}
    for name in ("cache_dir", "store_dir", "baseline", "save_baseline", "judge_check"):
        value = getattr(settings, name)
        if value and not os.path.isabs(value):
            changes[name] = str(root / value)
    return settings.replace(**changes) if changes else settings


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    from . import builtin_hooks

    config.addinivalue_line("markers", _MARKER_HELP)
    if not config.pluginmanager.is_registered(builtin_hooks):
        config.pluginmanager.register(builtin_hooks, "ragmetrics-builtins")
    ini, cli = _ini_values(config), _cli_values(config)
    state = RunState(config, None, [])
    state.configured = bool(
        any(v is not None for v in cli.values())
        or ini
        or any(k.startswith("RAGMETRICS_") for k in os.environ)
    )
    if state.configured:  # else every setting has its default, resolved on first use
        _configure_settings(state, ini, cli)
    config.stash[state_key] = state
    config.pluginmanager.register(state, "ragmetrics-run")
    if config.pluginmanager.has_plugin("dsession"):  # the xdist controller: workers report progress
        from .progress import ControllerProgress

        config.pluginmanager.register(ControllerProgress(config), "ragmetrics-progress")
        state.activate()  # the workers' reports carry the comparisons
    writes_pytest_html = config.pluginmanager.hasplugin("html") and config.getoption("htmlpath", None)
    if writes_pytest_html and not _is_worker(config):
        from .pytest_html_scores import PytestHtmlScores

        config.pluginmanager.register(PytestHtmlScores(), "ragmetrics-pytest-html")
    if state.configured and state.settings.max_judge_calls is not None:
        _share_call_budget(state)
    _scope.session_evaluator = lambda: state.evaluator(state.settings)
    _scope.pytest_sessions += 1
    config.add_cleanup(_leave_session)


#: xdist ``workerinput`` key naming the file of the run's judge call budget.
BUDGET_INPUT_KEY = "ragmetrics_call_budget"


class _BudgetForWorkers:
    """Hands every xdist worker the file of the run's judge call budget."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[BUDGET_INPUT_KEY] = self.path


def _share_call_budget(state: RunState) -> None:
    """The run's judge call budget: a file made here, before any worker starts, or the worker's."""
    from .judge.budget import CallBudget

    config, cap = state.config, state.settings.max_judge_calls
    assert cap is not None
    workerinput = getattr(config, "workerinput", None)
    if workerinput is not None:
        state.budget = CallBudget(cap, workerinput.get(BUDGET_INPUT_KEY))
        return
    import shutil
    import tempfile

    directory = tempfile.mkdtemp(prefix="ragmetrics-calls-")
    budget = state.budget = CallBudget.create(cap, os.path.join(directory, "calls.sqlite"))

    def remove() -> None:
        budget.close()
        shutil.rmtree(directory, ignore_errors=True)

    config.add_cleanup(remove)
    if config.pluginmanager.has_plugin("dsession"):
        config.pluginmanager.register(_BudgetForWorkers(str(budget.path)), "ragmetrics-call-budget")


def _configure_settings(state: RunState, ini: dict[str, Any], cli: dict[str, Any]) -> None:
    """Resolve the settings given in the ini file, the environment or on the command line; read the
    gates, the baseline and the labelled set now, so that a bad one is a usage error (exit 4)."""
    from .errors import ConfigError
    from .settings import advice, resolve

    config = state.config
    try:
        settings = _absolute(resolve(ini=ini, env=os.environ, cli=cli), config.rootpath)
        state.settings = settings
        state.gates = _parse_gates(config, settings.gates) if settings.gates else []
        state.regression_gates = _parse_regression_gates(config, settings.regression_gates)
        # The comparison is made once, by the process that writes the report (never by xdist workers).
        state.baseline = _load_baseline(settings) if not _is_worker(config) else None
    except ConfigError as exc:
        raise pytest.UsageError(f"ragmetrics: {exc}") from None
    if not _is_worker(config):
        _configure_judge_check(state)
    for note in advice(settings):
        from .judge.cache import RagMetricsWarning

        config.issue_config_time_warning(RagMetricsWarning(note), stacklevel=2)
    if settings.judge_provider == "azure" and settings.cache != "replay":
        from .judge.openai_judge import check_azure_settings
        from .settings import how_to_set

        try:  # every test would fail on it: stop before the first one
            check_azure_settings(
                settings.judge_base_url, how_to_set=lambda name, value: how_to_set(name, value, True)
            )
        except ConfigError as exc:
            raise pytest.UsageError(f"ragmetrics: {exc}") from None


def _leave_session() -> None:
    from . import _scope

    _scope.pytest_sessions -= 1


def _configure_judge_check(state: RunState) -> None:
    """Read the labelled set and the agreement floors now, so a bad one is a usage error (exit 4)."""
    s = state.settings
    if not (s.judge_check or s.judge_agreement):
        return
    from .calibration.check import parse_floors
    from .calibration.labels import load_labels
    from .errors import ConfigError

    if not s.judge_check:
        raise pytest.UsageError(
            "ragmetrics: rag_judge_agreement floors need a labelled set to measure the judge against: "
            "set rag_judge_check (or --rag-judge-check=PATH)"
        )
    try:
        state.floors = parse_floors(s.judge_agreement)
        state.labels = load_labels(s.judge_check)
    except (ConfigError, ValueError) as exc:
        raise pytest.UsageError(f"ragmetrics: judge check: {exc}") from None
    except OSError as exc:
        raise pytest.UsageError(f"ragmetrics: judge check: cannot read the labelled set: {exc}") from None


def pytest_unconfigure(config: pytest.Config) -> None:
    from . import _scope

    _scope.session_evaluator = None
    state = config.stash.get(state_key, None)
    if state is not None:
        for name in ("ragmetrics-recorder", "ragmetrics-run"):
            plugin = config.pluginmanager.get_plugin(name)
            if plugin is not None:
                config.pluginmanager.unregister(plugin)
        state.release()


def _parse_gates(config: pytest.Config, lines: tuple[str, ...]) -> list[Gate]:
    from .gates import parse_gates

    return parse_gates(lines, _catalog(config, lines))


def _parse_regression_gates(config: pytest.Config, lines: tuple[str, ...]) -> list[RegressionGate]:
    if not lines:
        return []
    from .baseline import parse_regression_gates

    return parse_regression_gates(lines, _catalog(config, lines))


def _load_baseline(settings: Settings) -> dict[str, Any] | None:
    if settings.regression_gates and not settings.baseline:
        from .errors import ConfigError

        raise ConfigError(
            "regression gates need a baseline to compare with: set --rag-baseline=PATH (ini rag_baseline, "
            "env RAGMETRICS_BASELINE) to a report saved with --rag-save-baseline"
        )
    if not settings.baseline:
        return None
    baseline = Path(settings.baseline)
    if settings.save_baseline and not baseline.exists() and Path(settings.save_baseline) == baseline:
        return None  # the first run of a new baseline: nothing to compare with yet, this run saves it
    from .baseline import load_report

    return load_report(settings.baseline)


def _catalog(config: pytest.Config, lines: tuple[str, ...]) -> MetricCatalog:
    """The metrics gate-like ``lines`` may name; the hooks are asked only when a line names a custom one."""
    from .specs import BUILTIN_CATALOG, MetricCatalog, subject_names

    if subject_names(lines) <= BUILTIN_CATALOG.methods.keys():
        return BUILTIN_CATALOG
    registered = [m for batch in config.hook.pytest_ragmetrics_metrics() for m in batch or ()]
    return BUILTIN_CATALOG.merged(MetricCatalog.of(registered))


def pytest_report_header(config: pytest.Config) -> str | None:
    state = config.stash.get(state_key, None)
    if state is None or not state.configured:  # --rag-report is configuring too
        return None
    from .report.terminal import header_line

    s = state.settings
    return header_line(
        {
            "model": s.judge_model,
            "cache_mode": s.cache,
            "cache_dir": s.cache_dir or state.default_cache_dir(),
            "store_dir": s.store_dir,
            "response_format": s.response_format,
        },
        config.rootpath,
    )


# --- marker, fixtures ----------------------------------------------------------------------------


def _setting_changes(given: dict[str, Any]) -> dict[str, Any]:
    """Marker or ragmetrics_config arguments as setting changes: ``method`` is the relevance method,
    ``samples`` is not a setting (it parametrizes ``rag_sample``)."""
    changes = {k: v for k, v in given.items() if k != "samples"}
    if "method" in changes:
        changes["relevance_method"] = changes.pop("method")
    return changes


def _marker_settings(item: pytest.Item) -> dict[str, Any]:
    given: dict[str, Any] = {}
    for mark in reversed(list(item.iter_markers("ragmetrics"))):  # closest marker wins
        given.update(mark.kwargs)
    return _setting_changes(given)


def _validate_marker(mark: pytest.Mark, where: str) -> None:
    from .errors import ConfigError
    from .settings import OPTIONS_BY_NAME, resolve

    if mark.args:
        raise pytest.UsageError(
            f"{where}: @pytest.mark.ragmetrics takes keyword arguments only, got {mark.args!r}"
        )
    run_wide = sorted(set(mark.kwargs) & RUN_WIDE)
    if run_wide:
        raise pytest.UsageError(
            f"{where}: @pytest.mark.ragmetrics: {', '.join(run_wide)} applies to the whole run; "
            "set it on the command line or in the ini file"
        )
    unknown = sorted(set(mark.kwargs) - set(OPTIONS_BY_NAME) - set(_MARKER_KEYS_EXTRA))
    if unknown:
        per_test = sorted(set(OPTIONS_BY_NAME) - RUN_WIDE)
        raise pytest.UsageError(
            f"{where}: unknown @pytest.mark.ragmetrics argument(s) {', '.join(unknown)}; use samples, method "
            f"or a setting name: {', '.join(per_test)}"
        )
    try:
        resolve(overrides=_setting_changes(dict(mark.kwargs)))
    except ConfigError as exc:
        raise pytest.UsageError(f"{where}: @pytest.mark.ragmetrics: {exc}") from None


def _uses_marker(node: pytest.Item | pytest.Collector | Any) -> bool:
    """The node or one of its parents carries the ragmetrics marker.

    A node's keywords hold its markers' names and look up its parents': a dict lookup per level,
    cheaper than walking every marker of the chain for tests that have none.
    """
    return "ragmetrics" in node.keywords and node.get_closest_marker("ragmetrics") is not None


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if not _uses_marker(metafunc.definition):
        return
    marks = list(metafunc.definition.iter_markers("ragmetrics"))
    where = metafunc.definition.nodeid
    samples_path = next((m.kwargs["samples"] for m in marks if "samples" in m.kwargs), None)
    if samples_path is None:
        return
    # Problems are usage errors (exit 4, no traceback), raised once collection is over: raised here,
    # they would be collection errors with a chained traceback.
    problems = _state(metafunc.config).usage_errors
    if "rag_sample" not in metafunc.fixturenames:
        problems.append(
            f"{where}: @pytest.mark.ragmetrics(samples=...) needs the test to take the rag_sample fixture"
        )
        return
    from .loaders import load_samples

    path = Path(samples_path)
    if not path.is_absolute():
        here = Path(str(metafunc.definition.path)).parent / path
        path = here if here.exists() else metafunc.config.rootpath / path
    try:
        samples = load_samples(path)
    except FileNotFoundError:
        problems.append(f"{where}: @pytest.mark.ragmetrics(samples={samples_path!r}): no such file: {path}")
        samples = []
    except (OSError, ValueError) as exc:
        problems.append(f"{where}: @pytest.mark.ragmetrics(samples={samples_path!r}): {exc}")
        samples = []
    metafunc.parametrize("rag_sample", samples, ids=[s.id or str(i) for i, s in enumerate(samples)])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Validated here, not in pytest_generate_tests, so a bad argument is a usage error (exit 4)
    # rather than a collection error with a traceback.
    problems = _state(config).usage_errors
    if problems:
        raise pytest.UsageError("\n".join(problems))
    seen: set[int] = set()
    for item in items:
        if "ragmetrics" not in item.keywords:
            continue
        for mark in item.iter_markers("ragmetrics"):
            if id(mark) not in seen:
                seen.add(id(mark))
                _validate_marker(mark, item.nodeid)


@pytest.fixture
def ragmetrics_config() -> dict[str, Any]:
    """Settings for the ragmetrics tests in scope; override in a conftest.py or module (like vcr_config)."""
    return {}


@pytest.fixture
def rag_evaluator(request: pytest.FixtureRequest) -> Evaluator:
    """The evaluator configured for this test (ini/env/CLI, ragmetrics_config fixture, marker)."""
    return _evaluator_for(request.node)


@pytest.fixture
def rag_sample(request: pytest.FixtureRequest) -> Any:
    """One sample of the golden set named by @pytest.mark.ragmetrics(samples=PATH); tests are parametrized."""
    if not hasattr(request, "param"):
        raise pytest.UsageError("rag_sample needs @pytest.mark.ragmetrics(samples='path/to/golden.jsonl')")
    return request.param


def _evaluator_for(item: pytest.Item) -> Evaluator:
    from .errors import ConfigError

    state = _state(item.config)
    overrides: dict[str, Any] = {}
    fixture_request = getattr(item, "_request", None)
    # Requesting a fixture the test did not ask for costs about as much as the rest of a warm test:
    # only when its value can be other than the plugin's empty default.
    if fixture_request is not None and (
        "ragmetrics_config" in getattr(item, "fixturenames", ()) or state.config_overridden(item.session)
    ):
        overrides.update(_setting_changes(fixture_request.getfixturevalue("ragmetrics_config") or {}))
        run_wide = sorted(set(overrides) & RUN_WIDE)
        if run_wide:
            raise pytest.UsageError(
                f"{item.nodeid}: ragmetrics_config: {', '.join(run_wide)} applies to the whole run; set it "
                "on the command line or in the ini file"
            )
    overrides.update(_marker_settings(item))
    try:
        settings = (
            _absolute(state.settings.replace(**overrides), item.config.rootpath)
            if overrides
            else state.settings
        )
    except ConfigError as exc:
        raise pytest.UsageError(f"{item.nodeid}: ragmetrics settings: {exc}") from None
    return state.evaluator(settings)


# --- running tests -------------------------------------------------------------------------------


def _record(item: pytest.Item, row: dict[str, Any]) -> None:
    """A comparison made in ``item``: kept for its report and as JUnit XML properties."""
    state = _state(item.config)
    state.activate()
    results = row["samples"]
    row["samples"] = (
        [r.to_json() for r in results] if state.verdicts_read() else [r.score_json() for r in results]
    )
    if row.get("where"):
        filename, line = row["where"]
        row["where"] = [_shown(filename, state), line]
    rows = item.stash.get(_rows_key, None)  # recorded since the last report of this test's phases
    if rows is None:
        rows = item.stash[_rows_key] = []
    rows.append(row)
    number = item.stash[_numbers_key] = item.stash.get(_numbers_key, 0) + 1
    prefix = f"ragmetrics.{number}.{row['metric']}" + (f"[{row['method']}]" if row["method"] else "")
    item.user_properties.append((f"{prefix}.{row['stat']}", f"{row['score']:.6g}"))
    item.user_properties.append((f"{prefix}.threshold", f"{row['op']} {row['threshold']:g}"))
    item.user_properties.append((f"{prefix}.passed", "true" if row["passed"] else "false"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """Make the test current for the assertion helpers (its evaluator is built on first use), and
    judge the next tests' scores ahead while it runs. All a test pays while nothing is judged."""
    state = item.config.stash[state_key]
    scope = _scope.TestScope(item.nodeid, lambda: _evaluator_for(item), lambda row: _record(item, row))
    token = _scope.current_test.set(scope)
    if state.prefetcher is not None:
        state.prefetcher.before(item)  # the next tests' scores start while this one runs
    try:
        return (yield)
    except BaseException:
        if state.prefetcher is not None:
            state.prefetcher.stop()  # Ctrl-C: nothing more is judged for tests that will not run
        raise
    finally:
        _scope.current_test.reset(token)
        # The test's reports hold its rows; its checks (results, verdicts) would only outlive it.
        scope.checks.clear()
        prefetcher = state.prefetcher  # also when this test was the first to judge anything
        if prefetcher is not None:
            prefetcher.after(item)
            if item.session.shouldfail or item.session.shouldstop:
                prefetcher.stop()  # -x, --maxfail


@pytest.hookimpl(trylast=True)
def pytest_runtest_call(item: pytest.Item) -> None:
    # After the test body (trylast), and only when it passed: when it failed, that failure is the
    # news, and under filterwarnings=error a warning here would replace it.
    scope = _scope.current_test.get()
    unused = scope.unused_checks() if scope is not None and scope.checks else None
    if unused:
        _warn_unused(unused)


def _warn_unused(checks: list[ScoreCheck]) -> None:
    from .judge.cache import RagMetricsWarning

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


# --- xdist: workers send their judge figures to the controller -----------------------------------


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


# --- the end of the run --------------------------------------------------------------------------


def _close(state: RunState) -> None:
    for evaluator in state.evaluators.values():
        state.answer_classes.update(evaluator.answers)
    for evaluator in state.evaluators.values():
        judge = evaluator.built_judge
        if judge is not None:
            state.used_keys.update(judge.used_keys)
            if judge.store is not None:
                state.add_store_keys(judge.store.keys())
        evaluator.close()
    if state.runner is not None:
        state.runner.close()
        state.runner = None


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    state = config.stash.get(state_key, None)
    if state is None:
        return
    prefetcher = state.prefetcher
    if prefetcher is not None:
        prefetcher.stop()
    ran_tests = session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
    if state.labels is not None and ran_tests and not config.option.collectonly:
        from .calibration.check import run_judge_check

        # Through the run's own evaluator: the same cache and store, and its used judgments count.
        source = _shown(str(state.settings.judge_check), state)
        state.judge_check = run_judge_check(
            state.evaluator(state.settings), state.labels, state.floors, source
        )
        if not state.judge_check["passed"] and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
    _close(state)
    used = bool(state.rows or state.evaluators or state.worker_stats or state.errors)
    if _is_worker(config):
        if not used:
            return
        config.workeroutput["ragmetrics"] = {  # type: ignore[attr-defined]
            "stats": state.stats.to_json(),
            "used_keys": sorted(state.used_keys),
            "store_keys": sorted(state.store_keys) if state.store_keys is not None else None,
            "deselected": state.deselected,
            "answer_classes": {k: [kind, list(c)] for k, (kind, c) in state.answer_classes.items()},
        }
        return
    if not (used or state.configured):
        return  # the plugin was not used in this run: build nothing, import nothing
    s = state.settings
    wanted = state.gates or state.baseline is not None or s.save_baseline
    if not (used or wanted or s.report or s.report_json or s.report_md or s.report_html):
        return  # the plugin was not used in this run: build nothing, import nothing
    from ._run import record_for_prune

    state.unused_store_entries = record_for_prune(session, state)
    if state.gates:
        from .gates import evaluate_gates
        from .report.build import per_sample_scores

        state.gate_results = evaluate_gates(
            state.gates, per_sample_scores(state.rows), partial=_partial_run(state)
        )
        if any(not g["passed"] for g in state.gate_results) and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        _junit_gate_properties(config, state.gate_results)
    from .report.build import build_report, write_reports

    for data in state.worker_stats:
        state.stats.merge_json(data)
    unused = state.unused_store_entries
    report = build_report(
        state.rows,
        settings=state.settings,
        stats=state.stats,
        gate_results=state.gate_results,
        unused_store_entries=None if unused is None else len(unused),
        errors=state.errors,
        shown=lambda path: _shown(path, state),
        default_cache_dir=state.default_cache_dir(),
        baseline=state.baseline,
        baseline_source=_shown(s.baseline, state) if s.baseline else None,
        regression_gates=state.regression_gates,
        partial=_partial_run(state),
        judge_check=state.judge_check,
        answers=state.answer_classes.values(),
        # The comparisons themselves only for whoever reads them: most of the report's cost.
        with_results=state.results_read(),
    )
    regression = report["summary"].get("regression_gates") or []
    if any(not g["passed"] for g in regression) and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    if state.stats.refused and session.exitstatus == 0:  # the judge call cap stopped the run
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    config.hook.pytest_ragmetrics_report(report=report)
    write_reports(report, state.settings)
    state.final_report = report


def _junit_gate_properties(config: pytest.Config, gates: list[dict[str, Any]]) -> None:
    """Gate outcomes as test-suite properties of ``--junitxml``, as ``record_testsuite_property``
    would add them; they are known only now, before the junitxml plugin writes its file."""
    xml = next(
        (p for p in config.pluginmanager.get_plugins() if callable(getattr(p, "add_global_property", None))),
        None,
    )
    if xml is None:
        return
    for number, gate in enumerate(gates, start=1):
        prefix = f"ragmetrics.gate.{number}"
        value = gate.get("value")
        xml.add_global_property(f"{prefix}.spec", gate["spec"])
        xml.add_global_property(f"{prefix}.value", "n/a" if value is None else f"{value:.6g}")
        xml.add_global_property(f"{prefix}.n", str(gate.get("n", 0)))
        outcome = "skipped" if gate.get("skipped") else "true" if gate["passed"] else "false"
        xml.add_global_property(f"{prefix}.passed", outcome)
        if gate.get("margin") is not None:
            xml.add_global_property(f"{prefix}.margin", f"{gate['margin']:+.6g}")


def _partial_run(state: RunState) -> bool:
    """Tests were deselected (-k, -m, --lf), or paths / node ids were named on the command line."""
    from ._run import selected_part

    return selected_part(state.config, deselected=state.deselected)


def _shown(path: str, state: RunState) -> str:
    """A path relative to the rootdir when inside it, so reports read the same on every checkout."""
    return _relative_to(str(path), state.config.rootpath)


@functools.lru_cache(maxsize=256)  # asked for every comparison, nearly always about the same files
def _relative_to(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return path


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    state = config.stash.get(state_key, None)
    report = state.final_report if state is not None else None
    if report is None or _is_worker(config):
        return
    if state is not None and state.settings.report:
        from .report.terminal import render_terminal

        render_terminal(
            report,
            _ReporterWriter(terminalreporter),
            verbosity=int(config.getoption("verbose")),  # Config.get_verbosity is pytest 8+
            rootdir=config.rootpath,
        )
    elif state is not None:
        from .report.model import format_margin, format_score, regression_gate_detail

        for gate in state.gate_results:
            if not gate["passed"]:
                why = gate.get("reason") or (
                    f"value {format_score(gate['value'])}, margin {format_margin(gate.get('margin'))}"
                )
                terminalreporter.write_line(f"ragmetrics gate failed: {gate['spec']} ({why})", red=True)
        for gate in report["summary"].get("regression_gates") or ():
            if not gate["passed"]:
                terminalreporter.write_line(
                    f"ragmetrics regression gate failed: {gate['spec']} ({regression_gate_detail(gate)})",
                    red=True,
                )
    if state is not None and state.stats.refused:
        from .judge.budget import cap_stopped_message
        from .settings import how_to_set

        cap = state.stats.max_judge_calls or 0
        terminalreporter.write_line(cap_stopped_message(cap, state.stats.refused, how_to_set), red=True)
    if state is not None and not state.settings.report:
        from .report.terminal import judge_check_failures

        for line in judge_check_failures(report):
            warning = line.startswith("ragmetrics warning")
            terminalreporter.write_line(line, red=not warning, yellow=warning)


class _ReporterWriter:
    """Adapts pytest's TerminalReporter (public write_line / write_sep) to the renderer's writer."""

    def __init__(self, reporter: Any) -> None:
        self._reporter = reporter
        self.fullwidth = getattr(getattr(reporter, "_tw", None), "fullwidth", 80)

    def line(self, s: str = "", **markup: bool) -> None:
        self._reporter.write_line(s, **markup)

    def sep(
        self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
    ) -> None:
        self._reporter.write_sep(sepchar, title, **markup)


def _progress(state: RunState) -> Any:
    """What shows judging progress in this process: the terminal, or the xdist controller via a file."""
    from .progress import WORKER_INPUT_KEY, LocalProgress, WorkerProgress

    live = state.stats.live
    workerinput = getattr(state.config, "workerinput", None)
    if workerinput is None:
        return LocalProgress(state.config, live)
    directory = workerinput.get(WORKER_INPUT_KEY)
    if not directory:
        return None
    return WorkerProgress(directory, str(workerinput.get("workerid", os.getpid())), live)
