"""The judge check: judge every labelled item with the configured judge, and measure the agreement.

Labelled items become exactly the judge requests the metrics send for the same texts (same
normalization, splitting, prompts and parameters), and go through the same cache and judgment store.
So a replay run checks the recorded judge at no cost, and a labelled item that a test also judged is
paid for once.

Agreement is measured per judgment kind over its units: a chunk (precision, graded relevance), a
reference sentence (recall) or a chunk sentence (sentence selection: needed or not). See
:mod:`.agreement` for the statistics and :data:`STATISTICS` for the names floors use.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import judgments as J
from .._aio import gather_or_cancel
from ..errors import JudgeError, RagMetricsError
from ..sample import RagSample
from ..text import normalize_text
from . import agreement as A
from .labels import KINDS, LabelledItem, kind_of

#: The judgment kinds negative controls are drawn for (a floor such as ``context_precision controls
#: <= 0.2`` may name them), with the verdict a control should not get.
CONTROL_KINDS: Mapping[str, str] = {
    J.PRECISION: "useful",
    J.GRADED: "relevant",
    J.SENTENCES: "needed",
}

if TYPE_CHECKING:
    from ..engine import Evaluator
    from ..judge.base import JudgeRequest
    from ..metrics.builtin import ScoringContext

__all__ = [
    "STATISTICS",
    "CalibrationError",
    "Floor",
    "KindAgreement",
    "check_floors",
    "judge_labels",
    "parse_floor",
    "parse_floors",
    "run_judge_check",
]

#: Statistics an agreement floor may name, and what each means.
STATISTICS: Mapping[str, str] = {
    "accuracy": "share of units where the judge gave the label",
    "kappa": "Cohen's kappa (chance-corrected agreement)",
    "weighted_kappa": "quadratically weighted Cohen's kappa (graded ratings only)",
    "f1": "F1 of 'yes' / 'needed', the labels being the truth (not for graded ratings)",
}

#: The statistic of a floor on negative controls (``context_precision controls <= 0.2``): the share of
#: controls judged useful / relevant / needed (see :mod:`.controls`). It needs no labelled set.
CONTROLS = "controls"

#: The unit agreement is counted over, per kind.
UNITS: Mapping[str, str] = {
    J.PRECISION: "chunk",
    J.RECALL: "reference sentence",
    J.GRADED: "chunk",
    J.SENTENCES: "chunk sentence",
}

#: Which metrics read each kind of judgment: the comparisons and gates that rest on it.
METRICS_OF_KIND: Mapping[str, tuple[tuple[str, str | None], ...]] = {
    J.PRECISION: (("context_precision", None),),
    J.RECALL: (("context_recall", None),),
    J.GRADED: (("context_relevance", "graded"),),
    J.SENTENCES: (("context_relevance", "sentence"), ("context_relevance", "binary")),
}


class CalibrationError(RagMetricsError, ValueError):
    """A labelled item cannot be checked (it does not fit how the configured splitter splits it)."""


@dataclass(frozen=True)
class Disagreement:
    """One labelled item where the judge decided otherwise."""

    id: str
    where: str
    text: str
    label: str
    verdict: str
    reason: str
    labelled_reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "where": self.where,
            "text": self.text,
            "label": self.label,
            "verdict": self.verdict,
            "reason": self.reason,
            "labelled_reason": self.labelled_reason,
        }


@dataclass(frozen=True)
class ItemError:
    """One labelled item the judge gave no usable answer for (unparseable, failed, not recorded)."""

    id: str
    where: str
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "where": self.where, "reason": self.reason}


@dataclass
class KindAgreement:
    """How one judge model agreed with the labels of one judgment kind."""

    kind: str
    model: str
    items: int = 0
    labels: list[Any] = field(default_factory=list)
    verdicts: list[Any] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    #: Items the judge gave no usable answer for: counted, with the reason, not in the figures.
    errors: list[ItemError] = field(default_factory=list)
    #: Fresh judge calls (the tokens of a model's answers are in its evaluator's figures).
    judge_calls: int = 0

    @property
    def classes(self) -> tuple[Any, ...]:
        return (0, 1, 2) if self.kind == J.GRADED else (False, True)

    @property
    def unit(self) -> str:
        return UNITS[self.kind]

    def statistic(self, name: str) -> float | None:
        """The agreement statistic ``name`` (see :data:`STATISTICS`); ``None`` when undefined."""
        if name == "accuracy":
            return A.accuracy(self.labels, self.verdicts)
        if name == "kappa":
            return A.cohen_kappa(self.labels, self.verdicts, self.classes)
        if name == "weighted_kappa":
            if self.kind != J.GRADED:
                return None
            return A.cohen_kappa(self.labels, self.verdicts, self.classes, weights="quadratic")
        if name == "f1":
            if self.kind == J.GRADED:
                return None
            return A.f1_score(self.labels, self.verdicts)
        raise ValueError(f"unknown agreement statistic {name!r}")

    def to_json(self) -> dict[str, Any]:
        names = [
            c if isinstance(c, int) and not isinstance(c, bool) else ("yes" if c else "no")
            for c in self.classes
        ]
        return {
            "kind": self.kind,
            "model": self.model,
            "unit": self.unit,
            "items": self.items,
            "n": len(self.labels),
            **{name: self.statistic(name) for name in STATISTICS},
            "classes": names,
            "confusion": A.confusion_matrix(self.labels, self.verdicts, self.classes),
            "disagreements": [d.to_json() for d in self.disagreements],
            "errors": len(self.errors),
            "error_items": [e.to_json() for e in self.errors],
            "judge_calls": self.judge_calls,
        }


# --- floors -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Floor:
    """An agreement floor such as ``context_precision kappa >= 0.6``."""

    spec: str
    kind: str
    stat: str
    op: str
    threshold: float


#: The expected form of a floor, quoted in every parse error.
FLOOR_FORM = (
    "expected '<judgment kind> <statistic> <op> <number>', e.g. 'context_precision kappa >= 0.6', "
    "'context_relevance[graded] weighted_kappa >= 0.5' or 'context_precision controls <= 0.2'; "
    "statistic is one of " + ", ".join([*STATISTICS, CONTROLS])
)


def parse_floor(line: str) -> Floor:
    """Parse one floor line with the one gate-line parser, then check it names a kind and a statistic."""
    from ..specs import parse_gate_line

    parsed = parse_gate_line(line, what="judge agreement floor", form=FLOOR_FORM)
    subject = str(parsed.subject)
    kind = kind_of(subject)
    if kind is None or parsed.subject.k is not None:
        raise parsed.error(
            f"{subject!r} is not a judgment kind (use {', '.join(KINDS)}, or context_relevance[graded], "
            "[sentence] or [binary])"
        )
    if parsed.condition is not None:
        raise parsed.error("an agreement floor takes no 'at ...' condition")
    if parsed.stat == CONTROLS:
        if kind not in CONTROL_KINDS:
            raise parsed.error(f"there are no negative controls for {kind}; use {', '.join(CONTROL_KINDS)}")
        return Floor(parsed.spec, kind, parsed.stat, parsed.op, parsed.threshold)
    if parsed.stat not in STATISTICS:
        raise parsed.error(f"unknown statistic {parsed.stat!r}")
    if parsed.stat == "weighted_kappa" and kind != J.GRADED:
        raise parsed.error("weighted_kappa is for graded ratings (context_relevance_graded) only")
    if parsed.stat == "f1" and kind == J.GRADED:
        raise parsed.error("f1 is for yes/no judgments; use weighted_kappa for graded ratings")
    return Floor(parsed.spec, kind, parsed.stat, parsed.op, parsed.threshold)


def parse_floors(lines: Sequence[str]) -> list[Floor]:
    """Every floor of ``rag_judge_agreement`` (blank lines and comments skipped)."""
    from ..specs import gate_lines

    return [parse_floor(line) for line in gate_lines(lines)]


def check_floors(
    floors: Sequence[Floor],
    results: Sequence[KindAgreement],
    compare: Callable[[float, str, float], bool],
    source: str,
) -> list[dict[str, Any]]:
    """One row per floor and judge model: value, passed, and why when it failed."""
    rows: list[dict[str, Any]] = []
    for floor in floors:
        if floor.stat == CONTROLS:
            continue  # checked on the negative controls, not the labels
        matching = [r for r in results if r.kind == floor.kind]
        if not matching:
            rows.append(
                {
                    "spec": floor.spec,
                    "kind": floor.kind,
                    "stat": floor.stat,
                    "model": None,
                    "value": None,
                    "passed": False,
                    "reason": f"{source} has no {floor.kind} items",
                }
            )
            continue
        for result in matching:
            value = result.statistic(floor.stat)
            if not result.labels and result.errors:
                passed = False
                reason = (
                    f"no {result.unit} was judged: the judge gave no usable answer for any of its "
                    f"{len(result.errors)} item(s)"
                )
            elif value is None:
                passed = False
                reason = (
                    f"{floor.stat} is undefined over {len(result.labels)} {result.unit}s: the labels and "
                    "the verdicts all fall in one class; label items of the other class too"
                )
            else:
                passed = compare(value, floor.op, floor.threshold)
                reason = (
                    "" if passed else f"the {result.model} judge agrees with the labels less than required"
                )
            rows.append(
                {
                    "spec": floor.spec,
                    "kind": floor.kind,
                    "stat": floor.stat,
                    "model": result.model,
                    "value": value,
                    "passed": passed,
                    "reason": reason,
                }
            )
    return rows


# --- judging labelled items ------------------------------------------------------------------------


def _positions(sentences: Sequence[str], extracted: Sequence[str]) -> tuple[int, ...]:
    """The numbers of the ``extracted`` sentences (in chunk order) among ``sentences``. A sentence that
    occurs twice in a chunk counts as its first occurrence not yet taken."""
    numbers: list[int] = []
    for text in extracted:
        number = next(i for i, s in enumerate(sentences, start=1) if s == text and i not in numbers)
        numbers.append(number)
    return tuple(sorted(numbers))


def _short(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _yes(value: bool) -> str:
    return "yes" if value else "no"


async def judge_labels(items: Sequence[LabelledItem], evaluator: Evaluator) -> list[KindAgreement]:
    """Judge every labelled item with ``evaluator`` (its cached judge) and compare with its label.

    Returns one :class:`KindAgreement` per kind present (and per model for graded relevance when
    several models rate), in :data:`KINDS` order, units in file order. Raises
    :class:`CalibrationError` for an item that does not fit its split, and whatever the judge raises.
    """
    ctx = evaluator.scoring_context()
    parts = await gather_or_cancel(*(_judge_item(item, evaluator, ctx) for item in items))
    # Each item is judged into parts of its own, merged here in file order, so the figures and the
    # disagreements read the same whatever order the judge answered in.
    results: dict[tuple[str, str], KindAgreement] = {}
    for fragments in parts:
        for part in fragments:
            whole = results.setdefault((part.kind, part.model), KindAgreement(part.kind, part.model))
            whole.items += part.items
            whole.labels += part.labels
            whole.verdicts += part.verdicts
            whole.disagreements += part.disagreements
            whole.errors += part.errors
            whole.judge_calls += part.judge_calls
    order = {kind: i for i, kind in enumerate(KINDS)}
    return [results[key] for key in sorted(results, key=lambda k: (order[k[0]], k[1]))]


async def _ask(ctx: ScoringContext, request: JudgeRequest, out: KindAgreement) -> Any:
    answer = await ctx.judge(request)
    if not answer.cached:
        out.judge_calls += 1
    return answer


async def _judge_item(item: LabelledItem, evaluator: Evaluator, ctx: ScoringContext) -> list[KindAgreement]:
    """The item's agreement; an item the judge gives no usable answer for is counted as an error."""
    s = evaluator.settings
    try:
        return await _judge_one(item, evaluator, ctx)
    except JudgeError as exc:
        models = s.models_for_graded if item.kind == J.GRADED else (s.judge_model,)
        error = ItemError(item.id, item.where, str(exc))
        return [KindAgreement(item.kind, model, items=1, errors=[error]) for model in models]


