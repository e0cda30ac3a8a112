"""Judging ahead: the scores the next tests will ask for are started while the current one runs.

A test asks for one score at a time and waits for it, so a suite of one test per sample keeps at most
one metric's chunks in flight, whatever ``--rag-concurrency`` allows. The plugin knows more than one
test does:

* **the plan of a parametrized group**: the tests of ``@pytest.mark.ragmetrics(samples=...)`` differ
  only in their ``rag_sample``. Each score the first of them asks for on its sample is started for the
  next tests of the group, each on its own sample, as soon as it is asked for (after the first test's
  own request, so that one goes first);
* **the plan of the last run**: every test's scores (metric, method, the settings that differ from
  the run's, and the sample unless it was the test's ``rag_sample``) are kept in pytest's cache
  (``config.cache``), and started for the next tests of the following run, so a rerun after a judge
  model, prompt or refresh change judges at full concurrency from its first test;
* **the plan of a test's own sample**: a test that builds its sample in its body (a retriever
  called there) cannot be judged before it runs, but the tests of one parametrized function
  (any parametrization) usually ask for the same scores. The scores a passing test asked for on the
  sample of its first score, in order, are that function's plan, narrowed by each later passing
  test to the scores it also asked for (so a test that branches does not have started for it what
  most tests do not use). When a later test's first score is the plan's first, the plan's other
  scores are started on that same sample object at once: the test waits about one judge call
  instead of one per assertion. Scores on other samples are not started;
* **the bodies of the next tests** (``--rag-run-ahead``): once a function has a plan and the judge
  is needed, before a test's body runs, the bodies of the tests of the window (itself first, unless
  it ran ahead already) run up to their first score (:mod:`._bodies`), and the plan is started on
  the sample each one built.

Scores are started for a window of tests ahead of the running one (as many tests as judge calls
allowed at once, at least 8), on the shared judging loop, so every judge call still passes the
concurrency bound. A test takes the result started for it instead of scoring again; results nobody
took are dropped when their test ends (those started within the test are left to finish: a test
that fails at its first assertion has paid for the rest of its plan, whose answers are cached and
used by the next run). Nothing is started in replay mode (there is no judge to keep busy). Under
pytest-xdist workers only a test's own sample has its plan started: a worker does not know which
tests it runs next, but it knows the test it is running. When the run stops early (``-x``,
``--maxfail``, Ctrl-C), everything started is cancelled as soon as the failure that stops it is
reported: what waits for the concurrency bound is never sent, only calls already in flight are paid.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from . import _scope

if TYPE_CHECKING:
    import pytest

    from .engine import Evaluator
    from .results import MetricResult
    from .sample import RagSample
    from .settings import Settings

#: Where the plans of the last run live in pytest's cache.
PLANS_KEY = "ragmetrics/plans"
#: Tests whose plans are kept at most (the most recent run's).
MAX_PLANS = 50_000
#: Tests started ahead of the running one, at least (else as many as judge calls allowed at once).
MIN_WINDOW = 8

# One score a test asked for: metric, method, the settings that differ from the run's, and the
# sample as JSON (None: the test's rag_sample).
Call = tuple[str, "str | None", dict[str, Any], "dict[str, Any] | None"]


def sample_to_json(sample: RagSample) -> dict[str, Any]:
    """A sample's fields as JSON (metadata left out: it does not take part in scoring)."""
    data: dict[str, Any] = {}
    for f in dataclasses.fields(sample):
        if f.name == "metadata":
            continue
        value = getattr(sample, f.name)
        if isinstance(value, tuple):
            value = list(value)
        elif hasattr(value, "items"):
            value = dict(value)
        data[f.name] = value
    return data


def sample_from_json(data: Any) -> RagSample | None:
    from .sample import RagSample

    try:
        return RagSample(**data)
    except (TypeError, ValueError):
        return None  # a plan written by another version, or edited: nothing to start


def settings_diff(settings: Settings, base: Settings) -> dict[str, Any]:
    """The settings that differ from the run's, as JSON."""
    if settings is base:  # nearly every score of a run: its tests set nothing of their own
        return {}
    diff: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if value != getattr(base, f.name):
            diff[f.name] = list(value) if isinstance(value, tuple) else value
    return diff


def apply_diff(base: Settings, diff: dict[str, Any]) -> Settings | None:
    from .errors import ConfigError

    if not diff:
        return base
    changes = {name: tuple(v) if isinstance(v, list) else v for name, v in diff.items()}
    try:
        return base.replace(**changes)
    except (ConfigError, TypeError, ValueError):
        return None


