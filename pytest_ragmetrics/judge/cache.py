"""The read-through judgment layer: an in-memory map, a local disk cache, the committed store, the judge.

:class:`CachedJudge` wraps any :class:`~pytest_ragmetrics.judge.base.Judge` and implements the cache
modes:

``readwrite``  cache, then store, then the judge; a new answer is written to the cache and the store.
``replay``     never call the judge; a judgment in neither cache nor store raises
               :class:`~pytest_ragmetrics.errors.JudgmentNotRecorded`. What CI without a key runs.
``refresh``    always ask the judge (once per request and run), overwrite cache and store.
``off``        ask the judge, read and write nothing on disk; an answer is reused within the run while
               it is among the last :data:`MEMORY_ENTRIES` answers.

Whatever serves an answer, in ``readwrite`` and ``refresh`` the judgment store ends up holding it: a
cache hit for a key the store lacks (a store added later, an entry pruned) is copied into the store,
so the store can always replay what the last run used.

The disk cache is a :mod:`diskcache` SQLite database shared safely by threads and by processes
(pytest-xdist workers). It only ever saves money: when it is corrupt, locked or unwritable, one
:class:`RagMetricsWarning` is issued and the run goes on without it. Values are stored as JSON text,
never pickles, so a cache directory cannot smuggle code into a run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import json
import os
import secrets
import shlex
import sqlite3
import threading
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar, cast

from .._aio import gather_or_cancel
from ..errors import ConfigError, InvalidJudgeAnswer, JudgmentNotRecorded
from .base import Judge, JudgeAnswer, JudgeRequest, conforms, utc_now, validate_answer
from .stats import JudgeStats
from .store import JudgmentStore, atomic_write_text

if TYPE_CHECKING:  # pragma: no cover
    import diskcache  # diskcache ships no type information

_T = TypeVar("_T")

CacheMode = Literal["readwrite", "replay", "refresh", "off"]
CACHE_MODES: tuple[CacheMode, ...] = ("readwrite", "replay", "refresh", "off")

#: File in the cache directory: the store entries the last run did not use, or why it cannot tell
#: (for ``prune``). Named apart from the older record of used keys, which ``prune`` must not read.
LAST_RUN_FILE = "last_run.json"
#: Seconds a process waits for the SQLite lock before giving up on one cache operation.
CACHE_TIMEOUT = 10.0
#: Answers kept in memory per run in front of the disk cache (the oldest go first): enough for the
#: judgments that one test or the samples an evaluation has in flight share (sentence and binary
#: relevance share one per chunk), without holding a large run's answers in memory: each answer
#: kept costs several hundred bytes, and most judgments are asked for once.
MEMORY_ENTRIES = 4_096
#: SQLite's page cache of each connection to the disk cache, in pages (4 KiB each): 2 MiB.
SQLITE_CACHE_PAGES = 512
#: Prefix of the disk-cache entries by which a process claims a judgment it is asking for.
CLAIM_PREFIX = "claim:"
#: Seconds a claim lives without being renewed: a process that died holding one blocks no one longer.
CLAIM_SECONDS = 30.0
#: Seconds between looks at the cache while another process holds the claim.
CLAIM_POLL = 0.05
#: Keys read from the disk cache in one SQLite query (well under SQLite's oldest bound of 999
#: parameters per statement).
READ_MANY = 500
#: What a batch read gives for an entry that is not text (never unpickled): a damaged entry.
NOT_TEXT = object()
_UNREAD = object()
# A read of the disk cache being gathered: its event loop, the keys asked for, the futures waiting.
_Gathering = tuple[asyncio.AbstractEventLoop, set[str], list["asyncio.Future[None]"]]


def _select_many(count: int, *, timed: bool = False) -> str:
    # What diskcache's own get() selects: text keys, entries that have not expired.
    marks = ",".join("?" * count)
    return (
        f"SELECT key, mode, filename, value{', store_time' if timed else ''} FROM Cache WHERE raw = 1 "
        f"AND key IN ({marks}) AND (expire_time IS NULL OR expire_time > ?)"
    )


def read_many(cache: Any, keys: Sequence[str]) -> dict[str, Any] | None:
    """The disk-cache entries of ``keys`` that exist (text, or :data:`NOT_TEXT`), in one query per
    :data:`READ_MANY` keys; ``None`` when ``cache`` cannot be read that way (read one by one).

    Reads the table diskcache keeps, as :class:`ReadOnlyDiskCache` does: one query instead of one
    per key is what makes a warm run's cache reads cheap. Raises what SQLite raises.
    """
    if isinstance(cache, ReadOnlyDiskCache):
        return cache.get_many(keys)
    sql, disk = getattr(cache, "_sql", None), getattr(cache, "_disk", None)
    if sql is None or disk is None:
        return None
    found: dict[str, Any] = {}
    now = time.time()
    for start in range(0, len(keys), READ_MANY):
        chunk = keys[start : start + READ_MANY]
        for key, mode, filename, value in sql(_select_many(len(chunk)), (*chunk, now)).fetchall():
            if mode in (1, 2, 3):  # diskcache's raw, binary and text modes; never a pickle
                with contextlib.suppress(OSError):  # a file removed meanwhile: a miss, as in get()
                    found[key] = disk.fetch(mode, filename, value, False)
            else:
                found[key] = NOT_TEXT
    return found


def _decode_entry(request: JudgeRequest, key: str, raw: Any) -> JudgeAnswer:
    """The answer a disk-cache entry holds for ``request``; :class:`ValueError` when it is damaged."""
    record = json.loads(raw) if isinstance(raw, (str, bytes)) else None  # NOT_TEXT: damaged
    if not isinstance(record, dict) or record.get("key") != key:
        raise ValueError("the entry does not belong to this key")
    if "answer" not in record:
        raise ValueError("the entry has no answer")
    derived = None
    if request.derived:
        request.provide(record.get("derived"))
        derived = request.derived_inputs()
    # from_json checks every JSON type: a damaged entry is a ValueError, not an AttributeError.
    answer = JudgeAnswer.from_json(record["answer"], source="cache", derived=derived)
    schema = request.schema
    if len(answer.choices) != request.n or not all(conforms(schema, c) for c in answer.choices):
        raise ValueError("the entry does not conform to the schema")
    return answer


class ServedElsewhere(BaseException):
    """A score being served on the calling thread (see :func:`serving_here`) needs more than the
    recorded answers at hand: the judge, a write, a repair or the event loop. It is scored on the
    judging loop instead. A :class:`BaseException`, so no metric's ``except Exception`` takes it."""


