"""Context recall by atomic claims, and the question-level "any relevant chunk" relevance."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragmetrics import (
    Evaluator,
    RagSample,
    ScriptedJudge,
    Settings,
    assert_context_recall,
    context_recall,
    evaluate,
    judgments as J,
)
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.gates import parse_gate
from pytest_ragmetrics.judge.limits import AZURE_OPENAI, STRICTEST, limit_problems
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.specs import BUILTIN_CATALOG, parse_metric_name
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

# RAGAS's own documented example: one sentence, two statements, the context gives only the first.
QUESTION = "Where is France and what is its capital?"
REFERENCE = "France is in Western Europe and its capital is Paris."
CONTEXT = "France, in Western Europe, encompasses medieval cities and alpine villages."
SAMPLE = RagSample(QUESTION, [CONTEXT], ground_truth=REFERENCE, id="france")

CLAIMS = {
    REFERENCE: ["France is in Western Europe.", "The capital of France is Paris."],
}


def claims_judge(request: Any) -> dict[str, Any]:
    """Splits sentences by a table (or keeps a sentence whole) and attributes by a keyword."""
    inputs = request.inputs
    joined = " ".join(inputs["contexts"])
    first = inputs.get("first_sentence", 1)
    if request.kind == J.RECALL:  # all or nothing: a sentence naming Paris needs a context naming it
        return {
            f"sentence_{first + i}": {"reason": "r", "attributed": "Paris" not in s or "Paris" in joined}
            for i, s in enumerate(inputs["reference_sentences"])
        }
    assert request.kind == J.CLAIMS
    out = {}
    for i, sentence in enumerate(inputs["reference_sentences"]):
        claims = CLAIMS.get(sentence, [sentence])
        out[f"sentence_{first + i}"] = {
            "claims": [
                {
                    "claim": c,
                    "reason": "stated" if ("Paris" not in c or "Paris" in joined) else "no context names it",
                    "attributed": "Paris" not in c or "Paris" in joined,
                }
                for c in claims
            ]
        }
    return out


@pytest.fixture
def judge():
    return ScriptedJudge(claims_judge)


@pytest.fixture
def evaluator(judge, tmp_path):
    with Evaluator(Settings(cache="readwrite", cache_dir=str(tmp_path / "cache")), judge=judge) as ev:
        yield ev


def test_claims_score_the_compound_sentence_half_where_sentences_score_it_zero(evaluator, judge):
    """RAGAS's example: 'France is in Western Europe and its capital is Paris.' with only the first."""
    sentence = evaluator.score(SAMPLE, "context_recall")
    claims = evaluator.score(SAMPLE, "context_recall", "claims")
    assert sentence.score == 0.0 and sentence.name == "context_recall"
    assert claims.score == 0.5 and claims.name == "context_recall[claims]"
    assert [(v.text, v.value) for v in claims.verdicts] == [
        ("France is in Western Europe.", 1.0),
        ("The capital of France is Paris.", 0.0),
    ]
    assert claims.verdicts[1].label == "not supported (reference sentence 1)"
    assert claims.verdicts[1].extracted == (REFERENCE,)
    assert (
        "1 of 2 reference claims are supported; claim 2 'The capital of France is Paris.' "
        f"(of '{REFERENCE}') is not supported by any context: no context names it"
    ) == claims.explanation
    assert [r.kind for r in judge.requests] == [J.RECALL, J.CLAIMS]  # one request per sample each


def test_claims_are_one_cached_request_per_sample_and_ignore_context_order(evaluator, judge):
    evaluator.score(SAMPLE, "context_recall", "claims")
    again = RagSample(QUESTION, [PARIS := "Paris is its capital.", CONTEXT], ground_truth=REFERENCE)
    first = evaluator.score(again, "context_recall", "claims")
    reranked = evaluator.score(
        RagSample(QUESTION, [CONTEXT, PARIS], ground_truth=REFERENCE), "context_recall", "claims"
    )
    assert first.score == reranked.score == 1.0
    assert reranked.cached
    assert judge.calls == 2


def test_sentence_method_is_the_plain_name(evaluator, judge):
    plain = evaluator.score(SAMPLE, "context_recall")
    named = evaluator.score(SAMPLE, "context_recall", "sentence")
    assert named.name == plain.name == "context_recall" and named.score == plain.score
    assert judge.calls == 1
    with pytest.raises(Exception, match="method must be one of sentence, claims; got 'atoms'"):
        evaluator.score(SAMPLE, "context_recall", "atoms")