def _rag_sample(item: pytest.Item) -> RagSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("rag_sample")
    if sample is None:
        return None
    from .sample import RagSample

    return sample if isinstance(sample, RagSample) else None


def _function(item: pytest.Item) -> tuple[str, str] | None:
    """The parametrized tests of one function, whatever their parameters: one group."""
    if getattr(item, "callspec", None) is None:
        return None
    return (item.parent.nodeid if item.parent is not None else "", getattr(item, "originalname", item.name))


def _group(item: pytest.Item) -> tuple[str, str] | None:
    """Tests parametrized by ``rag_sample`` from one function: one group."""
    if _rag_sample(item) is None:
        return None
    return _function(item)


class Prefetcher:
    """Starts the scores the next tests will ask for; hands each test the results started for it.

    ``evaluator_for(settings)`` gives the run's evaluator for some settings; ``settings`` are the
    run's. ``plans`` are the last run's (from :func:`load_plans`); ``active`` is False where nothing
    may be started for the tests to come (replay, xdist workers): plans are still learned and
    recorded, and outside replay a test's own sample still has its plan started at its first score.
    """

    def __init__(
        self,
        settings: Settings,
        evaluator_for: Any,
        plans: dict[str, list[Call]] | None = None,
        *,
        active: bool = True,
    ) -> None:
        self.settings = settings
        self._evaluator_for = evaluator_for
        self.previous = plans or {}
        self.active = active and settings.cache != "replay"
        #: The tests to come run here, in order (not an xdist worker): their score records may be read ahead.
        self.ordered = active
        #: Whether a running test's own sample may have its plan started (all but replay).
        self.within = settings.cache != "replay"
        self.window = max(MIN_WINDOW, settings.concurrency or MIN_WINDOW)
        self._lock = threading.Lock()
        self._items: Sequence[pytest.Item] = ()
        self._positions: dict[str, int] = {}
        self._started_to = 0  # items before this index have had their scores started
        # (evaluator id, sample, metric, method) -> (item nodeid, future, started within the test)
        self._pending: dict[tuple[Any, ...], tuple[str, concurrent.futures.Future[MetricResult], bool]] = {}
        #: Scores started within a test that it did not take, left to finish (and be cached).
        self._finishing: set[concurrent.futures.Future[MetricResult]] = set()
        self._groups: dict[tuple[str, str], list[tuple[Evaluator, str, str | None]]] = {}
        #: The test each group's plan is being learned from (its first test to ask for a score).
        self._teachers: dict[tuple[str, str], str] = {}
        #: Per parametrized function: the scores each of its passing tests asked for on the sample of
        #: its first score, in order (only those every such test asked for).
        self._sample_plans: dict[tuple[str, str], list[tuple[Evaluator, str, str | None]]] = {}
        self._passed: set[str] = set()
        #: The scores each test of this run asked for (recorded for the next run).
        self.plans: dict[str, list[Call]] = {}
        self._current: dict[str, list[tuple[Evaluator, RagSample, str, str | None]]] = {}
        #: Scores of the window were not started because every score so far was served from
        #: records: they are started once one needs the judge.
        self._deferred = False
        #: Whether the bodies of the next tests of a parametrized function are run up to their first
        #: score before a test's body (``--rag-run-ahead``; see :mod:`._bodies`).
        self.bodies = settings.run_ahead and self.active
        self._ahead_to = 0  # items before this index have been considered for running ahead
        self.started = 0
        self.claimed = 0

    # --- the engine asks -----------------------------------------------------------------------
    def claim(
        self, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> concurrent.futures.Future[MetricResult] | None:
        scope = _scope.current_test.get()
        if scope is not None:
            self._current.setdefault(scope.nodeid, []).append((evaluator, sample, metric, method))
            if self._deferred and evaluator.judging:
                self._resume(scope.nodeid)
        try:
            key = (id(evaluator), sample, metric, method)
            with self._lock:
                entry = self._pending.pop(key, None)
        except TypeError:  # a sample that cannot be hashed is never started ahead
            return None
        if entry is None or entry[1].cancelled():
            if scope is None:
                return None
            own = self._teach(scope.nodeid, evaluator, sample, metric, method)
            return own if own is not None else self._follow(scope.nodeid, evaluator, sample, metric, method)
        self.claimed += 1
        return entry[1]

    def _resume(self, nodeid: str) -> None:
        """The first score that needs the judge: start what was passed over while every score was
        served from records, the running test's scores it has not asked for yet first, then the
        window after it."""
        self._deferred = False
        position = self._positions.get(nodeid)
        if not self.active or position is None:
            return
        try:
            asked = {(id(ev), s, m, meth) for ev, s, m, meth in self._current.get(nodeid, [])[:-1]}
        except TypeError:  # a sample that cannot be hashed
            asked = None
        if asked is not None:
            for evaluator, sample, metric, method in self._predicted(self._items[position]):
                if (id(evaluator), sample, metric, method) not in asked:
                    self._start_one(nodeid, evaluator, sample, metric, method)
        for later in self._items[position + 1 : self._started_to]:
            self._start(later)

    def _follow(
        self, nodeid: str, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> concurrent.futures.Future[MetricResult] | None:
        """A test's first score, on a sample it may have built itself (a retriever called in its
        body): when it is the first score of the plan its function's earlier tests followed, start it,
        then the plan's other scores on the same sample, so the test waits about one judge call
        instead of one per assertion."""
        if not self.within or evaluator.settings.cache == "replay" or not evaluator.judging:
            return None  # so far served from records: nothing worth starting (see Evaluator.score)
        if len(self._current.get(nodeid, ())) != 1:
            return None  # not the test's first score
        position = self._positions.get(nodeid)
        function = _function(self._items[position]) if position is not None else None
        plan = self._sample_plans.get(function) if function is not None else None
        if not plan or len(plan) < 2 or plan[0] != (evaluator, metric, method):
            return None
        own = evaluator.submit_score(sample, metric, method)
        for other, other_metric, other_method in plan[1:]:
            self._start_one(nodeid, other, sample, other_metric, other_method, within=True)
        return own

    def _teach(
        self, nodeid: str, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> concurrent.futures.Future[MetricResult] | None:
        """The first test of a parametrized group asks for a score of its own sample: start it, then
        the same score for the group's next tests, without waiting for the test to end.

        A test asks for one score at a time, so learning the group's plan only once its first test
        is over would leave the judge nearly idle for as long as that test takes. The test's own
        score is started first, so its calls are sent before those started for the tests after it
        (a failing first test under ``-x`` pays for little more than what is in flight).
        """
        if not self.active:
            return None
        position = self._positions.get(nodeid)
        if position is None:
            return None
        item = self._items[position]
        group = _group(item)
        if group is None or sample is not _rag_sample(item):
            return None
        learned = self._groups.get(group)
        if learned is None:
            learned = self._groups[group] = []
            self._teachers[group] = nodeid
        elif self._teachers.get(group) != nodeid:
            return None  # the plan was learned from another test of the group
        call = (evaluator, metric, method)
        if call in learned:
            return None  # asked again: scored as usual
        learned.append(call)
        if not evaluator.judging:
            return None  # so far served from records: nothing worth starting ahead (see Evaluator.score)
        own = evaluator.submit_score(sample, metric, method)
        for later in self._items[position + 1 : self._started_to]:
            later_sample = _rag_sample(later)
            if _group(later) == group and later.nodeid not in self.previous and later_sample is not None:
                self._start_one(later.nodeid, evaluator, later_sample, metric, method)
        return own

    def _run_ahead(self, scope: _scope.TestScope, function: tuple[str, str], position: int) -> None:
        """Run the bodies of the tests of the window from the running one on (those of its function
        not run ahead yet, itself first) up to their first score, which starts the function's plan on
        the sample each one built."""
        from . import _bodies

        if scope.evaluator.settings.cache == "replay" or _bodies.timed():
            return  # nothing would be started; or a timer's exception must reach the running test
        running = self._items[position]
        start = max(self._ahead_to, position)
        end = min(len(self._items), position + 1 + self.window)
        if start >= end:
            return
        self._ahead_to = end
        marks = _marks(running)
        for item in self._items[start:end]:
            if not self.active:
                return  # stopped by a body (Ctrl-C) or the run
            if _function(item) != function or _marks(item) != marks:
                continue
            call = _bodies.body(item, running)
            if call is None:
                continue
            ahead = _scope.TestScope(item.nodeid, lambda: scope.evaluator, _dropped)
            ahead.ahead = functools.partial(self._first_score, item.nodeid, function)
            _bodies.run(call, ahead)

    def _first_score(
        self,
        nodeid: str,
        function: tuple[str, str],
        evaluator: Evaluator,
        sample: RagSample | None,
        metric: str,
        method: str | None,
    ) -> None:
        """A body run ahead asked for its first score: when it is the first of its function's plan,
        start the plan on that sample for the test; either way the body stops here."""
        from ._bodies import Ahead

        plan = self._sample_plans.get(function)
        if sample is not None and plan and plan[0] == (evaluator, metric, method):
            for other, other_metric, other_method in plan:
                self._start_one(nodeid, other, sample, other_metric, other_method)
        raise Ahead

    def coming_samples(self, count: int) -> list[RagSample]:
        """The ``rag_sample`` of the (at most) ``count`` tests after the running one, in order: a warm
        run reads their score records with the running test's. None under xdist workers."""
        scope = _scope.current_test.get()
        position = self._positions.get(scope.nodeid) if scope is not None and self.ordered else None
        if position is None:
            return []
        coming = (_rag_sample(item) for item in self._items[position + 1 : position + 1 + count])
        return [sample for sample in coming if sample is not None]

    # --- pytest tells ---------------------------------------------------------------------------
    def calling(self, item: pytest.Item) -> None:
        """``item``'s body is about to run, its fixtures set up: with ``--rag-run-ahead``, once its
        function has a plan and the judge is needed, run the bodies of the window's tests (``item``
        itself unless it ran ahead already) up to their first score, before any of them runs."""
        if not self.bodies or not self.active:
            return
        function = _function(item)
        if function is None:
            return
        plan = self._sample_plans.get(function)
        scope = _scope.current_test.get()
        position = self._positions.get(item.nodeid)
        if plan and plan[0][0].judging and scope is not None and position is not None:
            self._run_ahead(scope, function, position)

    def collected(self, items: Sequence[pytest.Item]) -> None:
        self._items = items
        self._positions = {item.nodeid: i for i, item in enumerate(items)}

    def before(self, item: pytest.Item) -> None:
        """``item`` starts: make sure the scores of the window after it have been started."""
        if not self.active:
            return
        position = self._positions.get(item.nodeid)
        if position is None:
            return
        end = min(len(self._items), position + 1 + self.window)
        if self.previous or self._groups:  # else nothing can be predicted: a plain suite pays nothing
            for i in range(max(self._started_to, position), end):
                self._start(self._items[i])
        self._started_to = max(self._started_to, end)

    def reported(self, report: pytest.TestReport) -> None:
        """A test phase was reported: a test whose body passed teaches its function's plan."""
        if report.when == "call" and report.passed and not hasattr(report, "wasxfail"):
            self._passed.add(report.nodeid)

    def after(self, item: pytest.Item) -> None:
        """``item`` ended: learn its plan, drop what was started for it and not taken.

        What was started within the test (on its own sample) and not taken is left to finish: those
        calls are already paid, and their answers are cached for the next run.
        """
        calls = self._current.pop(item.nodeid, [])
        passed = item.nodeid in self._passed
        self._passed.discard(item.nodeid)
        function = _function(item)
        if function is not None and calls and passed:
            self._learn(function, calls)
        if not calls and not self._pending and item.nodeid not in self.previous:
            return  # it asked for nothing, and nothing was started for it
        own = _rag_sample(item)
        if calls or item.nodeid in self.previous:
            self.plans[item.nodeid] = self._plan(calls, own)
        group = _group(item)
        if group is not None and group not in self._groups and calls:
            learned = [(ev, metric, method) for ev, s, metric, method in calls if s is own]
            self._groups[group] = learned
            if learned and self.active:
                # The window was started before the group's plan was known: start it now.
                position = self._positions.get(item.nodeid, -1)
                for later in self._items[position + 1 : self._started_to]:
                    if _group(later) == group and later.nodeid not in self.previous:
                        self._start(later)
        with self._lock:
            stale = [key for key, (nodeid, _, _) in self._pending.items() if nodeid == item.nodeid]
            entries = [self._pending.pop(key) for key in stale]
            unfinished = {future for _, future, within in entries if within and not future.done()}
            self._finishing |= unfinished
        for _, future, within in entries:
            if future in unfinished:
                future.add_done_callback(self._finished)
            elif not within:
                future.cancel()

    def _finished(self, future: concurrent.futures.Future[MetricResult]) -> None:
        with self._lock:
            self._finishing.discard(future)

    def _learn(
        self, function: tuple[str, str], calls: list[tuple[Evaluator, RagSample, str, str | None]]
    ) -> None:
        """A passing test of ``function`` asked for ``calls``: its plan is the scores it asked for on
        the sample of its first score. The function's plan keeps only the scores that every passing
        test asked for, so a test that branches does not have started what the others do not use."""
        first = calls[0][1]
        asked = list(dict.fromkeys((ev, metric, method) for ev, s, metric, method in calls if s is first))
        known = self._sample_plans.get(function)
        self._sample_plans[function] = asked if known is None else [call for call in known if call in asked]

    def _plan(
        self, calls: list[tuple[Evaluator, RagSample, str, str | None]], own: RagSample | None
    ) -> list[Call]:
        plan: list[Call] = []
        for evaluator, sample, metric, method in calls:
            data = None if sample is own else sample_to_json(sample)
            plan.append((metric, method, settings_diff(evaluator.settings, self.settings), data))
        return plan

    def stop(self) -> None:
        """The run stops (``-x``, ``--maxfail``, Ctrl-C, its end): cancel all that was started ahead."""
        self.active = self.within = False
        with self._lock:
            futures = [future for _, future, _ in self._pending.values()] + list(self._finishing)
            self._pending.clear()
            self._finishing.clear()
        for future in futures:
            future.cancel()

    # --- starting -------------------------------------------------------------------------------
    def _predicted(self, item: pytest.Item) -> Iterable[tuple[Evaluator, RagSample, str, str | None]]:
        own = _rag_sample(item)
        previous = self.previous.get(item.nodeid)
        if previous is not None:
            for metric, method, diff, data in previous:
                sample = own if data is None else sample_from_json(data)
                settings = apply_diff(self.settings, diff)
                if sample is not None and settings is not None:
                    yield self._evaluator_for(settings), sample, metric, method
            return
        group = _group(item)
        if group is not None and own is not None:
            for evaluator, metric, method in self._groups.get(group, ()):
                yield evaluator, own, metric, method

    def _start(self, item: pytest.Item) -> None:
        for evaluator, sample, metric, method in self._predicted(item):
            self._start_one(item.nodeid, evaluator, sample, metric, method)

    def _start_one(
        self,
        nodeid: str,
        evaluator: Evaluator,
        sample: RagSample,
        metric: str,
        method: str | None,
        *,
        within: bool = False,
    ) -> None:
        if evaluator.settings.cache == "replay":
            return
        if not evaluator.judging:
            self._deferred = True  # started once a score needs the judge (see claim)
            return
        try:
            key = (id(evaluator), sample, metric, method)
            with self._lock:
                if key in self._pending:
                    return
                self._pending[key] = (nodeid, evaluator.submit_score(sample, metric, method), within)
        except TypeError:
            return
        self.started += 1


def _marks(item: pytest.Item) -> list[Mapping[str, Any]]:
    return [mark.kwargs for mark in item.iter_markers("ragmetrics")]


def _dropped(row: dict[str, Any]) -> None:
    """A body run ahead records nothing (it stops at its first score)."""


def load_plans(config: pytest.Config) -> dict[str, list[Call]]:
    cache = getattr(config, "cache", None)
    if cache is None:
        return {}
    data = cache.get(PLANS_KEY, None)
    if not isinstance(data, dict):
        return {}
    plans: dict[str, list[Call]] = {}
    for nodeid, calls in data.items():
        if not isinstance(calls, list):
            continue
        good: list[Call] = []
        for call in calls:
            if (
                isinstance(call, list)
                and len(call) == 4
                and isinstance(call[0], str)
                and (call[1] is None or isinstance(call[1], str))
                and isinstance(call[2], dict)
                and (call[3] is None or isinstance(call[3], dict))
            ):
                good.append((call[0], call[1], call[2], call[3]))
        plans[nodeid] = good
    return plans


def save_plans(config: pytest.Config, plans: dict[str, list[Call]], previous: dict[str, list[Call]]) -> None:
    """Keep this run's plans, and the last run's for tests that did not run now."""
    cache = getattr(config, "cache", None)
    if cache is None or not plans:
        return
    merged = {**previous, **plans}
    if len(merged) > MAX_PLANS:
        merged = dict(list(merged.items())[-MAX_PLANS:])
    cache.set(PLANS_KEY, {nodeid: [list(call) for call in calls] for nodeid, calls in merged.items()})
