"""What an OpenAI-compatible server's failures say, and what they mean for the judge: its own words
quoted (credentials masked, an HTML error page by its title, shortened); a 200 body that is no chat
completion (not JSON, or JSON of another shape), which is retried as a flaky server's; how long it asks
to wait; and a rejection no retry gets past (the key, the model, the quota, a response format or a
parameter the server does not take), told with what to check or set.

The judge (:mod:`~pytest_ragmetrics.judge.openai_judge`) decides from these whether to retry, fall
back to another response format or give up; nothing here sends anything.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Mapping
from typing import Any

from ..redact import one_line, redact
from .base import HowToSet
from .completions import valid_text

#: How much of a server's own error message to quote.
MAX_SERVER_MESSAGE = 500


def server_message(exc: Any) -> str:
    """The server's own words from an SDK status error: its ``error.message``, else its body.

    Quoted in what the user sees, credentials scrubbed (a server may echo the request's headers),
    shortened to :data:`MAX_SERVER_MESSAGE` characters.
    """
    return quote_server(getattr(exc, "body", None), str(getattr(exc, "message", "") or exc))


def quote_server(body: Any, fallback: str = "") -> str:
    """The server's own words in an error ``body``: its ``message``, else the body itself, else
    ``fallback``; credentials scrubbed, shortened to :data:`MAX_SERVER_MESSAGE` characters."""
    message: Any = None
    body = _error_object(body)
    if isinstance(body, Mapping):
        message = body.get("message")
        if not isinstance(message, str) or not message.strip():
            message = json.dumps(body, ensure_ascii=False, default=str)
    elif isinstance(body, str) and body.strip():
        message = _html_title(body) or body
    if not isinstance(message, str) or not message.strip():
        message = fallback
    message = quoted_text(message)
    if len(message) > MAX_SERVER_MESSAGE:
        message = message[: MAX_SERVER_MESSAGE - 1] + "…"
    return str(message)


def _error_object(body: Any) -> Any:
    """The error object of an error ``body`` as the SDK keeps it: the object itself (the SDK takes
    the ``"error"`` of ``{"error": {...}}``), or, from Gemini's OpenAI-compatible endpoint, which
    sends its error in a list, ``[{"error": {...}}]``, which the SDK leaves whole, the first one's."""
    if isinstance(body, list) and body and isinstance(body[0], Mapping):
        first = body[0]
        return first["error"] if isinstance(first.get("error"), Mapping) else first
    return body


def quoted_text(text: str) -> str:
    """``text`` (a server's words) as it is quoted to a user: credentials masked, each run of white
    space one space, half an escaped pair (``\\ud800``), which could be neither printed nor
    reported, replaced by U+FFFD, and the characters a terminal acts on (ESC, BEL) escaped as
    :func:`~pytest_ragmetrics.redact.one_line` escapes them."""
    return one_line(valid_text(redact(text)))


_HTML_HEADINGS = (
    re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL),
    re.compile(r"<h1[^>]*>(.*?)</h1>", re.IGNORECASE | re.DOTALL),
)
_HTML_TAG = re.compile(r"<[^>]*>")


def _html_title(text: str) -> str | None:
    """What an HTML page (a proxy's or a CDN's error page) says in its title, else its first
    heading, or None: its first characters would be markup, styles and scripts."""
    if not text.lstrip().startswith("<"):
        return None
    for heading in _HTML_HEADINGS:
        found = heading.search(text)
        if found is not None:
            import html  # its entity table is loaded for an error page only

            words = " ".join(html.unescape(_HTML_TAG.sub(" ", found.group(1))).split())
            if words:
                return f"an HTML page: {words!r}"
    return None