def test_empty_claims_count_as_one_unsupported_claim():
    judge = ScriptedJudge(lambda r: {"sentence_1": {"claims": []}})
    with Evaluator(Settings(cache="off"), judge=judge) as ev:
        result = ev.score(SAMPLE, "context_recall", "claims")
    assert result.score == 0.0
    [verdict] = result.verdicts
    assert verdict.text == REFERENCE and verdict.reason == "the judge listed no claim for this sentence"


@pytest.mark.parametrize("alone", [False, True])
@pytest.mark.parametrize("blank", ["", "   ", "\u200b", " \u2060\ufeff "])
def test_a_claim_of_no_visible_text_is_no_claim(blank, alone):
    """A claim the judge wrote as nothing (empty, spaces, zero-width characters) and attributed is
    not a reference claim: it counted as one, raising recall for a reference nothing supports."""
    attributed = {"claim": blank, "reason": "r", "attributed": True}
    unsupported = {"claim": "The capital of France is Paris.", "reason": "r", "attributed": False}
    claims = [attributed] if alone else [attributed, unsupported, attributed]
    judge = ScriptedJudge(lambda request: {"sentence_1": {"claims": claims}})
    with Evaluator(Settings(cache="off"), judge=judge) as ev:
        result = ev.score(SAMPLE, "context_recall", "claims")
    assert result.score == 0.0
    assert blank not in [v.text for v in result.verdicts]


def test_self_consistency_takes_the_claims_of_the_choice_nearest_the_mean():
    split = {
        "claims": [
            {"claim": "a", "reason": "r", "attributed": True},
            {"claim": "b", "reason": "r", "attributed": False},
        ]
    }
    whole = {"claims": [{"claim": "ab", "reason": "r", "attributed": False}]}
    both = {
        "claims": [
            {"claim": "a", "reason": "r", "attributed": True},
            {"claim": "b", "reason": "r", "attributed": True},
        ]
    }
    # shares 0.5, 0.0, 1.0: mean 0.5, so the first choice's two claims are taken.
    [claims] = J.combine_claims([{"sentence_1": split}, {"sentence_1": whole}, {"sentence_1": both}], 1)
    assert claims == [("a", True, "r"), ("b", False, "r")]


def test_module_function_assertion_and_evaluate_take_the_claims_method(judge):
    with Evaluator(Settings(cache="off"), judge=judge) as ev:
        assert context_recall(SAMPLE, method="claims", evaluator=ev).score == 0.5
        check = assert_context_recall(SAMPLE, method="claims", evaluator=ev)
        assert check >= 0.5
        report = evaluate([SAMPLE], metrics=["context_recall[claims]", "context_recall"], evaluator=ev)
    assert report["france"]["context_recall[claims]"].score == 0.5
    assert report["france"]["context_recall"].score == 0.0
    assert report.aggregates["context_recall[claims]"]["mean"] == 0.5


def test_gates_read_plain_recall_as_the_sentence_method_and_claims_by_name():
    assert parse_gate("context_recall mean >= 0.8").key == ("context_recall", None)
    assert parse_gate("context_recall[sentence] mean >= 0.8").key == ("context_recall", None)
    assert parse_gate("context_recall[claims] p10 >= 0.5").key == ("context_recall", "claims")
    with pytest.raises(ConfigError, match="unknown method 'atoms' for context_recall"):
        parse_gate("context_recall[atoms] mean >= 0.8")
    assert parse_metric_name("context_recall[sentence]", BUILTIN_CATALOG).method is None
    # Relevance keeps needing its method: its default is configurable, so a plain name is ambiguous.
    with pytest.raises(ConfigError, match="needs a method"):
        parse_gate("context_relevance mean >= 0.5")
    assert parse_gate("context_relevance[any] mean >= 0.9").key == ("context_relevance", "any")


