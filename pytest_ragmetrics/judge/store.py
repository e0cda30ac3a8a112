"""The judgment store: recorded judge answers in readable JSON Lines shards, meant to be committed.

CI replays from it without an API key. A judgment is one line of ``<dir>/<key[:2]>.jsonl``: a JSON
object that starts with its ``key`` and holds the request (kind, model, prompt version, inputs) and
the answer, with sorted keys and no \\u-escapes, so a review shows exactly what the judge said and why.
256 shards keep the store to a few hundred files however many judgments it holds, so ``git add`` and
``git status`` stay instant at 100,000 judgments.

Branches merge without conflicts: the store writes a ``.gitattributes`` that merges shards with
git's ``union`` driver (both sides' lines are kept), and the loader takes a key recorded twice
deterministically: the most recently judged line, then the greater line. Lines are sorted by key;
new judgments are appended during a run and their shards sorted again when the judge closes
(:meth:`JudgmentStore.flush`), so re-recording an unchanged judgment produces no diff at all. Writes
hold a lock on the store directory, so pytest-xdist workers append to the same shards safely.

Stores written by pytest-ragmetrics 0.2 and older (one ``<key[:2]>/<key>.json`` file per judgment)
are still read; ``python -m pytest_ragmetrics store migrate`` moves them into shards.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import threading
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .base import JudgeAnswer, JudgeRequest, conforms, schema_errors

_HEX = frozenset("0123456789abcdef")
#: The file name ending of a shard.
SHARD_SUFFIX = ".jsonl"
#: What the store writes to ``<dir>/.gitattributes`` when it creates the file.
GITATTRIBUTES = (
    "# pytest-ragmetrics judgment store: branches that each record judgments merge without conflicts\n"
    f"*{SHARD_SUFFIX} merge=union text eol=lf\n"
)
_LINE_START = b'{"key":"'
_LINE_START_RE = re.compile(rb'^\{"key":"([0-9a-f]{64})",', re.MULTILINE)


def _is_key(name: str) -> bool:
    return len(name) == 64 and set(name) <= _HEX


def dump_stable(value: Any) -> str:
    """Stable, readable, multi-line JSON (sorted keys, two-space indent, a trailing newline)."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def dump_line(record: dict[str, Any]) -> bytes:
    """One store line: ``record`` as compact JSON with ``key`` first and every other key sorted.

    Newlines inside strings are escaped by JSON, so a record is always exactly one line.
    """
    key = record["key"]
    rest = {name: value for name, value in record.items() if name != "key"}
    body = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return (f'{{"key":{json.dumps(key)}' + ("," + body[1:] if len(body) > 2 else "}")).encode("utf-8")


def _create_temp(directory: Path, name: str) -> tuple[int, str]:
    """Create a new, empty temporary file next to ``name`` in ``directory``; returns (fd, path).

    Not :func:`tempfile.mkstemp`: that creates files readable by their owner only (0600), and store
    files are committed and shared. ``os.open`` with 0666 lets the umask decide (0644 usually), like
    any file a user creates; O_EXCL still guarantees the name is ours.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = str(directory / f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits make a clash vanishingly rare
            continue


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so readers see the old or the new file, never half of one.

    The file gets the permissions of any new file (0666 minus the umask), not a private 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """:func:`atomic_write_bytes` for text (UTF-8, ``\\n`` line ends)."""
    atomic_write_bytes(path, text.encode("utf-8"))


def _line_key(line: bytes) -> str | None:
    """The key a store line records, or ``None`` when the line is not a judgment."""
    if line.startswith(_LINE_START) and line[72:74] == b'",':
        key = line[8:72].decode("ascii", "replace")
        if _is_key(key):
            return key
    try:
        data = json.loads(line)
    except ValueError:
        return None
    found = data.get("key") if isinstance(data, dict) else None
    return found if isinstance(found, str) and _is_key(found) else None


def _judged_at(line: bytes) -> str:
    try:
        answer = json.loads(line).get("answer")
        value = answer.get("judged_at") if isinstance(answer, dict) else None
    except (ValueError, AttributeError):
        return ""
    return value if isinstance(value, str) else ""


def _winner(a: bytes, b: bytes) -> bytes:
    """Of two lines recording one key (a union merge of two branches), the one that counts.

    The most recently judged, then the greater line: the same whichever order the lines are in.
    """
    return max(a, b, key=lambda line: (_judged_at(line), line))


def _scan(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(line number, offset, line) of every non-blank line of a shard's bytes."""
    offset = 0
    for number, raw in enumerate(data.split(b"\n"), 1):
        line = raw.rstrip(b"\r")
        if line.strip():
            yield number, offset, line
        offset += len(raw) + 1


