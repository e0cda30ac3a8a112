"""Negative controls: judge pairs that should come out negative, and see how often they do not.

A control pairs the question of one of the run's samples with a chunk retrieved for a different
sample. Such a chunk may happen to help (two questions about the same thing), but across many pairs a
judge that calls most of them useful or relevant is not discriminating, whatever it says of the run's
own chunks. No labels are needed. Controls are judged with exactly the requests the metrics send (same
prompts, parameters, cache and judgment store), for the judgment kinds the run used:

* ``context_precision``: the share of controls judged *useful* for the question's reference;
* ``context_relevance_graded``: the share rated *relevant* (1 or 2);
* ``context_relevance_sentences``: the share with at least one sentence judged *needed*.

Pairs are drawn with a seeded generator from the samples sorted by a stable key, so a run draws the
same pairs whatever order its tests ran in. A pair whose question and chunk come from samples sharing
an id, a reference or the question's text, or whose chunk (by text or context id) was retrieved for
or is a reference context of the question's own sample, is never used.

What a control cannot tell: a low share does not make a judge right about the run's own chunks (it
may reject everything); a high share can also mean the golden set asks near-duplicate questions. It is
a tripwire for a judge that says yes to everything, not a measure of agreement (see the judge check).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import judgments as J
from .. import kinds as K
from .._aio import gather_or_cancel
from ..errors import JudgeError, RagMetricsError
from ..sample import RagSample
from ..text import normalize_text
from .check import Floor

if TYPE_CHECKING:
    from ..engine import Evaluator
    from ..metrics.builtin import ScoringContext

__all__ = [
    "WARN_SHARE",
    "ControlPair",
    "ControlShare",
    "check_control_floors",
    "control_lines",
    "control_pairs",
    "judge_controls",
    "run_controls",
]

#: Above this share of controls judged positive the run warns that the judge may not discriminate.
WARN_SHARE = 0.5

#: How many draws per wanted pair before giving up (a small or homogeneous golden set has few pairs).
_DRAWS_PER_PAIR = 50


@dataclass(frozen=True)
class ControlPair:
    """A question (with its sample's reference and answer) and a chunk retrieved for another sample,
    with all that sample's contexts when none of them is related to the question's sample (an answer
    is checked against them)."""

    question: str
    reference: str | None
    reference_kind: str
    chunk: str
    question_sample: str
    chunk_sample: str
    answer: str | None = None
    contexts: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "reference": self.reference,
            "reference_kind": self.reference_kind,
            "chunk": self.chunk,
            "question_sample": self.question_sample,
            "chunk_sample": self.chunk_sample,
            "answer": self.answer,
            "contexts": list(self.contexts),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ControlPair:
        return cls(
            str(data["question"]),
            None if data.get("reference") is None else str(data["reference"]),
            str(data.get("reference_kind", "ground_truth")),
            str(data["chunk"]),
            str(data["question_sample"]),
            str(data["chunk_sample"]),
            None if data.get("answer") is None else str(data["answer"]),
            tuple(str(c) for c in data.get("contexts") or ()),
        )

    def material(self) -> J.Material:
        """What the judge is shown for this control, whatever its kind."""
        return J.Material(
            self.question,
            chunk=self.chunk,
            reference=self.reference,
            reference_kind=self.reference_kind,
            contexts=self.contexts,
            answer=self.answer,
        )


def _name(sample: RagSample) -> str:
    return str(sample.id) if sample.id is not None else sample.question


def _reference(sample: RagSample) -> tuple[str | None, str]:
    if sample.ground_truth:
        return sample.ground_truth, "ground_truth"
    if sample.answer:
        return sample.answer, "answer"
    return None, "ground_truth"


def _unrelated(question: RagSample, other: RagSample, chunk: int) -> bool:
    """May ``other``'s chunk number ``chunk`` be a control for ``question``'s question?"""
    if question.id is not None and question.id == other.id:
        return False
    if normalize_text(question.question) == normalize_text(other.question):
        return False
    ours, theirs = _reference(question)[0], _reference(other)[0]
    if ours and theirs and normalize_text(ours) == normalize_text(theirs):
        return False
    text = normalize_text(other.contexts[chunk])
    own = {normalize_text(c) for c in (*question.contexts, *(question.reference_contexts or ()))}
    if text in own:
        return False
    if other.context_ids is not None:
        chunk_id = other.context_ids[chunk]
        known = {*(question.context_ids or ()), *(question.reference_context_ids or ())}
        if chunk_id in known:
            return False
    return True


def control_pairs(samples: Iterable[RagSample], count: int, seed: int = 0) -> list[ControlPair]:
    """``count`` distinct control pairs drawn from ``samples`` (fewer when there are not enough)."""
    unique: dict[str, RagSample] = {}
    for sample in samples:
        if sample.contexts:
            unique.setdefault(f"{_name(sample)}\0{sample.question}\0{sample.contexts!r}", sample)
    pool = [unique[key] for key in sorted(unique)]
    if count < 1 or len(pool) < 2:
        return []
    rng = random.Random(seed)
    chosen: list[ControlPair] = []
    seen: set[tuple[int, int, int]] = set()
    # Two samples can hold the same chunk: a control is one question and one chunk text, once.
    texts: set[tuple[str, str]] = set()
    for _ in range(count * _DRAWS_PER_PAIR):
        if len(chosen) == count:
            break
        i, j = rng.randrange(len(pool)), rng.randrange(len(pool))
        k = rng.randrange(len(pool[j].contexts))
        if i == j or (i, j, k) in seen:
            continue
        seen.add((i, j, k))
        if not _unrelated(pool[i], pool[j], k):
            continue
        text = (normalize_text(pool[i].question), normalize_text(pool[j].contexts[k]))
        if text in texts:
            continue
        texts.add(text)
        reference, reference_kind = _reference(pool[i])
        unrelated = all(_unrelated(pool[i], pool[j], m) for m in range(len(pool[j].contexts)))
        answer = pool[i].answer
        chosen.append(
            ControlPair(
                pool[i].question,
                reference,
                reference_kind,
                pool[j].contexts[k],
                _name(pool[i]),
                _name(pool[j]),
                answer if answer and answer.strip() else None,
                tuple(pool[j].contexts) if unrelated else (),
            )
        )
    return chosen


@dataclass
class ControlShare:
    """How one judgment kind's controls came out."""

    kind: str
    judged: int = 0
    positive: int = 0
    errors: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)

    @property
    def share(self) -> float | None:
        return self.positive / self.judged if self.judged else None

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "verdict": _verdict(self.kind),
            "judged": self.judged,
            "positive": self.positive,
            "share": self.share,
            "errors": len(self.errors),
            "error_reasons": self.errors[:5],
            "examples": self.examples[:5],
        }


