"""A judge backed by any OpenAI-compatible chat-completions server, through the ``openai`` SDK.

Retries are done here rather than by the SDK (whose ``max_retries`` is set to 0) so that every retry is
counted in :class:`~pytest_ragmetrics.judge.stats.JudgeStats` and failures surface as one clear
:class:`~pytest_ragmetrics.errors.JudgeUnavailable` instead of an SDK traceback: these errors are raised
``from None`` (pytest would otherwise print every frame of the SDK's HTTP stack above our one line),
and the SDK's exception stays available as their ``cause`` attribute for debugging. A 200 response
whose JSON is not shaped like a chat completion counts as a transport failure and is retried. Answers
are parsed tolerantly (code fences, JSON inside prose) and validated against the request's schema;
invalid answers are re-asked a bounded number of times.

``openai`` is imported on first use only: importing this module stays cheap.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, TypeVar

from .._aio import within
from .._files import RepeatedName, unique_names
from ..errors import ConfigError, InvalidJudgeAnswer, JudgeCallCapReached, JudgeError, JudgeUnavailable
from ..redact import add_secret, add_url, redact
from .base import (
    MAX_TOKEN_COUNT,
    HowToSet,
    JudgeAnswer,
    JudgeRequest,
    Usage,
    by_environment,
    mark_sent,
    schema_errors,
    utc_now,
)
from .limits import MAX_COMPLETION_TOKENS, completion_tokens
from .stats import JudgeStats

if TYPE_CHECKING:  # pragma: no cover
    from openai import AsyncOpenAI

ResponseFormat = Literal["auto", "json_schema", "json_object", "text"]

#: With ``auto``, the next format to try when the server does not support one.
_FALLBACK: dict[str, str] = {"json_schema": "json_object", "json_object": "text"}

#: Never wait longer than this for a server-requested Retry-After: a CI job should fail, not stall.
#: A server asking for a longer wait gets no retry.
MAX_RETRY_AFTER = 60.0
#: Cap of the exponential backoff between retries when the server gives no Retry-After.
MAX_BACKOFF = 20.0
#: Seconds after a judge proved unreachable (connection errors on every attempt) during which the
#: other requests fail at once; the next request after that tries the network again.
UNREACHABLE_COOLDOWN = 10.0

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
#: How reasoning models (DeepSeek-R1, Qwen3, QwQ) mark their thinking before the answer.
_THINK_START, _THINK_END = "<think>", "</think>"


def no_key_message(azure: bool = False, how_to_set: HowToSet = by_environment) -> str:
    """What to do without an API key, in the wording ``how_to_set`` gives the settings."""
    replay = (
        f"or, to use recorded judgments without calling the judge, set {how_to_set('cache', 'replay')}; "
        "replay needs the judgments recorded in the judgment store directory "
        f"({how_to_set('store_dir', 'PATH')}), committed by a run that had a key"
    )
    if azure:
        return (
            "no API key for the Azure OpenAI judge: set AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN), "
            + replay
        )
    return (
        "no API key for the LLM judge: set OPENAI_API_KEY (and OPENAI_BASE_URL or "
        f"{how_to_set('judge_base_url', 'URL')} to use another OpenAI-compatible server), {replay}"
    )


#: How a missing API key is said after the first time.
_NO_KEY_AGAIN = "no API key for the LLM judge"

_Error = TypeVar("_Error", bound=JudgeError)


def with_cause(error: _Error, cause: BaseException | None) -> _Error:
    """``error`` carrying the low-level exception behind it as ``error.cause``.

    Raise the result ``from None``: the message already says what happened, and a chained SDK
    exception would make pytest print hundreds of lines of HTTP-client frames before it.
    """
    # Set on the instance: the error classes are shared with code that has no underlying exception.
    error.cause = cause
    return error


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
    # one is (see _spent), rather than the answer dropped and asked for again.
    model = body.get("model")
    if model is not None and not isinstance(model, str):
        return "'model' is not a string"
    return None


def content_text(content: Any) -> Any:
    """A message's content as text: a string as it is; a list of content parts as its text parts
    joined, others (a reasoning model's ``thinking`` parts, as Mistral's answer) left out, or None
    when it has none; anything else as it is, to be reported as not text."""
    if isinstance(content, list) and all(
        isinstance(part, dict) and isinstance(part.get("type"), str) for part in content
    ):
        texts = [part.get("text") for part in content if part["type"] == "text"]
        if all(isinstance(text, str) for text in texts):
            return "".join(texts) if texts else None
    return content


def _has_text(content: Any) -> bool:
    """Whether a message's content holds anything but whitespace (a non-text content counts)."""
    return content is not None and not (isinstance(content, str) and not content.strip())


