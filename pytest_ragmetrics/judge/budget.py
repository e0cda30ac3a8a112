"""A cap on the judge requests a run sends, counted across the processes of the run.

A first run against a large golden set, or a prompt change that invalidates every recorded judgment,
has no natural brake: :class:`CallBudget` is one. Every request sent to the judge (retries and re-asks
included: each is paid for) first takes one call from the budget; once the budget is spent, nothing
more is sent and the judgment fails with :class:`~pytest_ragmetrics.errors.JudgeCallCapReached`.

Under pytest-xdist the workers share one budget: a one-row SQLite table in a file the controller
creates, whose counter a single ``UPDATE ... WHERE spent < cap`` statement raises atomically, so no two
processes can together send more than the cap. Without a file (a script) the count is kept in memory.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3

__all__ = ["CallBudget", "cap_message", "cap_stopped_message"]


def cap_message(limit: int, label: str, how_to_set: Callable[[str, str], str]) -> str:
    """Why ``label`` was not judged: the cap, and how to raise it (in the caller's wording)."""
    return (
        f"the judge call cap of {limit} call(s) is reached: {label} was not judged (what was judged is "
        f"kept); to allow more, set {how_to_set('max_judge_calls', str(max(1, 2 * limit)))}"
    )


def cap_stopped_message(limit: int, refused: int, how_to_set: Callable[[str, str], str]) -> str:
    """The run's closing line when the cap refused requests."""
    return (
        f"ragmetrics: the judge call cap stopped the run: {limit} judge call(s) allowed, {refused} more "
        f"refused; what was judged is kept; to allow more, set "
        f"{how_to_set('max_judge_calls', str(max(1, 2 * limit)))}"
    )


class CallBudget:
    """At most ``limit`` judge calls, shared by every process that opens the same ``path``."""

    def __init__(self, limit: int, path: str | os.PathLike[str] | None = None) -> None:
        if limit < 0:
            raise ValueError(f"a judge call cap must not be negative, got {limit}")
        self.limit = limit
        self.path = None if path is None else os.fspath(path)
        self._lock = threading.Lock()
        self._spent_here = 0
        self._exhausted = False
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"CallBudget(limit={self.limit}, path={self.path!r})"

    @classmethod
    def create(cls, limit: int, path: str | os.PathLike[str]) -> CallBudget:
        """A fresh budget in the file ``path`` (made now, before the processes that share it start)."""
        budget = cls(limit, path)
        budget._connect()
        return budget

    def take(self) -> bool:
        """Take one call: True when it may be sent, False (from then on) once the cap is reached."""
        with self._lock:
            if self._exhausted:
                return False
            if self.path is None:
                allowed = self._spent_here < self.limit
            else:
                cursor = self._connect().execute(
                    "UPDATE calls SET spent = spent + 1 WHERE spent < ?", (self.limit,)
                )
                allowed = cursor.rowcount == 1
            if allowed:
                self._spent_here += 1
            else:
                self._exhausted = True
            return allowed

    @property
    def spent(self) -> int:
        """Calls taken so far: by every process sharing the file, else by this one."""
        with self._lock:
            if self.path is None:
                return self._spent_here
            row = self._connect().execute("SELECT spent FROM calls").fetchone()
            return int(row[0]) if row else 0

    @property
    def exhausted(self) -> bool:
        """True once a call was refused in this process."""
        return self._exhausted

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            db.close()

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3  # only a run with a cap pays for the import

            assert self.path is not None
            # Autocommit: each statement is its own transaction; the event loop's thread and the
            # main thread share the connection under self._lock.
            db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            db.execute("CREATE TABLE IF NOT EXISTS calls (spent INTEGER NOT NULL)")
            db.execute("INSERT INTO calls (spent) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM calls)")
            self._db = db
        return self._db
