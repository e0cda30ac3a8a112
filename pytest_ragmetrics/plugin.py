"""The pytest plugin (entry point ``ragmetrics``): options, marker, fixtures and hooks.

Each hook hands its work to the run's :class:`~pytest_ragmetrics.session.RagmetricsSession` in a few
lines. The session is made the first time the run needs it (:func:`_session`): at the start when
something is configured (an option, an ini key, a ``RAGMETRICS_*`` variable), else when a test first
uses the plugin (its marker, a ragmetrics fixture, an assertion helper). A suite that never does loads
the option table and these hooks, records which tests ran, and nothing else: the hooks and helpers of
a run with a session (:mod:`pytest_ragmetrics._plugin_session`), the built-in hook implementations,
the engine, the judge and the report renderers load when the run needs them. Disable it with
``-p no:ragmetrics``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

import pytest

from . import _scope, _suite

if TYPE_CHECKING:
    from collections.abc import Callable, Generator

    from .engine import Evaluator
    from .session import RagmetricsSession

_MARKER_HELP = (
    "ragmetrics(samples=PATH, method=METHOD, metrics=[NAMES], **settings): per-test ragmetrics settings, "
    "e.g. judge_model='gpt-4o'; samples=PATH parametrizes the rag_sample fixture with a golden set; "
    "metrics=[...] starts the scores the test takes together, at the first of them"
)

# Typed by annotation: subscripting StashKey at import would cost every run that loads the plugin.
_rows_key: pytest.StashKey[list[dict[str, Any]]] = pytest.StashKey()
_config_scope_key: pytest.StashKey[bool] = pytest.StashKey()
_marked_while_collecting_key: pytest.StashKey[bool] = pytest.StashKey()
_marked_when_collected_key: pytest.StashKey[bool] = pytest.StashKey()
_marked_key: pytest.StashKey[list[pytest.Item]] = pytest.StashKey()
_CONFIG_FIXTURE = "ragmetrics_config"
_suite_property_key: pytest.StashKey[Callable[[str, object], None]] = pytest.StashKey()
#: The run's ragmetrics session, once it needed one (see :func:`_session`).
session_key: pytest.StashKey[RagmetricsSession] = pytest.StashKey()
#: What the run recorded of its tests since its start: handed to its session when it is made.
_suite_key: pytest.StashKey[_suite.SuiteRecord] = pytest.StashKey()
#: The pytest session, once its tests are collected: a session made later starts from its items.
_collected_key: pytest.StashKey[pytest.Session] = pytest.StashKey()

#: pytest parses (and --help shows) "int" and "float" ini keys from 8.4 on; before, numbers are strings.
_NUMERIC_INI = getattr(pytest, "version_tuple", (0,)) >= (8, 4)


def ini_type(kind: str | None) -> str:
    """The ini type pytest is asked to parse an option's value as."""
    return kind if kind and (_NUMERIC_INI or kind not in ("int", "float")) else "string"


def _session(config: pytest.Config) -> RagmetricsSession:
    """The run's ragmetrics session, made and started the first time the run needs it."""
    session = config.stash.get(session_key, None)
    if session is None:
        from ._plugin_session import start_session

        session = config.stash[session_key] = start_session(
            config, config.stash[_suite_key], _rows_key, _suite_property_key
        )
        collected = config.stash.get(_collected_key, None)
        if collected is not None:  # made by a test: its run's tests are collected
            session.collected(collected, uses_marker=False)
    return session


def _asked_for(config: pytest.Config) -> bool:
    """The run configures ragmetrics (a ``--rag-*`` option, a ``RAGMETRICS_*`` variable, a
    configuration file that mentions a ``rag_`` key, a ``-o rag_...=`` override): its session starts
    with the run, so that a bad setting is a usage error before the first test."""
    import os

    from .options import OPTIONS, mentions_ini_keys, overridden_ini_keys

    inipath = config.inipath
    return (
        any(config.getoption("rag_" + o.name) is not None for o in OPTIONS if o.cli or o.repeat)
        or any(k.startswith("RAGMETRICS_") for k in os.environ)
        or (inipath is not None and mentions_ini_keys(inipath))
        or bool(overridden_ini_keys(config.getoption("override_ini")))
    )