def completion_shape_problem(body: Any) -> str | None:
    """Why ``body`` (a chat completion's JSON as the server sent it, decoded) is not a usable chat
    completion, or None.

    A server or proxy answering a 200 with JSON of the wrong shape (``"choices": ["hi"]``,
    ``"model": 5``) is a flaky server, not an invalid judgment. A non-string ``content`` is not
    checked here: that is an invalid answer, re-asked, not a broken response.
    """
    if not isinstance(body, dict):
        return "not a chat completion"
    choices = body.get("choices")
    if not isinstance(choices, list):
        # A proxy passing an upstream failure on with a 200: say what it said. OpenAI's errors are
        # {"error": {...}}, vLLM's {"object": "error", "message": ...}.
        if body.get("error"):
            return f"an error: {quote_server(body['error'], str(body['error']))}"
        if body.get("object") == "error":
            return f"an error: {quote_server(body)}"
        return "'choices' is not an array"
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict):
            return f"choice {i} is not an object"
        message = choice.get("message")
        if message is not None and not isinstance(message, dict):
            return f"the message of choice {i} is not an object"
    # 'usage' is not looked at: the judgment was paid for whatever the server says it cost, and a
    # count that is not a token count (text, negative, a fraction) is read as unknown, as a missing
    # one is (see completions.reported_usage), rather than the answer dropped and asked for again.
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        return "'model' is not a string"
    return None


#: How much of a body that is not JSON to show, from where reading it failed: enough to tell an HTML
#: page, an event stream or what follows the JSON.
SHOWN_BODY = 80


def not_json(raw: bytes, exc: ValueError) -> str:
    """What is wrong with a 200 body that did not decode, and what it holds where reading failed: an
    empty body, a proxy's HTML page, an event stream answering a request for none, JSON with more
    after it."""
    if not raw.strip():
        return "empty"
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text: {exc.reason} at byte {exc.start}"
    assert isinstance(exc, json.JSONDecodeError)
    page = _html_title(exc.doc) if exc.pos == 0 else None
    if page is not None:  # a proxy's sign-in or error page
        return f"not JSON: {quoted_text(page)}"
    there = exc.doc[exc.pos : exc.pos + SHOWN_BODY]  # read with surrogatepass
    if not there.strip():  # cut short: a proxy's buffer, a Content-Length too small
        return f"not JSON: {exc.msg} (character {exc.pos}): the body ends there"
    shown = quoted_text(there) + ("…" if len(exc.doc) > exc.pos + SHOWN_BODY else "")
    return f"not JSON: {exc.msg} (character {exc.pos}): {shown!r}"


#: Google's RetryInfo delay, as JSON writes a protobuf Duration: seconds with up to nine decimals, "s".
_RETRY_DELAY = re.compile(r"\s*(\d{1,12}(?:\.\d{1,9})?)s\s*")


def retry_after_seconds(
    headers: Mapping[str, str] | None, now: float | None = None, body: Any = None
) -> float | None:
    """Seconds to wait as requested by ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date),
    else by the error ``body``'s ``google.rpc.RetryInfo`` detail (Gemini's OpenAI-compatible endpoint
    says how long to wait there only: ``{"@type": "...google.rpc.RetryInfo", "retryDelay": "12s"}``)."""
    from_headers = _retry_after_header(headers, now)
    return from_headers if from_headers is not None else _retry_info(body)


