"""A local OpenAI-compatible judge server for tests: the real ``openai`` client, real HTTP, no API key.

:class:`FakeJudgeServer` listens on 127.0.0.1 (a free port) in a daemon thread and answers
``POST /v1/chat/completions`` with proper ``chat.completion`` JSON, and offers OpenAI's batch API
(``/v1/files``, ``/v1/batches``) over the same answers. What it answers is scripted by a
``responder``; by default it derives a conforming answer from the request's JSON schema. Failures
(HTTP errors with headers, malformed bodies, hangs) and latency can be injected, and every request is
logged. Enable the ``fake_judge_server`` fixture in your own suite with::

    pytest_plugins = ["pytest_ragmetrics.testing"]

Only the standard library is used here, so this module is cheap to import.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import itertools
import json
import re
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import pytest

from .judge.limits import AZURE_OPENAI, OPENAI, STRICTEST, SchemaLimits, limit_problems

__all__ = [
    "AZURE_OPENAI",
    "OPENAI",
    "STRICTEST",
    "FakeJudgeServer",
    "RecordedRequest",
    "SchemaLimits",
    "conforming_value",
    "fake_judge_server",
]

#: ``responder(body)`` returns one choice's content: a dict (sent as JSON) or a raw string.
Responder = Callable[[dict[str, Any]], "dict[str, Any] | str"]

_SCHEMA_BLOCK = re.compile(r"```json\s*(\{.*?\})\s*```", re.DOTALL)


def conforming_value(schema: Mapping[str, Any]) -> Any:
    """A deterministic value that conforms to ``schema`` (the JSON-schema subset judges use).

    Booleans are ``true``, integer enums take their largest value, arrays of an enum hold every
    value, strings are ``"fake judge"``: the most "positive" verdict a judge could give.
    """
    if "enum" in schema:
        values = list(schema["enum"])
        if values and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
            return max(values)
        return values[0] if values else None
    kind = schema.get("type")
    if isinstance(kind, list):  # e.g. ["string", "null"]: take the first non-null type
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        props: Mapping[str, Any] = schema.get("properties", {})
        return {name: conforming_value(sub) for name, sub in props.items()}
    if kind == "array":
        items = schema.get("items") or {}
        if "enum" in items:
            return list(items["enum"])
        return [conforming_value(items)]
    if kind == "boolean":
        return True
    if kind == "integer":
        return 1
    if kind == "number":
        return 1.0
    if kind == "string":
        return "fake judge"
    return None


def _schema_from_body(body: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The JSON schema a request asks for: from ``response_format``, else from its last message."""
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        if isinstance(schema, Mapping):
            return schema
    # json_object / text modes carry the schema as instructions in a ```json block.
    messages = body.get("messages") or []
    for message in reversed(messages):
        content = message.get("content") if isinstance(message, Mapping) else None
        if isinstance(content, str):
            for match in reversed(_SCHEMA_BLOCK.findall(content)):
                try:
                    candidate = json.loads(match)
                except ValueError:
                    continue
                if isinstance(candidate, dict) and "type" in candidate:
                    return candidate
    return None


def default_responder(body: dict[str, Any]) -> dict[str, Any] | str:
    """Answer with :func:`conforming_value` of the request's schema (``{}`` when there is none)."""
    schema = _schema_from_body(body)
    if schema is None:
        return {}
    value = conforming_value(schema)
    return value if isinstance(value, dict) else json.dumps(value)


@dataclass
class RecordedRequest:
    """One request the server received. ``authorization`` is kept out of ``repr`` on purpose."""

    method: str
    path: str
    body: Any
    headers: dict[str, str]
    authorization: str | None = field(default=None, repr=False)
    received_at: float = 0.0


@dataclass
class _Action:
    kind: str  # "status" | "malformed" | "hang" | "reset" | "drip"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    seconds: float = 0.0


