"""The judgment store: recorded judge answers in readable JSON Lines shards, meant to be committed.

CI replays from it without an API key. A judgment is one line of ``<dir>/<key[:2]>.jsonl``: a JSON
object that starts with its ``key`` and holds the request (kind, model, prompt version, inputs) and
the answer, with sorted keys and no \\u-escapes, so a review shows exactly what the judge said and why.
256 shards keep the store to a few hundred files however many judgments it holds, so ``git add`` and
``git status`` stay instant at 100,000 judgments.

Lines are compact (:func:`encode_record`): texts that recur from one judgment to the next (a
question, a chunk, a reference: :data:`SHARED_INPUTS` of at least :data:`SHARED_TEXT_MIN`
characters) are written once, as a text line ``{"text":"<id>","value":"..."}`` in the shard of its
id (16 hex digits of the text's sha256), and a judgment refers to them as ``{"$text":"<id>"}``. A
chunk whose sentence judgment is recorded is named by it instead, ``{"text":"<id>","chunk_of":"<key>"}``:
the judgment's sentences, joined by spaces, are the text. Fields holding the format's defaults
(:data:`FORMAT_DEFAULTS`), a ``schema_name`` equal to the kind and a sentence judgment's chunk are
left out. The loader puts all of it back (:func:`expand_record`): what :meth:`JudgmentStore.read_json`
returns is the same for a compact line and a line of the full form, which is still read. A text line
counts only when its text matches its id; a judgment whose text is missing is not recorded, with a
warning. Runs never delete texts; ``prune`` removes unused ones only when asked.

Branches merge without conflicts: the store writes a ``.gitattributes`` that merges shards with
git's ``union`` driver (both sides' lines are kept), and the loader takes a key recorded twice
deterministically: the most recently judged line, then the greater line; a text recorded twice is
the same text either way. Lines are sorted by key (text lines by id among them); new judgments are
appended during a run and their shards sorted again when the judge closes
(:meth:`JudgmentStore.flush`), so re-recording an unchanged judgment produces no diff at all. Writes
hold a lock on the store directory, so pytest-xdist workers append to the same shards safely.

Stores written by pytest-ragmetrics 0.2 and older (one ``<key[:2]>/<key>.json`` file per judgment)
are still read; ``python -m pytest_ragmetrics store migrate`` moves them into shards, and rewrites
lines of the full form compactly.
"""

from __future__ import annotations

import binascii
import contextlib
import hashlib
import json
import os
import re
import secrets
import threading
import warnings
from array import array
from bisect import bisect_left, bisect_right
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
_TEXT_START = b'{"text":"'
# Judgment lines and text lines as the store writes them, found in one pass over a shard.
_ANY_START_RE = re.compile(rb'^\{"(?:key":"([0-9a-f]{64})"|text":"([0-9a-f]{16})"),', re.MULTILINE)

#: Record fields a line leaves out when they hold these values; the loader puts them back. Part of
#: the line format: never change a value here (lines written with the old value would read wrongly).
FORMAT_DEFAULTS: dict[str, Any] = {"n": 1, "seed": 0, "temperature": 0.0}
#: Inputs whose texts (or the texts in their lists) repeat from one judgment to the next: each
#: such text of at least :data:`SHARED_TEXT_MIN` characters is written once, as a text line.
SHARED_INPUTS = frozenset({"question", "chunk", "contexts", "reference"})
#: The shortest text written as a text line of its own (a reference to it costs about 30 bytes).
SHARED_TEXT_MIN = 40
#: Judgment kinds keyed on a chunk whose recorded sentences, joined by spaces, give the chunk back.
_SENTENCE_KINDS = frozenset({"context_relevance_sentences"})
_TEXT_ID_LENGTH = 16
_TEXT_ID_BYTES = _TEXT_ID_LENGTH // 2
_KEY_LENGTH = 64
_KEY_BYTES = _KEY_LENGTH // 2
_REF = "$text"
_RAW = "$raw"  # wraps an input that would otherwise read as a reference
#: Resolved texts kept in memory by a store (a replay resolves each text once).
MAX_CACHED_TEXTS = 2048


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


def text_id(value: str) -> str:
    """The id of a shared text: the first 16 hex digits of the sha256 of its UTF-8 bytes."""
    return hashlib.sha256(value.encode("utf-8")).hexdigest()[:_TEXT_ID_LENGTH]


def _is_text_id(name: object) -> bool:
    return isinstance(name, str) and len(name) == _TEXT_ID_LENGTH and set(name) <= _HEX


