"""The score a person's labels give a sample: the metric's own formula over the labelled verdicts.

A labelled set (:mod:`.labels`) holds a person's verdict for judge requests: this chunk is useful for
this question and reference, this reference sentence is stated in these contexts. When every judgment
a metric asks for to score a sample has such a label, the metric is run a second time with the labels
answering instead of the judge: the same code, the same formula, a person's verdicts. That score (Y)
beside the judge's (Ŷ) is what a judge-corrected mean needs (:func:`pytest_ragmetrics.stats.corrected_mean`).

A sample with any judgment left unlabelled (a chunk nobody labelled, a reference sentence split
differently, the claims method, a precision judged against the sample's answer) has no labelled
score: it counts among the samples the judge alone scored. So does a sample no judgment was asked for
(nothing retrieved): nobody labelled it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import judgments as J
from ..judge.base import JudgeAnswer
from ..judgments import canonical_contexts
from ..text import normalize_text
from .labels import LabelledItem

if TYPE_CHECKING:
    from ..judge.base import JudgeRequest
    from ..metrics.builtin import Metric, ScoringContext
    from ..sample import RagSample
    from ..settings import Settings

__all__ = ["LabelAnswers"]


class _Unlabelled(Exception):
    """A judgment the metric asked for has no label."""


class _Index:
    """The labelled items by what each kind of judge request holds, split as the run splits."""

    def __init__(self, items: Sequence[LabelledItem], ctx: ScoringContext) -> None:
        def norm(text: str) -> str:
            return ctx.normalize(text)

        def split(text: str) -> tuple[str, ...]:
            return tuple(s for raw in ctx.split(text) if (s := norm(raw)))

        self.useful: dict[tuple[str, str, str], bool] = {}
        self.rating: dict[tuple[str, str], int] = {}
        self.needed: dict[tuple[str, str], tuple[int, ...]] = {}
        self.needed_by_sentences: dict[tuple[str, tuple[str, ...]], tuple[int, ...]] = {}
        self.attributed: dict[tuple[str, tuple[str, ...]], tuple[tuple[str, ...], tuple[bool, ...]]] = {}
        for item in items:
            question = norm(item.question)
            if item.kind == J.PRECISION and item.reference is not None and item.chunk is not None:
                self.useful[question, norm(item.reference), norm(item.chunk)] = item.label
            elif item.kind == J.GRADED and item.chunk is not None:
                self.rating[question, norm(item.chunk)] = item.label
            elif item.kind == J.SENTENCES and item.chunk is not None:
                self.needed[question, norm(item.chunk)] = item.label
                self.needed_by_sentences[question, split(item.chunk)] = item.label
            elif item.kind == J.RECALL:
                if item.reference_sentences is not None:
                    sentences = tuple(norm(s) for s in item.reference_sentences)
                else:
                    sentences = split(item.reference or "")
                contexts = tuple(canonical_contexts([norm(c) for c in item.contexts]))
                if len(sentences) == len(item.label):  # else the judge check says what is wrong
                    self.attributed[question, contexts] = (sentences, item.label)

    def answer(self, request: JudgeRequest) -> dict[str, Any]:
        """The labels' answer to ``request`` in its answer schema; :class:`_Unlabelled` if there is none."""
        if request.kind not in (J.PRECISION, J.GRADED, J.SENTENCES, J.RECALL):
            raise _Unlabelled  # no labels for this kind of judgment (claims, answers)
        base = request.key_inputs if request.key_inputs is not None else request.inputs
        question = base["question"]
        first = int(base.get("first_sentence", 1))
        if request.kind == J.PRECISION:
            if base.get("reference_kind") != "ground_truth":
                raise _Unlabelled  # judged against the sample's own answer: labels name a reference
            useful = self.useful.get((question, base["reference"], base["chunk"]))
            if useful is None:
                raise _Unlabelled
            return {"reason": "labelled", "useful": useful}
        if request.kind == J.GRADED:
            rating = self.rating.get((question, base["chunk"]))
            if rating is None:
                raise _Unlabelled
            return {"reason": "labelled", "rating": rating}
        if request.kind == J.SENTENCES:
            window = list(request.inputs["sentences"])
            if "chunk" in base:
                numbers = self.needed.get((question, base["chunk"]))
                count = int(request.inputs.get("sentence_count", len(window)))
            else:  # a splitter without a fingerprint: the request holds the (whole) chunk's sentences
                numbers = self.needed_by_sentences.get((question, tuple(window))) if first == 1 else None
                count = len(window)
            if numbers is None or max(numbers, default=0) > count:
                raise _Unlabelled  # numbered for another split: the judge check says so
            last = first + len(window) - 1
            return {"reason": "labelled", "relevant_sentences": [n for n in numbers if first <= n <= last]}
        if request.kind == J.RECALL:
            found = self.attributed.get((question, tuple(base["contexts"])))
            references = tuple(base["reference_sentences"])
            if found is None or found[0][first - 1 : first - 1 + len(references)] != references:
                raise _Unlabelled
            flags = found[1][first - 1 : first - 1 + len(references)]
            return {
                f"sentence_{i}": {"reason": "labelled", "attributed": ok}
                for i, ok in enumerate(flags, start=first)
            }
        raise _Unlabelled  # claims of a reference sentence are never labelled


class _LabelContext:
    """A :class:`~pytest_ragmetrics.metrics.builtin.ScoringContext` whose judge is the labelled set."""

    def __init__(self, ctx: ScoringContext, index: _Index) -> None:
        self._ctx = ctx
        self._index = index
        self.settings: Settings = ctx.settings
        self.answered = 0

    def split(self, text: str) -> list[str]:
        return self._ctx.split(text)

    def normalize(self, text: str) -> str:
        return self._ctx.normalize(text)

    @property
    def splitter_fingerprint(self) -> str | None:
        return self._ctx.splitter_fingerprint

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        choice = self._index.answer(request)
        self.answered += 1
        return JudgeAnswer((choice,), source="store")

    async def judge_many(
        self, requests: Sequence[JudgeRequest], skip: Callable[[JudgeRequest], bool] | None = None
    ) -> list[JudgeAnswer | None]:
        return [None if skip is not None and skip(r) else await self.judge(r) for r in requests]


class LabelAnswers:
    """A labelled set answering the judge requests a metric makes: the labelled score of a sample.

    Built once per evaluator; the index is built on first use with the run's splitter.
    """

    def __init__(self, items: Sequence[LabelledItem]) -> None:
        self.items = list(items)
        self.questions = frozenset(normalize_text(item.question) for item in self.items)
        self._index: _Index | None = None

    async def score(
        self, metric: Metric, sample: RagSample, method: str | None, ctx: ScoringContext
    ) -> float | None:
        """``metric``'s score of ``sample`` from the labels, or None when a judgment it needs has none."""
        if ctx.normalize(sample.question) not in self.questions:
            return None  # the usual case, decided without running the metric
        if self._index is None:
            self._index = _Index(self.items, ctx)
        labelled = _LabelContext(ctx, self._index)
        try:
            result = await metric.score(sample, method, labelled)
        except _Unlabelled:
            return None
        return result.score if labelled.answered else None
