"""asyncio helpers shared by the engine and the metrics.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")
X = TypeVar("X")


class Escaped(Exception):
    """``SystemExit`` or ``KeyboardInterrupt`` raised by code the judging loop runs for a user (a
    custom metric, a plugin's judge), carried through the loop's tasks as an ordinary error: raised
    from a task as it is, either stops the loop and leaves every waiter waiting. The thread waiting
    for the result raises :attr:`error` again, where it means something."""

    def __init__(self, error: KeyboardInterrupt | SystemExit) -> None:
        super().__init__(repr(error))
        self.error = error


async def within(seconds: float, awaitable: Awaitable[T]) -> T:
    """``await awaitable``, or ``asyncio.TimeoutError`` once ``seconds`` have passed: a deadline
    for the whole, where an HTTP client's timeout bounds only each wait for the next bytes."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):  # in this task: nothing more to schedule
            return await awaitable
    return await asyncio.wait_for(awaitable, seconds)  # pragma: no cover - Python 3.10


async def gather_or_cancel(*awaitables: Awaitable[T]) -> list[T]:
    """Like ``asyncio.gather``, but the first failure cancels the rest.

    Plain ``gather`` leaves its other tasks running after one fails: judge calls nobody will read,
    still paid for, still going after the caller has seen the error.
    """
    tasks: list[asyncio.Future[Any]] = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def map_bounded(job: Callable[[int], Awaitable[T]], count: int, limit: int) -> list[T]:
    """``[await job(i) for i in range(count)]`` with at most ``limit`` jobs running at a time.

    A batch of 30,000 evaluations started all at once holds 30,000 coroutines, their requests and
    their answers in memory together; ``limit`` workers taking the next job as one finishes keep
    the judge just as busy and memory flat. The first failure cancels the rest.
    """
    results: list[Any] = [None] * count

    async def kept(i: int) -> None:
        results[i] = await job(i)

    await each_bounded(kept, range(count), count, limit)
    return results


async def each_bounded(
    job: Callable[[X], Awaitable[object]], items: Iterable[X], count: int, limit: int
) -> None:
    """``for item in items: await job(item)`` over the ``count`` items, with at most ``limit`` jobs
    running at a time, jobs that keep what they make themselves. The first failure cancels the rest."""
    taken = iter(items)  # shared by the workers: each item is taken once

    async def worker() -> None:
        for item in taken:
            await job(item)

    await gather_or_cancel(*(worker() for _ in range(min(limit, count))))