def _retry_info(body: Any) -> float | None:
    """The ``retryDelay`` of the ``google.rpc.RetryInfo`` among an error body's ``details``, or None."""
    error = _error_object(body)
    details = error.get("details") if isinstance(error, Mapping) else None
    if not isinstance(details, list):
        return None
    for detail in details:
        if isinstance(detail, Mapping) and str(detail.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = detail.get("retryDelay")
            found = _RETRY_DELAY.fullmatch(delay) if isinstance(delay, str) else None
            if found is not None:
                return float(found[1])
    return None


def _retry_after_header(headers: Mapping[str, str] | None, now: float | None) -> float | None:
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    value = lowered.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = lowered.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


#: OpenAI's words for an account without quota, which a proxy passing the error on keeps (a LiteLLM
#: proxy sends them with its own type and code: "throttling_error", "429").
_NO_QUOTA = re.compile(r"exceeded your current quota", re.IGNORECASE)
#: Gemini says the same of its per-minute limits: a rate limit, in its status, its link or its wait
#: (not the name of LiteLLM's RateLimitError, which it gives every 429).
_RATE_LIMITED = re.compile(
    r"RESOURCE_EXHAUSTED|rate[ _-]limit|retry in|retry after|retryDelay", re.IGNORECASE
)


def quota_used_up(status: int, exc: Any) -> bool:
    """Is this OpenAI's 429 for an account without quota (``insufficient_quota``, or its words with
    nothing of a rate limit or a wait)? Not a rate limit: no retry, nor any later request of the run,
    gets past it until someone pays."""
    if status != 429:
        return False
    if "insufficient_quota" in (getattr(exc, "code", None), getattr(exc, "type", None)):
        return True
    said = str(getattr(exc, "message", "") or "")
    if not _NO_QUOTA.search(said) or _RATE_LIMITED.search(said):
        return False
    response = getattr(exc, "response", None)
    headers = dict(response.headers) if response is not None else None
    return retry_after_seconds(headers, body=getattr(exc, "body", None)) is None


def never_connected(exc: BaseException) -> bool:
    """Whether the HTTP client found no judge to connect to (refused, no route, no such host): a
    judge not there. A connection reset or closed after the request was sent came from one that is,
    cutting that answer (a proxy, a fault), and says nothing of the next request."""
    cause = exc.__cause__ or exc
    # By name: the openai client's HTTP client is httpx or, in its later releases, httpx2.
    return any(kind.__name__ == "ConnectError" for kind in type(cause).__mro__)


def redirect_loop(exc: BaseException) -> str | None:
    """Where the HTTP client was redirected to when it stopped following a server's redirects (more
    than it follows: a loop, which no retry gets out of), or None when it did not stop so."""
    cause = exc.__cause__ or exc
    if not any(kind.__name__ == "TooManyRedirects" for kind in type(cause).__mro__):  # httpx or httpx2
        return None
    try:
        return redact(str(cause.request.url))  # type: ignore[attr-defined]
    except RuntimeError:  # an HTTP client error raised without its request
        return "an address it does not name"


def connection_problem(exc: BaseException) -> str:
    """What went wrong with the connection, in the HTTP client's words: a connection reset or closed
    without an answer has none (``ReadError('')``), so its kind is named instead of ``()``."""
    cause = exc.__cause__ or exc
    text = str(cause).strip()
    if text:
        return text
    return f"{type(cause).__name__}: the connection was closed without an answer"


#: A server's complaint that a schema is too large for it (OpenAI and Azure word it this way): the
#: word "schema" and, after it, a word about a limit ("maximum context length" alone is not this).
_SCHEMA_LIMIT = re.compile(
    r"schema\b.*\b(too many|exceed|maximum|at most|limit|nest(ed|ing)|levels)", re.IGNORECASE
)
#: A server's complaint that it does not support a response format at all, or not the schema sent
#: (Gemini behind OpenRouter or a proxy names its own ``response_schema``, which takes no
#: ``additionalProperties``).
_UNSUPPORTED_FORMAT = re.compile(
    r"response_format|response format|response_schema|json_schema|json_object|structured output|grammar",
    re.IGNORECASE,
)


def format_unsupported(status: int, detail: str, server_errors: int, last_try: bool, kind: str) -> bool:
    """Does this rejection of a structured request (``kind``: its response format) mean the server
    lacks the response format?

    A 400 or 422 that speaks of the response format (and not of a schema over some limit: that one
    is reported as it is); a 500 that speaks of it; to ``json_schema``, a second 500 in a row, or a
    500 with no retry left (llama-cpp-python's server answers ``json_schema`` with a bare HTTP 500).
    A bare 500 to ``json_object`` is a server failing, retried as any: taken for that format turned
    down too, a server down asked text on top, more requests than its retries allow.
    """
    if status in (400, 422):
        return bool(_UNSUPPORTED_FORMAT.search(detail)) and not _SCHEMA_LIMIT.search(detail)
    if status == 500:
        bare = kind == "json_schema" and (server_errors >= 2 or last_try)
        return bool(_UNSUPPORTED_FORMAT.search(detail)) or bare
    return False


def rejected_message(
    status: int,
    exc: Any,
    params: Mapping[str, Any],
    label: str,
    endpoint: str,
    azure: bool,
    how_to_set: HowToSet,
) -> str:
    """What a rejection no retry gets past (HTTP ``status``, the SDK's error ``exc``, of a request
    sent with ``params`` for ``label`` to ``endpoint``) means, and what to check or set, in the
    wording ``how_to_set`` gives the settings."""
    detail = server_message(exc)
    prefix = f"the LLM judge at {endpoint} rejected the request for {label} (HTTP {status}, not retried)"
    key = "AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN)" if azure else "OPENAI_API_KEY"
    if status == 401:
        return f"{prefix}: the API key was not accepted; check {key}. {detail}"
    if status == 429:
        return (
            f"{prefix}: the account of the API key has no quota left; check its plan and billing "
            f"({key}). {detail}"
        )
    if status == 402:  # OpenRouter's and DeepSeek's answer to an account without credit
        return f"{prefix}: the account of the API key has no credit left; check its balance ({key}). {detail}"
    if status == 403:
        return f"{prefix}: permission denied for model {params.get('model')!r}. {detail}"
    if status == 404:
        return (
            f"{prefix}: model {params.get('model')!r} or the endpoint was not found; check the "
            f"model name and the base URL. {detail}"
        )
    if status in (400, 422) and "response_format" in params:
        if _SCHEMA_LIMIT.search(detail):
            return (
                f"{prefix}: the server says the answer schema exceeds its limits: {detail}. Every "
                "schema sent stays within the documented limits of OpenAI and Azure OpenAI, so this "
                "server's are stricter; the json_object response format sends no schema to check."
            )
        if _UNSUPPORTED_FORMAT.search(detail):
            kind = params["response_format"].get("type")
            return (
                f"{prefix}: the server does not support the {kind} response format: {detail}. "
                "With --rag-response-format=auto (the default) the judge falls back to a format "
                "the server supports."
            )
    if status in (400, 422):
        hints = _parameter_hint(detail, how_to_set) + _n_hint(exc, params, detail, how_to_set)
        return f"{prefix}: {detail}{hints}"
    return f"{prefix}: {detail}"


#: A server refusing the temperature or the seed it was sent: OpenAI's "Unsupported value: 'temperature'
#: does not support 0.0 with this model", a FastAPI server's "Extra inputs are not permitted" at "seed",
#: a LiteLLM proxy's "UnsupportedParamsError: openai does not support parameters: ['seed']" and
#: "O-series models don't support temperature=0.0".
_REFUSED_PARAMETER = re.compile(
    r"\b(temperature|seed)\b.*\b(unsupported|not supported|does not support|not permitted|unknown|"
    r"unrecognized)|\b(unsupported\w*|unknown|unrecognized|(?:does not|doesn't|do not|don't) support)\b"
    r".*\b(temperature|seed)\b",
    re.IGNORECASE | re.DOTALL,
)
#: A server naming the parameter n, quoted, in its refusal: OpenAI's "Invalid 'n': integer above
#: maximum value", a LiteLLM proxy's "does not support parameters: ['n']".
_REFUSED_N = re.compile(r"(?<!\w)['\"`]n['\"`]")


def _parameter_hint(detail: str, how_to_set: HowToSet) -> str:
    """The setting to change when a server refuses a sampling parameter it does not take: OpenAI's
    reasoning models take only their default temperature, some servers no seed."""
    refused = _REFUSED_PARAMETER.search(detail)
    if refused is None:
        return ""
    if (refused.group(1) or refused.group(4)).lower() == "seed":
        return f"; to send no seed, set {how_to_set('seed', 'none')}"
    return (
        f"; for a model that takes only its default temperature, set "
        f"{how_to_set('temperature', 1)} and {how_to_set('graded_temperature', 1)}"
    )


def _n_hint(exc: Any, params: Mapping[str, Any], detail: str, how_to_set: HowToSet) -> str:
    """The setting to change when a server refuses several answers in one request (Groq takes only
    n=1; OpenAI at most 128), as it says: the error's ``param``, or ``'n'`` quoted in its words."""
    if "n" not in params:
        return ""
    body = getattr(exc, "body", None)
    if not (isinstance(body, Mapping) and body.get("param") == "n") and not _REFUSED_N.search(detail):
        return ""
    return (
        f"; the server does not take n={params['n']} (several answers to one request): set "
        f"{how_to_set('judge_n', 1)}"
    )
