"""Servers without strict JSON-schema output, through the real openai client against FakeJudgeServer.

With ``response_format="auto"`` (the default) the first structured request finds out what the server
supports: json_schema, else json_object with the schema in the system message, else plain text. The
emulated servers answer as llama-cpp-python's does (HTTP 500), as OpenAI-style servers do (HTTP 400
saying the format is not supported) and as FastAPI validation does (HTTP 422).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics import judgments as J
from pytest_ragmetrics.errors import JudgeUnavailable
from pytest_ragmetrics.judge.limits import AZURE_OPENAI
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


def make_judge(server: FakeJudgeServer, **kwargs: Any) -> OpenAIJudge:
    options: dict[str, Any] = {"api_key": "sk-dummy", "base_url": server.base_url, "retry_backoff": 0.01}
    options.update(kwargs)
    return OpenAIJudge(**options)


def run_judge(judge: OpenAIJudge, *requests: Any) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return list(await asyncio.gather(*(judge.judge(r) for r in requests)))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def formats_sent(server: FakeJudgeServer) -> list[str]:
    return [(r.body.get("response_format") or {}).get("type", "text") for r in server.requests]


@pytest.mark.parametrize(
    ("status", "sent_before_fallback"),
    [
        (500, ["json_schema", "json_schema"]),  # llama-cpp-python: a bare 500, so asked twice
        (400, ["json_schema"]),  # "Invalid parameter: 'response_format' of type 'json_schema' ..."
        (422, ["json_schema"]),  # FastAPI: "Input should be 'text' or 'json_object'"
    ],
)
def test_auto_falls_back_to_json_object_and_keeps_it_for_the_run(status, sent_before_fallback):
    stats = JudgeStats()
    with FakeJudgeServer(response_formats=("json_object", "text"), unsupported_status=status) as server:
        judge = make_judge(server, stats=stats)
        answers = run_judge(judge, *(make_request(i) for i in range(6)))
    assert [a.choices for a in answers] == [({"reason": "fake judge", "useful": True},)] * 6
    # Found out once, by the first request alone; the other five went straight to json_object.
    assert formats_sent(server) == [*sent_before_fallback, *["json_object"] * 6]
    assert judge.active_format == "json_object"
    assert judge.fallback_reason is not None
    assert judge.fallback_reason.startswith(f"the server turned down json_schema (HTTP {status}: ")
    assert stats.response_format == "json_object"
    assert stats.response_format_reason == judge.fallback_reason
    assert stats.errors == 0 and stats.calls == 6
    # In json_object mode the schema is in the system message, the data alone in the user message.
    system, user = server.requests[-1].body["messages"]
    assert "```json" in system["content"] and "```json" not in user["content"]


def test_llama_cpp_style_500_quotes_the_server_and_counts_one_retry():
    stats = JudgeStats()
    with FakeJudgeServer(response_formats=("json_object", "text"), unsupported_status=500) as server:
        judge = make_judge(server, stats=stats)
        run_judge(judge, make_request())
    assert judge.fallback_reason == "the server turned down json_schema (HTTP 500: Internal Server Error)"
    assert stats.retries == 1


def test_a_500_that_names_the_format_falls_back_at_once():
    with FakeJudgeServer() as server:
        body = {"error": {"message": "'json_schema' is not a valid response_format type", "code": 500}}
        server.fail_next(500, body=body)
        judge = make_judge(server)
        run_judge(judge, make_request())
    assert formats_sent(server) == ["json_schema", "json_object"]
    assert "'json_schema' is not a valid response_format type" in (judge.fallback_reason or "")


def test_a_schema_gemini_cannot_read_behind_a_proxy_falls_back_at_once():
    """Gemini, reached through OpenRouter or a proxy that maps the schema onto its own response
    schema, refuses the key every strict schema has (additionalProperties) with words that name its
    response_schema, not the response format: auto falls back, where every judgment failed."""
    message = (
        'Provider returned error: Invalid JSON payload received. Unknown name "additionalProperties" '
        "at 'generation_config.response_schema': Cannot find field."
    )
    with FakeJudgeServer() as server:
        server.fail_next(400, body={"error": {"message": message, "code": 400}})
        judge = make_judge(server)
        run_judge(judge, make_request(1), make_request(2))
    assert formats_sent(server) == ["json_schema", "json_object", "json_object"]
    assert judge.active_format == "json_object"
    assert 'Unknown name "additionalProperties"' in (judge.fallback_reason or "")


def test_without_json_object_either_auto_ends_in_text_mode():
    with FakeJudgeServer(response_formats=("text",), unsupported_status=400) as server:
        judge = make_judge(server)
        answers = run_judge(judge, make_request(1), make_request(2))
    assert formats_sent(server) == ["json_schema", "json_object", "text", "text"]
    assert "response_format" not in server.requests[-1].body
    assert judge.active_format == "text"
    reason = judge.fallback_reason or ""
    assert reason.startswith("the server turned down json_schema (HTTP 400: ")
    assert (
        "; then json_object (HTTP 400: Invalid parameter: 'response_format' of type 'json_object'" in reason
    )
    assert all(a.choices == ({"reason": "fake judge", "useful": True},) for a in answers)


def test_a_server_with_json_schema_keeps_it_after_one_transient_500(fake_judge_server):
    fake_judge_server.fail_next(500)
    judge = make_judge(fake_judge_server)
    run_judge(judge, make_request(1), make_request(2))
    assert formats_sent(fake_judge_server) == ["json_schema"] * 3
    assert judge.active_format == "json_schema" and judge.fallback_reason is None


def test_a_server_down_with_bare_500s_is_asked_json_object_no_more_than_its_retries():
    """A bare 500 is llama-cpp-python's answer to json_schema; to json_object it is a server failing:
    retried, where it was taken for json_object unsupported too, and text asked on top (7 requests
    for a judgment allowed 3), the error saying 3."""
    with FakeJudgeServer() as server:
        server.fail_next(500, body=b"Internal Server Error", times=20)
        judge = make_judge(server, max_retries=2)
        with pytest.raises(JudgeUnavailable) as info:
            run_judge(judge, make_request())
    assert formats_sent(server) == ["json_schema", "json_schema", *["json_object"] * 3]
    message = str(info.value)
    assert "HTTP 500: Internal Server Error; gave up after 3 attempt(s), and 2 before with json_schema, " in message
    assert "which the server turned down (HTTP 500: Internal Server Error)" in message


def test_the_call_cap_reached_after_a_format_was_turned_down_says_so():
    from pytest_ragmetrics.errors import JudgeCallCapReached
    from pytest_ragmetrics.judge.budget import JudgeBudget

    with FakeJudgeServer(response_formats=("json_object", "text"), unsupported_status=500) as server:
        judge = make_judge(server, stats=JudgeStats(budget=JudgeBudget(calls=2)))
        with pytest.raises(JudgeCallCapReached):
            run_judge(judge, make_request())
    assert formats_sent(server) == ["json_schema", "json_schema"]


def test_explicit_formats_never_fall_back():
    with FakeJudgeServer(response_formats=("json_object", "text"), unsupported_status=500) as server:
        judge = make_judge(server, response_format="json_schema", max_retries=1)
        with pytest.raises(JudgeUnavailable) as info:
            run_judge(judge, make_request())
    message = str(info.value)
    assert "HTTP 500: Internal Server Error; gave up after 2 attempt(s)" in message  # the server's words
    assert formats_sent(server) == ["json_schema", "json_schema"]
    assert judge.active_format == "json_schema"


def test_a_schema_over_the_limits_is_reported_not_taken_for_a_missing_format():
    with FakeJudgeServer(schema_limits=AZURE_OPENAI) as server:
        judge = make_judge(server)
        too_big = J.recall_request("q", ["c"], [f"S{i}." for i in range(40)], J.JudgeParams("m"))
        with pytest.raises(JudgeUnavailable, match="the answer schema exceeds its limits"):
            run_judge(judge, too_big)
    assert formats_sent(server) == ["json_schema"]
    assert judge.fallback_reason is None


def test_the_report_says_which_response_format_the_run_used(pytester, monkeypatch):
    """Through pytest: a llama.cpp-style server, the judge section and the JSON report name the mode."""
    with FakeJudgeServer(response_formats=("json_object", "text"), unsupported_status=500) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\n")
        pytester.makepyfile(
            test_rag="""
            from pytest_ragmetrics import RagSample, assert_context_precision

            def test_precision():
                sample = RagSample("q?", ["one", "two"], ground_truth="ref", id="s")
                assert_context_precision(sample) >= 0.5
            """
        )
        result = pytester.runpytest("--rag-report", "--rag-report-json=r.json")
        result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "*response format json_object (the server turned down json_schema (HTTP 500: Internal Server Error))*"
        ]
    )
    judge = json.loads((pytester.path / "r.json").read_text())["summary"]["judge"]
    assert judge["response_format"] == "json_object"
    assert judge["response_format_reason"].startswith("the server turned down json_schema (HTTP 500")


def test_the_header_names_an_explicit_response_format(pytester):
    pytester.makeini("[pytest]\nrag_response_format = json_object\n")
    pytester.makepyfile(test_x="def test_x(): pass")
    result = pytester.runpytest("--rag-report")
    result.stdout.fnmatch_lines(
        ["ragmetrics: judge gpt-4o-mini, cache readwrite*, response format json_object"]
    )
