"""Controls: judge pairings whose answer is known, and see how often the judge gets them wrong.

A control is a pairing put before the judge with the verdict it should get. Both kinds are drawn from
the samples the run scored (:mod:`.pool`), from a golden file or built in a test body, and need no
labels:

* A **negative control** pairs the question of one of the run's samples with a chunk retrieved for a
  different sample: it should come out negative. A judge that calls most of them useful is not
  discriminating.
* A **positive control** offers a sample its own reference answer (``ground_truth``) as the chunk: it
  should come out positive (useful, relevant, needed). A judge that says "no" to many of them says
  "no" too often, whatever the run's scores look like.

A negative control pairs the question of one of the run's samples with a chunk retrieved for a different
sample. Such a chunk may happen to help (two questions about the same thing), but across many pairs a
judge that calls most of them useful or relevant is not discriminating, whatever it says of the run's
own chunks. No labels are needed. Controls are judged with exactly the requests the metrics send (same
prompts, parameters, cache and judgment store), for the judgment kinds the run used:

* ``context_precision``: the share of controls judged *useful* for the question's reference;
* ``context_relevance_graded``: the share rated *relevant* (1 or 2);
* ``context_relevance_sentences``: the share with at least one sentence judged *needed*;
* ``claim_verdicts`` (faithfulness): the question sample's answer checked against all the contexts of
  the other sample (when none of them is related to it): the share with any claim judged *supported*.

Pairs are drawn with a seeded generator from the samples sorted by a stable key, so a run draws the
same pairs whatever order its tests ran in. A pair whose question and chunk come from samples sharing
an id, a reference or the question's text, or whose chunk (by text or context id) was retrieved for
or is a reference context of the question's own sample, is never used.

What a control cannot tell: a low share of negative controls judged positive does not make a judge
right about the run's own chunks (it may reject everything: the positive controls catch that); a high
share can also mean the golden set asks near-duplicate questions. Controls are tripwires for a judge
that says yes, or no, to everything, not a measure of agreement (see the judge check).

Each floor states its error rates at the number of controls judged (:func:`floor_rates`): the chance
it fails a good judge (false alarm) and passes a bad one (miss), binomial, with a good judge taken to
get :data:`GOOD_RATE` of the controls right and a bad one :data:`BAD_RATE`. With too few controls to
keep a coin toss from passing it more often than :data:`MAX_ERROR_RATE` (see
:func:`~pytest_ragmetrics.calibration.check.too_few`), the floor is not decided and the run says so.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import judgments as J, kinds as K
from .._aio import gather_or_cancel
from ..errors import JudgeError, RagMetricsError
from ..fields import invisible
from ..sample import RagSample
from ..text import normalize_text
from .check import (
    BAD_RATE,
    CONTROLS,
    GOOD_RATE,
    MAX_ERROR_RATE,
    POSITIVE_CONTROLS,
    Floor,
    rates_text,
    too_few,
)

if TYPE_CHECKING:
    from ..engine import Evaluator
    from ..metrics.builtin import ScoringContext

__all__ = [
    "BAD_RATE",
    "GOOD_RATE",
    "MAX_ERROR_RATE",
    "WARN_SHARE",
    "ControlPair",
    "ControlShare",
    "check_control_floors",
    "control_lines",
    "control_pairs",
    "floor_rates",
    "judge_controls",
    "merge_controls",
    "positive_controls",
    "run_controls",
]

#: Above this share of negative controls judged positive (below it, of positive controls) the run
#: warns that the judge may not discriminate.
WARN_SHARE = 0.5

#: How many draws per wanted pair before giving up (a small or homogeneous golden set has few pairs).
_DRAWS_PER_PAIR = 50


@dataclass(frozen=True)
class ControlPair:
    """A control: a question (with its sample's reference and answer) and a chunk, and the verdict
    expected.

    ``positive`` is False for a negative control: a chunk retrieved for another sample, with all that
    sample's contexts when none of them is related to the question's sample (an answer is checked
    against them); it should not be judged useful, relevant or needed. It is True for a positive
    control: the sample's own reference offered as the chunk; it should be.
    """

    question: str
    reference: str | None
    reference_kind: str
    chunk: str
    question_sample: str
    chunk_sample: str
    answer: str | None = None
    contexts: tuple[str, ...] = ()
    positive: bool = False

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
            "positive": self.positive,
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
            bool(data.get("positive", False)),
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
                answer if answer and not invisible(answer) else None,
                tuple(pool[j].contexts) if unrelated else (),
            )
        )
    return chosen


def positive_controls(samples: Iterable[RagSample], count: int, seed: int = 0) -> list[ControlPair]:
    """``count`` positive controls (fewer when there are not enough samples): a seeded choice of
    samples with a ``ground_truth``, each offered its own reference as the chunk."""
    unique: dict[str, RagSample] = {}
    for sample in samples:
        if sample.ground_truth and not invisible(sample.ground_truth):
            unique.setdefault(
                f"{normalize_text(sample.question)}\0{normalize_text(sample.ground_truth)}", sample
            )
    pool = [unique[key] for key in sorted(unique)]
    if count < 1 or not pool:
        return []
    chosen = random.Random(seed).sample(pool, min(count, len(pool)))
    return [
        ControlPair(
            s.question,
            s.ground_truth,
            "ground_truth",
            s.ground_truth or "",
            _name(s),
            _name(s),
            positive=True,
        )
        for s in chosen
    ]


@dataclass
class ControlShare:
    """How one judgment kind's controls came out."""

    kind: str
    judged: int = 0
    positive: int = 0
    errors: list[str] = field(default_factory=list)
    examples: list[dict[str, Any]] = field(default_factory=list)
    #: ``negative`` controls (should not be judged positive) or ``positive`` ones (should be).
    expected: str = "negative"
    #: Each control judged, by an id of the judgments that decided it, and whether it was judged
    #: positive: two shards of one run that scored the same samples draw and judge the same
    #: controls, and ``report merge`` counts each once.
    decided: dict[str, bool] = field(default_factory=dict)

    def add(self, control: str, positive: bool) -> bool:
        """Count ``control`` once (False when it was counted already)."""
        if control in self.decided:
            return False
        self.decided[control] = positive
        self.judged += 1
        self.positive += positive
        return True

    @property
    def share(self) -> float | None:
        """The share judged positive (useful, relevant, needed)."""
        return self.positive / self.judged if self.judged else None

    @property
    def wrong(self) -> int:
        """Controls the judge got wrong: negative ones judged positive, positive ones judged not."""
        return self.positive if self.expected == "negative" else self.judged - self.positive

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expected": self.expected,
            "verdict": _verdict(self.kind),
            "judged": self.judged,
            "positive": self.positive,
            "share": self.share,
            "errors": len(self.errors),
            "error_reasons": self.errors[:5],
            "examples": self.examples[:5],
            "decided": [{"id": control, "positive": positive} for control, positive in self.decided.items()],
        }


