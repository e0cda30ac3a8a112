"""Writing a file whole: readers see the old file or the new one, never half of one; locking a
directory against other processes; reading JSON that gives no name twice; and naming a JSON value's
type in a message about a file that holds it.

Every file the package writes for others to read (reports, a baseline, the judgment store's shards,
the cache's notes, a batch's state, a drawn labelling sample) goes through :func:`write_atomic`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import stat
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

__all__ = [
    "RepeatedName",
    "lock_directory",
    "replaceable",
    "starts_json_object",
    "unique_names",
    "write_atomic",
    "write_text_atomic",
]


def _create_temp(directory: Path, name: str) -> tuple[int, str]:
    """Create a new, empty temporary file next to ``name`` in ``directory``; returns (fd, path).

    Not :func:`tempfile.mkstemp`: that creates files readable by their owner only (0600), while
    reports are CI artifacts and store files are committed and shared. ``os.open`` with 0666 lets the
    umask decide (0644 usually), like any file a user creates; O_EXCL still guarantees the name is ours.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = str(directory / f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits make a clash vanishingly rare
            continue


def write_atomic(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` whole, creating parent directories; returns the path.

    The bytes go to a temporary file beside ``path`` (synced to disk) that then replaces it, so a
    reader (a CI step, a browser, another xdist worker) never sees half a file and an interrupted
    run leaves the old one. A file being replaced keeps its permissions. A pipe or a device
    (``/dev/stdout``) is written to, not replaced; a directory is refused.
    """
    target = Path(path)
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(target))
    if target.exists() and not target.is_file():
        with open(target, "wb") as handle:
            handle.write(data)
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:  # a file where a directory of the path should be: say which
        file = next((p for p in (target.parent, *target.parent.parents) if p.is_file()), target.parent)
        raise NotADirectoryError(errno.ENOTDIR, "Not a directory", str(file)) from None
    fd, tmp = _create_temp(target.parent, target.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if target.exists():
            os.chmod(tmp, target.stat().st_mode & 0o777)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target


def write_text_atomic(path: str | os.PathLike[str], text: str) -> Path:
    """:func:`write_atomic` for text: UTF-8, line ends written as they are (``\\n`` on every platform).

    A lone surrogate, which UTF-8 cannot carry (a judge's answer may hold one, from a ``"\\ud800"``
    escape, and the judgment store and cache keep it as it was), is written as its escape
    ``\\ud800``: JSON's own, which reads back the same; in a Markdown or HTML report, the escape shown."""
    return write_atomic(path, text.encode("utf-8", "backslashreplace"))


def lock_directory(directory: Path) -> int | None:
    """Lock ``directory`` exclusively (flock) and return the descriptor to close to unlock it.

    ``None`` where there is nothing to lock with (Windows) or the filesystem does not lock (some
    network mounts): the caller goes on unguarded between processes.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


def replaceable(path: str | os.PathLike[str], ours: Callable[[bytes], bool]) -> bool:
    """Whether a file the package writes may replace what ``path`` holds: nothing, an empty file, a
    pipe or a device, or a file whose first bytes ``ours`` takes for one it wrote. Anything else (a
    golden set or a labelled set, named by a slip of the tab key) would be lost."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            # A pipe or a device is written to, never replaced (see write_atomic); reading it first
            # would wait for a writer (bash's --rag-report-json=>(jq .), a FIFO) or for the keyboard
            # (/dev/stdout on a terminal) for ever. A directory: the write says why.
            return True
        with open(path, "rb") as handle:
            head = handle.read(4096).removeprefix(b"\xef\xbb\xbf")
    except OSError:
        return True  # none yet; or unreadable: the write says why
    return not head.strip() or ours(head)


def starts_json_object(head: bytes, names: Collection[str]) -> bool:
    """Whether ``head`` starts a JSON object whose first name is one of ``names`` (the names the
    package writes first in such a file, whatever their order)."""
    first = re.match(rb'\s*\{\s*"([^"\\]*)"', head)
    return first is not None and first[1].decode("utf-8", "replace") in names


class RepeatedName(ValueError):
    """A JSON object gives one name twice (:attr:`name`)."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name!r} is given twice")
        self.name = name


def unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's names and values, refusing a name given twice (an ``object_pairs_hook``):
    JSON's reading keeps the last value silently, so a golden set's line that asks one question and
    then another would be scored on the second, unseen, and which verdict a judge meant is unknown."""
    value = dict(pairs)
    if len(value) < len(pairs):
        seen: set[str] = set()
        for name, _ in pairs:
            if name in seen:
                raise RepeatedName(name)
            seen.add(name)
    return value


def json_type(value: Any, *, array: str = "an array", show_number: bool = False) -> str:
    """The JSON type of ``value`` with its article, for messages about hand-edited files: ``null``,
    ``a boolean``, ``a number`` (``the number 3`` with ``show_number``), ``a string``, ``an array``
    (or the word of the file's own documentation, ``array="a list"``), ``an object``. A value JSON
    has no type for is named by its Python type."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return f"the number {value!r}" if show_number else "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return array
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"
