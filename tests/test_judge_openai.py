"""OpenAIJudge through the real openai client over HTTP against the local FakeJudgeServer."""

from __future__ import annotations

import asyncio
import email.utils
import json
import threading
import time
import traceback
import warnings
from typing import Any

import pytest
from judge_requests import SCHEMA, make_request

from pytest_ragmetrics.errors import ConfigError, InvalidJudgeAnswer, JudgeUnavailable, RagMetricsWarning
from pytest_ragmetrics.judge.base import JudgeRequest, Usage
from pytest_ragmetrics.judge.budget import JudgeBudget
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.completions import parse_json_answer
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.openai_settings import check_azure_settings, http_client_kwargs
from pytest_ragmetrics.judge.server_errors import retry_after_seconds
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value, default_responder


def make_judge(server: FakeJudgeServer, **kwargs: Any) -> OpenAIJudge:
    options: dict[str, Any] = {
        "api_key": "sk-dummy",
        "base_url": server.base_url,
        "timeout": 5.0,
        "max_retries": 2,
        "retry_backoff": 0.01,
    }
    options.update(kwargs)
    return OpenAIJudge(**options)


def run_judge(judge: OpenAIJudge | CachedJudge, *requests: JudgeRequest) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return list(await asyncio.gather(*(judge.judge(r) for r in requests)))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_answer_comes_back_validated_with_usage_and_reported_model(fake_judge_server):
    fake_judge_server.responder = lambda body: {"reason": "names the capital", "useful": False}
    fake_judge_server.reported_model = "judge-model-2025-01-01"
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "names the capital", "useful": False},)
    assert answer.model == "judge-model-2025-01-01"
    assert answer.source == "judge"
    assert answer.usage.prompt_tokens > 0 and answer.usage.completion_tokens > 0
    assert answer.judged_at.endswith("Z")
    assert stats.calls == 1
    assert stats.prompt_tokens == answer.usage.prompt_tokens
    assert stats.retries == stats.reasks == stats.errors == 0


def test_request_carries_strict_schema_sampling_parameters_and_the_key(fake_judge_server):
    run_judge(make_judge(fake_judge_server, api_key="sk-sent-as-bearer"), make_request(seed=7))
    [sent] = fake_judge_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "judge-model"
    assert sent.body["temperature"] == 0.0
    assert sent.body["seed"] == 7
    assert sent.body["messages"][1]["content"] == "Is chunk 0 useful to answer the question?"
    assert sent.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "chunk_verdict", "strict": True, "schema": SCHEMA},
    }
    assert sent.authorization == "Bearer sk-sent-as-bearer"
    assert "sk-sent-as-bearer" not in repr(sent)


def test_n_choices_are_all_returned(fake_judge_server):
    answers = iter([True, False, True])
    fake_judge_server.responder = lambda body: {"reason": "r", "useful": next(answers)}
    [answer] = run_judge(make_judge(fake_judge_server), make_request(n=3))
    assert [c["useful"] for c in answer.choices] == [True, False, True]
    assert fake_judge_server.requests[0].body["n"] == 3


def test_concurrent_slow_requests_overlap_instead_of_queueing(fake_judge_server):
    """The server holds every request until all 32 are in flight at once: a client that sent them
    one after another would never get there (the wait's timeout only bounds how long that failure
    takes to show)."""
    all_in = threading.Barrier(32)

    def responder(body: dict[str, Any]) -> dict[str, Any] | str:
        all_in.wait(timeout=30)
        return default_responder(body)

    fake_judge_server.responder = responder
    # json_schema, not auto: auto sends its first request alone to find out the server's format.
    judge = make_judge(fake_judge_server, response_format="json_schema", timeout=60.0, max_retries=0)
    answers = run_judge(judge, *(make_request(i) for i in range(32)))
    assert len(answers) == 32
    assert not all_in.broken
    assert fake_judge_server.max_in_flight == 32


def test_requests_started_together_leave_one_at_a_time(fake_judge_server, monkeypatch):
    """The SDK writes a request's headers, lets the event loop run what else is ready, then writes
    its body: the next request is built in a later pass of the loop, once that body has gone, so
    the judge gets each request as it leaves rather than every one after the last one's headers."""
    import openai

    passes = 0
    started: list[tuple[int, str]] = []  # (pass of the loop, request) as each SDK call starts
    post = openai.AsyncOpenAI.post

    async def counted_post(self: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        started.append((passes, kwargs["body"]["messages"][-1]["content"]))
        return await post(self, path, *args, **kwargs)

    monkeypatch.setattr(openai.AsyncOpenAI, "post", counted_post)
    judge = make_judge(fake_judge_server, response_format="json_schema")
    requests = [make_request(i) for i in range(4)]

    async def go() -> list[Any]:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            nonlocal passes
            passes += 1
            if not done.done():
                loop.call_soon(tick)

        done = loop.create_future()
        loop.call_soon(tick)
        try:
            return list(await asyncio.gather(*(judge.judge(r) for r in requests)))
        finally:
            done.set_result(None)
            await judge.aclose()

    answers = asyncio.run(go())
    assert len(answers) == 4 and fake_judge_server.request_count == 4
    order = [content for _, content in started]
    assert order == [r.messages[-1]["content"] for r in requests]  # in the order they were asked
    at = [p for p, _ in started]
    assert at == sorted(set(at)), at  # each in a pass of its own, later than the one before


def test_a_request_waiting_for_its_turn_to_leave_is_neither_paid_nor_sent_once_nobody_waits(
    fake_judge_server,
):
    """Waiting for its turn, a request has taken no call from the spending cap and is not marked as
    sent: when the score waiting for it is cancelled (a failed sibling, -x, Ctrl-C), it is dropped
    there, and the calls judged that the run's last line counts leave it out: it cost nothing."""
    stats = JudgeStats()
    inner = make_judge(fake_judge_server, stats=stats, response_format="json_schema")
    judge = CachedJudge(lambda: inner, mode="off", stats=stats)

    async def go() -> None:
        turn = inner._lock_of(inner._turns)
        await turn.acquire()  # another request's turn, held while this one asks
        try:
            waiting = asyncio.ensure_future(judge.judge(make_request()))
            while stats.live() == (0, 0):
                await asyncio.sleep(0)  # until it is asked of the judge: it waits for its turn
            assert stats.live() == (0, 1) and judge.in_flight() == 0  # not sent
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            while judge._requests:
                await asyncio.sleep(0)  # its task, nobody waiting for it, is dropped
        finally:
            turn.release()
        await judge.aclose()

    asyncio.run(go())
    assert fake_judge_server.request_count == 0
    assert stats.calls == 0
    assert stats.live() == (0, 0)


def bounded(judge: OpenAIJudge, concurrency: int) -> CachedJudge:
    """The judge behind the one concurrency bound, as the engine puts it (nothing read or written)."""
    return CachedJudge(lambda: judge, mode="off", stats=judge.stats, concurrency=concurrency)


def test_the_cached_judge_bounds_the_requests_in_flight(fake_judge_server):
    fake_judge_server.delay(0.05)
    run_judge(bounded(make_judge(fake_judge_server), 3), *(make_request(i) for i in range(12)))
    assert fake_judge_server.request_count == 12
    assert fake_judge_server.max_in_flight <= 3


def test_rate_limit_is_retried_after_the_retry_after_delay(fake_judge_server):
    fake_judge_server.fail_next(429, headers={"Retry-After": "1"})
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices[0]["useful"] is True
    assert stats.retries == 1
    assert stats.calls == 1
    assert fake_judge_server.request_count == 2
    # The retry waited as the server asked (a loaded machine can only make the gap longer).
    gap = fake_judge_server.requests[1].received_at - fake_judge_server.requests[0].received_at
    assert gap >= 0.9, gap


@pytest.mark.parametrize("headers", [{"Retry-After": "86400"}, {"retry-after-ms": "61000"}])
def test_a_retry_after_longer_than_a_run_waits_fails_at_once(fake_judge_server, headers):
    """Azure's daily quota: "Please retry after 86400 seconds". Waiting 60 s per retry helps no one."""
    fake_judge_server.fail_next(429, headers=headers, times=3)
    stats = JudgeStats()
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=2, stats=stats), make_request())
    wait = float(headers.get("Retry-After") or int(headers["retry-after-ms"]) / 1000)
    assert (
        f"the server asks to wait {wait:g}s before another attempt, longer than a run waits (60s); "
        in str(info.value)
    )
    assert "gave up after 1 attempt(s)" in str(info.value)
    assert fake_judge_server.request_count == 1 and stats.retries == 0


def _gemini_quota_error(delay: str) -> dict[str, Any]:
    """Gemini's 429 as its OpenAI-compatible endpoint sends it: how long to wait is in its details."""
    return {
        "error": {
            "code": 429,
            "message": "You exceeded your current quota, please check your plan and billing details.",
            "status": "RESOURCE_EXHAUSTED",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay},
            ],
        }
    }


@pytest.mark.parametrize("listed", [False, True], ids=["an object", "a list of one"])
def test_a_retry_delay_in_the_error_body_is_honoured_as_retry_after_is(fake_judge_server, listed):
    """Gemini says how long to wait in the body of its 429 (google.rpc.RetryInfo), not in a header,
    its error sent as an object or a list of one: a delay longer than a run waits fails at once, as
    a Retry-After does, where it was retried at once, three times, each refused again."""
    body: Any = _gemini_quota_error("86400s")
    fake_judge_server.fail_next(429, body=[body] if listed else body, times=3)
    stats = JudgeStats()
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=2, stats=stats), make_request())
    assert "the server asks to wait 86400s before another attempt, longer than a run waits" in str(info.value)
    assert fake_judge_server.request_count == 1 and stats.retries == 0


