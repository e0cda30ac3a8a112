"""Retrieval metrics from labels: exact, free, and no judge involved.

Each function scores one ranking (the retrieved ids, best first) against graded labels (relevant id
-> grade, a non-negative int; a plain list of relevant ids means grade 1 each) at a cutoff ``k``
(``None``: the whole ranking). They follow trec_eval, the information-retrieval community's
reference, exactly (to the last few ulps):

======================  ==============================================================  ============
function                definition                                                      trec_eval
======================  ==============================================================  ============
``hit_rate``            1 if any of the top k is relevant, else 0                       ``success_k``
``recall``              relevant ids in the top k / all relevant ids                    ``recall_k``
``precision``           relevant ids in the top k / k (k even when fewer were           ``P_k``
                        retrieved); without k: / the number retrieved                   (``set_P``)
``reciprocal_rank``     1 / rank of the first relevant id in the top k, 0 if none      ``recip_rank``
``ndcg``                DCG@k / ideal DCG@k; gain = grade, discount 1 / log2(rank + 1);  ``ndcg_cut_k``
                        the ideal ranks every relevant label by grade, best first        (``ndcg``)
``average_precision``   sum of precision at the rank of each relevant id in the top k,  ``map_cut_k``
                        divided by the number of relevant ids (retrieved or not)         (``map``)
======================  ==============================================================  ============

"Relevant" means a grade of at least 1; a grade of 0 records a judged non-relevant id, which counts
like an unlabelled one. Only nDCG uses the grades themselves. trec_eval orders a run by score and
breaks ties by document id; here the ranking is the order given.

Without ids, :func:`match_references` turns retrieved texts and reference texts into the same kind
of ranking and labels (see its docstring for the rule and where it misleads).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import InvalidSample
from ..results import MetricResult, Verdict

if TYPE_CHECKING:
    from ..sample import RagSample

__all__ = [
    "FAMILIES",
    "TEXT_MODE",
    "LabelScorer",
    "SampleLabels",
    "average_precision",
    "hit_rate",
    "label_result",
    "labels_found",
    "match_references",
    "ndcg",
    "normalize_for_match",
    "precision",
    "recall",
    "reciprocal_rank",
    "relevant_count",
    "sample_labels",
]

Ranking = Sequence[str]
Grades = Mapping[str, int]
LabelScorer = Callable[[Ranking, Grades, "int | None"], float]

# log2(rank + 1) for ranks 1, 2, ...; grown on demand. Division (not a multiplied reciprocal) keeps
# each term bit-for-bit what trec_eval computes.
_LOG2: list[float] = [math.log2(rank + 1) for rank in range(1, 65)]


def _log2_ranks(n: int) -> list[float]:
    while len(_LOG2) < n:
        _LOG2.append(math.log2(len(_LOG2) + 2))
    return _LOG2


def relevant_count(grades: Grades) -> int:
    """How many labelled ids are relevant (grade >= 1)."""
    return sum(1 for grade in grades.values() if grade > 0)


def _cut(ranking: Ranking, k: int | None) -> Ranking:
    return ranking if k is None else ranking[:k]


def _need_relevant(grades: Grades) -> int:
    total = relevant_count(grades)
    if total == 0:
        raise ValueError("the labels hold no relevant id (grade >= 1); nothing can be found")
    return total


def hit_rate(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """1.0 when at least one of the top ``k`` ids is relevant, else 0.0 (trec_eval ``success_k``)."""
    _need_relevant(grades)
    get = grades.get
    return 1.0 if any(get(i, 0) > 0 for i in _cut(ranking, k)) else 0.0


def recall(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """Share of the relevant ids found in the top ``k`` (trec_eval ``recall_k``, ``set_recall``)."""
    total = _need_relevant(grades)
    get = grades.get
    return sum(1 for i in _cut(ranking, k) if get(i, 0) > 0) / total


def precision(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """Relevant ids in the top ``k`` divided by ``k`` (trec_eval ``P_k``).

    ``k`` is the denominator even when fewer than ``k`` ids were retrieved, as in trec_eval: a
    retriever returning two chunks reaches at most 0.4 at ``k=5``. Without ``k``: divided by the
    number retrieved (trec_eval ``set_P``; 0.0 when nothing was retrieved).
    """
    _need_relevant(grades)
    get = grades.get
    top = _cut(ranking, k)
    denominator = len(top) if k is None else k
    if denominator == 0:
        return 0.0
    return sum(1 for i in top if get(i, 0) > 0) / denominator


def reciprocal_rank(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """1 / the rank of the first relevant id within the top ``k``, 0.0 if none (trec_eval ``recip_rank``)."""
    _need_relevant(grades)
    get = grades.get
    for rank, i in enumerate(_cut(ranking, k), start=1):
        if get(i, 0) > 0:
            return 1.0 / rank
    return 0.0


def ndcg(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """Normalized discounted cumulative gain at ``k`` (trec_eval ``ndcg_cut_k``; ``ndcg`` without ``k``).

    DCG@k = sum over ranks r <= k of grade(r) / log2(r + 1), gain = the grade (0 when unlabelled).
    The ideal DCG orders every positive label by grade, best first, cut at ``k`` too, so relevant
    ids the retriever never returned still count against it.
    """
    _need_relevant(grades)
    get = grades.get
    top = _cut(ranking, k)
    logs = _log2_ranks(max(len(top), len(grades)))
    dcg = 0.0
    for position, i in enumerate(top):
        gain = get(i, 0)
        if gain > 0:
            dcg += gain / logs[position]
    ideal = sorted((g for g in grades.values() if g > 0), reverse=True)
    if k is not None:
        ideal = ideal[:k]
    idcg = 0.0
    for position, gain in enumerate(ideal):
        idcg += gain / logs[position]
    return dcg / idcg


def average_precision(ranking: Ranking, grades: Grades, k: int | None = None) -> float:
    """Average precision at ``k`` (trec_eval ``map_cut_k``; ``map`` without ``k``).

    The precision at the rank of each relevant id in the top ``k``, summed and divided by the number
    of relevant labels, retrieved or not (not by ``min(k, relevant)``).
    """
    total = _need_relevant(grades)
    get = grades.get
    found = 0
    summed = 0.0
    for rank, i in enumerate(_cut(ranking, k), start=1):
        if get(i, 0) > 0:
            found += 1
            summed += found / rank
    return summed / total


#: Metric family name -> scorer. Every family accepts ``@k``; without it, the whole ranking.
FAMILIES: Mapping[str, LabelScorer] = {
    "hit_rate": hit_rate,
    "recall": recall,
    "precision": precision,
    "mrr": reciprocal_rank,
    "ndcg": ndcg,
    "average_precision": average_precision,
}


# ----------------------------------------------------------------------------- matching by text


def normalize_for_match(text: str) -> str:
    """The form texts are compared in: Unicode NFKC, case-folded, whitespace runs made one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def match_references(
    contexts: Sequence[str], references: Sequence[str]
) -> tuple[tuple[str, ...], dict[str, int], tuple[int | None, ...]]:
    """Labels for a golden set without ids: which retrieved chunks match which reference texts.

    The rule: after :func:`normalize_for_match`, a chunk matches a reference when either text
    contains the other. Each reference is credited once, to the best-ranked chunk matching it that
    has not been credited already (a chunk matching several references takes the first free one);
    a chunk matching only references already credited counts as not relevant, like a duplicate.
    Blank texts never match.

    Returns ``(ranking, grades, matched)``: synthetic ids ``ref:<n>`` for credited chunks and
    ``chunk:<rank>`` for the others, every reference labelled grade 1, and for each chunk the
    0-based index of the reference it was credited with (or None).

    Where it misleads: a paraphrase, or a chunk cut differently from the reference (each holding
    text the other lacks), never matches; a very short reference ("Paris") matches any chunk that
    mentions it, and a short chunk matches any reference quoting it; a chunk holding two reference
    texts is credited for one, so recall is understated. Label ids avoid all of this.
    """
    refs = [normalize_for_match(r) for r in references]
    credited: set[int] = set()
    ranking: list[str] = []
    matched: list[int | None] = []
    for rank, chunk in enumerate(contexts, start=1):
        text = normalize_for_match(chunk)
        found = None
        if text:
            for n, ref in enumerate(refs):
                if n not in credited and ref and (ref in text or text in ref):
                    found = n
                    break
        if found is None:
            ranking.append(f"chunk:{rank}")
        else:
            credited.add(found)
            ranking.append(f"ref:{found + 1}")
        matched.append(found)
    grades = {f"ref:{n + 1}": 1 for n, ref in enumerate(refs) if ref}
    return tuple(ranking), grades, tuple(matched)


