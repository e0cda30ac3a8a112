"""Where a judgment comes from: memory, the committed store, the local disk cache, or the judge.

:class:`CachedJudge` wraps any :class:`~pytest_ragmetrics.judge.base.Judge`. Two places hold a
judgment: the committed :class:`~pytest_ragmetrics.judge.store.JudgmentStore` and the local disk cache
(:mod:`diskcache`, through its public API). The answers of the run are an LRU in memory in front of
them. :meth:`CachedJudge.lookup` is the one place that order is written: memory, then the store, then
the cache; what none of them holds is asked of the judge in :meth:`CachedJudge._ask_server`, the one
place a request goes to the server. The cache modes:

``readwrite``  memory, store, cache, then the judge; a new answer is written to the cache and the store.
``replay``     never call the judge; a judgment in neither cache nor store raises
               :class:`~pytest_ragmetrics.errors.JudgmentNotRecorded`. What CI without a key runs.
``refresh``    always ask the judge (once per request and run), overwrite cache and store.
``off``        ask the judge, read and write nothing on disk; an answer is reused within the run while
               it is among the last :data:`MEMORY_ENTRIES` answers.

Whatever serves an answer, in ``readwrite`` and ``refresh`` the judgment store ends up holding it: a
cache hit for a key the store lacks (a store added later, an entry pruned) is copied into the store,
so the store can always replay what the last run used.

A request runs as a task of its own, shared by every caller asking for the same key at the same time
(one call, however many wait). A caller that is cancelled (a sibling failed, a judgment started ahead
and not taken, ``-x``, Ctrl-C) stops waiting; the request goes on once it has been sent, so an answer
that arrives is always validated and recorded. A request nobody waits for any more that has not been
sent yet is dropped. :meth:`CachedJudge.aclose` lets the requests in flight finish, within
:data:`CLOSE_SECONDS` (or, told not to wait, after a second Ctrl-C, drops them: the answers received
are recorded all the same).

The disk cache is a SQLite database shared safely by threads and by processes (pytest-xdist
workers). It only ever saves money: when it cannot be opened or written (a read-only mount, a
damaged ``cache.db``), one :class:`RagMetricsWarning` is issued and the run goes on without it, the
store still serving. Values are stored as JSON text, never pickles, so a cache directory cannot
smuggle code into a run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import functools
import json
import os
import secrets
import shlex
import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from .._aio import Escaped, gather_or_cancel
from ..errors import (
    ConfigError,
    InvalidJudgeAnswer,
    JudgeCallCapReached,
    JudgeError,
    JudgeUnavailable,
    JudgmentNotRecorded,
    WarnOnce,
)
from .base import (
    HowToSet,
    Judge,
    JudgeAnswer,
    JudgeRequest,
    by_environment,
    conforms,
    recorded_answer,
    sending,
    validate_answer,
)
from .claims import CLAIM_POLL, CLAIM_PREFIX, CLAIMS_DIR, Claims
from .disk_cache import (
    UNUSABLE_NAME,
    cache_errors,
    is_disk_full,
    is_transient,
    open_disk_cache,
    read_only_copy,
    reopened,
)
from .stats import JudgeStats
from .store import JudgmentStore, loads_entry, scan_json

if TYPE_CHECKING:  # pragma: no cover
    import diskcache  # diskcache ships no type information

    from .batch import BatchExport

_T = TypeVar("_T")

__all__ = ["CACHE_MODES", "CacheMode", "CachedJudge", "cache_summary"]

CacheMode = Literal["readwrite", "replay", "refresh", "off"]
CACHE_MODES: tuple[CacheMode, ...] = ("readwrite", "replay", "refresh", "off")

#: Answers kept in memory per run in front of the store and the disk cache (the least recently
#: used go first): enough for the judgments that one test or the samples an evaluation has in flight
#: share (sentence and binary relevance share one per chunk), without holding a large run's answers
#: in memory: each answer kept costs several hundred bytes and a few objects that every full garbage
#: collection walks, and most judgments are asked for once.
MEMORY_ENTRIES = 512
#: Seconds :meth:`CachedJudge.aclose` waits for requests already sent: their answers are paid for.
CLOSE_SECONDS = 30.0


def _entry_json(members: list[tuple[str, Any]], *, ascii: bool) -> str:
    """A disk-cache entry: the JSON object of ``members`` in their order, each value as
    ``json.dumps(value, sort_keys=True)`` writes it (``ensure_ascii=ascii``)."""
    dumps = (_ASCII_JSON if ascii else _TEXT_JSON).encode
    return "{" + ", ".join(f"{dumps(name)}: {dumps(value)}" for name, value in members) + "}"


_TEXT_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False)
_ASCII_JSON = json.JSONEncoder(sort_keys=True)
# What follows an entry's run as _write_disk writes it, and what follows its answer when it has
# derived inputs.
_ANSWER = '", "answer": '
_DERIVED = ', "derived": '


def _entry_record(raw: Any, key: str) -> Any:
    """The members of the disk-cache entry ``raw`` of ``key`` that serve its answer (``key``,
    ``run``, ``answer`` and, where written, ``derived``) as ``json.loads(raw)`` holds them,
    without reading on past them.

    :meth:`CachedJudge._write_disk` writes those members first, and the request's inputs and
    parameters (what ``judge drift`` reads) after them: a warm run parses the part of each entry
    that serves it, not the whole (most of it is the request's texts). What follows is only seen to
    end the object, so an entry cut short is read whole too; text damaged in its middle, past the
    answer, is not looked at (diskcache writes an entry whole: that takes a hand edit of the
    database). An entry laid out otherwise (its members sorted, as written before, or by hand) is
    read whole by ``json.loads``: the same members, or the error that says it is damaged.
    """
    head = f'{{"key": "{key}", "run": "'
    if type(raw) is str and raw.startswith(head):
        end = raw.find('"', len(head))
        run = raw[len(head) : end]
        if end > 0 and "\\" not in run and raw.startswith(_ANSWER, end):
            try:
                answer, at = scan_json(raw, end + len(_ANSWER))
                record = {"key": key, "run": run, "answer": answer}
                if raw.startswith(_DERIVED, at):
                    record["derived"], at = scan_json(raw, at + len(_DERIVED))
            except (StopIteration, ValueError):  # not JSON there: json.loads says what is wrong
                return loads_entry(raw)
            if raw.startswith(', "', at) and raw.endswith("}"):  # more members follow, to the end
                return record
    return loads_entry(raw)


def _decode_entry(request: JudgeRequest, key: str, raw: Any, run: str | None = None) -> JudgeAnswer | None:
    """The answer a disk-cache entry holds for ``request`` (with ``run``: only one written by that
    run, else None); :class:`ValueError` when it is damaged."""
    record = _entry_record(raw, key) if isinstance(raw, (str, bytes)) else None
    if type(record) is not dict or record.get("key") != key:  # (not text: damaged)
        raise ValueError("the entry does not belong to this key")
    if run is not None and record.get("run") != run:
        return None
    if "answer" not in record:
        raise ValueError("the entry has no answer")
    derived = None
    if request.derived:
        derived = request.provide(record.get("derived"))
        if derived is None:  # the request holds its own
            derived = request.derived_inputs()
    answer = recorded_answer(record["answer"], request.schema, request.n, "cache", derived)
    if answer is not None:
        return answer
    # Not the usual shape: from_json reads what else it accepts, or says which JSON type is wrong.
    answer = JudgeAnswer.from_json(record["answer"], source="cache", derived=derived)
    schema = request.schema
    if len(answer.choices) != request.n or not all(conforms(schema, c) for c in answer.choices):
        raise ValueError("the entry does not conform to the schema")
    return answer


def _check_answer(request: JudgeRequest, answer: JudgeAnswer) -> None:
    """Raise :class:`InvalidJudgeAnswer` unless ``answer`` holds ``request.n`` choices that each fit
    its schema: whoever gave it (the inner judge, a batch's results), nothing unvalidated is recorded."""
    if len(answer.choices) != request.n:
        raise InvalidJudgeAnswer(
            f"judge gave {len(answer.choices)} answer(s) for {request.label or request.kind}; "
            f"expected {request.n}"
        )
    for choice in answer.choices:
        validate_answer(request, choice)


def _utf8(text: str) -> bool:
    """Whether ``text`` can be written as UTF-8 (it holds no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


class _Failed(NamedTuple):
    """What an item of an :class:`_IOBatch` raised, in place of its result."""

    error: BaseException


class _IOBatch:
    """Disk work of one kind, run in a judge's I/O thread: the items that arrive in one pass of the
    event loop, or while the thread is busy, are handed over together, to ``run_many(items)`` (a
    result or :class:`_Failed` per item).

    Thirty answers arriving in one burst are written with one hand-over to the thread, one write to
    the judgment store and one SQLite transaction, not thirty of each; the ten claims of the
    judgments a test's declared scores start together are taken in one. A lone item goes at the end
    of the pass. Each item is done whoever still waits for it: an answer received is recorded.
    """

    def __init__(
        self,
        run_many: Callable[[list[Any]], list[Any]],
        executor: Callable[[], concurrent.futures.Executor],
        lock: threading.Lock,
    ) -> None:
        self._run_many = run_many
        self._executor = executor
        self._lock = lock
        self._pending: list[tuple[Any, asyncio.Future[Any], asyncio.AbstractEventLoop]] = []
        self._busy = False

    @property
    def idle(self) -> bool:
        """Nothing is pending or being done."""
        return not self._busy

    async def __call__(self, item: Any) -> Any:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        with self._lock:
            self._pending.append((item, future, loop))
            start, self._busy = not self._busy, True
        if start:
            # After the tasks of this pass, whose items go with this one: handed over at once, the
            # first would go alone, the thread taking the interpreter lock from the loop to do it
            # and the rest after it, while the loop builds the first request.
            loop.call_soon(self._hand_over)
        return await future

    def _hand_over(self) -> None:
        try:
            self._executor().submit(self._drain)
        except RuntimeError:  # the interpreter is exiting: no new threads, so here
            self._drain()

    def _drain(self) -> None:
        """Do what is pending, then hand over again if more came meanwhile: behind the thread's other
        work (a claim renewed, another batch), not ahead of it."""
        with self._lock:
            batch, self._pending = self._pending, []
        try:
            results = self._run_many([item for item, _, _ in batch])
        except BaseException as exc:  # reaches every item's waiter, none is left waiting
            results = [_Failed(exc)] * len(batch)
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[Any], Any]]] = {}
        for (_, future, loop), result in zip(batch, results, strict=True):
            by_loop.setdefault(loop, []).append((future, result))
        for loop, settled in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a loop closed meanwhile waits for nothing
                loop.call_soon_threadsafe(_settle, settled)
        with self._lock:
            self._busy = again = bool(self._pending)
        if again:
            self._hand_over()


def _settle(settled: list[tuple[asyncio.Future[Any], Any]]) -> None:
    for future, result in settled:
        if future.done():  # its waiter was cancelled
            continue
        if isinstance(result, _Failed):
            future.set_exception(result.error)
        else:
            future.set_result(result)


class _Request:
    """One request to the judge in flight: its task, shared by every caller asking for its key."""

    __slots__ = ("sent", "sent_once", "task", "waiters")

    def __init__(self) -> None:
        self.task: asyncio.Task[JudgeAnswer] | None = None
        self.waiters = 0
        #: It has gone to the server: from then on its answer is kept whoever still waits.
        self.sent = False
        #: It went to the server at least once (it may wait to retry now): a call of the run.
        self.sent_once = False


class CachedJudge:
    """A :class:`~pytest_ragmetrics.judge.base.Judge` that serves recorded answers before asking.

    ``make_inner()`` creates the real judge on the first miss (never in replay mode, so replay needs no
    API key). ``cache_dir`` is the local disk cache (``None``: none); ``store`` the committed
    :class:`~pytest_ragmetrics.judge.store.JudgmentStore` (``None``: none). Every answer served or
    written is recorded in :attr:`used_keys` (the set given as ``used_keys``, else one of its own).
    Concurrent requests with the same key are judged once.
    ``concurrency`` bounds the calls to the inner judge in flight (per event loop; ``None``: no
    bound), so a judge from a plugin hook that does not limit itself cannot open a thousand requests.
    ``how_to_set(name, value)`` words a setting in messages (see
    :func:`~pytest_ragmetrics.judge.base.by_environment`).
    """

    def __init__(
        self,
        make_inner: Callable[[], Judge],
        *,
        mode: CacheMode = "readwrite",
        cache_dir: str | os.PathLike[str] | None = None,
        store: JudgmentStore | None = None,
        stats: JudgeStats | None = None,
        memory_entries: int = MEMORY_ENTRIES,
        concurrency: int | None = None,
        run: str | None = None,
        how_to_set: HowToSet = by_environment,
        batch: BatchExport | None = None,
        used_keys: set[str] | None = None,
    ) -> None:
        if mode not in CACHE_MODES:
            raise ConfigError(f"cache mode {mode!r} is not one of {', '.join(CACHE_MODES)}")
        if concurrency is not None and (isinstance(concurrency, bool) or concurrency < 1):
            raise ConfigError(f"judge concurrency must be at least 1, got {concurrency}")
        self._make_inner = make_inner
        self._inner: Judge | None = None
        self.mode: CacheMode = mode
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        self.store = store
        self.stats = stats if stats is not None else JudgeStats()
        self.how_to_set = how_to_set
        self.used_keys: set[str] = set() if used_keys is None else used_keys
        self._memory: OrderedDict[str, JudgeAnswer] = OrderedDict()
        self._memory_entries = memory_entries
        self._cache: diskcache.Cache | None = None
        self._cache_problem: str | None = None
        # The cache could not be opened for writing: it is read from a copy (see read_only_copy),
        # until it opens (see _live_again); the copy is closed with the cache.
        self._read_only = False
        self._copy: diskcache.Cache | None = None
        self._lock = threading.Lock()
        self._warn_once = WarnOnce()
        self._requests: dict[str, _Request] = {}
        # What this run judged, in refresh mode: served again rather than refreshed twice.
        self._judged_this_run: set[str] = set()
        self.concurrency = concurrency
        #: The run this judge belongs to, written with each cache entry: the xdist workers of one run
        #: share it, so under ``refresh`` a judgment one of them made is not made again by another.
        self.run = run or secrets.token_hex(8)
        # asyncio primitives belong to the loop they are first used in: one semaphore per loop.
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        # Keys the store is known to hold (read or written this run), so a hit costs no second look.
        self._in_store: set[str] = set()
        # The one thread that does this judge's disk writes (see _off_loop).
        self._io: concurrent.futures.ThreadPoolExecutor | None = None
        # The claims this judge takes on the judgments it asks for (see _claim).
        self._claims = Claims(
            self.cache_dir / CLAIMS_DIR if self.cache_dir is not None else None, self._io_thread
        )
        # Claims taken and answers recorded there, as many at a time as arrive together.
        self._claiming = _IOBatch(self._try_claims, self._io_thread, threading.Lock())
        self._recording = _IOBatch(self._write_answers, self._io_thread, threading.Lock())
        # Models the judgment store holds judgments of (read on the first replay miss).
        self._store_models: set[str] | None = None
        # Set by aclose: a request waiting to retry is dropped rather than sent again.
        self._closing = False
        #: ``--rag-batch``: what no store or cache holds is written here instead of being asked.
        self.batch = batch

    def __repr__(self) -> str:
        return f"CachedJudge(mode={self.mode!r}, cache_dir={self.cache_dir!r}, store={self.store!r})"

    # --- the Judge protocol ----------------------------------------------------------------------

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        """Serve ``request`` according to :attr:`mode`."""
        return (await self.judge_many([request]))[0]  # type: ignore[return-value]  # never skipped

    async def judge_many(
        self,
        requests: Sequence[JudgeRequest],
        skip: Callable[[JudgeRequest], bool] | None = None,
        keys: Sequence[str] | None = None,
    ) -> list[JudgeAnswer | None]:
        """Serve several requests: the recorded ones at once, the others concurrently.

        ``skip(request)`` is asked for each request that has no recorded answer; a request it
        accepts is neither judged nor an error (its answer is ``None``). ``keys`` are the requests'
        cache keys, when the caller has them already.
        """
        if keys is None:
            keys = [request.cache_key() for request in requests]
        answers = self.lookup_many(requests, keys)
        missing: list[tuple[int, str]] = []
        if not all(answers):  # (an answer is always true): a warm run has nothing to look for
            missing = [(i, keys[i]) for i, answer in enumerate(answers) if answer is None]
        if skip is not None and missing:
            missing = [(i, key) for i, key in missing if not skip(requests[i])]
        # Only a run that writes the store copies into it what the cache served (see _store_lacks):
        # nothing when every key is one the store served or took this run, as on a run it serves whole.
        if (
            self.store is not None
            and self.mode in ("readwrite", "refresh")
            and not (in_store := self._in_store).issuperset(keys)
        ):
            copies = [
                (request, answer)
                for request, key, answer in zip(requests, keys, answers, strict=True)
                if answer is not None and key not in in_store and self._store_lacks(key)
            ]
            if copies:
                await self._off_loop(self._write_store, *copies)
        if missing and self.batch is not None:
            raise self._to_batch(self.batch, [requests[i] for i, _ in missing])
        if missing:
            judged = await gather_or_cancel(*(self._judged(requests[i], key) for i, key in missing))
            for (i, _), answer in zip(missing, judged, strict=True):
                answers[i] = answer
        return answers

    # --- the one lookup order --------------------------------------------------------------------

    def lookup(self, request: JudgeRequest, key: str | None = None) -> JudgeAnswer | None:
        """The answer this run serves for ``request`` without asking the judge, or ``None`` (see
        :meth:`lookup_many`). ``key`` is the request's cache key, when the caller has it already."""
        return self.lookup_many([request], None if key is None else [key])[0]

    def lookup_many(
        self, requests: Sequence[JudgeRequest], keys: Sequence[str] | None = None
    ) -> list[JudgeAnswer | None]:
        """The answers this run serves for ``requests`` without asking the judge (``None`` for each
        it has not).

        The order, written here only: the answers in memory (this run's), then the committed store,
        then the local disk cache. The store is the source of truth: what it holds is served
        whatever the cache says, so a reviewed edit or a checkout of the store takes effect at once.
        ``off`` reads memory only, ``refresh`` only what this run judged itself. Counts where each
        answer came from; a request's derived inputs come with its answer. ``keys`` are the
        requests' cache keys, when the caller has them already.
        """
        if keys is None:
            keys = [request.cache_key() for request in requests]
        memory, used, store, room = self._memory, self.used_keys, self.store, self._memory_entries
        mode = self.mode
        replay, off = mode == "replay", mode == "off"
        judged_only = self._judged_this_run if mode == "refresh" else None
        answers: list[JudgeAnswer | None] = []
        reused = store_hits = cache_hits = saved = 0
        disk: Any = False  # the disk cache, opened at the first answer memory and store lack
        try:
            for request, key in zip(requests, keys, strict=True):
                answer = memory.get(key)
                if answer is not None:
                    memory.move_to_end(key)
                    reused += 1
                    if answer.derived is not None:
                        request.provide(answer.derived, checked=True)  # checked as it entered the run
                else:
                    if off or (judged_only is not None and key not in judged_only):
                        answers.append(None)
                        continue
                    if store is not None and (answer := store.get(request, replay=replay)) is not None:
                        self._in_store.add(key)
                        store_hits += 1
                    else:
                        if disk is False:
                            disk = self._disk()
                        answer = None if disk is None else self._from_disk(request, key, cache=disk)
                        if answer is None:
                            if self._cache_problem is not None:  # it failed: not read again
                                disk = None
                            answers.append(None)
                            continue
                        cache_hits += 1
                    usage = answer.usage
                    saved += usage.prompt_tokens + usage.completion_tokens
                    memory[key] = answer  # a recorded answer, kept as _remember keeps one
                    if len(memory) > room:
                        memory.popitem(last=False)
                used.add(key)
                answers.append(answer)
        finally:  # what was served is counted, whatever stopped the rest
            if reused or store_hits or cache_hits:
                self.stats.record_served(reused, store_hits, cache_hits, saved)
        return answers

    def _remember(self, key: str, answer: JudgeAnswer) -> None:
        memory = self._memory
        # What the memory serves later is a recorded answer, whatever produced it first.
        memory[key] = answer if answer.source != "judge" else dataclasses.replace(answer, source="cache")
        if len(memory) > self._memory_entries:
            memory.popitem(last=False)

    # --- asking the judge ------------------------------------------------------------------------

    async def _judged(self, request: JudgeRequest, key: str) -> JudgeAnswer:
        """The judge's answer to ``request``, asked once per key however many wait for it.

        The request runs as its own task: a waiter cancelled after it was sent leaves it to finish
        and record its answer; one nobody waits for any more and not sent yet is dropped.
        """
        if self.mode == "replay":
            self.stats.record_error()
            raise self._not_recorded(request)
        entry = self._requests.get(key)
        if entry is None or entry.task is None or entry.task.get_loop() is not asyncio.get_running_loop():
            entry = self._requests[key] = _Request()
            entry.task = asyncio.get_running_loop().create_task(self._asked(request, key, entry))
            entry.task.add_done_callback(functools.partial(self._finished, key, entry))
        entry.waiters += 1
        try:
            answer = await asyncio.shield(entry.task)
        finally:
            entry.waiters -= 1
            if not entry.waiters and not entry.sent and not entry.task.done():
                entry.task.cancel()  # nobody waits for it and nothing was sent: nothing is paid
        if answer.derived is not None:
            request.provide(answer.derived, checked=True)  # checked as it entered the run
        return answer

    def _finished(self, key: str, entry: _Request, task: asyncio.Task[JudgeAnswer]) -> None:
        if self._requests.get(key) is entry:
            del self._requests[key]
        if not task.cancelled():
            task.exception()  # retrieved: with nobody waiting, asyncio would log it as never retrieved

    async def _asked(self, request: JudgeRequest, key: str, entry: _Request) -> JudgeAnswer:
        """:meth:`_ask`, as the request's task: ``sys.exit()`` or Ctrl-C raised inside a judge (a
        plugin's) reach the scores waiting for this judgment as :class:`Escaped`, not the loop."""
        try:
            return await self._ask(request, key, entry)
        except (KeyboardInterrupt, SystemExit) as exc:
            raise Escaped(exc) from None

    async def _ask(self, request: JudgeRequest, key: str, entry: _Request) -> JudgeAnswer:
        # The judge is made (the SDK loaded) before a claim is taken: no claim waits on a slow first
        # import (it holds the judging loop, and the interpreter lock the renewing thread needs too).
        self._inner_judge()
        token, answer = await self._claim(request, key)
        if answer is not None:
            # Another process (an xdist worker, another pytest) judged it while this one waited:
            # paid once. It recorded the answer in the store before the cache.
            self.stats.record_cache_hit(answer.usage)
            self._in_store.add(key)
            self._remember(key, answer)
        else:
            try:
                answer = await self._ask_server(request, entry)
                answer = await self._record(request, key, answer, token)
                token = None  # released where it was recorded, after the writes
            finally:
                self._claims.release(key, token)
            if self.mode == "refresh":  # only refresh asks (a large run's keys are not kept twice)
                self._judged_this_run.add(key)
        self.used_keys.add(key)
        return answer

    async def _ask_server(self, request: JudgeRequest, entry: _Request) -> JudgeAnswer:
        """The one place a request goes to the judge: within the concurrency bound, once a slot is free."""
        semaphore = self._semaphore()
        with self.stats.call_in_flight(lambda: entry.sent_once):
            if semaphore is None:
                return await self._send(request, entry)
            async with semaphore:
                return await self._send(request, entry)

    async def _send(self, request: JudgeRequest, entry: _Request) -> JudgeAnswer:
        inner = self._inner_judge()
        if not getattr(inner, "reports_sending", False):
            # A judge that does not say when it sends: from now on, it may have.
            entry.sent = entry.sent_once = True
            return await inner.judge(request)
        # The judge says when the request leaves: until then (it may wait inside, e.g. for the first
        # request to find the server's response format), a request nobody waits for is dropped.
        token = sending.set(functools.partial(self._sending, entry))
        try:
            return await inner.judge(request)
        finally:
            sending.reset(token)

    def _sending(self, entry: _Request, sent: bool) -> None:
        entry.sent = sent
        entry.sent_once |= sent
        if not sent and (self._closing or not entry.waiters) and entry.task is not None:
            # It failed and waits to retry, and nobody will take its answer (the run is closing, or
            # every caller gave up): no answer is on its way, so stop here rather than pay again.
            entry.task.cancel()

    def _inner_judge(self) -> Judge:
        if self._inner is None:
            self._inner = self._make_inner()
        return self._inner

    def _semaphore(self) -> asyncio.Semaphore | None:
        """This loop's bound on calls to the inner judge, or ``None`` when unbounded."""
        if self.concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            with self._lock:
                # Semaphores of loops that are gone can never be used again; forget them.
                for old in [old for old in self._semaphores if old.is_closed()]:
                    del self._semaphores[old]
                semaphore = self._semaphores.setdefault(loop, asyncio.Semaphore(self.concurrency))
        return semaphore

    async def _record(
        self, request: JudgeRequest, key: str, answer: JudgeAnswer, token: Any = None
    ) -> JudgeAnswer:
        _check_answer(request, answer)
        if request.derived:
            answer = dataclasses.replace(answer, derived=request.derived_inputs())
        if self.mode != "off":
            # File and SQLite writes take ~1 ms; in the I/O thread they do not stall the event loop
            # while 30 other judge requests are waiting for their responses. The claim on the
            # judgment (``token``) is given up from there once the answer is written (see
            # _write_answers: later, when the cache holds the answer).
            await self._recording((request, key, answer, token))
            self._in_store.add(key)
        # Also in "off": within one run, sentence and binary relevance share one judgment per chunk.
        self._remember(key, answer)
        return answer

    # --- the batch path ---------------------------------------------------------------------------

    def _to_batch(self, batch: BatchExport, requests: Sequence[JudgeRequest]) -> JudgeError:
        """Write ``requests`` to the batch export instead of asking the judge: each with the body the
        judge would send, each taking its call and its estimated tokens from the spending caps.
        Returns the error the judgment raises: pending, or the cap that refused a request."""
        inner = self._inner_judge()
        body_of = getattr(inner, "request_body", None)
        if body_of is None:
            return JudgeUnavailable(
                f"--rag-batch writes the requests of the OpenAI-compatible judge; this run's judge "
                f"({type(inner).__name__}) has no request body to write"
            )
        for request in requests:
            key = request.cache_key()
            if batch.written(key):
                continue  # this process wrote it already: neither written nor paid for twice
            if not self.stats.take_call():
                assert self.stats.budget is not None  # only a budget refuses
                label = request.label or request.kind
                return JudgeCallCapReached(self.stats.budget.refusal(label, self.how_to_set))
            tokens = batch.add(request, body_of(request))
            if tokens and self.stats.budget is not None:
                self.stats.budget.spend(tokens)
        return batch.pending(len(requests))

    def recorded(self, request: JudgeRequest) -> bool:
        """Whether this run would serve ``request`` without asking (see :meth:`lookup`); an answer
        the cache holds and the store lacks is copied into the store, as a run serving it does."""
        key = request.cache_key()
        answer = self.lookup(request, key)
        if answer is None:
            return False
        if self._store_lacks(key):
            self._write_store((request, answer))
        return True

    def record_answers(self, pairs: Sequence[tuple[JudgeRequest, JudgeAnswer]]) -> None:
        """Record answers obtained elsewhere (a batch's results) as a live answer is recorded: each
        checked against its request, then into the store (one write) and the disk cache."""
        for request, answer in pairs:
            _check_answer(request, answer)
        keyed = [(request, request.cache_key(), answer, None) for request, answer in pairs]
        self._write_answers(keyed)
        self._in_store.update(key for _, key, _, _ in keyed)

    # --- the disk cache --------------------------------------------------------------------------

    def _disable_cache(self, what: str, exc: BaseException) -> None:
        """Go on without the disk cache, saying so once: it only ever saves money."""
        with self._lock:
            if self._cache_problem is not None:
                return
            self._cache_problem = f"{what}: {type(exc).__name__}: {exc}"
        store = (
            f"the judgment store at {self.store.directory} still serves what it holds; "
            if self.store is not None
            else ""
        )
        if is_disk_full(exc):
            # Clearing the cache is not the remedy for a disk that something else filled.
            kept = (
                f"this run's new judgments are recorded in the judgment store at {self.store.directory} "
                "only, not cached"
                if self.store is not None
                else "this run's new judgments are not cached: the next run asks the judge for them again"
            )
            self._warn_once(
                "cache-disabled",
                f"the judgment cache at {self.cache_dir} cannot be used ({self._cache_problem}): the "
                f"disk it is on is full. Continuing without it; {kept}. Free space on that disk.",
            )
            return
        if self.cache_dir is not None and self.cache_dir.exists() and not self.cache_dir.is_dir():
            # A file (rag_cache_dir naming one by a slip): deleting or clearing it is not the remedy.
            fix = "It is not a directory: set the cache directory to one (rag_cache_dir)."
        else:
            fix = (
                "Delete the directory or run `python -m pytest_ragmetrics cache clear --cache-dir "
                f"{shlex.quote(str(self.cache_dir))}` to start a fresh cache."
            )
        self._warn_once(
            "cache-disabled",
            f"the judgment cache at {self.cache_dir} cannot be used ({self._cache_problem}); "
            f"{store}continuing without it. {fix}",
        )

    def _disk(self) -> diskcache.Cache | None:
        """The disk cache, opened on first use; ``None`` when there is none or it is unusable."""
        if self.cache_dir is None or self.mode == "off" or self._cache_problem is not None:
            return None
        if self._cache is not None:
            return self._cache
        problem: BaseException | None = None
        replaced: BaseException | None = None
        with self._lock:
            if self._cache is None and self._cache_problem is None:
                try:
                    try:
                        self._cache = open_disk_cache(self.cache_dir)
                    except sqlite3.DatabaseError:
                        if self.mode == "replay":
                            raise
                        # Damaged (every process of the run would judge on its own), or being
                        # replaced by another process of the run: opened again, one at a time.
                        self._cache, replaced = reopened(self.cache_dir)
                    _cull_at_close(self._cache)
                except Exception as exc:  # sqlite3/diskcache/OS errors of every kind: degrade, warn
                    problem = exc
                    # A cache it cannot write (a read-only mount) is still read: from a copy.
                    self._cache = read_only_copy(self.cache_dir)
                    if self._cache is not None:
                        self._read_only = True
            cache = self._cache
        if self._read_only and problem is not None:
            self._warn_once(
                "cache-read-only",
                f"the judgment cache at {self.cache_dir} cannot be written ({type(problem).__name__}: "
                f"{problem}); it is read from a copy, and this run's new judgments are not cached while "
                "it cannot be written (tried again as this process claims a judgment)",
            )
            return cache
        if replaced is not None:
            self._warn_once(
                "cache-replaced",
                f"the judgment cache {self.cache_dir / 'cache.db'} was not a database or was damaged "
                f"({replaced}); it was moved to {UNUSABLE_NAME} beside it and a fresh cache started",
            )
        if problem is not None:
            self._disable_cache("cannot open it for writing", problem)
        return cache

    def _from_disk(
        self, request: JudgeRequest, key: str, run: str | None = None, *, cache: Any = None
    ) -> JudgeAnswer | None:
        """The answer the disk cache holds for ``key`` (with ``run``: only one that run wrote; a
        damaged entry is dropped: ``None``). ``cache``: the disk cache, when the caller has it open."""
        if cache is None:
            cache = self._disk()
            if cache is None:
                return None
        try:
            raw = cache.get(key)
        except cache_errors() as exc:  # (evaluated only for an exception)
            if is_transient(exc):
                self._warn_once("cache-busy", f"the judgment cache at {self.cache_dir} is busy: {exc}")
            else:
                self._disable_cache("cannot read it", exc)
            return None
        if raw is None:
            return None
        try:
            return _decode_entry(request, key, raw, run)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors too
            # A damaged entry is a miss; drop it so it is replaced by a good one.
            with contextlib.suppress(*cache_errors()):
                cache.delete(key)
            then = (
                "replay treats it as not recorded unless the judgment store has it"
                if self.mode == "replay"
                else "the judgment store or the judge answers instead"
            )
            self._warn_once(
                "cache-entry",
                f"dropped a damaged entry of the judgment cache at {self.cache_dir} "
                f"({request.label or request.kind}: {exc}); {then}. Further damaged entries are "
                "dropped silently.",
            )
            return None

    def _write_disk(self, request: JudgeRequest, key: str, answer: JudgeAnswer) -> bool:
        """Write ``answer`` to the disk cache; False when it was not written."""
        cache = self._disk()
        if cache is None or self._read_only:
            return False
        # What serves the answer first (see _entry_record), then the request's inputs and parameters,
        # so `judge drift` can re-judge from the cache alone.
        served: list[tuple[str, Any]] = [("key", key), ("run", self.run), ("answer", answer.to_json())]
        if request.derived:
            served.append(("derived", request.derived_inputs()))
        asked: list[tuple[str, Any]] = [
            ("inputs", request.inputs),
            ("kind", request.kind),
            ("model", request.model),
            ("n", request.n),
            ("prompt_version", request.prompt_version),
            ("seed", request.seed),
            ("temperature", request.temperature),
        ]
        value = _entry_json(served + asked, ascii=False)
        if not value.isascii() and not _utf8(value):
            # A lone surrogate (a "\ud800" escape in a server's answer) that SQLite cannot store as
            # text: written as JSON's escape of it, which reads back the same.
            value = _entry_json(served + asked, ascii=True)
        try:
            cache.set(key, value)
        except cache_errors() as exc:
            self._cache_failed("cannot write to it", exc)
            return False
        return True

    def _cache_failed(self, what: str, exc: BaseException) -> None:
        """A busy cache is said once and tried again next time; a broken one is given up."""
        if is_transient(exc):
            self._warn_once("cache-busy", f"the judgment cache at {self.cache_dir} is busy: {exc}")
        else:
            self._disable_cache(what, exc)

    # --- the judgment store ----------------------------------------------------------------------

    def _store_lacks(self, key: str) -> bool:
        """True when this run should copy a served answer into the store: it writes, and lacks it.

        Checked once per key and run. Only an answer the store did not serve gets here: a cache hit
        means the store had no readable entry (it is read first), so a damaged line (truncated, out
        of its schema) is replaced by the cached answer too, not just a missing one: otherwise the
        cache would serve it locally on every run while CI replay misses it.
        """
        store = self.store
        if store is None or self.mode not in ("readwrite", "refresh") or key in self._in_store:
            return False
        self._in_store.add(key)  # before any await: concurrent hits of one key copy it once
        return True

    def _write_store(self, *pairs: tuple[JudgeRequest, JudgeAnswer]) -> bool:
        """Record answers in the store in one write; False when there is none or it cannot be written."""
        store = self.store
        if store is None:
            return False
        try:
            store.put_many(pairs)
            return True
        except OSError as exc:
            # Recording was asked for: the run fails at its end, saying why (see JudgeStats).
            self.stats.record_unrecorded(
                len(pairs), f"cannot write to the judgment store at {store.directory} ({exc})"
            )
            return False

    def _write_answers(self, items: list[tuple[JudgeRequest, str, JudgeAnswer, Any]]) -> list[None]:
        """Record answers: into the store (one write), then the disk cache (one transaction), then
        tell the claims (``items``' last field, None for none) that other processes wait on: see
        :meth:`Claims.recorded <pytest_ragmetrics.judge.claims.Claims.recorded>`."""
        self._write_store(*((request, answer) for request, _, answer, _ in items))
        cache = self._disk()
        written = [False] * len(items)
        if cache is not None and not self._read_only:
            try:
                with cache.transact():  # one SQLite transaction for the lot, not one per answer
                    written = [self._write_disk(request, key, answer) for request, key, answer, _ in items]
            except cache_errors() as exc:
                written = [False] * len(items)  # the transaction did not commit
                self._cache_failed("cannot write to it", exc)
        self._claims.recorded(
            [
                (key, token, in_cache)
                for (_, key, _, token), in_cache in zip(items, written, strict=True)
                if token is not None
            ]
        )
        return [None] * len(items)

    # --- what a replay misses --------------------------------------------------------------------

    def _not_recorded(self, request: JudgeRequest) -> JudgmentNotRecorded:
        how_to_set = self.how_to_set
        where = []
        if self.store is not None:
            where.append(f"the judgment store {self.store.directory}")
        if self.cache_dir is not None:
            where.append(f"the cache {self.cache_dir}")
        searched = " or ".join(where) if where else "anywhere (no judgment store is configured)"
        problem = f" (the cache was unusable: {self._cache_problem})" if self._cache_problem else ""
        cut = "" if self.store is None else self.store.cut_short(request.cache_key())
        return JudgmentNotRecorded(
            f"no recorded judgment for {request.label or request.kind} "
            f"(model {request.model}, prompt {request.prompt_version}) in {searched}{problem}."
            f"{cut}{self._other_models_hint(request)} Replay ({how_to_set('cache', 'replay')}) never calls "
            "the judge: record it by running once with an API key in "
            f"{how_to_set('cache', 'readwrite')} (or refresh), then commit the judgment store directory."
        )

    def _other_models_hint(self, request: JudgeRequest) -> str:
        """When the store holds judgments of other models: which, and the setting that selects one.

        Recording with ``--rag-judge-model=X`` and replaying without it misses every judgment; this
        says so instead of leaving "not recorded" unexplained. Reads the store's files once per run.
        """
        if self.store is None:
            return ""
        if self._store_models is None:
            self._store_models = self.store.models()
        others = sorted(self._store_models - {request.model})
        if not others:
            return ""
        name = "relevance_models" if request.kind.startswith("context_relevance_graded") else "judge_model"
        exact = [m for m in others if dataclasses.replace(request, model=m).cache_key() in self.store]
        if exact:
            return (
                f" The store holds this judgment recorded with model {exact[0]}: "
                f"set {self.how_to_set(name, exact[0])}."
            )
        return (
            f" The store holds judgments for model(s) {', '.join(others[:5])}, not {request.model}: "
            f"to replay them, set {self.how_to_set(name, others[0])}."
        )

    # --- one judgment paid once across processes ----------------------------------------------

    async def _claim(self, request: JudgeRequest, key: str) -> tuple[Any, JudgeAnswer | None]:
        """Claim the right to ask the judge for ``key`` across the processes sharing the cache
        directory (xdist workers, or two pytest runs at once).

        Returns ``(token, None)`` when this process holds the claim (release it with
        :meth:`Claims.release <pytest_ragmetrics.judge.claims.Claims.release>`), ``(None, answer)``
        when another process recorded the answer meanwhile, and ``(None, None)`` when there is
        nothing to coordinate with (no usable claims database, or a mode that records nothing).
        While another process holds the claim, this one looks again every :data:`CLAIM_POLL`
        seconds, until the answer is recorded or the claim is given up or lapses.
        """
        if self.mode not in ("readwrite", "refresh"):
            return None, None
        claims = self._claims.database()
        if claims is None:
            return None, None
        token = secrets.token_hex(8)
        while True:
            try:
                outcome = await self._claiming((claims, key, token, request))
            except asyncio.CancelledError:
                # The claim may still be taken in the I/O thread: give it up after that, there.
                with contextlib.suppress(RuntimeError):
                    self._io_thread().submit(Claims.give_up, claims, key, token)
                raise
            if outcome is None:
                return None, None  # a busy or broken claims database must not stop judging
            claimed, hit = outcome
            if hit is not None:
                return None, hit
            if claimed:
                self._claims.hold(claims, key)
                return token, None
            await asyncio.sleep(CLAIM_POLL)

    def _try_claims(self, items: list[tuple[Any, str, str, JudgeRequest]]) -> list[Any]:
        """For each ``(claims, key, token, request)``: ``(claimed, answer recorded meanwhile)``,
        ``None`` when the claims database cannot be used, or what looking raised (:class:`_Failed`).
        A claim taken for an answer found recorded is given up at once."""
        taken = Claims.take([(claims, key, token) for claims, key, token, _ in items])
        if self._read_only and any(claimed is not None for claimed in taken):
            self._live_again()
        outcomes: list[Any] = []
        for (claims, key, token, request), claimed in zip(items, taken, strict=True):
            if claimed is None:
                outcomes.append(None)
                continue
            outcome: tuple[bool, JudgeAnswer | None] | _Failed
            try:
                # Claimed or not, look again: the holder may have just finished.
                hit = self._recorded_meanwhile(request, key)
            except Exception as exc:
                hit, outcome = None, _Failed(exc)
            else:
                outcome = (claimed, hit)
            if claimed and (hit is not None or isinstance(outcome, _Failed)):
                Claims.give_up(claims, key, token)
            outcomes.append(outcome)
        return outcomes

    def _live_again(self) -> None:
        """Read and write the cache itself from now on, rather than the copy read since it could
        not be opened for writing (see :meth:`_disk`), if it opens now.

        Tried as this process claims a judgment, for it shares the cache directory with processes
        that can (the claims database beside the cache opened): the holder of a claim records its
        answer in the cache itself, which a copy never receives, so a process reading the copy would
        wait for the claim and then pay for the judgment again. Until the cache opens, the copy serves."""
        assert self.cache_dir is not None  # (a judge without a cache takes no claims)
        try:
            live = open_disk_cache(self.cache_dir)
            _cull_at_close(live)
        except Exception:  # sqlite3/diskcache/OS errors of every kind: still the copy
            return
        with self._lock:
            opened_first = self._read_only  # else another thread's claim opened it meanwhile
            if opened_first:
                self._copy, self._cache, self._read_only = self._cache, live, False
        if not opened_first:
            with contextlib.suppress(Exception):
                live.close()
            return
        # What the warning of the copy said is true no more: said so, once.
        self._warn_once(
            "cache-writable",
            f"the judgment cache at {self.cache_dir} can be written now: this run's new judgments are "
            "cached from here on (those judged while it was read from a copy are not)",
        )

    def _recorded_meanwhile(self, request: JudgeRequest, key: str) -> JudgeAnswer | None:
        """The answer another process of this run recorded for ``key``: in the store (written first)
        or the cache; under ``refresh``, only a cache entry this run wrote."""
        if self.mode == "refresh":
            return self._from_disk(request, key, run=self.run)
        if self.store is not None:
            answer = self.store.get(request)
            if answer is not None:
                return answer
        return self._from_disk(request, key)

    # --- closing ---------------------------------------------------------------------------------

    async def _off_loop(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run blocking disk work in this judge's one I/O thread, off the event loop.

        One thread, not any of asyncio's: diskcache opens a SQLite connection per thread and closes
        only the calling thread's, so :meth:`close_cache` closes this thread's connection in it.
        """
        call = functools.partial(function, *args, **kwargs)
        try:
            done = asyncio.get_running_loop().run_in_executor(self._io_thread(), call)
        except RuntimeError:  # the interpreter is exiting (an evaluator closed at exit): no new threads
            return call()
        return await done

    def _io_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._io is None:
                self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragmetrics-io")
            return self._io

    def in_flight(self) -> int:
        """How many requests have gone to the judge and wait for its answer."""
        entries = list(self._requests.values())
        return sum(1 for entry in entries if entry.sent and entry.task is not None and not entry.task.done())

    async def aclose(self, *, wait: bool = True) -> None:
        """Let the requests already sent finish and record their answers (within
        :data:`CLOSE_SECONDS`; with ``wait=False``, drop them too), drop those not sent, then close the
        inner judge and the disk cache, which writes every answer received, and let go of the answers
        kept in memory (a judge used again reads them from the store and the cache)."""
        self._closing = True
        entries = list(self._requests.values())
        for entry in entries:
            if entry.task is not None and not (wait and entry.sent):
                entry.task.cancel()
        tasks = [entry.task for entry in entries if entry.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=CLOSE_SECONDS)
        inner, self._inner = self._inner, None
        close = getattr(inner, "aclose", None)
        if close is not None:
            await close()
        self.close_cache()
        # The answers kept in memory go now, with the judge's run, rather than at the garbage
        # collector's next full pass (the judge's own references make it a cycle): thousands of
        # objects that pass would walk, in the middle of whatever the program does next.
        self._memory.clear()

    def close_cache(self) -> None:
        """Close the disk cache (it reopens on next use) and sort the store's shards this run appended to."""
        self._claims.stop_renewing()  # no renewal reaches the claims database once it is closed
        if self.store is not None:
            io = self._io
            if io is not None:
                with contextlib.suppress(RuntimeError):  # at exit, the executor has finished its work
                    io.submit(_nothing).result()  # writes still queued reach the store first
                    while not (self._recording.idle and self._claiming.idle):
                        io.submit(_nothing).result()  # and those handed over again meanwhile
            try:
                gone = self.store.flush()
                if gone:  # the run fails at its end, saying why (see JudgeStats)
                    self.stats.record_unrecorded(
                        gone,
                        f"judgments recorded in the judgment store at {self.store.directory} are gone "
                        "from it (its directory or shards were deleted or replaced during the run; "
                        "run again to record them from the cache)",
                    )
            except OSError as exc:
                self._warn_once(
                    "store-unwritable",
                    f"cannot sort the judgment store at {self.store.directory} ({exc}); its new "
                    "judgments are recorded, unsorted",
                )
            self.store.close()
        with self._lock:
            cache, self._cache = self._cache, None
            copy, self._copy = self._copy, None
            io, self._io = self._io, None
            read_only, self._read_only = self._read_only, False
        if cache is not None and io is not None and not read_only:
            # What the run wrote may have taken the cache past its size: diskcache's eviction (the
            # least recently stored first, down to 1 GB), once (see _disk). Closing must not turn a
            # finished run into an error.
            with contextlib.suppress(Exception):
                io.submit(cache.cull).result()
        self._claims.close(io)
        for opened in (cache, copy):
            if opened is None:
                continue
            # closing must not turn a finished run into an error
            with contextlib.suppress(Exception):
                if io is not None:
                    io.submit(opened.close).result()  # the I/O thread's own connection
                opened.close()
        if io is not None:
            io.shutdown(wait=True)


def _nothing() -> None:
    pass


def _cull_at_close(cache: diskcache.Cache) -> None:
    """Evict by size once, as the judge closes (see :meth:`CachedJudge.close_cache`), rather than
    look at the cache's size after every answer written: three SQLite statements of each write the
    scores wait for. For this judge's connection only, not saved in the cache."""
    cache.reset("cull_limit", 0, update=False)


def cache_summary(cache_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Entries, bytes on disk and per-model counts of the disk cache at ``cache_dir`` (for the CLI)."""
    directory = Path(cache_dir)
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else 0
    summary: dict[str, Any] = {"entries": 0, "bytes": size, "models": {}}
    if not (directory / "cache.db").exists():  # a cache.db that is no file is a damaged cache
        return summary
    cache = open_disk_cache(directory)
    try:
        models: dict[str, int] = {}
        for key in cache.iterkeys():
            if isinstance(key, str) and key.startswith(CLAIM_PREFIX):
                continue  # a judgment being asked for right now, not an entry
            raw = cache.get(key)
            try:
                model = str(json.loads(raw).get("model", "?"))
            except (TypeError, ValueError, AttributeError, RecursionError):
                model = "?"
            models[model] = models.get(model, 0) + 1
        summary["entries"] = sum(models.values())
        summary["models"] = dict(sorted(models.items()))
    finally:
        cache.close()
    return summary
