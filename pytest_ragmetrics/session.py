"""The ragmetrics side of one pytest run: its settings, evaluators, the comparisons its tests made, and
the end-of-run sequence (judge check, xdist worker output, gates, the report, exit status).

At most one :class:`RagmetricsSession` per pytest run, kept in ``config.stash`` by the plugin, made
the first time the run needs it: at the start when something is configured, else when a test first
uses the plugin (a marker, a fixture, an assertion helper). A run that never does never imports this
module. The hooks in :mod:`pytest_ragmetrics.plugin` call :meth:`~RagmetricsSession.start`,
:meth:`~RagmetricsSession.finish` and the per-test methods between them. Nothing here is module
state: a pytester run inside a run has its own session.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from ._suite import SuiteRecord, is_worker
from .errors import ConfigError, JudgmentPending, RagMetricsError
from .report import junit

if TYPE_CHECKING:
    from .baseline import RegressionGate
    from .calibration.check import Floor
    from .calibration.labels import LabelledItem
    from .calibration.pool import SamplePool
    from .engine import Evaluator
    from .gates import Gate
    from .judge.batch import BatchExport, ExportSummary
    from .judge.budget import JudgeBudget
    from .judge.stats import JudgeStats
    from .judge.store import JudgmentStore
    from .judging_loop import LoopRunner
    from .prefetch import Prefetcher
    from .sample import RagSample
    from .settings import Settings
    from .specs import MetricCatalog


#: Not made yet (None: made, and nothing to show progress on).
_NOT_MADE: Any = object()
_INI_WORDS = {"int": "an integer", "float": "a number", "bool": "true or false", "linelist": "lines"}


class RagmetricsSession:
    """One pytest run as ragmetrics sees it.

    Made when the run first needs it (see :mod:`pytest_ragmetrics.session`); ``suite`` is what the
    run has recorded of its tests since its start. Its settings are resolved on first use when
    nothing was configured.
    """

    def __init__(self, config: pytest.Config, suite: SuiteRecord) -> None:
        self.config = config
        self._settings: Settings | None = None
        #: Something was configured (an option, an ini key, a RAGMETRICS_* variable).
        self.configured = False
        self.gates: list[Gate] = []
        self.regression_gates: list[RegressionGate] = []
        #: The baseline report this run is compared with (controller only).
        self.baseline: dict[str, Any] | None = None
        #: The judge check: its labelled items (None: not configured), floors, and outcome.
        self.labels: list[LabelledItem] | None = None
        #: The labelled set each judged result is also scored from (in every process; the judge check
        #: runs on ``labels``, in the process that writes the report).
        self.labelled_set: list[LabelledItem] | None = None
        self.floors: list[Floor] = []
        self.judge_check: dict[str, Any] | None = None
        #: The controls (``judge_controls``): their outcome.
        #: The samples the run scored, for drawing the controls (with rag_judge_controls only).
        self.control_pool: SamplePool | None = None
        self.controls: dict[str, Any] | None = None
        #: Comparisons of the run, from every process, in report order.
        self.rows: list[dict[str, Any]] = []
        #: Tests stopped by a ragmetrics error (a judgment not recorded, the judge unavailable...).
        self.errors: list[dict[str, Any]] = []
        self.evaluators: dict[Settings, Evaluator] = {}
        self._last_evaluator: tuple[Settings | None, Evaluator | None] = (None, None)
        #: The settings of the tests without a ``ragmetrics_config`` of their own, by the ids of their
        #: ``ragmetrics`` markers (kept with them, so no id is reused): a golden set's tests share one.
        self._marked_settings: dict[tuple[int, ...], tuple[tuple[pytest.Mark, ...], Settings]] = {}
        self.runner: LoopRunner | None = None
        #: What shows judging progress, made at the first wait on the judge (see :meth:`_waiting`).
        self.progress: Any = _NOT_MADE
        self._stats: JudgeStats | None = None
        #: The run's judge spending budget (``max_judge_calls``, ``max_judge_tokens``), shared by its
        #: xdist workers; None: no cap.
        self.budget: JudgeBudget | None = None
        #: This run's id: xdist's for its workers (they share it), else one of its own.
        workerinput = getattr(config, "workerinput", None) or {}
        self.run_id: str = str(workerinput.get("testrunuid") or secrets.token_hex(8))
        self.worker_stats: list[dict[str, Any]] = []
        self.used_keys: set[str] = set()
        #: Keys held by the judgment store(s) this run used (None: no store); unused = these - used_keys.
        self.store_keys: set[str] | None = None
        #: What every judgment the tests used decided, by cache key: (kind, answer classes). The run's
        #: evaluators note into it (their ``answers``), the xdist workers' arrive in it.
        self.answer_classes: dict[str, tuple[str, tuple[str, ...]]] = {}
        #: An xdist worker went down with an error: the judgments it used never reached this process.
        self.worker_crashed = False
        #: A Ctrl-C came while the run ended after one had stopped it: nothing more is waited for.
        self.interrupted_again = False
        #: xdist: the questions of the samples of the skipped tests, as the workers that ran them
        #: found (see ``_run.sample_questions``).
        self.worker_skipped: dict[str, list[str]] = {}
        #: The judgment stores the run's judges used: ``cache prune``'s record reads entries there.
        self.stores: dict[Path, JudgmentStore] = {}
        #: The tests collected (before deselection), run and skipped, and their files, for ``report merge``.
        self.suite = suite
        #: Set at the end: the store entries this run did not use, when it covered the whole suite
        #: (see ``_run.record_for_prune``); None otherwise.
        self.unused_store_entries: list[str] | None = None
        self.gate_results: list[dict[str, Any]] = []
        self.final_report: dict[str, Any] | None = None
        self.unwritten: list[str] = []  # the report files that could not be written, and why
        self.baseline_unsaved: str | None = None  # why --rag-save-baseline wrote nothing
        self.baseline_kept: str | None = None  # what a partial run kept of the baseline it saved
        self.reports_kept: str | None = None  # why a run that ran no test wrote no report file
        #: Why the run ran no test (see runs_no_test), or None: decided once, at its end.
        self.none_ran: str | None = None
        self.prefetcher: Prefetcher | None = None
        #: The collected tests, once collection is over (the prefetcher's order), and their session.
        self.items: Sequence[pytest.Item] | None = None
        self.session: pytest.Session | None = None
        #: The per-test recording hooks are registered: the run uses the plugin.
        self.active = False
        #: Usage errors found while generating tests, raised together once collection is over.
        self.usage_errors: list[str] = []
        #: The golden sets read so far, by path: the file's stat (see :meth:`golden_set`), its samples.
        self._golden_sets: dict[Path, tuple[tuple[int, ...], list[RagSample]]] = {}
        #: Whether anything reads the comparisons' verdicts (see :meth:`verdicts_read`); None: not asked yet.
        self._verdicts_read: bool | None = None
        #: Called once, the first time the run is used: registers the per-test recording hooks.
        self.on_activate: Any = None
        #: ``--rag-batch=PATH``: the requests this process writes instead of calling the judge, and
        #: (in the process that ends the run) what the export wrote.
        self.batch: BatchExport | None = None
        self.batch_summary: ExportSummary | None = None
        #: The option by which a run with ``--rag-batch`` ran no test (``--co``...): it made no export
        #: and left the files at the path as they were.
        self.batch_kept: str | None = None
        #: Each path as reports show it (see :meth:`shown`): every comparison names its test file.
        self._shown: dict[str, str] = {}
        #: Each assertion's place (file, line) -> as reports show it (see :meth:`record`).
        self._places: dict[tuple[str, int], tuple[str, int]] = {}
        #: ``--junitxml``: each comparison is also JUnit properties of its test (an xdist worker has
        #: the option too; its reports carry them to the controller, which writes the file). Without
        #: it, nothing reads them: a test keeps none, and neither do its phases' reports.
        self.junit_properties = bool(config.getoption("xmlpath", None))

    # -- the start of the run -----------------------------------------------------------------------
    def start(self) -> None:
        """Read the options, ini keys and ``RAGMETRICS_*`` variables; when any is given, resolve the
        settings and read the gates, the baseline and the labelled set now, so that a bad one is a
        usage error (exit 4) before the first test."""
        ini, cli = self._ini_values(), self._cli_values()
        self.configured = bool(
            any(v is not None for v in cli.values())
            or ini
            or any(k.startswith("RAGMETRICS_") for k in os.environ)
        )
        if self.configured:  # else every setting has its default, resolved on first use
            self._configure(ini, cli)
            s = self.settings
            if s.max_judge_calls is not None or s.max_judge_tokens is not None:
                self._share_budget(s.max_judge_calls, s.max_judge_tokens)
            if s.batch:
                self._start_batch(s)

    def _start_batch(self, settings: Settings) -> None:
        """``--rag-batch``: the export, created here (before any xdist worker starts) or joined (a
        worker). The per-test hooks are registered now: they turn a test whose judgments are
        pending into a skipped one from the first test on."""
        from .judge.batch import BatchExport

        if settings.cache == "replay":
            raise pytest.UsageError(
                "ragmetrics: --rag-batch writes the judgments that are not recorded, to be judged in a "
                "batch; --rag-cache=replay never asks for one: use readwrite (or refresh)"
            )
        from ._run import runs_no_test

        # A run that only lists or sets up its tests writes no request: an earlier export at the path,
        # perhaps not submitted yet, is left as it is, not removed to make way for an empty one.
        self.batch_kept = runs_no_test(self.config)
        if self.batch_kept is not None:
            return
        if is_worker(self.config):
            self.batch = BatchExport.open(settings.batch or "")
        else:
            try:
                self.batch = BatchExport.create(settings.batch or "")
            except (ValueError, OSError) as exc:
                raise pytest.UsageError(f"ragmetrics: --rag-batch: {exc}") from None
        self.activate()

    def _share_budget(self, calls: int | None, tokens: int | None) -> None:
        """The run's judge spending budget: a file made here, before any worker starts, or the worker's."""
        from .judge.budget import JudgeBudget

        config = self.config
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            self.budget = JudgeBudget(calls, tokens, workerinput.get(BUDGET_INPUT_KEY))
            return
        import shutil
        import tempfile

        directory = tempfile.mkdtemp(prefix="ragmetrics-budget-")
        budget = self.budget = JudgeBudget.create(calls, tokens, os.path.join(directory, "budget.sqlite"))

        def remove() -> None:
            budget.close()
            shutil.rmtree(directory, ignore_errors=True)

        config.add_cleanup(remove)
        if config.pluginmanager.has_plugin("dsession"):
            config.pluginmanager.register(_BudgetForWorkers(str(budget.path)), "ragmetrics-call-budget")

    def _ini_values(self) -> dict[str, Any]:
        from .options import OPTIONS, may_name_unknown_ini_keys, overridden_ini_keys
        from .settings import check_names, ini_file_values

        inipath = self.config.inipath
        if inipath is not None and may_name_unknown_ini_keys(inipath):  # else no ini parser loaded
            try:
                check_names(ini=ini_file_values(inipath) or {})
            except ConfigError as exc:
                raise pytest.UsageError(f"ragmetrics: {exc} (in {inipath.name})") from None
        overridden = overridden_ini_keys(self.config.getoption("override_ini"))
        if overridden:
            try:
                check_names(ini=overridden)
            except ConfigError as exc:
                raise pytest.UsageError(f"ragmetrics: {exc} (given with -o)") from None
        values: dict[str, Any] = {}
        for option in OPTIONS:
            try:
                # Registered with default None, so an unset key reads as None (a set `false` stays
                # False); pytest < 8 returns [] for it instead.
                value = self.config.getini(option.ini_name)
            except (TypeError, ValueError, pytest.UsageError) as exc:  # pytest's parsing of the value
                # Only a type pytest parses can fail here (numbers are strings before pytest 8.4).
                expected = _INI_WORDS.get(option.ini_type or "string", "text")
                where = self._ini_source(option.ini_name)
                raise pytest.UsageError(
                    f"ragmetrics: {option.ini_name} must be {expected} ({exc}){where}"
                ) from None
            if value is not None and value != []:
                values[option.name] = value
        from .settings import check_toml_text

        try:
            check_toml_text(inipath, values)
        except ConfigError as exc:
            raise pytest.UsageError(f"ragmetrics: {exc}") from None
        return values

    def _ini_source(self, key: str) -> str:
        """`` (in pyproject.toml)``: where the ini value of ``key`` was given, for its error message."""
        from .options import overridden_ini_keys

        if key in overridden_ini_keys(self.config.getoption("override_ini")):
            return " (given with -o)"
        inipath = self.config.inipath
        return f" (in {inipath.name})" if inipath is not None else ""

    def _cli_values(self) -> dict[str, Any]:
        from .options import OPTIONS

        return {o.name: self.config.getoption("rag_" + o.name) for o in OPTIONS if o.cli or o.repeat}

    def _configure(self, ini: dict[str, Any], cli: dict[str, Any]) -> None:
        from .settings import advice, resolve, with_paths_under

        config = self.config
        ini_keys = {"rag_" + name for name in ini}
        try:
            settings = with_paths_under(resolve(ini=ini, env=os.environ, cli=cli), config.rootpath)
            self._settings = settings
            if settings.gates:
                from .gates import parse_gates

                try:
                    self.gates = parse_gates(settings.gates, self._catalog(settings.gates))
                except ConfigError as exc:
                    raise ConfigError(str(exc), setting=_given_as("gates", cli)) from None
            if settings.regression_gates:
                from .baseline import parse_regression_gates

                lines = settings.regression_gates
                try:
                    self.regression_gates = parse_regression_gates(lines, self._catalog(lines))
                except ConfigError as exc:
                    raise ConfigError(str(exc), setting=_given_as("regression_gates", cli)) from None
            # The comparison is made once, by the process that writes the report (never by workers).
            self.baseline = _load_baseline(settings) if not is_worker(config) else None
            if not is_worker(config):
                from .report.build import check_replaced

                check_replaced(settings, functools.partial(_given_as, cli=cli))
            if settings.store_dir:
                from .settings import check_store_dir

                check_store_dir(settings.store_dir, _given_as("store_dir", cli))
        except ConfigError as exc:
            where = self._ini_source(exc.setting) if exc.setting in ini_keys else ""
            raise pytest.UsageError(f"ragmetrics: {exc}{where}") from None
        if not is_worker(config):
            self._configure_judge_check()
            self.labelled_set = self.labels
        elif settings.judge_check:
            from .calibration.labels import load_labels

            # The controller checks the judge; each worker only scores its samples from the labels too.
            self.labelled_set = load_labels(settings.judge_check)
        for note in advice(settings, in_pytest=True):
            from .errors import RagMetricsWarning

            config.issue_config_time_warning(RagMetricsWarning(note), stacklevel=2)
        # The SDK's own OPENAI_BASE_URL is left to the judge that reads it, if one is built: a run
        # whose judge comes from a plugin, or that needs none, never uses it.
        azure = settings.judge_provider == "azure"
        if settings.cache != "replay" and (azure or settings.judge_base_url):
            from .judge.openai_settings import check_azure_settings, check_base_url
            from .settings import wording

            check = check_azure_settings if azure else check_base_url
            try:  # every test would fail on it: stop before the first one
                check(settings.judge_base_url, how_to_set=wording(True))
            except ConfigError as exc:
                raise pytest.UsageError(f"ragmetrics: {exc}") from None

    def _configure_judge_check(self) -> None:
        s = self.settings
        if not (s.judge_check or s.judge_agreement):
            return
        from .calibration.check import CONTROL_STATISTICS, parse_floors
        from .calibration.labels import load_labels

        try:
            self.floors = parse_floors(s.judge_agreement)
        except ConfigError as exc:
            raise pytest.UsageError(f"ragmetrics: judge check: {exc}") from None
        on_controls = [f for f in self.floors if f.stat in CONTROL_STATISTICS]
        if len(on_controls) < len(self.floors) and not s.judge_check:
            raise pytest.UsageError(
                "ragmetrics: rag_judge_agreement floors need a labelled set to measure the judge against: "
                "set rag_judge_check (or --rag-judge-check=PATH)"
            )
        if on_controls and not s.judge_controls:
            raise pytest.UsageError(
                f"ragmetrics: the floor {on_controls[0].spec!r} needs controls: set "
                "--rag-judge-controls=N (rag_judge_controls)"
            )
        if not s.judge_check:
            return
        try:
            self.labels = load_labels(s.judge_check)
        except (ConfigError, ValueError) as exc:
            raise pytest.UsageError(f"ragmetrics: judge check: {exc}") from None
        except OSError as exc:
            raise pytest.UsageError(f"ragmetrics: judge check: cannot read the labelled set: {exc}") from None

    def _label_warnings(self) -> list[str]:
        """Why the labelled samples behind the corrected means may not be a uniform sample."""
        if self.labels is None:
            return []
        from .calibration.drawing import draw_warnings, golden_changed, read_draw, record_path
        from .report.build import labelled_ids

        labelled, scored = labelled_ids(self.rows)
        if not labelled:
            return []
        path = record_path(str(self.settings.judge_check))
        record, problem = None, None
        if path.is_file():
            try:
                record = read_draw(path)
            except ValueError as exc:
                problem = str(exc)
        said = draw_warnings(labelled, scored, record, self.shown(str(self.settings.judge_check)), problem)
        changed = golden_changed(record, path, self.config.rootpath) if record is not None else None
        return [changed, *said] if changed else said

    def _catalog(self, lines: tuple[str, ...]) -> MetricCatalog:
        """The metrics gate-like ``lines`` may name; the hooks are asked only when a line names a
        custom one."""
        from .specs import BUILTIN_CATALOG, MetricCatalog, registered_metrics, subject_names

        if subject_names(lines) <= BUILTIN_CATALOG.methods.keys():
            return BUILTIN_CATALOG
        registered = registered_metrics(self.config.hook.pytest_ragmetrics_metrics())
        return BUILTIN_CATALOG.merged(MetricCatalog.of(registered))

    def header(self) -> str | None:
        """The line under pytest's header: judge model, cache and store; only when configured."""
        if not self.configured:  # --rag-report is configuring too
            return None
        from .report.terminal import header_line

        s = self.settings
        return header_line(
            {
                "model": s.judge_model,
                "cache_mode": s.cache,
                "cache_dir": s.cache_dir or self.default_cache_dir(),
                "store_dir": s.store_dir,
                "response_format": s.response_format,
            },
            self.config.rootpath,
        )

    # -- settings and evaluators --------------------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The run's settings; built-in defaults, resolved on first use, when nothing was configured."""
        if self._settings is None:
            from .settings import resolve

            self._settings = resolve()
        return self._settings

    @property
    def stats(self) -> JudgeStats:
        if self._stats is None:
            from .judge.stats import JudgeStats

            self._stats = JudgeStats(budget=self.budget)
        return self._stats

    def default_cache_dir(self) -> str:
        """The run's cache directory when no setting names one: the settings' rule for a pytest run."""
        from .settings import default_cache_dir

        return str(default_cache_dir(self.config))

    def test_settings(self, item: pytest.Item, config: Mapping[str, Any] | None) -> Settings:
        """The settings of test ``item``: the run's, its ``ragmetrics_config`` value, its markers."""
        marks = tuple(item.iter_markers("ragmetrics"))
        key = tuple(map(id, marks))
        if config is None and key in self._marked_settings:
            return self._marked_settings[key][1]
        from .settings import for_test

        markers = [mark.kwargs for mark in reversed(marks)]
        try:
            settings = for_test(self.settings, config=config, markers=markers, root=self.config.rootpath)
        except ConfigError as exc:
            raise pytest.UsageError(f"{item.nodeid}: {exc}") from None
        if config is None:
            self._marked_settings[key] = (marks, settings)
        return settings

    def evaluator(self, settings: Settings) -> Evaluator:
        """The run's evaluator for ``settings``: one per distinct settings, sharing the judge figures
        and the judging loop."""
        last_settings, evaluator = self._last_evaluator
        if settings is not last_settings:  # nearly every test has the last one's: no hash of each field
            evaluator = self.evaluators.get(settings)
        if evaluator is None:
            from .engine import Evaluator
            from .judging_loop import LoopRunner

            if self.runner is None:
                self.runner = LoopRunner(on_wait=self._waiting, on_wait_end=self._waited)
            evaluator = Evaluator(
                settings,
                hook=self.config.hook,
                stats=self.stats,
                runner=self.runner,
                default_cache_dir=self.default_cache_dir(),
                run=self.run_id,
            )
            evaluator.batch = self.batch
            # What each judgment decided, noted straight into the run's one record of it: the end of
            # the run tells a judge that answers alike.
            evaluator.answers = self.answer_classes
            evaluator.used_keys = self.used_keys
            if self.configured and self.settings.judge_controls:
                # Controls are drawn from the samples the run scored, however they were made.
                evaluator.scored = self._pool()
            if self.labelled_set is not None:
                from .calibration.labelled import LabelAnswers

                # Each judged result also gets the score the labelled set gives it (corrected means).
                evaluator.labelled = LabelAnswers(self.labelled_set)
            self.evaluators[settings] = evaluator
            self.activate()
            evaluator.ahead = self.prefetcher
        self._last_evaluator = (settings, evaluator)
        return evaluator

    def _pool(self) -> SamplePool:
        if self.control_pool is None:
            from .calibration.pool import SamplePool

            s = self.settings
            # Enough samples to draw every control from, and to pair them with unrelated ones.
            self.control_pool = SamplePool(keep=max(4 * (s.judge_controls or 0), 20), seed=s.seed or 0)
        return self.control_pool

    def _waiting(self, waited: float) -> None:
        """A test has waited on the judge for a while (called again every quarter of a second): the
        progress is shown, by what is made at the run's first such wait (a warm run, its answers read
        in milliseconds, loads none of it)."""
        if self.progress is _NOT_MADE:
            self.progress = self._progress()
        if self.progress is not None:
            self.progress.waiting(waited)

    def _waited(self) -> None:
        if self.progress is not None and self.progress is not _NOT_MADE:  # made by _waiting
            self.progress.done()

    def _progress(self) -> Any:
        """What shows judging progress in this process: the terminal, or the xdist controller via a file."""
        from .progress import WORKER_INPUT_KEY, LocalProgress, WorkerProgress

        live = self.stats.live
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is None:
            return LocalProgress(self.config, live)
        directory = workerinput.get(WORKER_INPUT_KEY)
        if not directory:
            return None
        return WorkerProgress(directory, str(workerinput.get("workerid", os.getpid())), live)

    def activate(self) -> None:
        """The run uses the plugin: register the per-test hooks that record comparisons and, once
        the tests are collected, start judging ahead.

        Until then a test costs the plugin one cheap wrapper: a suite that never judges anything
        does not notice it.
        """
        if not self.active:
            self.active = True
            _end_on_sigterm()
            if self.on_activate is not None:
                self.on_activate()
        if self.prefetcher is None and self.items is not None:
            from .prefetch import Prefetcher

            self.prefetcher = Prefetcher(self.settings, self.evaluator, active=not is_worker(self.config))
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
                is_worker(self.config)
                or self.settings.baseline
                or self.config.pluginmanager.has_plugin("ragmetrics-pytest-html")
                or self.results_read()
            )
        return self._verdicts_read

    # -- collection and tests -------------------------------------------------------------------------
    def golden_set(self, name: str | os.PathLike[str], path: Path) -> list[RagSample]:
        """The samples of the golden set at ``path`` that a ``samples=name`` marker names, parsed once
        per run however many tests use it. Served again only while the file's size, modification
        and change times and inode are the ones it was parsed at: a file edited during the run is
        parsed again. A file that cannot be loaded raises what :func:`load_marker_samples` raises,
        each time (naming the marker as each test wrote it)."""
        from .loaders import load_marker_samples

        try:
            st = os.stat(path)
            stamp: tuple[int, ...] | None = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        except OSError:
            stamp = None  # loading says what is wrong with it
        known = self._golden_sets.get(path)
        if known is not None and known[0] == stamp:
            return list(known[1])
        samples = load_marker_samples(name, path)
        if stamp is not None:
            self._golden_sets[path] = (stamp, samples)
        return list(samples)

    def collected(self, session: pytest.Session, uses_marker: bool) -> None:
        """Collection is over: judging ahead can start once the run uses the plugin."""
        self.items = session.items
        self.session = session
        if self.evaluators or uses_marker:
            self.activate()

    def record(self, row: dict[str, Any]) -> None:
        """A comparison made by a test: its verdicts (when read) or scores made plain data, for the
        test's report to carry (to the xdist controller too)."""
        self.activate()
        results = row["samples"]
        verdicts = self.verdicts_read()
        # A tuple, as the row's judges (see ScoreCheck.record).
        row["samples"] = tuple([r.to_json() if verdicts else r.score_json() for r in results])
        where = row.get("where")
        if where:
            place = self._places.get(where)
            if place is None:  # each assertion's line, shown once for all the tests that pass it
                place = self._places[where] = (self.shown(where[0]), where[1])
            row["where"] = place
        else:
            row["where"] = None

    def comparison_properties(self, number: int, row: Mapping[str, Any]) -> list[tuple[str, str]]:
        """The JUnit XML properties of a test's ``number``-th comparison (see
        :func:`pytest_ragmetrics.report.junit.comparison_properties`), loaded with the run rather
        than imported again at every comparison; asked only with ``--junitxml``
        (:attr:`junit_properties`)."""
        return junit.comparison_properties(number, row)

    def error_of(self, item: pytest.Item, call: pytest.CallInfo[None], report: Any) -> dict[str, Any] | None:
        """A ragmetrics error that stopped the test before its comparison, as report data, or None."""
        if call.excinfo is None or not call.excinfo.errisinstance(RagMetricsError):
            return None
        if call.excinfo.errisinstance(JudgmentPending):
            return None  # not an error: the test is skipped (see pending_reason)
        message = str(call.excinfo.value).strip().splitlines()
        return {
            "nodeid": item.nodeid,
            "when": call.when,
            "error": call.excinfo.type.__name__,
            "message": message[0] if message else "",
            "xfail": hasattr(report, "wasxfail"),
        }

    def pending_reason(self, call: pytest.CallInfo[None], checks: Sequence[Any]) -> str | None:
        """``--rag-batch``: why a test phase is skipped (it needs judgments whose requests went to the
        batch file), or None. A phase that failed otherwise keeps its failure."""
        excinfo = call.excinfo
        if excinfo is not None and not excinfo.errisinstance(JudgmentPending):
            return None
        errors = {id(c.pending): c.pending for c in checks if getattr(c, "pending", None) is not None}
        if excinfo is not None:
            errors[id(excinfo.value)] = excinfo.value
        if not errors:
            return None
        count = sum(e.count for e in errors.values())
        path = self.shown(next(iter(errors.values())).path)
        return (
            f"ragmetrics --rag-batch: {count} judgment(s) this test needs are not recorded; their requests "
            f"were written to {path}"
        )

    def take_comparisons(
        self, report: pytest.TestReport, rows: list[dict[str, Any]] | None, error: Any
    ) -> None:
        """A test phase's report, with the comparisons and ragmetrics error it carried (from any process)."""
        session, prefetcher = self.session, self.prefetcher
        if (
            prefetcher is not None
            and report.failed
            and session is not None
            and (session.shouldfail or session.shouldstop)
        ):
            # As soon as the run is known to stop, not once the failed test is torn down: the
            # tests after it are judged ahead meanwhile.
            prefetcher.stop()
        if rows:
            from ._run import counts

            if not counts(report):
                return  # an attempt a rerun plugin discarded: only the final attempt counts
            # Comparisons in an xfail test (a deliberately broken retriever, say) are reported but
            # kept out of aggregates and gates.
            xfail = hasattr(report, "wasxfail")
            for row in rows:  # the report gave them up: marked in place, not copied
                row["xfail"] = xfail
            self.rows.extend(rows)
        if error:
            self.errors.append(error)

    def _skipped_questions(self) -> dict[str, list[str] | None]:
        """Each skipped test (or module) -> the questions of the samples it scores, ``None`` where
        this process does not know them (see ``_run.sample_questions``)."""
        if not self.suite.skipped:
            return {}
        from ._run import sample_questions

        items = {item.nodeid: item for item in self.items or ()}
        found: dict[str, list[str] | None] = {}
        for nodeid in self.suite.skipped:
            questions = self.worker_skipped.get(nodeid) or sample_questions(items.get(nodeid))
            found[nodeid] = list(questions) if questions else None
        return found

    def _stored_inputs(self, key: str) -> Any:
        """The inputs a judgment store entry records, from the stores the run used (else None)."""
        from .judge.store import JudgmentStore

        if not self.stores and self.settings.store_dir:  # the xdist controller judged nothing itself
            store = JudgmentStore(self.settings.store_dir)
            self.stores[store.directory] = store
        for store in self.stores.values():
            record = store.read_json(key)
            if record is not None:
                return record.get("inputs")
        return None

    def worker_finished(self, output: Mapping[str, Any] | None, crashed: bool) -> None:
        """xdist: a worker finished; take its judge figures and the judgments it used."""
        if crashed:
            self.worker_crashed = True
            if not (output or {}).get("ragmetrics"):
                # What it judged is known to it alone: the figures say they leave it out.
                self.stats.partial = (
                    "an xdist worker crashed before it reported: the judge calls, tokens and cost of "
                    "the tests it ran are not counted"
                )
        collected = (output or {}).get("ragmetrics_collected")
        if collected:
            self.suite.collected = (int(collected[0]), str(collected[1]))
        files = (output or {}).get("ragmetrics_files")
        if files:
            self.suite.files = dict(files)
        self.worker_skipped.update((output or {}).get("ragmetrics_skipped") or {})
        data = (output or {}).get("ragmetrics")
        if data:
            self.suite.deselected = self.suite.deselected or bool(data.get("deselected"))
            self.worker_stats.append(data["stats"])
            self.used_keys.update(data["used_keys"])
            for key, (kind, classes) in (data.get("answer_classes") or {}).items():
                self.answer_classes[key] = (kind, tuple(classes))
            if data.get("store_keys") is not None:
                self._add_store_keys(data["store_keys"])
            if data.get("control_samples"):
                self._pool().merge(data["control_samples"])

    def _add_store_keys(self, keys: Iterable[str]) -> None:
        self.store_keys = (self.store_keys or set()) | set(keys)

    # -- the end of the run ---------------------------------------------------------------------------
    def _close(self, session: pytest.Session) -> None:
        """Close the judges (each records what it received), the judging loop and the batch file.

        After a Ctrl-C the judges wait for the answers already paid for, saying so; a second Ctrl-C
        stops that wait (see :meth:`finish`). Safe to call again after an interrupt cut it short.
        """
        judges = [e.built_judge for e in self.evaluators.values() if e.built_judge is not None]
        if session.exitstatus == pytest.ExitCode.INTERRUPTED and not self.interrupted_again:
            waiting = sum(judge.in_flight() for judge in judges)
            if waiting:
                from .engine import waiting_line

                self._say(waiting_line(waiting))
        for evaluator in self.evaluators.values():
            judge = evaluator.built_judge
            if judge is not None and judge.store is not None:
                self._add_store_keys(judge.store.keys())
                self.stores[judge.store.directory] = judge.store
            try:
                evaluator.close(wait=not self.interrupted_again)
            except KeyboardInterrupt:
                self.interrupted_again = True  # it recorded what it received; the others need not wait
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        if self.batch is not None:
            self.batch.close()

    def finish(self, session: pytest.Session) -> None:
        """The end of the run: the judge check, then (on an xdist worker) the output for the
        controller, else the gates, the report, its files and hooks, and the exit status.

        A Ctrl-C after the one that stopped the run ends it with one line: while the judges wait for
        answers on their way, the wait stops and the rest of the end runs; anywhere else, the end
        stops there, once the judges have recorded what they received.
        """
        try:
            self._finish(session)
        except KeyboardInterrupt:
            self.interrupted_again = True
            self._close(session)
        if self.interrupted_again:
            from .engine import INTERRUPTED_AGAIN

            self._say(INTERRUPTED_AGAIN)

    def _say(self, line: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(line)

    def _finish(self, session: pytest.Session) -> None:
        config = self.config
        if self.prefetcher is not None:
            self.prefetcher.stop()
        from ._run import runs_no_test

        # Whether a test ran, decided once for the judge check, the controls, the baseline and the
        # report files. Only a run of the tests checks the judge and judges controls. An export run
        # judges nothing (they wait for the real run); a run that lists (--co, --fixtures) or only
        # sets up (--setup-only, --setup-plan) would pay for the labelled set's judgments to show a
        # list, and one whose tests all skipped scored nothing that rests on the judge.
        self.none_ran = runs_no_test(config, self.suite.ran, self.suite.skipped)
        ran_tests = (
            session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
            and self.batch is None
            and self.none_ran is None
        )
        for evaluator in self.evaluators.values():
            evaluator.scored = None  # the judge check's own items are not samples the run scored
        if self.labels is not None and ran_tests:
            from .calibration.check import run_judge_check

            # Through the run's own evaluator: the same cache and store, and its used judgments count.
            source = self.shown(str(self.settings.judge_check))
            self.judge_check = run_judge_check(
                self.evaluator(self.settings), self.labels, self.floors, source
            )
            if not self.judge_check["passed"]:
                _fail(session)
        # Unconfigured, every setting has its default (no controls): not resolved for nothing. A worker
        # sends the samples it scored instead (see _worker_output).
        if self.configured and self.settings.judge_controls and ran_tests and not is_worker(config):
            self.controls = self._judge_controls()
            if self.controls is not None and not self.controls["passed"]:
                _fail(session)
        self._close(session)
        if self.batch is not None and not is_worker(config):
            self.batch_summary = self.batch.finish()
        used = bool(self.rows or self.evaluators or self.worker_stats or self.errors)
        if is_worker(config):
            output = config.workeroutput  # type: ignore[attr-defined]
            # Also from a worker that judged nothing: the controller's report records the suite.
            output["ragmetrics_collected"] = self.suite.collected
            if used or (self.configured and self._report_asked()):
                # What the controller's report and prune record need; any worker's files will do.
                output["ragmetrics_files"] = self.suite.file_digests(self.shown)
                known = {nodeid: q for nodeid, q in self._skipped_questions().items() if q is not None}
                if known:
                    output["ragmetrics_skipped"] = known
            if used:
                output["ragmetrics"] = self._worker_output()
            return
        if not (used or (self.configured and self._report_asked())):
            return  # the plugin was not used in this run: build nothing, import nothing
        s = self.settings
        from ._run import record_for_prune

        self.unused_store_entries = record_for_prune(
            session,
            s.cache_dir or self.default_cache_dir(),
            used=self.used_keys,
            store=self.store_keys,
            deselected=self.suite.deselected,
            worker_crashed=self.worker_crashed,
            not_run=self._not_run(),
            skipped=self._skipped_questions(),
            inputs_of=self._stored_inputs,
        )
        for store in self.stores.values():
            store.close()  # the shards read for the record above
        if self.gates:
            from .report.build import evaluate_run_gates

            self.gate_results = evaluate_run_gates(self.gates, self.rows, partial=self._partial())
            if any(not g["passed"] for g in self.gate_results):
                _fail(session)
        report = self._report()
        if any(not g["passed"] for g in report["summary"].get("regression_gates") or []):
            _fail(session)
        if (report["summary"].get("baseline") or {}).get("refused"):
            _fail(session)
        if self.stats.refused:  # the judge call cap stopped the run
            _fail(session)
        if self.stats.unrecorded:  # recording was asked for and failed
            _fail(session)
        config.hook.pytest_ragmetrics_report(report=report)
        from .report.build import write_reports

        # A baseline replaces the accepted one: a run that ran no test (--collect-only, none
        # selected, stopped before the first) or broke off would replace it with a fragment.
        unsaved = self._baseline_unsaved(session) if s.save_baseline else None
        baseline = report
        if s.save_baseline and unsaved is None and self._partial():
            baseline, unsaved = self._partial_baseline(report, s.save_baseline)
        if s.save_baseline and unsaved is not None:
            self.baseline_unsaved = f"the baseline was not saved to {self.shown(s.save_baseline)}: {unsaved}"
        none_ran = self.none_ran
        if none_ran is None:
            self.unwritten = write_reports(report, s, save_baseline=unsaved is None, baseline=baseline)
        else:
            # A run that only lists or sets up its tests, or whose tests were all deselected or
            # skipped, scored nothing: the report files of the last run that did are left as they
            # were, as the baseline is.
            files = [self.shown(path) for path in (s.report_json, s.report_md, s.report_html) if path]
            if files:
                self.reports_kept = f"no test ran ({none_ran}); {', '.join(files)} left as they were"
        if self.unwritten:  # asked for and missing: CI would go on without it
            _fail(session)
        self.final_report = report

    def _not_run(self) -> bool:
        """Whether a test this run collected never started (each test's setup report says it did)."""
        collected = self.suite.collected_count
        return collected is not None and len(self.suite.ran) < collected

    def _baseline_unsaved(self, session: pytest.Session) -> str | None:
        """Why this run's scores may not replace the baseline file, or None when they may."""
        status = session.exitstatus
        if status == pytest.ExitCode.INTERRUPTED:
            return "the run was interrupted; the file there is unchanged"
        if session.shouldstop or session.shouldfail:  # the tests after the stop have no scores
            return "the run stopped before its end (-x, --maxfail, --sw); the file there is unchanged"
        if self.worker_crashed:  # its test has no scores, yet counts as run: a full save drops it
            return "an xdist worker crashed (its test has no scores); the file there is unchanged"
        if self.none_ran is not None:
            return f"no test ran ({self.none_ran}); the file there is unchanged"
        if status not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED):
            return f"the run ended with exit code {int(status)}; the file there is unchanged"
        return None

    def _partial_baseline(self, report: dict[str, Any], path: str) -> tuple[dict[str, Any], str | None]:
        """What a partial run saves as the baseline at ``path``: its own tests' entries, and the
        entries the file holds of the tests it did not run (a skipped test left its entries too);
        or why it saves nothing (the file there cannot be read to keep them, or its entries were
        scored differently from this run's)."""
        from .report.load import load_report
        from .report.merge import keep_untouched_entries

        try:
            if not os.path.isfile(path) or os.path.getsize(path) == 0:
                return report, None  # no baseline yet: this run's entries are all there is
            earlier = load_report(path)
        except (OSError, ConfigError) as exc:
            return report, (
                f"a partial run keeps the entries of the tests it did not run, and the file there "
                f"cannot be read for them ({exc}); it is unchanged"
            )
        replaced = (self.suite.ran - set(self.suite.skipped)) | {row["nodeid"] for row in report["results"]}
        baseline, kept, differences = keep_untouched_entries(earlier, report, replaced)
        if baseline is None:  # a file of mixed scores, which every later comparison would refuse
            return report, (
                f"this partial run scored differently from the entries of the {kept} test(s) it did not "
                f"run ({'; '.join(differences)}); the file there is unchanged: save the baseline from a "
                "full run"
            )
        if kept:
            self.baseline_kept = (
                f"a partial run: the baseline {self.shown(path)} keeps the entries of the {kept} test(s) "
                "it did not run"
            )
        return baseline, None

    def _judge_controls(self) -> dict[str, Any] | None:
        """Judge the negative and positive controls, drawn from the samples the run scored, for the
        judgment kinds the run used; the report's section."""
        from .calibration.check import CONTROL_STATISTICS
        from .calibration.controls import control_pairs, positive_controls, run_controls

        s = self.settings
        samples = self.control_pool.samples() if self.control_pool is not None else []
        count, seed = s.judge_controls or 0, s.seed or 0
        pairs = control_pairs(samples, count, seed) + positive_controls(samples, count, seed)
        kinds = {kind for kind, _ in self.answer_classes.values()}
        floors = [f for f in self.floors if f.stat in CONTROL_STATISTICS]
        return run_controls(
            self.evaluator(self.settings),
            pairs,
            kinds,
            floors,
            wanted=self.settings.judge_controls,
        )

    def summary_lines(self) -> list[tuple[str, str]]:
        """Lines for the end of pytest's terminal summary, as ``(text, colour)``: without
        ``--rag-report``, the failed checks of the run; then the negative controls and a stop by a
        spending cap."""
        lines = []
        if not self.settings.report and self.final_report is not None:
            from .report.closing import failure_lines

            lines += failure_lines(self.final_report)
        if self.controls is not None:
            from .calibration.controls import control_lines

            lines += control_lines(self.controls)
        if self.batch_summary is not None:
            lines += self._batch_lines(self.batch_summary)
        if self.batch_kept is not None:
            path = self.shown(self.settings.batch or "")
            kept = f"ragmetrics: --rag-batch: no test ran ({self.batch_kept}); {path} is left as it was"
            lines.append((kept, "yellow"))
        if self.stats.refused:
            from .judge.budget import stopped_message
            from .settings import wording

            stats = self.stats
            refused = f"{stats.refused} judge call(s) refused"
            message = "ragmetrics: " + stopped_message(
                stats.max_judge_calls, stats.max_judge_tokens, refused, wording(True)
            )
            first = next((e["nodeid"] for e in self.errors if e.get("error") == "JudgeCallCapReached"), None)
            if first is not None:
                message += f"; the first test it stopped: {first}"
            lines.append((message, "red"))
        repeated = Counter(e.get("message", "") for e in self.errors if e.get("message"))
        for message, count in sorted(repeated.items()):
            if count > 1:  # one cause failing many tests (no key, the judge gone): said once, counted
                text = f"ragmetrics: {count} tests failed with the same error: {message[:200]}"
                lines.append((text, "red"))
        lines += [(f"ragmetrics: {message}", "red") for message in self.unwritten]
        if self.baseline_unsaved is not None:
            lines.append((f"ragmetrics: {self.baseline_unsaved}", "yellow"))
        if self.baseline_kept is not None:
            lines.append((f"ragmetrics: {self.baseline_kept}", "green"))
        if self.reports_kept is not None:
            lines.append((f"ragmetrics: {self.reports_kept}", "yellow"))
        if self.stats.unrecorded:
            lines.append(
                (
                    f"ragmetrics: recording failed: {self.stats.unrecorded_reason}; "
                    f"{self.stats.unrecorded} judgment(s) were not recorded for replay",
                    "red",
                )
            )
        return lines

    def _batch_lines(self, summary: ExportSummary) -> list[tuple[str, str]]:
        """What an export run wrote, what it would cost, and what to do next."""
        path = self.shown(summary.path)
        if not summary.requests:
            # An earlier export at the path is replaced only by one with a request to write.
            kept = "; the export there is left as it was" if Path(summary.path).exists() else ""
            return [(f"ragmetrics: --rag-batch: every judgment the tests need is recorded; nothing to "
                     f"write to {path}{kept}", "green")]  # fmt: skip
        s = self.settings
        files = ", ".join(self.shown(str(Path(summary.path).parent / f)) for f in summary.files)
        cost = summary.cost(s.price_input, s.price_output)
        priced = (
            f"at most ${cost:,.4f} at the configured prices (batch APIs usually bill half of that)"
            if cost is not None
            else "set --rag-price-input and --rag-price-output for what that costs"
        )
        return [
            (
                f"ragmetrics: {summary.requests:,} judge request(s) written to {files} instead of calling "
                f"the judge: about {summary.prompt_tokens:,} prompt tokens and at most "
                f"{summary.completion_tokens:,} completion tokens, {priced}",
                "yellow",
            ),
            (
                f"ragmetrics: next: python -m pytest_ragmetrics store batch submit {path}, then store "
                f"batch status and store batch fetch (results judged elsewhere: store batch import "
                f"RESULTS.jsonl --batch {path}); then run the tests again",
                "yellow",
            ),
            (
                "ragmetrics: multi-step metrics (claims, then their verdicts) take one round per step: "
                "a request that needs another's answer is written by the export run after that answer "
                "is imported",
                "yellow",
            ),
        ]

    def _report_asked(self) -> bool:
        """A report, a gate or a baseline was asked for: the run reports even when no test judged."""
        s = self.settings
        return bool(
            self.gates
            or self.baseline is not None
            or s.save_baseline
            or s.report
            or s.report_json
            or s.report_md
            or s.report_html
        )

    def _worker_output(self) -> dict[str, Any]:
        return {
            "stats": self.stats.to_json(),
            "used_keys": sorted(self.used_keys),
            "store_keys": sorted(self.store_keys) if self.store_keys is not None else None,
            "deselected": self.suite.deselected,
            "answer_classes": {k: [kind, list(c)] for k, (kind, c) in self.answer_classes.items()},
            "control_samples": self.control_pool.to_json() if self.control_pool is not None else None,
        }

    def _report(self) -> dict[str, Any]:
        from .report.build import build_report

        for data in self.worker_stats:
            self.stats.merge_json(data)
        s = self.settings
        unused = self.unused_store_entries
        read = self.results_read()
        return build_report(
            self.rows,
            settings=s,
            stats=self.stats,
            gate_results=self.gate_results,
            unused_store_entries=None if unused is None else len(unused),
            errors=self.errors,
            shown=self.shown,
            default_cache_dir=self.default_cache_dir(),
            baseline=self.baseline,
            baseline_source=self.shown(s.baseline) if s.baseline else None,
            regression_gates=self.regression_gates,
            partial=self._partial(),
            allow_inconclusive=s.allow_inconclusive,
            allow_mixed=s.allow_mixed_baseline,
            judge_check=self.judge_check,
            judge_controls=self.controls,
            answers=self.answer_classes.values(),
            # Which tests ran and the digests of their files, for `report merge`: hashed only for a
            # report that is read, as the comparisons are given only to whoever reads them.
            suite=self.suite.to_json(self.shown) if read else None,
            label_warnings=self._label_warnings(),
            # The comparisons themselves only for whoever reads them: most of the report's cost.
            with_results=read,
        )

    def _partial(self) -> bool:
        """Tests were deselected (-k, -m, --lf), or paths / node ids were named on the command line,
        or a ``--rag-batch`` export skipped the tests whose judgments it wrote to be judged later,
        or a collected test never started (``--fixtures`` lists them, ``-x`` stopped before it)."""
        from ._run import selected_part

        exported = self.batch_summary is not None and self.batch_summary.requests > 0
        return exported or self._not_run() or selected_part(self.config, deselected=self.suite.deselected)

    def shown(self, path: str) -> str:
        """A path relative to the rootdir when inside it, so reports read the same on every checkout."""
        path = str(path)
        shown = self._shown.get(path)
        if shown is None:  # resolving asks the file system: once per path
            shown = self._shown[path] = _relative_to(path, self.config.rootpath)
        return shown

    def release(self) -> None:
        """Drop what the run kept for its report (results, answers, evaluators): the run is over,
        and pytest's last garbage collections need not walk through it."""
        self.rows = []
        self.final_report = None
        self.answer_classes = {}
        self.evaluators = {}
        self._last_evaluator = (None, None)
        self._marked_settings = {}
        self.used_keys = set()
        self.store_keys = None
        self.prefetcher = None
        self.items = None
        import signal

        if signal.getsignal(signal.SIGTERM) is _interrupt:  # set by _end_on_sigterm: back as it was
            with contextlib.suppress(ValueError):  # (not the main thread)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt("SIGTERM")


