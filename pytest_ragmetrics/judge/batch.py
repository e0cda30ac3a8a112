"""The batch path into the judgment store, beside the live one: export requests, import results.

``pytest --rag-batch=PATH`` runs the suite without calling the judge. Every judgment that neither the
store nor the cache holds becomes one line of ``PATH`` in the OpenAI batch input format::

    {"custom_id": "<the judgment's cache key>", "method": "POST", "url": "/v1/chat/completions",
     "body": <exactly the body the live judge would send>}

Requests are written once per key, grouped by model (a provider takes one model per file) and split
at the providers' limits (:data:`MAX_REQUESTS` lines, :data:`MAX_BYTES` bytes per file): the first file
is ``PATH`` itself, the next ones ``<stem>.2<suffix>``, ``<stem>.3<suffix>`` and so on.

Beside ``PATH`` live two more files (an export with no request to write leaves neither, and the
files of an earlier export at ``PATH`` as they were: only an export that writes replaces them):

``PATH.requests.sqlite``  what was asked, by key: the batch line, and the request as the import
                          rebuilds it (kind, prompt version, model, inputs, schema). Every process of
                          the run (pytest-xdist workers) adds its requests to it (to
                          ``PATH.requests.sqlite.new`` while the run lasts); the process that
                          ends the run writes the batch files from it, so no two workers ever write
                          one file. An import looks answers up in it, so a results file is joined on
                          ``custom_id`` in any order without holding the requests in memory.
``PATH.state.json``       the files written, and for each the batch it was submitted as (its id,
                          state and counts) and whether its results were imported.

An import validates every answer exactly as a live answer is validated (the same function of the
judge), records the good ones into the store and the cache as a live answer is recorded (the same
key, the same store line), and lists the others: they are left for the next round or the live path.
A key recorded already is not recorded again, so an import can be run again or resumed after it
stopped. An answer for a key that was not asked for is refused, with its line named; a second line
for a key the file answered already is a duplicate, or, with a different answer, a conflict named by
its line (the first answer is the one recorded).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .._files import write_text_atomic
from ..errors import InvalidJudgeAnswer, JudgmentPending
from .base import JudgeAnswer, JudgeRequest

__all__ = [
    "MAX_BYTES",
    "MAX_REQUESTS",
    "BatchExport",
    "ExportSummary",
    "ImportOutcome",
    "import_results",
    "read_state",
    "rebuild_request",
    "request_record",
]

#: Requests per batch input file (OpenAI, Azure OpenAI).
MAX_REQUESTS = 50_000
#: Bytes per batch input file (OpenAI, Azure OpenAI: 200 MB).
MAX_BYTES = 200 * 1024 * 1024
#: The endpoint every line asks.
URL = "/v1/chat/completions"
#: The rule of thumb the token estimate uses: one token per four characters of English.
CHARS_PER_TOKEN = 4
#: Tokens a chat message costs beyond its text (role, separators).
MESSAGE_TOKENS = 4
#: Rows kept in memory before they go to the requests file.
_FLUSH_ROWS = 512
#: The state file's format.
STATE_FORMAT = 1


def requests_path(path: str | os.PathLike[str]) -> Path:
    """The file holding what the export asked (beside ``path``)."""
    return Path(f"{os.fspath(path)}.requests.sqlite")


def new_requests_path(path: str | os.PathLike[str]) -> Path:
    """Where a running export writes what it asks, until it ends and replaces :func:`requests_path`."""
    return Path(f"{os.fspath(path)}.requests.sqlite.new")


def state_path(path: str | os.PathLike[str]) -> Path:
    """The state file of the export at ``path``: its files and their batches."""
    return Path(f"{os.fspath(path)}.state.json")


def part_path(path: str | os.PathLike[str], number: int) -> Path:
    """The ``number``-th batch input file of the export at ``path`` (1: ``path`` itself)."""
    first = Path(path)
    if number == 1:
        return first
    return first.with_name(f"{first.stem}.{number}{first.suffix}")


# --- what was asked ------------------------------------------------------------------------------


def request_record(request: JudgeRequest) -> dict[str, Any]:
    """Everything :func:`rebuild_request` needs to make ``request`` again (its messages aside)."""
    record: dict[str, Any] = {
        "kind": request.kind,
        "prompt_version": request.prompt_version,
        "model": request.model,
        "schema_name": request.schema_name,
        "schema": request.schema,
        "inputs": request.inputs,
        "temperature": request.temperature,
        "seed": request.seed,
        "n": request.n,
        "label": request.label,
    }
    if request.key_inputs is not None:
        record["key_inputs"] = request.key_inputs
        record["derived"] = list(request.derived)
    return record


def rebuild_request(record: Mapping[str, Any]) -> JudgeRequest:
    """The request :func:`request_record` described: same key, schema and inputs (no messages: an
    answer is validated and recorded, never sent)."""
    request = JudgeRequest(
        kind=record["kind"],
        prompt_version=record["prompt_version"],
        model=record["model"],
        messages=(),
        schema_name=record["schema_name"],
        schema=record["schema"],
        inputs=record["inputs"],
        temperature=record["temperature"],
        seed=record["seed"],
        n=record["n"],
        label=record.get("label", ""),
        key_inputs=record.get("key_inputs"),
    )
    object.__setattr__(request, "derived", tuple(record.get("derived", ())))
    return request


def estimate_tokens(body: Mapping[str, Any]) -> tuple[int, int]:
    """Prompt tokens (estimated from the characters of the messages) and the completion tokens the
    body allows at most (its limit times its choices)."""
    chars = 0
    messages = body.get("messages") or ()
    for message in messages:
        content = message.get("content") if isinstance(message, Mapping) else None
        chars += len(content) if isinstance(content, str) else 0
    prompt = chars // CHARS_PER_TOKEN + MESSAGE_TOKENS * len(messages)
    limit = body.get("max_tokens", body.get("max_completion_tokens", 0))
    completion = (limit if isinstance(limit, int) else 0) * int(body.get("n", 1) or 1)
    return prompt, completion


def _connect(path: Path) -> sqlite3.Connection:
    # Autocommit statements inside explicit transactions; shared by the judging loop's thread and
    # the main thread under BatchExport's lock. Nothing reads a half-written export after a crash:
    # no fsync per transaction.
    db = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
    db.execute("PRAGMA synchronous = OFF")
    db.execute(
        "CREATE TABLE IF NOT EXISTS request (seq INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, "
        "model TEXT NOT NULL, line TEXT NOT NULL, record TEXT NOT NULL, "
        "prompt_tokens INTEGER NOT NULL, completion_tokens INTEGER NOT NULL)"
    )
    return db


@dataclass(frozen=True)
class ExportSummary:
    """What an export wrote: requests, files, and the tokens they would cost."""

    path: str
    requests: int
    files: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int

    def cost(self, price_input: float | None, price_output: float | None) -> float | None:
        """At most what the requests cost at these prices per million tokens (None: a price unknown)."""
        if price_input is None or price_output is None:
            return None
        return (self.prompt_tokens * price_input + self.completion_tokens * price_output) / 1_000_000


class BatchExport:
    """The requests one run writes instead of sending them (see the module's docstring).

    :meth:`create` starts an export at ``path`` (the process that ends the run: the only process, or
    the xdist controller, before its workers start); :meth:`open` joins it (a worker). Each process
    :meth:`add`\\ s requests and :meth:`close`\\ s; the creator then :meth:`finish`\\ es: it writes the
    batch files and the state file, and says what they hold.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self._rows: list[tuple[str, str, str, str, int, int]] = []
        #: Keys this process wrote: each is counted (and capped) once.
        self._keys: set[str] = set()
        #: The batch files of the earlier export at the path (its state file names them).
        self._earlier: list[Path] = []

    def __repr__(self) -> str:
        return f"BatchExport({str(self.path)!r})"

    @classmethod
    def create(cls, path: str | os.PathLike[str]) -> BatchExport:
        """A new export at ``path``. The files of an earlier one there are replaced when this export
        :meth:`finish`\\ es with a request to write, and left as they were when it has none.

        Raises :class:`ValueError` when the earlier export was submitted and its results are not
        imported yet: its state file holds the only record of its batches.
        """
        export = cls(path)
        state = read_state(path)
        if state is None and Path(path).exists():
            raise ValueError(
                f"{path} exists and is not a batch file written by an export (there is no "
                f"{state_path(path).name} beside it): it is left alone; choose another path"
            )
        if state is not None:
            waiting = [
                p["batch_id"] for p in state.get("parts", ()) if p.get("batch_id") and not p.get("imported")
            ]
            if waiting:
                raise ValueError(
                    f"the batch file {path} was submitted (batch {', '.join(waiting)}) and its results are "
                    f"not imported yet: run `python -m pytest_ragmetrics store batch fetch {path}` first, "
                    f"or write this export elsewhere (or delete {state_path(path)} to forget those batches)"
                )
            export._earlier = [Path(path).parent / part["file"] for part in state.get("parts", ())]
        # This run's requests go to a file of their own until it ends: the earlier export's requests
        # file is what its import joins results with, and stays until there is a new export to replace it.
        new_requests_path(path).unlink(missing_ok=True)
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        export._connection().close()
        export._db = None
        return export

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> BatchExport:
        """Join the export another process created at ``path``."""
        return cls(path)

    def _connection(self) -> sqlite3.Connection:
        if self._db is None:
            self._db = _connect(new_requests_path(self.path))
        return self._db

    def written(self, key: str) -> bool:
        """Whether this process wrote the request of ``key`` already."""
        return key in self._keys

    def add(self, request: JudgeRequest, body: Mapping[str, Any]) -> int | None:
        """Write ``request`` (whose live body is ``body``) to the export. Returns the tokens it would
        cost at most, or None when this process wrote its key already."""
        key = request.cache_key()
        with self._lock:
            if key in self._keys:
                return None
            self._keys.add(key)
        line = json.dumps(
            {"custom_id": key, "method": "POST", "url": URL, "body": body},
            ensure_ascii=False,
            separators=(",", ":"),
        )
        record = json.dumps(request_record(request), ensure_ascii=False, separators=(",", ":"))
        prompt, completion = estimate_tokens(body)
        with self._lock:
            self._rows.append((key, str(body.get("model", request.model)), line, record, prompt, completion))
            if len(self._rows) >= _FLUSH_ROWS:
                self._flush_locked()
        return prompt + completion

    def pending(self, count: int) -> JudgmentPending:
        """The error a judgment whose requests went to this export raises."""
        return JudgmentPending(count, str(self.path))

    def flush(self) -> None:
        """Write the requests kept in memory to the requests file."""
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        rows, self._rows = self._rows, []
        if not rows:
            return
        db = self._connection()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.executemany(
                "INSERT OR IGNORE INTO request (key, model, line, record, prompt_tokens, completion_tokens) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                rows,
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Write what is kept in memory and close the requests file (this process is done)."""
        with self._lock:
            self._flush_locked()
            db, self._db = self._db, None
        if db is not None:
            db.close()

    def finish(self, max_requests: int = MAX_REQUESTS, max_bytes: int = MAX_BYTES) -> ExportSummary:
        """Write the batch files from the requests every process added, split by model and at the
        limits, and the state file; streamed, one line at a time."""
        self.close()
        asked = new_requests_path(self.path)
        db = _connect(asked)
        parts: list[dict[str, Any]] = []
        handle: Any = None
        try:
            total, prompt, completion = db.execute(
                "SELECT count(*), coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0) "
                "FROM request"
            ).fetchone()
            if total:
                # Only now is there an export to replace the earlier one: its files go.
                for stale in (*self._earlier, requests_path(self.path), state_path(self.path), self.path):
                    with contextlib.suppress(OSError):
                        stale.unlink()
            for model, line in db.execute("SELECT model, line FROM request ORDER BY model, seq"):
                data = (line + "\n").encode("utf-8")
                part = parts[-1] if parts else None
                if (
                    part is None
                    or part["model"] != model
                    or part["requests"] >= max_requests
                    or part["bytes"] + len(data) > max_bytes
                ):
                    if handle is not None:
                        handle.close()
                    part = {"file": part_path(self.path, len(parts) + 1).name, "model": model}
                    part.update(requests=0, bytes=0)
                    parts.append(part)
                    handle = open(self.path.parent / part["file"], "wb")  # noqa: SIM115 - one per part
                handle.write(data)
                part["requests"] += 1
                part["bytes"] += len(data)
        finally:
            if handle is not None:
                handle.close()
            db.close()
        if not total:
            # Nothing to judge: this run's requests file goes and no state file is written, so the
            # run leaves no file of its own, and an earlier export at PATH as it was.
            asked.unlink(missing_ok=True)
            return ExportSummary(str(self.path), 0, (), 0, 0)
        os.replace(asked, requests_path(self.path))
        state = {
            "format": STATE_FORMAT,
            "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "requests": total,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "parts": parts,
        }
        write_state(self.path, state)
        return ExportSummary(str(self.path), total, tuple(p["file"] for p in parts), prompt, completion)


# --- the state file ------------------------------------------------------------------------------


def read_state(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The state of the export at ``path``, or None when it has none. :class:`ValueError` when the
    state file cannot be read."""
    where = state_path(path)
    try:
        text = where.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ValueError(f"cannot read {where}: {exc}") from None
    try:
        state = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{where} is not JSON ({exc})") from None
    if not isinstance(state, dict) or not isinstance(state.get("parts"), list):
        raise ValueError(f"{where} is not the state file of a batch export (it has no 'parts' list)")
    problem = _state_problem(path, state)
    if problem is not None:
        raise ValueError(f"{where} is not the state file of a batch export: {problem}; it is left alone")
    return state


def _state_problem(path: str | os.PathLike[str], state: Mapping[str, Any]) -> str | None:
    """What in ``state`` no export at ``path`` writes, or None. A part names one of the export's own
    files: a new export deletes them, so a state file naming another (``../notes.md``) must not
    get that far."""
    first = Path(path)
    own = re.compile(rf"{re.escape(first.stem)}\.[1-9][0-9]*{re.escape(first.suffix)}")
    for name in ("prompt_tokens", "completion_tokens"):
        if not _count(state.get(name, 0)):
            return f"its {name} is {json.dumps(state.get(name))[:40]}, not a count"
    for number, part in enumerate(state["parts"], start=1):
        if not isinstance(part, dict):
            return f"part {number} is not an object"
        file = part.get("file")
        if not isinstance(file, str) or (file != first.name and own.fullmatch(file) is None):
            return f"part {number} names the file {json.dumps(file)[:80]}, not one of the export's files"
        if not _count(part.get("requests", 0)) or not _count(part.get("bytes", 0)):
            return f"part {number} does not count its requests and bytes"
        for name in ("model", "batch_id", "input_file_id", "output_file_id", "error_file_id", "status"):
            if part.get(name) is not None and not isinstance(part[name], str):
                return f"part {number}'s {name} is {json.dumps(part[name])[:40]}, not text"
        if part.get("counts") is not None and not isinstance(part["counts"], dict):
            return f"part {number}'s counts are not an object"
    return None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def write_state(path: str | os.PathLike[str], state: Mapping[str, Any]) -> None:
    write_text_atomic(state_path(path), json.dumps(state, indent=1, sort_keys=True) + "\n")


# --- importing results ---------------------------------------------------------------------------


@dataclass
class ImportOutcome:
    """What an import did: answers recorded, found recorded already, failed (left for the next
    round or the live path), refused (not asked for), and the lines answering a key an earlier line
    of the file answered: duplicates (the same answer, or a key recorded already) and conflicts (a
    different answer: the first one is recorded)."""

    source: str
    recorded: int = 0
    already: int = 0
    #: ``(file, line number, custom_id, label, why)`` of each line whose answer was not recorded.
    failed: list[tuple[str, int, str, str, str]] = field(default_factory=list)
    #: ``(file, line number, custom_id)`` of each answer for a key the export did not ask for.
    refused: list[tuple[str, int, str]] = field(default_factory=list)
    duplicates: int = 0
    #: ``(file, line number, custom_id, label, the line whose answer is recorded)`` of each line that
    #: answers a key recorded from an earlier line differently.
    conflicts: list[tuple[str, int, str, str, int]] = field(default_factory=list)

    def merge(self, other: ImportOutcome) -> None:
        self.recorded += other.recorded
        self.already += other.already
        self.failed += other.failed
        self.refused += other.refused
        self.duplicates += other.duplicates
        self.conflicts += other.conflicts

    def repeated(self) -> str:
        """``", 2 duplicate line(s), 1 conflicting"`` for the counts that are not zero, else ``""``."""
        text = f", {self.duplicates} duplicate line(s)" if self.duplicates else ""
        return text + (f", {len(self.conflicts)} conflicting" if self.conflicts else "")


class UnreadableRecord(Exception):
    """The export's record of one request cannot make the request again (a damaged requests file)."""


class AskedRequests:
    """The requests an export asked, by key (its requests file), read one at a time."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        where = requests_path(path)
        if not where.is_file():
            raise ValueError(
                f"{where} does not exist: the answers of a batch are imported with the export that asked "
                "for them (pytest --rag-batch=PATH writes it beside PATH)"
            )
        self._where = where
        self._db = sqlite3.connect(f"{where.resolve().as_uri()}?mode=ro", uri=True, check_same_thread=False)

    def get(self, key: str) -> JudgeRequest | None:
        """The request asked under ``key``, or None when the export asked none. :class:`ValueError`
        when the requests file cannot be read at all (not a database, cut short), and
        :class:`UnreadableRecord` when its record of this one request cannot (damaged)."""
        try:
            row = self._db.execute("SELECT record FROM request WHERE key = ?", (key,)).fetchone()
        except sqlite3.Error as exc:
            raise ValueError(
                f"cannot read {self._where}, the record of what the export asked ({exc}): write the export "
                "again (pytest --rag-batch=PATH)"
            ) from None
        if row is None:
            return None
        try:
            return rebuild_request(json.loads(row[0]))
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            why = f"{type(exc).__name__}: {exc}"
            raise UnreadableRecord(
                f"the export's record of this request in {self._where.name} is damaged ({why})"
            ) from None

    def close(self) -> None:
        self._db.close()


def _error_text(error: Any) -> str:
    """A result line's error in a few words: OpenAI's ``{"code", "message"}``, vLLM's string; with
    credentials masked and half an escaped pair (``\\ud800``) replaced, as a live error is quoted."""
    from .server_errors import quoted_text

    if isinstance(error, Mapping):
        message = error.get("message") or error.get("msg") or ""
        code = error.get("code") or error.get("type") or ""
        text = f"{code}: {message}" if code and message else str(message or code or json.dumps(error))
    else:
        text = str(error)
    text = quoted_text(text)
    return text if len(text) <= 300 else text[:299] + "…"


def _judged_at(body: Mapping[str, Any]) -> str:
    created = body.get("created")
    if isinstance(created, int) and not isinstance(created, bool) and created > 0:
        try:
            return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(created))
        except (OverflowError, OSError, ValueError):  # a time past what the platform counts
            return ""
    return ""


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, raw


def import_results(
    path: str | os.PathLike[str],
    asked: AskedRequests,
    *,
    read: Callable[[JudgeRequest, Any, str], JudgeAnswer],
    recorded: Callable[[JudgeRequest], bool],
    record: Callable[[Sequence[tuple[JudgeRequest, JudgeAnswer]]], None],
    chunk: int = 500,
) -> ImportOutcome:
    """Import one results file (OpenAI batch output or error file, ``vllm run-batch`` output), streamed.

    ``read(request, body, judged_at)`` validates a chat completion body into an answer (the live
    judge's validation) or raises :class:`InvalidJudgeAnswer`; ``recorded(request)`` says whether
    the store or the cache holds its judgment already; ``record(pairs)`` records answers, ``chunk``
    at a time, so an import stopped half-way keeps what it recorded. A key answered by several lines
    is recorded from the first usable one; the others are counted as duplicates, or listed as
    conflicts when their answer differs.
    """
    where = Path(path)
    outcome = ImportOutcome(str(where))
    # Each key a line of the file answered usably, or found recorded already: its first line, and a
    # digest of the answer this import records for it (None: recorded before).
    seen: dict[str, tuple[int, bytes | None]] = {}
    batch: list[tuple[JudgeRequest, JudgeAnswer]] = []
    lines = 0
    for number, raw in _lines(where):
        lines += 1
        try:
            data = json.loads(raw)
        except RecursionError:
            outcome.failed.append((outcome.source, number, "", "", "the line is nested too deeply to read"))
            continue
        except ValueError as exc:
            outcome.failed.append((outcome.source, number, "", "", f"the line is not JSON ({exc})"))
            continue
        custom_id = data.get("custom_id") if isinstance(data, dict) else None
        if not isinstance(custom_id, str) or not custom_id:
            if not isinstance(data, dict):
                why = "the line is not a JSON object"
            elif custom_id is None:
                why = "the line has no custom_id"
            else:
                why = f"the line's custom_id is {json.dumps(custom_id)[:40]}, not the key of a request"
            outcome.failed.append((outcome.source, number, "", "", why))
            continue
        try:
            request = asked.get(custom_id)
        except UnreadableRecord as exc:
            outcome.failed.append((outcome.source, number, custom_id, "?", str(exc)))
            continue
        if request is None or request.cache_key() != custom_id:
            outcome.refused.append((outcome.source, number, custom_id))
            continue
        label = request.label or request.kind
        first = seen.get(custom_id)
        if first is None and recorded(request):
            seen[custom_id] = (number, None)
            outcome.already += 1
            continue
        answer, why = _answer_of(data, request, read)
        if first is not None:
            first_line, kept = first
            if kept is None or (answer is not None and _digest(answer) == kept):
                outcome.duplicates += 1
            else:
                outcome.conflicts.append((outcome.source, number, custom_id, label, first_line))
            continue
        if answer is None:
            outcome.failed.append((outcome.source, number, custom_id, label, why))
            continue
        seen[custom_id] = (number, _digest(answer))
        batch.append((request, answer))
        if len(batch) >= chunk:
            record(batch)
            outcome.recorded += len(batch)
            batch = []
    if batch:
        record(batch)
        outcome.recorded += len(batch)
    if not lines:
        raise ValueError(f"the results file {where} is empty: it holds no answer to import")
    return outcome


def _answer_of(
    data: Mapping[str, Any], request: JudgeRequest, read: Callable[[JudgeRequest, Any, str], JudgeAnswer]
) -> tuple[JudgeAnswer | None, str]:
    """The answer a result line holds, validated by ``read``; else None and why not."""
    response = data.get("response")
    error = data.get("error")
    body = response.get("body") if isinstance(response, Mapping) else None
    status = response.get("status_code") if isinstance(response, Mapping) else None
    if error is not None:  # vLLM's failures, and the lines of an error file
        return None, _error_text(error)
    if not isinstance(body, Mapping):
        return None, "the line has no response body"
    if body.get("error") is not None:  # OpenAI's failed request: the error inside the body
        return None, f"HTTP {status}: {_error_text(body['error'])}"
    if status != 200:
        return None, f"the response's status_code is {json.dumps(status)}, not 200"
    try:
        return read(request, body, _judged_at(body)), ""
    except InvalidJudgeAnswer as exc:
        return None, str(exc)


def _digest(answer: JudgeAnswer) -> bytes:
    """What an answer decided, in a few bytes: two lines for one key are compared by it."""
    text = json.dumps([dict(choice) for choice in answer.choices], sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


# --- a provider's batch API ----------------------------------------------------------------------

#: Batch states after which nothing more happens: what was done can be fetched.
FINAL_STATES = ("completed", "expired", "cancelled", "failed")


def _no_export(path: str | os.PathLike[str]) -> ValueError:
    return ValueError(
        f"no batch export at {path} (no {state_path(path).name} beside it): write one with "
        f"pytest --rag-batch={path}"
    )


def _counts(batch: Any) -> dict[str, int] | None:
    counts = getattr(batch, "request_counts", None)
    if counts is None:
        return None
    return {name: int(getattr(counts, name, 0) or 0) for name in ("total", "completed", "failed")}


def _take(part: dict[str, Any], batch: Any) -> None:
    """Keep what a batch object says in the export's state."""
    part["status"] = str(batch.status)
    part["counts"] = _counts(batch)
    part["output_file_id"] = getattr(batch, "output_file_id", None)
    part["error_file_id"] = getattr(batch, "error_file_id", None)


def submit(path: str | os.PathLike[str], client: Any, *, endpoint: str = URL) -> list[str]:
    """Upload each batch file of the export at ``path`` not submitted yet and create its batch
    (24-hour window) through ``client`` (an ``openai`` client); the ids go to the state file as
    soon as each exists. Returns what was done, one line each."""
    state = read_state(path)
    if state is None:
        raise _no_export(path)
    lines = []
    for part in state["parts"]:
        if part.get("batch_id"):
            lines.append(f"{part['file']}: already submitted as batch {part['batch_id']}")
            continue
        if not part.get("input_file_id"):
            with open(Path(path).parent / part["file"], "rb") as handle:
                uploaded = client.files.create(file=handle, purpose="batch")
            part["input_file_id"] = uploaded.id
            write_state(path, state)
        batch = client.batches.create(
            input_file_id=part["input_file_id"],
            endpoint=endpoint,
            completion_window="24h",
            metadata={"created_by": "pytest-ragmetrics", "file": str(part["file"])[:512]},
        )
        part["batch_id"] = batch.id
        part["imported"] = False
        _take(part, batch)
        write_state(path, state)
        lines.append(
            f"{part['file']}: {part['requests']} request(s) submitted as batch {batch.id} ({batch.status})"
        )
    return lines


def _describe(part: Mapping[str, Any]) -> str:
    counts = part.get("counts") or {}
    done = (
        f", {counts.get('completed', 0)} of {counts.get('total', 0)} done, {counts.get('failed', 0)} failed"
        if counts
        else ""
    )
    imported = ", imported" if part.get("imported") else ""
    return f"{part['file']}: batch {part['batch_id']} {part.get('status')}{done}{imported}"


def status(path: str | os.PathLike[str], client: Any) -> list[str]:
    """Look up each submitted batch of the export at ``path``: its state and counts (kept in the
    state file). Returns one line per batch file."""
    state = read_state(path)
    if state is None:
        raise _no_export(path)
    lines = []
    for part in state["parts"]:
        if not part.get("batch_id"):
            lines.append(f"{part['file']}: not submitted")
            continue
        if not part.get("imported"):
            _take(part, client.batches.retrieve(part["batch_id"]))
        lines.append(_describe(part))
    write_state(path, state)
    return lines


def fetch(
    path: str | os.PathLike[str], client: Any, importer: Callable[[Path], ImportOutcome]
) -> tuple[list[str], ImportOutcome, int]:
    """Download the results of each batch of the export at ``path`` that has finished (completed,
    or expired, cancelled or failed with part of its work done), beside ``path``, and import them
    with ``importer``: the output file and the error file. Returns the lines to show, what the
    imports did, and how many batches are not finished yet."""
    state = read_state(path)
    if state is None:
        raise _no_export(path)
    total = ImportOutcome(str(path))
    lines: list[str] = []
    waiting = 0
    base = Path(path)
    for part in state["parts"]:
        if not part.get("batch_id"):
            continue
        # A batch imported before is imported again from the results downloaded then: it records
        # nothing twice, and its failed lines are counted again rather than forgotten.
        fresh = not part.get("imported")
        batch = None
        if fresh:
            batch = client.batches.retrieve(part["batch_id"])
            _take(part, batch)
            if part["status"] not in FINAL_STATES:
                waiting += 1
                lines.append(_describe(part) + ": not finished yet")
                continue
        for kind in ("output", "error"):
            file_id = part.get(f"{kind}_file_id")
            if not file_id:
                continue
            target = base.with_name(f"{base.stem}.{part['batch_id']}.{kind}.jsonl")
            if fresh or not target.is_file():
                with client.files.with_streaming_response.content(file_id) as response:
                    response.stream_to_file(target)
            outcome = importer(target)
            total.merge(outcome)
            lines.append(
                f"{part['file']}: {target.name}: {outcome.recorded} recorded, {outcome.already} recorded "
                f"already, {len(outcome.failed)} failed, {len(outcome.refused)} refused{outcome.repeated()}"
            )
        for error in getattr(getattr(batch, "errors", None), "data", None) or ():
            what = _error_text(error.model_dump() if hasattr(error, "model_dump") else error)
            lines.append(f"{part['file']}: batch {part['batch_id']} {part['status']}: {what}")
        if fresh:
            part["imported"] = True
            write_state(path, state)
        lines.append(_describe(part))
    write_state(path, state)
    return lines, total, waiting
