"""Faithfulness, answer relevancy and answer correctness: judged once through the real openai client,
cached, replayed, and scored by pure arithmetic over claim verdicts."""

from __future__ import annotations

import json
from typing import Any

import answer_judge
import pytest
from sklearn.metrics import precision_recall_fscore_support

from pytest_ragmetrics import (
    Evaluator,
    MetricResult,
    RagSample,
    ScriptedJudge,
    Settings,
    answer_correctness,
    answer_relevancy,
    assert_answer_correctness,
    assert_faithfulness,
    claim_judgments as C,
    evaluate,
    faithfulness,
)
from pytest_ragmetrics.errors import InvalidSample
from pytest_ragmetrics.gates import evaluate_gates, parse_gate
from pytest_ragmetrics.judge.limits import AZURE_OPENAI, STRICTEST, completion_tokens, limit_problems
from pytest_ragmetrics.judgments import JudgeParams
from pytest_ragmetrics.metrics import answer as A
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value

TOWER = "The Eiffel Tower was completed in 1889."
HEIGHT = "The Eiffel Tower is 330 metres tall."
PARIS = "Paris is in France."
ANSWER = "The Eiffel Tower was completed in 1889 and the Eiffel Tower is 300 metres tall. It is painted every seven years."
REFERENCE = f"{TOWER} {HEIGHT}"
SAMPLE = RagSample(
    "When was the Eiffel Tower completed, and how tall is it?",
    [PARIS, HEIGHT, TOWER],
    ground_truth=REFERENCE,
    answer=ANSWER,
    id="tower",
)
DONT_KNOW = RagSample(
    "How tall is the tower?", [HEIGHT], ground_truth=HEIGHT, answer="I don't know.", id="idk"
)


@pytest.fixture
def server(monkeypatch):
    with FakeJudgeServer(answer_judge.responder) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server


@pytest.fixture
def settings(server, tmp_path):
    return Settings(
        judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store")
    )


# --- the arithmetic -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("tp", "fp", "fn"), [(1, 2, 1), (3, 0, 0), (0, 2, 3), (5, 1, 2), (2, 2, 0)])
def test_correctness_precision_recall_and_f1_match_scikit_learn(tp, fp, fn):
    """TP, FP and FN as a labelling: TP claims true and predicted, FP predicted only, FN true only."""
    truth = [1] * tp + [0] * fp + [1] * fn
    predicted = [1] * tp + [1] * fp + [0] * fn
    p, r, f, _ = precision_recall_fscore_support(truth, predicted, average="binary", zero_division=0)
    assert A.correctness_score(tp, fp, fn, "precision") == pytest.approx(p, abs=1e-15)
    assert A.correctness_score(tp, fp, fn, "recall") == pytest.approx(r, abs=1e-15)
    assert A.correctness_score(tp, fp, fn, "f1") == pytest.approx(f, abs=1e-15)


def _factual_correctness(tp: int, fp: int, fn: int, mode: str) -> float:
    """RAGAS 0.4.3's FactualCorrectness score of TP, FP and FN, as its code computes it
    (ragas/metrics/collections/factual_correctness/metric.py, fbeta_score in ragas/metrics/utils.py):
    precision and recall with 1e-8 added to the denominator, F1 from unperturbed ratios, each
    np.round(score, 2)."""
    if mode == "precision":
        score = tp / (tp + fp + 1e-8)
    elif mode == "recall":
        score = tp / (tp + fn + 1e-8)
    else:
        precision = tp / (tp + fp) if tp + fp else 0
        recall = tp / (tp + fn) if tp + fn else 0
        score = 0.0 if precision == recall == 0 else 2 * precision * recall / (precision + recall)
    return round(score, 2)  # np.round and round agree on these: no value sits within an ulp of a tie


@pytest.mark.parametrize(
    ("tp", "fp", "fn", "mode", "ragas"),
    [
        (3, 5, 0, "precision", 0.37),  # 3/8: RAGAS's 1e-8 puts it below the tie
        (7, 1, 0, "precision", 0.87),  # 7/8
        (1, 39, 0, "precision", 0.02),  # 1/40
        (3, 0, 5, "recall", 0.37),
        (1, 3, 11, "f1", 0.12),  # 2/16, the exact tie, to even
        (3, 5, 5, "f1", 0.38),  # 6/16
        (2, 1, 0, "f1", 0.8),
    ],
)
def test_answer_correctness_is_factual_correctness_before_its_rounding(tp, fp, fn, mode, ragas):
    """docs/metrics.md: ours is exact, RAGAS's rounded to two decimals, and a tie of its precision
    or recall goes down; the two differ by at most 0.005."""
    ours = A.correctness_score(tp, fp, fn, mode)
    assert _factual_correctness(tp, fp, fn, mode) == ragas
    assert abs(ours - ragas) <= 0.005 + 1e-9
    below_a_tie = mode != "f1"
    assert round(ours - 1e-9 if below_a_tie else ours, 2) == ragas


