"""The judging loop: coroutines handed to it from any thread, their outcomes, cancellations and
callbacks, and its close, each step held by a gate rather than timed."""

import asyncio
import concurrent.futures
import gc
import queue
import threading
from typing import Any

import pytest

from pytest_ragmetrics.judging_loop import LoopRunner


def test_a_batch_handed_over_until_started_returns_once_each_ran_to_its_first_wait():
    """What needs no waiting is settled when the hand-over returns (a warm run's scores); what waits
    has reached its wait and goes on. On the loop's own thread the hand-over returns at once."""
    runner = LoopRunner()
    reached: list[str] = []

    async def done(name: str) -> str:
        return name

    async def waits() -> None:
        reached.append("waits")
        await asyncio.Event().wait()

    async def hands_over() -> Any:
        (inner,) = runner.submit_many([done("inner")], until_started=True)
        return inner  # had it waited for the loop, the loop (this very thread) would never go on

    try:
        first, waiting, second = runner.submit_many([done("a"), waits(), done("b")], until_started=True)
        assert first.done() and second.done()
        assert (first.result(), second.result()) == ("a", "b")
        assert reached == ["waits"]
        assert not waiting.done()
        waiting.cancel()
        assert runner.run(hands_over()).result(timeout=30) == "inner"
    finally:
        runner.close()


async def _until_cancelled(started: threading.Event, cancelled: threading.Event) -> None:
    """Sets ``started``, then waits until it is cancelled, which sets ``cancelled``."""
    started.set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        cancelled.set()
        raise


def test_a_coroutine_handed_over_runs_only_if_its_future_is_still_wanted():
    """Cancelled before the loop got to it, a coroutine never starts, even when its task was made
    already (handed over with the one holding the loop); cancelled while it runs, it is cancelled
    there too. The loop is held by a gate, not a clock."""
    runner = LoopRunner()
    gate, started, cancelled = threading.Event(), threading.Event(), threading.Event()
    holding = threading.Event()
    ran: list[str] = []

    async def hold() -> None:
        holding.set()
        gate.wait(timeout=30)  # blocks the loop: what is handed over meanwhile waits its turn

    async def note(name: str) -> str:
        ran.append(name)
        return name

    try:
        # One hand-over: the three tasks are made at once, before the first of them holds the loop.
        held, first, second = runner.submit_many([hold(), note("first"), note("second")])
        assert holding.wait(timeout=30)  # the tasks of all three are made
        assert second.cancel()
        gate.set()
        assert first.result(timeout=30) == "first"
        held.result(timeout=30)
        running = runner.submit(_until_cancelled(started, cancelled))
        assert started.wait(timeout=30)
        running.cancel()
        assert cancelled.wait(timeout=30)
        assert runner.run(note("last")) == "last"
        assert ran == ["first", "last"]  # "second" never ran
    finally:
        runner.close()


def test_a_thread_waiting_for_one_result_is_woken_by_that_result_only():
    """Results set beside it (in the same hand-over, or later) leave a thread waiting for another
    one waiting; its own wakes it. The coroutine waited for is held by a gate, not a clock."""
    runner = LoopRunner()
    opened = asyncio.Event()
    outcomes: queue.Queue[object] = queue.Queue()

    async def gated() -> str:
        await opened.wait()
        return "gated"

    async def done(name: str) -> str:
        return name

    def waits() -> None:
        try:
            outcomes.put(held.result(timeout=30))
        except BaseException as exc:
            outcomes.put(exc)

    try:
        held, beside = runner.submit_many([gated(), done("beside")], until_started=True)
        with pytest.raises(concurrent.futures.TimeoutError):
            held.result(timeout=0)
        thread = threading.Thread(target=waits, daemon=True)
        thread.start()
        assert beside.result(timeout=30) == "beside"
        assert runner.run(done("later")) == "later"
        with pytest.raises(queue.Empty):
            outcomes.get(timeout=0.2)  # still waiting for its own
        runner._ensure().call_soon_threadsafe(opened.set)
        assert outcomes.get(timeout=30) == "gated"
        thread.join(timeout=30)
    finally:
        runner.close()


def test_a_done_callback_that_fails_is_logged_and_the_other_callbacks_and_the_waiter_go_on(caplog):
    runner = LoopRunner()
    opened = asyncio.Event()
    called: list[str] = []

    async def gated() -> str:
        await opened.wait()
        return "gated"

    def fails(handed: object) -> None:
        raise ValueError("a callback of one's own")

    try:
        (held,) = runner.submit_many([gated()], until_started=True)
        held.add_done_callback(fails)
        held.add_done_callback(lambda handed: called.append(handed.result()))
        runner._ensure().call_soon_threadsafe(opened.set)
        assert held.result(timeout=30) == "gated"
        assert runner.run(gated()) == "gated"  # the loop goes on
        assert called == ["gated"]
        held.add_done_callback(lambda handed: called.append("at once"))  # settled: called at once
        assert called == ["gated", "at once"]
        assert "exception calling callback" in caplog.text and "a callback of one's own" in caplog.text
    finally:
        runner.close()


