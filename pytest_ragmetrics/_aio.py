"""asyncio helpers shared by the engine and the metrics."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any, TypeVar

T = TypeVar("T")


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
