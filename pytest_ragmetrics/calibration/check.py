"""The judge check: judge every labelled item with the configured judge, and measure the agreement.

Labelled items become exactly the judge requests the metrics send for the same texts (same
normalization, splitting, prompts and parameters), and go through the same cache and judgment store.
So a replay run checks the recorded judge at no cost, and a labelled item that a test also judged is
paid for once.

Agreement is measured per judgment kind over its units: a chunk (precision, graded relevance), a
reference sentence (recall), a chunk sentence (sentence selection: needed or not) or a claim (claim
verdicts: supported, contradicted or not found). See
:mod:`.agreement` for the statistics and :data:`STATISTICS` for the names floors use.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import kinds as K
from .._aio import gather_or_cancel
from ..errors import JudgeError, RagMetricsError
from . import agreement as A
from .labels import LabelledItem, kind_names, kind_of

if TYPE_CHECKING:
    from ..engine import Evaluator
    from ..judge.base import JudgeRequest
    from ..metrics.builtin import ScoringContext

__all__ = [
    "BAD_RATE",
    "GOOD_RATE",
    "MAX_ERROR_RATE",
    "STATISTICS",
    "CalibrationError",
    "Floor",
    "KindAgreement",
    "agreement_rates",
    "check_floors",
    "judge_labels",
    "parse_floor",
    "parse_floors",
    "rates_text",
    "run_judge_check",
    "too_few",
]

#: Statistics an agreement floor may name, and what each means.
STATISTICS: Mapping[str, str] = {
    "accuracy": "share of units where the judge gave the label",
    "kappa": "Cohen's kappa (chance-corrected agreement)",
    "weighted_kappa": "quadratically weighted Cohen's kappa (graded ratings only)",
    "f1": "F1 of 'yes' / 'needed' / 'supported', the labels being the truth (not for graded ratings)",
}

#: The statistic of a floor on negative controls (``context_precision controls <= 0.2``): the share of
#: controls judged useful / relevant / needed (see :mod:`.controls`). It needs no labelled set.
CONTROLS = "controls"
#: The statistic of a floor on positive controls (``context_precision positive_controls >= 0.8``):
#: the share of controls, each a sample's own reference offered as the chunk, judged useful /
#: relevant / needed (see :mod:`.controls`). It needs no labelled set either.
POSITIVE_CONTROLS = "positive_controls"
#: The statistics of floors checked on the controls, not on the labels.
CONTROL_STATISTICS = (CONTROLS, POSITIVE_CONTROLS)

#: For a floor's error rates, the share of units a good judge gets right (gives the label; for
#: controls, the verdict a control expects) and the share a bad one does, tossing a coin.
GOOD_RATE = 0.95
BAD_RATE = 0.5

#: A floor a coin toss passes more often than this at the units judged is not decided (see
#: :func:`too_few`): it passes, ``skipped``, and its reason says so (too few controls, or too few
#: labelled units).
MAX_ERROR_RATE = 0.25


def metrics_of_kind(kind: str) -> tuple[tuple[str, str | None], ...]:
    """Which metrics (name, method) read a kind of judgment: the comparisons and gates resting on it."""
    entry = K.KINDS.get(kind)
    return entry.metrics if entry is not None else ()


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
        return K.KINDS[self.kind].classes

    @property
    def unit(self) -> str:
        return K.KINDS[self.kind].unit

    def statistic(self, name: str) -> float | None:
        """The agreement statistic ``name`` (see :data:`STATISTICS`); ``None`` when undefined."""
        if name == "accuracy":
            return A.accuracy(self.labels, self.verdicts)
        if name == "kappa":
            return A.cohen_kappa(self.labels, self.verdicts, self.classes)
        kind = K.KINDS[self.kind]
        if name == "weighted_kappa":
            if not kind.ordinal:  # weights need a scale of ratings
                return None
            return A.cohen_kappa(self.labels, self.verdicts, self.classes, weights="quadratic")
        if name == "f1":
            if kind.ordinal:
                return None
            positive = self.classes[-1]  # yes, needed, supported
            return A.f1_score([x == positive for x in self.labels], [x == positive for x in self.verdicts])
        raise ValueError(f"unknown agreement statistic {name!r}")

    def to_json(self) -> dict[str, Any]:
        names = [("yes" if c else "no") if isinstance(c, bool) else c for c in self.classes]
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
    "'context_relevance[graded] weighted_kappa >= 0.5', 'context_precision controls <= 0.2' or "
    "'context_precision positive_controls >= 0.8'; statistic is one of "
    + ", ".join([*STATISTICS, *CONTROL_STATISTICS])
)


def parse_floor(line: str) -> Floor:
    """Parse one floor line with the one gate-line parser, then check it names a kind and a statistic."""
    from ..specs import format_number, parse_gate_line

    parsed = parse_gate_line(line, what="judge agreement floor", form=FLOOR_FORM)
    subject = str(parsed.subject)
    kind = kind_of(subject)
    if kind is None or parsed.subject.k is not None:
        raise parsed.error(
            f"{subject!r} is not a judgment kind (use {kind_names()}, or context_relevance[graded], "
            "[sentence] or [binary])"
        )
    if parsed.condition is not None:
        raise parsed.error("an agreement floor takes no 'at ...' condition")
    entry = K.KINDS[kind]
    # Kappas lie between -1 and 1, shares between 0 and 1: a floor outside can never fail, or never pass.
    low = -1.0 if parsed.stat in ("kappa", "weighted_kappa") else 0.0
    if parsed.stat in (*STATISTICS, *CONTROL_STATISTICS) and not low <= parsed.threshold <= 1.0:
        raise parsed.error(
            f"{parsed.stat} lies between {format_number(low)} and 1, so a threshold of "
            f"{format_number(parsed.threshold)} is out of range (a floor against it could never tell a "
            "good judge from a bad one)"
        )
    if parsed.stat in CONTROL_STATISTICS:
        if entry.control is None:
            controlled = ", ".join(k.name for k in K.control_kinds())
            raise parsed.error(f"there are no controls for {kind}; use {controlled}")
        if parsed.stat == POSITIVE_CONTROLS and not entry.control.positives:
            raise parsed.error(f"there are no positive controls for {kind}, only negative ones (controls)")
        return Floor(parsed.spec, kind, parsed.stat, parsed.op, parsed.threshold)
    if parsed.stat not in STATISTICS:
        raise parsed.error(f"unknown statistic {parsed.stat!r}")
    rated = ", ".join(k.name for k in K.labelled_kinds() if k.ordinal)
    if parsed.stat == "weighted_kappa" and not entry.ordinal:
        raise parsed.error(f"weighted_kappa is for graded ratings ({rated}) only")
    if parsed.stat == "f1" and entry.ordinal:
        raise parsed.error("f1 is for yes/no judgments; use weighted_kappa for graded ratings")
    return Floor(parsed.spec, kind, parsed.stat, parsed.op, parsed.threshold)


def parse_floors(lines: Sequence[str]) -> list[Floor]:
    """Every floor of ``rag_judge_agreement`` (blank lines and comments skipped)."""
    from ..specs import gate_lines

    return [parse_floor(line) for line in gate_lines(lines)]


def rates_text(false_alarm: float, miss: float, judged: int, what: str) -> str:
    """A floor's error rates at the ``judged`` units (``what``: controls, chunks...) it is decided on."""
    return f"false alarm {false_alarm:.1%}, miss {miss:.1%} at {judged} {what}"