def test_faithfulness_methods_read_one_list_of_verdicts():
    verdicts = ["supported", "contradicted", "not_found", "supported"]
    assert A.faithfulness_score(verdicts, "supported") == 0.5
    assert A.faithfulness_score(verdicts, "not_contradicted") == 0.75
    with pytest.raises(ValueError, match="at least one claim"):
        A.faithfulness_score([], "supported")


def test_relevancy_is_zero_for_a_noncommittal_answer_whatever_the_rating():
    assert A.relevancy_score(True, 2) == 0.0
    assert A.relevancy_score(False, 1) == 0.5
    assert A.relevancy_score(False, 2) == 1.0


# --- judged through the fake server ---------------------------------------------------------------------


def test_faithfulness_names_every_claim_that_is_not_supported_with_its_reason_and_chunks(settings, server):
    with Evaluator(settings) as ev:
        supported = faithfulness(SAMPLE, evaluator=ev)
        calls = server.request_count
        not_contradicted = faithfulness(SAMPLE, "not_contradicted", evaluator=ev)
    assert calls == 2  # the answer's claims, then all their verdicts in one request
    assert server.request_count == calls  # the second method reads the same verdicts
    assert supported.name == "faithfulness" and not_contradicted.name == "faithfulness[not_contradicted]"
    assert [(v.text, v.label, v.chunks) for v in supported.verdicts] == [
        ("The Eiffel Tower was completed in 1889.", "supported", (3,)),
        ("the Eiffel Tower is 300 metres tall.", "contradicted", (2,)),
        ("It is painted every seven years.", "not found", ()),
    ]
    assert supported.score == pytest.approx(1 / 3) and not_contradicted.score == pytest.approx(2 / 3)
    assert supported.explanation == (
        "1 of 3 answer claims are supported by the contexts; claim 2 'the Eiffel Tower is 300 metres tall.' "
        "is contradicted (chunk 2): judged contradicted; claim 3 'It is painted every seven years.' is not "
        "found in the contexts: judged not_found"
    )


def test_answer_correctness_counts_tp_fp_fn_like_factual_correctness(settings, server):
    with Evaluator(settings) as ev:
        f1 = answer_correctness(SAMPLE, evaluator=ev)
        calls = server.request_count
        precision = answer_correctness(SAMPLE, "precision", evaluator=ev)
        recall = answer_correctness(SAMPLE, "recall", evaluator=ev)
    assert calls == 4  # claims of the answer and of the reference, verdicts both ways: RAGAS's 4
    assert server.request_count == calls
    assert precision.score == pytest.approx(1 / 3) and recall.score == 0.5
    assert f1.score == pytest.approx(0.4) and f1.name == "answer_correctness"
    assert f1.explanation.startswith("TP 1, FP 2, FN 1; answer claim 2")
    assert (
        "reference claim 2 'The Eiffel Tower is 330 metres tall.' is contradicted by the answer"
        in f1.explanation
    )
    assert [v.item for v in precision.verdicts] == ["answer claim"] * 3


def test_a_claim_made_twice_counts_twice_as_ragas_and_deepeval_count_it(settings, server):
    """The peers count every statement their judge lists, repeats included; so do we."""
    untold = "The Eiffel Tower is 300 metres tall."
    sample = RagSample("When?", [TOWER], ground_truth=TOWER, answer=f"{TOWER} {untold} {TOWER}", id="twice")
    with Evaluator(settings) as ev:
        faithful = faithfulness(sample, evaluator=ev)
        correct = answer_correctness(sample, evaluator=ev)
    assert [v.text for v in faithful.verdicts] == [TOWER, untold, TOWER]
    assert faithful.score == pytest.approx(2 / 3)  # 2 of 3 statements supported
    assert correct.score == pytest.approx(0.8)  # TP 2, FP 1, FN 0: 2TP / (2TP + FP + FN) = 4 / 5


def test_relevancy_draws_are_a_majority_vote_not_ragass_all_non_committal_rule():
    """With several draws the answer is non-committal when most say so (RAGAS zeroes its score only
    when all its generations are non-committal): docs/metrics.md states the difference."""
    evasive = {"reason": "", "committal": False, "rating": 0}
    on_topic = {"reason": "", "committal": True, "rating": 2}
    partly = {"reason": "", "committal": True, "rating": 1}
    noncommittal, rating, _ = C.combine_relevancy([evasive, evasive, on_topic])
    assert noncommittal and A.relevancy_score(noncommittal, rating) == 0.0
    noncommittal, rating, _ = C.combine_relevancy([on_topic, partly, evasive])
    assert not noncommittal and A.relevancy_score(noncommittal, rating) == 0.5  # mean rating (2+1+0)/3 = 1
    # Committal is the positive verdict: as every yes/no verdict, it needs a strict majority.
    noncommittal, rating, _ = C.combine_relevancy([on_topic, evasive])
    assert noncommittal and A.relevancy_score(noncommittal, rating) == 0.0