def test_retry_delays_are_read_from_headers_then_from_a_retry_info_in_the_body():
    """The body as the SDK keeps it: an error object's content, or a list of error objects whole."""
    assert retry_after_seconds({}, body=_gemini_quota_error("12s")["error"]) == 12.0
    assert retry_after_seconds(None, body=[_gemini_quota_error("0.5s")]) == 0.5
    assert retry_after_seconds({"Retry-After": "3"}, body=_gemini_quota_error("12s")["error"]) == 3.0
    assert retry_after_seconds({}, body=_gemini_quota_error("soon")["error"]) is None
    assert retry_after_seconds({}, body={"message": "slow down"}) is None
    assert retry_after_seconds({}, body="rate limited") is None


def test_server_error_is_retried(fake_judge_server):
    fake_judge_server.fail_next(500)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices
    assert stats.retries == 1
    assert fake_judge_server.request_count == 2


def test_exhausted_retries_raise_judge_unavailable_saying_what_happened(fake_judge_server):
    fake_judge_server.fail_next(503, times=10)
    stats = JudgeStats()
    judge = make_judge(fake_judge_server, max_retries=2, stats=stats)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(judge, make_request())
    message = str(info.value)
    assert "HTTP 503" in message
    assert "3 attempt(s)" in message
    assert fake_judge_server.base_url in message
    assert "test_rag[sample-0] chunk 1" in message
    assert fake_judge_server.request_count == 3
    assert stats.retries == 2
    assert stats.errors == 1
    assert stats.calls == 0


@pytest.mark.parametrize(("status", "hint"), [(401, "OPENAI_API_KEY"), (404, "model 'judge-model'")])
def test_client_errors_fail_at_once_with_a_clear_message(fake_judge_server, status, hint):
    fake_judge_server.fail_next(status, times=5)
    stats = JudgeStats()
    with pytest.raises(JudgeUnavailable, match=f"HTTP {status}") as info:
        run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert hint in str(info.value)
    assert fake_judge_server.request_count == 1
    assert stats.retries == 0


def test_explicit_json_schema_on_a_server_without_it_fails_and_suggests_auto(fake_judge_server):
    fake_judge_server.fail_next(400, body={"error": {"message": "response_format not supported"}})
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, response_format="json_schema"), make_request())
    message = str(info.value)
    assert "does not support the json_schema response format: response_format not supported" in message
    assert "--rag-response-format=auto" in message
    assert fake_judge_server.request_count == 1


def test_a_bad_request_for_another_reason_quotes_the_server_without_a_format_hint(fake_judge_server):
    """The hint names the real cause: here the server's own message, nothing about response formats."""
    error = {"error": {"message": "This model's maximum context length is 8192 tokens.", "type": "x"}}
    fake_judge_server.fail_next(400, body=error)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server), make_request())
    message = str(info.value)
    assert message.endswith("(HTTP 400, not retried): This model's maximum context length is 8192 tokens.")
    assert "response format" not in message


@pytest.mark.parametrize(
    ("status", "body", "hint"),
    [
        (
            400,
            {
                "error": {
                    "message": "Unsupported value: 'temperature' does not support 0.0 with this model. "
                    "Only the default (1) value is supported.",
                    "type": "invalid_request_error",
                    "param": "temperature",
                    "code": "unsupported_value",
                }
            },
            "; for a model that takes only its default temperature, set RAGMETRICS_TEMPERATURE=1 and "
            "RAGMETRICS_GRADED_TEMPERATURE=1",
        ),
        (
            422,
            {
                "detail": [
                    {
                        "type": "extra_forbidden",
                        "loc": ["body", "seed"],
                        "msg": "Extra inputs are not permitted",
                    }
                ]
            },
            "; to send no seed, set RAGMETRICS_SEED=none",
        ),
        (
            400,
            {
                "error": {
                    "message": "litellm.UnsupportedParamsError: openai does not support parameters: "
                    "['seed'], for model=o3-mini. To drop these, set `litellm.drop_params=True` or for "
                    "proxy:\n\n`litellm_settings:\n drop_params: true`\n",
                    "type": None,
                    "param": None,
                    "code": "400",
                }
            },
            "; to send no seed, set RAGMETRICS_SEED=none",
        ),
        (
            400,
            {
                "error": {
                    "message": "litellm.UnsupportedParamsError: O-series models don't support "
                    "temperature=0.0. Only temperature=1 is supported.",
                    "code": "400",
                }
            },
            "; for a model that takes only its default temperature, set RAGMETRICS_TEMPERATURE=1 and "
            "RAGMETRICS_GRADED_TEMPERATURE=1",
        ),
    ],
    ids=[
        "OpenAI's reasoning models and the temperature",
        "a FastAPI server and the seed",
        "a LiteLLM proxy and the seed",
        "a LiteLLM proxy and the temperature",
    ],
)
def test_a_refused_sampling_parameter_names_the_setting_to_change(fake_judge_server, status, body, hint):
    fake_judge_server.fail_next(status, body=body)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, response_format="json_schema"), make_request())
    assert f"(HTTP {status}, not retried): " in str(info.value)
    assert str(info.value).endswith(hint)


@pytest.mark.parametrize(
    "error",
    [
        {"message": "openai does not support parameters: ['n'], for model=groq/llama", "type": None},
        {"message": "Invalid value for this parameter.", "type": "invalid_request_error", "param": "n"},
    ],
    ids=["the parameter quoted", "the error's param"],
)
def test_a_refused_n_names_the_setting_to_change(fake_judge_server, error):
    """Groq takes only n=1: the 400 quoted the server and named nothing to set."""
    fake_judge_server.fail_next(400, body={"error": error})
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server), make_request(n=3))
    assert str(info.value).endswith(
        "; the server does not take n=3 (several answers to one request): set RAGMETRICS_JUDGE_N=1"
    )


def test_timeout_is_retried_then_reported(fake_judge_server):
    fake_judge_server.hang_next(seconds=3.0)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, timeout=0.3, stats=stats), make_request())
    assert answer.choices
    assert stats.retries == 1

    fake_judge_server.hang_next(seconds=3.0, times=2)
    # Each attempt gave up at its timeout, not at the server's answer: the message says so (and, as
    # nothing else was answered meanwhile, that the server is not answering).
    with pytest.raises(JudgeUnavailable, match=r"timed out after 0\.3s on each of its 2 attempt"):
        run_judge(make_judge(fake_judge_server, timeout=0.3, max_retries=1), make_request(1))


def test_a_server_sending_its_answer_slowly_times_out_at_the_timeout_as_a_whole(fake_judge_server):
    # A byte every 0.2 s: no wait between two reads comes near the timeout, but the answer would
    # take over a minute to arrive. The timeout bounds a request, not the gap between its bytes.
    fake_judge_server.drip_next(seconds=0.2, times=2)
    with pytest.raises(JudgeUnavailable, match=r"timed out after 0\.5s; gave up after 2 attempt"):
        run_judge(make_judge(fake_judge_server, timeout=0.5, max_retries=1), make_request())
    # Given up on, the next request on the same client is answered at once.
    [answer] = run_judge(make_judge(fake_judge_server, timeout=0.5), make_request(1))
    assert answer.choices


def test_connection_refused_is_judge_unavailable():
    with FakeJudgeServer() as server:
        base_url = server.base_url
    judge = OpenAIJudge(api_key="sk-dummy", base_url=base_url, max_retries=1, retry_backoff=0.01)
    with pytest.raises(JudgeUnavailable, match="connection error") as info:
        run_judge(judge, make_request())
    assert base_url in str(info.value)


def test_malformed_http_body_is_retried(fake_judge_server):
    fake_judge_server.malformed_next()
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices
    assert stats.retries == 1


def test_malformed_http_bodies_exhaust_retries(fake_judge_server):
    fake_judge_server.malformed_next(times=3)
    with pytest.raises(JudgeUnavailable, match="malformed response body"):
        run_judge(make_judge(fake_judge_server, max_retries=2), make_request())


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"", "(empty)"),
        (b'{"id": 1}garbage', "(not JSON: Extra data (character 9): 'garbage')"),
        (
            b'{"id": 1, ',
            "(not JSON: Expecting property name enclosed in double quotes (character 10): the body ends",
        ),
        (
            b"<html><body>Sign in</body></html>",
            "(not JSON: Expecting value (character 0): '<html><body>Sign in",
        ),
        (
            b"<!DOCTYPE html><html><head><title>Sign in &middot; Proxy</title><style>x{}</style>",
            "(not JSON: an HTML page: 'Sign in \u00b7 Proxy')",
        ),
        (b'{"a": "\xff"}', "(not UTF-8 text: invalid start byte at byte 7)"),
    ],
    ids=[
        "empty",
        "trailing garbage",
        "cut short",
        "an HTML page",
        "an HTML page with a title",
        "not UTF-8",
    ],
)
def test_a_body_that_is_not_json_is_reported_with_what_it_holds(fake_judge_server, body, said):
    fake_judge_server.malformed_next(body=body, times=2)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=1), make_request())
    assert f"malformed response body {said}" in str(info.value)


