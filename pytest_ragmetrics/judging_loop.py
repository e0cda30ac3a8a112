"""The background event loop all judging runs on: a :class:`LoopRunner` owns it, and coroutines are
handed to it from any thread.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, Generic, TypeVar, cast

from ._aio import Escaped
from .errors import RagMetricsError

T = TypeVar("T")


class LoopRunner:
    """A daemon thread running one asyncio event loop; coroutines are submitted from any thread."""

    #: Seconds between calls of :attr:`on_wait` while :meth:`run` waits, and at most between two
    #: looks at a Ctrl-C: one that arrives just before the waiting thread blocks (on a busy machine,
    #: while it is off its core) interrupts no wait, and is acted on only when the thread runs
    #: Python again, so a wait never blocks longer than this in one piece.
    wait_interval = 0.25

    def __init__(
        self,
        on_wait: Callable[[float], None] | None = None,
        on_wait_end: Callable[[], None] | None = None,
    ) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing = _Closing()  # the loop's: set as close() ends what it still runs
        self._lock = threading.Lock()
        #: Called with the seconds waited so far while a blocking :meth:`run` waits (progress display),
        #: and :attr:`on_wait_end` once such a wait is over.
        self.on_wait = on_wait
        self.on_wait_end = on_wait_end
        #: How many times work was handed to the loop's thread (each wakes it once).
        self.handovers = 0

    def _ensure(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            return self._ensure_locked()

    def _ensure_locked(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="ragmetrics-judge", daemon=True)
            thread.start()
            self._loop, self._thread, self._closing = loop, thread, _Closing()
        return self._loop

    def submit(self, coro: Coroutine[Any, Any, T]) -> Handed[T]:
        """Start ``coro`` on the background loop; the future holds its result (see :meth:`submit_many`)."""
        return self.submit_many([coro])[0]

    def submit_many(
        self, coros: Sequence[Coroutine[Any, Any, T]], *, until_started: bool = False
    ) -> list[Handed[T]]:
        """Start ``coros`` on the background loop, in order, with one hand-over: the loop's thread is
        woken once for all of them. Each future holds its coroutine's result or error; cancelling a
        future cancels its coroutine (one not started yet never starts).

        ``until_started``: return once the loop has run each coroutine up to its first wait (a judge
        call, the disk), and settled the futures of those that needed none (a warm run's scores).
        The calling thread waits meanwhile rather than taking the interpreter lock back and forth
        with the loop's thread: the loop runs the batch in one stretch. (On the loop's own thread it
        returns at once.)
        """
        started: list[tuple[Coroutine[Any, Any, T], Handed[T]]]
        started = [(coro, Handed()) for coro in coros]
        ready: Handed[None] | None = None
        # Handed over under the lock: close() hands its shutdown over after every earlier hand-over,
        # so what it ends includes them (a hand-over after it goes to a new loop).
        with self._lock:
            loop = self._ensure_locked()
            if until_started and threading.current_thread() is not self._thread:
                ready = Handed()
            try:
                loop.call_soon_threadsafe(_start, loop, started, ready, self._closing)
            except RuntimeError:  # the loop is closed: nothing will ever run them
                for coro, _ in started:
                    coro.close()
                raise
        self.handovers += 1
        futures = [future for _, future in started]
        if ready is not None:
            try:
                ready.result()
            except BaseException:  # Ctrl-C: what was handed over is not wanted any more
                for future in futures:
                    future.cancel()
                raise
        return futures

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the background loop and wait for its result (from a thread other than it)."""
        if self._thread is not None and threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("LoopRunner.run() called from its own event loop; await the coroutine instead")
        __tracebackhide__ = True
        return self.wait(self.submit(coro))

    def wait(self, future: Handed[T]) -> T:
        """Wait for a coroutine submitted earlier (see :meth:`run`)."""
        __tracebackhide__ = True
        started = time.monotonic()
        waited = False
        try:
            while True:
                try:
                    return future.result(timeout=self.wait_interval)
                except concurrent.futures.TimeoutError:
                    if self.on_wait is not None:
                        waited = True
                        self.on_wait(time.monotonic() - started)
        except RagMetricsError as exc:
            # Our own errors say everything in their message; the frames of the judging thread
            # (cache, engine, asyncio) would only bury it. Other exceptions keep their traceback.
            raise exc.with_traceback(None) from None
        except BaseException:
            future.cancel()  # Ctrl-C or a failing progress display: stop judging for this call
            raise
        finally:
            if waited and self.on_wait_end is not None:
                self.on_wait_end()

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await ``coro`` on the background loop from another event loop.

        On the background loop itself (a custom metric awaiting another score) it is awaited as it
        is: a ``SystemExit`` or ``KeyboardInterrupt`` raised in it arrives as
        :class:`~pytest_ragmetrics._aio.Escaped`, which crosses the loop's tasks as an ordinary
        error up to the thread or loop waiting for the outer score, where it is raised as it was.
        Raised as it is on the loop, inside a task, it would stop the loop.
        """
        if self._loop is not None and asyncio.get_running_loop() is self._loop:
            return await coro
        caller = asyncio.get_running_loop()
        waiter: asyncio.Future[T] = caller.create_future()
        handed = self.submit(coro)
        handed.add_done_callback(functools.partial(_pass_on, caller, waiter))
        try:
            return await waiter
        except asyncio.CancelledError:
            handed.cancel()  # the awaiting task was cancelled: so is the coroutine on the loop
            raise

    def close(self) -> None:
        """Stop the loop: what it still runs is cancelled, and whoever waits for it (:meth:`run`,
        :meth:`wait`, a hand-over :meth:`submit_many` waits to start) gets a ``RuntimeError``."""
        with self._lock:
            loop, thread, closing = self._loop, self._thread, self._closing
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(_shut_down, loop, closing)
            thread.join(timeout=10)
            loop.close()


#: Taken while a hand-over is settled, by the loop (its outcome) or by another thread (a
#: cancellation): only ever for a few steps, never while waiting.
_settling = threading.Lock()
_PENDING, _DONE, _FAILED, _CANCELLED = range(4)


class Handed(Generic[T]):
    """The outcome of a coroutine handed to the loop (see :meth:`LoopRunner.submit_many`): set once
    by the loop's thread, or cancelled from any thread, which cancels the coroutine's task.

    A ``concurrent.futures.Future`` would do, but it is about eleven objects the garbage collector
    follows (a condition with its lock, lists, bound methods), made for every score a test takes and
    often kept for several tests while judging ahead; collecting them was a visible part of a warm
    run. This is one object; a lock to wait on is made only when a thread has to wait.
    """

    __slots__ = ("_callbacks", "_outcome", "_state", "_task", "_waiter")

    def __init__(self) -> None:
        self._state = _PENDING
        self._outcome: Any = None
        self._waiter: Any = None  # a lock held until the outcome is set, made by the first waiter
        self._callbacks: list[Callable[[Handed[T]], object]] | None = None
        self._task: asyncio.Task[None] | None = None  # set on the loop as the task is made

    def done(self) -> bool:
        return self._state != _PENDING

    def cancelled(self) -> bool:
        return self._state == _CANCELLED

    def cancel(self) -> bool:
        """Cancel it unless its outcome is set; the coroutine is cancelled on the loop (one not
        started yet never starts)."""
        if not self._settle(_CANCELLED, None):
            return self._state == _CANCELLED
        task = self._task  # None: its task, once made, finds it cancelled at its first step
        if task is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the task is gone with it
                task.get_loop().call_soon_threadsafe(task.cancel)
        return True

    def result(self, timeout: float | None = None) -> T:
        """The coroutine's result, or its error raised, waiting ``timeout`` seconds at most (then
        ``concurrent.futures.TimeoutError``); ``concurrent.futures.CancelledError`` if cancelled."""
        __tracebackhide__ = True
        if self._state == _PENDING and not self._wait(timeout):
            raise concurrent.futures.TimeoutError()
        if self._state == _DONE:
            return cast("T", self._outcome)
        if self._state == _FAILED:
            try:
                raise self._outcome
            finally:
                self = None  # type: ignore[assignment]  # the error's traceback would hold it
        raise concurrent.futures.CancelledError()

    def add_done_callback(self, callback: Callable[[Handed[T]], object]) -> None:
        """Call ``callback(self)`` once the outcome is set or it is cancelled, in the thread that
        does so (at once if that happened already)."""
        with _settling:
            if self._state == _PENDING:
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(callback)
                return
        self._call(callback)

    def _wait(self, timeout: float | None) -> bool:
        with _settling:
            if self._state != _PENDING:
                return True
            waiter = self._waiter
            if waiter is None:
                waiter = self._waiter = threading.Lock()
                waiter.acquire()
        # Interrupted by Ctrl-C like any lock; released (for every waiter, one after another) as
        # the outcome is set.
        if not waiter.acquire(timeout=-1 if timeout is None else max(timeout, 0)):
            return False
        waiter.release()
        return True

    def _settle(self, state: int, outcome: Any) -> bool:
        """Set the outcome (or the cancellation) unless one was set already; wake the waiters."""
        with _settling:
            if self._state != _PENDING:
                return False
            self._state, self._outcome = state, outcome
            waiter, callbacks = self._waiter, self._callbacks
            self._callbacks = None
        if waiter is not None:
            waiter.release()
        for callback in callbacks or ():
            self._call(callback)
        return True

    def _call(self, callback: Callable[[Handed[T]], object]) -> None:
        # Logged, as concurrent.futures does: raised while settling, it would skip the other
        # callbacks and end the loop's task with an error, or leave the coroutine a cancel() was for
        # running; raised by add_done_callback(), it would fail the caller for a callback's fault.
        try:
            callback(self)
        except Exception:
            logging.getLogger(__name__).exception("exception calling callback for %r", self)


def _pass_on(loop: asyncio.AbstractEventLoop, waiter: asyncio.Future[Any], handed: Handed[Any]) -> None:
    """``handed``'s outcome to ``waiter``, on its loop (:meth:`LoopRunner.arun`)."""

    def copy() -> None:
        if waiter.cancelled():
            return
        if handed.cancelled():
            waiter.cancel()
        elif handed._state == _FAILED:
            waiter.set_exception(handed._outcome)
        else:
            waiter.set_result(handed._outcome)

    with contextlib.suppress(RuntimeError):  # that loop is closed: nobody waits for it any more
        loop.call_soon_threadsafe(copy)


