"""Judging ahead: the scores the next tests of a golden set will ask for are started while the
current one runs.

A test asks for one score at a time and waits for it, so a suite of one test per sample keeps at most
one metric's chunks in flight, whatever ``--rag-concurrency`` allows. The plugin knows more than one
test does: the tests of ``@pytest.mark.ragmetrics(samples=...)`` differ only in their ``rag_sample``.
Each score the first of them asks for on its sample is started for the next tests of the group, each
on its own sample, as soon as it is asked for (after the first test's own request, so that one goes
first).

A test that builds its sample in its body (a retriever called there) cannot be judged before it runs,
but it can say which scores it takes: ``@pytest.mark.ragmetrics(metrics=["context_precision",
"context_recall"])``. At the test's first score of one of those on a sample, the other declared scores
are started on that same sample at once, so the test waits about one judge call, not one per
assertion. Declared scores it does not take are dropped when it ends (an answer already received is
still recorded).

Only judging happens ahead: no test code runs out of its turn. A metric is started ahead only when it
says it may be (``scored_ahead = True``: its score depends on the sample, the settings and the judge
alone), as the built-in judged ones do; a custom metric that does not say so is scored in its test's turn.
Scores are started for a window of
tests ahead of the running one (as many tests as judge calls allowed at once, at least 8), on the
shared judging loop, so every judge call still passes the concurrency bound. The window is topped
up half a window at a time, not at every test (so a window and a half is started ahead just after,
never less than a window): the scores started together (a test's declared scores, the tests
entering the window) are handed to the loop's thread at once, not one by one nor one test at a time,
and the test waits while that thread takes each of them up to its first judge
call (in a warm run, to its result) rather than running beside it, the two taking the interpreter
lock from each other in turns. A test takes the result started for it instead of scoring again; results nobody
took are dropped when their test ends.
Nothing is started in replay mode (there is no judge to keep busy), nor under pytest-xdist workers
(a worker does not know which tests it runs next), nor under a spending cap (``max_judge_calls``,
``max_judge_tokens``: the tests in order get the budget). When the run stops early (``-x``, ``--maxfail``,
Ctrl-C), everything started is cancelled as soon as the failure that stops it is reported: what
waits for the concurrency bound is never sent, only calls already in flight are paid.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import _scope
from .sample import RagSample  # loaded by then: the plugin judges ahead only in a run that scores

if TYPE_CHECKING:
    import pytest

    from .engine import Evaluator
    from .judging_loop import Handed
    from .results import MetricResult
    from .settings import Settings

#: Tests started ahead of the running one, at least (else as many as judge calls allowed at once).
MIN_WINDOW = 8

#: A score to start for a test: (its nodeid, evaluator, sample, metric, method).
_Score = tuple[str, "Evaluator", "RagSample", str, "str | None"]


def _rag_sample(item: pytest.Item) -> RagSample | None:
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return None
    sample = callspec.params.get("rag_sample")
    return sample if isinstance(sample, RagSample) else None


def _function(item: pytest.Item) -> tuple[str, str] | None:
    """The parametrized tests of one function, whatever their parameters: one group."""
    if getattr(item, "callspec", None) is None:
        return None
    return (item.parent.nodeid if item.parent is not None else "", getattr(item, "originalname", item.name))


def _grouped(item: pytest.Item) -> tuple[tuple[str, str], RagSample] | None:
    """A test parametrized by ``rag_sample``: its group (the tests of its function, whatever their
    parameters) and its own sample."""
    sample = _rag_sample(item)
    if sample is None:
        return None
    group = _function(item)
    return None if group is None else (group, sample)


class Prefetcher:
    """Starts the scores the next tests of a golden set will ask for; hands each test the results
    started for it.

    ``evaluator_for(settings)`` gives the run's evaluator for some settings; ``settings`` are the
    run's. ``active`` is False where nothing may be started for the tests to come (replay, xdist
    workers, a spending cap).
    """

    def __init__(self, settings: Settings, evaluator_for: Any, *, active: bool = True) -> None:
        self.settings = settings
        self._evaluator_for = evaluator_for
        # Under a spending cap, what is judged ahead would spend what the tests in order need: the
        # run passes as many tests as the cap allows, in order, rather than a scatter of none.
        capped = settings.max_judge_calls is not None or settings.max_judge_tokens is not None
        self.active = active and settings.cache != "replay" and not capped
        self.window = max(MIN_WINDOW, settings.concurrency or MIN_WINDOW)
        self._lock = threading.Lock()
        # Per collected test, by position: its node id, and its group with its own sample (see
        # _grouped), asked at its start, its end and for the tests ahead of the running one: read once.
        self._nodeids: list[str] = []
        self._grouped: list[tuple[tuple[str, str], RagSample] | None] = []
        self._positions: dict[str, int] = {}
        self._started_to = 0  # items before this index have had their scores started
        # (evaluator id, sample, metric, method) -> (item nodeid, future)
        self._pending: dict[tuple[Any, ...], tuple[str, Handed[MetricResult]]] = {}
        # item nodeid -> the keys started for it (some taken since): what its end drops
        self._started_for: dict[str, list[tuple[Any, ...]]] = {}
        # item nodeid -> how many of the scores started for it were taken: when all were, its end
        # has nothing to look up (a key's hash asks the sample, in Python, at every look-up)
        self._taken: dict[str, int] = {}
        self._groups: dict[tuple[str, str], list[tuple[Evaluator, str, str | None]]] = {}
        #: The test each group's plan is being learned from (its first test to ask for a score).
        self._teachers: dict[tuple[str, str], str] = {}
        self._current: dict[str, list[tuple[Evaluator, RagSample, str, str | None]]] = {}
        #: Per test: the scores its marker declares (``metrics=``), as (metric, method) pairs, read
        #: at its first score that was not started ahead (a golden set's tests seldom have one).
        self._declared: dict[str, list[tuple[str, str | None]]] = {}
        # (evaluator id, metric, method) -> the method spelled out (see _spec): asked at every score
        self._specs: dict[tuple[int, str, str | None], tuple[str, str | None]] = {}
        # (evaluator id, metric) -> whether it may be started ahead of its test (see _ahead)
        self._aheads: dict[tuple[int, str], bool] = {}
        self._stopped = False

    # --- the engine asks -----------------------------------------------------------------------
    def claim(
        self, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> Handed[MetricResult] | None:
        metric, method = self._spec(evaluator, metric, method)
        scope = _scope.current_test.get()
        if scope is not None:
            self._current.setdefault(scope.nodeid, []).append((evaluator, sample, metric, method))
        try:
            key = (id(evaluator), sample, metric, method)
            with self._lock:
                entry = self._pending.pop(key, None)
                if entry is not None:
                    self._taken[entry[0]] = self._taken.get(entry[0], 0) + 1
        except TypeError:  # a sample that cannot be hashed is never started ahead
            return None
        if entry is None or entry[1].cancelled():
            if scope is None:
                return None
            nodeid = scope.nodeid
            later = self._declared_others(scope.test, nodeid, evaluator, sample, metric, method)
            later += self._teach(nodeid, evaluator, sample, metric, method)
            if not later:
                return None  # nothing to start beside it: the engine scores it as usual
            # The test's own score first, so its calls are sent before those started beside it.
            return self._start(later, own=(evaluator, sample, metric, method))
        return entry[1]

    def _declared_others(
        self,
        item: pytest.Item,
        nodeid: str,
        evaluator: Evaluator,
        sample: RagSample,
        metric: str,
        method: str | None,
    ) -> list[_Score]:
        """A test asks for a score its marker declares, on a sample it has not scored before: the
        other declared scores on that sample, to start with this one."""
        if self._stopped or evaluator.settings.cache == "replay":
            return []
        declared = self._declared.get(nodeid)
        if declared is None:
            declared = self._declared[nodeid] = _declared(item)
        if not declared:
            return []
        declared = [self._spec(evaluator, name, how) for name, how in declared]
        asked = self._current[nodeid]
        if any(s is sample for _, s, _, _ in asked[:-1]) or (metric, method) not in declared:
            return []
        return [
            (nodeid, evaluator, sample, other, other_method)
            for other, other_method in declared
            if (other, other_method) != (metric, method)
        ]

    def _teach(
        self, nodeid: str, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> list[_Score]:
        """The first test of a parametrized group asks for a score of its own sample: the same score
        for the group's next tests, to start with it, without waiting for the test to end.

        A test asks for one score at a time, so learning the group's plan only once its first test
        is over would leave the judge nearly idle for as long as that test takes. The test's own
        score is started first, so its calls are sent before those started for the tests after it
        (a failing first test under ``-x`` pays for little more than what is in flight).
        """
        if not self.active:
            return []
        position = self._positions.get(nodeid)
        if position is None:
            return []
        grouped = self._grouped[position]
        if grouped is None or sample is not grouped[1]:
            return []
        group = grouped[0]
        learned = self._groups.get(group)
        if learned is None:
            learned = self._groups[group] = []
            self._teachers[group] = nodeid
        elif self._teachers.get(group) != nodeid:
            return []  # the plan was learned from another test of the group
        call = (evaluator, metric, method)
        if call in learned or not self._ahead(evaluator, metric):
            return []  # asked again, or a metric that runs in its test's turn only: scored as usual
        learned.append(call)
        later = self._later_in(group, position)
        return [(self._nodeids[i], evaluator, sample, metric, method) for i, sample in later]

    def _later_in(self, group: tuple[str, str], position: int) -> list[tuple[int, RagSample]]:
        """The tests of ``group`` after ``position`` whose scores were started: position and sample."""
        later = []
        for i in range(position + 1, self._started_to):
            other = self._grouped[i]
            if other is not None and other[0] == group:
                later.append((i, other[1]))
        return later

    # --- pytest tells ---------------------------------------------------------------------------
    def collected(self, items: Sequence[pytest.Item]) -> None:
        self._nodeids = [item.nodeid for item in items]
        self._positions = {nodeid: i for i, nodeid in enumerate(self._nodeids)}
        self._grouped = [_grouped(item) for item in items]

    def before(self, item: pytest.Item) -> None:
        """``item`` starts: once fewer than a window of tests after it have their scores started,
        start those of a window and a half after it."""
        if not self.active:
            return
        position = self._positions.get(item.nodeid)
        if position is None or self._started_to - (position + 1) >= self.window:
            return  # a whole window is started ahead
        # Half a window more than needed: the next half window of tests finds a whole one ahead still.
        end = min(len(self._nodeids), position + 1 + self.window + self.window // 2)
        if self._groups:  # else nothing can be predicted: a plain suite pays nothing
            positions = range(max(self._started_to, position), end)
            self._start([score for i in positions for score in self._predicted(i)])
        self._started_to = max(self._started_to, end)

    def after(self, item: pytest.Item) -> None:
        """``item`` ended: learn its group's plan if nobody taught it yet, drop what was started for
        it and not taken."""
        nodeid = item.nodeid
        self._declared.pop(nodeid, None)
        calls = self._current.pop(nodeid, [])
        if not calls and nodeid not in self._started_for:
            return  # it asked for nothing, and nothing was started for it
        position = self._positions.get(nodeid)
        grouped = _grouped(item) if position is None else self._grouped[position]
        if grouped is not None and grouped[0] not in self._groups and calls:
            group, own = grouped
            learned = [
                (ev, metric, method)
                for ev, s, metric, method in calls
                if s is own and self._ahead(ev, metric)
            ]
            self._groups[group] = learned
            if learned and self.active:
                # The window was started before the group's plan was known: start it now.
                later = self._later_in(group, -1 if position is None else position)
                self._start([score for i, _ in later for score in self._predicted(i)])
        with self._lock:
            started = self._started_for.pop(nodeid, ())
            taken = self._taken.pop(nodeid, 0)
            entries = (
                [self._pending.pop(key) for key in started if self._pending.get(key, ("",))[0] == nodeid]
                if taken < len(started)
                else []
            )
        for _, future in entries:
            future.cancel()

    def stop(self) -> None:
        """The run stops (``-x``, ``--maxfail``, Ctrl-C, its end): cancel all that was started ahead."""
        self.active = False
        self._stopped = True
        with self._lock:
            futures = [future for _, future in self._pending.values()]
            self._pending.clear()
            self._started_for.clear()
            self._taken.clear()
        for future in futures:
            future.cancel()

    def _spec(self, evaluator: Evaluator, metric: str, method: str | None) -> tuple[str, str | None]:
        key = (id(evaluator), metric, method)
        spec = self._specs.get(key)
        if spec is None:  # an evaluator's metrics are fixed once it has scored: asked once each
            spec = self._specs[key] = _spec(evaluator, metric, method)
        return spec

    def _ahead(self, evaluator: Evaluator, metric: str) -> bool:
        """Whether ``metric`` may be started for tests before they run (it says ``scored_ahead``)."""
        key = (id(evaluator), metric)
        ahead = self._aheads.get(key)
        if ahead is None:
            try:
                ahead = getattr(evaluator.metric(metric), "scored_ahead", False) is True
            except Exception:  # scoring it raises the error where the test asked for it
                ahead = False
            self._aheads[key] = ahead
        return ahead

    # --- starting -------------------------------------------------------------------------------
    def _predicted(self, position: int) -> Iterable[_Score]:
        """The scores of the test at ``position`` its group's plan predicts."""
        grouped = self._grouped[position]
        if grouped is not None:
            group, own = grouped
            nodeid = self._nodeids[position]
            for evaluator, metric, method in self._groups.get(group, ()):
                yield nodeid, evaluator, own, metric, method

    def _start(
        self, scores: Sequence[_Score], *, own: tuple[Evaluator, RagSample, str, str | None] | None = None
    ) -> Handed[MetricResult] | None:
        """Start ``scores`` not started yet, each kept for its test, and first ``own`` (the running
        test's, whose future is returned): one hand-over to the judging loop per evaluator, not one
        per score, returning once the loop has taken each up to its first wait."""
        wanted: dict[Evaluator, list[tuple[tuple[Any, ...] | None, str, RagSample, str, str | None]]] = {}
        if own is not None:
            evaluator, sample, metric, method = own
            wanted[evaluator] = [(None, "", sample, metric, method)]
        seen: set[tuple[Any, ...]] = set()
        for nodeid, evaluator, sample, metric, method in scores:
            if evaluator.settings.cache == "replay":
                continue
            key = (id(evaluator), sample, metric, method)
            try:
                size = len(seen)
                seen.add(key)  # one look-up for the test and the addition (each hashes the sample)
                if len(seen) == size or key in self._pending:
                    continue
            except TypeError:  # a sample that cannot be hashed is never started ahead
                continue
            wanted.setdefault(evaluator, []).append((key, nodeid, sample, metric, method))
        own_future = None
        for evaluator, entries in wanted.items():
            futures = evaluator.submit_scores(
                [(sample, metric, method) for _, _, sample, metric, method in entries], until_started=True
            )
            with self._lock:
                for (kept, nodeid, _, _, _), future in zip(entries, futures, strict=True):
                    if kept is None:
                        own_future = future
                    else:
                        self._pending[kept] = (nodeid, future)
                        self._started_for.setdefault(nodeid, []).append(kept)
        return own_future


def _spec(evaluator: Evaluator, metric: str, method: str | None) -> tuple[str, str | None]:
    """``(metric, method)`` with the method a metric takes by default spelled out, so a score asked
    for as ``context_relevance`` is the declared ``context_relevance[graded]``."""
    from .metrics.builtin import check_method

    try:
        return metric, check_method(evaluator.metric(metric), method)
    except Exception:  # scoring it raises the error where the test asked for it
        return metric, method


def _declared(item: pytest.Item) -> list[tuple[str, str | None]]:
    """The scores ``item``'s closest ``ragmetrics`` marker with ``metrics=`` declares (checked when
    the tests were collected)."""
    from .engine import parse_metric_spec

    for mark in item.iter_markers("ragmetrics"):
        if "metrics" in mark.kwargs:
            return [parse_metric_spec(name) for name in mark.kwargs["metrics"]]
    return []
