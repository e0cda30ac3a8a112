"""Counters describing how much judging one test run did, what it cost and what the cache saved.

One :class:`JudgeStats` lives for one run. The judge, the cache layer and the engine record into it
from several threads (the background event loop, pytest's main thread), so every update takes a lock.
Under pytest-xdist each worker keeps its own figures and sends :meth:`JudgeStats.to_json` to the
controller, which adds them up with :meth:`JudgeStats.merge_json`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .base import Usage

if TYPE_CHECKING:
    from .budget import JudgeBudget

#: Integer counters, in the order they are reported.
COUNTERS = (
    "calls",
    "cache_hits",
    "store_hits",
    "reused",
    "prompt_tokens",
    "completion_tokens",
    "tokens_saved",
    "retries",
    "reasks",
    "errors",
)


class JudgeStats:
    """Thread-safe counters for one run.

    Four counters say where each judgment a run used came from, with the same meaning with and
    without pytest-xdist (each process counts its own lookups): ``calls`` judge requests sent and
    answered (judged now); ``store_hits`` answers read from the committed judgment store;
    ``cache_hits`` answers read from the local disk cache; ``reused`` answers this process already
    had in memory (asked for again within the run: sentence and binary relevance share one judgment
    per chunk). ``tokens_saved`` is the usage recorded with the answers read from store and cache;
    ``retries`` transport retries (429, 5xx, timeouts, connection errors); ``reasks`` requests sent
    again after an answer that did not fit the schema;
    ``errors`` judgments that failed for good; ``seconds`` wall time spent waiting on the judge.

    ``seconds`` is wall-clock time during which at least one judge call was outstanding, not the sum
    of call durations: 32 concurrent one-second calls add about one second, not 32. ``call_seconds``
    is that sum (each call timed from when it had a free slot to its answer, not while it queued), for
    the mean latency of a call; it is not reported.

    ``budget``, when given, caps the judge requests sent and the tokens spent (see :meth:`take_call`);
    ``refused`` counts the requests it refused.
    """

    def __init__(
        self, clock: Callable[[], float] = time.perf_counter, budget: JudgeBudget | None = None
    ) -> None:
        self._clock = clock
        self.budget = budget
        self.refused = 0
        #: The caps of the run, once known (a controller learns them from its workers' figures).
        self.max_judge_calls: int | None = None if budget is None else budget.calls
        self.max_judge_tokens: int | None = None if budget is None else budget.tokens
        self._lock = threading.Lock()
        self.calls = 0
        self.cache_hits = 0
        self.store_hits = 0
        self.reused = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.tokens_saved = 0
        self.retries = 0
        self.reasks = 0
        self.errors = 0
        self.seconds = 0.0
        self.call_seconds = 0.0
        #: The response format the judge settled on (``auto`` finds it out), and why, if it fell back.
        self.response_format: str | None = None
        self.response_format_reason: str | None = None
        #: Answers the judgment store could not record although recording was asked for, and why
        #: (the first reason): the run fails, saying so.
        self.unrecorded = 0
        self.unrecorded_reason: str | None = None
        #: Why these figures leave out some of the run's judging (an xdist worker that crashed never
        #: reported its figures), or None: they are all of it.
        self.partial: str | None = None
        self._unrecorded_told = 0  # how many of them a script or a command was told of already
        self._busy = 0
        self._busy_since = 0.0
        # Live figures for the progress display (not reported): judge calls asked for and finished.
        self._calls_started = 0
        self._calls_finished = 0

    def __repr__(self) -> str:
        return f"JudgeStats({self.to_json()})"

    # --- recording ---------------------------------------------------------------------------

    def record_call(self, usage: Usage | None = None, estimate: int = 0) -> None:
        """One judge request was sent and answered, using ``usage`` tokens; a budget counts
        ``estimate`` tokens instead when the server reported none."""
        with self._lock:
            self.calls += 1
            if usage is not None:
                self.prompt_tokens += usage.prompt_tokens
                self.completion_tokens += usage.completion_tokens
        if self.budget is not None:
            self.budget.spend((usage.total_tokens if usage is not None else 0) or estimate)

    def record_cache_hit(self, usage: Usage | None = None) -> None:
        """An answer was served from the local disk cache instead of the judge."""
        with self._lock:
            self.cache_hits += 1
            if usage is not None:
                self.tokens_saved += usage.total_tokens

    def record_store_hit(self, usage: Usage | None = None) -> None:
        """An answer was served from the committed judgment store instead of the judge."""
        with self._lock:
            self.store_hits += 1
            if usage is not None:
                self.tokens_saved += usage.total_tokens

    def record_reuse(self) -> None:
        """An answer this process already had in memory was used again."""
        with self._lock:
            self.reused += 1

    def record_served(self, reused: int, store: int, cache: int, tokens: int) -> None:
        """Answers served without a judge call, counted together: ``reused`` from memory, ``store``
        from the judgment store and ``cache`` from the disk cache, their usage adding up to ``tokens``."""
        with self._lock:
            self.reused += reused
            self.store_hits += store
            self.cache_hits += cache
            self.tokens_saved += tokens

    def record_response_format(self, response_format: str, reason: str | None = None) -> None:
        """The judge found the response format the server supports (``reason``: why not a stricter one)."""
        with self._lock:
            self.response_format = response_format
            self.response_format_reason = reason

    def take_call(self) -> bool:
        """May one more request be sent to the judge? Always, without a budget; else while the
        budget lasts. Every request (retries and re-asks too) asks first."""
        if self.budget is None or self.budget.take():
            return True
        with self._lock:
            self.refused += 1
        return False

    def record_unrecorded(self, count: int, reason: str) -> None:
        """``count`` answers could not be recorded in the judgment store, for ``reason``."""
        with self._lock:
            self.unrecorded += count
            if self.unrecorded_reason is None:
                self.unrecorded_reason = reason

    def unrecorded_untold(self) -> tuple[int, str | None]:
        """How many answers could not be recorded since the last call, and why (the first reason):
        what a script or a command has still to tell, once (a pytest run reads the totals)."""
        with self._lock:
            count, self._unrecorded_told = self.unrecorded - self._unrecorded_told, self.unrecorded
            return count, self.unrecorded_reason

    def record_retry(self) -> None:
        """A transport-level retry (rate limit, server error, timeout, connection error)."""
        with self._lock:
            self.retries += 1

    def record_reask(self) -> None:
        """The judge was asked again because its answer did not conform to the schema."""
        with self._lock:
            self.reasks += 1

    def record_error(self) -> None:
        """A judgment failed for good."""
        with self._lock:
            self.errors += 1

    def record_seconds(self, seconds: float) -> None:
        """Add wall time spent waiting on the judge."""
        with self._lock:
            self.seconds += seconds

    @contextmanager
    def timer(self) -> Iterator[None]:
        """Count the wall time spent inside the ``with`` block towards :attr:`seconds`.

        Overlapping blocks (concurrent judge calls) are counted once: the clock runs while at least
        one block is open.
        """
        started = self._clock()
        with self._lock:
            if self._busy == 0:
                self._busy_since = started
            self._busy += 1
        try:
            yield
        finally:
            with self._lock:
                now = self._clock()
                self.call_seconds += now - started
                self._busy -= 1
                if self._busy == 0:
                    self.seconds += now - self._busy_since

    @contextmanager
    def call_in_flight(self, sent: Callable[[], bool]) -> Iterator[None]:
        """Count a judge call, from when it is asked for (perhaps waiting for a free slot) until it is
        answered or fails, for :meth:`live`. One that ends without having been ``sent()`` (cancelled
        while it waited: Ctrl-C, ``-x``) was no call: it is taken back, not counted as judged."""
        with self._lock:
            self._calls_started += 1
        try:
            yield
        finally:
            with self._lock:
                if sent():
                    self._calls_finished += 1
                else:
                    self._calls_started -= 1

    def live(self) -> tuple[int, int]:
        """``(finished, asked for)``: judge calls of this process so far, for progress displays."""
        with self._lock:
            return self._calls_finished, self._calls_started

    # --- reporting -----------------------------------------------------------------------------

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens actually spent."""
        return self.prompt_tokens + self.completion_tokens

    def cost(
        self, price_prompt_per_mtok: float | None, price_completion_per_mtok: float | None
    ) -> float | None:
        """Money spent, given prices per million tokens; ``None`` when a price is unknown."""
        if price_prompt_per_mtok is None or price_completion_per_mtok is None:
            return None
        with self._lock:
            return (
                self.prompt_tokens * price_prompt_per_mtok
                + self.completion_tokens * price_completion_per_mtok
            ) / 1_000_000

    def to_json(self) -> dict[str, Any]:
        """The figures as plain JSON types (what an xdist worker sends to the controller)."""
        with self._lock:
            data: dict[str, Any] = {name: getattr(self, name) for name in COUNTERS}
            data["seconds"] = round(self.seconds, 6)
            if self.response_format is not None:
                data["response_format"] = self.response_format
                data["response_format_reason"] = self.response_format_reason
            if self.max_judge_calls is not None or self.max_judge_tokens is not None:
                data["max_judge_calls"] = self.max_judge_calls
                data["max_judge_tokens"] = self.max_judge_tokens
                data["refused_calls"] = self.refused
            if self.unrecorded:
                data["unrecorded"] = self.unrecorded
                data["unrecorded_reason"] = self.unrecorded_reason
            if self.partial is not None:
                data["partial"] = self.partial
        return data

    def merge_json(self, data: Mapping[str, Any]) -> None:
        """Add another process's figures (as produced by :meth:`to_json`); unknown keys are ignored."""
        with self._lock:
            for name in COUNTERS:
                value = data.get(name, 0)
                # bool is an int; a stray True must not count as one call.
                if isinstance(value, int) and not isinstance(value, bool):
                    setattr(self, name, getattr(self, name) + value)
            seconds = data.get("seconds", 0.0)
            if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
                self.seconds += float(seconds)
            if "refused_calls" in data:
                calls, tokens, refused = (
                    data.get(k) for k in ("max_judge_calls", "max_judge_tokens", "refused_calls")
                )
                self.max_judge_calls = (
                    calls if isinstance(calls, int) and not isinstance(calls, bool) else None
                )
                self.max_judge_tokens = (
                    tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None
                )
                if isinstance(refused, int) and not isinstance(refused, bool):
                    self.refused += refused
            if self.partial is None and isinstance(data.get("partial"), str):
                self.partial = data["partial"]
            unrecorded, why = data.get("unrecorded"), data.get("unrecorded_reason")
            if isinstance(unrecorded, int) and not isinstance(unrecorded, bool) and unrecorded > 0:
                self.unrecorded += unrecorded
                if self.unrecorded_reason is None and isinstance(why, str):
                    self.unrecorded_reason = why
            # Every worker finds out the same server's format; keep the first one reported, preferring
            # one that fell back (its reason is what the user needs to see).
            fmt, reason = data.get("response_format"), data.get("response_format_reason")
            if isinstance(fmt, str) and (
                self.response_format is None or (reason and not self.response_format_reason)
            ):
                self.response_format = fmt
                self.response_format_reason = reason if isinstance(reason, str) else None