def _control_id(keys: Sequence[str]) -> str:
    """The id of a control: a digest of the keys of the judgments that decided it."""
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


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
        label = (
            f"positive control {number} ({pair.question_sample!r}, its own reference)"
            if pair.positive
            else f"negative control {number} ({pair.question_sample!r}, a chunk of {pair.chunk_sample!r})"
        )
        try:
            return kind, pair, await _judge_pair(pair, K.KINDS[kind], ctx, label)
        except JudgeError as exc:
            return kind, pair, exc

    def takes_positives(kind: str) -> bool:
        control = K.KINDS[kind].control
        return control is not None and control.positives

    outcomes = await gather_or_cancel(
        *(
            one(pair, kind, n)
            for kind in wanted
            for n, pair in enumerate(pairs, start=1)
            if takes_positives(kind) or not pair.positive
        )
    )
    expected = ["negative", "positive"]
    present = [e for e in expected if any(p.positive == (e == "positive") for p in pairs)] or ["negative"]
    shares = {
        (kind, e): ControlShare(kind, expected=e)
        for kind in wanted
        for e in present
        if e == "negative" or takes_positives(kind)
    }
    for kind, pair, outcome in outcomes:
        share = shares[kind, "positive" if pair.positive else "negative"]
        if isinstance(outcome, JudgeError):
            share.errors.append(str(outcome))
        elif outcome is not None:
            positive, keys = outcome
            if not share.add(_control_id(keys), positive):
                continue  # the same judgments as a control before (one answer, one set of contexts)
            if positive != pair.positive:  # the judge got it wrong: an example to look at
                share.examples.append(
                    {
                        "question": pair.question_sample,
                        "chunk_of": pair.chunk_sample,
                        "chunk": pair.chunk[:200],
                    }
                )
    return list(shares.values())


