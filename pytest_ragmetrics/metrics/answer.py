"""Faithfulness, answer correctness and answer relevancy: pure arithmetic over claim verdicts.

Every claim of an answer gets one of three verdicts against the evidence: ``supported``,
``contradicted`` or ``not_found`` (see :mod:`pytest_ragmetrics.claim_judgments`). The scores:

* faithfulness, ``supported`` (RAGAS): supported claims / claims;
* faithfulness, ``not_contradicted`` (DeepEval): (claims - contradicted claims) / claims;
* answer correctness (RAGAS FactualCorrectness): TP = answer claims the reference supports,
  FP = the other answer claims, FN = reference claims the answer does not support;
  ``precision`` = TP / (TP + FP), ``recall`` = TP / (TP + FN), ``f1`` their harmonic mean (0 when
  both are 0);
* answer relevancy: 0 when the answer is non-committal, else the judge's rating / 2.

An answer without claims ("I don't know", an empty answer) has no faithfulness and no correctness:
that is the outcome :data:`NO_CLAIMS`, never a number (see :class:`~pytest_ragmetrics.results.MetricResult`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..results import Verdict, because

#: The outcome of a claim-based metric for an answer that makes no claim.
NO_CLAIMS = "no_claims"

SUPPORTED, CONTRADICTED, NOT_FOUND = "supported", "contradicted", "not_found"

#: How a verdict reads in reports and messages.
VERDICT_LABELS = {SUPPORTED: "supported", CONTRADICTED: "contradicted", NOT_FOUND: "not found"}


def faithfulness_score(verdicts: Sequence[str], method: str = "supported") -> float:
    """``supported``: supported / claims; ``not_contradicted``: (claims - contradicted) / claims.

    Raises ``ValueError`` without claims: that is the no-claims outcome, not a score.
    """
    if not verdicts:
        raise ValueError("faithfulness needs at least one claim")
    from fractions import Fraction  # here: a run that scores no answer never loads it (nor decimal)

    if method == "not_contradicted":
        return float(Fraction(len(verdicts) - verdicts.count(CONTRADICTED), len(verdicts)))
    return float(Fraction(verdicts.count(SUPPORTED), len(verdicts)))


def correctness_counts(
    answer_verdicts: Sequence[str], reference_verdicts: Sequence[str]
) -> tuple[int, int, int]:
    """``(TP, FP, FN)`` from the answer claims' verdicts against the reference and the reference
    claims' verdicts against the answer."""
    tp = answer_verdicts.count(SUPPORTED)
    fn = len(reference_verdicts) - reference_verdicts.count(SUPPORTED)
    return tp, len(answer_verdicts) - tp, fn


def correctness_score(tp: int, fp: int, fn: int, method: str = "f1") -> float:
    """Precision TP / (TP + FP), recall TP / (TP + FN), or F1 = 2PR / (P + R), exactly (no epsilon);
    a ratio with a zero denominator is 0, and F1 is 0 when P and R are."""
    from fractions import Fraction

    precision = Fraction(tp, tp + fp) if tp + fp else Fraction(0)
    recall = Fraction(tp, tp + fn) if tp + fn else Fraction(0)
    if method == "precision":
        return float(precision)
    if method == "recall":
        return float(recall)
    return float(2 * precision * recall / (precision + recall)) if precision + recall else 0.0


def relevancy_score(noncommittal: bool, rating: float) -> float:
    """0 for a non-committal answer (as RAGAS), else rating / 2 (ratings 0, 1, 2 or their mean)."""
    return 0.0 if noncommittal else min(1.0, max(0.0, rating / 2))


_RATING_WORDS = {
    0: "does not address the question",
    1: "partly addresses the question",
    2: "addresses the question",
}


def rating_label(rating: float, unanimous: bool = True) -> str:
    """``2/2 (addresses the question)``, or ``1.5/2 (mean over judge samples)``; a whole mean of
    samples that disagree (2 and 0) is a mean too, not the verdict of a rating none of them gave."""
    if rating == round(rating) and unanimous:
        return f"{rating:g}/2 ({_RATING_WORDS.get(round(rating), '')})"
    shown = f"{rating:g}" if rating == round(rating) else f"{rating:.2f}"
    return f"{shown}/2 (mean over judge samples)"


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return "'" + (text if len(text) <= limit else text[: limit - 1] + "…") + "'"


def _chunks(verdict: Verdict) -> str:
    if not verdict.chunks:
        return ""
    word = "chunk" if len(verdict.chunks) == 1 else "chunks"
    return f" ({word} {', '.join(str(r) for r in verdict.chunks)})"