# --- options, configuration ----------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    from .options import OPTIONS

    group = parser.getgroup("ragmetrics", "ragmetrics: retrieval and answer metrics judged by an LLM")
    for option in OPTIONS:
        if option.cli:
            kwargs: dict[str, Any] = {"dest": "rag_" + option.name, "default": None, "help": option.help}
            if option.flag:
                kwargs.update(action="store_const", const=True)
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
            type=ini_type(option.ini_type),  # type: ignore[arg-type]
            default=None,
        )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from . import hookspecs

    pluginmanager.add_hookspecs(hookspecs)


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", _MARKER_HELP)
    suite = config.stash[_suite_key] = _suite.SuiteRecord()
    suite_token = _suite.current_suite.set(suite)
    config.add_cleanup(lambda: _suite.current_suite.reset(suite_token))
    if config.pluginmanager.has_plugin("dsession"):  # the xdist controller: workers report progress
        from .progress import ControllerProgress

        config.pluginmanager.register(ControllerProgress(config), "ragmetrics-progress")
        _session(config).activate()  # the workers' reports carry the comparisons
    elif _asked_for(config):
        _session(config)
    if (
        config.pluginmanager.hasplugin("html")
        and config.getoption("htmlpath", None)
        and not hasattr(config, "workerinput")  # not an xdist worker: the controller writes the report
    ):
        from .pytest_html_scores import PytestHtmlScores

        config.pluginmanager.register(PytestHtmlScores(), "ragmetrics-pytest-html")
    token = _scope.current_run.set(lambda: _run_evaluator(config))
    config.add_cleanup(lambda: _scope.current_run.reset(token))


def _run_evaluator(config: pytest.Config) -> Evaluator:
    """The run's evaluator, for judging done outside a test (a session fixture, a conftest hook)."""
    session = _session(config)
    return session.evaluator(session.settings)


def pytest_unconfigure(config: pytest.Config) -> None:
    for name in ("ragmetrics-recorder", "ragmetrics-session"):
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)
    session = config.stash.get(session_key, None)
    if session is not None:
        session.release()


def pytest_report_header(config: pytest.Config) -> str | None:
    session = config.stash.get(session_key, None)
    return session.header() if session is not None else None


# --- marker, collection --------------------------------------------------------------------------


def _uses_marker(node: pytest.Item | pytest.Collector | Any) -> bool:
    """The node or one of its parents carries the ragmetrics marker.

    A node's keywords hold its markers' names and look up its parents': a dict lookup per level,
    cheaper than walking every marker of the chain for tests that have none.
    """
    return "ragmetrics" in node.keywords and node.get_closest_marker("ragmetrics") is not None


def _marked(node: pytest.Item, key: pytest.StashKey[bool]) -> bool:
    """``node`` (a test) or one of its parents carries the ragmetrics marker: :func:`_uses_marker`,
    asked of every test of every suite, so its parents' answer is asked once per parent and kept in
    the parent's stash under ``key``, where walking up the tree (node keywords look up their
    parents') would cost each test a call per level.

    Collection and the collected list keep their answers under keys of their own: a hook may put the
    marker on a module or class between the two.
    """
    for mark in node.own_markers:
        if mark.name == "ragmetrics":
            return True
    parent = node.parent
    if parent is None:
        return False
    stash = parent.stash
    try:  # Stash.get would raise and catch a KeyError the first time
        return stash[key]
    except KeyError:
        marked = stash[key] = _uses_marker(parent)
        return marked


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """``@pytest.mark.ragmetrics(samples=PATH)``: one test per sample of the golden set."""
    definition = metafunc.definition
    if not _marked(definition, _marked_while_collecting_key):
        return
    marks = definition.iter_markers("ragmetrics")
    name = next((m.kwargs["samples"] for m in marks if "samples" in m.kwargs), None)
    if name is not None:
        from ._plugin_session import parametrize_golden_set

        parametrize_golden_set(metafunc, name, _session(metafunc.config))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Validated here, not in pytest_generate_tests, so a bad argument is a usage error (exit 4)
    # rather than a collection error with a traceback.
    session = config.stash.get(session_key, None)
    if session is not None and session.usage_errors:
        raise pytest.UsageError("\n".join(session.usage_errors))
    seen: set[int] = set()
    marked = config.stash[_marked_key] = []
    for item in items:
        if not _marked(item, _marked_when_collected_key):
            continue
        marked.append(item)
        for mark in item.iter_markers("ragmetrics"):
            if id(mark) not in seen:
                seen.add(id(mark))
                if mark.args or mark.kwargs:
                    from ._plugin_session import check_marker

                    check_marker(item, mark)