# The hits of the score being served on the calling thread, counted once it is served (a score that
# turns out to need the judging loop is scored again there, and counts there): (source, usage).
_HERE: contextvars.ContextVar[list[JudgeAnswer] | None] = contextvars.ContextVar(
    "ragmetrics_served_here", default=None
)


@contextlib.contextmanager
def serving_here() -> Iterator[list[JudgeAnswer]]:
    """Within it, :meth:`CachedJudge.judge` and :meth:`CachedJudge.judge_many` serve recorded answers
    without awaiting anything, and raise :class:`ServedElsewhere` for anything else. Yields the
    answers served, for :meth:`CachedJudge.count_served`."""
    served: list[JudgeAnswer] = []
    token = _HERE.set(served)
    try:
        yield served
    finally:
        _HERE.reset(token)


class RagMetricsWarning(UserWarning):
    """Something degraded but the run can go on (e.g. the disk cache is unusable)."""


# Errors the disk cache can raise; none of them may reach the user as a traceback.
@functools.cache  # asked on every read; diskcache is imported on first use only
def _cache_errors() -> tuple[type[BaseException], ...]:
    import diskcache

    return (sqlite3.Error, OSError, diskcache.Timeout, ValueError, TypeError, KeyError)


def default_cache_dir(
    rootdir: str | os.PathLike[str], pytest_cache_dir: str | os.PathLike[str] | None = None
) -> Path:
    """Where the disk cache lives by default.

    ``<pytest_cache_dir>/ragmetrics`` when pytest's cache directory is given. Pass the directory in
    which ``config.cache.mkdir`` creates its directories (``<rootdir>/.pytest_cache/d``), so the result
    is the same as ``config.cache.mkdir("ragmetrics")`` and what ``python -m pytest_ragmetrics cache``
    looks at. Without it (``-p no:cacheprovider``): ``<rootdir>/.ragmetrics_cache``.
    """
    if pytest_cache_dir is not None:
        return Path(pytest_cache_dir) / "ragmetrics"
    return Path(rootdir) / ".ragmetrics_cache"


class LastRun(NamedTuple):
    """What the last test run that used the judge says about the judgment store (see
    :func:`write_last_run`)."""

    #: Store entries the run did not use, when it covered the whole suite; else None.
    unused: frozenset[str] | None
    #: Why the run cannot tell which entries are unused (None when it can).
    reason: str | None


def write_last_run(
    cache_dir: str | os.PathLike[str], *, unused: Iterable[str] | None, reason: str | None
) -> Path:
    """Record, for ``python -m pytest_ragmetrics cache prune``, the store entries a run that covered
    the whole suite did not use (``unused``), or why the run cannot tell (``reason``)."""
    path = Path(cache_dir) / LAST_RUN_FILE
    record: dict[str, Any] = {"finished_at": utc_now()}
    if reason is not None or unused is None:
        record["reason"] = reason or "unknown"
    else:
        record["unused"] = sorted(set(unused))
    atomic_write_text(path, json.dumps(record, indent=1) + "\n")
    return path


def read_last_run(cache_dir: str | os.PathLike[str]) -> LastRun | None:
    """The record written by :func:`write_last_run`, or ``None`` when there is no usable record."""
    path = Path(cache_dir) / LAST_RUN_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    reason, unused = data.get("reason"), data.get("unused")
    if isinstance(reason, str):
        return LastRun(None, reason)
    if not isinstance(unused, list) or not all(isinstance(k, str) for k in unused):
        return None
    return LastRun(frozenset(unused), None)


def open_disk_cache(cache_dir: str | os.PathLike[str]) -> diskcache.Cache:
    """Open (creating) the diskcache database; raises whatever diskcache/sqlite raise."""
    import diskcache

    database = Path(cache_dir) / "cache.db"
    if database.is_file():
        # diskcache leaves its connection open when the file is not a database (Python 3.13 warns
        # of that); find out first, with a connection that is closed either way.
        probe = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
        try:
            probe.execute("PRAGMA schema_version").fetchone()
        finally:
            probe.close()
    # JSON text values need no pickling; the default eviction ("least-recently-stored", 1 GB) is kept
    # because a cache may lose entries: the committed store is the record.
    # No memory-mapped reads: a warm run reads every entry once, and diskcache's default 64 MB map
    # would hold them all in the process's memory; SQLite's own page cache serves as well. That cache
    # is per connection, and diskcache opens one per thread (the judging loop's, the I/O thread's):
    # 2 MiB each (SQLite's default), not more, as pages not in it are in the OS's file cache anyway.
    return diskcache.Cache(
        str(cache_dir), timeout=CACHE_TIMEOUT, sqlite_mmap_size=0, sqlite_cache_size=SQLITE_CACHE_PAGES
    )