@pytest.mark.parametrize("count", [1, 19, 20, 21, 45])
def test_claims_windows_stay_within_the_strictest_limits(count):
    sentences = [f"Reference sentence {i} is here." for i in range(1, count + 1)]
    requests = J.claims_requests("q", ["c"], sentences, J.JudgeParams("m"), "claims")
    assert all(limit_problems(r.schema, STRICTEST) == [] for r in requests)
    assert [n for r in requests for n in r.schema["required"]] == [
        f"sentence_{i}" for i in range(1, count + 1)
    ]
    assert len(requests) == -(-count // J.CLAIMS_WINDOW)


def claims_server_judge(body: dict[str, Any]) -> dict[str, Any]:
    """Over HTTP: every sentence is two claims, the second one never supported."""
    user = json.loads(body["messages"][-1]["content"])
    return {
        f"sentence_{n}": {
            "claims": [
                {"claim": f"{text} (first part)", "reason": "stated", "attributed": True},
                {"claim": f"{text} (second part)", "reason": "not stated", "attributed": False},
            ]
        }
        for n, text in user["reference_sentences"].items()
    }


def test_claims_over_http_within_azures_limits_for_a_long_reference(tmp_path):
    with FakeJudgeServer(claims_server_judge, schema_limits=AZURE_OPENAI) as server:
        judge = OpenAIJudge("m", api_key="sk-dummy", base_url=server.base_url, max_retries=0)
        settings = Settings(judge_model="m", cache="readwrite", cache_dir=str(tmp_path / "c"))
        reference = " ".join(f"Fact {i} holds here." for i in range(1, 46))
        with Evaluator(settings, judge=judge) as ev:
            result = ev.score(RagSample("q?", ["chunk"], ground_truth=reference), "context_recall", "claims")
        assert server.request_count == 3  # windows of 20, 20 and 5 sentences
    assert len(result.verdicts) == 90 and result.score == 0.5


def test_claims_prompt_calibrates_with_ragas_compound_example():
    request = J.claims_request("q", ["c"], ["s."], J.JudgeParams("m"))
    system = request.messages[0]["content"]
    assert request.prompt_version == "claims-1"
    assert "France is in Western Europe and its capital is Paris." in system
    [output] = [line[len("output: ") :] for line in system.splitlines() if line.startswith("output: ")]
    example = json.loads(output)
    assert [c["attributed"] for c in example["sentence_1"]["claims"]] == [True, False]
    assert list(example["sentence_1"]["claims"][0]) == ["claim", "reason", "attributed"]


# --- relevance "any": the question-level score from the per-chunk judgments ------------------------


def sentences_judge(request: Any) -> dict[str, Any]:
    chosen = [i for i, s in enumerate(request.inputs["sentences"], start=1) if "Paris" in s]
    return {"reason": "names Paris" if chosen else "no", "relevant_sentences": chosen}


def test_any_is_one_when_some_chunk_is_relevant_at_no_extra_judge_call(tmp_path):
    judge = ScriptedJudge(sentences_judge)
    sample = RagSample(QUESTION, ["The food is good.", "Paris is the capital.", "Wine too."], id="s")
    none = RagSample(QUESTION, ["The food is good.", "Wine too."], id="n")
    with Evaluator(Settings(cache="readwrite", cache_dir=str(tmp_path / "c")), judge=judge) as ev:
        binary = ev.score(sample, "context_relevance", "binary")
        calls = judge.calls
        any_ = ev.score(sample, "context_relevance", "any")
        assert judge.calls == calls  # the same per-chunk judgments, from the cache
        assert ev.score(none, "context_relevance", "any").score == 0.0
    assert binary.score == pytest.approx(1 / 3)
    assert any_.score == 1.0 and any_.name == "context_relevance[any]" and any_.cached
    assert any_.explanation == "1 of 3 chunks contain a sentence needed to answer (ranks 2)"


def test_claims_gate_through_pytest(pytester, monkeypatch):
    with FakeJudgeServer(claims_server_judge) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini(
            "[pytest]\nrag_gates =\n    context_recall[claims] mean >= 0.4\n    context_recall[claims] mean >= 0.6\n"
        )
        pytester.makepyfile(
            test_rag="""
            from pytest_ragmetrics import RagSample, assert_context_recall

            def test_claims():
                sample = RagSample("q?", ["c"], ground_truth="One fact. Another fact.", id="s")
                assert_context_recall(sample, method="claims") >= 0.5
            """
        )
        result = pytester.runpytest("-v", "--rag-report")
    result.assert_outcomes(passed=1)
    assert result.ret == 1  # the second gate fails
    result.stdout.fnmatch_lines(  # [[] is a literal "[" in fnmatch
        [
            "PASS*0.500*>= 0.5*context_recall[[]claims]*",
            "PASS*context_recall[[]claims] mean >= 0.4*value 0.500*",
            "FAIL*context_recall[[]claims] mean >= 0.6*value 0.500*",
        ]
    )