def floor_rates(
    stat: str, op: str, threshold: float, judged: int, compare: Callable[[float, str, float], bool]
) -> tuple[float, float]:
    """``(false alarm, miss)`` of a controls floor over ``judged`` controls: the chance it fails a good
    judge and passes a bad one (:data:`GOOD_RATE`, :data:`BAD_RATE`; see the module docstring)."""
    from ..stats import floor_error_rates

    # A good judge calls 5% of negative controls positive and 95% of positive ones; a bad one 50%.
    good = 1 - GOOD_RATE if stat == CONTROLS else GOOD_RATE
    return floor_error_rates(judged, lambda k: compare(k / judged, op, threshold), good, BAD_RATE)


def check_control_floors(
    floors: Sequence[Floor], shares: Sequence[ControlShare], compare: Callable[[float, str, float], bool]
) -> list[dict[str, Any]]:
    """One row per controls floor (``context_precision controls <= 0.2``, ``context_precision
    positive_controls >= 0.8``): value, passed, why, and its error rates at the controls judged.

    A floor with too few controls to tell a good judge from a coin toss (none drawn, say; see
    :func:`~pytest_ragmetrics.calibration.check.too_few`) is not decided: it passes, ``skipped``,
    and its reason says why.
    """
    by_kind = {(s.kind, s.expected): s for s in shares}
    rows = []
    for floor in floors:
        expected = "positive" if floor.stat == POSITIVE_CONTROLS else "negative"
        share = by_kind.get((floor.kind, expected))
        value = share.share if share is not None else None
        row: dict[str, Any] = {"spec": floor.spec, "kind": floor.kind, "expected": expected, "value": value}
        if floor.kind not in K.KINDS or K.KINDS[floor.kind].control is None:
            rows.append({**row, "passed": False, "reason": f"there are no controls for {floor.kind}"})
            continue
        if share is None or (share.judged == 0 and not share.errors):
            reason = (
                f"not decided: no {expected} {floor.kind} control was drawn (the run scored too few "
                "samples with "
                + ("a ground_truth" if expected == "positive" else "contexts, two unrelated ones")
                + ", or made no such judgment)"
            )
            rows.append({**row, "passed": True, "skipped": True, "judged": 0, "reason": reason})
            continue
        if share.judged == 0:
            reason = f"no {expected} {floor.kind} control was judged: the judge failed on each"
            rows.append({**row, "passed": False, "judged": 0, "reason": reason})
            continue
        assert value is not None  # judged controls give a share
        false_alarm, miss = floor_rates(floor.stat, floor.op, floor.threshold, share.judged, compare)
        row.update(judged=share.judged, false_alarm=false_alarm, miss=miss)
        rates = rates_text(false_alarm, miss, share.judged, "controls")
        if too_few(miss, compare(BAD_RATE, floor.op, floor.threshold)):
            reason = (
                f"not decided: too few controls ({share.judged}) to tell a good judge from a bad one "
                f"({rates}); score more samples or ask for more controls"
            )
            rows.append({**row, "passed": True, "skipped": True, "reason": reason})
            continue
        passed = compare(value, floor.op, floor.threshold)
        verdict = _verdict(floor.kind)
        said = verdict if expected == "negative" else f"not {verdict}"
        reason = (
            rates if passed else f"{share.wrong} of {share.judged} {expected} controls judged {said}; {rates}"
        )
        rows.append({**row, "passed": passed, "reason": reason})
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
    try:
        with evaluator.noting_nothing():
            shares = evaluator.runner.run(judge_controls(pairs, kinds, evaluator))
    except RagMetricsError as exc:
        return {**section, "kinds": [], "floors": [], "warnings": [], "passed": False, "error": str(exc)}
    rows = check_control_floors(floors, shares, compare)
    warnings = _share_warnings(shares)
    if wanted is not None:
        shortfalls = []
        for expected, what in (
            (False, "negative controls pair two unrelated samples the run scored, with contexts"),
            (True, "positive controls need samples the run scored with a ground_truth"),
        ):
            drawn = sum(1 for p in pairs if p.positive == expected)
            if drawn < wanted:
                name = "positive" if expected else "negative"
                shortfalls.append(
                    f"only {drawn} of the {wanted} {name} controls asked for could be drawn: {what}"
                )
        warnings = shortfalls + warnings
    warnings += [f"controls floor {r['spec']}: {r['reason']}" for r in rows if r.get("skipped")]
    return {
        **section,
        "kinds": [s.to_json() for s in shares],
        "floors": rows,
        "warnings": warnings,
        "passed": all(r["passed"] for r in rows),
        "error": None,
    }