class FakeJudgeServer:
    """An OpenAI-compatible ``/v1/chat/completions`` endpoint on 127.0.0.1 for tests.

    Use as a context manager or call :meth:`start` / :meth:`stop`. ``base_url`` ends with ``/v1``;
    pass it and any dummy API key to the client. Scripting:

    * ``responder(body) -> dict | str`` gives each choice's content (a dict is sent as JSON, a
      string raw, e.g. prose or a malformed answer); it is called once per choice;
    * :meth:`fail_next` answers the next requests with an HTTP error (e.g. 429 with Retry-After);
    * :meth:`malformed_next` answers with a 200 and a raw body: not JSON by default, or any bytes
      given (e.g. valid JSON of the wrong shape);
    * :meth:`hang_next` holds the next requests for longer than the client's timeout;
    * :meth:`drip_next` sends the next answers a byte at a time, slowly: a server (or a proxy) that
      keeps sending, so that no wait between two reads is long, but takes far longer than the
      client's timeout to finish;
    * :meth:`reset_next` resets the connection of the next requests without an answer (TCP RST), as
      a crashed proxy or a load balancer dropping the connection does;
    * :meth:`delay` adds latency to every request (requests are served concurrently);
    * :meth:`close_gate` holds every request that arrives until :meth:`open_gate`, and
      :meth:`wait_for_requests` waits until some have arrived: a test knows a request reached the
      server (and its answer has not) without measuring time;
    * ``reported_model`` overrides the model named in responses;
    * ``usage`` replaces the token counts of every response: ``None`` sends none (as some
      OpenAI-compatible servers do), a mapping is sent as it is (``{"total_tokens": 10**30}``).

    The batch API (``/v1/files``: upload, retrieve, content; ``/v1/batches``: create, retrieve,
    cancel): a batch is ``validating`` when created, ``in_progress`` once looked at, and does its
    work when the test calls :meth:`run_batches`: each line is answered as a live request would be
    (the same responder, the same rejections, the same :meth:`fail_next` queue, a line at a time),
    the answers go to its output file in reverse order (a client must join on ``custom_id``), the
    failed lines to its error file with the error inside ``response.body``. ``run_batches(expire_after=N)``
    expires the batches after N lines: the rest come back as ``batch_expired`` errors, as OpenAI
    returns the part of an expired batch's work that was done; a cancelled batch's lines come back
    as ``batch_cancelled`` errors. ``batch_lines`` counts the lines answered.

    Emulating real servers:

    * ``schema_limits`` (e.g. :data:`AZURE_OPENAI`) rejects a ``json_schema`` request whose schema
      exceeds the limits as Azure OpenAI does: HTTP 400 with an ``invalid_request_error`` body naming
      the limit;
    * ``response_formats`` lists the response format types the server supports (``text`` is sending
      none); a request for another is rejected with ``unsupported_status``: 500 with a bare
      internal-server-error body as llama-cpp-python's server answers ``json_schema``, 400 with an
      OpenAI-style ``invalid_request_error``, or 422 with a FastAPI-style validation error;
    * ``limit_parameters`` lists the completion-limit parameters it takes (``max_tokens``,
      ``max_completion_tokens``); a request with another one is rejected as OpenAI rejects
      ``max_tokens`` for its reasoning models, naming the one to use instead;
    * ``max_completion_tokens`` is the largest limit it takes; a larger one is rejected as OpenAI does
      ("supports at most N completion tokens").

    Like a real server it honours the completion limit: an answer longer than the limit (counted as
    one token per four characters) is cut off there with ``finish_reason`` ``length``, so a responder
    that loops (returns a very long reason) is cut off as a real model would be.

    ``requests`` lists what was received (``body`` parsed as JSON when possible). ``port`` is the
    port to listen on, by default a free one: given the port of a server that stopped, a server
    started there is a judge that comes back after nothing listened.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        latency: float = 0.0,
        reported_model: str | None = None,
        schema_limits: SchemaLimits | None = None,
        response_formats: Collection[str] = ("json_schema", "json_object", "text"),
        unsupported_status: int = 400,
        limit_parameters: Collection[str] = ("max_tokens", "max_completion_tokens"),
        max_completion_tokens: int | None = None,
        port: int = 0,
    ) -> None:
        self.responder: Responder = responder or default_responder
        self._port = port
        self.latency = latency
        self.reported_model = reported_model
        #: Counted per request by default (see the class docstring).
        self.usage: Mapping[str, Any] | Literal["counted"] | None = "counted"
        self.schema_limits = schema_limits
        self.response_formats = frozenset(response_formats)
        if unsupported_status not in (400, 422, 500):
            raise ValueError(f"unsupported_status must be 400, 422 or 500, got {unsupported_status}")
        self.unsupported_status = unsupported_status
        self.limit_parameters = frozenset(limit_parameters)
        self.max_completion_tokens = max_completion_tokens
        self.requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._actions: deque[_Action] = deque()
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._ids = itertools.count(1)
        self._in_flight = 0
        self.max_in_flight = 0
        self._gate = threading.Event()
        self._gate.set()
        self._arrived = threading.Condition(self._lock)
        #: The batch API's files (with their bytes) and batches, by id.
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        self.batch_lines = 0

    # --- lifecycle -------------------------------------------------------------------------------

    def start(self) -> FakeJudgeServer:
        """Bind a free port on 127.0.0.1 and serve in a daemon thread."""
        if self._server is not None:
            return self
        self._stopping.clear()
        server = _Server(("127.0.0.1", self._port), _Handler)
        server.fake = self
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            daemon=True,
            name="FakeJudgeServer",
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; requests still sleeping (latency, hangs) are released at once."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        server.shutdown()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> FakeJudgeServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on (or will: the one given, before it starts)."""
        if self._server is None:
            if self._port:
                return self._port
            raise RuntimeError("FakeJudgeServer is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The OpenAI base URL of this server, e.g. ``http://127.0.0.1:54321/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # --- scripting -------------------------------------------------------------------------------

    def fail_next(
        self,
        status: int = 429,
        headers: Mapping[str, str] | None = None,
        body: Any = None,
        times: int = 1,
    ) -> None:
        """Answer the next ``times`` requests with HTTP ``status`` (an OpenAI-style error by default)."""
        if body is None:
            body = {"error": {"message": f"fake judge error {status}", "type": "fake_error", "code": None}}
        raw = (
            body
            if isinstance(body, bytes)
            else (body.encode() if isinstance(body, str) else json.dumps(body).encode())
        )
        with self._lock:
            for _ in range(times):
                self._actions.append(_Action("status", status, dict(headers or {}), raw))

    def malformed_next(self, body: bytes = b'{"id": "chatcmpl-broken", "choices": [', times: int = 1) -> None:
        """Answer the next ``times`` requests with status 200 and ``body`` as is (default: not JSON)."""
        with self._lock:
            for _ in range(times):
                self._actions.append(_Action("malformed", 200, {}, body))

    def hang_next(self, seconds: float = 5.0, times: int = 1) -> None:
        """Hold the next ``times`` requests for ``seconds`` before answering normally."""
        with self._lock:
            for _ in range(times):
                self._actions.append(_Action("hang", seconds=seconds))

    def drip_next(self, seconds: float = 0.5, times: int = 1) -> None:
        """Send the next ``times`` answers a byte at a time, ``seconds`` apart (after the headers)."""
        with self._lock:
            for _ in range(times):
                self._actions.append(_Action("drip", seconds=seconds))

    def reset_next(self, times: int = 1) -> None:
        """Reset the connection of the next ``times`` requests (TCP RST) instead of answering."""
        with self._lock:
            for _ in range(times):
                self._actions.append(_Action("reset"))

    def close_gate(self) -> None:
        """Hold every request that arrives from now on until :meth:`open_gate` (or :meth:`stop`)."""
        self._gate.clear()

    def open_gate(self) -> None:
        """Answer the requests being held, and those that arrive from now on."""
        self._gate.set()

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> bool:
        """Wait until the server has received ``count`` requests in all; False if ``timeout`` passed."""
        with self._arrived:
            return self._arrived.wait_for(lambda: len(self.requests) >= count, timeout)

    def delay(self, seconds: float) -> None:
        """Add ``seconds`` of latency to every following request."""
        self.latency = seconds

    @property
    def request_count(self) -> int:
        """How many requests the server has received (including failed ones)."""
        with self._lock:
            return len(self.requests)

    def run_batches(self, expire_after: int | None = None) -> None:
        """Do the work of every batch not finished: answer its lines (see the class docstring) and
        complete it, or, with ``expire_after``, answer that many lines of each and expire it."""
        with self._lock:
            waiting = [b for b in self.batches.values() if b["status"] in ("validating", "in_progress")]
        for batch in waiting:
            lines = self.files[batch["input_file_id"]]["content"].decode("utf-8").splitlines()
            outputs: list[dict[str, Any]] = []
            errors: list[dict[str, Any]] = []
            for number, line in enumerate(lines):
                if not line.strip():
                    continue
                item = json.loads(line)
                if expire_after is not None and number >= expire_after:
                    errors.append(_batch_error(item, "batch_expired", "This request could not be executed "
                                               "before the completion window expired."))  # fmt: skip
                    continue
                status, body = self._answer(item.get("body"))
                result = {
                    "id": f"batch_req_{next(self._ids)}",
                    "custom_id": item.get("custom_id"),
                    "response": {"status_code": status, "request_id": f"req_{next(self._ids)}", "body": body},
                    "error": None,
                }
                (outputs if status == 200 else errors).append(result)
            end = "expired" if expire_after is not None else "completed"
            with self._lock:
                self._finish_batch(batch, end, outputs, errors)

    def _answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """A batch line answered as the same live request would be: status and response body."""
        with self._lock:
            self.batch_lines += 1
            action = self._actions.popleft() if self._actions else None
        if action is not None and action.kind == "status":
            return action.status, json.loads(action.body or b"{}")
        if not isinstance(body, dict):
            return 400, {"error": {"message": "the line has no body", "type": "invalid_request_error"}}
        rejection = self._rejection(body)
        if rejection is not None:
            return rejection
        return 200, self._completion(body)

    def _finish_batch(
        self, batch: dict[str, Any], status: str, outputs: list[dict[str, Any]], errors: list[dict[str, Any]]
    ) -> None:
        """End ``batch`` in ``status`` with these result lines (the caller holds the lock)."""
        if outputs:
            text = "".join(json.dumps(o) + "\n" for o in reversed(outputs))
            batch["output_file_id"] = self._add_file(text.encode(), "output.jsonl", "batch_output")["id"]
        if errors:
            text = "".join(json.dumps(e) + "\n" for e in errors)
            batch["error_file_id"] = self._add_file(text.encode(), "errors.jsonl", "batch_output")["id"]
        batch["status"] = status
        batch[f"{status}_at"] = int(time.time())
        total = batch["request_counts"]["total"]
        batch["request_counts"] = {"total": total, "completed": len(outputs), "failed": len(errors)}

    def _add_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file: dict[str, Any] = {
            "id": f"file-{next(self._ids)}",
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
            "status": "processed",
        }
        self.files[file["id"]] = {**file, "content": content}
        return file

    def _batch_api(self, method: str, path: str, headers: Mapping[str, str], raw: bytes) -> tuple[int, Any]:
        """``/files`` and ``/batches``: the status and the JSON (or, for a file's content, the bytes)."""
        parts = path.split("/")
        where = parts.index("files") if "files" in parts else parts.index("batches")
        resource, rest = parts[where], parts[where + 1 :]
        with self._lock:
            if resource == "files" and method == "POST" and not rest:
                return self._upload(headers.get("Content-Type", ""), raw)
            if resource == "files" and rest:
                file = self.files.get(rest[0])
                if file is None:
                    return 404, _not_found(f"no file {rest[0]}")
                if rest[1:] == ["content"]:
                    return 200, file["content"]
                return 200, {k: v for k, v in file.items() if k != "content"}
            if resource == "batches" and method == "POST" and not rest:
                return self._create_batch(raw)
            batch = self.batches.get(rest[0]) if rest else None
            if batch is None:
                return 404, _not_found(f"no batch {rest[0] if rest else ''}")
            if method == "POST" and rest[1:] == ["cancel"]:
                if batch["status"] in ("validating", "in_progress"):
                    batch["status"] = "cancelling"
                return 200, dict(batch)
            if method == "GET" and not rest[1:]:
                if batch["status"] == "validating":
                    batch["status"] = "in_progress"
                    batch["in_progress_at"] = int(time.time())
                elif batch["status"] == "cancelling":
                    lines = self.files[batch["input_file_id"]]["content"].decode("utf-8").splitlines()
                    errors = [_batch_error(json.loads(line), "batch_cancelled", "The batch was cancelled.")
                              for line in lines if line.strip()]  # fmt: skip
                    self._finish_batch(batch, "cancelled", [], errors)
                return 200, dict(batch)
            return 404, _not_found(f"no route {method} {path}")

    def _upload(self, content_type: str, raw: bytes) -> tuple[int, Any]:
        import email.parser

        message = email.parser.BytesParser().parsebytes(
            b"Content-Type: " + content_type.encode("latin-1") + b"\r\n\r\n" + raw
        )
        fields: dict[str, Any] = {}
        filename = "upload.jsonl"
        for part in message.walk():
            if part.is_multipart():
                continue
            name = part.get_param("name", header="content-disposition")
            filename = part.get_filename() or filename
            fields[str(name)] = part.get_payload(decode=True)
        if "file" not in fields:
            return 400, {"error": {"message": "no file in the upload", "type": "invalid_request_error"}}
        purpose = (fields.get("purpose") or b"").decode()
        return 200, self._add_file(fields["file"], filename, purpose)

    def _create_batch(self, raw: bytes) -> tuple[int, Any]:
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        file = self.files.get(request.get("input_file_id", "")) if isinstance(request, dict) else None
        if file is None or not isinstance(request, dict):
            return 400, {"error": {"message": "input_file_id names no file", "type": "invalid_request_error"}}
        lines = [line for line in file["content"].decode("utf-8").splitlines() if line.strip()]
        batch = {
            "id": f"batch_{next(self._ids)}",
            "object": "batch",
            "endpoint": request.get("endpoint"),
            "errors": None,
            "input_file_id": file["id"],
            "completion_window": request.get("completion_window", "24h"),
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": request.get("metadata"),
        }
        self.batches[batch["id"]] = batch
        return 200, dict(batch)

    # --- serving (called from handler threads) ---------------------------------------------------

    def _record(self, request: RecordedRequest, take_action: bool = True) -> _Action | None:
        with self._lock:
            self.requests.append(request)
            self._arrived.notify_all()
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)
            return self._actions.popleft() if self._actions and take_action else None

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def _sleep(self, seconds: float) -> None:
        # An Event wait, not time.sleep, so stop() releases sleeping handler threads at once.
        if seconds > 0:
            self._stopping.wait(seconds)

    def _rejection(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]] | None:
        """The status and error body a real server of the emulated kind would answer, or None."""
        for name in _LIMIT_PARAMETERS:
            if name in body and name not in self.limit_parameters:
                instead = next(iter(sorted(self.limit_parameters)), None)
                message = f"Unsupported parameter: '{name}' is not supported with this model." + (
                    f" Use '{instead}' instead." if instead else ""
                )
                error = {"message": message, "type": "invalid_request_error", "param": name}
                return 400, {"error": {**error, "code": "unsupported_parameter"}}
            limit = body.get(name)
            most = self.max_completion_tokens
            if most is not None and isinstance(limit, int) and limit > most:
                message = (
                    f"{name} is too large: {limit}. This model supports at most {most} completion tokens, "
                    f"whereas you provided {limit}."
                )
                error = {"message": message, "type": "invalid_request_error", "param": name}
                return 400, {"error": {**error, "code": "invalid_value"}}
        response_format = body.get("response_format")
        kind = response_format.get("type") if isinstance(response_format, Mapping) else "text"
        if kind not in self.response_formats:
            return self.unsupported_status, _unsupported_body(self.unsupported_status, str(kind))
        if kind == "json_schema" and self.schema_limits is not None:
            spec = response_format.get("json_schema") if isinstance(response_format, Mapping) else None
            schema = spec.get("schema") if isinstance(spec, Mapping) else None
            problems = limit_problems(schema if isinstance(schema, Mapping) else {}, self.schema_limits)
            if problems:
                name = spec.get("name", "") if isinstance(spec, Mapping) else ""
                message = f"Invalid schema for response_format '{name}': " + "; ".join(problems) + "."
                error = {"message": message, "type": "invalid_request_error", "param": "response_format"}
                return 400, {"error": {**error, "code": None}}
        return None

    def _completion(self, body: dict[str, Any]) -> dict[str, Any]:
        n = body.get("n") or 1
        limit = next((body[name] for name in _LIMIT_PARAMETERS if isinstance(body.get(name), int)), None)
        choices = []
        completion_tokens = 0
        for index in range(int(n)):
            answer = self.responder(body)
            content = answer if isinstance(answer, str) else json.dumps(answer)
            finish_reason = "stop"
            if limit is not None and len(content) > _CHARS_PER_TOKEN * limit:
                content, finish_reason = content[: _CHARS_PER_TOKEN * limit], "length"
            completion_tokens += max(1, len(content) // _CHARS_PER_TOKEN)
            choices.append(
                {
                    "index": index,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish_reason,
                    "logprobs": None,
                }
            )
        prompt_chars = sum(
            len(str(m.get("content", ""))) for m in body.get("messages") or [] if isinstance(m, Mapping)
        )
        prompt_tokens = max(1, prompt_chars // _CHARS_PER_TOKEN)
        return {
            "id": f"chatcmpl-fake-{next(self._ids)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.reported_model or str(body.get("model", "fake-judge")),
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            }
            if self.usage == "counted"
            else self.usage,
            "system_fingerprint": "fake",
        }


#: The request parameters that carry a completion limit.
_LIMIT_PARAMETERS = ("max_tokens", "max_completion_tokens")
#: The fake server's tokenizer: one token per four characters, the usual rule of thumb for English.
_CHARS_PER_TOKEN = 4


def _not_found(message: str) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "code": "not_found"}}