# ----------------------------------------------------------------------------------- on a sample

#: ``MetricResult.mode`` when relevance came from matching reference texts rather than ids.
TEXT_MODE = "matched by text"

_WORDS = {
    "hit_rate": "hit rate",
    "recall": "recall",
    "precision": "precision",
    "mrr": "reciprocal rank",
    "ndcg": "nDCG",
    "average_precision": "average precision",
}


@dataclass(frozen=True)
class SampleLabels:
    """What a sample's labels say: the ranking scored, the grades, and how they were obtained."""

    ranking: tuple[str, ...]
    grades: Mapping[str, int]
    #: The retrieved chunks' texts, parallel to ``ranking``.
    texts: tuple[str, ...]
    #: ``TEXT_MODE`` when matched by text, else None.
    mode: str | None
    #: For text matching: a relevant id -> the reference text it stands for.
    references: Mapping[str, str]


def sample_labels(sample: RagSample, metric: str) -> SampleLabels:
    """The ranking and grades to score ``sample`` on: its ids when it has them, else its reference texts.

    Raises :class:`InvalidSample` naming the sample and what is missing.
    """
    grades = sample.reference_context_ids
    if grades is not None and (sample.context_ids is not None or not sample.contexts):
        ranking = sample.context_ids or ()
        labels = SampleLabels(ranking, grades, sample.contexts, None, {})
    elif sample.reference_contexts is not None:
        ranking, matched_grades, _ = match_references(sample.contexts, sample.reference_contexts)
        references = {f"ref:{n + 1}": text for n, text in enumerate(sample.reference_contexts)}
        labels = SampleLabels(ranking, matched_grades, sample.contexts, TEXT_MODE, references)
    elif grades is not None:
        raise InvalidSample(
            f"{metric} of sample {sample.label!r}: the sample has reference_context_ids but its contexts "
            "carry no ids; give context_ids (e.g. sample.with_contexts(chunks, ids=[...])), or "
            "reference_contexts to match by text"
        )
    else:
        raise InvalidSample(
            f"{metric} needs retrieval labels: sample {sample.label!r} has neither "
            "reference_context_ids (with context_ids on its contexts) nor reference_contexts"
        )
    if relevant_count(labels.grades) == 0:
        what = (
            "reference_contexts hold only blank texts"
            if labels.mode
            else "reference_context_ids hold no id with a grade of 1 or more"
        )
        raise InvalidSample(f"{metric} of sample {sample.label!r}: nothing is relevant: its {what}")
    return labels