def too_few(miss: float, coin_passes: bool) -> bool:
    """Whether a floor is not decided at the units judged: a coin toss (:data:`BAD_RATE`) passes it
    more often than :data:`MAX_ERROR_RATE` (its ``miss`` rate), which more units make rarer in the
    long run, if not at every step (the share a coin must reach moves with the count). A floor
    a coin toss passes on average (``coin_passes``: at its share of right answers) is one more units
    cannot make tell the two apart: it is decided on its value, as a strict floor a good judge may
    fail is (its false alarm is said, not a reason to leave it undecided)."""
    return miss > MAX_ERROR_RATE and not coin_passes


def _agreement_at(floor: Floor, share: float, classes: int) -> float:
    """The floor's statistic of a judge that gives the label on ``share`` of the units, taken as over
    ``classes`` evenly spread classes: accuracy and f1 the share, a kappa above chance."""
    if floor.stat not in ("kappa", "weighted_kappa"):
        return share
    chance = 1 / classes
    return (share - chance) / (1 - chance)


def agreement_rates(
    floor: Floor, n: int, classes: int, compare: Callable[[float, str, float], bool]
) -> tuple[float, float]:
    """``(false alarm, miss)`` of an agreement floor over ``n`` labelled units: the chance it fails a
    judge that gives the label on :data:`GOOD_RATE` of the units, and passes one that does on
    :data:`BAD_RATE` (binomial, as the controls' floors). A judge that gives the label on ``k`` units
    is taken to score as over ``classes`` evenly spread classes: accuracy and f1 ``k / n``, a kappa
    ``(k / n - 1 / classes) / (1 - 1 / classes)``."""
    from ..stats import floor_error_rates

    def passes(k: int) -> bool:
        return compare(_agreement_at(floor, k / n, classes), floor.op, floor.threshold)

    return floor_error_rates(n, passes, GOOD_RATE, BAD_RATE)