def test_claim_verdicts_of_several_draws_go_by_strict_majority_and_a_tie_is_not_found():
    def draw(*verdicts: str) -> dict[str, Any]:
        return {f"claim_{i}": {"reason": v, "verdict": v} for i, v in enumerate(verdicts, start=1)}

    decided = C.combine_verdicts(
        [draw("supported", "contradicted", "supported"), draw("supported", "supported", "contradicted")], 3
    )
    assert [v.verdict for v in decided] == ["supported", "not_found", "not_found"]
    decided = C.combine_verdicts([draw("contradicted"), draw("contradicted"), draw("supported")], 1)
    assert [(v.verdict, v.reason) for v in decided] == [("contradicted", "contradicted")]


def test_a_claim_the_draws_split_on_is_not_found_with_a_reason_saying_so():
    """Not the reason of a draw that argued for another verdict ("Context 1 gives 1889." shown for a
    claim decided not found), nor its chunks."""
    choices = [
        {"claim_1": {"reason": "Context 1 gives 1889.", "verdict": "supported", "chunks": [1]}},
        {"claim_1": {"reason": "Context 2 says 1890.", "verdict": "contradicted", "chunks": [2]}},
    ]
    (decided,) = C.combine_verdicts(choices, 1, 1, 2)
    assert decided == C.ClaimVerdict(
        "not_found", "the judge's 2 samples disagree (supported, contradicted): no verdict has a majority"
    )
    # A draw that said not found gives the reason, as the first draw to give a verdict does.
    choices.append({"claim_1": {"reason": "No context says.", "verdict": "not_found", "chunks": []}})
    (decided,) = C.combine_verdicts(choices, 1, 1, 2)
    assert (decided.verdict, decided.reason) == ("not_found", "No context says.")


def test_a_sentence_takes_the_claims_of_the_draw_whose_count_is_closest_to_the_mean():
    def draw(*claims: str) -> dict[str, Any]:
        return {"sentence_1": {"claims": list(claims)}}

    # 1, 2 and 4 claims: the mean is 7/3, closest to 2.
    chosen = C.combine_decomposition([draw("a"), draw("b", "c"), draw("d", "e", "f", "g")], 1)
    assert chosen == [["b", "c"]]
    # 1 and 3 claims (one written as nothing, so 2): a tie at the mean 1.5 goes to the first draw.
    assert C.combine_decomposition([draw("a"), draw("b", "c", " \u200b")], 1) == [["a"]]


def test_a_mean_rating_of_judge_samples_that_disagree_is_shown_as_a_mean_not_a_verdict():
    """Ratings 2 and 0 average 1, a verdict neither sample gave: the label says it is a mean, where
    it read "1/2 (partly addresses the question)". Samples that agree keep their verdict's words."""

    def rated(*ratings: int) -> MetricResult:
        def script(request):
            return [{"reason": f"rated {r}", "committal": True, "rating": r} for r in ratings]

        settings = Settings(cache="off", judge_n=len(ratings), temperature=0.5)
        with Evaluator(settings, judge=ScriptedJudge(script)) as ev:
            return answer_relevancy(SAMPLE, evaluator=ev)

    split, same = rated(2, 0), rated(1, 1)
    assert (split.score, split.verdicts[0].label) == (0.5, "1/2 (mean over judge samples)")
    assert (same.score, same.verdicts[0].label) == (0.5, "1/2 (partly addresses the question)")


def test_precision_alone_costs_two_calls_and_shares_the_answer_claims_with_faithfulness(settings, server):
    with Evaluator(settings) as ev:
        answer_correctness(SAMPLE, "precision", evaluator=ev)
        assert server.request_count == 2
        faithfulness(SAMPLE, evaluator=ev)
    assert server.request_count == 3  # the decomposition was reused: only the verdicts were new


def test_answer_relevancy_is_judge_only_and_zero_for_an_evasive_answer(settings, server):
    with Evaluator(settings) as ev:
        good = answer_relevancy(SAMPLE, evaluator=ev)
        evasive = answer_relevancy(DONT_KNOW, evaluator=ev)
    assert (good.score, evasive.score) == (1.0, 0.0)
    assert evasive.verdicts[0].label == "non-committal"
    assert server.request_count == 2


