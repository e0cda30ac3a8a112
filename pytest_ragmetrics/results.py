"""Scores with their reasons: :class:`Verdict` per judged item and :class:`MetricResult` per sample.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .judge.base import Usage, quick_init
from .redact import short_reason
from .stats import mean


@dataclass(frozen=True, slots=True)
class Verdict:
    """What the judge decided for one item (a chunk, a chunk sentence, a reference sentence, or a claim
    of an answer or a reference).

    ``index`` is 1-based within its kind of item; ``rank`` is the chunk's retrieval rank (1 = first)
    when the item is or belongs to a chunk. ``value`` is the item's contribution in [0, 1].
    ``chunks`` are the ranks of the retrieved chunks that support or contradict a claim.
    """

    item: str
    index: int
    text: str
    value: float
    label: str
    reason: str
    rank: int | None = None
    extracted: tuple[str, ...] = ()
    cached: bool = True
    models: Mapping[str, float] | None = None
    chunks: tuple[int, ...] = ()

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "item": self.item,
            "index": self.index,
            "rank": self.rank,
            "text": self.text,
            "verdict": self.label,
            "value": self.value,
            "reason": self.reason,
        }
        if self.extracted:
            out["extracted"] = list(self.extracted)
        if self.models:
            out["models"] = dict(self.models)
        if self.chunks:
            out["chunks"] = list(self.chunks)
        return out


#: ``Verdict(...)`` without the class call, for the metrics that make one per judged item.
new_verdict = quick_init(Verdict)

def because(reason: str) -> str:
    """``": <reason>"`` as an explanation quotes a judge's reason
    (:func:`~pytest_ragmetrics.redact.short_reason`), or ``""`` when it gave none."""
    return f": {short_reason(reason)}" if reason else ""


def _as_float(other: object) -> float:
    if isinstance(other, MetricResult):
        return other.number()
    if isinstance(other, bool) or not isinstance(other, (int, float)):
        raise TypeError(f"cannot compare a MetricResult with {type(other).__name__}: {other!r}")
    return float(other)


def _comparison(op: Callable[[float, float], bool]) -> Callable[[MetricResult, object], bool]:
    def compare(self: MetricResult, other: object) -> bool:
        return op(self.number(), _as_float(other))

    return compare


def _arithmetic(
    op: Callable[[float, float], float], reflected: bool = False
) -> Callable[[MetricResult, object], float]:
    def apply(self: MetricResult, other: object) -> float:
        value = _as_float(other)
        return op(value, self.number()) if reflected else op(self.number(), value)

    return apply


@dataclass(frozen=True, eq=False, slots=True)
class MetricResult:
    """A metric's score for one sample, with the verdicts behind it and a short explanation.

    Behaves as a float: ``float(r)``, ``r >= 0.8``, ``r + 1``, ``round(r, 2)``. ``cached`` is true when
    no judge call was needed (every judgment came from the cache or the store, or none was needed).

    ``outcome`` is ``None`` for a score. A claim-based metric of an answer without claims has the
    outcome ``"no_claims"`` instead: it has no score (``score`` holds 0.0 and means nothing; the JSON
    form says ``"score": null``), using it as a number raises ``ValueError``, and statistics count it
    apart from the scored samples.
    """

    score: float
    metric: str
    method: str | None = None
    verdicts: tuple[Verdict, ...] = ()
    explanation: str = ""
    sample_id: str | None = None
    mode: str | None = None
    cached: bool = True
    judge_calls: int = 0
    usage: Usage = field(default_factory=Usage)
    models: Mapping[str, float] | None = None
    #: The judge models whose verdicts the score is made of (filled in by the engine).
    judges: tuple[str, ...] = ()
    #: A digest of the sample's content (question, contexts, references), telling samples apart
    #: in aggregates whatever their ids (filled in by the engine).
    sample_key: str | None = None
    #: Label metrics: whether any labelled id was among the retrieved ids (None: not applicable).
    #: False in most samples means the labels look stale (the corpus was re-chunked or re-indexed).
    labels_found: bool | None = None
    #: A digest of the sample's question and reference (the answer when it has none), matching one
    #: golden question across runs however it was retrieved (filled in by the engine).
    reference_key: str | None = None
    #: The prompt versions of the judgments behind the score (filled in by the engine).
    prompt_versions: tuple[str, ...] = ()
    #: The sentence splitter's identity when the metric split text (filled in by the engine).
    splitter: str | None = None
    #: How the judge was asked (``temperature 0, seed 0, n 1``) when it made the score: part of every
    #: judgment's key, like the model (filled in by the engine).
    sampling: str | None = None
    #: With a labelled set (the judge check's): the score the person's verdicts give this sample by
    #: the same formula, when every judgment behind it is labelled; else None (filled in by the engine).
    labelled: float | None = None
    #: ``None`` for a score; ``"no_claims"`` when a claim-based metric's answer made no claim.
    outcome: str | None = None

    def __post_init__(self) -> None:
        score = self.score
        if type(score) is float and 0.0 <= score <= 1.0:  # the usual score, read once (NaN fails)
            return
        if isinstance(score, bool) or not isinstance(score, (int, float)) or math.isnan(score):
            raise ValueError(f"{self.name}: score must be a number in [0, 1], got {self.score!r}")
        if not 0.0 <= score <= 1.0:
            raise ValueError(f"{self.name}: score must be in [0, 1], got {self.score!r}")

    @property
    def name(self) -> str:
        """``metric`` or ``metric[method]``, as used in reports and gates."""
        return f"{self.metric}[{self.method}]" if self.method else self.metric

    @property
    def scored(self) -> bool:
        """True for a score; False for an outcome without one (``no_claims``)."""
        return self.outcome is None

    def number(self) -> float:
        """The score; ``ValueError`` for an outcome without one, never a silent 0."""
        if self.outcome is not None:
            sample = f" of sample {self.sample_id!r}" if self.sample_id is not None else ""
            raise ValueError(f"{self.name}{sample} has no score: {self.outcome.replace('_', ' ')}")
        return self.score

    @property
    def spread(self) -> float | None:
        """With several judge models: the largest minus the smallest per-model score."""
        if not self.models:
            return None
        return max(self.models.values()) - min(self.models.values())

    def __float__(self) -> float:
        return float(self.number())

    def __round__(self, ndigits: int | None = None) -> float:
        return round(self.number(), ndigits)

    def __format__(self, spec: str) -> str:
        if self.outcome is not None:
            return format(self.outcome.replace("_", " "), "")
        return format(self.score, spec)

    def __neg__(self) -> float:
        return -self.number()

    def __pos__(self) -> float:
        return self.number()

    def __abs__(self) -> float:
        return abs(self.number())

    __lt__ = _comparison(operator.lt)
    __le__ = _comparison(operator.le)
    __gt__ = _comparison(operator.gt)
    __ge__ = _comparison(operator.ge)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, MetricResult):
            return (
                self.score == other.score
                and self.outcome == other.outcome
                and self.metric == other.metric
                and self.method == other.method
            )
        if isinstance(other, (int, float)) and not isinstance(other, bool):
            return self.outcome is None and self.score == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.score)

    __add__ = _arithmetic(operator.add)
    __radd__ = _arithmetic(operator.add, reflected=True)
    __sub__ = _arithmetic(operator.sub)
    __rsub__ = _arithmetic(operator.sub, reflected=True)
    __mul__ = _arithmetic(operator.mul)
    __rmul__ = _arithmetic(operator.mul, reflected=True)
    __truediv__ = _arithmetic(operator.truediv)
    __rtruediv__ = _arithmetic(operator.truediv, reflected=True)
    __pow__ = _arithmetic(operator.pow)
    __rpow__ = _arithmetic(operator.pow, reflected=True)

    def __repr__(self) -> str:
        sample = f", sample={self.sample_id!r}" if self.sample_id is not None else ""
        value = f"{self.score:.4g}" if self.outcome is None else self.outcome
        return f"MetricResult({self.name}={value}{sample})"

    def failing_verdicts(self) -> list[Verdict]:
        """The verdicts that pulled the score below 1, in item order."""
        return [v for v in self.verdicts if v.value < 1.0]

    def to_json(self) -> dict[str, Any]:
        """Plain-JSON form used by the reports."""
        return {
            "id": self.sample_id,
            "score": self.score if self.outcome is None else None,
            "explanation": self.explanation,
            "mode": self.mode,
            "cached": self.cached,
            "verdicts": [v.to_json() for v in self.verdicts],
            "models": dict(self.models) if self.models else None,
            "judges": list(self.judges),
            "key": self.sample_key,
            "reference_key": self.reference_key,
            "prompt_versions": list(self.prompt_versions),
            "splitter": self.splitter,
            "sampling": self.sampling,
        } | self._optional()

    def _optional(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.outcome is not None:
            out["outcome"] = self.outcome
        if self.labels_found is not None:
            out["labels_found"] = self.labels_found
        if self.labelled is not None:
            out["labelled"] = self.labelled
        return out

    def score_json(self) -> dict[str, Any]:
        """The part of :meth:`to_json` a run's summary and gates read: the score and what tells the
        sample apart, without the verdicts (what a run keeps when no report shows them)."""
        return {
            "id": self.sample_id,
            "score": self.score if self.outcome is None else None,
            "key": self.sample_key,
        } | self._optional()


#: ``MetricResult(...)`` without the class call, for the metrics that make one per score.
new_result = quick_init(MetricResult)


def aggregate(scores: Iterable[float], no_claims: int = 0) -> dict[str, Any]:
    """``{"n", "mean", "min", "max"}`` of ``scores``; with no scores n is 0 and the statistics are None
    (not NaN). The mean is :func:`pytest_ragmetrics.stats.mean`, the one mean of every path.

    ``no_claims`` counts the evaluations of a claim-based metric whose answer had no claims: they are
    not in ``scores``, and are reported beside n (only when there are some).
    """
    values = list(map(float, scores))
    if not all(map(math.isfinite, values)):
        # A NaN would make every comparison False and every mean NaN: a scoring bug, not a score.
        raise ValueError(f"scores must be finite numbers, got {values!r}")
    extra = {"no_claims": no_claims} if no_claims else {}
    if not values:
        return {"n": 0, "mean": None, "min": None, "max": None, **extra}
    return {"n": len(values), "mean": mean(values), "min": min(values), "max": max(values), **extra}