def _verdict(kind: str) -> str:
    """What a positive verdict of a kind's control is called: useful, relevant, needed."""
    control = K.KINDS[kind].control
    assert control is not None
    return control.verdict


async def _judge_pair(
    pair: ControlPair, kind: J.JudgmentKind, ctx: ScoringContext, label: str
) -> tuple[bool, tuple[str, ...]] | None:
    """Whether the judge found the control positive (see :class:`~pytest_ragmetrics.judgments.ControlForm`),
    and the keys of the judgments that decided it; None when the pair lacks what the kind needs
    (precision without a reference, an answer without claims).

    Judged with exactly the requests the metrics send for the same texts, by every model that judges
    the kind."""
    material = pair.material()
    units = await kind.units_of(material, ctx)
    per_model: list[list[float]] = []
    keys: list[str] = []
    for params in kind.params(ctx.settings):
        requests = kind.ask(material, units, params, label, ctx)
        if requests is None:
            return None
        values: list[float] = []
        for request in requests:
            answer = await ctx.judge(request)
            keys.append(request.cache_key())
            values += [value for value, _ in kind.verdicts(request, answer.choices)]
        per_model.append(values)
    assert kind.control is not None
    least = kind.control.positive_from
    positive = any(kind.class_index(sum(unit) / len(unit)) >= least for unit in zip(*per_model, strict=True))
    return positive, tuple(keys)


async def judge_controls(
    pairs: Sequence[ControlPair], kinds: Iterable[str], evaluator: Evaluator
) -> list[ControlShare]:
    """Judge every pair for every kind in ``kinds`` that controls cover; one share per kind."""
    ctx = evaluator.scoring_context()
    wanted = [kind.name for kind in K.control_kinds() if kind.name in set(kinds)]

    async def one(pair: ControlPair, kind: str, number: int) -> tuple[str, ControlPair, Any]:
        label = f"negative control {number} ({pair.question_sample!r}, a chunk of {pair.chunk_sample!r})"
        try:
            return kind, pair, await _judge_pair(pair, K.KINDS[kind], ctx, label)
        except JudgeError as exc:
            return kind, pair, exc

    outcomes = await gather_or_cancel(
        *(one(pair, kind, n) for kind in wanted for n, pair in enumerate(pairs, start=1))
    )
    shares = {kind: ControlShare(kind) for kind in wanted}
    decided: set[tuple[str, tuple[str, ...]]] = set()
    for kind, pair, outcome in outcomes:
        share = shares[kind]
        if isinstance(outcome, JudgeError):
            share.errors.append(str(outcome))
        elif outcome is not None:
            positive, keys = outcome
            if (kind, keys) in decided:
                continue  # the same judgments as a control before (one answer, one set of contexts)
            decided.add((kind, keys))
            share.judged += 1
            if positive:
                share.positive += 1
                share.examples.append(
                    {
                        "question": pair.question_sample,
                        "chunk_of": pair.chunk_sample,
                        "chunk": pair.chunk[:200],
                    }
                )
    return list(shares.values())