def pytest_collection_finish(session: pytest.Session) -> None:
    # Only the tests seen with the marker before deselection can have it now.
    config = session.config
    marked = config.stash.get(_marked_key, [])
    selected = set(session.items) if marked else set()
    uses_marker = any(item in selected and _uses_marker(item) for item in marked)
    ragmetrics = _session(config) if uses_marker else config.stash.get(session_key, None)
    config.stash[_collected_key] = session
    if ragmetrics is not None:
        ragmetrics.collected(session, uses_marker)


# --- fixtures ------------------------------------------------------------------------------------


@pytest.fixture
def ragmetrics_config() -> dict[str, Any]:
    """Settings for the ragmetrics tests in scope; override in a conftest.py or module (like vcr_config)."""
    return {}


@pytest.fixture
def rag_evaluator(request: pytest.FixtureRequest, ragmetrics_config: Any) -> Evaluator:
    """The evaluator configured for this test (ini/env/CLI, ragmetrics_config fixture, marker)."""
    session = _session(request.config)
    return session.evaluator(session.test_settings(request.node, ragmetrics_config))


@pytest.fixture
def rag_sample() -> Any:
    """One sample of the golden set named by @pytest.mark.ragmetrics(samples=PATH).

    The marker parametrizes the test with its samples, which take this fixture's place, so this
    only runs for a test without one. It takes no ``request``: pytest would set one up for every
    test of a golden set, though none of them reads it.
    """
    raise pytest.UsageError("rag_sample needs @pytest.mark.ragmetrics(samples='path/to/golden.jsonl')")


@pytest.fixture(scope="session")
def _ragmetrics_suite_properties(request: pytest.FixtureRequest, record_testsuite_property: Any) -> None:
    """Keeps pytest's ``record_testsuite_property`` for the gates' outcomes, known only at the end of
    the run. Set up only in a run with gates or regression gates and ``--junitxml`` (an xdist
    controller runs no fixtures, so none there)."""
    request.config.stash[_suite_property_key] = record_testsuite_property


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Module | pytest.Class, name: str, obj: object) -> None:
    """Before a module's or class's tests are made: where ``ragmetrics_config`` is overridden (in the
    class, the module, a conftest above it or another plugin), its tests set it up, so that a score
    taken even in a fixture's teardown finds it. Elsewhere it is the default, and nothing is set up."""
    stash = collector.stash
    if _config_scope_key in stash:  # asked for every name in the module or class: one lookup
        return None
    stash[_config_scope_key] = True
    if hasattr(collector.obj, _CONFIG_FIXTURE) or (
        isinstance(collector, pytest.Module) and _config_overridden_above(collector)
    ):
        collector.add_marker(pytest.mark.usefixtures(_CONFIG_FIXTURE))
    return None


def _config_overridden_above(module: pytest.Module) -> bool:
    """A conftest in the module's directory or above, or another plugin, overrides ``ragmetrics_config``."""
    import sys
    from pathlib import Path

    manager = module.config.pluginmanager
    for plugin in manager.get_plugins():
        if _CONFIG_FIXTURE in getattr(plugin, "__dict__", ()) and plugin is not sys.modules[__name__]:
            name = manager.get_name(plugin) or ""
            if not name.endswith("conftest.py"):  # another plugin's fixtures are seen everywhere
                return True
            if Path(name).parent in module.path.parents:
                return True
    return False