async def _judge_one(item: LabelledItem, evaluator: Evaluator, ctx: ScoringContext) -> list[KindAgreement]:
    s = evaluator.settings
    split = evaluator.splitter
    params = J.JudgeParams(s.judge_model, s.temperature, s.seed, s.judge_n)
    question = normalize_text(item.question)
    label = f"labelled item {item.id!r} ({item.where})"
    if item.kind == J.PRECISION:
        assert item.reference is not None and item.chunk is not None
        out = KindAgreement(item.kind, s.judge_model, items=1)
        chunk = normalize_text(item.chunk)
        request = J.precision_request(
            question, normalize_text(item.reference), "ground_truth", chunk, params, label
        )
        answer = await _ask(ctx, request, out)
        useful, reason = J.combine_boolean(answer.choices, "useful")
        out.labels.append(item.label)
        out.verdicts.append(useful)
        if useful != item.label:
            out.disagreements.append(
                Disagreement(
                    item.id, item.where, _short(chunk), _yes(item.label), _yes(useful), reason, item.reason
                )
            )
        return [out]
    if item.kind == J.GRADED:
        assert item.chunk is not None
        chunk = normalize_text(item.chunk)
        outs = []
        for model in s.models_for_graded:
            out = KindAgreement(item.kind, model, items=1)
            graded = J.JudgeParams(model, s.graded_temperature, s.seed, s.judge_n)
            answer = await _ask(ctx, J.graded_request(question, chunk, graded, label), out)
            mean, reason = J.combine_rating(answer.choices)
            rating = int(mean + 0.5)  # self-consistency averages ratings: the nearest, halves up
            out.labels.append(item.label)
            out.verdicts.append(rating)
            if rating != item.label:
                out.disagreements.append(
                    Disagreement(
                        item.id, item.where, _short(chunk), str(item.label), str(rating), reason, item.reason
                    )
                )
            outs.append(out)
        return outs
    if item.kind == J.SENTENCES:
        assert item.chunk is not None
        out = KindAgreement(item.kind, s.judge_model, items=1)
        chunk = normalize_text(item.chunk)
        sentences = [text for raw in split(chunk) if (text := normalize_text(raw))]
        if not sentences or max(item.label, default=0) > len(sentences):
            raise CalibrationError(
                f"{label}: relevant_sentences {list(item.label)} but the splitter splits the chunk into "
                f"{len(sentences)} sentence(s); number them as split: "
                + "; ".join(f"{i}: {_short(t, 40)}" for i, t in enumerate(sentences, start=1))
            )
        # Judged by the metric itself, so the request is exactly the one a test makes for this chunk.
        scored = await evaluator.ascore(RagSample(item.question, (chunk,)), "context_relevance", "sentence")
        out.judge_calls += scored.judge_calls
        verdict = scored.verdicts[0]
        chosen = _positions(sentences, verdict.extracted)
        for number in range(1, len(sentences) + 1):
            out.labels.append(number in item.label)
            out.verdicts.append(number in chosen)
        if chosen != tuple(item.label):
            out.disagreements.append(
                Disagreement(
                    item.id,
                    item.where,
                    _short(" ".join(sentences)),
                    f"sentences {list(item.label)}",
                    f"sentences {list(chosen)}",
                    verdict.reason,
                    item.reason,
                )
            )
        return [out]
    # context_recall
    out = KindAgreement(item.kind, s.judge_model, items=1)
    if item.reference_sentences is not None:
        sentences = [normalize_text(t) for t in item.reference_sentences]
    else:
        assert item.reference is not None
        sentences = [text for raw in split(item.reference) if (text := normalize_text(raw))]
    if len(sentences) != len(item.label):
        raise CalibrationError(
            f"{label}: {len(item.label)} attributed entries, but the splitter splits the reference "
            f"into {len(sentences)} sentence(s): "
            + "; ".join(f"{i}: {_short(t, 40)}" for i, t in enumerate(sentences, start=1))
        )
    contexts = [normalize_text(c) for c in item.contexts]
    requests = J.recall_requests(question, contexts, sentences, params, label)
    decided = J.join_recall(requests, [await _ask(ctx, r, out) for r in requests])
    for i, (text, wanted, (ok, reason, _)) in enumerate(zip(sentences, item.label, decided, strict=True)):
        out.labels.append(wanted)
        out.verdicts.append(ok)
        if ok != wanted:
            out.disagreements.append(
                Disagreement(
                    f"{item.id} sentence {i + 1}",
                    item.where,
                    _short(text),
                    "attributed" if wanted else "not attributed",
                    "attributed" if ok else "not attributed",
                    reason,
                    item.reasons[i] if item.reasons else item.reason,
                )
            )
    return [out]