def _line_text_id(line: bytes) -> str | None:
    """The id a text line records, or ``None`` when the line is not a text line."""
    if line.startswith(_TEXT_START) and line[25:27] == b'",':
        found = line[9:25].decode("ascii", "replace")
        if _is_text_id(found):
            return found
    if b'"text"' not in line:
        return None
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or "key" in data or not ("value" in data or "chunk_of" in data):
        return None
    named = data.get("text")
    return named if isinstance(named, str) and _is_text_id(named) else None


def text_line(tid: str, *, value: str | None = None, chunk_of: str | None = None) -> bytes:
    """A text line: the text itself (``value``), or the key of the sentence judgment whose recorded
    sentences, joined by spaces, are the text (``chunk_of``)."""
    if chunk_of is not None:
        return f'{{"text":"{tid}","chunk_of":"{chunk_of}"}}'.encode("ascii")
    return f'{{"text":"{tid}","value":{json.dumps(value, ensure_ascii=False)}}}'.encode()


def _sentence_chunk(inputs: Any, kind: Any) -> str | None:
    """The chunk a sentence judgment's recorded sentences give back (joined by spaces), if they do."""
    if kind not in _SENTENCE_KINDS or not isinstance(inputs, dict) or "splitter" not in inputs:
        return None
    sentences = inputs.get("sentences")
    if "first_sentence" in inputs or type(sentences) is not list or not sentences:
        return None
    if not all(type(sentence) is str for sentence in sentences):
        return None
    return " ".join(sentences)


def _same(value: Any, default: Any) -> bool:
    return type(value) is type(default) and value == default


@dataclass
class Encoded:
    """A record in the compact line form: the line, the texts it refers to, and, for a sentence
    judgment whose sentences give its chunk back, the chunk's text id (its text line may name it)."""

    line: bytes
    texts: dict[str, str]
    chunk: str | None = None


def encode_record(record: dict[str, Any], *, share: bool = True) -> Encoded:
    """``record`` as a compact store line (see the module docstring); :func:`expand_record` undoes it.

    Left out: fields holding their :data:`FORMAT_DEFAULTS`, a ``schema_name`` equal to the kind, and a
    sentence judgment's chunk (and sentence count) when its recorded sentences give them back.
    Shared inputs (:data:`SHARED_INPUTS`) of at least :data:`SHARED_TEXT_MIN` characters become
    references ``{"$text": "<id>"}`` to text lines (not with ``share=False``).
    """
    out = dict(record)
    for name, default in FORMAT_DEFAULTS.items():
        if name in out and _same(out[name], default):
            del out[name]
    if isinstance(out.get("kind"), str) and out.get("schema_name") == out["kind"]:
        del out["schema_name"]
    texts: dict[str, str] = {}
    chunk_id = None
    inputs = out.get("inputs")
    if isinstance(inputs, dict):
        inputs = dict(inputs)
        chunk = _sentence_chunk(inputs, out.get("kind"))
        if chunk is not None and inputs.get("chunk") == chunk:
            del inputs["chunk"]
            if _same(inputs.get("sentence_count"), len(inputs["sentences"])):
                del inputs["sentence_count"]
            chunk_id = text_id(chunk) if share and len(chunk) >= SHARED_TEXT_MIN else None
        for name, value in inputs.items():
            shared = share and name in SHARED_INPUTS
            if type(value) is list:
                inputs[name] = [_encode_input(item, shared, texts) for item in value]
            else:
                inputs[name] = _encode_input(value, shared, texts)
        out["inputs"] = inputs
    return Encoded(dump_line(out), texts, chunk_id)


def _encode_input(value: Any, shared: bool, texts: dict[str, str]) -> Any:
    if type(value) is str:
        if shared and len(value) >= SHARED_TEXT_MIN:
            tid = text_id(value)
            texts[tid] = value
            return {_REF: tid}
        return value
    if type(value) is dict and len(value) == 1 and (_REF in value or _RAW in value):
        return {_RAW: value}
    return value


