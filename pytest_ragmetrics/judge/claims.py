"""One judgment paid once across processes: the claims a process takes on the judgments it asks for.

Processes that share a cache directory (pytest-xdist workers, or two pytest runs at once) each claim
a judgment before asking the judge for it; one that finds it claimed waits for the answer its holder
records (:meth:`~pytest_ragmetrics.judge.cache.CachedJudge._claim` says what a claim means for a
judgment). A claim is an entry added atomically (``diskcache.Cache.add``) to a database of claims of
its own, :data:`CLAIMS_DIR` in the cache directory, so processes pay once per judgment even when
``cache.db`` cannot be used. It expires after :data:`CLAIM_SECONDS` unless renewed, so a process
killed while judging blocks no one for long; a failed or cancelled judgment gives its claim up for
the next process to try.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from .disk_cache import CACHE_TIMEOUT, cache_errors

if TYPE_CHECKING:  # pragma: no cover
    import diskcache  # diskcache ships no type information

#: Prefix of the entries by which a process claims a judgment it is asking for.
CLAIM_PREFIX = "claim:"
#: The directory, in the cache directory, of the claims: a database of their own, so processes that
#: share a cache directory pay once per judgment even when ``cache.db`` cannot be used.
CLAIMS_DIR = "claims"
#: Seconds a claim lives without being renewed: a process that died holding one blocks no one longer.
CLAIM_SECONDS = 10.0
#: Seconds between renewals of the claims a process holds (each renewal gives them CLAIM_SECONDS more).
CLAIM_RENEW_SECONDS = CLAIM_SECONDS / 3
#: Seconds between looks at the cache while another process holds the claim.
CLAIM_POLL = 0.05


class Claims:
    """The claims of one judge on the judgments it asks for, in the claims database of its cache
    directory (``None``: no claims, nothing to coordinate with): the database, opened on first use;
    the claims held, renewed together by one thread; the claims whose answers are in the cache, to
    give up.

    ``io()`` is the judge's one I/O thread, where the database is written: diskcache opens a
    connection per thread and closes only the calling thread's (see :meth:`close`).
    """

    def __init__(self, directory: Path | None, io: Callable[[], concurrent.futures.Executor]) -> None:
        self.directory = directory
        self._io = io
        self._lock = threading.Lock()
        # The database (see database()); False once it proved unusable.
        self._database: diskcache.Cache | Literal[False] | None = None
        # The claims held on judgments being asked for, by key, and the thread that renews them all
        # together, with the event that stops it (see hold).
        self._held: dict[str, str] = {}
        self._renewer: tuple[threading.Thread, threading.Event] | None = None
        # Claims (and their tokens) whose answers are in the cache: given up by the renewing thread
        # at its next turn, or as the claims close (see recorded).
        self._answered: list[tuple[str, str]] = []

    def database(self) -> diskcache.Cache | None:
        """The database of claims, opened on first use; None when there is none or it is unusable."""
        if self.directory is None:
            return None
        with self._lock:
            if self._database is None:
                try:
                    import diskcache

                    # No eviction by size (claims are a few bytes each, given up once answered,
                    # never near diskcache's 1 GB), so no look at the database's size after each
                    # claim: two SQLite statements of five. Lapsed claims are still cleared as new
                    # ones are added.
                    self._database = diskcache.Cache(
                        str(self.directory),
                        timeout=CACHE_TIMEOUT,
                        sqlite_mmap_size=0,
                        eviction_policy="none",
                    )
                except Exception:  # a read-only or broken directory: judge without coordinating
                    self._database = False
            return None if self._database is False else self._database  # (an empty Cache is falsy)

    @staticmethod
    def take(items: list[tuple[Any, str, str]]) -> list[bool | None]:
        """For each ``(database, key, token)``: whether the claim on ``key`` was taken for ``token``,
        ``None`` when the database could not say (busy or broken: no coordination)."""
        errors = cache_errors()
        # One SQLite transaction per claims database for the lot, not one per claim (the items all
        # name the judge's one database, unless it was closed and opened again meanwhile).
        taken: dict[int, bool | None] = {}
        for claims in {id(item[0]): item[0] for item in items}.values():
            added: dict[int, bool | None] = {}
            with contextlib.suppress(*errors):
                with claims.transact():
                    for i, (database, key, token) in enumerate(items):
                        if database is claims:
                            try:
                                added[i] = claims.add(CLAIM_PREFIX + key, token, expire=CLAIM_SECONDS)
                            except errors:
                                added[i] = None
                taken.update(added)  # committed (a failed transaction took none: no coordination)
        return [taken.get(i) for i in range(len(items))]

    def hold(self, claims: Any, key: str) -> None:
        """Keep the claim on ``key`` alive while its judgment is being asked for (queued for a free
        slot, a slow judge, retries): renewed with every other claim held, by one renewing thread.
        A thread, not a task of the event loop: a custom metric that holds the loop up (blocking
        work in its score) past a claim's life must not let the claims of the requests on their way
        lapse, for another process to take them and pay for those judgments again."""
        io = self._io()  # (takes the judge's lock)
        with self._lock:
            self._held[key] = CLAIM_PREFIX + key
            if self._renewer is not None:
                return
            stop = threading.Event()
            thread = threading.Thread(
                target=self._renew, args=(claims, io, stop), name="ragmetrics-claims", daemon=True
            )
            self._renewer = (thread, stop)
        with contextlib.suppress(RuntimeError):  # the interpreter is exiting: the claims live CLAIM_SECONDS
            thread.start()

    def _renew(self, claims: Any, io: concurrent.futures.Executor, stop: threading.Event) -> None:
        """Renew every claim held, together, each :data:`CLAIM_RENEW_SECONDS`, in the I/O thread,
        and give up those whose answers are in the cache meanwhile, until ``stop`` is set (the
        claims are closed)."""
        # RuntimeError: the I/O thread was shut down meanwhile (the cache closed).
        with contextlib.suppress(RuntimeError):
            while not stop.wait(CLAIM_RENEW_SECONDS):
                with self._lock:
                    held = list(self._held.values())
                    answered = bool(self._answered)
                # A turn the database refuses (busy with other processes) is tried again at the
                # next: the claims held would otherwise lapse while their judgments are on the way.
                with contextlib.suppress(*cache_errors()):
                    if held:
                        io.submit(_touch, claims, held).result()
                    if answered:
                        io.submit(self._give_up_answered, claims).result()

    def release(self, key: str, token: Any) -> None:
        """Stop renewing the claim on ``key``; give it up too when ``token`` (None: done already).

        The renewing thread stays, with nothing to renew, until the claims are closed: a test that
        takes claims for its judgments one after the other would otherwise start a thread, and wait
        for it to run, before each of its first requests could leave."""
        with self._lock:
            self._held.pop(key, None)
        if token is None:
            return
        claims = self._database
        if claims is not None and claims is not False:
            self.give_up(claims, key, token)

    def recorded(self, answers: list[tuple[str, str, bool]]) -> None:
        """The answers to the judgments claimed ``(key, token, in the cache)`` are recorded.

        The claim on an answer written to the cache is given up later, by the renewing thread or as
        the claims close, not now: a process that wants the judgment finds its answer in the cache,
        claim or no claim, and the scores waiting for these answers would wait for the claims'
        transaction too, each of its statements taking the interpreter lock back from the judging
        loop reading the next answers. The claim on an answer the cache could not take is given up
        at once: another process judges it then."""
        claims = self._database
        if claims is None or claims is False:
            return
        held: list[tuple[str, str]] = []
        answered: list[tuple[str, str]] = []
        for key, token, in_cache in answers:
            (answered if in_cache else held).append((CLAIM_PREFIX + key, token))
        if answered:
            with self._lock:
                self._answered.extend(answered)
        if held:
            self._give_up_all(claims, held)

    @staticmethod
    def give_up(claims: Any, key: str, token: str) -> None:
        """Delete the claim on ``key`` if ``token`` holds it. Synchronous (one small SQLite
        transaction): it also runs when the judging was cancelled."""
        Claims._give_up_all(claims, [(CLAIM_PREFIX + key, token)])

    @staticmethod
    def _give_up_all(claims: Any, held: list[tuple[str, str]]) -> None:
        """Delete each ``(claim, token)`` whose token holds it, in one SQLite transaction."""
        with contextlib.suppress(*cache_errors()), claims.transact():
            for claim, token in held:
                if claims.get(claim) == token:
                    claims.delete(claim)

    def _give_up_answered(self, claims: Any) -> None:
        """Give up the claims whose answers are in the cache (see :meth:`recorded`)."""
        with self._lock:
            answered, self._answered = self._answered, []
        if answered:
            self._give_up_all(claims, answered)

    def stop_renewing(self) -> None:
        """Stop the renewing thread, waiting for it: no renewal reaches the database once closed."""
        with self._lock:
            renewer, self._renewer = self._renewer, None
        if renewer is not None:
            thread, stop = renewer
            stop.set()
            if thread.is_alive():
                thread.join()

    def close(self, io: concurrent.futures.Executor | None) -> None:
        """Give up the claims whose answers are in the cache, in ``io`` after the writes queued
        before, then close the database (it opens again on next use), in ``io`` and here."""
        with self._lock:
            claims, self._database = self._database, None
        if claims is None or claims is False:
            return
        if io is not None:
            with contextlib.suppress(Exception):  # after the writes queued before it, in turn
                io.submit(self._give_up_answered, claims).result()
        with contextlib.suppress(Exception):  # closing must not turn a finished run into an error
            if io is not None:
                io.submit(claims.close).result()  # the I/O thread's own connection
            claims.close()


def _touch(claims: Any, held: list[str]) -> None:
    """Renew the claims ``held`` for :data:`CLAIM_SECONDS` more, in one SQLite transaction."""
    with claims.transact():
        for claim in held:
            claims.touch(claim, expire=CLAIM_SECONDS)