def test_a_server_that_answers_with_an_event_stream_is_asked_once_per_run():
    """A server that only streams (text/event-stream to a request that asked for no stream) answers
    every retry alike: the first judgment says so at once and the others fail without asking, where
    each was sent again and again as to a flaky server and then reported as a malformed body."""
    chunk = {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": "{"}}]}
    # OpenRouter opens its streams with a comment line; others with an id or retry field.
    for opening in ("", ": OPENROUTER PROCESSING\n\n", "id: 1\n", "retry: 3000\n"):
        server = FakeJudgeServer().start()
        try:
            stream = f"{opening}data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
            server.malformed_next(body=stream, times=10)
            errors = run_each(make_judge(server), *(make_request(i) for i in range(3)))
        finally:
            server.stop()
        assert len(errors) == 3 and server.request_count == 1, opening
    assert (
        "with an event stream (data: lines), which a request for a whole answer does not ask for: the "
        "server only streams" in str(errors[0])
    )
    assert all("fail without asking" in str(e) for e in errors[1:])


@pytest.mark.parametrize(
    ("status", "body", "said"),
    [
        (
            400,
            b'{"error": {"message": "bad input \\ud800 here"}}',
            "(HTTP 400, not retried): bad input \ufffd here",
        ),
        (
            200,
            b'{"bad \xed\xa0\x80',
            "(not JSON: Unterminated string starting at (character 1): '\"bad \ufffd')",
        ),
    ],
    ids=["in an error message", "where reading failed"],
)
def test_half_an_escaped_pair_in_what_a_server_says_is_replaced_in_the_error(
    fake_judge_server, status, body, said
):
    """A lone surrogate in an error could not be written to a report: the run ended in a traceback."""
    fake_judge_server.fail_next(status, body=body, times=2)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=1), make_request())
    assert said in str(info.value)
    str(info.value).encode("utf-8")  # a report can hold it


def test_control_characters_in_what_a_server_says_are_escaped_in_the_error(fake_judge_server):
    """A server's words (a proxy's, vLLM's echoing the request's text) reach the terminal in the
    test's failure: ESC and BEL are escaped as a judge's reasons are, where they could colour or
    clear the screen."""
    fake_judge_server.fail_next(400, body={"error": {"message": "bad \x1b[2J\x1b[31mrequest\x07 here"}})
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server), make_request())
    assert "bad \\x1b[2J\\x1b[31mrequest\\x07 here" in str(info.value)
    assert str(info.value).isprintable()


CDN_PAGE = (
    '<!DOCTYPE html>\n<!--[if lt IE 7]> <html class="no-js ie6 oldie" lang="en-US"> <![endif]-->\n<head>\n'
    + "<style>"
    + "body{margin:0}" * 100
    + "</style>\n"
    + "<title>judge.example.com | 524: A timeout occurred</title></head><body>...</body></html>"
)


@pytest.mark.parametrize(
    ("status", "page", "said"),
    [
        (524, CDN_PAGE, "HTTP 524: an HTML page: 'judge.example.com | 524: A timeout occurred'; gave up"),
        (
            413,
            "<html><body><h1>413 Request Entity <b>Too Large</b></h1></body></html>",
            "(HTTP 413, not retried): an HTML page: '413 Request Entity Too Large'",
        ),
    ],
)
def test_an_html_error_page_is_quoted_by_its_title_or_heading(fake_judge_server, status, page, said):
    """A proxy's or a CDN's error page starts with markup and styles: its title says what happened."""
    fake_judge_server.fail_next(status, body=page, times=2)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=1), make_request())
    assert said in str(info.value)


def test_an_error_sent_in_a_list_is_quoted_by_its_message(fake_judge_server):
    """Gemini's OpenAI-compatible endpoint: ``[{"error": {...}}]``, which read as "Error code: 400"."""
    refused = {"code": 400, "message": 'Invalid JSON payload received. Unknown name "seed": Cannot find field.'}
    fake_judge_server.fail_next(400, body=[{"error": {**refused, "status": "INVALID_ARGUMENT"}}])
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server), make_request())
    assert str(info.value).endswith(
        '(HTTP 400, not retried): Invalid JSON payload received. Unknown name "seed": Cannot find field.; '
        "to send no seed, set RAGMETRICS_SEED=none"
    )
    overloaded = {"code": 503, "message": "The model is overloaded.", "status": "UNAVAILABLE"}
    fake_judge_server.fail_next(503, body=[{"error": overloaded}], times=3)
    with pytest.raises(JudgeUnavailable, match=r"HTTP 503: The model is overloaded\.; gave up after 3"):
        run_judge(make_judge(fake_judge_server), make_request())


def test_a_body_nested_too_deeply_to_read_is_a_malformed_body(fake_judge_server):
    # JSON nested deeper than Python's recursion limit raises RecursionError, not a decode error.
    deep = b"[" * 100_000 + b"]" * 100_000
    fake_judge_server.malformed_next(body=deep)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices
    assert stats.retries == 1
    fake_judge_server.malformed_next(body=deep, times=2)
    with pytest.raises(JudgeUnavailable, match=r"malformed response body \(nested too deeply to read\)"):
        run_judge(make_judge(fake_judge_server, max_retries=1), make_request())


@pytest.mark.parametrize("body", [{}, [1, 2], "<html>bad gateway</html>"])
def test_a_200_that_is_not_a_chat_completion_is_retried(fake_judge_server, body):
    fake_judge_server.fail_next(200, body=body)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices
    assert stats.retries == 1
    assert stats.reasks == 0


def test_invalid_answer_is_reasked_with_the_error_then_accepted(fake_judge_server):
    answers = iter([{"reason": "r", "useful": "yes"}, {"reason": "r", "useful": True}])
    fake_judge_server.responder = lambda body: next(answers)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "r", "useful": True},)
    assert stats.reasks == 1
    assert stats.calls == 2
    # Usage of both attempts is the cost of this judgment.
    assert answer.usage.prompt_tokens == stats.prompt_tokens
    followup = fake_judge_server.requests[1].body["messages"]
    assert followup[-2] == {"role": "assistant", "content": json.dumps({"reason": "r", "useful": "yes"})}
    assert "expected true or false" in followup[-1]["content"]


def test_exhausted_reasks_raise_invalid_judge_answer_naming_the_label(fake_judge_server):
    fake_judge_server.responder = lambda body: "I cannot decide."
    stats = JudgeStats()
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=2, stats=stats), make_request())
    assert "test_rag[sample-0] chunk 1" in str(info.value)
    assert "no JSON object" in str(info.value)
    assert fake_judge_server.request_count == 3
    assert stats.reasks == 2
    assert stats.errors == 1


def test_a_server_that_ignores_n_is_not_reasked_and_the_error_says_to_set_judge_n_to_1(fake_judge_server):
    fake_judge_server.malformed_next(body=completion_body())  # one choice, as Ollama answers n=3
    stats = JudgeStats()
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, stats=stats), make_request(n=3, temperature=0.7))
    assert "is invalid after 1 attempt(s) (0 re-ask(s)): expected 3 choice(s), got 1; " in str(info.value)
    assert "it may not support n, so set RAGMETRICS_JUDGE_N=1" in str(info.value)
    assert fake_judge_server.request_count == 1 and stats.reasks == 0


def test_json_object_mode_parses_prose_and_code_fences(fake_judge_server):
    fake_judge_server.responder = lambda body: (
        'Sure! Here is my verdict:\n```json\n{"reason": "fenced", "useful": false}\n```\nHope it helps.'
    )
    [answer] = run_judge(make_judge(fake_judge_server, response_format="json_object"), make_request())
    assert answer.choices == ({"reason": "fenced", "useful": False},)
    body = fake_judge_server.requests[0].body
    assert body["response_format"] == {"type": "json_object"}
    assert '"additionalProperties": false' in body["messages"][0]["content"]


@pytest.mark.parametrize("response_format", ["json_object", "text"])
def test_loose_modes_put_the_schema_in_the_system_message_reason_first(fake_judge_server, response_format):
    """The user message stays data only; the schema shown keeps "reason" before the verdict."""
    request = make_request()
    run_judge(make_judge(fake_judge_server, response_format=response_format), request)
    system, user = fake_judge_server.requests[0].body["messages"]
    assert user == request.messages[1]
    assert system["role"] == "system"
    assert system["content"].startswith(request.messages[0]["content"])
    shown = json.loads(system["content"].split("```json")[1].split("```")[0])
    assert shown == SCHEMA
    assert list(shown["properties"]) == ["reason", "useful"]
    assert list(shown) == list(SCHEMA)


def test_loose_modes_add_a_system_message_when_the_request_has_none(fake_judge_server):
    request = make_request(messages=({"role": "user", "content": "Judge this."},))
    run_judge(make_judge(fake_judge_server, response_format="json_object"), request)
    system, user = fake_judge_server.requests[0].body["messages"]
    assert system["role"] == "system" and "JSON schema" in system["content"]
    assert user == {"role": "user", "content": "Judge this."}


def test_text_mode_sends_no_response_format_and_finds_json_in_prose(fake_judge_server):
    fake_judge_server.responder = lambda body: (
        'I think {"reason": "the chunk {mentions} it", "useful": true} is right.'
    )
    [answer] = run_judge(make_judge(fake_judge_server, response_format="text"), make_request())
    assert answer.choices == ({"reason": "the chunk {mentions} it", "useful": True},)
    assert "response_format" not in fake_judge_server.requests[0].body


def test_default_fake_answer_follows_schema_in_text_mode(fake_judge_server):
    [answer] = run_judge(make_judge(fake_judge_server, response_format="text"), make_request())
    assert answer.choices == ({"reason": "fake judge", "useful": True},)