@dataclass
class _Shard:
    """A shard's content, whole, for rewriting it: its judgments by key and the lines that are not."""

    entries: dict[str, bytes] = field(default_factory=dict)
    bad: list[tuple[int, bytes]] = field(default_factory=list)
    duplicates: int = 0

    @classmethod
    def parse(cls, data: bytes) -> _Shard:
        shard = cls()
        entries = shard.entries
        for number, _, line in _scan(data):
            key = _line_key(line)
            if key is None:
                shard.bad.append((number, line))
            elif key in entries:
                shard.duplicates += 1
                entries[key] = _winner(entries[key], line)
            else:
                entries[key] = line
        return shard

    def render(self) -> bytes:
        """The shard's canonical bytes: one line per key, sorted, then any unreadable lines as they were."""
        lines = [self.entries[key] for key in sorted(self.entries)] + [line for _, line in self.bad]
        return b"".join(line + b"\n" for line in lines)


class _Index:
    """Where each judgment of one shard is: an open file and, by key, ``offset << 32 | length``.

    Lookups read one line each from the file, so a run holds the positions of a large store in
    memory, never its text. The file stays open: a shard another process replaces meanwhile is read
    as it was when indexed, consistently.
    """

    __slots__ = ("fd", "spans", "stat")

    def __init__(self, fd: int | None, data: bytes, stat: tuple[int, int, int] | None) -> None:
        self.fd = fd
        self.stat = stat
        spans: dict[str, int] = {}
        self.spans = spans
        lines = 0
        # Lines as the store writes them, found in one pass; any other line the slow way below.
        for match in _LINE_START_RE.finditer(data):
            start = match.start()
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            span = start << 32 | (end - start - (data[end - 1 : end] == b"\r"))
            key = match.group(1).decode("ascii")
            if key not in spans or self._later(data, span, spans[key]):
                spans[key] = span
            lines += 1
        if lines == data.count(b"\n") + (not data.endswith(b"\n") and bool(data)):
            return
        spans.clear()
        for _, offset, line in _scan(data):
            key = _line_key(line)
            if key is not None and (
                key not in spans or self._later(data, offset << 32 | len(line), spans[key])
            ):
                spans[key] = offset << 32 | len(line)

    @staticmethod
    def _later(data: bytes, span: int, other: int) -> bool:
        """Whether the line at ``span`` counts over the line at ``other`` (see :func:`_winner`)."""
        mine = data[span >> 32 : (span >> 32) + (span & 0xFFFFFFFF)]
        theirs = data[other >> 32 : (other >> 32) + (other & 0xFFFFFFFF)]
        return _winner(theirs, mine) is mine  # max() keeps the first of equals: strictly later

    def read(self, key: str) -> bytes | None:
        span = self.spans.get(key)
        if span is None or self.fd is None:
            return None
        return _pread(self.fd, span & 0xFFFFFFFF, span >> 32)

    def close(self) -> None:
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)

    def __del__(self) -> None:  # a store dropped without close() leaks no descriptor
        with contextlib.suppress(Exception):
            self.close()