def run_judge_check(
    evaluator: Evaluator, items: Sequence[LabelledItem], floors: Sequence[Floor], source: str
) -> dict[str, Any]:
    """Judge ``items`` with ``evaluator``'s cached judge and check ``floors``: the report's section.

    ``source`` names the labelled set in messages. An item the judge gives no usable answer for
    (unparseable, failed, not recorded in replay) is counted as an error with its reason and the check
    goes on; a check with errors does not pass. An item that does not fit its split fails the check.
    """
    from ..gates import compare

    section: dict[str, Any] = {"source": source, "model": evaluator.settings.judge_model}
    try:
        tests_judged = set(evaluator.answers)
        try:
            results = evaluator.runner.run(judge_labels(items, evaluator))
        finally:
            # The labelled items' answers say nothing about how the tests' judgments were spread.
            for key in set(evaluator.answers) - tests_judged:
                del evaluator.answers[key]
    except RagMetricsError as exc:
        return {**section, "kinds": [], "floors": [], "passed": False, "error": f"{source}: {exc}"}
    rows = check_floors(floors, results, compare, source)
    return {
        **section,
        "kinds": [r.to_json() for r in results],
        "floors": rows,
        "passed": all(r["passed"] for r in rows) and not any(r.errors for r in results),
        "error": None,
        "item_errors": errors_message(results, source),
    }


def errors_message(results: Sequence[KindAgreement], source: str) -> str | None:
    """One line on the items the judge gave no usable answer for, or None when there are none."""
    errors = [e for r in results for e in r.errors]
    if not errors:
        return None
    first = errors[0]
    return (
        f"{source}: the judge gave no usable answer for {len(errors)} labelled item(s); "
        f"first: {first.id!r} ({first.where}): {first.reason}"
    )