def test_no_api_key_fails_before_any_request(fake_judge_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = OpenAIJudge(base_url=fake_judge_server.base_url)
    assert not judge.has_credentials()
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(judge, make_request())
    message = str(info.value)
    assert "OPENAI_API_KEY" in message
    assert "OPENAI_BASE_URL" in message
    assert "RAGMETRICS_CACHE=replay" in message  # a judge built by hand: the environment variable
    assert fake_judge_server.request_count == 0


def test_api_key_and_base_url_come_from_the_environment(fake_judge_server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_judge_server.base_url)
    [answer] = run_judge(OpenAIJudge(max_retries=0), make_request())
    assert answer.choices
    assert fake_judge_server.requests[0].authorization == "Bearer sk-from-env"


def test_a_judge_serves_two_event_loops_with_a_client_each(fake_judge_server):
    """Connection pools belong to one loop: a second loop gets its own client, both are closed."""
    judge = make_judge(fake_judge_server)
    other = asyncio.new_event_loop()
    thread = threading.Thread(target=other.run_forever, daemon=True)
    thread.start()
    try:
        first = asyncio.run_coroutine_threadsafe(judge.judge(make_request(1)), other).result(10)

        async def here() -> Any:
            answer = await judge.judge(make_request(2))
            assert len(judge._clients) == 2
            await judge.aclose()
            return answer

        second = asyncio.run(here())
    finally:
        other.call_soon_threadsafe(other.stop)
        thread.join(5)
        other.close()
    assert first.choices and second.choices
    assert judge._clients == {}
    assert fake_judge_server.request_count == 2


def test_azure_endpoint_uses_the_deployment_path_and_api_key_header(fake_judge_server, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    judge = OpenAIJudge(
        api_key="azure-key",
        azure_endpoint=f"http://127.0.0.1:{fake_judge_server.port}",
        api_version="2024-10-21",
        max_retries=0,
    )
    [answer] = run_judge(judge, make_request())
    assert answer.choices
    [sent] = fake_judge_server.requests
    assert sent.path.startswith("/openai/deployments/judge-model/chat/completions")
    assert "api-version=2024-10-21" in sent.path
    assert sent.authorization == "azure-key"


def test_the_judge_s_client_is_the_sdk_s_own_http_client_with_the_response_hook():
    """openai before 1.55.3 builds its own client with httpx's `proxies`, which httpx 0.28 removed;
    every release is given the SDK's DefaultAsyncHttpxClient, which tells the judge of each response."""

    class SDK:
        DefaultAsyncHttpxClient = dict

    async def hook(response: Any) -> None:
        pass

    assert http_client_kwargs(SDK, hook) == {"http_client": {"event_hooks": {"response": [hook]}}}


def test_bad_settings_raise_config_error():
    with pytest.raises(ConfigError, match="response format"):
        OpenAIJudge(response_format="yaml")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ('Answer: {"a": {"b": [1, 2]}} done', {"a": {"b": [1, 2]}}),
        ('use {braces} then {"a": 2}', {"a": 2}),
        (
            '{"reason": "it ends its thinking with </think>"}',
            {"reason": "it ends its thinking with </think>"},
        ),
        ('{"a": 1}\nSo, once more: {"a": 1}', {"a": 1}),
        ('```json\n{"a": 1}\n```\nor, the same:\n```\n{"a": 1}\n```', {"a": 1}),
    ],
)
def test_parse_json_answer_is_tolerant(text, expected):
    assert parse_json_answer(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        "{broken",
        '<think>Say {"a": 1}.',
        '<think>{"a": 1}</think> ',
        '{"a": 1, "a": 2}',
        'Here: {"a": {"b": 1, "b": 2}} done',
        'A draft: {"a": 1}. The answer: {"a": 2}',
        '```json\n{"a": 1}\n```\n```json\n{"a": 2}\n```',
    ],
)
def test_parse_json_answer_rejects_answers_without_json(text):
    with pytest.raises(ValueError):
        parse_json_answer(text)


DRAFT_THEN_VERDICT = (
    'The output should look like {"reason": "draft", "useful": false}. But the chunk names the '
    'capital.\n</think>\n\n{"reason": "names the capital", "useful": true}'
)


@pytest.mark.parametrize("opening", ["<think>\n", ""], ids=["both tags", "closing tag only"])
def test_a_draft_verdict_in_a_reasoning_models_thinking_is_never_taken(fake_judge_server, opening):
    """DeepSeek-R1 or Qwen3 behind a server without a reasoning parser: the thinking comes first."""
    fake_judge_server.responder = lambda body: opening + DRAFT_THEN_VERDICT
    [answer] = run_judge(make_judge(fake_judge_server), make_request())
    assert answer.choices == ({"reason": "names the capital", "useful": True},)


HARMONY = (
    '<|channel|>analysis<|message|>Say {"reason": "draft", "useful": false}? No: it names the '
    'capital.<|end|><|start|>assistant<|channel|>final<|message|>{"reason": "names it", "useful": true}'
)


@pytest.mark.parametrize("end", ["", "<|return|>", "<|end|>"])
def test_gpt_oss_channels_left_in_the_content_are_read_from_the_final_channel(fake_judge_server, end):
    """gpt-oss behind a server that does not parse its harmony channels: the analysis comes first."""
    fake_judge_server.responder = lambda body: HARMONY + end
    [answer] = run_judge(make_judge(fake_judge_server), make_request())
    assert answer.choices == ({"reason": "names it", "useful": True},)
    only_analysis = HARMONY.split("<|end|>")[0]
    with pytest.raises(ValueError, match="all thinking"):
        parse_json_answer(only_analysis)
    # With the special tokens dropped, the channel names run into the text.
    assert parse_json_answer('analysisSay {"a": 0}? No.assistantfinal{"a": 1}') == {"a": 1}


@pytest.mark.parametrize(
    "content",
    [
        # An example and the verdict.
        'An answer looks like {"reason": "why", "useful": false}. Mine: {"reason": "names it", "useful": true}',
        # Thinking opened after a preamble, where no closing tag can be told from the answer's text.
        'Sure. <think>Say {"reason": "draft", "useful": false}? No.</think>\n'
        '{"reason": "names it", "useful": true}',
    ],
    ids=["an example before the answer", "thinking after a preamble"],
)
def test_an_answer_holding_two_different_verdicts_is_asked_again_never_read(fake_judge_server, content):
    """The first JSON object in prose was taken: the draft, a silent wrong verdict."""
    fake_judge_server.responder = lambda body: content
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=1), make_request())
    assert "2 different JSON objects" in str(info.value)
    assert fake_judge_server.request_count == 2  # asked again, showing it what was wrong
    last = fake_judge_server.requests[-1].body["messages"][-1]["content"]
    assert "2 different JSON objects" in last


def test_retry_after_accepts_seconds_milliseconds_and_http_dates():
    assert retry_after_seconds({"Retry-After": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"Retry-After": "soon"}) is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= (retry_after_seconds({"Retry-After": date}, now=now) or 0) <= 31


def test_conforming_value_takes_the_most_positive_verdict():
    schema = {
        "type": "object",
        "properties": {
            "score": {"type": "integer", "enum": [0, 1, 2]},
            "labels": {"type": "array", "items": {"type": "string", "enum": ["a", "b"]}},
            "ok": {"type": "boolean"},
        },
    }
    assert conforming_value(schema) == {"score": 2, "labels": ["a", "b"], "ok": True}


# --- responses of the wrong shape -------------------------------------------------------------------


def completion_body(choices: Any = None, **fields: Any) -> bytes:
    """A chat completion as a server would send it, with ``fields`` replacing the normal values."""
    if choices is None:
        choices = [
            {
                "index": 0,
                "message": {"role": "assistant", "content": json.dumps({"reason": "r", "useful": True})},
                "finish_reason": "stop",
            }
        ]
    body: dict[str, Any] = {
        "id": "chatcmpl-shape",
        "object": "chat.completion",
        "created": 0,
        "model": "judge-model",
        "choices": choices,
        "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
    }
    body.update(fields)
    return json.dumps(body).encode()


def with_content(content: Any) -> bytes:
    return completion_body(
        [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}]
    )


WRONG_SHAPES = {
    "choices of strings": completion_body(["hi"]),
    "choices of numbers": completion_body([1]),
    "message is a string": completion_body([{"index": 0, "message": "hi", "finish_reason": "stop"}]),
    "choices is an object": completion_body({"0": "hi"}),
    "model is an object": completion_body(model={"name": "judge"}),
}


@pytest.mark.parametrize("body", list(WRONG_SHAPES.values()), ids=list(WRONG_SHAPES))
def test_a_chat_completion_of_the_wrong_shape_is_retried_as_a_malformed_body(fake_judge_server, body):
    fake_judge_server.malformed_next(body=body)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "fake judge", "useful": True},)
    assert stats.retries == 1
    assert stats.reasks == 0
    assert stats.errors == 0
    assert fake_judge_server.request_count == 2


@pytest.mark.parametrize("body", list(WRONG_SHAPES.values()), ids=list(WRONG_SHAPES))
def test_a_server_that_keeps_sending_the_wrong_shape_is_unavailable(fake_judge_server, body):
    fake_judge_server.malformed_next(body=body, times=3)
    stats = JudgeStats()
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=2, stats=stats), make_request())
    message = str(info.value)
    assert "malformed response body" in message
    assert "test_rag[sample-0] chunk 1" in message
    assert "gave up after 3 attempt(s)" in message
    assert stats.retries == 2
    assert stats.errors == 1


def test_token_counts_sent_as_whole_floats_are_counted(fake_judge_server):
    fake_judge_server.malformed_next(
        body=completion_body(usage={"prompt_tokens": 10.0, "completion_tokens": 2.0})
    )
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (10, 2)
    assert type(answer.usage.prompt_tokens) is int
    assert stats.retries == 0 and stats.prompt_tokens == 10


UNUSABLE_USAGE = {
    "token counts are text": {"prompt_tokens": "10", "completion_tokens": "2"},
    "token counts are negative": {"prompt_tokens": -10, "completion_tokens": -2},
    "token counts are fractions": {"prompt_tokens": 10.5, "completion_tokens": 1.5},
    "usage is a number": 5,
    "usage is an array": [10, 2],
}


