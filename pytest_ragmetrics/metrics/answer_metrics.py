"""The answer metrics: faithfulness, answer relevancy and answer correctness, from a sample to judge
requests and from answers to a :class:`MetricResult` (the arithmetic is :mod:`.answer`'s).

Judgments per sample (each one request, or one per window of a long text):

* faithfulness: the answer's claims (keyed on the answer alone), then all claims' verdicts against
  the contexts in one request;
* answer correctness: the answer's claims (the same judgment as faithfulness's), their verdicts
  against the reference; for recall and F1 also the reference's claims (shared by every run that uses
  that reference) and their verdicts against the answer;
* answer relevancy: one request (question, answer).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import claim_judgments as C
from ..errors import InvalidSample
from ..fields import invisible
from ..judge.base import JudgeAnswer, JudgeRequest
from ..judgments import JudgeParams, canonical_contexts
from ..results import MetricResult, Verdict, because, new_verdict
from . import answer as A
from .builtin import NO_USAGE, Metric, ScoringContext, chunk_texts, judge_cost, metric_result

if TYPE_CHECKING:
    from ..sample import RagSample


def _params(ctx: ScoringContext) -> JudgeParams:
    s = ctx.settings
    return JudgeParams(s.judge_model, s.temperature, s.seed, s.judge_n)


def _label(sample: RagSample, metric: str, what: str = "") -> str:
    return f"{metric} of sample {sample.label!r}" + (f", {what}" if what else "")


def _require_answer(sample: RagSample, metric: str) -> str:
    if sample.answer is None:
        raise InvalidSample(f"{metric} needs an answer; sample {sample.label!r} has none")
    return sample.answer


def _sentences(text: str, ctx: ScoringContext) -> list[str]:
    return [s for raw in ctx.split(text) if (s := ctx.normalize(raw))] if ctx.normalize(text) else []


async def _judged(
    ctx: ScoringContext, requests: Sequence[JudgeRequest], spent: list[JudgeAnswer]
) -> list[JudgeAnswer]:
    """The answers to ``requests``, also added to ``spent`` (every answer a score rests on)."""
    answers = []
    for answer in await ctx.judge_many(requests):
        assert answer is not None  # nothing is skipped
        answers.append(answer)
    spent += answers
    return answers


def _no_claims(sample: RagSample, metric: str, method: str | None, spent: list[JudgeAnswer]) -> MetricResult:
    calls, usage = judge_cost(spent)
    return MetricResult(
        0.0, metric, method, (), A.explain_no_claims(metric), sample.id,
        cached=calls == 0, judge_calls=calls, usage=usage, outcome=A.NO_CLAIMS,
    )  # fmt: skip


def _labelled(verdict: str) -> str:
    return A.VERDICT_LABELS[verdict]


class Faithfulness:
    """Share of the answer's claims that the retrieved contexts support (RAGAS, ``supported``, the
    default) or do not contradict (DeepEval, ``not_contradicted``): both from the same verdicts."""

    name = "faithfulness"
    bounded = True
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ("supported", "not_contradicted")
    default_method: str | None = "supported"
    #: The plain name ``faithfulness`` means the supported method; its results carry no [method].
    plain_method = "supported"

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        method = method or "supported"
        shown = None if method == "supported" else method
        answer = _require_answer(sample, self.name)
        spent: list[JudgeAnswer] = []  # the answers the score rests on
        params = _params(ctx)
        sentences = _sentences(answer, ctx)
        claims: list[tuple[str, str]] = []
        if sentences:
            requests = C.decomposition_requests(sentences, params, _label(sample, self.name, "answer claims"))
            claims = C.join_decomposition(requests, await _judged(ctx, requests, spent))
        if not claims:
            return _no_claims(sample, self.name, shown, spent)
        texts = chunk_texts(sample.contexts, ctx.normalize)
        ranks = [(rank, text) for rank, text in enumerate(texts, start=1) if text]
        if not ranks:
            decided = [C.ClaimVerdict(C.NOT_FOUND, "nothing was retrieved")] * len(claims)
            cached = [True] * len(claims)
            canonical: list[str] = []
        else:
            texts = [text for _, text in ranks]
            canonical = canonical_contexts(texts)
            requests = C.verdict_requests(
                [c for c, _ in claims], params, _label(sample, self.name, "claim verdicts"), contexts=texts
            )
            answers = await _judged(ctx, requests, spent)
            decided = C.join_verdicts(requests, answers)
            cached = [a.cached for r, a in zip(requests, answers, strict=True) for _ in r.inputs["claims"]]
        verdicts = tuple(
            new_verdict(
                "answer claim",
                i,
                claim,
                _value(v.verdict, method),
                _labelled(v.verdict),
                v.reason,
                extracted=(sentence,),
                cached=was_cached,
                chunks=chunk_ranks(v.chunks, canonical, ranks),
            )
            for i, ((claim, sentence), v, was_cached) in enumerate(
                zip(claims, decided, cached, strict=True), start=1
            )
        )
        score = A.faithfulness_score([v.verdict for v in decided], method)
        explanation = A.explain_faithfulness(verdicts)
        return metric_result(sample, self.name, shown, score, verdicts, explanation, judge_cost(spent))


def _value(verdict: str, method: str) -> float:
    if method == "not_contradicted":
        return 0.0 if verdict == C.CONTRADICTED else 1.0
    return 1.0 if verdict == C.SUPPORTED else 0.0


def chunk_ranks(
    numbers: Sequence[int], canonical: Sequence[str], ranks: Sequence[tuple[int, str]]
) -> tuple[int, ...]:
    """The retrieval ranks of the chunks the judge numbered in canonical order (a chunk retrieved
    twice has both ranks)."""
    wanted = {canonical[n - 1] for n in numbers}
    return tuple(rank for rank, text in ranks if text in wanted)


class AnswerCorrectness:
    """Claim-level agreement of the answer with the reference (RAGAS FactualCorrectness): ``f1`` (the
    default), ``precision`` or ``recall`` over TP, FP and FN claims."""

    name = "answer_correctness"
    bounded = True
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ("f1", "precision", "recall")
    default_method: str | None = "f1"
    #: The plain name ``answer_correctness`` means F1; its results carry no [method].
    plain_method = "f1"

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        method = method or "f1"
        shown = None if method == "f1" else method
        answer = _require_answer(sample, self.name)
        if sample.ground_truth is None or invisible(sample.ground_truth):
            raise InvalidSample(
                f"{self.name} needs a ground_truth (reference answer); sample {sample.label!r} has none"
            )
        spent: list[JudgeAnswer] = []  # the answers the score rests on
        params = _params(ctx)
        answer_sentences = _sentences(answer, ctx)
        if not answer_sentences:
            return _no_claims(sample, self.name, shown, spent)
        both = method != "precision"
        answer_requests = C.decomposition_requests(
            answer_sentences, params, _label(sample, self.name, "answer claims")
        )
        reference_requests = (
            C.decomposition_requests(
                _sentences(sample.ground_truth, ctx), params, _label(sample, self.name, "reference claims")
            )
            if both
            else []
        )
        answers = await _judged(ctx, [*answer_requests, *reference_requests], spent)
        claims = C.join_decomposition(answer_requests, answers[: len(answer_requests)])
        if not claims:
            return _no_claims(sample, self.name, shown, spent)
        reference_claims = C.join_decomposition(reference_requests, answers[len(answer_requests) :])
        if both and not reference_claims:
            raise InvalidSample(
                f"{self.name}: the ground_truth of sample {sample.label!r} makes no claim to check the "
                "answer against"
            )
        reference, normalized_answer = ctx.normalize(sample.ground_truth), ctx.normalize(answer)
        against_reference = C.verdict_requests(
            [c for c, _ in claims],
            params,
            _label(sample, self.name, "answer claims against the reference"),
            text=reference,
        )
        against_answer = (
            C.verdict_requests(
                [c for c, _ in reference_claims],
                params,
                _label(sample, self.name, "reference claims against the answer"),
                text=normalized_answer,
            )
            if both
            else []
        )
        judged = await _judged(ctx, [*against_reference, *against_answer], spent)
        answer_verdicts = C.join_verdicts(against_reference, judged[: len(against_reference)])
        reference_verdicts = C.join_verdicts(against_answer, judged[len(against_reference) :])
        answer_side = _claim_verdicts(
            "answer claim", claims, answer_verdicts, against_reference, judged[: len(against_reference)]
        )
        reference_side = _claim_verdicts(
            "reference claim",
            reference_claims,
            reference_verdicts,
            against_answer,
            judged[len(against_reference) :],
        )
        tp, fp, fn = A.correctness_counts(
            [v.verdict for v in answer_verdicts], [v.verdict for v in reference_verdicts]
        )
        score = A.correctness_score(tp, fp, fn, method)
        explanation = A.explain_correctness(answer_side, reference_side, tp, fp, fn if both else None)
        verdicts = (*answer_side, *reference_side)
        return metric_result(sample, self.name, shown, score, verdicts, explanation, judge_cost(spent))


def _claim_verdicts(
    item: str,
    claims: Sequence[tuple[str, str]],
    decided: Sequence[C.ClaimVerdict],
    requests: Sequence[JudgeRequest],
    answers: Sequence[JudgeAnswer],
) -> tuple[Verdict, ...]:
    cached = [a.cached for r, a in zip(requests, answers, strict=True) for _ in r.inputs["claims"]]
    return tuple(
        new_verdict(
            item,
            i,
            claim,
            1.0 if v.verdict == C.SUPPORTED else 0.0,
            _labelled(v.verdict),
            v.reason,
            extracted=(sentence,),
            cached=was_cached,
        )
        for i, ((claim, sentence), v, was_cached) in enumerate(
            zip(claims, decided, cached, strict=True), start=1
        )
    )


class AnswerRelevancy:
    """Whether the answer addresses the question, judge-only (no embedding model): 0 for a
    non-committal answer (as RAGAS), else the judge's 0-2 rating / 2."""

    name = "answer_relevancy"
    bounded = True
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ()
    default_method: str | None = None

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        answer = _require_answer(sample, self.name)
        text = ctx.normalize(answer)
        if invisible(text):  # nothing to read (zero-width characters too): no claims, nothing addressed
            verdict = new_verdict("answer", 1, answer, 0.0, "empty", "the answer is empty")
            explanation = "the answer is empty: it addresses nothing"
            return metric_result(sample, self.name, None, 0.0, (verdict,), explanation, (0, NO_USAGE))
        request = C.relevancy_request(
            ctx.normalize(sample.question), text, _params(ctx), _label(sample, self.name)
        )
        spent: list[JudgeAnswer] = []  # the answers the score rests on
        (judged,) = await _judged(ctx, [request], spent)
        noncommittal, rating, reason = C.combine_relevancy(judged.choices)
        score = A.relevancy_score(noncommittal, rating)
        unanimous = len({choice["rating"] for choice in judged.choices}) == 1
        label = "non-committal" if noncommittal else A.rating_label(rating, unanimous)
        verdict = new_verdict("answer", 1, answer, score, label, reason, cached=judged.cached)
        if noncommittal:
            explanation = (
                "the answer is non-committal (evasive or does not commit to an answer), so it scores 0"
                + because(reason)
            )
        else:
            explanation = f"the answer is rated {label} for the question" + because(reason)
        return metric_result(sample, self.name, None, score, (verdict,), explanation, judge_cost(spent))


def answer_metrics() -> list[Metric]:
    """The answer metrics, registered beside the retrieval ones."""
    return [Faithfulness(), AnswerRelevancy(), AnswerCorrectness()]
