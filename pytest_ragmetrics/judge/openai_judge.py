"""A judge backed by any OpenAI-compatible chat-completions server, through the ``openai`` SDK.

Retries are done here rather than by the SDK (whose ``max_retries`` is set to 0) so that every retry is
counted in :class:`~pytest_ragmetrics.judge.stats.JudgeStats` and failures surface as one clear
:class:`~pytest_ragmetrics.errors.JudgeUnavailable` instead of an SDK traceback: these errors are raised
``from None`` (pytest would otherwise print every frame of the SDK's HTTP stack above our one line),
and the SDK's exception stays available as their ``cause`` attribute for debugging. A 200 response
whose JSON is not shaped like a chat completion counts as a transport failure and is retried. Answers
are read by :mod:`~pytest_ragmetrics.judge.completions` (tolerantly: code fences, JSON inside prose)
and checked against the request's schema; invalid answers are re-asked a bounded number of times.
What a server's failures mean is :mod:`~pytest_ragmetrics.judge.server_errors`'s to say, what the
client is built from :mod:`~pytest_ragmetrics.judge.openai_settings`'s; this module holds what the
judge does: the client, the response format, the retries and the re-asks.

``openai`` is imported on first use only: importing this module stays cheap.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import threading
import time
import warnings
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from .._aio import within
from ..errors import ConfigError, InvalidJudgeAnswer, JudgeCallCapReached, JudgeError, JudgeUnavailable
from ..redact import add_secret, add_url, redact
from .base import HowToSet, JudgeAnswer, JudgeRequest, Usage, by_environment, mark_sent, utc_now
from .completions import content_text, parse_choices, reported_usage, valid_text
from .limits import MAX_COMPLETION_TOKENS, completion_tokens
from .openai_settings import NO_KEY_AGAIN, check_azure, check_base_url, http_client_kwargs, no_key_message
from .server_errors import (
    completion_shape_problem,
    connection_problem,
    format_unsupported,
    never_connected,
    not_json,
    quota_used_up,
    redirect_loop,
    rejected_message,
    retry_after_seconds,
    server_message,
)
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


_Error = TypeVar("_Error", bound=JudgeError)


def with_cause(error: _Error, cause: BaseException | None) -> _Error:
    """``error`` carrying the low-level exception behind it as ``error.cause``.

    Raise the result ``from None``: the message already says what happened, and a chained SDK
    exception would make pytest print hundreds of lines of HTTP-client frames before it.
    """
    # Set on the instance: the error classes are shared with code that has no underlying exception.
    error.cause = cause
    return error


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
            check_azure(azure_endpoint, api_version, base_url, how_to_set)
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
        # Responses the server began, of any status (their headers arrived): a request whose attempts
        # all timed out while this stayed the same met a server that answers nothing (see _create).
        self._answers = 0
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
        return JudgeUnavailable(f"{NO_KEY_AGAIN}; the first judgment that needed one says how to set it")

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
        make = openai.AsyncAzureOpenAI if self.azure else openai.AsyncOpenAI
        client: AsyncOpenAI = make(
            **self._client_settings(), max_retries=0, **http_client_kwargs(openai, self._answered)
        )
        with self._clients_lock:
            # Clients of loops that are gone cannot be closed any more; forget them.
            for old in [old for old in self._clients if old.is_closed()]:
                del self._clients[old]
            self._clients[loop] = client
        return client

    async def _answered(self, response: Any) -> None:
        """Count a response whose headers arrived (the HTTP client's response hook)."""
        self._answers += 1

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
        seconds do; the first one after that tries the network again. Once it answered nothing
        (every attempt of a request timed out while no response of any request began), every later
        request fails at once, as after a refused key.
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
        turned_down: list[_FormatUnsupported] = []
        while True:
            try:
                answer = await self._judge(client, request, mode, probing=True)
            except _FormatUnsupported as exc:
                exc.mode = mode
                turned_down.append(exc)
                mode = _FALLBACK[mode]
                continue
            except JudgeUnavailable as exc:
                if not turned_down or isinstance(exc, JudgeCallCapReached):
                    raise
                # Said with the requests the formats turned down took: the judgment cost them too,
                # and a server that turned each down alike may be failing rather than without them.
                also = (
                    f", and {sum(t.attempts for t in turned_down)} before with "
                    + " and ".join(t.mode for t in turned_down)
                    + ", which the server turned down ("
                    + "; ".join(t.detail for t in turned_down)
                    + ")"
                )
                raise with_cause(JudgeUnavailable(f"{exc}{also}"), exc.cause) from None
            self.active_format = mode
            if turned_down:
                self.fallback_reason = "the server turned down " + "; then ".join(
                    f"{t.mode} ({t.detail})" for t in turned_down
                )
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

        make = openai.AzureOpenAI if self.azure else openai.OpenAI
        return make(**self._client_settings(), max_retries=self.max_retries)

    def _client_settings(self) -> dict[str, Any]:
        """What an ``openai`` client of this judge is built with, live or for a batch: the key, the
        base URL (for Azure, the endpoint and the API version, checked again in case they were
        changed after construction: the SDK's own check would surface as a bare ValueError) and the
        timeout."""
        if not self.azure:
            return {"api_key": self._api_key, "base_url": self.base_url, "timeout": self.timeout}
        check_azure(self.azure_endpoint, self.api_version, self.base_url, self.how_to_set)
        return {
            "api_key": self._api_key,
            "azure_endpoint": self.azure_endpoint,
            "api_version": self.api_version,
            "timeout": self.timeout,
        }

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
        parsed = parse_choices(request, body, self._sent_limit, self.how_to_set)
        if parsed.problems:
            shown = "; ".join(parsed.problems[:5])
            raise InvalidJudgeAnswer(f"judge answer for {label} is invalid: {shown}")
        return JudgeAnswer(
            choices=tuple(parsed.choices),
            # Bounded as a live answer's: an absurd count would swamp every total it is added to.
            usage=reported_usage(body),
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

    def _sent_limit(self, request: JudgeRequest) -> str:
        """The completion limit sent with ``request`` as a problem names it (``max_tokens=512``)."""
        return f"{self.limit_parameter}={self.completion_limit(request)}"

    async def _judge(
        self, client: AsyncOpenAI, request: JudgeRequest, mode: str, probing: bool = False
    ) -> JudgeAnswer:
        messages = self._messages(request, mode)
        label = request.label or request.kind
        usage = Usage()
        for attempt in range(self.max_reasks + 1):
            # _create only returns bodies whose shape completion_shape_problem() accepted.
            body = await self._create(client, request, self._params(request, messages, mode), probing)
            spent = reported_usage(body)
            usage = usage + spent
            self.stats.record_call(spent, estimate=self._estimate(spent, messages, body))
            parsed = parse_choices(request, body, self._sent_limit, self.how_to_set)
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
        timeouts = 0
        answers_before = self._answers
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
                if exc.response.request.method != "POST" or (
                    status in (401, 403) and _key_left_behind(exc.response)
                ):
                    # Redirected (301, 302, 303: from http:// to https://, say): the HTTP client
                    # followed with a GET; or (307, 308) to another host, where it sends no key,
                    # and the key is asked for. No retry changes either. (A server there that
                    # needs no key and is busy is retried, as any busy server.)
                    raise self._remember_failure("", self._redirected(exc, label, detail)) from None
                if status in (400, 422) and adjusted < 2 and self._adjust_limit(request, params, detail):
                    adjusted += 1
                    continue  # the same request, with the limit the server wants: not a retry
                if probing and "response_format" in params:
                    server_errors += status == 500
                    last_try = attempt >= self.max_retries
                    kind = params["response_format"]["type"]
                    if format_unsupported(status, detail, server_errors, last_try, kind):
                        raise _FormatUnsupported(f"HTTP {status}: {detail}", attempt + 1) from None
                if (status < 500 and status not in (408, 429)) or quota_used_up(status, exc):
                    message = rejected_message(
                        status, exc, params, label, self.endpoint, self.azure, self.how_to_set
                    )
                    error = with_cause(JudgeUnavailable(message), exc)
                    if status in (401, 402, 429):
                        error = self._remember_failure("", error)  # the key or its account: every model
                    elif status in (403, 404):
                        error = self._remember_failure(model, error)
                    raise error from None
                retry_after = retry_after_seconds(dict(exc.response.headers), body=exc.body)
                what = f"HTTP {status}" + (" (rate limited)" if status == 429 else "") + f": {detail}"
                last = exc
            except (openai.APITimeoutError, asyncio.TimeoutError) as exc:
                what = f"timed out after {self.timeout:g}s"
                last = exc
                timeouts += 1
            except openai.APIConnectionError as exc:
                looped_to = redirect_loop(exc)
                if looped_to is not None:
                    message = (
                        f"the LLM judge at {self.endpoint} redirected the request for {label} more times "
                        f"than the HTTP client follows (a redirect loop), the last time to {looped_to}: set "
                        "the judge's base URL to the address that answers"
                    )
                    raise self._remember_failure("", with_cause(JudgeUnavailable(message), exc)) from None
                what = f"connection error ({connection_problem(exc)})"
                last = exc
                unreachable = never_connected(exc)
            except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                if raw.lstrip().startswith((b"data:", b"event:", b"id:", b"retry:", b":")):
                    # An event stream answering a request that asked for none (its fields, or a comment
                    # line first, as OpenRouter sends): a server that only streams, which answers every
                    # retry and every judgment alike. No JSON body starts so.
                    message = (
                        f"the LLM judge at {self.endpoint} answered the request for {label} with an event "
                        "stream (data: lines), which a request for a whole answer does not ask for: the "
                        "server only streams. Judge with a server or model that answers without streaming"
                    )
                    raise self._remember_failure(model, with_cause(JudgeUnavailable(message), exc)) from None
                # A 200 whose body is not JSON: treat like a flaky server.
                what = f"malformed response body ({not_json(raw, exc)})"
                last = exc
            except RecursionError as exc:  # JSON nested deeper than Python reads: not an answer either
                what = "malformed response body (nested too deeply to read)"
                last = exc
            # A wait longer than a run waits (an Azure daily quota: "retry after 86400 seconds") is not
            # waited out in pieces, once per retry: the judgment fails now, saying so.
            too_long = retry_after is not None and retry_after > MAX_RETRY_AFTER
            if attempt >= self.max_retries or too_long:
                if timeouts > attempt and self._answers == answers_before:
                    # Every attempt timed out and no request of this judge got any answer meanwhile,
                    # not even the first bytes of one: not a slow server (one answering others, or
                    # sending its answer slowly, would have), one that answers nothing.
                    # Each later judgment would wait as long for nothing: they fail at once. Requests
                    # already sent wait out their own timeout (an answer that comes is kept), then
                    # send no other attempt.
                    silent = with_cause(JudgeUnavailable(self._not_answering(label, attempt + 1)), last)
                    raise self._remember_failure("", silent) from None
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

    def _not_answering(self, label: str, attempts: int) -> str:
        """The message of a server that answered none of a judgment's attempts, nor anything else."""
        longer = self.how_to_set("timeout", format(2 * self.timeout, "g"))
        more = self.how_to_set("max_retries", self.max_retries + 2)
        return (
            f"the LLM judge at {self.endpoint} is not answering: the request for {label} timed out after "
            f"{self.timeout:g}s on each of its {attempts} attempt(s), and no other request got an answer "
            "from it meanwhile. Check that the server at that address is up and serving (not stuck, "
            f"not still loading its model); a server that is only slow needs a longer timeout, set "
            f"{longer}, or more retries, set {more}"
        )

    def _redirected(self, exc: Any, label: str, detail: str) -> JudgeUnavailable:
        """The error of a request the server redirected to where the HTTP client asked with a GET, or
        without the API key."""
        response = exc.response
        first = response.history[0] if response.history else response
        if response.request.method != "POST":
            why = "; the HTTP client follows such a redirect with a GET, and a judgment is a POST"
        else:
            why = (
                ", another host, to which the HTTP client sends no API key (it keeps a key to the host "
                "it was given for)"
            )
        message = (
            f"the LLM judge at {self.endpoint} redirected the request for {label} (HTTP "
            f"{first.status_code}) to {redact(str(response.request.url))}{why}: set the judge's base "
            f"URL to the address it redirects to (there, HTTP {exc.status_code}: {detail})"
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


def _key_left_behind(response: Any) -> bool:
    """Whether ``response`` came from where a redirect took the request without the key it set out
    with: the HTTP client drops the ``Authorization`` header on the way to another host."""
    if not response.history:
        return False
    return "authorization" in response.history[0].request.headers and (
        "authorization" not in response.request.headers
    )


#: The judge's turn in a re-ask after an answer that held no text (see OpenAIJudge._judge).
_NO_ANSWER = "(no answer)"


class _FormatUnsupported(Exception):
    """The server turned down a response format as unsupported (only raised while probing)."""

    def __init__(self, detail: str, attempts: int) -> None:
        super().__init__(detail)
        self.detail = detail
        #: The requests sent in the format before it was turned down.
        self.attempts = attempts
        #: The format turned down (set by the judge, which knows it).
        self.mode = ""