def _evaluator_for(item: pytest.Item) -> Evaluator:
    """The evaluator for ``item``'s settings (see :func:`pytest_ragmetrics.settings.for_test`)."""
    session = _session(item.config)
    # None where ragmetrics_config is the default, and for a score taken in a fixture set up before it.
    config = getattr(item, "funcargs", {}).get(_CONFIG_FIXTURE)
    return session.evaluator(session.test_settings(item, config))


# --- running tests -------------------------------------------------------------------------------


def _record(item: pytest.Item, row: dict[str, Any], number: int) -> None:
    """The ``number``-th comparison made in ``item``: kept for its report and as JUnit XML properties."""
    _record_in(_session(item.config), item, row, number)


def _record_in(session: RagmetricsSession, item: pytest.Item, row: dict[str, Any], number: int) -> None:
    """:func:`_record`, with the run's session known."""
    session.record(row)
    stash = item.stash  # looked in with `in`: Stash.get raises and catches a KeyError when absent
    if _rows_key in stash:  # recorded since the last report of this test's phases
        stash[_rows_key].append(row)
    else:
        stash[_rows_key] = [row]
    if session.junit_properties:
        item.user_properties.extend(session.comparison_properties(number, row))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, Any]:
    """Make the test current for the assertion helpers (its evaluator is built on first use), and
    judge the next tests' scores ahead while it runs. All a test pays while nothing is judged."""
    stash = item.config.stash
    # Looked for with `in`: Stash.get would raise and catch a KeyError in every test of a run
    # without a session.
    session = stash[session_key] if session_key in stash else None  # noqa: SIM401
    # Once the run has its session, a test records its comparisons in it without asking the stash
    # for it at each one.
    record = _record if session is None else functools.partial(_record_in, session)
    scope = _scope.TestScope(item, _evaluator_for, record)
    token = _scope.current_test.set(scope)
    if session is not None and session.prefetcher is not None:
        session.prefetcher.before(item)  # the next tests' scores start while this one runs
    try:
        return (yield)
    except BaseException:
        session = stash.get(session_key, None)
        if session is not None and session.prefetcher is not None:
            session.prefetcher.stop()  # Ctrl-C: nothing more is judged for tests that will not run
        raise
    finally:
        _scope.current_test.reset(token)
        # The test's reports hold its rows; its checks (results, verdicts) would only outlive it.
        scope.checks.clear()
        # Also when this test was the first to use the plugin.
        prefetcher = stash[session_key].prefetcher if session_key in stash else None
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
        from ._plugin_session import warn_unused

        warn_unused(unused)


# What every run with the plugin records from its start, in case a test uses the plugin later (the
# run's report records its suite): which tests were collected, deselected, run and skipped.


@pytest.hookimpl(wrapper=True, tryfirst=True, specname="pytest_collection_modifyitems")
def pytest_collection_modifyitems_record(
    config: pytest.Config, items: list[pytest.Item]
) -> Generator[None, None, None]:
    """The tests collected, before any plugin deselects (a second implementation of the hook, named
    for what it does)."""
    config.stash[_suite_key].collect(items)
    return (yield)


def pytest_deselected(items: list[pytest.Item]) -> None:
    if items:  # a partial run: its used judgments say nothing about the store
        items[0].config.stash[_suite_key].deselected = True


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    # Every report of every test comes here, used or not: the test ran (its setup report says so
    # once), and may have been skipped. A report names no run: the run's record is the current one.
    suite = _suite.current_suite.get()
    if suite is not None:
        if report.when == "setup":
            suite.ran.add(report.nodeid)
        if report.outcome == "skipped":
            suite.count_skipped(report)


def pytest_collectreport(report: pytest.CollectReport) -> None:
    suite = _suite.current_suite.get()
    if report.skipped and suite is not None:  # a module skipped as a whole (importorskip, ...)
        suite.count_skipped(report)


# --- the end of the run --------------------------------------------------------------------------


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    session = config.stash.get(session_key, None)
    if session is not None:
        from ._plugin_session import terminal_summary

        terminal_summary(terminalreporter, config, session)