def test_changing_only_the_contexts_reuses_the_answers_claims(settings, server):
    moved = RagSample(SAMPLE.question, [TOWER], ground_truth=REFERENCE, answer=ANSWER, id="tower")
    with Evaluator(settings) as ev:
        faithfulness(SAMPLE, evaluator=ev)
        before = server.request_count
        result = faithfulness(moved, evaluator=ev)
    assert server.request_count == before + 1  # verdicts only
    assert [v.label for v in result.verdicts] == ["supported", "not found", "not found"]


def test_reordering_the_contexts_costs_no_call_and_names_the_chunks_by_their_new_ranks(settings, server):
    reordered = RagSample(SAMPLE.question, [TOWER, HEIGHT, PARIS], ground_truth=REFERENCE, answer=ANSWER)
    with Evaluator(settings) as ev:
        first = faithfulness(SAMPLE, evaluator=ev)
        before = server.request_count
        again = faithfulness(reordered, evaluator=ev)
    assert server.request_count == before
    assert again.cached and again.score == first.score
    assert [v.chunks for v in again.verdicts] == [(1,), (2,), ()]


def test_a_references_claims_are_shared_by_every_answer_checked_against_it(settings, server):
    other = RagSample(SAMPLE.question, [TOWER], ground_truth=REFERENCE, answer=TOWER, id="short")
    with Evaluator(settings) as ev:
        answer_correctness(SAMPLE, evaluator=ev)
        before = server.request_count
        result = answer_correctness(other, evaluator=ev)
    # The new answer's claims and both directions of verdicts; the reference's claims are recorded.
    assert server.request_count == before + 3
    assert result.score == pytest.approx(2 / 3)  # P = 1, R = 1/2


def test_a_replay_makes_no_call_and_gives_identical_scores(settings, server):
    metrics = ["faithfulness", "faithfulness[not_contradicted]", "answer_relevancy", "answer_correctness"]
    metrics += ["answer_correctness[precision]", "answer_correctness[recall]"]
    with Evaluator(settings) as ev:
        recorded = evaluate([SAMPLE, DONT_KNOW], metrics, evaluator=ev)
    calls = server.request_count
    with Evaluator(settings.replace(cache="replay", cache_dir=str(settings.cache_dir) + "-fresh")) as ev:
        replayed = evaluate([SAMPLE, DONT_KNOW], metrics, evaluator=ev)
    assert server.request_count == calls
    assert json.dumps(replayed.to_json()["aggregates"]) == json.dumps(recorded.to_json()["aggregates"])
    for sid in ("tower", "idk"):
        for name, result in recorded.results[sid].items():
            assert replayed.results[sid][name].to_json()["score"] == result.to_json()["score"]
            assert replayed.results[sid][name].cached


# --- no claims ------------------------------------------------------------------------------------------


def test_an_answer_without_claims_is_its_own_outcome_never_a_number(settings):
    with Evaluator(settings) as ev:
        result = faithfulness(DONT_KNOW, evaluator=ev)
        correctness = answer_correctness(DONT_KNOW, evaluator=ev)
        with pytest.raises(AssertionError) as failed:
            assert_faithfulness(DONT_KNOW, evaluator=ev) >= 0.5
        out = evaluate([SAMPLE, DONT_KNOW], ["faithfulness", "answer_correctness"], evaluator=ev)
    assert result.outcome == correctness.outcome == "no_claims"
    assert result.to_json()["score"] is None and result.to_json()["outcome"] == "no_claims"
    with pytest.raises(ValueError, match="has no score: no claims"):
        float(result)
    with pytest.raises(ValueError, match="no claims"):
        result >= 0.5
    message = str(failed.value)
    assert "faithfulness of sample 'idk' has no score, expected >= 0.5" in message
    assert "no claims" in message and "I don't know" in message
    assert out.aggregates["faithfulness"] == {
        "n": 1, "mean": pytest.approx(1 / 3), "min": pytest.approx(1 / 3), "max": pytest.approx(1 / 3),
        "no_claims": 1,
    }  # fmt: skip
    assert out.scores("faithfulness") == [pytest.approx(1 / 3)]
    assert out.outcomes("faithfulness") == {"idk": "no_claims"}