def _share_warnings(shares: Iterable[ControlShare]) -> list[str]:
    """A warning per kind whose negative controls were mostly judged positive, or positive ones not."""
    shares = list(shares)
    warnings = [
        f"{s.positive} of {s.judged} negative controls ({s.share:.0%}) were judged {_verdict(s.kind)} "
        f"for {s.kind}: above {WARN_SHARE:.0%}, the judge may not be discriminating"
        for s in shares
        if s.expected == "negative" and s.share is not None and s.share > WARN_SHARE
    ]
    return warnings + [
        f"{s.wrong} of {s.judged} positive controls ({1 - s.share:.0%}) were judged not {_verdict(s.kind)} "
        f"for {s.kind} (each a sample's own reference offered as the chunk): above {WARN_SHARE:.0%}, the "
        "judge says no too often"
        for s in shares
        if s.expected == "positive" and s.share is not None and 1 - s.share > WARN_SHARE
    ]


def merge_controls(sections: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The controls sections of the shards of one run (``report merge``) as one: each shard drew its
    controls from the samples it scored, so the run's controls are all of them, and its floors are
    decided over them as a run decides them. A shard whose controls could not be judged is the run's
    outcome."""
    from ..gates import compare
    from .check import parse_floor

    failed = next((s for s in sections if s.get("error")), None)
    if failed is not None:
        return dict(failed)
    shares: dict[tuple[str, str], ControlShare] = {}
    errors: dict[tuple[str, str], int] = {}
    specs: dict[str, None] = {}
    for section in sections:
        for kind in section.get("kinds") or ():
            key = (str(kind["kind"]), str(kind.get("expected") or "negative"))
            share = shares.setdefault(key, ControlShare(key[0], expected=key[1]))
            decided = kind.get("decided")
            if decided is None:  # a report that does not say which: each of its controls its own
                share.judged += int(kind.get("judged") or 0)
                share.positive += int(kind.get("positive") or 0)
            else:  # a control another shard judged too (it scored the same samples) counts once
                for control in decided:
                    share.add(str(control["id"]), bool(control["positive"]))
            share.errors += [str(reason) for reason in kind.get("error_reasons") or ()]
            share.examples += [e for e in kind.get("examples") or () if e not in share.examples]
            errors[key] = errors.get(key, 0) + int(kind.get("errors") or 0)
        specs.update(dict.fromkeys(str(floor["spec"]) for floor in section.get("floors") or ()))
    rows = check_control_floors([parse_floor(spec) for spec in specs], list(shares.values()), compare)
    warnings = _share_warnings(shares.values())
    warnings += [f"controls floor {r['spec']}: {r['reason']}" for r in rows if r.get("skipped")]
    return {
        "pairs": sum(int(section.get("pairs") or 0) for section in sections),
        "model": sections[0].get("model"),
        "kinds": [{**share.to_json(), "errors": errors[key]} for key, share in shares.items()],
        "floors": rows,
        "warnings": warnings,
        "passed": all(r["passed"] for r in rows),
        "error": None,
    }


def control_lines(section: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's closing lines on its negative controls, each with its colour."""
    if section.get("error"):
        return [(f"ragmetrics controls could not be judged: {section['error']}", "red")]
    lines = []
    for k in section.get("kinds") or []:
        share = "-" if k.get("share") is None else f"{k['share']:.0%}"
        errors = f", {k['errors']} not judged" if k.get("errors") else ""
        lines.append(
            (
                f"ragmetrics {k.get('expected', 'negative')} controls: {k['kind']}: {k['positive']} of "
                f"{k['judged']} judged {k['verdict']} ({share}){errors}",
                "bold",
            )
        )
    lines += [(f"ragmetrics warning: {w}", "yellow") for w in section.get("warnings") or []]
    for floor in section.get("floors") or []:
        if not floor["passed"]:
            lines.append((f"ragmetrics controls floor failed: {floor['spec']} ({floor['reason']})", "red"))
    return lines
