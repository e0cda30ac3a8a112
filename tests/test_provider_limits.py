"""Every request stays within every provider's schema limits, through the real openai client.

The FakeJudgeServer enforces Azure OpenAI's limits (100 object properties, 500 enum values, 15,000
characters of names, 5 levels of nesting) and rejects as Azure does; long references and chunks are
judged in windows whose verdicts are joined, with exact scores and per-window caching.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragmetrics import Evaluator, RagSample, Settings, judgments as J
from pytest_ragmetrics.errors import JudgeUnavailable
from pytest_ragmetrics.judge.limits import AZURE_OPENAI, OPENAI, STRICTEST, limit_problems, measure
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.testing import FakeJudgeServer

PARAMS = J.JudgeParams("m")


def test_the_strictest_limits_are_azures_and_2024_openais():
    assert (STRICTEST.max_properties, STRICTEST.max_enum_values) == (100, 500)
    assert (STRICTEST.max_name_characters, STRICTEST.max_nesting) == (15_000, 5)
    assert (OPENAI.max_properties, OPENAI.max_enum_values) == (5000, 1000)


def test_measure_counts_properties_enum_values_names_and_nesting():
    schema = J.recall_request("q", ["c"], ["a.", "b."], PARAMS).schema
    size = measure(schema)
    # sentence_1, sentence_2, and reason + attributed inside each.
    assert size.properties == 6
    assert size.nesting == 2
    assert size.name_characters == 2 * len("sentence_1") + 2 * len("reason") + 2 * len("attributed")
    sentences = J.sentences_request("q", ["a."] * 12, PARAMS).schema
    assert measure(sentences).enum_values == 12
    assert measure(sentences).name_characters == len("reason") + len("relevant_sentences") + 9 + 2 * 3


def test_one_request_for_a_long_reference_would_exceed_azures_limits():
    """The reason for windows: 34 reference sentences are 102 properties in one schema."""
    one = J.recall_request("q", ["c"], [f"S{i}." for i in range(34)], PARAMS)
    assert limit_problems(one.schema, AZURE_OPENAI) == [
        "the schema has 102 object properties; the limit is 100"
    ]
    chunk = J.sentences_request("q", [f"S{i}." for i in range(501)], PARAMS)
    assert "501 enum values" in limit_problems(chunk.schema, AZURE_OPENAI)[0]


@pytest.mark.parametrize("count", [1, 29, 30, 31, 34, 61, 250])
def test_recall_windows_stay_within_the_strictest_limits_and_cover_every_sentence(count):
    sentences = [f"Reference sentence {i} is here." for i in range(1, count + 1)]
    requests = J.recall_requests("q", ["c"], sentences, PARAMS, "recall")
    for request in requests:
        assert limit_problems(request.schema, STRICTEST) == []
        assert len(json.dumps(request.schema)) < 15_000  # even the whole schema text
    covered = [n for r in requests for n in r.schema["required"]]
    assert covered == [f"sentence_{i}" for i in range(1, count + 1)]
    assert len(requests) == -(-count // J.RECALL_WINDOW)


@pytest.mark.parametrize("count", [1, 199, 200, 201, 600, 1001])
def test_sentence_windows_stay_within_the_strictest_limits_and_cover_every_sentence(count):
    sentences = [f"Chunk sentence {i}." for i in range(1, count + 1)]
    requests = J.sentences_requests("q", sentences, PARAMS, "chunk")
    for request in requests:
        assert limit_problems(request.schema, STRICTEST) == []
        assert len(json.dumps(request.schema)) < 15_000
        first = request.inputs.get("first_sentence", 1)
        shown = json.loads(request.messages[1]["content"])["sentences"]
        assert list(shown) == [
            str(n) for n in request.schema["properties"]["relevant_sentences"]["items"]["enum"]
        ]
        assert shown[str(first)] == sentences[first - 1]  # numbered as in the whole chunk
    numbers = [n for r in requests for n in r.schema["properties"]["relevant_sentences"]["items"]["enum"]]
    assert numbers == list(range(1, count + 1))


# --- through the real openai client against a server that enforces Azure's limits ---------------


def judge_by_content(body: dict[str, Any]) -> dict[str, Any]:
    """A judge reading the material: 'kept' sentences are attributed or needed, others are not."""
    user = json.loads(body["messages"][-1]["content"])
    if "reference_sentences" in user:
        return {
            f"sentence_{n}": {"reason": "read it", "attributed": "kept" in text}
            for n, text in user["reference_sentences"].items()
        }
    if "sentences" in user:
        chosen = [int(n) for n, text in user["sentences"].items() if "kept" in text]
        return {"reason": "read it", "relevant_sentences": chosen}
    raise AssertionError(user)


@pytest.fixture
def azure_like():
    with FakeJudgeServer(judge_by_content, schema_limits=AZURE_OPENAI) as server:
        yield server


@pytest.fixture
def evaluator(azure_like, tmp_path):
    judge = OpenAIJudge("judge-model", api_key="sk-dummy", base_url=azure_like.base_url, max_retries=0)
    settings = Settings(judge_model="judge-model", cache="readwrite", cache_dir=str(tmp_path / "cache"))
    with Evaluator(settings, judge=judge) as ev:
        yield ev


def long_text(count: int, kept: set[int]) -> str:
    return " ".join(f"Fact {i} is {'kept' if i in kept else 'dropped'} here." for i in range(1, count + 1))


def test_a_70_sentence_reference_is_judged_in_windows_azure_accepts(evaluator, azure_like):
    kept = {1, 30, 31, 45, 70}
    sample = RagSample("q?", ["a chunk"], ground_truth=long_text(70, kept), id="long")
    result = evaluator.score(sample, "context_recall")
    assert len(result.verdicts) == 70
    assert result.score == len(kept) / 70  # exact: every window's verdicts joined in order
    assert [v.index for v in result.verdicts if v.value == 1.0] == sorted(kept)
    assert azure_like.request_count == 3  # sentences 1-30, 31-60, 61-70
    assert result.judge_calls == 3


def test_recall_windows_are_cached_one_by_one(evaluator, azure_like):
    first = RagSample("q?", ["a chunk"], ground_truth=long_text(70, {2}), id="long")
    evaluator.score(first, "context_recall")
    assert evaluator.score(first, "context_recall").cached
    # Change a sentence of the last window only: the first two windows are not judged again.
    changed = RagSample("q?", ["a chunk"], ground_truth=long_text(70, {2, 65}), id="long")
    result = evaluator.score(changed, "context_recall")
    assert azure_like.request_count == 4
    assert result.score == 2 / 70
    assert result.verdicts[0].cached and not result.verdicts[64].cached


def test_a_600_sentence_chunk_is_judged_in_windows_azure_accepts(evaluator, azure_like):
    kept = {1, 200, 201, 599}
    sample = RagSample("q?", [long_text(600, kept), "Fact 1 is kept here."], id="big")
    sentence = evaluator.score(sample, "context_relevance", "sentence")
    binary = evaluator.score(sample, "context_relevance", "binary")
    assert azure_like.request_count == 4  # three windows for the long chunk, one for the short
    assert sentence.score == (len(kept) + 1) / 601
    assert binary.score == 1.0
    assert sentence.verdicts[0].extracted == tuple(f"Fact {i} is kept here." for i in sorted(kept))


def test_a_schema_rejected_anyway_names_the_limit_not_the_response_format(azure_like):
    """A request built without windows is rejected as Azure would; the message says why."""
    judge = OpenAIJudge("judge-model", api_key="sk-dummy", base_url=azure_like.base_url, max_retries=2)
    too_big = J.recall_request("q", ["c"], [f"Fact {i} is kept." for i in range(40)], PARAMS, "recall of x")
    evaluator = Evaluator(Settings(cache="off"), judge=judge)
    try:
        with pytest.raises(JudgeUnavailable) as info:
            evaluator.runner.run(judge.judge(too_big))
    finally:
        evaluator.runner.run(judge.aclose())
        evaluator.close()
    message = str(info.value)
    assert "HTTP 400, not retried" in message
    assert "the answer schema exceeds its limits" in message
    assert "Invalid schema for response_format 'context_recall'" in message  # the server's own words
    assert "the schema has 120 object properties; the limit is 100" in message
    assert azure_like.request_count == 1