def expand_record(data: dict[str, Any], text: Any, *, resolve: bool = True) -> str | None:
    """Undo :func:`encode_record` in place: ``data`` becomes the full record again.

    ``text(id)`` gives a shared text (``None``: not in the store). Returns the id of the first text
    that cannot be found (``data`` is then incomplete), else ``None``. Lines in the full form (all
    fields, inline inputs) come out as they are. ``resolve=False`` only checks the references.
    """
    for name, default in FORMAT_DEFAULTS.items():
        if name not in data:
            data[name] = default
    if "schema_name" not in data and isinstance(data.get("kind"), str):
        data["schema_name"] = data["kind"]
    inputs = data.get("inputs")
    if type(inputs) is not dict:
        return None
    for name, value in inputs.items():
        if type(value) is dict:
            if len(value) == 1:
                found = _resolve(value, text)
                if found is None:
                    return str(value.get(_REF))
                if resolve:
                    inputs[name] = found[0]
        elif type(value) is list:
            for i, item in enumerate(value):
                if type(item) is dict and len(item) == 1:
                    found = _resolve(item, text)
                    if found is None:
                        return str(item.get(_REF))
                    if resolve:
                        value[i] = found[0]
    if "chunk" not in inputs:
        chunk = _sentence_chunk(inputs, data.get("kind"))
        if chunk is not None:
            inputs["chunk"] = chunk
            if "sentence_count" not in inputs:
                inputs["sentence_count"] = len(inputs["sentences"])
    return None


def _resolve(value: dict[str, Any], text: Any) -> tuple[Any] | None:
    """What a one-key input object stands for, as a 1-tuple; ``None`` for a text not found."""
    if _REF in value:
        tid = value[_REF]
        found = text(tid) if type(tid) is str else None
        return None if found is None else (found,)
    if _RAW in value:
        return (value[_RAW],)
    return (value,)


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
    """A shard's content, whole, for rewriting it: its judgments by key, its text lines by id, and
    the lines that are neither."""

    entries: dict[str, bytes] = field(default_factory=dict)
    texts: dict[str, list[bytes]] = field(default_factory=dict)
    bad: list[tuple[int, bytes]] = field(default_factory=list)
    duplicates: int = 0

    @classmethod
    def parse(cls, data: bytes) -> _Shard:
        shard = cls()
        entries = shard.entries
        for number, _, line in _scan(data):
            key = _line_key(line)
            if key is None:
                tid = _line_text_id(line)
                if tid is None:
                    shard.bad.append((number, line))
                else:
                    lines = shard.texts.setdefault(tid, [])
                    if line in lines:
                        shard.duplicates += 1
                    else:
                        lines.append(line)
            elif key in entries:
                shard.duplicates += 1
                entries[key] = _winner(entries[key], line)
            else:
                entries[key] = line
        for tid, lines in shard.texts.items():
            if len(lines) > 1:
                # Two forms of one text (branches merged): a line holding the text itself, checked
                # against its id, is enough; otherwise all are kept (the loader tries each).
                whole = [line for line in lines if _verified_value(line, tid) is not None]
                if whole:
                    shard.duplicates += len(lines) - 1
                    shard.texts[tid] = [max(whole)]
        return shard

    def render(self) -> bytes:
        """The shard's canonical bytes: one line per key or text, sorted, then any unreadable lines as
        they were."""
        lines = [(key, line) for key, line in self.entries.items()]
        lines += [(tid, line) for tid, text_lines in self.texts.items() for line in text_lines]
        lines.sort()
        return b"".join(line + b"\n" for _, line in lines) + b"".join(line + b"\n" for _, line in self.bad)


def _verified_value(line: bytes, tid: str) -> str | None:
    """The text a text line holds itself, if it matches its id ``tid``."""
    try:
        data = json.loads(line)
    except ValueError:
        return None
    value = data.get("value") if isinstance(data, dict) else None
    if isinstance(value, str) and text_id(value) == tid:
        return value
    return None


def _packed(name: str, length: int) -> bytes | None:
    """``name`` (``length`` lowercase hex digits: a key, a text id) as the bytes it spells, else ``None``."""
    if len(name) != length or not (name.islower() or name.isdigit()):
        return None  # upper case would unhexlify to the same bytes as lower case
    try:
        return binascii.unhexlify(name)
    except ValueError:  # not hex, or not ASCII
        return None