def _batch_error(item: Mapping[str, Any], code: str, message: str) -> dict[str, Any]:
    """An error-file line for a batch line that was not run (expired, cancelled)."""
    return {
        "id": f"batch_req_{code}_{item.get('custom_id')}",
        "custom_id": item.get("custom_id"),
        "response": None,
        "error": {"code": code, "message": message},
    }


def _is_batch_api(path: str) -> bool:
    parts = path.split("?", 1)[0].rstrip("/").split("/")
    return "files" in parts or "batches" in parts


def _unsupported_body(status: int, kind: str) -> dict[str, Any]:
    """What servers without a response format answer, by status (the shapes real servers use)."""
    if status == 500:
        # llama-cpp-python's server: an unhandled error, its message says nothing useful.
        return {"error": {"message": "Internal Server Error", "type": "internal_server_error"}}
    if status == 422:
        # A FastAPI server validating the request body against its own model.
        return {
            "detail": [
                {
                    "type": "literal_error",
                    "loc": ["body", "response_format", "type"],
                    "msg": "Input should be 'text' or 'json_object'",
                    "input": kind,
                }
            ]
        }
    message = f"Invalid parameter: 'response_format' of type '{kind}' is not supported with this model."
    return {
        "error": {
            "message": message,
            "type": "invalid_request_error",
            "param": "response_format",
            "code": None,
        }
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The default backlog of 5 would make 32 simultaneous connections queue up and retry.
    request_queue_size = 256
    fake: FakeJudgeServer


class _Handler(BaseHTTPRequestHandler):
    # HTTP/1.1 keep-alive, like a real API: the client reuses its pooled connections.
    protocol_version = "HTTP/1.1"
    # Idle keep-alive connections are dropped after this, so handler threads do not linger.
    timeout = 30
    # Headers and body go out in separate writes; with Nagle's algorithm and the client's delayed
    # ACKs each response could stall ~40 ms, which would swamp the latency tests want to measure.
    disable_nagle_algorithm = True
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        # Silence the default stderr access log: it would clutter test output.
        pass

    #: Seconds between the bytes of the answer being sent (see FakeJudgeServer.drip_next); 0: at once.
    drip = 0.0

    def _send(self, status: int, payload: bytes, headers: Mapping[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if not self.drip:
            self.wfile.write(payload)
            return
        fake = self.server.fake
        for at in range(len(payload)):
            self.wfile.write(payload[at : at + 1])
            self.wfile.flush()
            fake._sleep(self.drip)
            if fake._stopping.is_set():
                self.close_connection = True
                return

    def _send_json(self, status: int, value: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send(status, json.dumps(value).encode(), headers)

    def _batch_api(self, method: str, raw: bytes) -> None:
        fake = self.server.fake
        path = self.path.split("?", 1)[0].rstrip("/")
        status, value = fake._batch_api(method, path, dict(self.headers.items()), raw)
        if isinstance(value, bytes):
            self._send(status, value)
        else:
            self._send_json(status, value)

    def do_GET(self) -> None:
        fake = self.server.fake
        fake._record(RecordedRequest("GET", self.path, None, self._headers(), received_at=time.time()))
        try:
            if _is_batch_api(self.path):
                self._batch_api("GET", b"")
            elif self.path.rstrip("/").endswith("/models"):
                self._send_json(200, {"object": "list", "data": [{"id": "fake-judge", "object": "model"}]})
            else:
                self._not_found()
        finally:
            fake._done()

    def do_POST(self) -> None:
        fake = self.server.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        batch_api = _is_batch_api(self.path)
        action = fake._record(
            RecordedRequest(
                "POST",
                self.path,
                body,
                self._headers(),
                # Azure's header first: older openai releases send its key as a bearer token as well.
                authorization=self.headers.get("api-key") or self.headers.get("Authorization"),
                received_at=time.time(),
            ),
            take_action=not batch_api,  # scripted failures are for the answers, live or batched
        )
        try:
            if batch_api:
                self._batch_api("POST", raw)
                return
            while not fake._gate.wait(0.05) and not fake._stopping.is_set():
                pass
            fake._sleep(fake.latency)
            if action is not None and action.kind == "hang":
                fake._sleep(action.seconds)
                if fake._stopping.is_set():
                    return
            # Per request: the handler serves every request of its (kept-alive) connection.
            self.drip = action.seconds if action is not None and action.kind == "drip" else 0.0
            if action is not None and action.kind == "reset":
                # Linger 0: closing sends RST, not FIN; the client sees "connection reset by peer".
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()
                return
            if action is not None and action.kind in ("status", "malformed"):
                self._send(action.status, action.body or b"", action.headers)
                return
            path = self.path.split("?", 1)[0].rstrip("/")
            # /v1/chat/completions, /chat/completions and Azure's
            # /openai/deployments/<model>/chat/completions are all the same endpoint here.
            if not path.endswith("/chat/completions"):
                self._not_found()
                return
            if not isinstance(body, dict):
                self._send_json(
                    400,
                    {"error": {"message": "request body is not a JSON object", "type": "invalid_request"}},
                )
                return
            rejection = fake._rejection(body)
            if rejection is not None:
                self._send_json(*rejection)
                return
            self._send_json(200, fake._completion(body))
        except (BrokenPipeError, ConnectionResetError):
            # The client gave up (timeout test): nothing left to answer.
            pass
        finally:
            fake._done()

    def _headers(self) -> dict[str, str]:
        # The API key must not end up in logs or reprs: keep it out of the general header dict.
        return {k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "api-key")}

    def _not_found(self) -> None:
        self._send_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})


@pytest.fixture
def fake_judge_server() -> Iterator[FakeJudgeServer]:
    """A started :class:`FakeJudgeServer`, stopped after the test."""
    with FakeJudgeServer() as server:
        yield server