class ReadOnlyDiskCache:
    """A diskcache database read where it cannot be written (a read-only filesystem or mount).

    diskcache itself cannot open such a cache: it writes its settings on opening. This reads the
    same SQLite table, immutable (no journal, no lock files), and the text values diskcache keeps
    inline or in files. Nothing is written: :meth:`set` and :meth:`delete` do nothing. Pickled
    values are never read.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        database = (self.directory / "cache.db").resolve()
        if not database.is_file():
            raise FileNotFoundError(f"no cache database at {database}")
        # mode=ro reads the write-ahead log too (judgments not yet checkpointed into the database);
        # where SQLite cannot open it that way on a read-only mount, immutable=1 (no locks, no -shm
        # file) reads the database alone: safe, since nothing can write there either.
        problem: sqlite3.Error | None = None
        for options in ("mode=ro", "mode=ro&immutable=1"):
            db = None
            try:
                db = sqlite3.connect(f"{database.as_uri()}?{options}", uri=True, check_same_thread=False)
                db.execute("SELECT key, raw, value, mode, filename, expire_time FROM Cache LIMIT 0")
            except sqlite3.Error as exc:
                problem = exc
                if db is not None:
                    db.close()
                continue
            self._db = db
            break
        else:
            raise problem or sqlite3.OperationalError("cannot open the cache database")
        self._lock = threading.Lock()

    def get(self, key: str) -> str | bytes | None:
        with self._lock:
            row = self._db.execute(
                "SELECT value, mode, filename, expire_time FROM Cache WHERE key = ? AND raw = 1", (key,)
            ).fetchone()
        if row is None:
            return None
        value, mode, filename, expire_time = cast("tuple[Any, int, str | None, float | None]", row)
        if expire_time is not None and expire_time < time.time():
            return None
        if mode == 1 and isinstance(value, (str, bytes)):  # diskcache's MODE_RAW: the value is inline
            return value
        if mode == 3 and filename:  # MODE_TEXT: kept in a file beside the database
            return (self.directory / filename).read_text(encoding="utf-8")
        return None

    def get_many(self, keys: Sequence[str]) -> dict[str, Any]:
        """The entries of ``keys`` that exist, read in as few queries as SQLite allows."""
        return {key: value for key, (value, _) in self.get_many_timed(keys).items()}

    def get_many_timed(self, keys: Sequence[str]) -> dict[str, tuple[Any, float]]:
        """:meth:`get_many`, each entry with the time it was stored (diskcache's ``store_time``)."""
        found: dict[str, tuple[Any, float]] = {}
        now = time.time()
        for start in range(0, len(keys), READ_MANY):
            chunk = keys[start : start + READ_MANY]
            with self._lock:
                rows = self._db.execute(_select_many(len(chunk), timed=True), (*chunk, now)).fetchall()
            for key, mode, filename, value, stored in rows:
                if mode == 1 and isinstance(value, (str, bytes)):
                    found[key] = (value, stored)
                elif mode == 3 and filename:
                    found[key] = ((self.directory / filename).read_text(encoding="utf-8"), stored)
        return found  # anything else is not read at all, as by get()

    def store_times(self, keys: Sequence[str]) -> dict[str, float]:
        """When each of ``keys`` that exists was stored (its value is not read)."""
        found: dict[str, float] = {}
        for start in range(0, len(keys), READ_MANY):
            chunk = keys[start : start + READ_MANY]
            marks = ",".join("?" * len(chunk))
            sql = f"SELECT key, store_time FROM Cache WHERE raw = 1 AND key IN ({marks})"
            with self._lock:
                found.update(self._db.execute(sql, chunk).fetchall())
        return found

    def set(self, key: str, value: str) -> bool:
        return False

    def delete(self, key: str) -> bool:
        return False

    def close(self) -> None:
        self._db.close()


class CachedJudge:
    """A :class:`~pytest_ragmetrics.judge.base.Judge` that serves recorded answers before asking.

    ``make_inner()`` creates the real judge on the first miss (never in replay mode, so replay needs no
    API key). ``cache_dir`` is the local disk cache (``None``: none); ``store`` the committed
    :class:`~pytest_ragmetrics.judge.store.JudgmentStore` (``None``: none). Every answer served or
    written is recorded in :attr:`used_keys`. Concurrent requests with the same key are judged once.
    ``concurrency`` bounds the calls to the inner judge in flight (per event loop; ``None``: no
    bound), so a judge from a plugin hook that does not limit itself cannot open a thousand requests.
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
        shared: bool | None = None,
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
        self.used_keys: set[str] = set()
        self._memory: OrderedDict[str, JudgeAnswer] = OrderedDict()
        self._memory_entries = memory_entries
        self._cache: diskcache.Cache | None = None
        self._cache_problem: str | None = None
        self._lock = threading.Lock()
        self._warned: set[str] = set()
        self._inflight: dict[str, asyncio.Future[JudgeAnswer]] = {}
        # What this run judged, in refresh mode: served again rather than refreshed twice.
        self._judged_this_run: set[str] = set()
        self.concurrency = concurrency
        #: Other processes judge into the same disk cache at the same time (pytest-xdist workers,
        #: detected by default): a judgment is claimed before it is asked for, so it is paid once.
        self.shared = bool(os.environ.get("PYTEST_XDIST_WORKER")) if shared is None else shared
        # asyncio primitives belong to the loop they are first used in: one semaphore per loop.
        self._semaphores: dict[asyncio.AbstractEventLoop, asyncio.Semaphore] = {}
        # Keys the store is known to hold (read or written this run), so a hit costs no stat().
        self._in_store: set[str] = set()
        # Tasks renewing this process's claims on judgments being asked for (see _claim).
        self._renewals: dict[str, asyncio.Task[None]] = {}
        # The one thread that does this judge's blocking disk work (see _off_loop).
        self._io: concurrent.futures.ThreadPoolExecutor | None = None
        # Models the judgment store holds judgments of (read on the first replay miss).
        self._store_models: set[str] | None = None
        # Disk-cache entries read ahead in one query for the requests of many evaluations (see
        # _read_ahead), by key (None: no entry), each taken by the lookup that asked for it.
        self._read: dict[str, Any] = {}
        # The read being gathered in this turn of the event loop: its loop, keys and waiters.
        self._gathering: _Gathering | None = None
        # The disk cache's reader for scores served on the calling thread (see _served_here).
        self._here: ReadOnlyDiskCache | None = None
        # Disk caches given up on (see _disable_cache), whose other threads' connections close_cache closes.
        self._dropped: list[Any] = []

    def __repr__(self) -> str:
        return f"CachedJudge(mode={self.mode!r}, cache_dir={self.cache_dir!r}, store={self.store!r})"

    # --- plumbing --------------------------------------------------------------------------------

    def _warn_once(self, topic: str, message: str) -> None:
        with self._lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        from ..redact import redact

        warnings.warn(redact(message), RagMetricsWarning, stacklevel=4)

    def _disable_cache(self, what: str, exc: BaseException) -> None:
        self._cache_problem = f"{what}: {type(exc).__name__}: {exc}"
        cache, self._cache = self._cache, None
        if cache is not None:
            # closing a broken cache may fail too; it is being dropped anyway
            with contextlib.suppress(Exception):
                cache.close()
            # That closed this thread's connection only: close_cache closes the other threads' ones.
            self._dropped.append(cache)
        self._warn_once(
            "cache-disabled",
            f"the judgment cache at {self.cache_dir} cannot be used ({self._cache_problem}); "
            "continuing without it. Delete the directory or run "
            f"`python -m pytest_ragmetrics cache clear --cache-dir {shlex.quote(str(self.cache_dir))}` "
            "to start a fresh cache.",
        )

    def _disk(self) -> diskcache.Cache | None:
        """The disk cache, opened on first use; ``None`` when there is none or it is unusable."""
        if self.cache_dir is None or self.mode == "off" or self._cache_problem is not None:
            return None
        if self._cache is not None:
            return self._cache
        problem: BaseException | None = None
        read_only = False
        with self._lock:
            if self._cache is None:
                try:
                    self._cache = open_disk_cache(self.cache_dir)
                except Exception as exc:  # sqlite3/diskcache/OS errors of every kind: degrade, warn
                    problem = exc
                    self._cache = self._open_read_only()
                    read_only = self._cache is not None
            cache = self._cache
        if read_only:
            self._warn_read_only(problem)
        elif problem is not None:
            self._disable_cache("cannot open it", problem)
        return cache

    def _open_read_only(self) -> ReadOnlyDiskCache | None:
        """A warm cache that cannot be written is still worth reading: it saves every judgment it holds."""
        if self.cache_dir is None:
            return None
        try:
            return ReadOnlyDiskCache(self.cache_dir)
        except Exception:  # not a cache at all, or unreadable too: the caller disables it
            return None

    def _warn_read_only(self, problem: BaseException | None) -> None:
        why = f" ({type(problem).__name__}: {problem})" if problem is not None else ""
        self._warn_once(
            "cache-read-only",
            f"the judgment cache at {self.cache_dir} cannot be written{why}; reading it, "
            "new judgments are not cached",
        )

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

    async def _ask_inner(self, request: JudgeRequest) -> JudgeAnswer:
        semaphore = self._semaphore()
        with self.stats.call_in_flight():
            if semaphore is None:
                return await self._inner_judge().judge(request)
            async with semaphore:
                return await self._inner_judge().judge(request)

    def _remember(self, key: str, answer: JudgeAnswer) -> None:
        memory = self._memory
        # What the memory serves later is a cached answer, whatever produced it first.
        memory[key] = answer if answer.source == "cache" else dataclasses.replace(answer, source="cache")
        if len(memory) > self._memory_entries:
            memory.popitem(last=False)

    # --- reading ---------------------------------------------------------------------------------

    def _from_disk(self, request: JudgeRequest, key: str) -> JudgeAnswer | None:
        """The answer the disk cache holds for ``key`` (a damaged entry is dropped: ``None``)."""
        cache = self._disk()
        if cache is None:
            return None
        errors = _cache_errors()
        raw = self._read.pop(key, _UNREAD)
        if raw is _UNREAD:
            try:
                raw = cache.get(key)
            except errors as exc:
                self._read_failed(exc)
                return None
        if raw is None:
            return None
        try:
            answer = _decode_entry(request, key, raw)
        except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError are ValueErrors too
            # A damaged entry is a miss; drop it so it is replaced by a good one.
            with contextlib.suppress(*errors):
                cache.delete(key)
            self._renew_epoch(cache)
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
        return answer

    def _read_failed(self, exc: BaseException) -> None:
        if _is_transient(exc):
            self._warn_once("cache-busy", f"the judgment cache at {self.cache_dir} is busy: {exc}")
        else:
            self._disable_cache("cannot read it", exc)

    async def _read_ahead(self, requests: Sequence[JudgeRequest]) -> None:
        """Read the disk-cache entries of ``requests`` together with those of every other evaluation
        asking in this turn of the event loop: one SQLite query for hundreds of keys instead of one
        each. What is read waits in :attr:`_read` for :meth:`_from_disk`; a key that could not be
        read there is read on its own, so this only ever saves time."""
        if self.mode not in ("readwrite", "replay") or self._cache_problem is not None:
            return  # refresh reads only what this run judged (in memory); off reads nothing
        memory, read, store = self._memory, self._read, self.store
        keys = [key for r in requests if (key := r.cache_key()) not in memory and key not in read]
        if store is not None:  # the store is read first: what it holds needs no cache entry
            keys = [key for key in keys if key not in store]
        if not keys or self._disk() is None:
            return
        loop = asyncio.get_running_loop()
        gathering = self._gathering
        if gathering is None or gathering[0] is not loop:
            gathering = self._gathering = (loop, set(), [])
            loop.call_soon(self._read_gathered, gathering)
        gathering[1].update(keys)
        # A future per waiter: one evaluation cancelled (-x, Ctrl-C) cancels no other's wait.
        waiter = loop.create_future()
        gathering[2].append(waiter)
        await waiter

    def _read_gathered(self, gathering: _Gathering) -> None:
        if self._gathering is gathering:
            self._gathering = None
        _, keys, waiters = gathering
        # Entries of the last read that nobody took (a failed evaluation) are not kept: memory stays flat.
        self._read = {}
        cache = self._disk()
        try:
            if cache is not None:
                wanted = list(keys)
                found = read_many(cache, wanted)
                if found is not None:
                    self._read = {key: found.get(key) for key in wanted}
        except _cache_errors() as exc:
            self._read_failed(exc)
        finally:
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    def lookup(self, request: JudgeRequest, key: str | None = None) -> JudgeAnswer | None:
        """A recorded answer to ``request`` (memory, the store, then the disk cache), or ``None``.

        The committed store is the source of truth: what it holds is served whatever the cache
        says, so a reviewed edit or a checkout of the store takes effect at once. ``key`` is the
        request's cache key, when the caller has it already.
        """
        if key is None:
            key = request.cache_key()
        answer = self._memory.get(key)
        if answer is not None:
            self.stats.record_cache_hit(answer.usage)
            return answer
        if self.store is not None:
            answer = self.store.get(request, replay=self.mode == "replay")
            if answer is not None:
                self._in_store.add(key)
                self.stats.record_store_hit(answer.usage)
                self._remember(key, answer)
                return answer
        answer = self._from_disk(request, key)
        if answer is not None:
            self._remember(key, answer)
            self.stats.record_cache_hit(answer.usage)
        return answer

    def _store_lacks(self, key: str) -> bool:
        """True when this run should copy a served answer into the store: it writes, and lacks it.

        Checked once per key and run. A cache hit means the store had no readable entry (it is
        read first), so a damaged entry is replaced by the cached answer too.
        """
        store = self.store
        if store is None or self.mode not in ("readwrite", "refresh") or key in self._in_store:
            return False
        self._in_store.add(key)  # before any await: concurrent hits of one key copy it once
        return key not in store

    def _write_store(self, *pairs: tuple[JudgeRequest, JudgeAnswer]) -> bool:
        """Record answers in the store in one write; False when there is none or it cannot be written."""
        store = self.store
        if store is None:
            return False
        try:
            store.put_many(pairs)
            return True
        except OSError as exc:
            self._warn_once(
                "store-unwritable",
                f"cannot write to the judgment store at {store.directory} ({exc}); "
                "new judgments are not being recorded for replay",
            )
            return False

    # --- writing ---------------------------------------------------------------------------------

    def _write_disk(self, request: JudgeRequest, key: str, answer: JudgeAnswer) -> None:
        cache = self._disk()
        if cache is None:
            return
        self._read.pop(key, None)  # what was read ahead is no longer the entry
        # The request's inputs and parameters too, so `judge drift` can re-judge from the cache alone.
        record: dict[str, Any] = {
            "key": key,
            "kind": request.kind,
            "model": request.model,
            "prompt_version": request.prompt_version,
            "temperature": request.temperature,
            "seed": request.seed,
            "n": request.n,
            "inputs": request.inputs,
            "answer": answer.to_json(),
        }
        if request.derived:
            record["derived"] = request.derived_inputs()
        value = json.dumps(record, sort_keys=True, ensure_ascii=False)
        try:
            cache.set(key, value)
            if self.mode == "refresh":
                self._renew_epoch(cache)  # the answer replaced a recorded one: older scores rest on it
        except _cache_errors() as exc:
            if _is_transient(exc):
                self._warn_once("cache-busy", f"the judgment cache at {self.cache_dir} is busy: {exc}")
                return
            # Opened, but cannot be written (a read-only database file): keep reading it.
            read_only = _is_read_only(exc) and self._swap_to_read_only(cache)
            if read_only:
                self._warn_read_only(exc)
            else:
                self._disable_cache("cannot write to it", exc)

    def _swap_to_read_only(self, cache: Any) -> bool:
        reader = self._open_read_only()
        if reader is None:
            return False
        with self._lock:
            self._cache = reader
        with contextlib.suppress(Exception):
            cache.close()
        return True

    async def _record(self, request: JudgeRequest, key: str, answer: JudgeAnswer) -> JudgeAnswer:
        # Cheap insurance: whatever the inner judge is, nothing unvalidated is ever recorded.
        if len(answer.choices) != request.n:
            raise InvalidJudgeAnswer(
                f"judge gave {len(answer.choices)} answer(s) for {request.label or request.kind}; "
                f"expected {request.n}"
            )
        for choice in answer.choices:
            validate_answer(request, choice)
        if request.derived:
            answer = dataclasses.replace(answer, derived=request.derived_inputs())
        if self.mode != "off":
            # File and SQLite writes take ~1 ms; in a worker thread they do not stall the event loop
            # while 30 other judge requests are waiting for their responses. Shielded: an answer paid
            # for is written even when its judgment is cancelled meanwhile (a sibling chunk failed,
            # a spending cap was reached), else the write queued behind others would be dropped.
            await asyncio.shield(self._off_loop(self._write_both, request, key, answer))
            self._in_store.add(key)
        # Also in "off": within one run, sentence and binary relevance share one judgment per chunk.
        self._remember(key, answer)
        return answer

    def _write_both(self, request: JudgeRequest, key: str, answer: JudgeAnswer) -> None:
        self._write_store((request, answer))
        self._write_disk(request, key, answer)

    # --- the Judge protocol ----------------------------------------------------------------------

    def _not_recorded(self, request: JudgeRequest) -> JudgmentNotRecorded:
        from ..settings import how_to_set

        where = []
        if self.store is not None:
            where.append(f"the judgment store {self.store.directory}")
        if self.cache_dir is not None:
            where.append(f"the cache {self.cache_dir}")
        searched = " or ".join(where) if where else "anywhere (no judgment store is configured)"
        problem = f" (the cache was unusable: {self._cache_problem})" if self._cache_problem else ""
        return JudgmentNotRecorded(
            f"no recorded judgment for {request.label or request.kind} "
            f"(model {request.model}, prompt {request.prompt_version}) in {searched}{problem}."
            f"{self._other_models_hint(request)} Replay ({how_to_set('cache', 'replay')}) never calls "
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
        from ..settings import how_to_set

        name = "relevance_models" if request.kind.startswith("context_relevance_graded") else "judge_model"
        exact = [m for m in others if dataclasses.replace(request, model=m).cache_key() in self.store]
        if exact:
            return (
                f" The store holds this judgment recorded with model {exact[0]}: "
                f"set {how_to_set(name, exact[0])}."
            )
        return (
            f" The store holds judgments for model(s) {', '.join(others[:5])}, not {request.model}: "
            f"to replay them, set {how_to_set(name, others[0])}."
        )

    def recorded(self, request: JudgeRequest, key: str | None = None) -> JudgeAnswer | None:
        """The answer this run serves for ``request`` without asking the judge, or ``None``.

        What :meth:`judge` serves first: in ``off`` mode what this run already judged, in
        ``refresh`` mode what this run already refreshed, else a recorded answer (memory, disk
        cache, store). Counts the hit; a request's derived inputs come with its answer.
        """
        if key is None:
            key = request.cache_key()
        if self.mode == "off":
            # Nothing on disk is read, but what this run already judged is not paid for twice.
            answer = self._memory.get(key)
            if answer is not None:
                self.stats.record_cache_hit(answer.usage)
        elif self.mode != "refresh" or key in self._judged_this_run:
            answer = self.lookup(request, key)
        else:
            return None
        if answer is not None:
            if answer.derived is not None:
                request.provide(answer.derived)
            self.used_keys.add(key)
        return answer

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        """Serve ``request`` according to :attr:`mode`."""
        if _HERE.get() is not None:
            return self._served_here([request], None)[0]  # type: ignore[return-value]  # never skipped
        answer = self.recorded(request)
        if answer is not None:
            key = request.cache_key()
            if self._store_lacks(key):
                # Off the event loop, like every other write.
                await self._off_loop(self._write_store, (request, answer))
            return answer
        return await self._judge_unrecorded(request)

    async def judge_many(
        self, requests: Sequence[JudgeRequest], skip: Callable[[JudgeRequest], bool] | None = None
    ) -> list[JudgeAnswer | None]:
        """Serve several requests: the recorded ones at once, the others concurrently.

        ``skip(request)`` is asked for each request that has no recorded answer; a request it
        accepts is neither judged nor an error (its answer is ``None``). Needing no event-loop
        task per recorded answer is what makes a warm run fast.
        """
        if _HERE.get() is not None:
            return self._served_here(requests, skip)
        await self._read_ahead(requests)
        answers: list[JudgeAnswer | None] = []
        copies: list[tuple[JudgeRequest, JudgeAnswer]] = []
        missing: list[int] = []
        for i, request in enumerate(requests):
            key = request.cache_key()
            answer = self.recorded(request, key)
            if answer is None:
                if skip is None or not skip(request):
                    missing.append(i)
            elif self._store_lacks(key):
                copies.append((request, answer))
            answers.append(answer)
        if copies:
            await self._off_loop(self._write_store, *copies)
        if missing:
            judged = await gather_or_cancel(*(self._judge_unrecorded(requests[i]) for i in missing))
            for i, answer in zip(missing, judged, strict=True):
                answers[i] = answer
        return answers

    def _served_here(
        self, requests: Sequence[JudgeRequest], skip: Callable[[JudgeRequest], bool] | None
    ) -> list[JudgeAnswer | None]:
        """:meth:`judge_many` within :func:`serving_here`: recorded answers only, found without
        awaiting anything (memory, the store, one query of the disk cache on the calling thread).

        Raises :class:`ServedElsewhere` before changing anything when a request is not recorded (or
        damaged), or serving it would write (a cache hit the store lacks): the judging loop does that.
        """
        if self.mode not in ("readwrite", "replay"):
            raise ServedElsewhere
        memory, store = self._memory, self.store
        replay = self.mode == "replay"
        found: list[tuple[JudgeRequest, str, JudgeAnswer | None, str]] = []
        unread: list[str] = []
        for request in requests:
            key = request.cache_key()
            answer = memory.get(key)
            source = "memory"
            if answer is None and store is not None:
                answer = store.get(request, replay=replay)
                source = "store"
            if answer is None:
                source = "cache"
                unread.append(key)
            found.append((request, key, answer, source))
        read: dict[str, Any] = {}
        reader = self._here_reader() if unread else None
        if reader is not None:
            try:
                read = reader.get_many(unread)
            except (sqlite3.Error, OSError):
                raise ServedElsewhere from None
        writes = store is not None and self.mode == "readwrite"
        answers: list[JudgeAnswer | None] = []
        for i, (request, key, answer, source) in enumerate(found):
            if answer is None:
                raw = read.get(key)
                if raw is None:
                    if skip is not None and skip(request):
                        answers.append(None)
                        continue
                    raise ServedElsewhere
                try:
                    answer = _decode_entry(request, key, raw)
                except ValueError:
                    raise ServedElsewhere from None  # the loop drops it and says so
                if writes and key not in self._in_store and key not in store:  # type: ignore[operator]
                    raise ServedElsewhere  # the loop copies it into the store
                found[i] = (request, key, answer, source)
            elif answer.derived is not None:
                request.provide(answer.derived)
            answers.append(answer)
        served = _HERE.get()
        for _, key, answer, source in found:
            if answer is None:
                continue
            if source == "store":
                self._in_store.add(key)
            if source != "memory":
                self._remember(key, answer)
            self.used_keys.add(key)
            if served is not None:
                served.append(answer)
        return answers

    def _here_reader(self) -> ReadOnlyDiskCache | None:
        """A reader of the disk cache for any thread (its own SQLite connection, closed with the
        cache); ``None`` when there is no cache to read (none configured, disabled, or not created
        yet). Raises :class:`ServedElsewhere` for a database it cannot open: the loop finds out why.

        Not diskcache itself: it would open a connection of the calling thread that only that
        thread can close.
        """
        if self._here is not None:
            return self._here
        if self.cache_dir is None or self._cache_problem is not None:
            return None
        if isinstance(self._cache, ReadOnlyDiskCache):
            return self._cache
        with self._lock:
            if self._here is None:
                if not (self.cache_dir / "cache.db").is_file():
                    return None
                try:
                    self._here = ReadOnlyDiskCache(self.cache_dir)
                except (OSError, sqlite3.Error):
                    raise ServedElsewhere from None
            return self._here

    def count_served(self, served: Sequence[JudgeAnswer]) -> None:
        """Count the hits of a score served within :func:`serving_here`."""
        for answer in served:
            if answer.source == "store":
                self.stats.record_store_hit(answer.usage)
            else:
                self.stats.record_cache_hit(answer.usage)

    async def _judge_unrecorded(self, request: JudgeRequest) -> JudgeAnswer:
        """Ask the judge (once per key, however many ask at the same time); never in replay."""
        key = request.cache_key()
        if self.mode == "replay":
            self.stats.record_error()
            raise self._not_recorded(request)

        loop = asyncio.get_running_loop()
        pending = self._inflight.get(key)
        if pending is not None and pending.get_loop() is loop:
            # The same judgment is already being asked for: wait for it instead of paying twice.
            answer = await asyncio.shield(pending)
            if answer.derived is not None:
                request.provide(answer.derived)
            return answer
        future: asyncio.Future[JudgeAnswer] = loop.create_future()
        self._inflight[key] = future
        try:
            token, answer_elsewhere = await self._claim(request, key)
            if answer_elsewhere is not None:
                # Another process (an xdist worker) judged it while this one waited: paid once.
                answer = answer_elsewhere
                self._remember(key, answer)
                self.stats.record_cache_hit(answer.usage)
                future.set_result(answer)
                self.used_keys.add(key)
                return answer
            try:
                answer = await self._ask_inner(request)
                answer = await self._record(request, key, answer)
            finally:
                self._release(key, token)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as exc:
            future.set_exception(exc)
            # Mark it retrieved: with nobody else waiting, asyncio would log it as never retrieved.
            future.exception()
            raise
        else:
            future.set_result(answer)
        finally:
            if self._inflight.get(key) is future:
                del self._inflight[key]
        if self.mode == "refresh":  # only refresh asks (a large run's keys are not kept twice)
            self._judged_this_run.add(key)
        self.used_keys.add(key)
        return answer

    # --- one judgment paid once across processes ----------------------------------------------

    async def _claim(self, request: JudgeRequest, key: str) -> tuple[Any, JudgeAnswer | None]:
        """Claim the right to ask the judge for ``key`` across the processes sharing the disk cache.

        Returns ``(token, None)`` when this process holds the claim (release it with
        :meth:`_release`), ``(None, answer)`` when another process recorded the answer meanwhile,
        and ``(None, None)`` when there is nothing to coordinate with (not :attr:`shared`, no
        writable disk cache, or a mode that does not read it). A claim is a cache entry added
        atomically; it expires after :data:`CLAIM_SECONDS` unless renewed, so a process killed while
        judging blocks no one for long, and a failed judgment releases it for the next process to try.
        """
        if not self.shared or self.mode != "readwrite":
            return None, None
        cache = self._disk()
        if cache is None or isinstance(cache, ReadOnlyDiskCache):
            return None, None
        token = secrets.token_hex(8)
        claim = CLAIM_PREFIX + key
        errors = _cache_errors()
        while True:
            try:
                claimed = await self._off_loop(cache.add, claim, token, expire=CLAIM_SECONDS)
            except errors:
                return None, None  # a busy or broken cache must not stop judging
            # Claimed or not, look again: the holder may have just finished.
            hit = await self._off_loop(self._from_disk, request, key)
            if hit is not None:
                if claimed:
                    self._release(key, token)
                return None, hit
            if claimed:
                self._renewals[key] = asyncio.get_running_loop().create_task(self._renew(cache, claim))
                return token, None
            await asyncio.sleep(CLAIM_POLL)

    async def _renew(self, cache: Any, claim: str) -> None:
        """Keep a claim alive while its judgment is being asked for (a slow judge, retries)."""
        with contextlib.suppress(*_cache_errors()):
            while True:
                await asyncio.sleep(CLAIM_SECONDS / 3)
                await self._off_loop(cache.touch, claim, expire=CLAIM_SECONDS)

    def _release(self, key: str, token: Any) -> None:
        if token is None:
            return
        renewal = self._renewals.pop(key, None)
        if renewal is not None:
            renewal.cancel()
        cache = self._cache
        if cache is None or isinstance(cache, ReadOnlyDiskCache):
            return
        claim = CLAIM_PREFIX + key
        # Synchronous (one small SQLite transaction): it also runs when the judging was cancelled.
        with contextlib.suppress(*_cache_errors()), cache.transact():
            if cache.get(claim) == token:
                cache.delete(claim)

    def unused_store_entries(self) -> list[str]:
        """Keys in the judgment store that this run neither served nor wrote, sorted."""
        if self.store is None:
            return []
        return sorted(self.store.keys() - self.used_keys)

    async def aclose(self) -> None:
        """Close the inner judge (if one was created) and the disk cache."""
        inner, self._inner = self._inner, None
        close = getattr(inner, "aclose", None)
        if close is not None:
            await close()
        self.close_cache()

    async def _off_loop(self, function: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        """Run blocking disk work in this judge's one I/O thread, off the event loop.

        One thread, not any of asyncio's: diskcache opens a SQLite connection per thread and closes
        only the calling thread's, so :meth:`close_cache` closes this thread's connection in it.
        """
        call = functools.partial(function, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._io_thread(), call)

    def _io_thread(self) -> concurrent.futures.ThreadPoolExecutor:
        with self._lock:
            if self._io is None:
                self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="ragmetrics-io")
            return self._io

    # --- entries other than judgments: score records ---------------------------------------------

    def read_entries(self, keys: Sequence[str]) -> dict[str, tuple[Any, float]]:
        """The disk-cache entries of ``keys`` that exist (text), each with the time it was stored,
        read on any thread without opening diskcache there; empty when there is no cache to read or
        it cannot be read now."""
        reader = self._entry_reader() if keys else None
        if reader is None:
            return {}
        try:
            return reader.get_many_timed(keys)
        except (sqlite3.Error, OSError, UnicodeDecodeError):
            return {}

    def stored_at(self, keys: Sequence[str]) -> dict[str, float] | None:
        """When each of ``keys`` that the disk cache holds was stored; ``None`` when it cannot be read."""
        reader = self._entry_reader()
        if reader is None:
            return None
        try:
            return reader.store_times(keys)
        except (sqlite3.Error, OSError):
            return None

    def _entry_reader(self) -> ReadOnlyDiskCache | None:
        if self.mode == "off":
            return None
        try:
            return self._here_reader()
        except ServedElsewhere:
            return None

    def in_store(self, key: str) -> bool:
        """Whether this run found ``key`` in the judgment store (read it there, or wrote it)."""
        return self.store is not None and key in self._in_store

    @property
    def keeps_entries(self) -> bool:
        """Whether :meth:`write_entries` writes (``readwrite`` mode, a usable disk cache)."""
        return self.mode == "readwrite" and self.cache_dir is not None and self._cache_problem is None

    def write_entries(self, pairs: Sequence[tuple[str, str]]) -> concurrent.futures.Future[None] | None:
        """Write text entries to the disk cache in one transaction of the I/O thread, without
        waiting (the future tells when it is done); in ``readwrite`` mode only. A failure loses
        nothing but these entries."""
        if not self.keeps_entries:
            return None
        return self._io_thread().submit(self._write_entries, pairs)

    def _write_entries(self, pairs: Sequence[tuple[str, str]]) -> None:
        cache = self._disk()
        if cache is None or isinstance(cache, ReadOnlyDiskCache):
            return
        with contextlib.suppress(*_cache_errors()), cache.transact():
            for key, value in pairs:
                cache.set(key, value)

    def score_epoch(self) -> str | None:
        """The cache's epoch for score records (``""`` before any), or ``None`` when it cannot be read."""
        from ..score_records import EPOCH_KEY

        if self.cache_dir is None or self._cache_problem is not None:
            return None
        try:
            reader = self._here_reader()
        except ServedElsewhere:
            return None
        if reader is None:
            return ""  # no cache yet: nothing recorded that an epoch could tell apart
        try:
            raw = reader.get(EPOCH_KEY)
        except (sqlite3.Error, OSError, UnicodeDecodeError):
            return None
        return raw if isinstance(raw, str) else ""

    def _renew_epoch(self, cache: Any) -> None:
        """A recorded judgment was just replaced (or dropped): every score record made before is out
        of date, in later runs (the epoch) and in this process (:func:`replacements`)."""
        global _REPLACEMENTS
        _REPLACEMENTS += 1
        if isinstance(cache, ReadOnlyDiskCache):
            return
        from ..score_records import EPOCH_KEY

        with contextlib.suppress(*_cache_errors()):
            cache.set(EPOCH_KEY, secrets.token_hex(8))

    def close_cache(self) -> None:
        """Close the disk cache (it reopens on next use) and sort the store's shards this run appended to."""
        io = self._io
        if io is not None:
            io.submit(_nothing).result()  # writes still queued (score records) open the cache first
        if self.store is not None:
            try:
                self.store.flush()
            except OSError as exc:
                self._warn_once(
                    "store-unwritable",
                    f"cannot sort the judgment store at {self.store.directory} ({exc}); its new "
                    "judgments are recorded, unsorted",
                )
            self.store.close()
        with self._lock:
            cache, self._cache = self._cache, None
            io, self._io = self._io, None
            here, self._here = self._here, None
            dropped, self._dropped = self._dropped, []
        for old in dropped:  # given up on: only their connections are left to close
            with contextlib.suppress(Exception):
                if io is not None:
                    io.submit(old.close).result()
                old.close()
        if here is not None and here is not cache:
            with contextlib.suppress(Exception):
                here.close()
        if cache is not None:
            # closing must not turn a finished run into an error
            with contextlib.suppress(Exception):
                if io is not None:
                    io.submit(cache.close).result()  # the I/O thread's own connection
                cache.close()
        if io is not None:
            io.shutdown(wait=True)


def _nothing() -> None:
    pass


# Recorded judgments this process replaced or dropped so far (see CachedJudge._renew_epoch).
_REPLACEMENTS = 0


def replacements() -> int:
    """How many recorded judgments this process has replaced or dropped: score records whose keys
    were made before a change of it are looked up again."""
    return _REPLACEMENTS


def _is_read_only(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "readonly" in text or "read-only" in text or "unable to open" in text


def _is_transient(exc: BaseException) -> bool:
    """A lock timeout is worth retrying later; anything else means the cache is broken."""
    import diskcache

    if isinstance(exc, diskcache.Timeout):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)


def cache_summary(cache_dir: str | os.PathLike[str]) -> dict[str, Any]:
    """Entries, bytes on disk and per-model counts of the disk cache at ``cache_dir`` (for the CLI)."""
    directory = Path(cache_dir)
    size = sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) if directory.is_dir() else 0
    summary: dict[str, Any] = {"entries": 0, "bytes": size, "models": {}, "score_records": 0}
    if not (directory / "cache.db").is_file():
        return summary
    cache = open_disk_cache(directory)
    try:
        from ..score_records import EPOCH_KEY, SCORE_PREFIX

        models: dict[str, int] = {}
        scores = 0
        for key in cache.iterkeys():
            if isinstance(key, str) and key.startswith(CLAIM_PREFIX):
                continue  # a judgment being asked for right now, not an entry
            if isinstance(key, str) and (key.startswith(SCORE_PREFIX) or key == EPOCH_KEY):
                scores += key != EPOCH_KEY  # a finished score, kept beside its judgments
                continue
            raw = cache.get(key)
            try:
                model = str(json.loads(raw).get("model", "?"))
            except (TypeError, ValueError, AttributeError):
                model = "?"
            models[model] = models.get(model, 0) + 1
        summary["entries"] = sum(models.values())
        summary["score_records"] = scores
        summary["models"] = dict(sorted(models.items()))
    finally:
        cache.close()
    return summary
