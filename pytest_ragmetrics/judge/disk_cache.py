"""The local disk cache's database: opening it, a read-only copy of one this process cannot write, a
damaged one moved aside, and the errors it can raise.

The database is :mod:`diskcache`'s SQLite, used through its public API, shared safely by threads and
by processes (pytest-xdist workers). What is written in it, and when it is read, is
:class:`~pytest_ragmetrics.judge.cache.CachedJudge`'s.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import errno
import functools
import os
import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

from .._files import lock_directory

if TYPE_CHECKING:  # pragma: no cover
    import diskcache  # diskcache ships no type information

#: Seconds a process waits for the SQLite lock before giving up on one cache operation.
CACHE_TIMEOUT = 10.0
#: SQLite's page cache of each connection to the disk cache, in pages (4 KiB each): 2 MiB.
SQLITE_CACHE_PAGES = 512


# Errors the disk cache can raise; none of them may reach the user as a traceback.
@functools.cache  # asked on every read; diskcache is imported on first use only
def cache_errors() -> tuple[type[BaseException], ...]:
    import diskcache

    return (sqlite3.Error, OSError, diskcache.Timeout, ValueError, TypeError, KeyError)


def unreadable(cache_dir: str | os.PathLike[str], exc: BaseException) -> str:
    """What a command says of a cache it cannot read: where, why, and how to start afresh."""
    database = Path(cache_dir) / "cache.db"
    # SQLite says no more than "unable to open database file" of a directory in the database's place.
    where = f" ({database} is a directory)" if database.is_dir() else ""
    return (
        f"cannot read the judgment cache at {cache_dir}: {type(exc).__name__}: {exc}{where}\n"
        f"Run `python -m pytest_ragmetrics cache clear --cache-dir {cache_dir}` to start afresh."
    )


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


def read_only_copy(cache_dir: Path) -> diskcache.Cache | None:
    """The cache database of ``cache_dir`` (which this process cannot write) copied to a temporary
    directory and opened there, or None. Entries too large for the database itself (none of ours)
    stay behind and read as misses. The copy goes when the process ends."""
    import shutil
    import tempfile

    database = cache_dir / "cache.db"
    if not database.is_file():
        return None
    copy = Path(tempfile.mkdtemp(prefix="ragmetrics-cache-"))
    try:
        for name in ("cache.db", "cache.db-wal"):  # the write-ahead log holds the latest entries
            if (cache_dir / name).is_file():
                shutil.copyfile(cache_dir / name, copy / name)
        import atexit

        atexit.register(shutil.rmtree, copy, True)
        return open_disk_cache(copy)
    except Exception:
        shutil.rmtree(copy, ignore_errors=True)
        return None


#: What a ``cache.db`` that is not a database is renamed to (the first process to find it does).
UNUSABLE_NAME = "cache.db.unusable"


def reopened(cache_dir: Path) -> tuple[diskcache.Cache, sqlite3.DatabaseError | None]:
    """The cache database of ``cache_dir`` opened again after opening it failed, by one process of
    the run at a time: the cache, and the error for which this process moved a damaged one aside
    (None when it did not); raises what opening raises when the database is not damaged.

    Processes that find ``cache.db`` damaged all at once (xdist workers starting) must end on one
    fresh database: the first to take the lock moves the damaged one aside and starts a fresh one,
    and the others open that. Without the lock, one could move aside the fresh database another had
    just started, or fail to open a database gone a moment ago and fall back to a copy of its own:
    the answers one wrote would reach no other, and a judgment another waited for (see
    :mod:`~pytest_ragmetrics.judge.claims`) would be paid for again."""
    fd = lock_directory(cache_dir)
    try:
        try:
            return open_disk_cache(cache_dir), None
        except sqlite3.DatabaseError as exc:
            if not moved_aside(cache_dir, exc):
                raise
            return open_disk_cache(cache_dir), exc
    finally:
        if fd is not None:
            os.close(fd)  # closing releases the lock


def moved_aside(cache_dir: Path, exc: sqlite3.DatabaseError) -> bool:
    """Move a ``cache.db`` that is not a database, or a damaged one (garbled, overwritten, in whole
    or in part), aside; True when it was (by this process or another one of the run). Locked,
    read-only or busy databases stay."""
    if type(exc) is not sqlite3.DatabaseError:  # OperationalError and co.: the file may be fine
        return False
    database = cache_dir / "cache.db"
    try:
        probe = sqlite3.connect(f"{database.resolve().as_uri()}?mode=ro", uri=True)
        try:
            # Its whole structure, not only its first page: a database damaged further in opens,
            # and fails at its first statement. (Only when opening failed: a sound cache pays nothing.)
            if probe.execute("PRAGMA quick_check(1)").fetchone() == ("ok",):
                return True  # another process of the run made a fresh one already
        except sqlite3.DatabaseError:
            pass
        finally:
            probe.close()
        os.replace(database, cache_dir / UNUSABLE_NAME)
    except FileNotFoundError:
        return True  # another process moved it a moment ago
    except OSError:
        return False
    return True


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` says the disk (or the user's quota on it) is full: SQLite's SQLITE_FULL,
    "database or disk is full", or the operating system's ENOSPC or EDQUOT, itself or as a cause."""
    seen: BaseException | None = exc
    for _ in range(8):  # a chain of causes, never a loop
        if seen is None:
            return False
        if isinstance(seen, sqlite3.Error) and "disk is full" in str(seen):
            return True
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def is_transient(exc: BaseException) -> bool:
    """A lock timeout is worth retrying later; anything else means the cache is broken."""
    import diskcache

    if isinstance(exc, diskcache.Timeout):
        return True
    return isinstance(exc, sqlite3.OperationalError) and "locked" in str(exc)
