"""Every judge request carries a completion limit sized to its answer, and a cut-off answer is never kept."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from judge_requests import make_request
from test_judge_openai import make_judge, run_judge

from pytest_ragmetrics import Evaluator, InvalidJudgeAnswer, RagSample, Settings, judgments as J
from pytest_ragmetrics.judge.limits import MAX_COMPLETION_TOKENS, completion_tokens
from pytest_ragmetrics.judge.openai_judge import REASONING_TOKENS, OpenAIJudge
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value, default_responder

SAMPLE = RagSample(
    question="Where is France and what is its capital?",
    contexts=[
        "France, in Western Europe, encompasses medieval cities and alpine villages.",
        "Paris, its capital, is famed for its fashion houses and the Louvre.",
    ],
    ground_truth="France is in Western Europe. Its capital is Paris.",
    id="france",
)
EVERY_METHOD = [
    ("context_precision", None),
    ("context_recall", "sentence"),
    ("context_recall", "claims"),
    ("context_relevance", "graded"),
    ("context_relevance", "sentence"),
]


def limit_of(body: dict[str, Any]) -> int | None:
    return body.get("max_tokens", body.get("max_completion_tokens"))


def looping(body: dict[str, Any]) -> str:
    """A model that never stops inside its reason, as local models at temperature 0 sometimes do."""
    return '{"reason": "' + "and so on " * 5000


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")


def evaluator(server: FakeJudgeServer, tmp_path: Path, **settings: Any) -> Evaluator:
    options = {"judge_base_url": server.base_url, "cache_dir": str(tmp_path / "cache"), "max_retries": 0}
    return Evaluator(Settings(**{**options, **settings}))


def test_no_request_of_any_metric_lacks_a_completion_limit(fake_judge_server, key, tmp_path):
    with evaluator(fake_judge_server, tmp_path) as ev:
        for metric, method in EVERY_METHOD:
            ev.score(SAMPLE, metric, method)
    bodies = [r.body for r in fake_judge_server.requests]
    kinds = {json.dumps(b["response_format"]["json_schema"]["schema"], sort_keys=True) for b in bodies}
    assert len(kinds) >= 5  # every shape of answer was asked for
    for body in bodies:
        schema = body["response_format"]["json_schema"]["schema"]
        assert body["max_tokens"] == completion_tokens(schema)


def test_the_limit_holds_a_valid_answer_with_a_two_sentence_reason():
    reason = "The passage dates the opening of the tower to March 1889. " * 2
    for schema in (J._precision_schema(), J._graded_schema(), J._recall_schema(1, 30)):
        answer = {name: conforming_value(sub) for name, sub in schema["properties"].items()}
        text = json.dumps(answer).replace('"fake judge"', json.dumps(reason))
        assert len(text) / 4 < completion_tokens(schema)  # four characters a token, generously
    assert completion_tokens(J._precision_schema()) < 300  # a loop is cut off early
    assert completion_tokens(J._claims_schema(1, 20)) == MAX_COMPLETION_TOKENS


def test_a_configured_limit_is_sent_as_is(fake_judge_server, key, tmp_path):
    with evaluator(fake_judge_server, tmp_path, judge_max_tokens=77) as ev:
        ev.score(SAMPLE, "context_precision")
    assert {limit_of(r.body) for r in fake_judge_server.requests} == {77}


def test_an_answer_cut_off_by_the_limit_is_never_cached(fake_judge_server, key, tmp_path):
    fake_judge_server.responder = looping
    single = RagSample(SAMPLE.question, SAMPLE.contexts[:1], SAMPLE.ground_truth, id="one")
    with (
        evaluator(fake_judge_server, tmp_path, max_reasks=1) as ev,
        pytest.raises(InvalidJudgeAnswer) as info,
    ):
        ev.score(single, "context_relevance", "graded")
    message = str(info.value)
    assert "cut off at the completion limit (max_tokens=206)" in message
    assert "--rag-judge-max-tokens=412" in message or "RAGMETRICS_JUDGE_MAX_TOKENS=412" in message
    assert fake_judge_server.request_count == 2  # asked and re-asked
    # The re-ask shows the model what happened.
    reask = fake_judge_server.requests[-1].body["messages"][-1]["content"]
    assert "cut off" in reask and "one short sentence" in reask
    # Nothing was kept: a run with a model that answers is asked again for every chunk.
    fake_judge_server.responder = default_responder
    with evaluator(fake_judge_server, tmp_path) as ev:
        assert ev.score(single, "context_relevance", "graded").score == 1.0
    assert fake_judge_server.request_count == 3


def test_a_cut_off_answer_is_re_asked_and_the_complete_one_kept(fake_judge_server, key, tmp_path):
    answers = iter([looping({}), {"reason": "gives the year", "rating": 2}])
    fake_judge_server.responder = lambda body: next(answers)
    single = RagSample(SAMPLE.question, SAMPLE.contexts[:1], SAMPLE.ground_truth, id="one")
    with evaluator(fake_judge_server, tmp_path) as ev:
        assert ev.score(single, "context_relevance", "graded").score == 1.0
    assert fake_judge_server.request_count == 2
    with evaluator(fake_judge_server, tmp_path) as ev:
        assert ev.score(single, "context_relevance", "graded").score == 1.0
    assert fake_judge_server.request_count == 2  # the complete answer came from the cache


def test_a_cut_off_answer_that_parses_is_still_not_taken():
    """A truncated answer can happen to be valid JSON (a list cut between items): it is re-asked."""
    server = FakeJudgeServer(lambda body: '{"reason": "x", "rating": 2}' + " " * 4000).start()
    try:
        stats = JudgeStats()
        with pytest.raises(InvalidJudgeAnswer, match="cut off"):
            run_judge(make_judge(server, stats=stats, max_reasks=1), make_request())
        assert stats.reasks == 1
    finally:
        server.stop()


def test_a_server_that_wants_max_completion_tokens_gets_it(key):
    server = FakeJudgeServer(limit_parameters=("max_completion_tokens",)).start()
    try:
        stats = JudgeStats()
        judge = make_judge(server, stats=stats)
        run_judge(judge, make_request(), make_request(1))
        first, *rest = [r.body for r in server.requests]
        assert "max_tokens" in first and "max_completion_tokens" not in first
        assert rest and all("max_tokens" not in body for body in rest)
        schema = rest[0]["response_format"]["json_schema"]["schema"]
        # A reasoning model's limit counts its reasoning as well.
        assert {b["max_completion_tokens"] for b in rest} == {completion_tokens(schema) + REASONING_TOKENS}
        assert judge.limit_parameter == "max_completion_tokens"
        assert stats.retries == 0 and stats.errors == 0 and stats.calls == 2
    finally:
        server.stop()


def test_a_limit_above_the_servers_maximum_is_lowered_to_it(key):
    server = FakeJudgeServer(max_completion_tokens=150).start()
    try:
        judge = make_judge(server)
        run_judge(judge, make_request())
        assert [limit_of(r.body) for r in server.requests] == [completion_tokens(make_request().schema), 150]
        run_judge(judge, make_request(1))
        assert limit_of(server.requests[-1].body) == 150
    finally:
        server.stop()


def test_a_limit_below_one_is_a_config_error():
    from pytest_ragmetrics.errors import ConfigError

    with pytest.raises(ConfigError, match="max_tokens"):
        OpenAIJudge(max_tokens=0)
    with pytest.raises(ConfigError, match="judge_max_tokens"):
        Settings(judge_max_tokens=0)


def test_a_limit_the_models_context_cannot_hold_is_lowered_to_what_the_prompt_leaves(key):
    """vLLM rejects a limit that does not fit the context beside the prompt: the rest of it is asked for."""
    server = FakeJudgeServer().start()
    try:
        limit = completion_tokens(make_request().schema)
        message = (
            "This model's maximum context length is 1000 tokens. However, you requested "
            f"{950 + limit} tokens (950 in the messages, {limit} in the completion). Please reduce the length "
            "of the messages or completion."
        )
        server.fail_next(400, body={"object": "error", "message": message, "type": "BadRequestError"})
        stats = JudgeStats()
        run_judge(make_judge(server, stats=stats), make_request())
        assert [limit_of(r.body) for r in server.requests] == [limit, 50]
        assert stats.retries == 0 and stats.errors == 0
    finally:
        server.stop()