class _Index:
    """Where each judgment of one shard is: an open file and, by key, ``offset << 32 | length``.

    Text lines likewise, by text id (a text may have several lines: branches merged may leave two
    forms of one text). Lookups read one line each from the file, so a run holds the positions of a
    large store in memory, never its text; and compactly, in a few flat arrays searched by bisection
    rather than dictionaries of strings: a judgment takes 48 bytes (its key's first 8 bytes as a
    number, all 32 bytes, its position), a text line 16 (its id as a number, its position), where
    dictionaries took 190 and 140. The file stays open: a shard another process replaces meanwhile is
    read as it was when indexed, consistently.
    """

    __slots__ = ("_digests", "_prefixes", "_spans", "_text_spans", "_tids", "fd", "lines", "stat")

    def __init__(self, fd: int | None, data: bytes, stat: tuple[int, int, int] | None) -> None:
        self.fd = fd
        self.stat = stat
        spans: dict[bytes, int] = {}  # by key (its hex digits): this shard only, while indexing
        texts: list[tuple[int, int]] = []  # (text id as a number, span)
        lines = 0
        # Lines as the store writes them, found in one pass; any other line the slow way below.
        for match in _ANY_START_RE.finditer(data):
            start = match.start()
            end = data.find(b"\n", start)
            end = len(data) if end < 0 else end
            span = start << 32 | (end - start - (data[end - 1 : end] == b"\r"))
            lines += 1
            found = match.group(1)
            if found is None:
                texts.append((int(match.group(2), 16), span))
            elif found not in spans or self._later(data, span, spans[found]):
                spans[found] = span
        self.lines = lines
        if lines != data.count(b"\n") + (not data.endswith(b"\n") and bool(data)):
            spans.clear()
            texts.clear()
            self.lines = 0
            for _, offset, line in _scan(data):
                span = offset << 32 | len(line)
                key = _line_key(line)
                if key is not None:
                    self.lines += 1
                    found = key.encode("ascii")
                    if found not in spans or self._later(data, span, spans[found]):
                        spans[found] = span
                elif (tid := _line_text_id(line)) is not None:
                    self.lines += 1
                    texts.append((int(tid, 16), span))
        keyed = sorted((binascii.unhexlify(key), span) for key, span in spans.items())
        self._digests = bytearray(b"".join(key for key, _ in keyed))
        self._prefixes = array("Q", [int.from_bytes(key[:8], "big") for key, _ in keyed])
        self._spans = array("Q", [span for _, span in keyed])
        texts.sort()  # a text's lines stay in file order (by offset)
        self._tids = array("Q", [tid for tid, _ in texts])
        self._text_spans = array("Q", [span for _, span in texts])

    @staticmethod
    def _later(data: bytes, span: int, other: int) -> bool:
        """Whether the line at ``span`` counts over the line at ``other`` (see :func:`_winner`)."""
        mine = data[span >> 32 : (span >> 32) + (span & 0xFFFFFFFF)]
        theirs = data[other >> 32 : (other >> 32) + (other & 0xFFFFFFFF)]
        return _winner(theirs, mine) is mine  # max() keeps the first of equals: strictly later

    def _position(self, packed: bytes) -> tuple[int, bool]:
        """Where the key spelling ``packed`` is among the sorted keys (True), or would go (False)."""
        prefix = int.from_bytes(packed[:8], "big")
        prefixes, digests = self._prefixes, self._digests
        i = bisect_left(prefixes, prefix)
        while i < len(prefixes) and prefixes[i] == prefix:  # keys sharing their first 8 bytes
            found = digests[i * _KEY_BYTES : (i + 1) * _KEY_BYTES]
            if found >= packed:
                return i, found == packed
            i += 1
        return i, False

    def _find(self, key: str) -> int:
        """The position of ``key`` among the sorted keys, or -1."""
        packed = _packed(key, _KEY_LENGTH)
        if packed is None:
            return -1
        i, found = self._position(packed)
        return i if found else -1

    def has(self, key: str) -> bool:
        """Whether the shard records the judgment ``key``."""
        return self._find(key) >= 0

    def keys(self) -> list[str]:
        """The keys of the judgments the shard records."""
        digests = self._digests
        return [digests[i : i + _KEY_BYTES].hex() for i in range(0, len(digests), _KEY_BYTES)]

    def add(self, key: str, span: int) -> None:
        """Note that the line at ``span`` records ``key`` (replacing what it held: an appended line)."""
        packed = binascii.unhexlify(key)
        i, found = self._position(packed)
        if found:
            self._spans[i] = span
            return
        self._prefixes.insert(i, int.from_bytes(packed[:8], "big"))
        self._digests[i * _KEY_BYTES : i * _KEY_BYTES] = packed
        self._spans.insert(i, span)

    def read(self, key: str) -> bytes | None:
        i = self._find(key)
        if i < 0 or self.fd is None:
            return None
        span = self._spans[i]
        return _pread(self.fd, span & 0xFFFFFFFF, span >> 32)

    def _text_range(self, tid: str) -> range:
        packed = _packed(tid, _TEXT_ID_LENGTH)
        if packed is None:
            return range(0)
        value = int.from_bytes(packed, "big")
        tids = self._tids
        return range(bisect_left(tids, value), bisect_right(tids, value))

    def has_text(self, tid: str) -> bool:
        """Whether the shard holds a line of the text ``tid``."""
        packed = _packed(tid, _TEXT_ID_LENGTH)
        if packed is None:
            return False
        value = int.from_bytes(packed, "big")
        tids = self._tids
        i = bisect_left(tids, value)
        return i < len(tids) and tids[i] == value

    def text_ids(self) -> list[str]:
        """The ids of the texts the shard holds lines of, sorted."""
        return [f"{value:016x}" for value in sorted(set(self._tids))]

    def add_text(self, tid: str, span: int) -> None:
        """Note that the line at ``span`` holds the text ``tid`` (one more line of it)."""
        value = int(tid, 16)
        i = bisect_right(self._tids, value)
        self._tids.insert(i, value)
        self._text_spans.insert(i, span)

    def read_texts(self, tid: str) -> list[bytes]:
        """The text lines recorded for ``tid`` (usually one)."""
        fd = self.fd
        if fd is None:
            return []
        spans = self._text_spans
        return [_pread(fd, spans[i] & 0xFFFFFFFF, spans[i] >> 32) for i in self._text_range(tid)]

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
        self._texts: dict[str, str] = {}  # shared texts resolved this run, by id (bounded)
        # Sentence judgments recorded this run whose sentences give their chunk back, by the chunk's
        # text id; and the ids of the text lines this process added, by shard, as the 8 bytes each
        # spells (flush() may shorten those lines; a run may add tens of thousands).
        self._chunk_of: dict[str, str] = {}
        self._new_texts: dict[str, bytearray] = {}

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

    def generation(self) -> str | None:
        """The identity of the store's files as they are now (names, sizes, modification times),
        which any write, checkout or edit changes; ``None`` for a store still holding judgments in the
        one-file-per-judgment layout, or one that cannot be looked at."""
        if self._has_legacy():
            return None
        parts: list[Any] = [str(self.directory.resolve())]
        try:
            for path in self.shard_paths():
                stat = path.stat()
                parts.append([path.name, stat.st_size, stat.st_mtime_ns, stat.st_ino])
        except OSError:
            return None
        return hashlib.sha256(json.dumps(parts).encode("utf-8")).hexdigest()

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
        if index.lines < data.count(b"\n"):
            self._warn_bad(
                path,
                [
                    (n, line)
                    for n, _, line in _scan(data)
                    if _line_key(line) is None and _line_text_id(line) is None
                ],
            )
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
        if self._index(name).has(key) or self._index(name, fresh=True).has(key):
            return True
        return self._has_legacy() and _is_key(key) and self.legacy_path(key).is_file()

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> set[str]:
        """Keys of all stored judgments."""
        found: set[str] = set()
        for path in self.shard_paths():
            found.update(self._index(path.name[:2], fresh=True).keys())
        if self._has_legacy():
            found.update(p.stem for p in self.legacy_files())
        return found

    def records(self, *, resolve: bool = True) -> Iterator[dict[str, Any]]:
        """Every readable stored judgment as a JSON object, in key order (see :meth:`read_json`)."""
        for key in sorted(self.keys()):
            data = self.read_json(key, resolve=resolve)
            if data is not None:
                yield data

    def models(self) -> set[str]:
        """The judge models of the stored judgments (unreadable entries are skipped)."""
        return {
            record["model"] for record in self.records(resolve=False) if isinstance(record.get("model"), str)
        }

    def where(self, key: str) -> str:
        """Where the judgment ``key`` lives, for messages: the shard file and the key."""
        if self._line(key) is None and self._has_legacy() and self.legacy_path(key).is_file():
            return str(self.legacy_path(key))
        return f"{self.path_for(key)} (key {key[:12]}…)"

    def _warn(self, topic: str, message: str) -> None:
        from ..errors import RagMetricsWarning

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

    def text(self, tid: str) -> str | None:
        """The shared text ``tid`` (see :func:`encode_record`), or ``None`` when the store lacks it.

        A text line counts only when its text matches its id, so a damaged or colliding line is
        never taken for the text.
        """
        found = self._texts.get(tid)
        if found is not None or not _is_text_id(tid):
            return found
        for fresh in (False, True):
            try:
                lines = self._index(tid[:2], fresh=fresh).read_texts(tid)
            except (OSError, ValueError):  # a file closed by another thread: index it again
                lines = []
            for line in sorted(lines, reverse=True):
                found = self._text_of_line(line, tid)
                if found is not None:
                    if len(self._texts) >= MAX_CACHED_TEXTS:
                        self._texts.clear()
                    self._texts[tid] = found
                    return found
        return None

    def _text_known(self, tid: str) -> str | None:
        """``""`` when the store holds a line of the text ``tid`` (not read), else ``None``."""
        name = tid[:2]
        index = self._indexes.get(name)  # the usual case: the shard is indexed, whether open or not
        if (index is not None and index.has_text(tid)) or tid in self._texts:
            return ""
        if self._index(name).has_text(tid) or self._index(name, fresh=True).has_text(tid):
            return ""
        return None

    def _text_of_line(self, line: bytes, tid: str) -> str | None:
        try:
            data = json.loads(line)
        except ValueError:
            return None
        if not isinstance(data, dict):
            return None
        value = data.get("value")
        source = data.get("chunk_of")
        if value is None and isinstance(source, str) and _is_key(source):
            # The chunk of a sentence judgment: its recorded sentences joined by spaces.
            recorded = self._line(source)
            try:
                record = json.loads(recorded) if recorded is not None else None
            except ValueError:
                record = None
            if isinstance(record, dict):
                value = _sentence_chunk(record.get("inputs"), record.get("kind"))
        return value if isinstance(value, str) and text_id(value) == tid else None

    def read_json(
        self, key: str, *, replay: bool | None = None, resolve: bool = True
    ) -> dict[str, Any] | None:
        """The full record of a stored judgment, or ``None`` when it is missing or unreadable.

        Lines of the compact form come out whole (shared texts resolved, left-out fields restored),
        the same as lines of the full form; a line referring to a text the store does not hold is
        unreadable. ``resolve=False`` leaves the references to shared texts as they are, only
        checking that the store holds a line of each (a lookup needs the answer, not the texts).
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
        missing = expand_record(data, self.text if resolve else self._text_known, resolve=resolve)
        if missing is not None:
            self._warn_entry(
                key, f"it refers to the input text {missing!r}, which the store does not hold", replay
            )
            return None
        return data

    def get(self, request: JudgeRequest, *, replay: bool | None = None) -> JudgeAnswer | None:
        """The stored answer to ``request`` (``source="store"``), or ``None``.

        A damaged entry (unreadable, wrong JSON types, not fitting the request's schema) is ``None``
        with one warning per entry. ``replay`` words that warning: ``True`` when nothing will judge
        the request again, ``False`` when the judge will, ``None`` when unknown.
        """
        key = request.cache_key()
        data = self.read_json(key, replay=replay, resolve=False)
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
        self.write_records([record_of(request, answer) for request, answer in pairs])

    def write_records(self, records: Iterable[dict[str, Any]]) -> None:
        """Record judgment records (see :func:`record_of`) in the compact line form, each replacing
        what its key held, with any shared text the store does not hold yet."""
        records = list(records)
        if not records:
            return
        with self._locked():
            self._write_gitattributes()
            by_shard: dict[str, dict[str, bytes]] = {}
            texts: dict[str, dict[str, bytes]] = {}
            for record in records:
                encoded = encode_record(record)
                if any(self.text(tid) not in (None, value) for tid, value in encoded.texts.items()):
                    # Two texts with one id (a 1 in 2**64 chance): this record keeps its texts inline.
                    encoded = encode_record(record, share=False)
                key = _line_key(encoded.line)
                if key is None or b"\n" in encoded.line:
                    raise ValueError(f"not a judgment store record: {str(record)[:60]!r}")
                by_shard.setdefault(key[:2], {})[key] = encoded.line
                for tid, value in encoded.texts.items():
                    if tid not in self._texts and self.text(tid) is None:
                        texts.setdefault(tid[:2], {})[tid] = text_line(tid, value=value)
                if encoded.chunk is not None:
                    known = self._chunk_of.get(encoded.chunk)
                    self._chunk_of[encoded.chunk] = key if known is None else min(key, known)
            for name in sorted(by_shard.keys() | texts.keys()):
                self._write_shard(name, by_shard.get(name, {}), texts.get(name, {}))

    def _write_shard(self, name: str, new: dict[str, bytes], texts: dict[str, bytes]) -> None:
        index = self._index(name, fresh=True)
        current = {key: index.read(key) for key in new}
        changed = {key: line for key, line in new.items() if current[key] != line}
        texts = {tid: line for tid, line in texts.items() if not index.has_text(tid)}
        if not changed and not texts:
            return
        known = {key for key, line in current.items() if line is not None}
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        size = index.stat[2] if index.stat is not None else 0
        prefix = b"\n" if size and not _ends_with_newline(path) else b""  # a hand edit dropped it
        # Appended, also when it replaces a line: rewriting a large shard per judgment would cost
        # far more. Until flush() drops the old line, the loader counts the later judgment.
        lines = [*changed.items(), *texts.items()]
        _append(path, prefix + b"".join(line + b"\n" for _, line in lines))
        if index.fd is None:
            self._forget(name)  # a new shard: indexed from the file on next use
        else:
            offset = size + len(prefix)
            for key, line in changed.items():
                index.add(key, offset << 32 | len(line))
                offset += len(line) + 1
            for tid, line in texts.items():
                index.add_text(tid, offset << 32 | len(line))
                offset += len(line) + 1
            index.stat = _stat(path)
        replaced = self._written.setdefault(name, {})
        replaced.update((key, line) for key, line in changed.items() if key in known)
        added = self._new_texts.setdefault(name, bytearray())
        for tid in texts:
            added += binascii.unhexlify(tid)

    def flush(self) -> None:
        """Sort the shards this process appended to, one line per key (a no-op when there are none).

        A text line this process added that is the chunk of a sentence judgment it recorded is
        shortened to name that judgment (``chunk_of``): its recorded sentences hold the text already.
        """
        if not self._written:
            return
        with self._locked():
            for name, lines in sorted(self._written.items()):
                added = self._new_texts.get(name, b"")
                ids = (added[i : i + _TEXT_ID_BYTES].hex() for i in range(0, len(added), _TEXT_ID_BYTES))
                chunks = {tid: self._chunk_of[tid] for tid in ids if tid in self._chunk_of}
                self._rewrite(name, mine=lines, chunks=chunks)
            self._written.clear()
            self._new_texts.clear()

    def _chunk_of_judgment(self, key: str) -> str | None:
        """The chunk the recorded sentences of the sentence judgment ``key`` give back, if any."""
        line = self._line(key)
        try:
            record = json.loads(line) if line is not None else None
        except ValueError:
            return None
        if not isinstance(record, dict):
            return None
        return _sentence_chunk(record.get("inputs"), record.get("kind"))

    def _rewrite(
        self,
        name: str,
        drop: Iterable[str] = (),
        mine: dict[str, bytes] | None = None,
        *,
        chunks: dict[str, str] | None = None,
        texts: dict[str, bytes] | None = None,
        drop_texts: Iterable[str] = (),
    ) -> None:
        """Write shard ``name`` in its canonical form (sorted, one line per key), without ``drop``.

        ``mine`` are the lines this process recorded: they replace what their keys held, whatever
        the judgment times say (a refresh within the second of the first judgment is still newer).
        ``chunks`` names, by text id, sentence judgments whose sentences give a text back: its line
        becomes a ``chunk_of`` line when they do. ``texts`` replace the text lines of their ids;
        ``drop_texts`` are removed.
        """
        path = self.directory / f"{name}{SHARD_SUFFIX}"
        shard = self._read_shard(name)
        shard.entries.update(mine or {})
        for key in drop:
            shard.entries.pop(key, None)
        for tid, source in (chunks or {}).items():
            value = self.text(tid)
            if tid in shard.texts and value is not None and self._chunk_of_judgment(source) == value:
                shard.texts[tid] = [text_line(tid, chunk_of=source)]
        for tid, line in (texts or {}).items():
            shard.texts[tid] = [line]
        for tid in drop_texts:
            shard.texts.pop(tid, None)
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

        ``only`` limits the deletion to those keys. Shared texts stay (a branch may record judgments
        that refer to them, and a merge would not bring them back; see :meth:`drop_unused_texts`).
        A text line that names a removed sentence judgment as its source is written out in full.
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
            gone = set(removed)
            texts: dict[str, dict[str, bytes]] = {}
            for name, tid, source in self._text_sources():
                value = self.text(tid) if source in gone else None
                if value is not None:
                    texts.setdefault(name, {})[tid] = text_line(tid, value=value)
            for name in sorted(by_shard.keys() | texts.keys()):
                keys = by_shard.get(name, [])
                mine = {k: v for k, v in self._written.pop(name, {}).items() if k not in keys}
                self._rewrite(name, drop=keys, mine=mine, texts=texts.get(name))
            if self._has_legacy():
                for key in removed:
                    _remove_legacy(self.legacy_path(key))
                self._legacy = None
        return removed

    def drop_unused_texts(self, *, dry_run: bool = False) -> list[str]:
        """Delete the shared texts no stored judgment refers to; returns their ids, sorted.

        Safe on a store whose every branch is merged: a branch that recorded judgments referring
        to a text this deletes would merge without it (those judgments then count as not recorded).
        """
        with self._locked(shared=dry_run):
            used = self._referenced_texts()
            unused: dict[str, set[str]] = {}
            for path in self.shard_paths():
                name = path.name[:2]
                ids = set(self._index(name, fresh=True).text_ids()) - used
                if ids:
                    unused[name] = ids
            if not dry_run:
                for name, ids in sorted(unused.items()):
                    self._rewrite(name, mine=self._written.pop(name, None), drop_texts=ids)
        return sorted(tid for ids in unused.values() for tid in ids)

    def _text_sources(self) -> Iterator[tuple[str, str, str]]:
        """(shard, text id, judgment key) of every text line that names a sentence judgment."""
        for path in self.shard_paths():
            name = path.name[:2]
            index = self._index(name, fresh=True)
            for tid in index.text_ids():
                for line in index.read_texts(tid):
                    if b'"chunk_of"' not in line:
                        continue
                    with contextlib.suppress(ValueError, AttributeError):
                        source = json.loads(line).get("chunk_of")
                        if isinstance(source, str):
                            yield name, tid, source

    def _referenced_texts(self) -> set[str]:
        """Ids of the texts the stored judgments refer to."""
        used: set[str] = set()
        for key in self.keys():
            line = self._line(key)
            if line is None or b'"$text"' not in line:
                continue
            try:
                inputs = json.loads(line).get("inputs")
            except (ValueError, AttributeError):
                continue
            if not isinstance(inputs, dict):
                continue
            for value in inputs.values():
                for item in value if type(value) is list else [value]:
                    if type(item) is dict and len(item) == 1 and isinstance(item.get(_REF), str):
                        used.add(item[_REF])
        return used

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
            self._to_compact_form(result)
        result.shards = len(self.shard_paths())
        return result

    def _to_compact_form(self, result: MigrationResult) -> None:
        """Rewrite every judgment line of the full form in the compact form (the lock is held).

        A line is replaced only once its compact form, with the texts it refers to, was read back
        as the same record; any other line stays as it is (and is named in ``result.kept``).
        """
        names = [path.name[:2] for path in self.shard_paths()]
        shards = {name: self._read_shard(name) for name in names}
        texts: dict[str, str] = {}  # texts to add, by id
        chunk_of: dict[str, str] = {}
        changes: dict[str, dict[str, bytes]] = {}
        expected: dict[str, dict[str, Any]] = {}

        def lookup(tid: str) -> str | None:
            found = texts.get(tid)
            return found if found is not None else self.text(tid)

        for name, shard in shards.items():
            for key, line in shard.entries.items():
                try:
                    data = json.loads(line)
                except ValueError:
                    continue  # unreadable: reads as missing before and after
                if not isinstance(data, dict) or expand_record(data, self.text) is not None:
                    continue
                encoded = encode_record(data)
                if any(lookup(tid) not in (None, value) for tid, value in encoded.texts.items()):
                    encoded = encode_record(data, share=False)
                if encoded.line == line:
                    continue
                check = json.loads(encoded.line)
                pending = {**encoded.texts, **texts}
                if expand_record(check, lambda tid, p=pending: p.get(tid) or self.text(tid)) or check != data:
                    result.kept.append((self.path_for(key), f"key {key}: its compact form reads differently"))
                    continue
                for tid, value in encoded.texts.items():
                    if self.text(tid) is None:
                        texts[tid] = value
                if encoded.chunk is not None:
                    chunk_of[encoded.chunk] = min(key, chunk_of.get(encoded.chunk, key))
                changes.setdefault(name, {})[key] = encoded.line
                expected[key] = data
        new_texts: dict[str, dict[str, bytes]] = {}
        for tid, value in texts.items():
            # The chunk of a sentence judgment is named, not written again (its sentences hold it).
            source = chunk_of.get(tid)
            line = text_line(tid, chunk_of=source) if source else text_line(tid, value=value)
            new_texts.setdefault(tid[:2], {})[tid] = line
        for name in sorted(changes.keys() | new_texts.keys()):
            shard = shards.get(name) or _Shard()
            shard.entries.update(changes.get(name, {}))
            for tid, line in new_texts.get(name, {}).items():
                shard.texts[tid] = [line]
            atomic_write_bytes(self.directory / f"{name}{SHARD_SUFFIX}", shard.render())
            self._forget(name)
        self._texts.clear()
        for key, data in expected.items():
            if self.read_json(key) != data:  # pragma: no cover - checked before writing
                result.kept.append((self.path_for(key), f"key {key}: did not read back the same"))
        result.converted = len(expected)


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
    #: Judgment lines rewritten in the compact form.
    converted: int = 0
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
