"""Caps on what a run spends on the judge, counted across the processes of the run.

A first run against a large golden set, or a prompt change that invalidates every recorded judgment,
has no natural brake: :class:`JudgeBudget` is one. Every request sent to the judge (retries and re-asks
included: each is paid for) first takes one call from the budget; the tokens each answer used are
added to it. Once the calls are spent, or the tokens have reached their cap, nothing more is sent and
the judgment fails with :class:`~pytest_ragmetrics.errors.JudgeCallCapReached`. The call cap is exact;
the token cap is known only as answers come back, so the requests already in flight when it is
reached may pass it by their own size.

Under pytest-xdist the workers share one budget: a one-row SQLite table in a file the controller
creates, whose counters single ``UPDATE`` statements change atomically, so no two processes together
send more calls than the cap. Without a file (a script) the counts are kept in memory. A budget file
that cannot be used any more (deleted with its directory, overwritten) stops the judge with one clear
error; bookkeeping never loses an answer that already came back (:meth:`JudgeBudget.spend` never
raises: the next :meth:`JudgeBudget.take` does).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import threading
from typing import TYPE_CHECKING

from .base import HowToSet

if TYPE_CHECKING:
    import sqlite3

__all__ = ["MAX_CAP", "JudgeBudget", "stopped_message"]

#: Stands for "no cap" in the shared table's comparisons.
_NO_CAP = 2**62
#: The largest cap a budget takes (and the most tokens one answer counts): far past any spending,
#: and a number SQLite and JSON both hold exactly.
MAX_CAP = 2**53


def _raise(name: str, limit: int, how_to_set: HowToSet) -> str:
    return how_to_set(name, max(1, 2 * limit))


def stopped_message(
    calls: int | None, tokens: int | None, refused: str, how_to_set: HowToSet, stopped: str = "the run"
) -> str:
    """The line that says a cap stopped ``stopped`` (a run's closing line, once): what it ``refused``
    (``"3 judge call(s) refused"``), the caps, and how to allow more."""
    caps = []
    if calls is not None:
        caps.append(f"{calls} judge call(s) ({_raise('max_judge_calls', calls, how_to_set)} to allow more)")
    if tokens is not None:
        caps.append(f"{tokens} tokens ({_raise('max_judge_tokens', tokens, how_to_set)} to allow more)")
    return (
        f"the judge spending cap stopped {stopped}: {refused} past "
        + " and ".join(caps)
        + "; what was judged is kept"
    )


class JudgeBudget:
    """At most ``calls`` judge calls and about ``tokens`` tokens (None: no such cap), shared by every
    process that opens the same ``path``."""

    def __init__(
        self, calls: int | None = None, tokens: int | None = None, path: str | os.PathLike[str] | None = None
    ) -> None:
        for name, cap in (("call", calls), ("token", tokens)):
            if cap is not None and not 0 <= cap <= MAX_CAP:
                raise ValueError(f"a judge {name} cap must be between 0 and {MAX_CAP}, got {cap}")
        self.calls = calls
        self.tokens = tokens
        self.path = None if path is None else os.fspath(path)
        self._lock = threading.Lock()
        self._calls_here = 0
        self._tokens_here = 0
        self._refusal: str | None = None
        self._broken: str | None = None  # why the budget file cannot be used any more
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"JudgeBudget(calls={self.calls}, tokens={self.tokens}, path={self.path!r})"

    @classmethod
    def create(cls, calls: int | None, tokens: int | None, path: str | os.PathLike[str]) -> JudgeBudget:
        """A fresh budget in the file ``path`` (made now, before the processes that share it start)."""
        budget = cls(calls, tokens, path)
        with budget._lock:
            budget._connect()
        return budget

    def take(self) -> bool:
        """Take one call: True when it may be sent, False (from then on) once a cap is reached.

        Raises :class:`~pytest_ragmetrics.errors.JudgeUnavailable` once the budget file cannot be used.
        """
        with self._lock:
            if self._refusal is not None:
                return False
            self._check()
            calls = _NO_CAP if self.calls is None else self.calls
            tokens = _NO_CAP if self.tokens is None else self.tokens
            try:
                if self.path is None:
                    allowed = self._calls_here < calls and self._tokens_here < tokens
                else:
                    cursor = self._connect().execute(
                        "UPDATE budget SET calls = calls + 1 WHERE calls < ? AND tokens < ?", (calls, tokens)
                    )
                    allowed = cursor.rowcount == 1
                if allowed:
                    self._calls_here += 1
                else:
                    self._refusal = "tokens" if self._spent_locked()[1] >= tokens else "calls"
            except Exception as exc:  # sqlite3.Error, or whatever a garbled file makes of a row
                self._note_broken(exc)
                self._check()
            return allowed

    def spend(self, tokens: int) -> None:
        """An answer came back having used ``tokens`` tokens. Never raises: an answer received is
        recorded whatever becomes of the bookkeeping (the next :meth:`take` reports a broken file)."""
        if self.tokens is None or tokens <= 0:
            return
        tokens = min(tokens, MAX_CAP)
        with self._lock:
            self._tokens_here += tokens
            if self.path is not None and self._broken is None:
                try:
                    update = "UPDATE budget SET tokens = min(tokens + ?, ?)"
                    self._connect().execute(update, (tokens, _NO_CAP))
                except Exception as exc:
                    self._note_broken(exc)

    def _note_broken(self, exc: BaseException) -> None:
        self._broken = (
            f"the judge spending budget of this run cannot be counted any more: its file {self.path} is "
            f"unusable ({type(exc).__name__}: {exc}); nothing more is sent to the judge and what was "
            "judged is kept. Was it deleted or overwritten while the run went on?"
        )

    def _check(self) -> None:
        if self._broken is not None:
            from ..errors import JudgeUnavailable

            raise JudgeUnavailable(self._broken)

    @property
    def spent(self) -> tuple[int, int]:
        """Calls and tokens spent so far: by every process sharing the file, else by this one (also
        once the file cannot be read any more)."""
        with self._lock:
            if self._broken is None:
                try:
                    return self._spent_locked()
                except Exception as exc:
                    self._note_broken(exc)
            return self._calls_here, self._tokens_here

    @property
    def exhausted(self) -> bool:
        """True once a call was refused in this process."""
        return self._refusal is not None

    def refusal(self, label: str, how_to_set: HowToSet) -> str:
        """Why ``label`` was not judged: the cap that was reached, and how to raise it."""
        if self._refusal == "tokens" and self.tokens is not None:
            cap = f"the judge token cap of {self.tokens} tokens is reached"
            more = _raise("max_judge_tokens", self.tokens, how_to_set)
        else:
            calls = self.calls or 0
            cap = f"the judge call cap of {calls} call(s) is reached"
            more = _raise("max_judge_calls", calls, how_to_set)
        return f"{cap}: {label} was not judged (what was judged is kept); to allow more, set {more}"

    def close(self) -> None:
        with self._lock:
            db, self._db = self._db, None
        if db is not None:
            db.close()

    def _spent_locked(self) -> tuple[int, int]:
        if self.path is None:
            return self._calls_here, self._tokens_here
        row = self._connect().execute("SELECT calls, tokens FROM budget").fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            import sqlite3  # only a run with a cap pays for the import

            assert self.path is not None
            # Autocommit: each statement is its own transaction; the event loop's thread and the
            # main thread share the connection under self._lock.
            db = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            # The file lives for one run and nothing reads it after a crash: no fsync per judge call.
            db.execute("PRAGMA synchronous = OFF")
            db.execute("CREATE TABLE IF NOT EXISTS budget (calls INTEGER NOT NULL, tokens INTEGER NOT NULL)")
            db.execute(
                "INSERT INTO budget (calls, tokens) SELECT 0, 0 WHERE NOT EXISTS (SELECT 1 FROM budget)"
            )
            self._db = db
        return self._db
