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

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import kinds as K
from ..judge.base import JudgeAnswer
from ..text import normalize_text
from .check import CalibrationError, unit_labels
from .labels import LabelledItem

if TYPE_CHECKING:
    from ..judge.base import JudgeRequest
    from ..metrics.builtin import Metric, ScoringContext
    from ..sample import RagSample
    from ..settings import Settings

__all__ = ["LabelAnswers"]


class _Unlabelled(Exception):
    """A judgment the metric asked for has no label."""


def _asked(request: JudgeRequest) -> str:
    """What a request asks, whoever is asked: its kind and the inputs of its key (not the model, the
    prompt version or the sampling parameters)."""
    inputs = request.key_inputs if request.key_inputs is not None else request.inputs
    return json.dumps([request.kind, inputs], sort_keys=True, ensure_ascii=False)


class _Index:
    """The labels' answers to the judge requests the labelled items are, by what each request asks.

    Each item becomes exactly the requests its kind's entry of the table sends for the same texts
    (split as the run splits), answered from the item's labels; an item that does not fit the split
    answers nothing (the judge check says what is wrong)."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}

    @classmethod
    async def build(cls, items: Sequence[LabelledItem], ctx: ScoringContext) -> _Index:
        index = cls()
        for item in items:
            kind = K.KINDS[item.kind]
            if kind.labelled_answer is None:
                continue
            material = item.material()
            try:
                units = await kind.units_of(material, ctx)
                labels = unit_labels(item, units, f"labelled item {item.id!r}")
            except CalibrationError:
                continue
            for params in kind.params(ctx.settings):
                for request in kind.ask(material, units, params, "", ctx) or ():
                    index.answers[_asked(request)] = kind.labelled_answer(request, labels)
        return index

    def answer(self, request: JudgeRequest) -> dict[str, Any]:
        """The labels' answer to ``request`` in its answer schema; :class:`_Unlabelled` if there is none."""
        answer = self.answers.get(_asked(request))
        if answer is None:
            raise _Unlabelled
        return answer


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
            self._index = await _Index.build(self.items, ctx)
        labelled = _LabelContext(ctx, self._index)
        try:
            result = await metric.score(sample, method, labelled)
        except _Unlabelled:
            return None
        return result.score if labelled.answered else None