def tool_call_arguments(message: Mapping[str, Any]) -> tuple[str, str] | None:
    """The function name and arguments (text) of the first tool call of a chat message (or of its
    legacy ``function_call``), or None when it has none."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    for call in [*(calls if isinstance(calls, list) else ()), {"function": legacy}]:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("arguments"), str):
            return str(function.get("name") or ""), function["arguments"]
    return None


def _tool_call_advice(called: tuple[str, str] | None, judge: OpenAIJudge) -> str:
    """What to do about a server that answered with a tool call holding no answer, for a problem."""
    if called is None:
        return ""
    setting = judge.how_to_set("response_format", "json_object")
    return (
        "; the server answered with a tool call instead of content: if it answers structured output "
        f"so, check its tool-call parser and chat template, or set {setting}"
    )


def valid_text(value: Any) -> Any:
    """``value`` (an answer's JSON) with each lone surrogate in its strings replaced by U+FFFD.

    A model may write half of an escaped pair (``\\ud83d``, half an emoji): text UTF-8 cannot carry,
    which the cache could not write (nor a report, nor the terminal). The rest of the answer is kept.
    """
    if isinstance(value, str):
        if value.isascii():
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {valid_text(name): valid_text(item) for name, item in value.items()}
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    return value


def quoted_text(text: str) -> str:
    """``text`` (a server's words) as it is quoted to a user: credentials masked, each run of white
    space one space, half an escaped pair (``\\ud800``), which could be neither printed nor
    reported, replaced by U+FFFD."""
    return str(valid_text(" ".join(redact(text).split())))


def _reasoning(message: Mapping[str, Any]) -> str:
    """A reasoning model's thinking as the server returns it beside the content: vLLM's and
    DeepSeek's ``reasoning_content``, OpenRouter's and Ollama's ``reasoning``; empty when none."""
    for name in ("reasoning_content", "reasoning"):
        text = message.get(name)
        if isinstance(text, str) and text.strip():
            return text
    return ""


def _thinking(message: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    """How much a reasoning model thought, as the answer says: the characters of its thinking beside
    the content, or the reasoning tokens its usage counts (OpenAI's, which keep the thinking hidden);
    "" when it says nothing of thinking."""
    reasoning = _reasoning(message)
    if reasoning:
        return f"{len(reasoning):,} characters of reasoning"
    usage = body.get("usage")
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    tokens = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    return f"{tokens:,} reasoning tokens" if tokens else ""


def _spent(body: Mapping[str, Any]) -> Usage:
    """The tokens a chat completion (its shape checked) says it used; none when it does not say,
    or says it in a form that is not a count (``"usage": 5``, ``"prompt_tokens": "12"``, ``-3``)."""
    usage = body.get("usage")
    if not usage or not isinstance(usage, dict):
        return Usage()
    return Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def parse_json_answer(text: str) -> Any:
    """Extract the JSON value of a judge's answer from ``text``.

    Accepts bare JSON, JSON in a Markdown code fence, and a JSON object embedded in prose (the
    outermost objects that parse). A reasoning model's thinking before its answer
    (``<think>...</think>``, left in the answer by a server without a reasoning parser) is not part
    of the answer: a draft verdict in it is never taken. Raises :class:`ValueError` when there is no
    answer, when its fences or its prose hold two different JSON objects, or an object of it gives
    one property twice (which was meant is unknown), or when it is nested too deeply to read.
    """
    try:
        return _parse_json_answer(text)
    except RepeatedName as exc:
        raise ValueError(f"the answer gives {exc.name!r} twice") from None
    except RecursionError:
        raise ValueError("the answer is nested too deeply to read") from None


_DECODER = json.JSONDecoder(object_pairs_hook=unique_names)
_NOT_JSON = object()


def _decode(text: str) -> Any:
    """``text`` as one JSON value, or ``_NOT_JSON``; an object giving a property twice raises."""
    try:
        return _DECODER.decode(text)
    except RepeatedName:
        raise
    except ValueError:
        return _NOT_JSON


def _parse_json_answer(text: str) -> Any:
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty")
    value = _decode(stripped)  # bare JSON, even one whose text speaks of </think>
    if value is not _NOT_JSON:
        return value
    final = _final_channel(stripped)
    if final is not None:
        stripped = final
        if not stripped:
            raise ValueError("the answer is all thinking (gpt-oss's analysis), with no final answer")
        value = _decode(stripped)
        if value is not _NOT_JSON:
            return value
    thinking, closed, answer = stripped.partition(_THINK_END)
    if closed and (_THINK_START not in thinking or thinking.startswith(_THINK_START)):
        # DeepSeek-R1's template opens the thinking in the prompt: its answer has the closing tag only.
        stripped = answer.strip()
        if not stripped:
            raise ValueError("the answer is all thinking, with no answer after it")
        value = _decode(stripped)
        if value is not _NOT_JSON:
            return value
    elif stripped.startswith(_THINK_START):
        raise ValueError("the answer is all thinking, with no answer after it")
    fenced = [v for v in (_decode(block.strip()) for block in _FENCE.findall(stripped)) if v is not _NOT_JSON]
    if fenced:
        return _one_answer(fenced, "in code fences")
    found = []
    start = stripped.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(stripped, start)
        except RepeatedName:
            raise
        except ValueError:
            start = stripped.find("{", start + 1)
            continue
        found.append(value)  # an object: raw_decode at a brace reads nothing else
        start = stripped.find("{", end)
    if found:
        return _one_answer(found, "in its text")
    raise ValueError("no JSON object found in the answer")


#: gpt-oss's harmony format, left in the content by a server that does not parse it: its analysis
#: channel, then its answer in the final channel; with the special tokens dropped, the channel names
#: run into the text ("analysisWe need...assistantfinal{...}").
_HARMONY = (("<|channel|>", "<|channel|>final<|message|>"), ("analysis", "assistantfinal"))
_HARMONY_ENDS = ("<|return|>", "<|end|>")


def _final_channel(text: str) -> str | None:
    """What gpt-oss wrote in its final channel ("" when it wrote none), or None when ``text`` is not
    in its harmony format."""
    for opening, final in _HARMONY:
        if text.startswith(opening) and (opening != "analysis" or final in text):
            answer = text.rpartition(final)[2] if final in text else ""
            answer = answer.strip()
            for end in _HARMONY_ENDS:
                answer = answer.removesuffix(end)
            return answer.strip()
    return None


def _one_answer(values: list[Any], where: str) -> Any:
    """The one value the JSON found in an answer's prose or code fences gives. Two that differ (a
    draft verdict and the verdict, thinking a server left in the content, an example and the answer)
    are no answer: which one the judge meant cannot be told, so it is asked again."""
    different: list[Any] = []
    for value in values:
        if value not in different:
            different.append(value)
    if len(different) > 1:
        raise ValueError(
            f"the answer holds {len(different)} different JSON objects {where}: which one is the answer "
            "cannot be told"
        )
    return different[0]


def schema_instructions(schema: Mapping[str, Any]) -> str:
    """Format instructions for a server not asked for strict structured output.

    They go into the system message, never the user message (which the prompts declare to hold data
    only). The schema keeps its own key order, so ``reason`` comes before the verdict, as it does in
    strict mode: a model writing its reasoning first decides better than one justifying a verdict
    it has already given.
    """
    return (
        "\n\nAnswer with only a JSON object that conforms to this JSON schema, with no other text:\n"
        f"```json\n{json.dumps(schema, indent=2, ensure_ascii=False)}\n```"
    )


#: A server's complaint that a schema is too large for it (OpenAI and Azure word it this way): the
#: word "schema" and, after it, a word about a limit ("maximum context length" alone is not this).
_SCHEMA_LIMIT = re.compile(
    r"schema\b.*\b(too many|exceed|maximum|at most|limit|nest(ed|ing)|levels)", re.IGNORECASE
)
#: A server's complaint that it does not support a response format at all.
_UNSUPPORTED_FORMAT = re.compile(
    r"response_format|response format|json_schema|json_object|structured output|grammar", re.IGNORECASE
)
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
#: The server wants the other completion-limit parameter: OpenAI's reasoning models answer ``max_tokens``
#: with "Unsupported parameter: 'max_tokens' ... Use 'max_completion_tokens' instead".
_OTHER_LIMIT_PARAMETER = {"max_tokens": "max_completion_tokens", "max_completion_tokens": "max_tokens"}
#: The server's largest completion limit, as OpenAI words it: "max_tokens is too large: 20000. This
#: model supports at most 4096 completion tokens".
_LIMIT_TOO_LARGE = re.compile(r"at most (\d+) completion tokens", re.IGNORECASE)
#: The prompt and the limit together exceed the model's context, as vLLM and OpenAI word it: "maximum
#: context length is 8192 tokens. However, you requested 17000 tokens (616 in the messages, 16384 in
#: the completion)".
_CONTEXT_TOO_SMALL = re.compile(
    r"maximum context length is (\d+) tokens.*?\((\d+) in the messages, (\d+) in the completion\)",
    re.IGNORECASE | re.DOTALL,
)
#: Reasoning models count their hidden reasoning in ``max_completion_tokens``: room for it on top of
#: the answer (a limit sized to the answer alone would cut most of them off before they answer).
REASONING_TOKENS = 4096
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
    if isinstance(body, list) and body and isinstance(body[0], Mapping):
        # Gemini's OpenAI-compatible endpoint sends its error in a list, [{"error": {...}}], which
        # the SDK leaves whole (it takes the "error" of an object only).
        first = body[0]
        body = first["error"] if isinstance(first.get("error"), Mapping) else first
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


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait as requested by ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date)."""
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


def _http_client_kwargs(openai: Any) -> dict[str, Any]:
    """An explicit HTTP client for openai releases before 1.55.3, none for later ones.

    Those releases build their default client with httpx's ``proxies`` argument, which httpx 0.28
    removed: with a current httpx, every client they create fails with a ``TypeError``. A client made
    by the SDK's own ``DefaultAsyncHttpxClient`` (same defaults) is never built that way.
    """
    try:
        version = tuple(int(part) for part in openai.__version__.split(".")[:3])
    except ValueError:  # a pre-release or local build: a recent SDK
        return {}
    return {"http_client": openai.DefaultAsyncHttpxClient()} if version < (1, 55, 3) else {}


class OpenAIJudge:
    """A :class:`~pytest_ragmetrics.judge.base.Judge` that asks an OpenAI-compatible server.

    ``model`` is used when a request names none. ``api_key`` and ``base_url`` default to the SDK's own
    environment variables (``OPENAI_API_KEY``, ``OPENAI_BASE_URL``). With ``azure=True`` (or an
    ``azure_endpoint``) the Azure client is used: the endpoint is ``azure_endpoint`` or
    ``AZURE_OPENAI_ENDPOINT``, the API version ``api_version`` or ``OPENAI_API_VERSION``, the key
    ``api_key`` or ``AZURE_OPENAI_API_KEY``; a missing endpoint or version is a
    :class:`~pytest_ragmetrics.errors.ConfigError` at construction, before any network activity (never
    a silent fall-back to api.openai.com with the wrong key). ``timeout`` bounds each HTTP request
    as a whole; ``max_retries`` transport retries (429, 5xx, timeouts, connection errors) with
    backoff; ``max_reasks`` re-asks after an answer that does not fit the schema. The requests in flight are
    bounded by the :class:`~pytest_ragmetrics.judge.cache.CachedJudge` in front of the judge (the one
    concurrency bound, whatever the judge). ``response_format`` is ``"json_schema"`` (strict
    structured output), ``"json_object"`` or ``"text"`` (the schema is then given in the system
    message), or ``"auto"``:
    strict structured output, falling back to ``json_object`` and then ``text`` when the server turns
    the first structured request down as unsupported (an HTTP 400 or 422 saying so, or, as
    llama-cpp-python's server answers, an HTTP 500 twice in a row). The format that worked is kept for
    the rest of the run: :attr:`active_format`, with the reason in :attr:`fallback_reason`, and in
    :attr:`stats`. ``retry_backoff`` is the first backoff delay in seconds, doubled on each retry.

    Every request carries a completion limit: ``max_tokens`` when given, else sized to the request's
    schema (:func:`~pytest_ragmetrics.judge.limits.completion_tokens`). It is sent as ``max_tokens``,
    or as ``max_completion_tokens`` once the server asks for that one (OpenAI's reasoning models, with
    :data:`REASONING_TOKENS` more for their reasoning), and lowered to the server's own maximum when it
    names one. An answer cut off by the limit (``finish_reason`` ``length``) is re-asked like an invalid
    one, and never returned.
    """

    #: Calls :func:`~pytest_ragmetrics.judge.base.mark_sent` when a request leaves: one still waiting
    #: inside (for the response format, for a free slot) can be dropped without being paid for.
    reports_sending = True

    def __init__(
        self,
        model: str | None = None,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        azure: bool = False,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 4,
        max_reasks: int = 2,
        response_format: ResponseFormat = "auto",
        stats: JudgeStats | None = None,
        retry_backoff: float = 0.5,
        how_to_set: HowToSet = by_environment,
        max_tokens: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if response_format not in ("auto", "json_schema", "json_object", "text"):
            raise ConfigError(
                f"judge response format {response_format!r} is not one of "
                "auto, json_schema, json_object, text"
            )
        if max_retries < 0 or max_reasks < 0:
            raise ConfigError("judge max_retries and max_reasks must not be negative")
        if max_tokens is not None and max_tokens < 1:
            raise ConfigError(f"judge max_tokens must be at least 1, got {max_tokens}")
        # A gateway may take its key in the base URL: kept out of every message, as the API key is.
        add_url(base_url)
        add_url(azure_endpoint)
        self.how_to_set = how_to_set
        #: The completion limit of every answer, or None to size it to each request's schema.
        self.max_tokens = max_tokens
        #: The request parameter that carries the limit: the server asks for the other one if it wants.
        self.limit_parameter = "max_tokens"
        #: The largest limit the server said it accepts, once it said so.
        self.server_max_tokens: int | None = None
        # An explicit endpoint still means Azure, as it always did.
        self.azure = bool(azure or azure_endpoint)
        if self.azure:
            azure_endpoint = azure_endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None
            api_version = api_version or os.environ.get("OPENAI_API_VERSION") or None
            _check_azure(azure_endpoint, api_version, base_url, how_to_set)
        else:
            check_base_url(base_url, how_to_set)
        self.model = model
        # Kept in memory only; never written anywhere, left out of repr(), scrubbed from messages.
        self._api_key = api_key
        add_secret(api_key)
        self.base_url = base_url
        self.azure_endpoint = azure_endpoint
        self.api_version = api_version
        self.timeout = timeout
        self.max_retries = max_retries
        self.max_reasks = max_reasks
        self.response_format: ResponseFormat = response_format
        #: The format requests are sent with: the configured one, or with ``auto`` the one that works.
        self.active_format: str = "json_schema" if response_format == "auto" else response_format
        #: Why ``auto`` fell back from ``json_schema`` (the server's own words), or None.
        self.fallback_reason: str | None = None
        # With auto, the first structured request finds out which format the server supports; the
        # others wait for it, so a server without json_schema is not asked 16 times at once.
        self._format_settled = response_format != "auto"
        self._probe_failed = False  # a request finding the format failed: the others no longer queue
        self._probe_locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        # Requests leave one at a time, each loop's in turn (see _create).
        self._turns: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self.stats = stats if stats is not None else JudgeStats()
        self.retry_backoff = retry_backoff
        # One client per event loop: an HTTP connection pool belongs to the loop it was first used
        # in. The engine uses a single loop in practice.
        self._clients: dict[asyncio.AbstractEventLoop, AsyncOpenAI] = {}
        self._clients_lock = threading.Lock()
        # Failures that no later request can get past (the key refused, the model unknown): keyed by
        # model, "" for all models. Later requests fail at once with them.
        self._fatal: dict[str, JudgeUnavailable] = {}
        # The judge proved unreachable: the failure, and until when (on ``clock``) the other requests
        # fail at once with it. A network that comes back is tried again after the cool-down.
        self._unreachable: tuple[JudgeUnavailable, float] | None = None
        self._estimating = False  # a token cap counts estimates: the server reports no usage
        self._no_key_said = False  # the advice of a missing API key was given in full once
        self._clock = clock
        if self.has_credentials():
            # Loaded with the judge, before any judgment is claimed for it (see CachedJudge._ask);
            # without a key, never: no key means no network activity at all.
            import openai  # noqa: F401

    def __repr__(self) -> str:
        where = redact(self.azure_endpoint or self.base_url or "OPENAI_BASE_URL/default")
        return (
            f"OpenAIJudge(model={self.model!r}, base_url={where!r}, response_format={self.response_format!r})"
        )

    # --- client ----------------------------------------------------------------------------------

    def has_credentials(self) -> bool:
        """True when an API key (or, for Azure, a key or AD token) is configured."""
        if self._api_key:
            return True
        if self.azure:
            return bool(os.environ.get("AZURE_OPENAI_API_KEY") or os.environ.get("AZURE_OPENAI_AD_TOKEN"))
        return bool(os.environ.get("OPENAI_API_KEY"))

    def _no_key(self) -> JudgeUnavailable:
        """The error of a missing API key: in full the first time, then short (a suite without a key
        would repeat the same long advice in every test; the run's end counts them)."""
        with self._clients_lock:
            first, self._no_key_said = not self._no_key_said, True
        if first:
            return JudgeUnavailable(no_key_message(self.azure, self.how_to_set))
        return JudgeUnavailable(f"{_NO_KEY_AGAIN}; the first judgment that needed one says how to set it")

    def _ensure_client(self) -> AsyncOpenAI:
        loop = asyncio.get_running_loop()
        existing = self._clients.get(loop)
        if existing is not None:
            return existing
        # Checked before the SDK is even imported: no key means no network activity at all.
        if not self.has_credentials():
            raise self._no_key()
        import openai

        # The SDK's own retries are off: ours are counted and produce one readable error.
        client: AsyncOpenAI
        if self.azure:
            # Checked again here (cheap) in case the attributes were changed after construction:
            # the SDK's own check would surface as a bare ValueError.
            _check_azure(self.azure_endpoint, self.api_version, self.base_url, self.how_to_set)
            assert self.azure_endpoint is not None  # for mypy: _check_azure raised otherwise
            client = openai.AsyncAzureOpenAI(
                api_key=self._api_key,
                azure_endpoint=self.azure_endpoint,
                api_version=self.api_version,
                timeout=self.timeout,
                max_retries=0,
                **_http_client_kwargs(openai),
            )
        else:
            client = openai.AsyncOpenAI(
                api_key=self._api_key,
                base_url=self.base_url,
                timeout=self.timeout,
                max_retries=0,
                **_http_client_kwargs(openai),
            )
        with self._clients_lock:
            # Clients of loops that are gone cannot be closed any more; forget them.
            for old in [old for old in self._clients if old.is_closed()]:
                del self._clients[old]
            self._clients[loop] = client
        return client

    @property
    def endpoint(self) -> str:
        """The base URL requests go to, for messages: credentials in it are masked."""
        for client in list(self._clients.values()):
            return redact(str(client.base_url))
        return redact(
            self.azure_endpoint
            or self.base_url
            or os.environ.get("OPENAI_BASE_URL")
            or "https://api.openai.com/v1"
        )

    async def aclose(self) -> None:
        """Close the HTTP clients: this loop's directly, those of other running loops on their loop."""
        with self._clients_lock:
            clients, self._clients = self._clients, {}
        running = asyncio.get_running_loop()
        for loop, client in clients.items():
            if loop is running:
                await client.close()
            elif loop.is_running():
                future = asyncio.run_coroutine_threadsafe(client.close(), loop)
                with contextlib.suppress(Exception):  # closing must not fail a finished run
                    await asyncio.wrap_future(future)

    # --- judging ---------------------------------------------------------------------------------

    def _known_failure(self, model: str | None) -> JudgeUnavailable | None:
        """The failure every request for ``model`` will meet, when an earlier request found one."""
        known = self._fatal.get("") or self._fatal.get(model or "")
        unreachable = self._unreachable
        if known is None and unreachable is not None and self._clock() < unreachable[1]:
            return unreachable[0]
        return known

    def _fail_fast(self, model: str | None) -> None:
        known = self._known_failure(model)
        if known is not None:
            if self._unreachable is not None and known is self._unreachable[0]:
                again = JudgeUnavailable(
                    f"{known}; the judgments of the next {UNREACHABLE_COOLDOWN:g}s fail without asking, "
                    "then the judge is tried again"
                )
            else:
                again = JudgeUnavailable(f"{known}; the remaining judgments of this run fail without asking")
            raise with_cause(again, known.cause) from None

    def _remember_failure(self, model: str, error: JudgeUnavailable) -> JudgeUnavailable:
        with self._clients_lock:
            self._fatal.setdefault(model, error)
        return error

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        """Ask the judge, retrying transport failures and re-asking invalid answers.

        Once the judge refused the key (HTTP 401) or the model (403, 404), every later request fails
        at once with that message instead of paying the retries again. Once it proved unreachable
        (connection errors on every attempt), the requests of the next :data:`UNREACHABLE_COOLDOWN`
        seconds do; the first one after that tries the network again.
        """
        try:
            self._fail_fast(request.model or self.model)
            client = self._ensure_client()
            if not self._format_settled:
                # Waiting for the first request to find the response format is queueing too:
                # only the call itself is timed.
                async with self._probe_lock():
                    if not self._format_settled and not self._probe_failed:
                        with self.stats.timer():
                            try:
                                return await self._probe(client, request)
                            except JudgeUnavailable:
                                # The server failed, it did not turn a format down: the judgments
                                # queued here would each run their retries in turn (hours for a
                                # suite while it is down). From now on each finds the format on its
                                # own, side by side, as they wait out an outage once it is found.
                                self._probe_failed = True
                                raise
                if not self._format_settled:
                    with self.stats.timer():
                        return await self._probe(client, request)
            with self.stats.timer():
                answer = await self._judge(client, request, self.active_format)
                if self.stats.response_format is None:
                    self.stats.record_response_format(self.active_format, self.fallback_reason)
                return answer
        except (JudgeUnavailable, InvalidJudgeAnswer):
            self.stats.record_error()
            raise

    def _probe_lock(self) -> asyncio.Lock:
        return self._lock_of(self._probe_locks)

    def _lock_of(self, locks: dict[asyncio.AbstractEventLoop, asyncio.Lock]) -> asyncio.Lock:
        """The running loop's lock in ``locks`` (an asyncio lock belongs to one loop)."""
        loop = asyncio.get_running_loop()
        lock = locks.get(loop)
        if lock is None:
            with self._clients_lock:
                for old in [old for old in locks if old.is_closed()]:  # gone with their loop
                    del locks[old]
                lock = locks.setdefault(loop, asyncio.Lock())
        return lock

    async def _probe(self, client: AsyncOpenAI, request: JudgeRequest) -> JudgeAnswer:
        """Judge ``request`` in the first response format the server supports, and keep that format."""
        mode = self.active_format
        turned_down: list[str] = []
        while True:
            try:
                answer = await self._judge(client, request, mode, probing=True)
            except _FormatUnsupported as exc:
                turned_down.append(f"{mode} ({exc.detail})")
                mode = _FALLBACK[mode]
                continue
            self.active_format = mode
            if turned_down:
                self.fallback_reason = "the server turned down " + "; then ".join(turned_down)
            self._format_settled = True
            self.stats.record_response_format(self.active_format, self.fallback_reason)
            return answer

    def _messages(self, request: JudgeRequest, mode: str) -> list[dict[str, Any]]:
        messages = [dict(m) for m in request.messages]
        if mode != "json_schema":
            instructions = schema_instructions(request.schema)
            if messages and messages[0].get("role") == "system":
                messages[0]["content"] = str(messages[0].get("content", "")) + instructions
            else:
                messages.insert(0, {"role": "system", "content": instructions.lstrip()})
        return messages

    def _params(self, request: JudgeRequest, messages: list[dict[str, Any]], mode: str) -> dict[str, Any]:
        model = request.model or self.model
        if not model:
            raise JudgeUnavailable(f"no judge model for {request.label or request.kind}: set a model")
        params: dict[str, Any] = {
            "model": model,
            "messages": messages,
            "temperature": request.temperature,
        }
        if request.seed is not None:
            params["seed"] = request.seed
        if request.n != 1:
            # Only sent when needed: some OpenAI-compatible servers reject the parameter outright.
            params["n"] = request.n
        params[self.limit_parameter] = self.completion_limit(request)
        if mode == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "strict": True, "schema": request.schema},
            }
        elif mode == "json_object":
            params["response_format"] = {"type": "json_object"}
        return params

    # --- the batch path: the same body out, the same validation in --------------------------------

    def request_body(self, request: JudgeRequest) -> dict[str, Any]:
        """The body a live call for ``request`` sends first: messages, sampling parameters, completion
        limit and response format (with ``auto``, the format the server was found to take, else
        ``json_schema``). What a batch input line carries."""
        mode = self.active_format
        return self._params(request, self._messages(request, mode), mode)

    def sync_client(self) -> Any:
        """A synchronous ``openai`` client with this judge's settings (key, base URL or Azure
        endpoint and API version, timeout, retries), for the batch commands. Raises
        :class:`JudgeUnavailable` without a key, before any network activity."""
        if not self.has_credentials():
            raise JudgeUnavailable(no_key_message(self.azure, self.how_to_set))
        import openai

        if self.azure:
            _check_azure(self.azure_endpoint, self.api_version, self.base_url, self.how_to_set)
            assert self.azure_endpoint is not None  # for mypy: _check_azure raised otherwise
            return openai.AzureOpenAI(
                api_key=self._api_key,
                azure_endpoint=self.azure_endpoint,
                api_version=self.api_version,
                timeout=self.timeout,
                max_retries=self.max_retries,
            )
        return openai.OpenAI(
            api_key=self._api_key, base_url=self.base_url, timeout=self.timeout, max_retries=self.max_retries
        )

    def answer_from_body(self, request: JudgeRequest, body: Any, judged_at: str = "") -> JudgeAnswer:
        """The answer a chat completion ``body`` (JSON, as a batch result line holds it) gives to
        ``request``, validated exactly as a live answer is (:func:`completion_shape_problem`, then each
        choice parsed and checked against the schema); :class:`InvalidJudgeAnswer` says what is wrong.
        No re-ask: whoever holds the answer sends the request again if it wants another."""
        label = request.label or request.kind
        if not isinstance(body, dict):
            raise InvalidJudgeAnswer(f"the answer for {label} is not a chat completion object")
        problem = completion_shape_problem(body)
        if problem is not None:
            raise InvalidJudgeAnswer(f"the answer for {label} is not a chat completion ({problem})")
        parsed = self._parse_choices(request, body)
        if parsed.problems:
            shown = "; ".join(parsed.problems[:5])
            raise InvalidJudgeAnswer(f"judge answer for {label} is invalid: {shown}")
        return JudgeAnswer(
            choices=tuple(parsed.choices),
            # Bounded as a live answer's: an absurd count would swamp every total it is added to.
            usage=_spent(body),
            model=valid_text(str(body.get("model") or request.model)),
            judged_at=judged_at or utc_now(),
            source="judge",
        )

    def completion_limit(self, request: JudgeRequest) -> int:
        """The completion limit sent with ``request`` (per choice), in :attr:`limit_parameter`'s terms."""
        if self.max_tokens is not None:
            limit = self.max_tokens
        else:
            limit = completion_tokens(request.schema)
            if self.limit_parameter == "max_completion_tokens":
                limit = min(MAX_COMPLETION_TOKENS, limit + REASONING_TOKENS)
        if self.server_max_tokens is not None:
            limit = min(limit, self.server_max_tokens)
        return limit

    async def _judge(
        self, client: AsyncOpenAI, request: JudgeRequest, mode: str, probing: bool = False
    ) -> JudgeAnswer:
        messages = self._messages(request, mode)
        label = request.label or request.kind
        usage = Usage()
        for attempt in range(self.max_reasks + 1):
            # _create only returns bodies whose shape completion_shape_problem() accepted.
            body = await self._create(client, request, self._params(request, messages, mode), probing)
            spent = _spent(body)
            usage = usage + spent
            self.stats.record_call(spent, estimate=self._estimate(spent, messages, body))
            parsed = self._parse_choices(request, body)
            problems = parsed.problems
            if not problems:
                return JudgeAnswer(
                    choices=tuple(parsed.choices),
                    usage=usage,
                    model=valid_text(str(body.get("model") or request.model)),
                    judged_at=utc_now(),
                    source="judge",
                )
            # One answer to a request for several: the server ignores n (as Ollama does), which
            # no re-ask changes.
            ignores_n = request.n > 1 and len(body["choices"]) == 1
            # The limit was spent before a word of the answer (a reasoning model thinking): asked
            # again under the same limit, it spends it again, at full cost.
            if attempt == self.max_reasks or ignores_n or parsed.thought_out:
                shown = "; ".join(problems[:5])
                hint = ""
                if parsed.thought_out:
                    limit = self.completion_limit(request) + REASONING_TOKENS
                    room = self.how_to_set("judge_max_tokens", limit)
                    hint = (
                        "; not asked again, which would spend the same limit again. A reasoning model "
                        f"thinks before it answers: give it room, set {room}, "
                        "or turn its thinking off (where the server or model offers it: OpenAI's "
                        "reasoning_effort, Qwen3's enable_thinking, Ollama's think), or judge with a model "
                        "that does not think"
                    )
                elif parsed.cut_off:
                    bigger = 2 * self.completion_limit(request)
                    hint = f"; to allow longer answers, set {self.how_to_set('judge_max_tokens', bigger)}"
                if ignores_n:
                    hint += (
                        f"; the server answers one choice where n={request.n} asks for more: it may not "
                        f"support n, so set {self.how_to_set('judge_n', 1)}"
                    )
                raise InvalidJudgeAnswer(
                    f"judge answer for {label} is invalid after {attempt + 1} attempt(s) "
                    f"({attempt} re-ask(s)): {shown}{hint}"
                )
            self.stats.record_reask()
            # Show the model what was wrong; a bare resend at temperature 0 would get the same answer.
            again = ". Answer again with only a JSON object that conforms to the schema."
            if parsed.cut_off:
                again += " Keep every reason to one short sentence."
            # An answer with no text (a refusal, a filter, no choice at all, only line breaks until
            # the limit cut it off) is shown as saying so:
            # Anthropic's API, and Bedrock's and Mistral's through a proxy, refuse a request holding
            # an empty assistant message (HTTP 400), which hid why the judge was asked again; and
            # leaving the turn out makes two user turns, which chat templates that need the roles
            # to alternate refuse.
            said = parsed.bad_content if parsed.bad_content.strip() else _NO_ANSWER
            messages = [
                *messages,
                {"role": "assistant", "content": said},
                {"role": "user", "content": "That answer is invalid: " + "; ".join(problems[:5]) + again},
            ]
        raise AssertionError("unreachable")  # pragma: no cover

    def _estimate(self, spent: Usage, messages: list[dict[str, Any]], body: Mapping[str, Any]) -> int:
        """The tokens a token cap counts for an answer whose server reported no usage: about four
        characters a token of the prompt and the answer. Said once per run."""
        budget = self.stats.budget
        if spent.total_tokens or budget is None or budget.tokens is None:
            return 0
        if not self._estimating:
            self._estimating = True
            from ..errors import RagMetricsWarning

            warnings.warn(
                redact(
                    f"the LLM judge at {self.endpoint} reports no token usage: the token cap of "
                    f"{budget.tokens} counts an estimate of each request (about 4 characters a token)"
                ),
                RagMetricsWarning,
                stacklevel=2,
            )
        text = sum(len(str(message.get("content") or "")) for message in messages)
        for choice in body["choices"]:
            text += len(str(content_text((choice.get("message") or {}).get("content")) or ""))
        return max(1, text // 4)

    def _parse_choices(self, request: JudgeRequest, body: Mapping[str, Any]) -> _Parsed:
        """The choices of a chat completion (its shape checked), each parsed and checked against the
        request's schema, and what was wrong with those that were not (see :class:`_Parsed`)."""
        choices: list[dict[str, Any]] = []
        problems: list[str] = []
        bad_content = ""
        cut_off = thought_out = False
        got: list[dict[str, Any]] = body["choices"]
        if len(got) != request.n:
            problems.append(f"expected {request.n} choice(s), got {len(got)}")
        for i, choice in enumerate(got):
            message = choice.get("message") or {}
            content = content_text(message.get("content"))
            where = f"choice {i}" if request.n > 1 else "answer"
            called = None if _has_text(content) else tool_call_arguments(message)
            if called is not None:
                # No content, and a tool call the request offered no tool for: a server that implements
                # structured output through a tool call put the answer in its arguments. Read, checked
                # and recorded as content is (a reasoning model's thinking, by contrast, is a draft).
                name, content = called
                where = f"{where} (the arguments of a tool call {name!r}, a tool the request did not offer)"
            if isinstance(content, str):
                content = valid_text(content)  # shown to the judge again when re-asked: sent as UTF-8
            finish = choice.get("finish_reason")
            if finish == "length":
                # Cut off mid-answer, or a reasoning model mid-thinking with no answer yet: even when
                # what came parses, it is not the answer the model meant.
                limit = f"{self.limit_parameter}={self.completion_limit(request)}"
                thought = "" if _has_text(content) else _thinking(message, body)
                cut_off = True
                if thought:
                    thought_out = True
                    problems.append(
                        f"{where}: cut off at the completion limit ({limit}) before it gave any answer, "
                        f"thinking ({thought})"
                    )
                else:
                    problems.append(
                        f"{where}: cut off at the completion limit ({limit}) before it was complete"
                    )
                bad_content = bad_content or (content if isinstance(content, str) else "")
                continue
            if content is None or (isinstance(content, str) and not content.strip()):
                refusal = message.get("refusal")
                if refusal:
                    why = f" (refusal: {valid_text(str(refusal))})"
                elif isinstance(finish, str) and finish != "stop":
                    why = f" (finish_reason {finish!r})"  # content_filter, tool_calls: what stopped it
                elif reasoning := _reasoning(message):
                    # vLLM's reasoning parsers put a whole answer there when the model never closed
                    # its thinking (Qwen3 with thinking turned off): never read as the answer.
                    why = (
                        f" (only {len(reasoning)} characters of reasoning: the server's "
                        "reasoning parser may have taken the answer for thinking)"
                    )
                else:
                    why = ""
                problems.append(f"{where} has no content{why}")
                continue
            if not isinstance(content, str):
                # A server that put the JSON object itself (or a number) where the text belongs:
                # the answer is not what was asked for, so it is re-asked like any invalid answer.
                problems.append(f"{where}: the content is a {type(content).__name__}, not text")
                bad_content = bad_content or json.dumps(content, default=str)
                continue
            try:
                value = parse_json_answer(content)
            except ValueError as exc:
                problems.append(f"{where}: {exc}: {content[:200]!r}{_tool_call_advice(called, self)}")
                bad_content = bad_content or content
                continue
            errors = schema_errors(request.schema, value)
            if errors:
                problems.append(f"{where}: " + "; ".join(errors[:5]) + _tool_call_advice(called, self))
                bad_content = bad_content or content
                continue
            choices.append(valid_text(value))
        return _Parsed(choices, problems, bad_content, cut_off, thought_out)

    async def _create(
        self, client: AsyncOpenAI, request: JudgeRequest, params: dict[str, Any], probing: bool = False
    ) -> Any:
        """One chat completion, with counted retries on transient failures.

        While ``probing`` (``auto`` has not found the server's response format yet), a rejection that
        says the response format is unsupported raises :class:`_FormatUnsupported` instead.
        """
        import openai

        label = request.label or request.kind
        model = str(params.get("model") or "")
        attempt = 0
        server_errors = 0
        adjusted = 0
        while True:
            # One request leaves at a time. The SDK writes a request's headers, lets the loop run
            # whatever else is ready, and only then writes its body: ten requests started together
            # would each be built and their headers written before any body left, so the judge got
            # all ten at once, after the last, and their answers came back together, to be read one
            # after the other. The next request is built in the loop's pass after this one's body
            # left (the release goes ahead of it in the next pass): the answers come back as spaced
            # as the requests left, each read while the next ones are still on their way.
            turn = self._lock_of(self._turns)
            await turn.acquire()
            asyncio.get_running_loop().call_soon(turn.release)
            retry_after: float | None = None
            unreachable = False
            # A request that was waiting or retrying while another one found the judge dead stops.
            self._fail_fast(model)
            if not self.stats.take_call():
                assert self.stats.budget is not None  # only a budget refuses
                raise JudgeCallCapReached(self.stats.budget.refusal(label, self.how_to_set))
            mark_sent()  # from here on the request is paid for: its answer is kept whoever waits
            raw = b""
            try:
                # The SDK's generic post() (its documented way to make custom requests) rather than
                # chat.completions.create(): create() deep-copies and type-transforms the whole
                # JSON schema on every call, which cost ~1.4 ms of event-loop time per request and
                # kept a 32-way batch from overlapping. The params are plain JSON already. The body
                # comes back as bytes and is read as plain JSON, as a batch result line is: building
                # the SDK's response objects from it cost ~0.2 ms a call, and nothing reads them.
                # The timeout bounds the whole request: the HTTP client's bounds each read only,
                # and a server sending a byte now and then would hold the request for ever.
                raw = await within(self.timeout, client.post("/chat/completions", cast_to=bytes, body=params))
                body = json.loads(raw)
                problem = completion_shape_problem(body)
                if problem is None:
                    return body
                # A 200 with JSON that is not a chat completion (a proxy's error page, `{}`,
                # `"choices": ["hi"]`): a flaky server, not an invalid judgment, so retried rather
                # than re-asked.
                what = f"malformed response body ({problem})"
                last: BaseException | None = None
            except openai.APIStatusError as exc:
                status = exc.status_code
                detail = server_message(exc)
                if exc.response.request.method != "POST":
                    # Redirected (301, 302, 303: from http:// to https://, say): the HTTP client
                    # followed with a GET, which no retry changes.
                    raise self._remember_failure("", self._redirected(exc, label, detail)) from None
                if status in (400, 422) and adjusted < 2 and self._adjust_limit(request, params, detail):
                    adjusted += 1
                    continue  # the same request, with the limit the server wants: not a retry
                if probing and "response_format" in params:
                    server_errors += status == 500
                    last_try = attempt >= self.max_retries
                    if _format_unsupported(status, detail, server_errors, last_try):
                        raise _FormatUnsupported(f"HTTP {status}: {detail}") from None
                if (status < 500 and status not in (408, 429)) or _quota_used_up(status, exc):
                    message = self._rejected_message(status, exc, params, label)
                    error = with_cause(JudgeUnavailable(message), exc)
                    if status in (401, 402, 429):
                        error = self._remember_failure("", error)  # the key or its account: every model
                    elif status in (403, 404):
                        error = self._remember_failure(model, error)
                    raise error from None
                retry_after = retry_after_seconds(dict(exc.response.headers))
                what = f"HTTP {status}" + (" (rate limited)" if status == 429 else "") + f": {detail}"
                last = exc
            except (openai.APITimeoutError, asyncio.TimeoutError) as exc:
                what = f"timed out after {self.timeout:g}s"
                last = exc
            except openai.APIConnectionError as exc:
                what = f"connection error ({_connection_problem(exc)})"
                last = exc
                unreachable = True
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                # A 200 whose body is not JSON: treat like a flaky server.
                what = f"malformed response body ({_not_json(raw, exc)})"
                last = exc
            except RecursionError as exc:  # JSON nested deeper than Python reads: not an answer either
                what = "malformed response body (nested too deeply to read)"
                last = exc
            # A wait longer than a run waits (an Azure daily quota: "retry after 86400 seconds") is not
            # waited out in pieces, once per retry: the judgment fails now, saying so.
            too_long = retry_after is not None and retry_after > MAX_RETRY_AFTER
            if attempt >= self.max_retries or too_long:
                if too_long:
                    what += (
                        f"; the server asks to wait {retry_after:g}s before another attempt, longer "
                        f"than a run waits ({MAX_RETRY_AFTER:g}s)"
                    )
                message = (
                    f"the LLM judge at {self.endpoint} is unavailable for {label}: {what}; "
                    f"gave up after {attempt + 1} attempt(s)"
                )
                error = with_cause(JudgeUnavailable(message), last)
                if unreachable:
                    with self._clients_lock:
                        self._unreachable = (error, self._clock() + UNREACHABLE_COOLDOWN)
                raise error from None
            attempt += 1
            self.stats.record_retry()
            mark_sent(False)  # no answer is on its way: until the retry leaves, it can be dropped
            await asyncio.sleep(self._backoff(attempt, retry_after))

    def _redirected(self, exc: Any, label: str, detail: str) -> JudgeUnavailable:
        """The error of a request the server redirected to where the HTTP client asked with a GET."""
        response = exc.response
        first = response.history[0] if response.history else response
        message = (
            f"the LLM judge at {self.endpoint} redirected the request for {label} (HTTP "
            f"{first.status_code}) to {redact(str(response.request.url))}; the HTTP client follows such "
            "a redirect with a GET, and a judgment is a POST: set the judge's base URL to the address "
            f"it redirects to (there, HTTP {exc.status_code}: {detail})"
        )
        return with_cause(JudgeUnavailable(message), exc)

    def _adjust_limit(self, request: JudgeRequest, params: dict[str, Any], detail: str) -> bool:
        """Take what a rejection says about the completion limit: another parameter name, a lower
        maximum, or (for this request) what the model's context leaves after the prompt. True when
        ``params`` changed and are worth sending again."""
        current = self.limit_parameter
        other = _OTHER_LIMIT_PARAMETER[current]
        if current not in params:
            return False
        if current in detail and other in detail:
            self.limit_parameter = other
            del params[current]
            params[other] = self.completion_limit(request)
            return True
        match = _LIMIT_TOO_LARGE.search(detail)
        if match is not None:
            maximum = int(match.group(1))
            if 0 < maximum < params[current]:
                self.server_max_tokens = maximum
                params[current] = self.completion_limit(request)
                return True
        match = _CONTEXT_TOO_SMALL.search(detail)
        if match is not None:
            left = int(match.group(1)) - int(match.group(2))
            if 0 < left < params[current]:
                params[current] = left
                return True
        return False

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, MAX_RETRY_AFTER)
        base: float = min(self.retry_backoff * 2.0 ** (attempt - 1), MAX_BACKOFF)
        # Jitter spreads the retries of many concurrent requests hitting the same rate limit.
        return base * (0.75 + random.random() * 0.5)

    def _rejected_message(self, status: int, exc: Any, params: Mapping[str, Any], label: str) -> str:
        detail = server_message(exc)
        prefix = (
            f"the LLM judge at {self.endpoint} rejected the request for {label} (HTTP {status}, not retried)"
        )
        key = "AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN)" if self.azure else "OPENAI_API_KEY"
        if status == 401:
            return f"{prefix}: the API key was not accepted; check {key}. {detail}"
        if status == 429:
            return (
                f"{prefix}: the account of the API key has no quota left; check its plan and billing "
                f"({key}). {detail}"
            )
        if status == 402:  # OpenRouter's and DeepSeek's answer to an account without credit
            return (
                f"{prefix}: the account of the API key has no credit left; check its balance "
                f"({key}). {detail}"
            )
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
            return f"{prefix}: {detail}{self._parameter_hint(detail)}{self._n_hint(exc, params, detail)}"
        return f"{prefix}: {detail}"

    def _n_hint(self, exc: Any, params: Mapping[str, Any], detail: str) -> str:
        """The setting to change when a server refuses several answers in one request (Groq takes only
        n=1; OpenAI at most 128), as it says: the error's ``param``, or ``'n'`` quoted in its words."""
        if "n" not in params:
            return ""
        body = getattr(exc, "body", None)
        if not (isinstance(body, Mapping) and body.get("param") == "n") and not _REFUSED_N.search(detail):
            return ""
        return (
            f"; the server does not take n={params['n']} (several answers to one request): set "
            f"{self.how_to_set('judge_n', 1)}"
        )

    def _parameter_hint(self, detail: str) -> str:
        """The setting to change when a server refuses a sampling parameter it does not take: OpenAI's
        reasoning models take only their default temperature, some servers no seed."""
        refused = _REFUSED_PARAMETER.search(detail)
        if refused is None:
            return ""
        if (refused.group(1) or refused.group(4)).lower() == "seed":
            return f"; to send no seed, set {self.how_to_set('seed', 'none')}"
        return (
            f"; for a model that takes only its default temperature, set "
            f"{self.how_to_set('temperature', 1)} and {self.how_to_set('graded_temperature', 1)}"
        )


#: The judge's turn in a re-ask after an answer that held no text (see OpenAIJudge._judge).
_NO_ANSWER = "(no answer)"


class _Parsed(NamedTuple):
    """A chat completion's choices as read against a request: what decides whether and how the judge
    is asked again, as facts rather than words to search the problems for."""

    #: The choices that parsed and fit the schema.
    choices: list[dict[str, Any]]
    #: What was wrong with each of the others, in the words the judge and the user are shown.
    problems: list[str]
    #: The first bad content, shown to the judge when it is re-asked ("" when none held text).
    bad_content: str
    #: A choice was cut off by the completion limit.
    cut_off: bool
    #: A choice reached the limit thinking, before it gave any answer: asked again under the same
    #: limit, it spends it again.
    thought_out: bool


def _whole(value: Any) -> int | None:
    """``value`` as a whole number of at least 0, or None: ``12.0`` is 12, as JSON means it (a
    server written in Python may send its token counts as floats)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _count(value: Any) -> int:
    """A token count a server reported, as a count: one missing or not a count (text, negative, a
    fraction) is 0, unknown; an absurd one is bounded."""
    return min(_whole(value) or 0, MAX_TOKEN_COUNT)


#: How much of a body that is not JSON to show, from where reading it failed: enough to tell an HTML
#: page, an event stream or what follows the JSON.
SHOWN_BODY = 80


def _not_json(raw: bytes, exc: ValueError) -> str:
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


def _quota_used_up(status: int, exc: Any) -> bool:
    """Is this OpenAI's 429 for an account without quota (``insufficient_quota``)? Not a rate limit:
    no retry, nor any later request of the run, gets past it until someone pays."""
    return status == 429 and "insufficient_quota" in (getattr(exc, "code", None), getattr(exc, "type", None))


def _connection_problem(exc: BaseException) -> str:
    """What went wrong with the connection, in the HTTP client's words: a connection reset or closed
    without an answer has none (``ReadError('')``), so its kind is named instead of ``()``."""
    cause = exc.__cause__ or exc
    text = str(cause).strip()
    if text:
        return text
    return f"{type(cause).__name__}: the connection was closed without an answer"


class _FormatUnsupported(Exception):
    """The server turned down a response format as unsupported (only raised while probing)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def _format_unsupported(status: int, detail: str, server_errors: int, last_try: bool) -> bool:
    """Does this rejection of a structured request mean the server lacks the response format?

    A 400 or 422 that speaks of the response format (and not of a schema over some limit: that one
    is reported as it is); a 500 that speaks of it, or a second 500 in a row, or a 500 with no retry
    left (llama-cpp-python's server answers ``json_schema`` with a bare HTTP 500).
    """
    if status in (400, 422):
        return bool(_UNSUPPORTED_FORMAT.search(detail)) and not _SCHEMA_LIMIT.search(detail)
    if status == 500:
        return bool(_UNSUPPORTED_FORMAT.search(detail)) or server_errors >= 2 or last_try
    return False


def check_base_url(base_url: str | None = None, how_to_set: HowToSet = by_environment) -> None:
    """Raise :class:`ConfigError` when the judge's base URL (``base_url``, else ``OPENAI_BASE_URL``)
    has no ``http://`` or ``https://``: ``localhost:11434/v1`` would fail every judgment after its
    retries, as a connection error. The plugin calls it at startup."""
    url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    if url is None or re.match(r"(?i)\s*https?://", url):
        return
    add_url(url)
    bare = url.strip()
    if "://" in bare:
        bare = bare.split("://", 1)[1]
    fixed = redact(f"http://{bare}")
    where = how_to_set("judge_base_url", fixed) if base_url else f"OPENAI_BASE_URL={fixed}"
    raise ConfigError(
        f"the judge's base URL {redact(url)!r} does not start with http:// or https://: set {where}"
    )


def check_azure_settings(
    endpoint: str | None = None, api_version: str | None = None, how_to_set: HowToSet = by_environment
) -> None:
    """Raise :class:`ConfigError` when an Azure judge could not be built: no endpoint (``endpoint``
    or ``AZURE_OPENAI_ENDPOINT``) or no API version (``api_version`` or ``OPENAI_API_VERSION``).

    The plugin calls it at startup, so a run stops with one usage error instead of failing every test.
    """
    _check_azure(
        endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT") or None,
        api_version or os.environ.get("OPENAI_API_VERSION") or None,
        None,
        how_to_set,
    )


def _azure_resource(endpoint: str) -> str | None:
    """The resource's address when ``endpoint`` is the address of a request (a path with an
    ``openai`` part, or an ``api-version`` in the query), else None."""
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    segments = parts.path.split("/")
    lowered = [segment.lower() for segment in segments]
    if "openai" not in lowered and "api-version" not in parts.query.lower():
        return None
    path = "/".join(segments[: lowered.index("openai")] if "openai" in lowered else segments).rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{path}"


def _check_azure(
    endpoint: str | None, api_version: str | None, base_url: str | None, how_to_set: HowToSet
) -> None:
    """Raise :class:`ConfigError` naming what to set when the Azure settings are incomplete."""
    add_url(endpoint)  # the message may quote them: their secrets are masked
    add_url(base_url)
    missing = []
    if not endpoint:
        missing.append(
            f"the endpoint ({how_to_set('judge_base_url', 'https://<resource>.openai.azure.com')} "
            "or AZURE_OPENAI_ENDPOINT)"
        )
    if not api_version:
        missing.append("the API version (OPENAI_API_VERSION, e.g. 2024-10-21)")
    if missing:
        raise ConfigError("the Azure OpenAI judge needs " + " and ".join(missing))
    assert endpoint is not None  # for mypy: it is among the missing otherwise
    resource = _azure_resource(endpoint)
    if resource is not None:
        # Azure's portal shows a deployment's "target URI", the address of one request: the client
        # adds /openai/deployments/<model>/chat/completions and the api-version to the endpoint, so
        # that one would be asked at .../chat/completions?api-version=.../openai/deployments/..., and
        # its 404 would speak of the model and a base URL.
        raise ConfigError(
            f"the Azure OpenAI endpoint {redact(endpoint)!r} is the address of a request, not of the "
            "resource: the client adds /openai/deployments/<deployment>/chat/completions and the API "
            f"version itself. Set {how_to_set('judge_base_url', redact(resource))} (or "
            "AZURE_OPENAI_ENDPOINT), the API version in OPENAI_API_VERSION and the deployment's name "
            "as the judge model"
        )
    if base_url:
        # The SDK would build its own URL from the endpoint and ignore or reject this one.
        raise ConfigError(
            f"the Azure OpenAI judge takes an endpoint, not a base URL ({base_url!r}): "
            "pass it as azure_endpoint"
        )