def labels_found(labels: SampleLabels) -> bool | None:
    """Whether any labelled id appears among the retrieved ids (None when nothing was retrieved).

    Retrieved ids that meet no label at all, in most samples, mean the labels look stale (the
    corpus was re-chunked or re-indexed and every id changed), not that retrieval collapsed.
    """
    if not labels.ranking or labels.mode is not None:
        return None
    return any(i in labels.grades for i in labels.ranking)


def _verdict(
    item: str, index: int, text: str, value: float, label: str, reason: str, rank: int | None = None
) -> Verdict:
    # Verdict(...) without the frozen dataclass's __init__: a sample's ten or so verdicts are most
    # of the cost of a label result, and these fields need no checking. Its slots are set directly.
    verdict = object.__new__(Verdict)
    s_item, s_index, s_text, s_value, s_label, s_reason, s_rank, s_extracted, s_cached, s_models, s_chunks = (
        _SLOTS
    )
    s_item(verdict, item)
    s_index(verdict, index)
    s_text(verdict, text)
    s_value(verdict, value)
    s_label(verdict, label)
    s_reason(verdict, reason)
    s_rank(verdict, rank)
    s_extracted(verdict, ())
    s_cached(verdict, True)
    s_models(verdict, None)
    s_chunks(verdict, ())
    return verdict


_FIELDS = (
    *("item", "index", "text", "value", "label", "reason"),
    *("rank", "extracted", "cached", "models", "chunks"),
)
_SLOTS = tuple(getattr(Verdict, name).__set__ for name in _FIELDS)


def label_result(sample: RagSample, family: str, k: int | None, metric: str) -> MetricResult:
    """Score ``sample`` on the label metric ``family`` at cutoff ``k``; ``metric`` names it (``ndcg@5``)."""
    labels = sample_labels(sample, metric)
    scorer = FAMILIES[family]
    score = scorer(labels.ranking, labels.grades, k)
    grades = labels.grades
    top = labels.ranking if k is None else labels.ranking[:k]
    by_text = labels.mode is not None
    verdicts: list[Verdict] = []
    for rank, (i, text) in enumerate(zip(top, labels.texts, strict=False), start=1):
        grade = grades.get(i, 0)
        if grade > 0:
            label = "relevant" if by_text or family != "ndcg" else f"relevant (grade {grade})"
        else:
            label = "not relevant" if i in grades or by_text else "not labelled"
        reason = (
            f"matches {labels.references[i]!r}" if by_text and grade > 0 else ("" if by_text else f"id {i!r}")
        )
        verdicts.append(_verdict("chunk", rank, text, 1.0 if grade > 0 else 0.0, label, reason, rank))
    found = {i for i in top if grades.get(i, 0) > 0}
    missed = [i for i, g in grades.items() if g > 0 and i not in found]
    where = "retrieved" if k is None else f"in the top {k}"
    item = "reference text" if by_text else "relevant id"
    for n, i in enumerate(missed, start=1):
        text = labels.references[i] if by_text else i
        verdicts.append(_verdict(item, n, text, 0.0, f"not {where}", "" if by_text else f"grade {grades[i]}"))
    total = len(found) + len(missed)
    ranks = [r for r, i in enumerate(top, start=1) if i in found]
    explanation = f"{len(found)} of {total} {item}s {where}"
    if ranks:
        explanation += f" (rank{'s' if len(ranks) > 1 else ''} {', '.join(map(str, ranks))})"
    if missed:
        shown = ", ".join(repr(labels.references[i] if by_text else i) for i in missed[:3])
        explanation += f"; missing {shown}" + (f" and {len(missed) - 3} more" if len(missed) > 3 else "")
    if not labels.ranking:
        explanation = f"nothing was retrieved; {total} {item}s to find"
    explanation = f"{_WORDS[family]} {score:.3f}: {explanation}"
    return MetricResult(
        score,
        metric,
        None,
        tuple(verdicts),
        explanation,
        sample.id,
        labels.mode,
        labels_found=labels_found(labels),
    )
