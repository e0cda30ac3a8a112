"""The judgment store: recorded judge answers in readable JSON Lines shards, meant to be committed.

CI replays from it without an API key. A judgment is one line of ``<dir>/<key[:2]>.jsonl``: a JSON
object that starts with its ``key`` and holds, with its other fields sorted and no \\u-escapes, the
request written out whole (kind, model, prompt version, the question, chunk, reference or sentences
asked about) and the judge's answer. A pull-request diff of the store shows what was asked and what
the judge said; request parameters at their defaults (:data:`FORMAT_DEFAULTS`) are left out.

A lookup is by key alone: editing a line's answer in place (a reviewed correction) changes what
every run scores, locally and in CI replay alike. 256 shards keep the store to a few hundred files
however many judgments it holds. A shard is read once per run (and the lines another process
appended since, when a key is not found in it): its index holds where each line is, not the lines.

Branches merge without conflicts: the store writes a ``.gitattributes`` that merges shards with
git's ``union`` driver (both sides' lines are kept). **A key recorded on two lines: the line that
comes last in its shard counts.** A judgment recorded again (``refresh``) is appended after the one
it replaces, so the newer one counts; two lines of one key with different answers (a union merge of
two reviews) are reported by a warning naming the shard, the key and both answers, so a person
deletes the wrong one. A line is read by parsing it: its fields in any order and spacing (a tool
such as ``jq -S -c`` rewrote the store) and a byte-order mark before the first line read the same. A
line that is not a judgment is reported (shard and line number) and skipped; a line that gives a
field twice, which a JSON reader would read as its last value in silence, is refused (shard, line,
key and field) as a damaged one is. Lines are sorted by
key when the judge closes (:meth:`JudgmentStore.flush`; only the line that counts is kept), so
re-recording an unchanged judgment produces no diff at all. Writes hold a
lock on the store directory, so pytest-xdist workers append to the same shards safely; files are
replaced through a temporary file, which ``.gitignore`` keeps out of commits and which the next
store to write (at its first write) removes if a killed process left one behind.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from stat import S_ISDIR, S_ISFIFO
from typing import Any

from .._files import RepeatedName, lock_directory, unique_names, write_atomic, write_text_atomic
from ..errors import WarnOnce
from .base import JudgeAnswer, JudgeRequest, answer_errors, recorded_answer

_HEX = frozenset("0123456789abcdef")
#: The file name ending of a shard.
SHARD_SUFFIX = ".jsonl"
#: What the store writes to ``<dir>/.gitattributes`` when it creates the file.
GITATTRIBUTES = (
    "# pytest-ragmetrics judgment store: branches that each record judgments merge without conflicts\n"
    f"*{SHARD_SUFFIX} merge=union text eol=lf\n"
)
#: What the store writes to ``<dir>/.gitignore``: a temporary file left by a killed write is never
#: committed.
GITIGNORE = "# pytest-ragmetrics judgment store: temporary files of a write in progress\n*.tmp\n"
#: Record fields a line leaves out when they hold these values; the loader puts them back. Part of
#: the line format: never change a value here (lines written with the old value would read wrongly).
FORMAT_DEFAULTS: dict[str, Any] = {"n": 1, "seed": 0, "temperature": 0.0}
# The key a line starts with: as the store writes it, or as a hand edit may space it. A line whose
# key is elsewhere (a tool that sorts or reorders fields) is parsed instead: see _key_of.
_KEY_RE = re.compile(rb'\s*\{\s*"key"\s*:\s*"([0-9a-f]{64})"\s*[,}]')
_BOM = b"\xef\xbb\xbf"
# What a key's 64 hex digits are followed by where the store writes it (``{"key":"<key>",...}``).
_KEY_ENDS = (b'",', b'"}')
# A translation that keeps each hex digit and changes every other byte (to one): bytes of hex
# digits alone are those it leaves unchanged.
_HEX_ONLY = bytes(c if chr(c) in _HEX else ord("0") for c in range(256))
# Opening a shard never waits: a pipe put where a shard should be would wait for a writer (or a
# reader) forever; opened without waiting, it is refused or found empty.
_NOT_BLOCKING = getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
_READ = os.O_RDONLY | _NOT_BLOCKING


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
#: Whether every shard a store can have (one per two hex digits) is kept open once read.
ALL_SHARDS_OPEN = MAX_OPEN_SHARDS >= 256


_KEY = re.compile("[0-9a-f]{64}")
# A temporary file of a write to the store (see _files.write_atomic): a shard's, or a repo file's.
_TEMPORARY = re.compile(r"\.(?:[0-9a-f]{2}\.jsonl|\.gitattributes|\.gitignore)\.[0-9a-f]{12}\.tmp")


def _is_key(name: str) -> bool:
    return _KEY.fullmatch(name) is not None


def dump_line(record: dict[str, Any]) -> bytes:
    """One store line: ``record`` as compact JSON with ``key`` first and every other key sorted.

    Newlines inside strings are escaped by JSON, so a record is always exactly one line. Text that
    UTF-8 cannot carry (a lone surrogate from a ``\\ud800`` escape in a sample file) is written as a
    JSON escape, so the line reads back as it was written.
    """
    key = record["key"]
    rest = {name: value for name, value in record.items() if name != "key"}
    body = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    line = f'{{"key":{json.dumps(key)}' + ("," + body[1:] if len(body) > 2 else "}")
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return line.encode("ascii", "backslashreplace")  # \udXXX: JSON's own escape of a code unit


# json's scanner (its C one, where built), called as JSONDecoder.raw_decode calls it, minus that
# frame; and the same scanner refusing a name given twice in an object (see loads_entry).
scan_json: Callable[[str, int], tuple[Any, int]] = vars(json.JSONDecoder())["scan_once"]
_scan_unique: Callable[[str, int], tuple[Any, int]] = vars(
    json.JSONDecoder(object_pairs_hook=unique_names)
)["scan_once"]


def loads_entry(text: str | bytes, *, unique: bool = False) -> Any:
    """``json.loads(text)`` of a recorded entry (a store line, a cache value), without the look for
    white space around it and for another encoding than UTF-8 that an entry written without either
    needs: the same value, or the same error.

    ``unique``: an object that gives a name twice raises
    :class:`~pytest_ragmetrics._files.RepeatedName`. A JSON reader keeps the last of the two in
    silence; on a store line edited by hand (a verdict added beside the old one rather than in its
    place) which one was meant is a person's call.
    """
    scan, hook = (_scan_unique, unique_names) if unique else (scan_json, None)
    if type(text) is bytes:
        try:
            decoded = text.decode("utf-8", "surrogatepass")  # as json.loads decodes UTF-8
        except ValueError:
            return json.loads(text, object_pairs_hook=hook)
    elif type(text) is str:
        decoded = text
    else:
        return json.loads(text, object_pairs_hook=hook)
    try:
        value, end = scan(decoded, 0)
    except (StopIteration, ValueError):  # not JSON (or a name twice): json.loads says what is wrong
        return json.loads(text, object_pairs_hook=hook)
    if end != len(decoded):
        return json.loads(text, object_pairs_hook=hook)
    return value


def _key_of(line: bytes) -> str | None:
    """The key of the judgment on ``line``, or None when it is not a judgment: found where the store
    writes it (first) at once, anywhere else by parsing the line (``jq -S`` sorts the fields)."""
    found = _KEY_RE.match(line)
    if found is not None:
        return found.group(1).decode("ascii")
    if b'"key"' not in line:
        return None
    try:
        data = json.loads(line)
    except (ValueError, RecursionError):
        return None
    key = data.get("key") if isinstance(data, dict) else None
    return key if isinstance(key, str) and _is_key(key) else None


def record_of(request: JudgeRequest, answer: JudgeAnswer) -> dict[str, Any]:
    """The store record of ``answer`` to ``request``: what was asked, of which judge, and the answer.
    Parameters at their defaults and a schema named after its kind are left out."""
    record: dict[str, Any] = {
        "key": request.cache_key(),
        "kind": request.kind,
        "prompt_version": request.prompt_version,
        "model": request.model,
        "inputs": request.inputs,
        "answer": answer.to_json(),
    }
    for name, default in FORMAT_DEFAULTS.items():
        value = getattr(request, name)
        if value != default:
            record[name] = value
    if request.schema_name != request.kind:
        record["schema_name"] = request.schema_name
    return record


#: The length of a line in an index entry (see _Shard): its low 32 bits.
_LENGTH = (1 << 32) - 1


class _Shard:
    """Where each judgment of one shard file is: key -> the offset and length of the line that counts,
    as one integer (``offset << 32 | length``: an int, not a tuple the garbage collector must track).

    Reads the file (``pread``) rather than holding its lines: a replay of 100,000 judgments keeps
    an index, not the store, in memory. ``end`` is the offset after the last complete line indexed;
    lines appended later are indexed by :meth:`JudgmentStore._index` when a key is missed. ``fd`` is
    -1 while the file is closed (see :data:`MAX_OPEN_SHARDS`).
    """

    __slots__ = ("end", "fd", "identity", "lines")

    def __init__(self, fd: int, identity: tuple[int, int]) -> None:
        self.fd = fd
        self.identity = identity  # (device, inode): a file replaced by a rewrite is read anew
        self.lines: dict[str, int] = {}
        self.end = 0

    def unread(self) -> bytes:
        """What the file holds after ``end``: lines appended since it was indexed, or a last line
        cut short."""
        size = os.fstat(self.fd).st_size
        return os.pread(self.fd, size - self.end, self.end) if size > self.end else b""

    def read(self, key: str) -> bytes | None:
        """The line indexed for ``key``; None when there is none, or when the line now there is
        another's (the file was changed in place since it was indexed): never another's answer."""
        where = self.lines.get(key)
        if where is None or self.fd < 0:
            return None
        line = os.pread(self.fd, where & _LENGTH, where >> 32)
        # Where the store writes the key (first), compared at once; else as _key_of finds it.
        if (line[8:72] != key.encode("ascii") or not line.startswith(b'{"key":"')) and _key_of(line) != key:
            return None
        return line


class JudgmentStore:
    """Recorded judgments under ``directory`` (created on first write).

    Lookups take the :class:`~pytest_ragmetrics.judge.base.JudgeRequest`, so a stored answer is checked
    against the request's current schema before it is trusted; an unreadable or non-conforming entry
    is treated as missing (with one warning per entry), never as a crash.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        # A shard's file is opened by this and its name (see _file): no path object made for every read.
        self._shard_prefix = os.path.join(self.directory, "")
        self._warn = WarnOnce()
        self._lock = threading.RLock()
        self._shards: dict[str, _Shard | None] = {}  # None: the shard file does not exist (yet)
        self._open: OrderedDict[str, _Shard] = OrderedDict()  # shards holding their file open
        # Shards this process appended to, each with the keys it wrote (their lines count at flush).
        self._written: dict[str, set[str]] = {}
        self._held = 0  # depth of this process's hold of the store lock (see _locked)
        # Done on this store's first write, not on every one: the temporary files a killed writer
        # left behind swept away, .gitattributes and .gitignore written where missing.
        self._prepared = False

    def __repr__(self) -> str:
        return f"JudgmentStore({str(self.directory)!r})"

    # --- files -----------------------------------------------------------------------------------

    def path_for(self, key: str) -> Path:
        """The shard file that holds (or will hold) the judgment with cache key ``key``."""
        return self.directory / f"{key[:2]}{SHARD_SUFFIX}"

    def _file(self, name: str) -> str:
        """The file of shard ``name``, as text (what :meth:`path_for` gives, without a path object)."""
        return f"{self._shard_prefix}{name}{SHARD_SUFFIX}"

    def shard_paths(self) -> list[Path]:
        """The shard files, sorted."""
        if not self.directory.is_dir():
            return []
        return sorted(
            p for p in self.directory.glob(f"??{SHARD_SUFFIX}") if set(p.name[:2]) <= _HEX and p.is_file()
        )

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """Hold the store's lock against this process's threads and other processes (xdist
        workers), for writing. Re-entrant within a thread. Temporary files a killed writer left
        behind are removed the first time this store takes the lock: no writer holds it but this one."""
        with self._lock:
            if self._held:
                self._held += 1
                try:
                    yield
                finally:
                    self._held -= 1
                return
            self.directory.mkdir(parents=True, exist_ok=True)
            fd = lock_directory(self.directory)
            self._held = 1
            try:
                if not self._prepared:
                    for stale in self.directory.glob(".*.tmp"):
                        if _TEMPORARY.fullmatch(stale.name):  # ours, not another tool's in a shared directory
                            with contextlib.suppress(OSError):
                                stale.unlink()
                yield
            finally:
                self._held = 0
                if fd is not None:
                    os.close(fd)  # closing releases the lock

    def close(self) -> None:
        """Close the shard files this store holds open (it reopens them on next use)."""
        with self._lock:
            shards, self._shards = self._shards, {}
            self._open.clear()
        for shard in shards.values():
            if shard is not None and shard.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(shard.fd)

    def __del__(self) -> None:  # a store dropped without close() leaks no descriptor
        with contextlib.suppress(Exception):
            self.close()

    # --- reading ---------------------------------------------------------------------------------

    def _index(self, name: str, *, fresh: bool = False, anew: bool = False) -> _Shard | None:
        """Shard ``name``'s index, read on first use; with ``fresh``, brought up to date with the
        file first (lines appended since, or the whole file when it was replaced);
        with ``anew``, read whole again: the file was changed in place, which its size, times and
        inode need not show (a line indexed for a key holds another's)."""
        with self._lock:
            shard = self._shards.get(name, False)
            if isinstance(shard, _Shard) and shard.fd < 0 and not self._reopen(name, shard):
                fresh = True  # the file was replaced while closed: read it anew
            if shard is not False and not (fresh or anew):
                if isinstance(shard, _Shard):
                    self._open.move_to_end(name)
                return shard  # type: ignore[return-value]
            path = self._file(name)
            try:
                stat = os.stat(path)
            except OSError:
                self._shards[name] = None
                return None
            if S_ISDIR(stat.st_mode) or S_ISFIFO(stat.st_mode):
                # Not read as an empty shard in silence: a person put it there, or a checkout went wrong.
                what = "a directory" if S_ISDIR(stat.st_mode) else "a named pipe"
                shown = self.path_for(name)
                self._warn(
                    f"special:{shown}",
                    f"the judgment store shard {shown} is {what}, not a file; its judgments are skipped",
                )
                self._shards[name] = None
                return None
            identity = (stat.st_dev, stat.st_ino)
            if isinstance(shard, _Shard) and shard.fd >= 0 and shard.identity == identity and not anew:
                if stat.st_size > shard.end:
                    self._scan(name, shard)
                return shard
            try:
                fd = os.open(path, _READ)
            except OSError:
                self._shards[name] = None
                return None
            if isinstance(shard, _Shard) and shard.fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(shard.fd)
            shard = _Shard(fd, identity)
            self._scan(name, shard)
            self._shards[name] = shard
            self._opened(name, shard)
            return shard

    def _opened(self, name: str, shard: _Shard) -> None:
        """Keep at most :data:`MAX_OPEN_SHARDS` files open: close the least recently read."""
        self._open[name] = shard
        self._open.move_to_end(name)
        while len(self._open) > MAX_OPEN_SHARDS:
            _, oldest = self._open.popitem(last=False)
            with contextlib.suppress(OSError):
                os.close(oldest.fd)
            oldest.fd = -1

    def _reopen(self, name: str, shard: _Shard) -> bool:
        """Open a closed shard's file again; False when it is no longer the file indexed."""
        try:
            fd = os.open(self._file(name), _READ)
        except OSError:
            return False
        stat = os.fstat(fd)
        if (stat.st_dev, stat.st_ino) != shard.identity or stat.st_size < shard.end:
            os.close(fd)
            return False
        shard.fd = fd
        self._opened(name, shard)
        return True

    def _scan(self, name: str, shard: _Shard) -> None:
        """Index the complete lines of shard ``name`` after ``shard.end``, warning about lines that
        are not judgments and about a key whose lines give different answers."""
        data = shard.unread()
        end = data.rfind(b"\n") + 1
        if _whole_judgment(data[end:]):
            # A last line without its newline (an editor or a hand edit dropped it) is read all the
            # same. A line another process is still appending cannot be mistaken for one: no prefix
            # of a JSON object parses as a whole one.
            end = len(data)
            data += b"\n"
        last = data.rfind(b"\n")
        if last < 0:
            return  # no complete line yet (another process is appending one)
        base = shard.end
        # A byte-order mark some editors write before the first line: not part of that line.
        start = len(_BOM) if base == 0 and data.startswith(_BOM) else 0
        # Conflicts are looked for in the file as it was found: lines appended during a run are
        # judgments recorded again (refresh), which replace the earlier line by design.
        first_read = base == 0
        prefix, lines, match_key, find = name, shard.lines, _KEY_RE.match, data.index
        head = b'{"key":"' + prefix.encode("ascii")  # how the store starts a line of this shard
        while start <= last:
            stop = find(b"\n", start)
            # The key where the store writes it, read in place: compared byte by byte on a line as
            # the store writes it (no pattern to run), else found as _key_of finds it first.
            key = None
            if (
                start + 74 <= stop
                and data.startswith(head, start)
                and data[start + 72 : start + 74] in _KEY_ENDS
                and (digits := data[start + 8 : start + 72]).translate(_HEX_ONLY) == digits
            ):
                key = digits.decode("ascii")
                if not (first_read and key in lines):
                    lines[key] = (base + start) << 32 | (stop - start)  # the usual line, without a copy
                    start = stop + 1
                    continue
            elif (found := match_key(data, start, stop)) is not None:
                key = found.group(1).decode("ascii")
                if key[:2] == prefix and not (first_read and key in lines):
                    lines[key] = (base + start) << 32 | (stop - start)
                    start = stop + 1
                    continue
            line = data[start:stop]
            path = self.path_for(name)  # for the messages of a line not as the store writes it
            if key is None:
                key = _key_of(line)
            if key is None:
                if line.startswith(_CONFLICT_MARKERS):
                    number = _line_number(shard.fd, base + start)
                    marker = line[:80].decode("utf-8", "replace").rstrip()
                    self._warn(
                        f"merge conflict:{path}",
                        f"the judgment store shard {path} holds an unresolved merge conflict (line {number}: "
                        f"{marker!r}): its marker lines are skipped and "
                        "the lines on both sides read, the later line of a judgment on both sides counting. "
                        "Resolve it: delete the marker lines and the line that is wrong (the .gitattributes "
                        "the store writes, '*.jsonl merge=union', keeps both sides' lines with no conflict)",
                    )
                elif line.strip():
                    number = _line_number(shard.fd, base + start)
                    self._warn(
                        f"line:{path}:{number}",
                        f"the judgment store shard {path} has a line that is not a judgment (line {number}: "
                        f"{line[:80].decode('utf-8', 'replace')!r}); it is skipped",
                    )
            else:
                if key[:2] != prefix:
                    self._warn(
                        f"line:{path}:{key}",
                        f"the judgment store shard {path} holds the judgment {key}, which belongs in "
                        f"{key[:2]}{SHARD_SUFFIX}; it is skipped",
                    )
                else:
                    if first_read and key in shard.lines:
                        self._conflict(path, key, shard.read(key) or b"", line)
                    shard.lines[key] = (base + start) << 32 | len(line)
            start = stop + 1
        shard.end = base + end

    def _conflict(self, path: Path, key: str, earlier: bytes, later: bytes) -> None:
        """Two lines of one key: the later counts. Different answers are worth a person's look."""
        answers = []
        for line in (earlier, later):
            try:
                answers.append(json.loads(line).get("answer", {}).get("choices"))
            except (ValueError, AttributeError, RecursionError):
                answers.append(None)
        if answers[0] == answers[1]:
            return  # the same judgment recorded twice (judged at other times): nothing to decide
        self._warn(
            f"conflict:{key}",
            f"the judgment store shard {path} records the judgment {key} twice with different answers: "
            f"{json.dumps(answers[0], ensure_ascii=False)} and then "
            f"{json.dumps(answers[1], ensure_ascii=False)}; "
            "the later line counts. Delete the line that is wrong",
        )

    def _line(self, key: str, *, a_key: bool = False) -> bytes | None:
        """The line that counts for ``key``, or ``None``: a shard is read again only on a miss.
        ``a_key``: ``key`` is known to be a cache key (a request's), not text from elsewhere."""
        if not a_key and not _is_key(key):
            return None
        name = key[:2]
        if ALL_SHARDS_OPEN:
            # No shard is ever closed to make room: nothing to lock and no order of use to keep for
            # a shard indexed and open already (as _index would return it unchanged).
            shard = self._shards.get(name)
            if shard is not None and shard.fd >= 0:
                try:
                    line = shard.read(key)
                except OSError:  # (no context manager to enter and leave on every read)
                    line = None
                if line is not None:
                    return line
        # As indexed; then with the lines appended since.
        for fresh in (False, True):
            shard = self._index(name, fresh=fresh)
            if shard is None:
                if fresh:
                    return None
                continue  # no file when first looked for: another process may have made it since
            try:
                line = shard.read(key)
            except OSError:
                continue
            if line is not None:
                return line
            if fresh and key not in shard.lines:
                return None  # not in the file: the usual miss reads nothing more
        # The line indexed for the key holds another's: the file was changed in place, and the key
        # may be elsewhere in it.
        return self._line_anew(key)

    def _line_anew(self, key: str) -> bytes | None:
        """The line of ``key`` once its shard is read whole again (see :meth:`_index`)."""
        shard = self._index(key[:2], anew=True)
        try:
            return None if shard is None else shard.read(key)
        except OSError:
            return None

    def cut_short(self, key: str) -> str:
        """For a message saying ``key`` is not recorded: the line its shard ends in when that line is
        cut short (no newline, not a whole judgment: a killed write, a truncated copy), which is not
        read; "" when the shard ends in a whole line."""
        shard = self._index(key[:2], fresh=True)
        if shard is None or shard.fd < 0:
            return ""
        try:
            cut = shard.unread()
            if not cut.strip():
                return ""
            number = _line_number(shard.fd, shard.end)
        except OSError:
            return ""
        whose = "this judgment's line" if key.encode("ascii") in cut[:100] else "a line"
        return (
            f" The shard {self.path_for(key)} ends in {whose} cut short (line {number}, {len(cut):,} "
            f"bytes with no end: {cut[:60].decode('utf-8', 'replace')!r}…), which is not read: restore "
            "the whole line (from version control, say) or record the judgment again."
        )

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._line(key) is not None

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> set[str]:
        """Keys of all stored judgments."""
        found: set[str] = set()
        for path in self.shard_paths():
            shard = self._index(path.name[:2], fresh=True)
            if shard is not None:
                found.update(shard.lines)
        return found

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable stored judgment as a JSON object, in key order (see :meth:`read_json`)."""
        for key in sorted(self.keys()):
            data = self.read_json(key)
            if data is not None:
                yield data

    def models(self) -> set[str]:
        """The judge models of the stored judgments (unreadable entries are skipped)."""
        return {record["model"] for record in self.records() if isinstance(record.get("model"), str)}

    def where(self, key: str) -> str:
        """Where the judgment ``key`` lives, for messages: the shard file and the key."""
        return f"{self.path_for(key)} (key {key[:12]}…)"

    def _line_number(self, key: str) -> int | str:
        """The number of the line that counts for ``key`` in its shard (for a warning only)."""
        shard = self._shards.get(key[:2])
        where = None if shard is None else shard.lines.get(key)
        if shard is None or where is None or shard.fd < 0:
            return "?"
        try:
            return _line_number(shard.fd, where >> 32)
        except OSError:
            return "?"

    def _warn_entry(self, key: str, why: str, replay: bool | None) -> None:
        # Say what happens next: only a run that may call the judge will replace the entry.
        if replay is None:
            then = "treating it as missing"
        elif replay:
            then = "replay treats the judgment as not recorded"
        else:
            then = "it will be judged again and recorded anew"
        self._warn(key, f"ignoring the judgment store entry {self.where(key)}: {why}; {then}")

    def _record(self, key: str, replay: bool | None, *, a_key: bool = False) -> dict[str, Any] | None:
        """The JSON object on the line of ``key`` as written (see :meth:`read_json`)."""
        line = self._line(key, a_key=a_key)
        while line is not None:
            try:
                data = loads_entry(line, unique=True)
                break
            except RepeatedName as twice:
                self._warn_entry(
                    key,
                    f"line {self._line_number(key)} gives the field {twice.name!r} twice, where a JSON "
                    "reader would keep the last in silence; delete the one that is wrong",
                    replay,
                )
                return None
            except ValueError as exc:  # UnicodeDecodeError is a ValueError too
                # Read where the index said the line was, as long as it was: a shard changed in
                # place since (an editor saving into the same file) may have moved its end. The
                # shard is read anew: a line still the same there is damaged.
                again = self._line_anew(key)
                if again is None or again == line:
                    self._warn_entry(key, f"it is not valid JSON ({exc})", replay)
                    return None
                line = again
            except RecursionError:
                self._warn_entry(key, "it is nested too deeply to read", replay)
                return None
        else:
            return None
        if not isinstance(data, dict):
            self._warn_entry(key, "it does not hold a JSON object", replay)
            return None
        return data

    def read_json(self, key: str, *, replay: bool | None = None) -> dict[str, Any] | None:
        """The full record of a stored judgment (left-out defaults put back), or ``None`` when it
        is missing or unreadable. ``replay`` only words the warning about an unreadable entry (see
        :meth:`get`)."""
        data = self._record(key, replay)
        if data is None:
            return None
        for name, default in FORMAT_DEFAULTS.items():
            data.setdefault(name, default)
        if isinstance(data.get("kind"), str):
            data.setdefault("schema_name", data["kind"])
        return data

    def get(self, request: JudgeRequest, *, replay: bool | None = None) -> JudgeAnswer | None:
        """The stored answer to ``request`` (``source="store"``), or ``None``.

        A damaged entry (unreadable, wrong JSON types, not fitting the request's schema) is ``None``
        with one warning per entry. ``replay`` words that warning: ``True`` when nothing will judge
        the request again, ``False`` when the judge will, ``None`` when unknown.
        """
        key = request.cache_key()
        data = self._record(key, replay, a_key=True)  # its answer and inputs: no defaults to put back
        if data is None:
            return None
        if "answer" not in data:
            self._warn_entry(key, "its answer is malformed (the entry has no 'answer')", replay)
            return None
        derived = None
        if request.derived:
            # A chunk's sentences are recorded with its judgment rather than split again.
            try:
                derived = request.provide(data.get("inputs"))
            except ValueError as exc:
                self._warn_entry(key, f"its inputs are malformed ({exc})", replay)
                return None
            if derived is None:  # the request holds its own
                derived = request.derived_inputs()
        answer = recorded_answer(data["answer"], request.schema, request.n, "store", derived)
        if answer is not None:
            return answer
        # Not the usual shape: from_json reads what else it accepts, or says what is wrong.
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
            errors = answer_errors(schema, choice)
            if errors:
                self._warn_entry(
                    key, "its answer does not conform to the schema: " + "; ".join(errors[:3]), replay
                )
                return None
        return answer

    # --- writing ---------------------------------------------------------------------------------

    def _write_repo_files(self) -> None:
        """Write .gitattributes and .gitignore where missing, on this store's first write (the
        caller holds the lock)."""
        if self._prepared:
            return
        for name, text in ((".gitattributes", GITATTRIBUTES), (".gitignore", GITIGNORE)):
            path = self.directory / name
            if not path.exists():
                write_text_atomic(path, text)
        self._prepared = True

    def put_many(self, pairs: Iterable[tuple[JudgeRequest, JudgeAnswer]]) -> None:
        """Record answers, each replacing what its key held: appended to their shards under one
        hold of the write lock, sorted into place by :meth:`flush`. Recording exactly what is
        there already writes nothing."""
        self.write_records([record_of(request, answer) for request, answer in pairs])

    def write_records(self, records: Iterable[dict[str, Any]]) -> None:
        """Record judgment records (see :func:`record_of`), each replacing what its key held. A record
        that differs from the line its key holds only in when it was judged (``judged_at``: the
        same answer judged again, as ``--rag-cache=refresh`` does) leaves that line as it is."""
        by_shard: dict[str, dict[str, dict[str, Any]]] = {}
        for record in records:
            key = record["key"]
            by_shard.setdefault(key[:2], {})[key] = record
        if not by_shard:
            return
        with self._locked():
            self._write_repo_files()
            for name, shard_records in sorted(by_shard.items()):
                new = {}
                for key, record in shard_records.items():
                    held = self._line(key)
                    line = dump_line(record)
                    if held is not None and held != line and _judged_again(held, record):
                        # Kept; but sorted by flush as a recorded one (another line of the key goes).
                        self._written.setdefault(name, set())
                        continue
                    if held != line:
                        new[key] = line
                if not new:
                    continue
                path = self.directory / f"{name}{SHARD_SUFFIX}"
                prefix = b"" if _ends_with_newline(path) else b"\n"  # a hand edit without a final newline
                _append(path, prefix + b"".join(line + b"\n" for line in new.values()))
                self._written.setdefault(name, set()).update(new)
                self._index(name, fresh=True)

    def flush(self) -> int:
        """Sort the shards this process appended to, one line per key (the one that counts).

        Returns how many of the judgments this process recorded are no longer in the store: its
        directory or shards were deleted or replaced meanwhile (a checkout of another branch, a
        clean-up during the run)."""
        if not self._written:
            return 0
        gone = 0
        with self._locked():
            for name, keys in sorted(self._written.items()):
                shard = self._rewrite(name)
                gone += len(keys) if shard is None else sum(1 for key in keys if key not in shard.lines)
            self._written.clear()
        return gone

    def _rewrite(self, name: str, drop: Iterable[str] = ()) -> _Shard | None:
        """Write shard ``name`` again: its judgments sorted by key, the line that counts of each,
        without ``drop``'s keys. Lines that are not judgments of this shard are kept at the end (a
        person wrote them; the warning about them stays until they are fixed), and so is a last line
        cut short, as it is. Returns the shard indexed anew (None: there is none now)."""
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        shard = self._index(name, fresh=True)
        if shard is None:
            return None
        gone = set(drop)
        kept = sorted((key, shard.read(key)) for key in shard.lines if key not in gone)
        others = [
            line
            for line in os.pread(shard.fd, shard.end, 0).removeprefix(_BOM).split(b"\n")
            if line.strip() and not _belongs(line, name)
        ]
        lines = [line for _, line in kept if line is not None] + others
        # What follows the last whole line: no process is appending it (this one holds the lock), so
        # it is a line cut short (a killed write, a truncated copy). Not indexed, but not ours to drop.
        cut = shard.unread()
        if cut.strip():
            number = _line_number(shard.fd, shard.end)
            self._warn(
                f"cut:{path}",
                f"the judgment store shard {path} ends in a line cut short (line {number}: "
                f"{cut[:80].decode('utf-8', 'replace')!r}); it is not read, and kept as it is",
            )
        else:
            cut = b""
        if lines or cut:
            write_atomic(path, b"".join(line + b"\n" for line in lines) + cut)
        else:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return self._index(name, fresh=True)

    def delete(self, key: str) -> bool:
        """Remove one stored judgment."""
        return bool(self.prune(self.keys() - {key}, only={key}))

    def prune(self, keep: set[str], *, dry_run: bool = False, only: set[str] | None = None) -> list[str]:
        """Delete stored judgments whose key is not in ``keep``; returns the removed keys, sorted.
        ``only`` limits the deletion to those keys."""
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
                self._rewrite(name, drop=keys)
                self._written.pop(name, None)
        return removed


def _judged_again(held: bytes, record: dict[str, Any]) -> bool:
    """Whether ``record`` is the judgment on the line ``held`` judged again: the same line but for
    its ``judged_at``."""
    try:
        earlier = loads_entry(held)
        answer = earlier["answer"]
        # As the line gives it: a time, null (unknown) or none at all.
        when = {"judged_at": answer["judged_at"]} if "judged_at" in answer else {}
    except (ValueError, RecursionError, KeyError, TypeError, AttributeError):  # a damaged line
        return False
    again = {**record["answer"]}
    again.pop("judged_at", None)
    again.update(when)
    return dump_line({**record, "answer": again}) == held


#: How git marks the sides of a merge conflict in a file, each at the start of its own line
#: (``|||||||`` with ``merge.conflictStyle = diff3``).
_CONFLICT_MARKERS = (b"<<<<<<< ", b"||||||| ", b"=======", b">>>>>>> ")


def _belongs(line: bytes, name: str) -> bool:
    """Whether ``line`` is a judgment of shard ``name`` (indexed, so rewritten from the index)."""
    key = _key_of(line)
    return key is not None and key[:2] == name


def _whole_judgment(line: bytes) -> bool:
    """Whether ``line`` (with no newline after it) is a whole judgment line: a key, and JSON that parses."""
    if _key_of(line.removeprefix(_BOM)) is None:
        return False
    try:
        return isinstance(json.loads(line.removeprefix(_BOM)), dict)
    except (ValueError, RecursionError):
        return False


def _line_number(fd: int, offset: int) -> int:
    """The 1-based number of the line starting at ``offset`` (for a warning only)."""
    return os.pread(fd, offset, 0).count(b"\n") + 1


def _ends_with_newline(path: Path) -> bool:
    try:
        fd = os.open(path, _READ)
    except OSError:  # missing (or not a file to append to: the append says so)
        return True
    try:
        size = os.fstat(fd).st_size
        return size == 0 or os.pread(fd, 1, size - 1) == b"\n"
    except OSError:
        return True
    finally:
        os.close(fd)


def _append(path: Path, data: bytes) -> None:
    """Append ``data`` with one ``write`` (O_APPEND): a reader never sees another writer's half line.

    A write that fails part-way (a full disk) is undone: the file is cut back to its size before, so
    no torn line is ever left in a shard (the writer holds the store lock: nobody appended since),
    and a shard that was empty or new is removed: no empty file is left to be committed.
    """
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOT_BLOCKING, 0o666)
    try:
        size = os.fstat(fd).st_size
        view = memoryview(data)
        try:
            while view:
                written = os.write(fd, view)
                view = view[written:]
        except BaseException:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            if size == 0:  # nor an empty shard this write created, for the store's history
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise
    finally:
        os.close(fd)