def _because(verdict: Verdict) -> str:
    return because(verdict.reason)


def explain_faithfulness(verdicts: Sequence[Verdict]) -> str:
    """Name every claim that is not supported, with the judge's reason and the chunks that contradict it."""
    supported = sum(1 for v in verdicts if v.label == VERDICT_LABELS[SUPPORTED])
    head = f"{supported} of {len(verdicts)} answer claims are supported by the contexts"
    bad = [v for v in verdicts if v.label != VERDICT_LABELS[SUPPORTED]]
    if not bad:
        return head
    parts = [
        f"claim {v.index} {_quote(v.text)} is {_in_contexts(v.label)}{_chunks(v)}{_because(v)}" for v in bad
    ]
    return head + "; " + "; ".join(parts)


def explain_correctness(
    answer: Sequence[Verdict], reference: Sequence[Verdict], tp: int, fp: int, fn: int | None
) -> str:
    """TP, FP and FN, and the claims behind FP and FN; ``fn`` None for precision, which counts none."""
    head = f"TP {tp}, FP {fp}" + ("" if fn is None else f", FN {fn}")
    parts = [
        f"answer claim {v.index} {_quote(v.text)} is {_in_reference(v.label)}{_because(v)}"
        for v in answer
        if v.label != VERDICT_LABELS[SUPPORTED]
    ]
    parts += [
        f"reference claim {v.index} {_quote(v.text)} is {_in_answer(v.label)}{_because(v)}"
        for v in reference
        if v.label != VERDICT_LABELS[SUPPORTED]
    ]
    return head + ("; " + "; ".join(parts) if parts else "")


def _in_contexts(label: str) -> str:
    return "contradicted" if label == VERDICT_LABELS[CONTRADICTED] else "not found in the contexts"


def _in_reference(label: str) -> str:
    return (
        "contradicted by the reference" if label == VERDICT_LABELS[CONTRADICTED] else "not in the reference"
    )


def _in_answer(label: str) -> str:
    return (
        "contradicted by the answer" if label == VERDICT_LABELS[CONTRADICTED] else "not covered by the answer"
    )


def explain_no_claims(metric: str) -> str:
    return (
        f"no claims: the answer states nothing that could be checked (an empty answer, or one such as "
        f'"I don\'t know"), so it has no {metric} score'
    )


def misled_claims(
    faithfulness: Sequence[Mapping[str, Any]], correctness: Sequence[Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """The answer claims a retrieved chunk supports but the reference does not: retrieval misled the
    answer. Read from the verdicts of one sample's faithfulness and answer correctness (their JSON
    form, :meth:`~pytest_ragmetrics.results.Verdict.to_json`), so it costs no judge call; both read the
    same claims of the answer (one judgment), matched here by their text.

    Each entry: ``index`` and ``claim`` (the answer claim), ``chunks`` (the ranks of the chunks that
    support it), ``reason`` (what the judge said of the chunks), ``reference_verdict`` (``not found``
    or ``contradicted``) and ``reference_reason``.
    """
    grounded = {
        str(v.get("text")): v
        for v in faithfulness
        if v.get("item") == "answer claim"
        and v.get("verdict") == VERDICT_LABELS[SUPPORTED]
        and v.get("chunks")
    }
    misled = []
    for v in correctness:
        if v.get("item") != "answer claim" or v.get("verdict") == VERDICT_LABELS[SUPPORTED]:
            continue
        chunk = grounded.get(str(v.get("text")))
        if chunk is None:
            continue
        misled.append(
            {
                "index": v.get("index"),
                "claim": v.get("text"),
                "chunks": list(chunk.get("chunks") or ()),
                "reason": chunk.get("reason"),
                "reference_verdict": v.get("verdict"),
                "reference_reason": v.get("reason"),
            }
        )
    return misled


def explain_misled(entry: Mapping[str, Any]) -> str:
    """``answer claim 2 'X' is contradicted by the reference but supported by chunk 3: ...``."""
    chunks = list(entry.get("chunks") or ())
    where = f"chunk{'s' if len(chunks) > 1 else ''} {', '.join(str(c) for c in chunks)}"
    reference = _in_reference(str(entry.get("reference_verdict")))
    claim = _quote(str(entry.get("claim")))
    text = f"answer claim {entry.get('index')} {claim} is {reference} but supported by {where}"
    return text + (f": {entry['reason']}" if entry.get("reason") else "")