def check_control_floors(
    floors: Sequence[Floor], shares: Sequence[ControlShare], compare: Callable[[float, str, float], bool]
) -> list[dict[str, Any]]:
    """One row per controls floor (``context_precision controls <= 0.2``): value, passed, and why."""
    by_kind = {s.kind: s for s in shares}
    rows = []
    for floor in floors:
        share = by_kind.get(floor.kind)
        value = share.share if share is not None else None
        if floor.kind not in K.KINDS or K.KINDS[floor.kind].control is None:
            passed, reason = False, f"there are no negative controls for {floor.kind}"
        elif value is None:
            passed = False
            reason = f"no {floor.kind} control was judged (the run made no such judgment, or each failed)"
        else:
            assert share is not None  # a value comes from a share
            passed = compare(value, floor.op, floor.threshold)
            verdict = _verdict(floor.kind)
            reason = "" if passed else f"{share.positive} of {share.judged} controls judged {verdict}"
        rows.append(
            {"spec": floor.spec, "kind": floor.kind, "value": value, "passed": passed, "reason": reason}
        )
    return rows


def run_controls(
    evaluator: Evaluator,
    pairs: Sequence[ControlPair],
    kinds: Iterable[str],
    floors: Sequence[Floor],
    wanted: int | None = None,
) -> dict[str, Any]:
    """Judge the controls with ``evaluator``'s cached judge and check ``floors``: the report's section.
    ``wanted`` is the number of pairs asked for: fewer drawn is a warning."""
    from ..gates import compare

    section: dict[str, Any] = {"pairs": len(pairs), "model": evaluator.settings.judge_model}
    judged_before = set(evaluator.answers)
    try:
        shares = evaluator.runner.run(judge_controls(pairs, kinds, evaluator))
    except RagMetricsError as exc:
        return {**section, "kinds": [], "floors": [], "warnings": [], "passed": False, "error": str(exc)}
    finally:
        # What the controls decided says nothing about how the tests' judgments were spread.
        for key in set(evaluator.answers) - judged_before:
            del evaluator.answers[key]
    rows = check_control_floors(floors, shares, compare)
    warnings = [
        f"{s.positive} of {s.judged} negative controls ({s.share:.0%}) were judged {_verdict(s.kind)} "
        f"for {s.kind}: above {WARN_SHARE:.0%}, the judge may not be discriminating"
        for s in shares
        if s.share is not None and s.share > WARN_SHARE
    ]
    if wanted is not None and len(pairs) < wanted:
        warnings.insert(
            0,
            f"only {len(pairs)} of the {wanted} negative controls asked for could be drawn: controls pair "
            "the samples of golden sets (tests taking rag_sample), and need two unrelated ones",
        )
    return {
        **section,
        "kinds": [s.to_json() for s in shares],
        "floors": rows,
        "warnings": warnings,
        "passed": all(r["passed"] for r in rows),
        "error": None,
    }


def control_lines(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's closing lines on its negative controls, each with its colour."""
    if section.get("error"):
        return [(f"ragmetrics negative controls could not be judged: {section['error']}", "red")]
    lines = []
    for k in section.get("kinds") or []:
        share = "-" if k.get("share") is None else f"{k['share']:.0%}"
        errors = f", {k['errors']} not judged" if k.get("errors") else ""
        lines.append(
            (
                f"ragmetrics negative controls: {k['kind']}: {k['positive']} of {k['judged']} judged "
                f"{k['verdict']} ({share}){errors}",
                "bold",
            )
        )
    lines += [(f"ragmetrics warning: {w}", "yellow") for w in section.get("warnings") or []]
    for floor in section.get("floors") or []:
        if not floor["passed"]:
            lines.append((f"ragmetrics controls floor failed: {floor['spec']} ({floor['reason']})", "red"))
    return lines