def check_floors(
    floors: Sequence[Floor],
    results: Sequence[KindAgreement],
    compare: Callable[[float, str, float], bool],
    source: str,
) -> list[dict[str, Any]]:
    """One row per floor and judge model: value, passed, and why when it failed.

    A floor over too few labelled units to tell a good judge from a coin toss (:func:`too_few`, at
    the error rates of :func:`agreement_rates`) is not decided, as a controls floor over too few
    controls: it passes, ``skipped``, and its reason says why.
    """
    rows: list[dict[str, Any]] = []
    for floor in floors:
        if floor.stat in CONTROL_STATISTICS:
            continue  # checked on the controls, not the labels
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
                n, classes = len(result.labels), len(result.classes)
                false_alarm, miss = agreement_rates(floor, n, classes, compare)
                decided = {"judged": n, "false_alarm": false_alarm, "miss": miss}
                rates = rates_text(false_alarm, miss, n, result.unit + ("" if n == 1 else "s"))
                coin = compare(_agreement_at(floor, BAD_RATE, classes), floor.op, floor.threshold)
                if too_few(miss, coin):
                    reason = (
                        f"not decided: too few labelled {result.unit}s ({n}) to tell a good judge from a bad "
                        f"one ({rates}); label more items in {source}"
                    )
                    decided["skipped"] = True
                    passed = True
                else:
                    passed = compare(value, floor.op, floor.threshold)
                    below = f"the {result.model} judge agrees with the labels less than required"
                    reason = "" if passed else below
            rows.append(
                {
                    "spec": floor.spec,
                    "kind": floor.kind,
                    "stat": floor.stat,
                    "model": result.model,
                    "value": value,
                    "passed": passed,
                    "reason": reason,
                    **(decided if value is not None else {}),
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
    order = {kind: i for i, kind in enumerate(K.KINDS)}
    return [results[key] for key in sorted(results, key=lambda k: (order[k[0]], k[1]))]


async def _ask(ctx: ScoringContext, request: JudgeRequest, out: KindAgreement) -> Any:
    answer = await ctx.judge(request)
    if not answer.cached:
        out.judge_calls += 1
    return answer


async def _judge_item(item: LabelledItem, evaluator: Evaluator, ctx: ScoringContext) -> list[KindAgreement]:
    """The item's agreement; an item the judge gives no usable answer for is counted as an error."""
    try:
        return await _judge_one(item, ctx)
    except JudgeError as exc:
        error = ItemError(item.id, item.where, str(exc))
        models = [params.model for params in K.KINDS[item.kind].params(evaluator.settings)]
        return [KindAgreement(item.kind, model, items=1, errors=[error]) for model in models]


def unit_labels(item: LabelledItem, units: Sequence[str], label: str) -> list[Any]:
    """The item's label, one per unit; raises :class:`CalibrationError` when it does not fit the units
    the configured splitter makes."""
    form = K.KINDS[item.kind].labels
    assert form is not None
    if form.form == "one":
        return [item.label]
    listed = "; ".join(f"{i}: {_short(t, 40)}" for i, t in enumerate(units, start=1))
    if form.form == "numbers":
        if not units or max(item.label, default=0) > len(units):
            raise CalibrationError(
                f"{label}: {form.field} {list(item.label)} but the splitter splits the {form.split} into "
                f"{len(units)} sentence(s); number them as split: {listed}"
            )
        return [number in item.label for number in range(1, len(units) + 1)]
    if len(units) != len(item.label):
        raise CalibrationError(
            f"{label}: {len(item.label)} {form.field} entries, but the splitter splits the {form.split} "
            f"into {len(units)} sentence(s): {listed}"
        )
    return list(item.label)


async def _judge_one(item: LabelledItem, ctx: ScoringContext) -> list[KindAgreement]:
    """Judge ``item`` with every model that judges its kind: exactly the requests a metric makes for
    the same texts, read into one verdict per unit."""
    kind = K.KINDS[item.kind]
    form = kind.labels
    assert form is not None
    label = f"labelled item {item.id!r} ({item.where})"
    material = item.material()
    units = await kind.units_of(material, ctx)
    labels = unit_labels(item, units, label)
    outs = []
    for params in kind.params(ctx.settings):
        out = KindAgreement(item.kind, params.model, items=1)
        verdicts: list[tuple[float, str]] = []
        for request in kind.ask(material, units, params, label, ctx) or ():
            answer = await _ask(ctx, request, out)
            verdicts += kind.verdicts(request, answer.choices)
        classes = [kind.verdict_class(value) for value, _ in verdicts]
        out.labels += labels
        out.verdicts += classes
        out.disagreements += _disagreements(item, units, labels, classes, [why for _, why in verdicts])
        outs.append(out)
    return outs


def _disagreements(
    item: LabelledItem,
    units: Sequence[str],
    labels: Sequence[Any],
    verdicts: Sequence[Any],
    reasons: Sequence[str],
) -> list[Disagreement]:
    """Where the judge decided otherwise than the labels: per unit, or once for an item labelled by
    the numbers of its positive units."""
    kind = K.KINDS[item.kind]
    form = kind.labels
    assert form is not None

    def word(value: Any) -> str:
        if isinstance(value, bool):
            return form.words[0] if value else form.words[1]
        return str(value)

    if form.form == "numbers":
        chosen = [n for n, ok in enumerate(verdicts, start=1) if ok]
        if tuple(chosen) == tuple(item.label):
            return []
        reason = next((why for why, ok in zip(reasons, verdicts, strict=True) if ok), reasons[0])
        plural = kind.unit.split()[-1] + "s"
        text = _short(" ".join(units))
        return [
            Disagreement(
                item.id,
                item.where,
                text,
                f"{plural} {list(item.label)}",
                f"{plural} {chosen}",
                reason,
                item.reason,
            )
        ]
    out = []
    for i, (text, wanted, got, reason) in enumerate(zip(units, labels, verdicts, reasons, strict=True)):
        if got == wanted:
            continue
        if form.form == "each":
            name = f"{item.id} {kind.unit.split()[-1]} {i + 1}"
            labelled_reason = item.reasons[i] if item.reasons else item.reason
        else:
            name, labelled_reason = item.id, item.reason
        out.append(
            Disagreement(name, item.where, _short(text), word(wanted), word(got), reason, labelled_reason)
        )
    return out


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
        with evaluator.noting_nothing():
            results = evaluator.runner.run(judge_labels(items, evaluator))
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
