"""Judging ahead: the scores the next tests of a golden set will ask for are started while the
current one runs.

A test asks for one score at a time and waits for it, so a suite of one test per sample keeps at most
one metric's chunks in flight, whatever ``--rag-concurrency`` allows. The plugin knows more than one
test does: the tests of ``@pytest.mark.ragmetrics(samples=...)`` differ only in their ``rag_sample``.
Each score the first of them asks for on its sample is started for the next tests of the group, each
on its own sample, as soon as it is asked for (after the first test's own request, so that one goes
first).

Only judging happens ahead: no test code runs out of its turn. Scores are started for a window of
tests ahead of the running one (as many tests as judge calls allowed at once, at least 8), on the
shared judging loop, so every judge call still passes the concurrency bound. A test takes the result
started for it instead of scoring again; results nobody took are dropped when their test ends.
Nothing is started in replay mode (there is no judge to keep busy), nor under pytest-xdist workers
(a worker does not know which tests it runs next). When the run stops early (``-x``, ``--maxfail``,
Ctrl-C), everything started is cancelled as soon as the failure that stops it is reported: what
waits for the concurrency bound is never sent, only calls already in flight are paid.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from . import _scope

if TYPE_CHECKING:
    import pytest

    from .engine import Evaluator
    from .results import MetricResult
    from .sample import RagSample
    from .settings import Settings

#: Tests started ahead of the running one, at least (else as many as judge calls allowed at once).
MIN_WINDOW = 8


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
    """Starts the scores the next tests of a golden set will ask for; hands each test the results
    started for it.

    ``evaluator_for(settings)`` gives the run's evaluator for some settings; ``settings`` are the
    run's. ``active`` is False where nothing may be started for the tests to come (replay, xdist
    workers).
    """

    def __init__(self, settings: Settings, evaluator_for: Any, *, active: bool = True) -> None:
        self.settings = settings
        self._evaluator_for = evaluator_for
        self.active = active and settings.cache != "replay"
        #: The tests to come run here, in order (not an xdist worker): their score records may be read ahead.
        self.ordered = active
        self.window = max(MIN_WINDOW, settings.concurrency or MIN_WINDOW)
        self._lock = threading.Lock()
        self._items: Sequence[pytest.Item] = ()
        self._positions: dict[str, int] = {}
        self._started_to = 0  # items before this index have had their scores started
        # (evaluator id, sample, metric, method) -> (item nodeid, future)
        self._pending: dict[tuple[Any, ...], tuple[str, concurrent.futures.Future[MetricResult]]] = {}
        self._groups: dict[tuple[str, str], list[tuple[Evaluator, str, str | None]]] = {}
        #: The test each group's plan is being learned from (its first test to ask for a score).
        self._teachers: dict[tuple[str, str], str] = {}
        self._current: dict[str, list[tuple[Evaluator, RagSample, str, str | None]]] = {}
        #: Scores of the window were not started because every score so far was served from
        #: records: they are started once one needs the judge.
        self._deferred = False
        self.started = 0

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
            return None if scope is None else self._teach(scope.nodeid, evaluator, sample, metric, method)
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
            if _group(later) == group and later_sample is not None:
                self._start_one(later.nodeid, evaluator, later_sample, metric, method)
        return own

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
        if self._groups:  # else nothing can be predicted: a plain suite pays nothing
            for i in range(max(self._started_to, position), end):
                self._start(self._items[i])
        self._started_to = max(self._started_to, end)

    def after(self, item: pytest.Item) -> None:
        """``item`` ended: learn its group's plan if nobody taught it yet, drop what was started for
        it and not taken."""
        calls = self._current.pop(item.nodeid, [])
        if not calls and not self._pending:
            return  # it asked for nothing, and nothing was started for it
        own = _rag_sample(item)
        group = _group(item)
        if group is not None and group not in self._groups and calls:
            learned = [(ev, metric, method) for ev, s, metric, method in calls if s is own]
            self._groups[group] = learned
            if learned and self.active:
                # The window was started before the group's plan was known: start it now.
                position = self._positions.get(item.nodeid, -1)
                for later in self._items[position + 1 : self._started_to]:
                    if _group(later) == group:
                        self._start(later)
        with self._lock:
            stale = [key for key, (nodeid, _) in self._pending.items() if nodeid == item.nodeid]
            entries = [self._pending.pop(key) for key in stale]
        for _, future in entries:
            future.cancel()

    def stop(self) -> None:
        """The run stops (``-x``, ``--maxfail``, Ctrl-C, its end): cancel all that was started ahead."""
        self.active = False
        with self._lock:
            futures = [future for _, future in self._pending.values()]
            self._pending.clear()
        for future in futures:
            future.cancel()

    # --- starting -------------------------------------------------------------------------------
    def _predicted(self, item: pytest.Item) -> Iterable[tuple[Evaluator, RagSample, str, str | None]]:
        own = _rag_sample(item)
        group = _group(item)
        if group is not None and own is not None:
            for evaluator, metric, method in self._groups.get(group, ()):
                yield evaluator, own, metric, method

    def _start(self, item: pytest.Item) -> None:
        for evaluator, sample, metric, method in self._predicted(item):
            self._start_one(item.nodeid, evaluator, sample, metric, method)

    def _start_one(
        self, nodeid: str, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
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
                self._pending[key] = (nodeid, evaluator.submit_score(sample, metric, method))
        except TypeError:
            return
        self.started += 1