@pytest.mark.parametrize("usage", list(UNUSABLE_USAGE.values()), ids=list(UNUSABLE_USAGE))
def test_an_answer_whose_usage_is_no_token_count_is_kept_with_its_usage_unknown(fake_judge_server, usage):
    """The answer was paid for: asking again would pay twice for the same judgment."""
    fake_judge_server.malformed_next(body=completion_body(usage=usage))
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "r", "useful": True},)
    assert answer.usage == Usage()
    assert (stats.calls, stats.retries, stats.reasks, stats.errors) == (1, 0, 0, 0)
    assert (stats.prompt_tokens, stats.completion_tokens) == (0, 0)
    assert stats.cost(1.0, 1.0) == 0.0
    assert fake_judge_server.request_count == 1


def test_a_token_count_that_is_no_count_is_unknown_beside_one_that_is(fake_judge_server):
    fake_judge_server.malformed_next(
        body=completion_body(usage={"prompt_tokens": "10", "completion_tokens": 2})
    )
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.usage == Usage(0, 2)
    assert (stats.prompt_tokens, stats.completion_tokens, stats.retries) == (0, 2, 0)


def test_a_token_cap_counts_an_estimate_for_an_answer_whose_usage_is_no_token_count(fake_judge_server):
    """As for a server that reports no usage: the cap still bounds what the run spends."""
    fake_judge_server.malformed_next(
        body=completion_body(usage={"prompt_tokens": -1, "completion_tokens": -1})
    )
    stats = JudgeStats(budget=JudgeBudget(tokens=1_000_000))
    with pytest.warns(RagMetricsWarning, match="reports no token usage"):
        [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "r", "useful": True},)
    assert stats.budget is not None and stats.budget.spent[1] > 0


@pytest.mark.parametrize(
    "error",
    [
        {"error": {"message": "upstream quota exceeded for key sk-echoed-key-123456", "code": 429}},
        {"object": "error", "message": "upstream quota exceeded for key sk-echoed-key-123456", "code": 429},
    ],
    ids=["OpenAI's error", "vLLM's error"],
)
def test_a_200_carrying_an_error_says_the_servers_words(fake_judge_server, error):
    """Some proxies pass an upstream failure on with status 200 and the upstream's error body."""
    fake_judge_server.malformed_next(body=json.dumps(error).encode(), times=2)
    stats = JudgeStats()
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(
            make_judge(fake_judge_server, api_key="sk-echoed-key-123456", max_retries=1, stats=stats),
            make_request(),
        )
    message = str(info.value)
    assert (
        "malformed response body (an error: upstream quota exceeded for key ***); gave up after 2" in message
    )
    assert stats.retries == 1


@pytest.mark.parametrize("content", [{"reason": "r", "useful": True}, 42, ["r", True]])
def test_content_that_is_not_text_is_reasked(fake_judge_server, content):
    fake_judge_server.malformed_next(body=with_content(content))
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "fake judge", "useful": True},)
    assert stats.reasks == 1
    assert stats.retries == 0
    followup = fake_judge_server.requests[1].body["messages"]
    assert followup[-2] == {"role": "assistant", "content": json.dumps(content)}
    assert "not text" in followup[-1]["content"]


def test_content_that_is_never_text_is_an_invalid_answer_naming_the_label(fake_judge_server):
    fake_judge_server.malformed_next(body=with_content({"useful": True}), times=2)
    stats = JudgeStats()
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=1, stats=stats), make_request())
    assert "test_rag[sample-0] chunk 1" in str(info.value)
    assert "the content is a dict, not text" in str(info.value)
    assert stats.errors == 1


def test_content_given_as_parts_is_read_from_its_text_parts(fake_judge_server):
    """Mistral's reasoning models answer with a list of parts: the thinking, then the text."""
    thinking = {
        "type": "thinking",
        "thinking": [{"type": "text", "text": '{"reason": "x", "useful": false}'}],
    }
    verdict = {"type": "text", "text": json.dumps({"reason": "names the capital", "useful": True})}
    fake_judge_server.malformed_next(body=with_content([thinking, verdict]))
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "names the capital", "useful": True},)
    assert stats.reasks == 0 and fake_judge_server.request_count == 1


def test_half_an_escaped_pair_in_an_answer_is_replaced_and_the_answer_cached(fake_judge_server, tmp_path):
    """A lone surrogate (``\\ud83d``: half an emoji) cannot be written as UTF-8: replaced, it no longer
    takes the local cache out of use for the rest of the run."""
    fake_judge_server.responder = lambda body: '{"reason": "half an emoji \\ud83d", "useful": true}'
    fake_judge_server.reported_model = "judge-\ud800"
    cached = CachedJudge(lambda: make_judge(fake_judge_server), cache_dir=tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cache given up is a warning
        [answer] = run_judge(cached, make_request())
    assert answer.choices == ({"reason": "half an emoji \ufffd", "useful": True},)
    assert answer.model == "judge-\ufffd"
    replay = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=tmp_path)
    [again] = run_judge(replay, make_request())
    assert again.source == "cache" and again.choices == answer.choices


def test_an_invalid_answer_with_half_an_escaped_pair_is_reasked_with_it_replaced(fake_judge_server):
    """The invalid answer goes back to the judge in the re-ask: as UTF-8, which cannot carry the half."""
    fake_judge_server.malformed_next(body=with_content('{"reason": "x \ud800", "useful": "maybe"}'))
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices == ({"reason": "fake judge", "useful": True},)
    assert stats.reasks == 1
    followup = fake_judge_server.requests[1].body["messages"]
    assert followup[-2] == {"role": "assistant", "content": '{"reason": "x \ufffd", "useful": "maybe"}'}


def choice_without_content(finish_reason: str, **message: Any) -> bytes:
    return completion_body(
        [
            {
                "index": 0,
                "message": {"role": "assistant", "content": None, **message},
                "finish_reason": finish_reason,
            }
        ]
    )


@pytest.mark.parametrize(
    ("content", "thinking", "usage", "said"),
    [
        (None, "Let me see. " * 100, {}, "1,200 characters of reasoning"),  # vLLM's reasoning parser
        ("", "Let me see. " * 100, {}, "1,200 characters of reasoning"),
        ("\n\n", "Let me see. " * 100, {}, "1,200 characters of reasoning"),
        ("", None, {"completion_tokens_details": {"reasoning_tokens": 206}}, "206 reasoning tokens"),  # OpenAI's
    ],
)
def test_a_reasoning_model_that_spent_the_limit_thinking_is_told_what_to_change_and_not_asked_again(
    fake_judge_server, content, thinking, usage, said
):
    """Asked again under the same limit, it would spend it again at full cost."""
    stats = JudgeStats()
    judge = make_judge(fake_judge_server, max_reasks=2, stats=stats)
    limit = judge.completion_limit(make_request())
    message = {"content": content} if thinking is None else {"content": content, "reasoning_content": thinking}
    body = json.loads(choice_without_content("length", **message))
    body["usage"].update(usage)
    fake_judge_server.malformed_next(body=json.dumps(body).encode())
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(judge, make_request())
    assert fake_judge_server.request_count == 1 and stats.reasks == 0
    assert (
        f"after 1 attempt(s) (0 re-ask(s)): answer: cut off at the completion limit (max_tokens={limit}) "
        f"before it gave any answer, thinking ({said}); not asked again, which would spend the same "
        "limit again. A reasoning model thinks before it answers: give it room, set "
        f"RAGMETRICS_JUDGE_MAX_TOKENS={limit + 4096}, or turn its thinking off"
    ) in str(info.value)


def test_an_answer_cut_off_part_way_is_asked_again_and_told_to_allow_longer_answers(fake_judge_server):
    """Some of the answer came: a shorter one may fit, so it is re-asked, as before."""
    body = completion_body(
        [{"index": 0, "message": {"role": "assistant", "content": '{"reason": "it'}, "finish_reason": "length"}]
    )
    fake_judge_server.malformed_next(body=body, times=2)
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=1), make_request())
    assert fake_judge_server.request_count == 2
    assert "answer: cut off at the completion limit (max_tokens=" in str(info.value)
    assert ") before it was complete; to allow longer answers, set RAGMETRICS_JUDGE_MAX_TOKENS=" in str(info.value)


def test_an_answer_whose_words_speak_of_the_completion_limit_is_asked_again_as_any_invalid_one(
    fake_judge_server,
):
    """Whether the limit was spent thinking is a fact of the answer (its finish reason), not a phrase
    found in its problems: a model quoting that phrase is not told to allow it more tokens."""
    words = "cut off at the completion limit before it gave any answer"
    fake_judge_server.malformed_next(body=with_content(words))
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, max_reasks=1, stats=stats), make_request())
    assert answer.choices == (conforming_value(SCHEMA),)
    assert stats.reasks == 1 and fake_judge_server.request_count == 2
    followup = fake_judge_server.requests[1].body["messages"]
    assert followup[-2] == {"role": "assistant", "content": words}
    assert not followup[-1]["content"].endswith("Keep every reason to one short sentence.")


def test_an_answer_without_content_says_what_stopped_it(fake_judge_server):
    """Azure's content filter answers with no content: the finish reason is the only explanation."""
    fake_judge_server.malformed_next(body=choice_without_content("content_filter"))
    fake_judge_server.malformed_next(body=choice_without_content("stop", refusal="I can't help with that"))
    fake_judge_server.malformed_next(body=choice_without_content("stop", reasoning_content='{"useful": 1}'))
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=2), make_request())
    followup = fake_judge_server.requests[1].body["messages"][-1]["content"]
    assert "answer has no content (finish_reason 'content_filter')" in followup
    followup = fake_judge_server.requests[2].body["messages"][-1]["content"]
    assert "answer has no content (refusal: I can't help with that)" in followup
    # vLLM's reasoning parser, when the model never closed its thinking: the answer is not read there.
    assert "answer has no content (only 13 characters of reasoning: the server's reasoning" in str(info.value)