def test_a_check_without_a_score_refuses_to_be_read_as_a_number(settings):
    """``float()`` of an assertion's check, or of a statistic of it, over answers without claims
    raises, as ``float()`` of the result does, where it gave 0.0 (and the repr said ``mean=0``)."""
    with Evaluator(settings) as ev:
        one = assert_faithfulness(DONT_KNOW, evaluator=ev)
        several = assert_faithfulness([DONT_KNOW, DONT_KNOW], evaluator=ev)
        mixed = assert_faithfulness([SAMPLE, DONT_KNOW], evaluator=ev)
    with pytest.raises(ValueError, match="faithfulness of sample 'idk' has no score: no claims"):
        float(one)
    with pytest.raises(ValueError, match="no claims"):
        _ = one.score
    with pytest.raises(AssertionError, match=r"has no score, expected >= 0\.5"):
        one >= 0.5
    for stat in (several.mean(), several.min(), several.quantile(0.5), several.pass_rate(0.5)):
        assert repr(stat).endswith("=no score>")
        with pytest.raises(ValueError, match=r"faithfulness \S+ over 2 samples has no score: none of"):
            float(stat)
    with pytest.raises(ValueError, match="none of the 2 samples has a score"):
        float(several)
    assert float(mixed) == mixed.score == float(mixed.min()) == pytest.approx(1 / 3)
    assert repr(mixed.mean()) == "<Stat faithfulness mean=0.3333>"


def test_an_answer_of_invisible_characters_is_empty_for_every_answer_metric(server, settings):
    """An answer of spaces and zero-width characters splits into no sentence, so it makes no claim:
    answer relevancy scores it as the empty answer it is, with no judge call, where it was sent to
    the judge (which may rate it as addressing the question)."""
    blank = RagSample(
        "How tall is the tower?", [HEIGHT], ground_truth=HEIGHT, answer=" \u200b\u2060 ", id="zw"
    )
    with Evaluator(settings) as ev:
        out = evaluate([blank], ["faithfulness", "answer_correctness", "answer_relevancy"], evaluator=ev)
    assert out.outcomes("faithfulness") == out.outcomes("answer_correctness") == {"zw": "no_claims"}
    relevancy = out["zw"]["answer_relevancy"]
    assert (relevancy.score, relevancy.judge_calls, relevancy.explanation) == (
        0.0, 0, "the answer is empty: it addresses nothing"
    )  # fmt: skip
    assert not [r for r in server.requests if "committal" in json.dumps(r.body)]