def _max_open_shards() -> int:
    """How many shard files lookups keep open: all 256 where the descriptor limit allows it easily
    (1,024 on Linux), a quarter of the limit where it is low (256 on macOS)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):  # pragma: no cover - Windows
        return 64
    if soft == resource.RLIM_INFINITY:
        return 256
    return max(8, min(256, soft // 4))


#: Shard files kept open at once by one store (the least recently read are closed first).
MAX_OPEN_SHARDS = _max_open_shards()


def _pread(fd: int, size: int, offset: int) -> bytes:
    if hasattr(os, "pread"):
        return os.pread(fd, size, offset)
    os.lseek(fd, offset, os.SEEK_SET)  # pragma: no cover - Windows; callers hold the store's lock
    return os.read(fd, size)  # pragma: no cover


def _stat(path: Path) -> tuple[int, int, int] | None:
    try:
        info = path.stat()
    except OSError:
        return None
    return (info.st_ino, info.st_mtime_ns, info.st_size)


class JudgmentStore:
    """Recorded judgments under ``directory`` (created on first write).

    Lookups take the :class:`~pytest_ragmetrics.judge.base.JudgeRequest`, so a stored answer is checked
    against the request's current schema before it is trusted; an unreadable or non-conforming entry
    is treated as missing (with one warning per entry), never as a crash. A shard is read once per
    run (again only when it changed and a key is not found in it).
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._warned: set[str] = set()
        self._lock = threading.RLock()
        self._indexes: dict[str, _Index] = {}
        self._open: OrderedDict[str, _Index] = OrderedDict()  # indexes holding their file open
        # Shards this process appended to, each with the lines that replaced a recorded judgment
        # (flush() keeps those whatever their judgment times; new keys need no memory of their line).
        self._written: dict[str, dict[str, bytes]] = {}
        self._legacy: bool | None = None
        self._held = 0  # depth of this process's hold of the store lock (see _locked)

    def __repr__(self) -> str:
        return f"JudgmentStore({str(self.directory)!r})"

    # --- files -----------------------------------------------------------------------------------

    def path_for(self, key: str) -> Path:
        """The shard file that holds (or will hold) the judgment with cache key ``key``."""
        return self.directory / f"{key[:2]}{SHARD_SUFFIX}"

    def legacy_path(self, key: str) -> Path:
        """Where a store of pytest-ragmetrics 0.2 and older kept the judgment ``key``."""
        return self.directory / key[:2] / f"{key}.json"

    def shard_paths(self) -> list[Path]:
        """The shard files, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p for p in self.directory.glob(f"??{SHARD_SUFFIX}") if set(p.name[:2]) <= _HEX and p.is_file()
        )

    def legacy_files(self) -> list[Path]:
        """Judgment files of the one-file-per-judgment layout (pytest-ragmetrics 0.2 and older), sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p
            for p in self.directory.glob("??/*.json")
            if _is_key(p.stem) and p.parent.name == p.stem[:2] and p.is_file()
        )

    def _has_legacy(self) -> bool:
        if self._legacy is None:
            self._legacy = bool(self.legacy_files())
            if self._legacy:
                self._warn(
                    "legacy",
                    f"the judgment store {self.directory} holds judgments as one file each, the layout "
                    "of pytest-ragmetrics 0.2 and older; they are read, but `python -m pytest_ragmetrics "
                    f"store migrate --store-dir {self.directory}` moves them into shards, which git "
                    "handles far faster",
                )
        return self._legacy

    @contextlib.contextmanager
    def _locked(self, *, shared: bool = False) -> Iterator[None]:
        """Hold the store's lock against this process's threads and other processes (xdist workers).

        Writers hold it exclusively; a reader of a shard holds it shared, so it never sees half of a
        line another process is appending. Re-entrant within a thread. ``shared`` never creates the
        directory.
        """
        with self._lock:
            if self._held:
                self._held += 1
                try:
                    yield
                finally:
                    self._held -= 1
                return
            if not shared:
                self.directory.mkdir(parents=True, exist_ok=True)
            fd = _lock_directory(self.directory, shared=shared)
            self._held = 1
            try:
                yield
            finally:
                self._held = 0
                if fd is not None:
                    os.close(fd)  # closing releases the lock

    def _read_shard(self, name: str) -> _Shard:
        """The whole content of shard ``name`` (for rewriting it; lookups use :meth:`_index`)."""
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        try:
            with self._locked(shared=True):
                data = path.read_bytes()
        except FileNotFoundError:
            return _Shard()
        shard = _Shard.parse(data)
        self._warn_bad(path, shard.bad)
        return shard

    def _warn_bad(self, path: Path, bad: list[tuple[int, bytes]]) -> None:
        for number, line in bad:
            self._warn(
                f"line:{path.name}:{number}",
                f"line {number} of {path} is not a judgment ({line[:60]!r}...); it is kept as it is and "
                "ignored",
            )

    def _read_index(self, name: str) -> _Index:
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        if not path.exists():
            return _Index(None, b"", None)
        try:
            with self._locked(shared=True):
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
                try:
                    info = os.fstat(fd)
                    data = _pread(fd, info.st_size, 0)
                except BaseException:
                    os.close(fd)
                    raise
        except FileNotFoundError:
            return _Index(None, b"", None)
        except OSError as exc:
            self._warn(f"shard:{name}", f"cannot read {path} ({exc}); its judgments count as missing")
            return _Index(None, b"", None)
        index = _Index(fd, data, (info.st_ino, info.st_mtime_ns, info.st_size))
        if len(index.spans) < data.count(b"\n"):
            self._warn_bad(path, [(n, line) for n, _, line in _scan(data) if _line_key(line) is None])
        return index

    def _index(self, name: str, *, fresh: bool = False) -> _Index:
        """Shard ``name`` as indexed this run; ``fresh`` indexes it again when the file changed."""
        index = self._indexes.get(name)
        if index is not None and index.fd is not None and not fresh and MAX_OPEN_SHARDS >= 256:
            return index  # the usual case: every shard may stay open, nothing to count
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        if index is not None and index.fd is None and index.stat is not None:
            index = self._reopen(path, index)
        if index is None or (fresh and index.stat != _stat(path)):
            new = self._read_index(name)
            with self._lock:
                old, self._indexes[name] = self._indexes.get(name), new
            if old is not None:
                old.close()
            index = new
        if index.fd is not None and self._open.get(name) is not index:
            self._opened(name, index)
        return index

    def _reopen(self, path: Path, index: _Index) -> _Index | None:
        """Open the file of an index whose descriptor was closed; ``None`` when the file changed."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        except OSError:
            return None
        info = os.fstat(fd)
        if (info.st_ino, info.st_mtime_ns, info.st_size) != index.stat:
            os.close(fd)
            return None
        index.fd = fd
        return index

    def _opened(self, name: str, index: _Index) -> None:
        """Note that ``index`` holds a file open, closing the least recently used beyond the bound."""
        with self._lock:
            self._open[name] = index
            self._open.move_to_end(name)
            evicted = []
            while len(self._open) > MAX_OPEN_SHARDS:
                evicted.append(self._open.popitem(last=False)[1])
        for old in evicted:
            old.close()  # its positions stay; the file reopens when it is read again

    def _forget(self, name: str) -> None:
        with self._lock:
            index = self._indexes.pop(name, None)
            self._open.pop(name, None)
        if index is not None:
            index.close()

    def close(self) -> None:
        """Close the shard files lookups keep open (they reopen on next use)."""
        with self._lock:
            indexes, self._indexes = self._indexes, {}
            self._open.clear()
        for index in indexes.values():
            index.close()

    def _line(self, key: str) -> bytes | None:
        if len(key) != 64:
            return None
        name = key[:2]
        for fresh in (False, True):
            # Fresh: another process (an xdist worker) may have recorded it since the shard was read.
            try:
                line = self._index(name, fresh=fresh).read(key)
            except (OSError, ValueError):  # a file closed by another thread: index it again
                line = None
            if line is not None and (line[8:72] == key.encode("ascii") or _line_key(line) == key):
                return line
        return None

    # --- reading ---------------------------------------------------------------------------------

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is recorded: a look at the index, no line read (see :meth:`get` for that)."""
        if not isinstance(key, str) or len(key) != 64:
            return False
        name = key[:2]
        if key in self._index(name).spans or key in self._index(name, fresh=True).spans:
            return True
        return self._has_legacy() and _is_key(key) and self.legacy_path(key).is_file()

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> set[str]:
        """Keys of all stored judgments."""
        found: set[str] = set()
        for path in self.shard_paths():
            found.update(self._index(path.name[:2], fresh=True).spans)
        if self._has_legacy():
            found.update(p.stem for p in self.legacy_files())
        return found

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable stored judgment as a JSON object, in key order."""
        for key in sorted(self.keys()):
            data = self.read_json(key)
            if data is not None:
                yield data

    def models(self) -> set[str]:
        """The judge models of the stored judgments (unreadable entries are skipped)."""
        return {record["model"] for record in self.records() if isinstance(record.get("model"), str)}

    def where(self, key: str) -> str:
        """Where the judgment ``key`` lives, for messages: the shard file and the key."""
        if self._line(key) is None and self._has_legacy() and self.legacy_path(key).is_file():
            return str(self.legacy_path(key))
        return f"{self.path_for(key)} (key {key[:12]}…)"

    def _warn(self, topic: str, message: str) -> None:
        from .cache import RagMetricsWarning

        with self._lock:
            if topic in self._warned:
                return
            self._warned.add(topic)
        from ..redact import redact

        warnings.warn(redact(message), RagMetricsWarning, stacklevel=4)

    def _warn_entry(self, key: str, why: str, replay: bool | None) -> None:
        # Say what happens next: only a run that may call the judge will replace the entry.
        if replay is None:
            then = "treating it as missing"
        elif replay:
            then = "replay treats the judgment as not recorded"
        else:
            then = "it will be judged again and recorded anew"
        self._warn(key, f"ignoring the judgment store entry {self.where(key)}: {why}; {then}")

    def read_json(self, key: str, *, replay: bool | None = None) -> dict[str, Any] | None:
        """The raw record of a stored judgment, or ``None`` when it is missing or unreadable.

        ``replay`` only words the warning about an unreadable entry (see :meth:`get`).
        """
        line = self._line(key)
        if line is None:
            if not self._has_legacy() or not _is_key(key):
                return None
            try:
                line = self.legacy_path(key).read_bytes()
            except FileNotFoundError:
                return None
            except OSError as exc:
                self._warn_entry(key, f"cannot read it ({exc})", replay)
                return None
        try:
            data = json.loads(line)
        except ValueError as exc:  # UnicodeDecodeError is a ValueError too
            self._warn_entry(key, f"it is not valid JSON ({exc})", replay)
            return None
        if not isinstance(data, dict):
            self._warn_entry(key, "it does not hold a JSON object", replay)
            return None
        return data

    def get(self, request: JudgeRequest, *, replay: bool | None = None) -> JudgeAnswer | None:
        """The stored answer to ``request`` (``source="store"``), or ``None``.

        A damaged entry (unreadable, wrong JSON types, not fitting the request's schema) is ``None``
        with one warning per entry. ``replay`` words that warning: ``True`` when nothing will judge
        the request again, ``False`` when the judge will, ``None`` when unknown.
        """
        key = request.cache_key()
        data = self.read_json(key, replay=replay)
        if data is None:
            return None
        if "answer" not in data:
            self._warn_entry(key, "its answer is malformed (the entry has no 'answer')", replay)
            return None
        derived = None
        if request.derived:
            # A chunk's sentences are recorded with its judgment rather than split again.
            try:
                request.provide(data.get("inputs"))
            except ValueError as exc:
                self._warn_entry(key, f"its inputs are malformed ({exc})", replay)
                return None
            derived = request.derived_inputs()
        try:
            answer = JudgeAnswer.from_json(data["answer"], source="store", derived=derived)
        except ValueError as exc:
            self._warn_entry(key, f"its answer is malformed ({exc})", replay)
            return None
        if len(answer.choices) != request.n:
            self._warn_entry(key, f"it holds {len(answer.choices)} answer(s), expected {request.n}", replay)
            return None
        schema = request.schema
        for choice in answer.choices:
            errors = [] if conforms(schema, choice) else schema_errors(schema, choice)
            if errors:
                self._warn_entry(
                    key, "its answer does not conform to the schema: " + "; ".join(errors[:3]), replay
                )
                return None
        return answer

    # --- writing ---------------------------------------------------------------------------------

    def _write_gitattributes(self) -> None:
        path = self.directory / ".gitattributes"
        if not path.exists():
            atomic_write_text(path, GITATTRIBUTES)

    def put(self, request: JudgeRequest, answer: JudgeAnswer) -> Path:
        """Record ``answer`` to ``request``; returns the shard file written.

        The line is appended to its shard and sorted into place by :meth:`flush`. Recording exactly
        what is there already writes nothing.
        """
        self.put_many([(request, answer)])
        return self.path_for(request.cache_key())

    def put_many(self, pairs: Iterable[tuple[JudgeRequest, JudgeAnswer]]) -> None:
        """Record several answers under one hold of the write lock (see :meth:`put`)."""
        self.write_lines(dump_line(record_of(request, answer)) for request, answer in pairs)

    def write_lines(self, lines: Iterable[bytes]) -> None:
        """Record judgment lines (from :func:`dump_line`), each replacing what its key held."""
        by_shard: dict[str, dict[str, bytes]] = {}
        for line in lines:
            key = _line_key(line)
            if key is None or b"\n" in line:
                raise ValueError(f"not a judgment store line: {line[:60]!r}")
            by_shard.setdefault(key[:2], {})[key] = line
        if not by_shard:
            return
        with self._locked():
            self._write_gitattributes()
            for name, new in sorted(by_shard.items()):
                self._write_shard(name, new)

    def _write_shard(self, name: str, new: dict[str, bytes]) -> None:
        index = self._index(name, fresh=True)
        current = {key: index.read(key) for key in new}
        changed = {key: line for key, line in new.items() if current[key] != line}
        if not changed:
            return
        known = {key for key, line in current.items() if line is not None}
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        size = index.stat[2] if index.stat is not None else 0
        prefix = b"\n" if size and not _ends_with_newline(path) else b""  # a hand edit dropped it
        # Appended, also when it replaces a line: rewriting a large shard per judgment would cost
        # far more. Until flush() drops the old line, the loader counts the later judgment.
        _append(path, prefix + b"".join(line + b"\n" for line in changed.values()))
        if index.fd is None:
            self._forget(name)  # a new shard: indexed from the file on next use
        else:
            offset = size + len(prefix)
            for key, line in changed.items():
                index.spans[key] = offset << 32 | len(line)
                offset += len(line) + 1
            index.stat = _stat(path)
        replaced = self._written.setdefault(name, {})
        replaced.update((key, line) for key, line in changed.items() if key in known)

    def flush(self) -> None:
        """Sort the shards this process appended to, one line per key (a no-op when there are none)."""
        if not self._written:
            return
        with self._locked():
            for name, lines in sorted(self._written.items()):
                self._rewrite(name, mine=lines)
            self._written.clear()

    def _rewrite(self, name: str, drop: Iterable[str] = (), mine: dict[str, bytes] | None = None) -> None:
        """Write shard ``name`` in its canonical form (sorted, one line per key), without ``drop``.

        ``mine`` are the lines this process recorded: they replace what their keys held, whatever
        the judgment times say (a refresh within the second of the first judgment is still newer).
        """
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        shard = self._read_shard(name)
        shard.entries.update(mine or {})
        for key in drop:
            shard.entries.pop(key, None)
        data = shard.render()
        try:
            current = path.read_bytes()
        except FileNotFoundError:
            current = None
        if not data:
            if current is not None:
                path.unlink()
        elif data != current:
            atomic_write_bytes(path, data)
        self._forget(name)

    def compact(self) -> int:
        """Rewrite every shard in its canonical form; returns the duplicate lines removed."""
        removed = 0
        with self._locked():
            for path in self.shard_paths():
                name = path.name[:2]
                removed += self._read_shard(name).duplicates
                self._rewrite(name, mine=self._written.pop(name, None))
        return removed

    def delete(self, key: str) -> bool:
        """Remove one stored judgment."""
        return bool(self.prune(self.keys() - {key}, only={key}))

    def prune(self, keep: set[str], *, dry_run: bool = False, only: set[str] | None = None) -> list[str]:
        """Delete stored judgments whose key is not in ``keep``; returns the removed keys, sorted.

        ``only`` limits the deletion to those keys.
        """
        removed = sorted(self.keys() - set(keep))
        if only is not None:
            removed = [key for key in removed if key in only]
        if dry_run or not removed:
            return removed
        by_shard: dict[str, list[str]] = {}
        for key in removed:
            by_shard.setdefault(key[:2], []).append(key)
        with self._locked():
            for name, keys in sorted(by_shard.items()):
                mine = {k: v for k, v in self._written.pop(name, {}).items() if k not in keys}
                self._rewrite(name, drop=keys, mine=mine)
            if self._has_legacy():
                for key in removed:
                    _remove_legacy(self.legacy_path(key))
                self._legacy = None
        return removed

    # --- the move from one file per judgment -----------------------------------------------------

    def migrate(self) -> MigrationResult:
        """Move judgments of the one-file-per-judgment layout into shards, losing nothing.

        Every legacy file that holds a judgment becomes a shard line; a key recorded both ways keeps
        the shard's line unless the file was judged later. A legacy file is deleted only once its
        record reads back identical from the shards; files that are not judgments stay where they
        are. Shards are left sorted; running it again changes nothing.
        """
        result = MigrationResult()
        with self._locked():
            pending: dict[str, tuple[Path, bytes]] = {}
            for path in self.legacy_files():
                try:
                    data = json.loads(path.read_bytes())
                except (OSError, ValueError) as exc:
                    result.kept.append((path, f"not valid JSON ({exc})"))
                    continue
                if not isinstance(data, dict) or data.get("key") != path.stem:
                    result.kept.append((path, "it does not hold the judgment its name says"))
                    continue
                pending[path.stem] = (path, dump_line(data))
            by_shard: dict[str, dict[str, bytes]] = {}
            for key, (_, line) in pending.items():
                by_shard.setdefault(key[:2], {})[key] = line
            for name, lines in sorted(by_shard.items()):
                shard = self._read_shard(name)
                for key, line in lines.items():
                    current = shard.entries.get(key)
                    shard.entries[key] = line if current is None else _winner(current, line)
                path = self.directory / f"{name}{SHARD_SUFFIX}"
                atomic_write_bytes(path, shard.render())
                self._forget(name)
            if pending:
                self._write_gitattributes()
            for name in sorted(by_shard):
                check = self._read_shard(name)
                for key in sorted(by_shard[name]):
                    path, line = pending[key]
                    stored = check.entries.get(key)
                    if stored is None or (stored != line and _winner(stored, line) != stored):
                        result.kept.append((path, "it did not read back from the shard"))
                        continue
                    _remove_legacy(path)
                    result.moved += 1
            result.compacted = 0
            for path in self.shard_paths():
                name = path.name[:2]
                result.compacted += self._read_shard(name).duplicates
                self._rewrite(name, mine=self._written.pop(name, None))
            self._legacy = None
        result.shards = len(self.shard_paths())
        return result


def record_of(request: JudgeRequest, answer: JudgeAnswer) -> dict[str, Any]:
    """The store record of ``answer`` to ``request``: what was asked, of which judge, and the answer."""
    return {
        "key": request.cache_key(),
        "kind": request.kind,
        "prompt_version": request.prompt_version,
        "model": request.model,
        "temperature": request.temperature,
        "seed": request.seed,
        "n": request.n,
        "inputs": request.inputs,
        "schema_name": request.schema_name,
        "answer": answer.to_json(),
    }


@dataclass
class MigrationResult:
    """What :meth:`JudgmentStore.migrate` did."""

    moved: int = 0
    shards: int = 0
    compacted: int = 0
    kept: list[tuple[Path, str]] = field(default_factory=list)


def _remove_legacy(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    # Fails while other judgments share the directory; that is fine.
    with contextlib.suppress(OSError):
        path.parent.rmdir()


def _lock_directory(directory: Path, *, shared: bool) -> int | None:
    """Lock ``directory`` (flock) and return the descriptor to close to unlock it.

    ``None`` where there is nothing to lock with (Windows: threads of one process only) or the
    filesystem does not lock (some network mounts): the store still works, unguarded between processes.
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
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        return None
    return fd


def _ends_with_newline(path: Path) -> bool:
    try:
        with path.open("rb") as handle:
            handle.seek(-1, os.SEEK_END)
            return handle.read(1) == b"\n"
    except OSError:  # empty or missing
        return True


def _append(path: Path, data: bytes) -> None:
    """Append ``data`` with one ``write`` (O_APPEND): a reader never sees another writer's half line."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_BINARY", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)