def test_control_characters_in_a_models_refusal_are_escaped_in_the_error(fake_judge_server):
    """A refusal is the model's text, which a chunk can steer: ESC and BEL in it are escaped as in
    the server's words and a judge's reasons, where they reached the terminal in the error."""
    refused = choice_without_content("stop", refusal="no \x1b[2J\x07 way")
    fake_judge_server.malformed_next(body=refused, times=2)
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(make_judge(fake_judge_server, max_reasks=1), make_request())
    assert "answer has no content (refusal: no \\x1b[2J\\x07 way)" in str(info.value)
    assert str(info.value).isprintable()


def test_a_re_ask_after_an_answer_without_text_sends_no_empty_message(fake_judge_server):
    """Anthropic's API (and Bedrock's, Mistral's through a proxy) answer an empty assistant message
    with HTTP 400, which hid why the judge was asked again."""
    fake_judge_server.malformed_next(body=choice_without_content("stop", refusal="I can't help with that"))
    fake_judge_server.malformed_next(body=completion_body([]))
    # Line breaks until the limit: Anthropic refuses text of only white space as it refuses none.
    cut_off = {"index": 0, "message": {"role": "assistant", "content": "\n\n\n"}, "finish_reason": "length"}
    fake_judge_server.malformed_next(body=completion_body([cut_off]))
    [answer] = run_judge(make_judge(fake_judge_server, max_reasks=3), make_request())
    assert answer.choices == (conforming_value(SCHEMA),)
    for request in fake_judge_server.requests[1:]:
        messages = request.body["messages"]
        assert all(message["content"].strip() for message in messages), messages
        roles = [message["role"] for message in messages]
        assert roles == ["system", *["user", "assistant"] * (len(roles) // 2 - 1), "user"]
    assert "got 0" in fake_judge_server.requests[2].body["messages"][-1]["content"]


def answered_by_tool_call(arguments: str, name: str = "chunk_verdict") -> bytes:
    """A server answering through a tool call: no content, the JSON in the call's arguments (vLLM
    with some chat templates and tool-call parsers)."""
    call = {"id": "call-1", "type": "function", "function": {"name": name, "arguments": arguments}}
    return choice_without_content("tool_calls", tool_calls=[call])


def test_an_answer_in_the_arguments_of_a_tool_call_is_taken_and_cached_as_content(fake_judge_server, tmp_path):
    """It was re-asked, paid for again and then failed with 'answer has no content'."""
    verdict = {"reason": "names the capital", "useful": True}
    fake_judge_server.malformed_next(body=answered_by_tool_call(json.dumps(verdict)))
    stats = JudgeStats()
    cached = CachedJudge(lambda: make_judge(fake_judge_server, stats=stats), cache_dir=tmp_path)
    [answer] = run_judge(cached, make_request())
    assert answer.choices == (verdict,)
    assert stats.reasks == 0 and fake_judge_server.request_count == 1
    replay = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=tmp_path)
    [again] = run_judge(replay, make_request())
    assert again.source == "cache" and again.choices == (verdict,)


def test_a_tool_call_that_holds_no_answer_is_reasked_and_never_cached_saying_what_the_server_did(
    fake_judge_server, tmp_path
):
    for _ in range(2):
        fake_judge_server.malformed_next(body=answered_by_tool_call('{"city": "Paris"}', name="get_weather"))
    cached = CachedJudge(lambda: make_judge(fake_judge_server, max_reasks=1), cache_dir=tmp_path)
    with pytest.raises(InvalidJudgeAnswer) as info:
        run_judge(cached, make_request())
    message = str(info.value)
    assert "answer (the arguments of a tool call 'get_weather', a tool the request did not offer): " in message
    assert "the server answered with a tool call instead of content" in message
    assert message.endswith("check its tool-call parser and chat template, or set RAGMETRICS_RESPONSE_FORMAT=json_object")
    followup = fake_judge_server.requests[1].body["messages"]
    assert followup[-2] == {"role": "assistant", "content": '{"city": "Paris"}'}
    replay = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=tmp_path)
    with pytest.raises(Exception, match="replay"):
        run_judge(replay, make_request())


# --- errors users see: one clear message, no SDK traceback -----------------------------------------


def assert_no_sdk_traceback(error: BaseException) -> None:
    assert error.__cause__ is None
    assert error.__suppress_context__
    printed = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    assert "_base_client" not in printed
    assert "httpx" not in printed


def test_exhausted_retries_hide_the_sdk_traceback_but_keep_the_cause(fake_judge_server):
    import openai

    fake_judge_server.fail_next(503, times=3)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server, max_retries=2), make_request())
    assert_no_sdk_traceback(info.value)
    assert isinstance(info.value.cause, openai.InternalServerError)
    message = str(info.value)
    assert f"the LLM judge at {fake_judge_server.base_url}" in message
    assert "HTTP 503" in message
    assert "gave up after 3 attempt(s)" in message


def test_a_rejected_request_hides_the_sdk_traceback_but_keeps_the_cause(fake_judge_server):
    import openai

    fake_judge_server.fail_next(401)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(make_judge(fake_judge_server), make_request())
    assert_no_sdk_traceback(info.value)
    assert isinstance(info.value.cause, openai.AuthenticationError)
    message = str(info.value)
    assert fake_judge_server.base_url in message
    assert "HTTP 401, not retried" in message
    assert "OPENAI_API_KEY" in message


def test_connection_errors_hide_the_sdk_traceback_but_keep_the_cause():
    import openai

    with FakeJudgeServer() as server:
        base_url = server.base_url
    judge = OpenAIJudge(api_key="sk-dummy", base_url=base_url, max_retries=1, retry_backoff=0.01)
    with pytest.raises(JudgeUnavailable) as info:
        run_judge(judge, make_request())
    assert_no_sdk_traceback(info.value)
    assert isinstance(info.value.cause, openai.APIConnectionError)
    assert "connection error" in str(info.value)
    assert "gave up after 2 attempt(s)" in str(info.value)