def test_a_ground_truth_of_invisible_characters_counts_as_none(monkeypatch, tmp_path):
    """A zero-width space is no reference: precision is judged against the answer, as for an empty
    ground_truth, and answer correctness says the sample has none, where both judged the answer
    against the invisible text (answer correctness then scored 1.0)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    sample = RagSample(
        "How tall is the tower?", [HEIGHT], ground_truth="\u200b \u2060", answer=HEIGHT, id="zw"
    )
    metrics: list[str | tuple[str, str | None]] = [
        "context_precision", ("answer_correctness", "precision"), "answer_correctness",
    ]  # fmt: skip
    with FakeJudgeServer() as server:
        with Evaluator(Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "c"))) as ev:
            out = evaluate([sample], metrics, evaluator=ev, errors="collect")
        asked = [json.loads(r.body["messages"][-1]["content"]) for r in server.requests]
    assert out["zw"]["context_precision"].mode == "without reference"
    assert [a.get("answer") for a in asked] == [HEIGHT]  # precision's one request, against the answer
    errors = out.errors["zw"]
    assert set(errors) == {"answer_correctness[precision]", "answer_correctness"}
    assert "answer_correctness needs a ground_truth (reference answer); sample 'zw' has none" in str(
        errors["answer_correctness[precision]"]
    )


def test_a_chunk_of_invisible_characters_is_scored_as_an_empty_chunk(tmp_path):
    """A chunk of spaces and zero-width characters shows nothing: each metric scores it as the empty
    chunk it looks like, where precision and graded relevance sent it to the judge on its own (and a
    judge could call it useful) and recall and faithfulness listed it among the contexts."""
    metrics: list[str | tuple[str, str | None]] = [
        "context_precision", ("context_relevance", "sentence"), ("context_relevance", "binary"),
        ("context_relevance", "graded"), "context_recall", ("context_recall", "claims"), "faithfulness",
    ]  # fmt: skip
    runs = {}
    for name, chunk in (("blank", " \u200b\u2060 "), ("empty", "")):
        sample = RagSample(
            "How tall is the tower?", [chunk, HEIGHT], ground_truth=HEIGHT, answer=HEIGHT, id="s"
        )
        judge = ScriptedJudge(lambda request: conforming_value(request.schema))
        with Evaluator(Settings(cache_dir=str(tmp_path / name)), judge=judge) as ev:
            out = evaluate([sample], metrics, evaluator=ev)
        scores = {m: (r.score, [v.reason for v in r.verdicts]) for m, r in out["s"].items()}
        runs[name] = (scores, sorted(json.dumps(r.inputs, sort_keys=True) for r in judge.requests))
    assert runs["blank"] == runs["empty"]
    assert runs["blank"][0]["context_precision"] == (0.5, ["empty chunk", "fake judge"])


@pytest.mark.parametrize("method", ["sentence", "claims"])
def test_contexts_that_are_all_empty_chunks_support_no_reference_sentence_and_cost_no_call(method):
    """Chunks of nothing visible are nothing retrieved: recall scores 0 without asking the judge,
    as for no contexts and as faithfulness and precision read them, where it asked the judge
    whether an empty text supports the reference (the fake judge, as a careless one may, said so:
    1.0)."""
    judge = ScriptedJudge(lambda request: conforming_value(request.schema))
    runs = {}
    for name, contexts in (("none", []), ("empty", ["", " \u200b\u2060 "])):
        sample = RagSample("How tall is the tower?", contexts, ground_truth=REFERENCE, answer=TOWER, id="s")
        with Evaluator(Settings(cache="off"), judge=judge) as ev:
            result = ev.score(sample, "context_recall", method)
        assert result is not None
        runs[name] = (result.score, [(v.label, v.reason) for v in result.verdicts])
    assert judge.requests == []
    assert runs["empty"] == runs["none"] == (0.0, [("not supported", "nothing was retrieved")] * 2)


@pytest.mark.parametrize("blank", ["", "   ", "\u200b", " \u2060\ufeff "])
def test_a_claim_of_no_visible_text_is_no_claim(blank):
    """A claim the judge wrote as nothing (empty, spaces, zero-width characters) is dropped: the
    answer's real claims are scored alone, and an answer with no other claim has none. Zero-width
    ones were kept, judged and counted as claims of the answer and of the reference."""

    def script(request):
        payload = json.loads(request.messages[-1]["content"])
        if "sentences" in payload and "question" not in payload:
            return {f"sentence_{n}": {"claims": [blank, *answer_judge.decompose(sentence), blank]}
                    for n, sentence in payload["sentences"].items()}  # fmt: skip
        return answer_judge.answer(payload)

    metrics: list[str | tuple[str, str | None]] = ["faithfulness", "answer_correctness"]
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(script)) as ev:
        out = evaluate([SAMPLE, DONT_KNOW], metrics, evaluator=ev)
    assert [v.text for v in out["tower"]["faithfulness"].verdicts] == [
        "The Eiffel Tower was completed in 1889.", "the Eiffel Tower is 300 metres tall.", "It is painted every seven years."
    ]  # fmt: skip
    assert out["tower"]["faithfulness"].score == pytest.approx(1 / 3)
    assert out["tower"]["answer_correctness"].explanation.startswith("TP 1, FP 2, FN 1")
    assert out.outcomes("faithfulness") == out.outcomes("answer_correctness") == {"idk": "no_claims"}


def _first_user_message(body):
    """The answer to a request's material (a re-ask adds messages after it)."""
    return answer_judge.answer(
        json.loads(next(m for m in body["messages"] if m["role"] == "user")["content"])
    )


def test_a_judge_answer_giving_a_property_twice_is_re_asked_never_read(monkeypatch, tmp_path):
    """``{"sentence_1": ..., "sentence_1": ...}``: JSON's reading keeps the last value silently, so
    which the judge meant is unknown. The answer is re-asked, saying why, and the re-asked one is
    what is scored and recorded."""
    sample = RagSample("When?", [TOWER], answer=TOWER, id="twice")
    twice = '{"sentence_1": {"claims": ["The tower is blue."]}, "sentence_1": {"claims": []}}'
    server = FakeJudgeServer(_first_user_message)
    server.malformed_next(
        json.dumps(
            {
                "id": "chatcmpl-twice", "object": "chat.completion", "created": 1, "model": "gpt-4o-mini",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": twice}, "finish_reason": "stop"}],
            }
        ).encode()
    )  # fmt: skip
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    with server, Evaluator(Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "c"))) as ev:
        result = faithfulness(sample, evaluator=ev)
    assert [v.text for v in result.verdicts] == [TOWER] and result.score == 1.0
    reask = json.dumps(server.requests[1].body["messages"])
    assert "the answer gives 'sentence_1' twice" in reask
    assert len(server.requests) == 3  # the claims twice, then the verdicts


def test_a_list_check_counts_samples_without_claims_apart(settings):
    with Evaluator(settings) as ev:
        check = assert_answer_correctness([SAMPLE, DONT_KNOW], evaluator=ev)
        with pytest.raises(AssertionError) as failed:
            check >= 0.9
        only_idk = assert_faithfulness([DONT_KNOW], evaluator=ev)
        with pytest.raises(AssertionError, match="none of the 1 samples has a score"):
            only_idk.min() >= 0.1
    assert check.score == pytest.approx(0.4)
    assert (
        "answer_correctness mean over 2 samples = 0.400, expected >= 0.9 (1 more without a score, no claims: idk)"
        in str(failed.value)
    )