class _Closing:
    """Whether :meth:`LoopRunner.close` is ending what its loop still runs (set and read on the loop)."""

    now = False


def _shut_down(loop: asyncio.AbstractEventLoop, closing: _Closing, first: bool = True) -> None:
    """On the loop, after every hand-over made before :meth:`LoopRunner.close`: cancel what runs,
    each task settling its future with the reason, then stop the loop."""
    if first:  # once more, after the first steps of the tasks those hand-overs made (then queued)
        loop.call_soon(_shut_down, loop, closing, False)
        return
    closing.now = True
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    asyncio.gather(*tasks, return_exceptions=True).add_done_callback(lambda _: loop.stop())


def _start(
    loop: asyncio.AbstractEventLoop,
    started: list[tuple[Coroutine[Any, Any, Any], Handed[Any]]],
    ready: Handed[None] | None,
    closing: _Closing,
) -> None:
    """On the loop: run each coroutine as a task that settles its thread-safe future as it ends; then
    set ``ready``, if given, once the tasks have taken their first step (the loop's next pass)."""
    try:
        for coro, future in started:
            if future.cancelled():  # given up before it started
                coro.close()
                continue
            if not asyncio.iscoroutine(coro):  # its caller learns why, rather than waiting forever
                future._settle(_FAILED, TypeError(f"a coroutine was expected, got {coro!r}"))
                continue
            future._task = loop.create_task(_settled(coro, future, closing))
    finally:
        if ready is not None:
            loop.call_soon(ready._settle, _DONE, None)


async def _settled(coro: Coroutine[Any, Any, Any], future: Handed[Any], closing: _Closing) -> None:
    """Run ``coro`` and settle ``future`` with its outcome, as the task ends rather than in a
    callback of the loop's next pass. ``coro`` never starts if ``future`` was cancelled before the
    task's first step (a cancellation reaches the task through the loop, possibly after that step);
    a cancelled task cancels ``future``, or, cancelled by :meth:`LoopRunner.close`, fails it with a
    ``RuntimeError`` saying so. The task itself always ends well: its outcome is the future's."""
    if future.cancelled():
        coro.close()
        return
    try:
        result = await coro
    except asyncio.CancelledError:
        if closing.now:
            future._settle(_FAILED, RuntimeError("the judging loop was closed before this finished"))
        else:
            future.cancel()
        raise
    except BaseException as exc:  # SystemExit, KeyboardInterrupt, pytest.skip() too: they mean
        # something to the thread that waits for the score, where they are raised again; the loop
        # goes on serving the others (its dying would leave every waiter waiting forever).
        future._settle(_FAILED, exc.error if isinstance(exc, Escaped) else exc)
    else:
        future._settle(_DONE, result)