def test_no_api_key_message_explains_replay_and_the_store(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    from pytest_ragmetrics.settings import wording

    with pytest.raises(JudgeUnavailable) as info:
        run_judge(OpenAIJudge(how_to_set=wording(True)), make_request())
    message = str(info.value)
    assert "--rag-cache=replay" in message
    assert "RAGMETRICS_CACHE=replay" in message
    assert "--rag-store-dir" in message
    assert "judgment store" in message


# --- Azure -----------------------------------------------------------------------------------------


@pytest.fixture
def no_azure_env(monkeypatch):
    for name in (
        "AZURE_OPENAI_ENDPOINT",
        "OPENAI_API_VERSION",
        "AZURE_OPENAI_API_KEY",
        "AZURE_OPENAI_AD_TOKEN",
    ):
        monkeypatch.delenv(name, raising=False)
    # A real OpenAI key in the environment must never go to api.openai.com for an Azure judge.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    return monkeypatch


@pytest.mark.parametrize("endpoint", [None, ""])
def test_azure_without_an_endpoint_is_a_config_error(no_azure_env, endpoint):
    no_azure_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    with pytest.raises(ConfigError) as info:
        OpenAIJudge(model="judge-model", azure=True, azure_endpoint=endpoint)
    message = str(info.value)
    assert "AZURE_OPENAI_ENDPOINT" in message
    # A judge built by hand knows no pytest options: it names the environment variable.
    assert "RAGMETRICS_JUDGE_BASE_URL=" in message
    assert "OPENAI_API_VERSION" not in message


def test_azure_without_an_api_version_is_a_config_error(no_azure_env, fake_judge_server):
    with pytest.raises(ConfigError) as info:
        OpenAIJudge(azure=True, azure_endpoint=f"http://127.0.0.1:{fake_judge_server.port}")
    assert "OPENAI_API_VERSION" in str(info.value)
    assert "AZURE_OPENAI_ENDPOINT" not in str(info.value)
    assert fake_judge_server.request_count == 0


def test_azure_with_nothing_configured_names_both_settings(no_azure_env):
    with pytest.raises(ConfigError, match=r"AZURE_OPENAI_ENDPOINT.*OPENAI_API_VERSION"):
        OpenAIJudge(azure=True)


def test_azure_takes_endpoint_version_and_key_from_the_environment(no_azure_env, fake_judge_server):
    no_azure_env.setenv("AZURE_OPENAI_ENDPOINT", f"http://127.0.0.1:{fake_judge_server.port}")
    no_azure_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    no_azure_env.setenv("AZURE_OPENAI_API_KEY", "azure-env-key")
    judge = OpenAIJudge(azure=True, max_retries=0)
    assert judge.has_credentials()
    [answer] = run_judge(judge, make_request())
    assert answer.choices
    [sent] = fake_judge_server.requests
    assert sent.path.startswith("/openai/deployments/judge-model/chat/completions")
    assert "api-version=2024-10-21" in sent.path
    assert sent.authorization == "azure-env-key"


def test_azure_without_an_azure_key_does_not_use_the_openai_key(no_azure_env, fake_judge_server):
    no_azure_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    judge = OpenAIJudge(azure=True, azure_endpoint=f"http://127.0.0.1:{fake_judge_server.port}")
    assert not judge.has_credentials()
    with pytest.raises(JudgeUnavailable, match="AZURE_OPENAI_API_KEY"):
        run_judge(judge, make_request())
    assert fake_judge_server.request_count == 0


def test_azure_key_refused_names_the_azure_key_variable(no_azure_env, fake_judge_server):
    no_azure_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    fake_judge_server.fail_next(401)
    judge = OpenAIJudge(
        azure=True, api_key="azure-key", azure_endpoint=f"http://127.0.0.1:{fake_judge_server.port}"
    )
    with pytest.raises(JudgeUnavailable, match="HTTP 401") as info:
        run_judge(judge, make_request())
    assert "check AZURE_OPENAI_API_KEY (or AZURE_OPENAI_AD_TOKEN)" in str(info.value)


def test_azure_configuration_error_takes_the_wording_it_is_given(no_azure_env):
    def pytest_wording(name: str, value: str) -> str:
        return f"--rag-{name.replace('_', '-')}={value}"

    with pytest.raises(ConfigError) as info:
        OpenAIJudge(azure=True, api_version="2024-10-21", how_to_set=pytest_wording)
    assert "--rag-judge-base-url=https://<resource>.openai.azure.com" in str(info.value)


def test_azure_with_a_base_url_is_a_config_error(no_azure_env):
    with pytest.raises(ConfigError, match="azure_endpoint"):
        OpenAIJudge(
            azure=True,
            azure_endpoint="https://x.openai.azure.com",
            api_version="2024-10-21",
            base_url="https://elsewhere/v1",
        )


@pytest.mark.parametrize(
    ("pasted", "resource"),
    [
        # Azure's portal shows a deployment's "target URI": the whole address of one request.
        (
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions?api-version=2024-10-21",
            "https://res.openai.azure.com",
        ),
        ("https://res.openai.azure.com/openai", "https://res.openai.azure.com"),
        ("https://gw.example/team/openai/deployments/gpt4o", "https://gw.example/team"),
    ],
)
def test_an_azure_endpoint_holding_a_request_path_is_a_config_error_naming_the_resource(
    no_azure_env, fake_judge_server, pasted, resource
):
    """The client adds /openai/deployments/... and the api-version to the endpoint: a pasted target
    URI was sent to .../chat/completions?api-version=.../openai/deployments/..., a 404 that spoke of
    the model name and a base URL."""
    no_azure_env.setenv("OPENAI_API_VERSION", "2024-10-21")
    with pytest.raises(ConfigError) as info:
        OpenAIJudge(model="gpt4o", azure=True, api_key="azure-key", azure_endpoint=pasted)
    message = str(info.value)
    assert f"RAGMETRICS_JUDGE_BASE_URL={resource} " in message
    assert "OPENAI_API_VERSION" in message and "judge model" in message
    no_azure_env.setenv("AZURE_OPENAI_ENDPOINT", pasted)
    with pytest.raises(ConfigError, match="RAGMETRICS_JUDGE_BASE_URL="):
        check_azure_settings()


def test_a_base_url_without_its_scheme_is_a_config_error_naming_where_it_was_set(monkeypatch):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError) as info:
        OpenAIJudge(api_key="sk-dummy", base_url="localhost:11434/v1")
    assert str(info.value).endswith("set RAGMETRICS_JUDGE_BASE_URL=http://localhost:11434/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "localhost:11434/v1")  # the SDK's own variable
    with pytest.raises(ConfigError, match=r"set OPENAI_BASE_URL=http://localhost:11434/v1$"):
        OpenAIJudge(api_key="sk-dummy")
    OpenAIJudge(api_key="sk-dummy", base_url="HTTPS://gateway.example/v1")  # any case


def run_each(judge: OpenAIJudge, *requests: JudgeRequest) -> list[BaseException]:
    """Judge the requests one after the other; the error each one raised."""

    async def go() -> list[BaseException]:
        errors: list[BaseException] = []
        try:
            for request in requests:
                try:
                    await judge.judge(request)
                except JudgeUnavailable as exc:
                    errors.append(exc)
        finally:
            await judge.aclose()
        return errors

    return asyncio.run(go())


def test_an_unreachable_judge_fails_the_remaining_judgments_at_once():
    """Nothing listening: the first judgment runs the retry ladder, the others fail without it."""
    with FakeJudgeServer() as server:
        base_url = server.base_url
    stats = JudgeStats()
    judge = OpenAIJudge(api_key="sk-dummy", base_url=base_url, max_retries=2, retry_backoff=0.3, stats=stats)
    errors = run_each(judge, *(make_request(i) for i in range(6)))
    assert len(errors) == 6
    assert stats.retries == 2  # the first judgment's ladder only, not six
    assert stats.errors == 6
    assert "connection error" in str(errors[0])
    first = str(errors[0])
    for later in errors[1:]:
        assert str(later).startswith(first)
        assert "fail without asking" in str(later)


def test_an_unreachable_judge_is_tried_again_after_the_cool_down():
    """Nothing listening on every attempt of one request marks the judge unreachable; the requests of
    the cool-down fail at once, and the first one after it reaches the judge, listening again."""
    from pytest_ragmetrics.judge.openai_judge import UNREACHABLE_COOLDOWN

    with FakeJudgeServer() as gone:
        port = gone.port
    now = [0.0]
    server = FakeJudgeServer(port=port)
    judge = make_judge(server, max_retries=2, clock=lambda: now[0])

    async def go() -> tuple[list[BaseException], list[Any]]:
        errors: list[BaseException] = []
        answers: list[Any] = []
        try:
            for i, advance in enumerate([0.0, 1.0, UNREACHABLE_COOLDOWN, 0.0]):
                now[0] += advance
                if i == 2:
                    server.start()
                try:
                    answers.append(await judge.judge(make_request(i)))
                except JudgeUnavailable as exc:
                    errors.append(exc)
        finally:
            await judge.aclose()
        return errors, answers

    try:
        errors, answers = asyncio.run(go())
    finally:
        server.stop()
    assert len(errors) == 2 and len(answers) == 2
    assert "connection error" in str(errors[0])
    assert "then the judge is tried again" in str(errors[1])
    assert server.request_count == 2  # the two after the cool-down


def test_a_judge_that_resets_one_request_on_every_attempt_still_answers_the_others(fake_judge_server):
    """A reset after the request was sent (a proxy cutting one answer, a fault) comes from a judge
    that is there: that judgment fails after its retries, and the next ones are asked, where the
    judge was taken for unreachable and every judgment of the next 10 s failed without asking."""
    judge = make_judge(fake_judge_server, max_retries=1)
    fake_judge_server.reset_next(times=2)
    errors = run_each(judge, *(make_request(i) for i in range(3)))
    assert len(errors) == 1 and "connection error" in str(errors[0])
    assert "fail without asking" not in str(errors[0])
    assert fake_judge_server.request_count == 2 + 2


@pytest.mark.parametrize("status", [401, 403, 404])
def test_a_refused_key_or_model_is_asked_once_per_run(fake_judge_server, status):
    fake_judge_server.fail_next(status, times=10)
    judge = make_judge(fake_judge_server, model="judge-model")
    errors = run_each(judge, *(make_request(i) for i in range(5)))
    assert len(errors) == 5
    assert fake_judge_server.request_count == 1  # never retried, never asked again
    assert all(f"HTTP {status}" in str(e) for e in errors)


def test_an_account_without_quota_is_asked_once_per_run_not_retried_as_a_rate_limit(fake_judge_server):
    """OpenAI answers an account without quota with a 429, as it does a rate limit."""
    quota = {
        "error": {
            "message": "You exceeded your current quota.",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    fake_judge_server.fail_next(429, body=quota, times=10)
    stats = JudgeStats()
    errors = run_each(
        make_judge(fake_judge_server, stats=stats), make_request(0), make_request(1, model="other")
    )
    assert fake_judge_server.request_count == 1 and stats.retries == 0
    assert (
        "(HTTP 429, not retried): the account of the API key has no quota left; check its plan and "
        in str(errors[0])
    )
    assert "billing (OPENAI_API_KEY). You exceeded your current quota." in str(errors[0])
    assert "the remaining judgments of this run fail without asking" in str(errors[1])


#: OpenAI's 429 for an account without quota as a LiteLLM proxy passes it on: OpenAI's words kept,
#: its type and code replaced by the proxy's own.
_PROXIED_NO_QUOTA = {
    "error": {
        "message": "litellm.RateLimitError: RateLimitError: OpenAIException - You exceeded your current "
        "quota, please check your plan and billing details. For more information on this error, read "
        "the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.\n\nLiteLLM: model "
        "group 'judge-model' failed with the error above. No fallback was attempted.",
        "type": "throttling_error",
        "param": None,
        "code": "429",
    }
}


def test_an_account_without_quota_behind_a_proxy_is_asked_once_per_run(fake_judge_server):
    """Behind a LiteLLM proxy the 429 says OpenAI's words but not its type: it was retried as a rate
    limit, every judgment, each retry retried again by the proxy."""
    fake_judge_server.fail_next(429, body=_PROXIED_NO_QUOTA, times=10)
    stats = JudgeStats()
    errors = run_each(make_judge(fake_judge_server, stats=stats), make_request(0), make_request(1))
    assert fake_judge_server.request_count == 1 and stats.retries == 0
    assert "(HTTP 429, not retried): the account of the API key has no quota left" in str(errors[0])
    assert "the remaining judgments of this run fail without asking" in str(errors[1])


@pytest.mark.parametrize(
    "message",
    [
        # Gemini's per-minute limit in the same words, through a proxy that kept its details as text.
        'litellm.RateLimitError: VertexAIException - {"error": {"code": 429, "message": "You exceeded '
        'your current quota, please check your plan and billing details.", "status": "RESOURCE_EXHAUSTED"}}',
        "You exceeded your current quota, please check your plan and billing details. For more "
        "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits.",
        "You exceeded your current quota. Please retry in 1.5s.",
    ],
    ids=["RESOURCE_EXHAUSTED", "rate limits", "retry in"],
)
def test_a_rate_limit_in_the_words_of_a_quota_is_retried(fake_judge_server, message):
    """Gemini words its per-minute limits as OpenAI words an account without quota: said so, or
    with a wait to make, it is a rate limit, retried."""
    fake_judge_server.fail_next(429, body={"error": {"message": message, "code": "429"}})
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices and stats.retries == 1


def test_a_quota_429_asking_for_a_wait_is_a_rate_limit(fake_judge_server):
    fake_judge_server.fail_next(429, headers={"Retry-After": "0"}, body=_PROXIED_NO_QUOTA)
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices and stats.retries == 1


def test_an_account_without_credit_is_asked_once_per_run(fake_judge_server):
    """OpenRouter and DeepSeek answer 402 when the balance is spent: every judgment asked again."""
    credit = {"error": {"message": "Insufficient Balance", "code": 402}}
    fake_judge_server.fail_next(402, body=credit, times=10)
    errors = run_each(make_judge(fake_judge_server), make_request(0), make_request(1, model="other"))
    assert fake_judge_server.request_count == 1
    assert "(HTTP 402, not retried): the account of the API key has no credit left; check its " in str(errors[0])
    assert "balance (OPENAI_API_KEY). Insufficient Balance" in str(errors[0])
    assert "the remaining judgments of this run fail without asking" in str(errors[1])


def test_a_redirect_the_client_follows_with_a_get_says_to_set_the_base_url(fake_judge_server):
    """A reverse proxy sending http:// to https:// with a 301: the POST arrives as a GET."""
    fake_judge_server.fail_next(301, headers={"Location": "/elsewhere/v1/chat/completions"}, body=b"")
    errors = run_each(make_judge(fake_judge_server), make_request(0), make_request(1))
    assert [(r.method, r.path) for r in fake_judge_server.requests] == [
        ("POST", "/v1/chat/completions"),
        ("GET", "/elsewhere/v1/chat/completions"),
    ]
    first = str(errors[0])
    there = f"http://127.0.0.1:{fake_judge_server.port}/elsewhere/v1/chat/completions"
    assert f"redirected the request for test_rag[sample-0] chunk 1 (HTTP 301) to {there}; " in first
    assert "set the judge's base URL to the address it redirects to (there, HTTP 404: no route" in first
    assert "the remaining judgments of this run fail without asking" in str(errors[1])


def test_a_redirect_to_another_host_says_the_key_was_not_sent_there(fake_judge_server):
    """A 308 keeps the POST, but the HTTP client sends no key to another host: the 401 there is
    the redirect's doing, not a key to check."""
    there = f"http://localhost:{fake_judge_server.port}/v1/chat/completions"
    fake_judge_server.fail_next(308, headers={"Location": there}, body=b"")
    fake_judge_server.fail_next(401)
    errors = run_each(make_judge(fake_judge_server), make_request(0))
    sent = fake_judge_server.requests
    assert [(r.method, r.authorization is None) for r in sent] == [("POST", False), ("POST", True)]
    message = str(errors[0])
    assert "the API key was not accepted" not in message
    assert f"redirected the request for test_rag[sample-0] chunk 1 (HTTP 308) to {there}, " in message
    assert "another host, to which the HTTP client sends no API key" in message
    assert "set the judge's base URL to the address it redirects to (there, HTTP 401: fake judge error" in message


def test_a_busy_server_a_redirect_to_another_host_led_to_is_retried(fake_judge_server):
    """A server there that needs no key (a local one behind a moved name): its 503 is a busy
    server's, retried, not the key left behind."""
    there = f"http://localhost:{fake_judge_server.port}/v1/chat/completions"
    fake_judge_server.fail_next(308, headers={"Location": there}, body=b"")
    fake_judge_server.fail_next(503)
    fake_judge_server.fail_next(308, headers={"Location": there}, body=b"")
    assert run_each(make_judge(fake_judge_server), make_request(0)) == []
    assert fake_judge_server.request_count == 4


def test_a_redirect_loop_is_followed_once_and_fails_the_run_at_once(fake_judge_server):
    """A proxy sending the request back where it came from (http:// and https:// each redirecting
    to the other, say): no retry gets out of it, so none is made, nor any later judgment."""
    fake_judge_server.fail_next(307, headers={"Location": "/v1/chat/completions"}, body=b"", times=100)
    errors = run_each(make_judge(fake_judge_server), make_request(0), make_request(1))
    followed = fake_judge_server.request_count
    assert 2 <= followed <= 30  # one attempt: the HTTP client's redirects, no retry
    message = str(errors[0])
    assert "connection error" not in message
    there = f"http://127.0.0.1:{fake_judge_server.port}/v1/chat/completions"
    assert "redirected the request for test_rag[sample-0] chunk 1 more times than the HTTP client " in message
    assert f"follows (a redirect loop), the last time to {there}: set the judge's base URL to " in message
    assert "the remaining judgments of this run fail without asking" in str(errors[1])


def test_a_refused_model_does_not_stop_the_other_models(fake_judge_server):
    fake_judge_server.fail_next(404)
    judge = make_judge(fake_judge_server)
    bad = make_request(0, model="no-such-model")
    good = make_request(1, model="judge-model")
    errors = run_each(judge, bad, make_request(2, model="no-such-model"), good)
    assert len(errors) == 2
    assert fake_judge_server.request_count == 2  # the first bad one and the good one


def test_a_transient_outage_is_not_remembered(fake_judge_server):
    fake_judge_server.fail_next(503, times=3)
    judge = make_judge(fake_judge_server, max_retries=2)
    errors = run_each(judge, make_request(0), make_request(1))
    assert len(errors) == 1  # the second judgment is asked again, and answered


def test_server_messages_never_quote_credentials(monkeypatch):
    """A server error body that echoes the request's headers is scrubbed where it is quoted."""
    from types import SimpleNamespace

    from pytest_ragmetrics.judge.server_errors import server_message

    monkeypatch.setenv("OPENAI_API_KEY", "configured-key-123456")
    body = {"message": "bad request; headers: Authorization: Bearer tok-abcdef123, key configured-key-123456"}
    quoted = server_message(SimpleNamespace(body=body))
    assert "tok-abcdef123" not in quoted
    assert "configured-key-123456" not in quoted
    assert quoted.startswith("bad request; headers: Authorization: Bearer ***")
    assert "http://***@host" in server_message(SimpleNamespace(body="upstream http://user:pw@host failed"))


def _stats_ticking_per_answer(server: Any) -> JudgeStats:
    """Judge figures on a clock that the server moves one tick forward with each answer it gives."""
    ticks = [0.0]
    lock = threading.Lock()

    def answer(body: dict[str, Any]) -> dict[str, Any] | str:
        with lock:
            ticks[0] += 1.0
        return default_responder(body)

    server.responder = answer
    return JudgeStats(clock=lambda: ticks[0])


def test_a_calls_time_runs_from_its_free_slot_to_its_answer_not_while_it_queues(fake_judge_server):
    """Three requests through one slot, each answered one tick after it was sent: 3 ticks, not 1 + 2 + 3."""
    stats = _stats_ticking_per_answer(fake_judge_server)
    judge = bounded(make_judge(fake_judge_server, stats=stats), 1)
    run_judge(judge, make_request(0), make_request(1), make_request(2))
    assert fake_judge_server.max_in_flight == 1
    assert stats.calls == 3
    assert stats.call_seconds == 3.0


def test_waiting_for_the_response_format_probe_is_not_timed_as_a_call(fake_judge_server):
    """Three requests at once: one finds the response format, two wait for it. Each answer ticks the
    clock once: the probe takes 1 tick, the two sent after it end at tick 2 or 3, so they count 2 to 4
    ticks; timed while waiting for the probe too, they would count 5 or 6 on top of the probe's 1."""
    stats = _stats_ticking_per_answer(fake_judge_server)
    judge = bounded(make_judge(fake_judge_server, stats=stats, response_format="auto"), 3)
    run_judge(judge, make_request(0), make_request(1), make_request(2))
    assert stats.calls == 3
    assert stats.call_seconds <= 5.0


def test_judgments_queued_behind_a_failed_format_probe_are_then_asked_side_by_side(fake_judge_server):
    """The server fails the request finding the response format: the judgments queued behind it do not
    then run their retries one after the other (hours for a suite while it is down), but side by side."""
    fake_judge_server.fail_next(503, times=3)  # every attempt of the first request
    both_in = threading.Barrier(2, timeout=10)

    def answer(body: dict[str, Any]) -> dict[str, Any] | str:
        both_in.wait()  # the two queued judgments are at the server together
        return default_responder(body)

    fake_judge_server.responder = answer
    judge = make_judge(fake_judge_server, max_retries=2, response_format="auto")

    async def go() -> list[Any]:
        try:
            requests = (judge.judge(make_request(i)) for i in range(3))
            return list(await asyncio.gather(*requests, return_exceptions=True))
        finally:
            await judge.aclose()

    first, *queued = asyncio.run(go())
    assert isinstance(first, JudgeUnavailable) and "HTTP 503" in str(first)
    assert [answer.choices for answer in queued] == [({"reason": "fake judge", "useful": True},)] * 2
    assert fake_judge_server.request_count == 3 + 2


def test_a_reset_connection_is_retried_then_reported(fake_judge_server):
    fake_judge_server.reset_next()
    stats = JudgeStats()
    [answer] = run_judge(make_judge(fake_judge_server, stats=stats), make_request())
    assert answer.choices and stats.retries == 1 and stats.calls == 1
    assert fake_judge_server.request_count == 2

    fake_judge_server.reset_next(times=2)
    # The HTTP client's error has no words of its own here: its kind is named, not "()".
    with pytest.raises(
        JudgeUnavailable,
        match=r"connection error \(\w+Error: the connection was closed "
        r"without an answer\); gave up after 2 attempt",
    ):
        run_judge(make_judge(fake_judge_server, max_retries=1), make_request(1))