def test_gates_count_no_claims_beside_n_and_fail_when_nothing_has_a_score():
    gate = parse_gate("faithfulness mean >= 0.9")
    recall_gate = parse_gate("answer_correctness[recall] mean >= 0.7")
    rows = evaluate_gates(
        [gate, recall_gate],
        {("faithfulness", None): [1.0, 0.9], ("answer_correctness", "recall"): []},
        no_claims={("faithfulness", None): 1, ("answer_correctness", "recall"): 2},
    )
    assert (rows[0]["passed"], rows[0]["n"], rows[0]["no_claims"], rows[0]["value"]) == (True, 2, 1, 0.95)
    assert rows[1]["passed"] is False and rows[1]["value"] is None
    assert rows[1]["reason"] == "no evaluation of answer_correctness[recall] has a score: all 2 had no claims"


def test_precision_leaves_fn_out_of_its_head_and_quotes_the_claims_as_written():
    """Precision counts no FN: its explanation says TP and FP alone, and a claim holding ", FN 0"
    is quoted whole, where the text of the whole explanation lost every ", FN 0"."""
    said = "Line B logged TP 2, FP 1, FN 0 in May."
    sample = RagSample("What did line B log?", [HEIGHT], ground_truth=TOWER, answer=said, id="fn0")
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(answer_judge.script)) as ev:
        precision = answer_correctness(sample, "precision", evaluator=ev)
        f1 = answer_correctness(sample, evaluator=ev)
    assert precision.explanation.startswith(f"TP 0, FP 1; answer claim 1 '{said}' is not in the reference")
    assert f1.explanation.startswith(f"TP 0, FP 1, FN 1; answer claim 1 '{said}' is not in the reference")


def test_answer_correctness_needs_a_reference_with_claims():
    judge = ScriptedJudge(answer_judge.script)
    with Evaluator(Settings(cache="off"), judge=judge) as ev:
        with pytest.raises(InvalidSample, match="needs a ground_truth"):
            answer_correctness(RagSample("q", ["c"], answer=TOWER), evaluator=ev)
        with pytest.raises(InvalidSample, match="makes no claim"):
            answer_correctness(
                RagSample("q", ["c"], answer=TOWER, ground_truth="I don't know."), evaluator=ev
            )
        with pytest.raises(InvalidSample, match="needs an answer"):
            faithfulness(RagSample("q", ["c"]), evaluator=ev)


# --- schema limits ----------------------------------------------------------------------------------------

PARAMS = JudgeParams("m")