def test_a_score_awaited_from_another_event_loop_passes_on_its_outcome_and_its_cancellation():
    """``arun`` from a loop of one's own: the result or the error comes back to it, and cancelling
    the awaiting task cancels the coroutine on the judging loop."""
    runner = LoopRunner()
    started, cancelled = threading.Event(), threading.Event()

    async def done(name: str) -> str:
        return name

    async def fails() -> None:
        raise ValueError("no score")

    async def awaits_and_gives_up() -> None:
        task = asyncio.ensure_future(runner.arun(_until_cancelled(started, cancelled)))
        assert await asyncio.get_running_loop().run_in_executor(None, started.wait, 30)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    try:
        assert asyncio.run(runner.arun(done("a"))) == "a"
        with pytest.raises(ValueError, match="no score"):
            asyncio.run(runner.arun(fails()))
        asyncio.run(awaits_and_gives_up())
        assert cancelled.wait(timeout=30)
    finally:
        runner.close()


def test_a_failing_done_callback_is_logged_and_the_cancellation_still_reaches_the_coroutine(caplog):
    """As with a ``concurrent.futures.Future``: an error in a done callback is logged, also in one
    called at once, and ``cancel()`` still cancels the coroutine on the loop."""
    runner = LoopRunner()
    started, cancelled = threading.Event(), threading.Event()

    def fails(_: object) -> None:
        raise ValueError("a callback that fails")

    called: list[object] = []
    try:
        handed = runner.submit(_until_cancelled(started, cancelled))
        assert started.wait(timeout=30)
        handed.add_done_callback(fails)
        handed.add_done_callback(called.append)
        assert handed.cancel()
        assert called == [handed]
        assert cancelled.wait(timeout=30)
        handed.add_done_callback(fails)  # settled: called at once, and logged as well
        assert [str(record.exc_info[1]) for record in caplog.records if record.exc_info] == ["a callback that fails"] * 2
    finally:
        runner.close()


def test_closing_the_runner_from_another_thread_ends_every_wait_with_an_error(monkeypatch):
    """A thread waiting for a result (``run``) or for a hand-over to start (``until_started``) while
    another thread closes the runner learns that the loop was closed, rather than waiting forever.
    The loop is held by a gate, and each step is seen handed to the loop, not timed."""
    runner = LoopRunner()
    loop = runner._ensure()
    handed: queue.Queue[str] = queue.Queue()
    hand = loop.call_soon_threadsafe

    def seen(callback, *args):
        handle = hand(callback, *args)
        handed.put(getattr(callback, "__name__", repr(callback)))
        return handle

    monkeypatch.setattr(loop, "call_soon_threadsafe", seen)
    gate, holding, started = threading.Event(), threading.Event(), threading.Event()
    outcomes: dict[str, BaseException | object] = {}

    async def hold() -> None:
        holding.set()
        gate.wait(timeout=30)  # blocks the loop: what is handed over meanwhile waits its turn

    async def forever() -> None:
        started.set()
        await asyncio.Event().wait()

    def waits(name: str, call: Any) -> threading.Thread:
        def target() -> None:
            try:
                outcomes[name] = call()
            except BaseException as exc:
                outcomes[name] = exc

        thread = threading.Thread(target=target, daemon=True)
        thread.start()
        return thread

    def handed_over() -> object:
        (future,) = runner.submit_many([forever()], until_started=True)
        return runner.wait(future)

    try:
        running = waits("run", lambda: runner.run(forever()))
        assert started.wait(timeout=30)
        assert handed.get(timeout=30) == "_start"
        runner.submit(hold())
        assert handed.get(timeout=30) == "_start"
        assert holding.wait(timeout=30)
        starting = waits("until_started", handed_over)
        assert handed.get(timeout=30) == "_start"  # its hand-over waits behind the gate
        closing = threading.Thread(target=runner.close, daemon=True)
        closing.start()
        handed.get(timeout=30)  # the close is handed to the loop after it
    finally:
        gate.set()
    for thread in (closing, running, starting):
        thread.join(timeout=30)
        assert not thread.is_alive()
    for name in ("run", "until_started"):
        error = outcomes[name]
        assert isinstance(error, RuntimeError), (name, error)
        assert "closed" in str(error)


def test_a_score_that_exits_or_skips_tells_its_waiter_and_the_loop_goes_on():
    """``sys.exit()``, Ctrl-C raised by hand or ``pytest.skip()`` inside a score reach the thread
    that waits for it, where they mean something; the judging loop keeps serving the other scores
    (a hand-over waiting until they started returns), and asyncio has no task error to log."""
    runner = LoopRunner()
    logged: list[dict[str, Any]] = []
    runner._ensure().set_exception_handler(lambda loop, context: logged.append(context))

    async def raises(error: BaseException) -> None:
        raise error

    async def done(name: str) -> str:
        return name

    try:
        exits, after = runner.submit_many([raises(SystemExit(3)), done("after")])
        with pytest.raises(SystemExit):
            exits.result(timeout=30)
        assert after.result(timeout=30) == "after"
        interrupted, skipped, last = runner.submit_many(
            [raises(KeyboardInterrupt()), raises(pytest.skip.Exception("n/a")), done("last")],
            until_started=True,
        )
        assert last.result(timeout=0) == "last"
        with pytest.raises(KeyboardInterrupt):
            interrupted.result(timeout=0)
        with pytest.raises(pytest.skip.Exception):
            skipped.result(timeout=0)
        del exits, interrupted, skipped
        gc.collect()
        assert runner.run(done("still")) == "still"
        assert logged == []
    finally:
        runner.close()