def _end_on_sigterm() -> None:
    """Make SIGTERM (a CI job's timeout, ``kill``) end the run as Ctrl-C does: the answers already
    sent are waited for and recorded, the report is written, the terminal says the run was
    interrupted. Only where SIGTERM still ends the process silently (no handler of the user's or of
    another plugin), from the main thread."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return
    with contextlib.suppress(OSError, ValueError):
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _interrupt)


#: xdist ``workerinput`` key naming the file of the run's judge spending budget.
BUDGET_INPUT_KEY = "ragmetrics_call_budget"


class _BudgetForWorkers:
    """Hands every xdist worker the file of the run's judge spending budget."""

    def __init__(self, path: str) -> None:
        self.path = path

    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[BUDGET_INPUT_KEY] = self.path


def _given_as(name: str, cli: Mapping[str, Any]) -> str:
    """The setting ``name`` as written where the run's value of it was given: its option when the
    command line gave it, else its environment variable when set, else its ini key."""
    from .options import OPTIONS_BY_NAME

    option = OPTIONS_BY_NAME[name]
    if cli.get(name) is not None:
        return option.cli_name
    return option.env_name if option.env_name in os.environ else option.ini_name


def _fail(session: pytest.Session) -> None:
    """A check of the whole run failed: the run fails, unless it already failed for another reason."""
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def _load_baseline(settings: Settings) -> dict[str, Any] | None:
    if settings.regression_gates and not settings.baseline:
        raise ConfigError(
            "regression gates need a baseline to compare with: set --rag-baseline=PATH (ini rag_baseline, "
            "env RAGMETRICS_BASELINE) to a report saved with --rag-save-baseline"
        )
    if not settings.baseline:
        return None
    baseline = Path(settings.baseline)
    if settings.save_baseline and not baseline.exists() and Path(settings.save_baseline) == baseline:
        return None  # the first run of a new baseline: nothing to compare with yet, this run saves it
    from .report.load import load_report

    return load_report(settings.baseline)


@functools.lru_cache(maxsize=256)  # asked for every comparison, nearly always about the same files
def _relative_to(path: str, root: Path) -> str:
    try:
        return Path(path).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError, RuntimeError):  # outside the rootdir; a symbolic link loop (RuntimeError
        return path  # before Python 3.13)