@pytest.mark.parametrize("count", [1, 20, 21, 45])
def test_long_texts_are_decomposed_in_windows_within_the_strictest_limits(count):
    sentences = [f"Sentence {i} says a thing." for i in range(1, count + 1)]
    requests = C.decomposition_requests(sentences, PARAMS, "answer")
    assert len(requests) == -(-count // C.DECOMPOSITION_WINDOW)
    for request in requests:
        assert limit_problems(request.schema, STRICTEST) == []
        assert completion_tokens(request.schema) < 16_384
    assert [n for r in requests for n in r.schema["required"]] == [
        f"sentence_{i}" for i in range(1, count + 1)
    ]


@pytest.mark.parametrize("count", [1, 25, 26, 60])
def test_many_claims_are_verified_in_windows_within_the_strictest_limits(count):
    claims = [f"Claim {i}." for i in range(1, count + 1)]
    for evidence in ({"contexts": [f"chunk {i}" for i in range(300)]}, {"text": "the reference"}):
        requests = C.verdict_requests(claims, PARAMS, "claims", **evidence)
        assert len(requests) == -(-count // C.VERDICT_WINDOW)
        for request in requests:
            assert limit_problems(request.schema, STRICTEST) == []
        assert [n for r in requests for n in r.schema["required"]] == [
            f"claim_{i}" for i in range(1, count + 1)
        ]


def test_a_long_answer_is_scored_in_windows_through_azures_limits(monkeypatch, tmp_path):
    many = " ".join(f"Floor {i} is open." for i in range(1, 31))
    contexts = [f"Floor {i} is open." for i in range(1, 31, 2)]
    sample = RagSample("Which floors?", contexts, answer=many)
    with FakeJudgeServer(answer_judge.responder, schema_limits=AZURE_OPENAI) as server:
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        with Evaluator(Settings(judge_base_url=server.base_url, cache="off")) as ev:
            result = faithfulness(sample, evaluator=ev)
        assert server.request_count == 4  # 2 windows of sentences, 2 windows of claims
    assert result.score == 0.5
    assert [(v.label, v.chunks) for v in result.verdicts[:1]] == [("supported", (1,))]
    assert [v.label for v in result.verdicts[1::2]] == ["contradicted"] * 15


def test_prompts_have_versions_and_examples_of_both_polarities():
    assert "claims: []" not in C.DECOMPOSITION_PROMPT.system  # examples are JSON
    assert '"claims": []' in C.DECOMPOSITION_PROMPT.system
    for verdict in C.VERDICT_VALUES:
        assert f'"verdict": "{verdict}"' in C.VERDICTS_CONTEXTS_PROMPT.system
        assert f'"verdict": "{verdict}"' in C.VERDICTS_TEXT_PROMPT.system
    assert (
        '"committal": true' in C.RELEVANCY_PROMPT.system and '"committal": false' in C.RELEVANCY_PROMPT.system
    )
    # The fake server's default answer is the most positive one: a committal answer rated 2.
    assert conforming_value(C.relevancy_request("q", "a", PARAMS).schema) == {
        "reason": "fake judge",
        "committal": True,
        "rating": 2,
    }
    versions = [
        p.version for p in (C.DECOMPOSITION_PROMPT, C.VERDICTS_CONTEXTS_PROMPT, C.VERDICTS_TEXT_PROMPT)
    ]
    assert len(set(versions)) == 3
    request = C.decomposition_requests(["Hallo Welt."], PARAMS)[0]
    assert request.prompt_version == "claim-decomposition-1"
    assert json.loads(request.messages[1]["content"]) == {"sentences": {"1": "Hallo Welt."}}
    assert "language of the text" in request.messages[0]["content"]


def test_a_claim_a_chunk_supports_but_the_reference_does_not_names_the_chunk_that_misled(settings, server):
    painted = "The Eiffel Tower is painted every year."
    sample = RagSample(
        SAMPLE.question, [TOWER, painted], ground_truth=REFERENCE, answer=f"{TOWER} {painted}", id="misled"
    )
    with Evaluator(settings) as ev:
        out = evaluate([sample, SAMPLE], ["faithfulness", "answer_correctness"], evaluator=ev)
        calls = server.request_count
        misled = out.misled()
    assert server.request_count == calls  # read from the two metrics' verdicts
    assert list(misled) == ["misled"]
    ((entry),) = misled["misled"]
    assert (entry["index"], entry["claim"], entry["chunks"], entry["reference_verdict"]) == (
        2,
        painted,
        [2],
        "not found",
    )
    assert A.explain_misled(entry) == (
        f"answer claim 2 '{painted}' is not in the reference but supported by chunk 2: judged supported"
    )


def test_each_answer_kind_is_one_entry_of_the_table_that_rebuilds_its_recorded_requests():
    """Drift and store rejudge ask a recorded judgment again from its inputs: the same request."""
    from pytest_ragmetrics.kinds import KINDS, answer_classes

    requests = [
        *C.decomposition_requests([f"Sentence {i}." for i in range(25)], PARAMS, "text"),
        *C.verdict_requests([f"Claim {i}." for i in range(30)], PARAMS, contexts=["b", "a", "b"]),
        *C.verdict_requests(["Claim."], PARAMS, text="the reference"),
        C.relevancy_request("q", "a", PARAMS),
    ]
    for request in requests:
        kind = KINDS[request.kind]
        assert kind is C.ANSWER_KINDS[request.kind]
        again = kind.rebuild(request.inputs, PARAMS, "again")
        assert again.cache_key() == request.cache_key()
        assert again.messages == request.messages
    verdicts = C.verdict_requests(["A is so.", "B is so."], PARAMS, contexts=["A is so."])[0]
    choices = [answer_judge.answer({"contexts": {"1": "A is so."}, "claims": {"1": "A is so.", "2": "B."}})]
    assert answer_classes(verdicts, choices) == ("supported", "not_found")
    assert KINDS[C.VERDICTS].verdicts(verdicts, choices) == [
        (1.0, "judged supported"),
        (0.5, "judged not_found"),
    ]


def test_a_judge_finding_claims_in_every_sentence_is_not_warned_about():
    """Sentences make claims: that is no sign of a judge that answers everything alike."""
    from pytest_ragmetrics.calibration.degenerate import degenerate_kinds
    from pytest_ragmetrics.kinds import answer_classes

    request = C.decomposition_requests([f"Floor {i} is open." for i in range(20)], PARAMS)[0]
    choices = [answer_judge.answer(json.loads(request.messages[1]["content"]))]
    assert degenerate_kinds([(request.kind, answer_classes(request, choices))] * 3) == []
