"""The run report's schema, written once: its ``TypedDict`` classes, its version, and the check of a
report read from a file (a baseline, a shard given to ``report merge``).

The report is plain data (dicts, lists, str, int, float, bool, None); the format is described in
:mod:`pytest_ragmetrics.report`. The classes here document the shape, each field with its meaning:
the writer (:mod:`pytest_ragmetrics.report.build`) follows them, :func:`schema_problems` walks them,
and the docs point at them. The reports and the baseline comparison both read reports of this shape,
so it sits below both of them.

PYTEST_DONT_REWRITE
"""

# No ``from __future__ import annotations`` here: a ``TypedDict`` turns every annotation given as text
# into a ``typing.ForwardRef``, which compiles it, and these classes have hundreds of fields; the
# classes are written in the order they refer to each other, so their annotations evaluate as they
# are read, at a fraction of that cost.

import functools
import json
import types
import typing
from collections.abc import Iterator, Mapping
from typing import Any, TypedDict

__all__ = [
    "SCHEMA_VERSION",
    "BaselineComparison",
    "BaselineMetric",
    "ControlDecided",
    "ControlFloor",
    "ControlKind",
    "CorrectedMean",
    "Counts",
    "ErrorRow",
    "GateRow",
    "JudgeCheck",
    "JudgeCheckFloor",
    "JudgeControls",
    "JudgeSummary",
    "JudgeWarning",
    "LabelSummary",
    "MetricSummary",
    "MisledClaim",
    "MovedSample",
    "PermutationTestInfo",
    "Provenance",
    "RegressionGateRow",
    "RestingOn",
    "ResultRow",
    "RunReport",
    "SampleResult",
    "SuiteRecord",
    "Summary",
    "Verdict",
    "check_version",
    "problems_by_field",
    "schema_problems",
]

#: The ``version`` this package writes and reads.
SCHEMA_VERSION = 1


class Verdict(TypedDict, total=False):
    """One judged item of a sample: a reference sentence, a retrieved chunk or a context sentence."""

    #: ``"reference sentence"``, ``"chunk"`` or ``"sentence"``.
    item: str
    index: int
    rank: int | None
    text: str
    #: The verdict in words, e.g. ``"not supported"``, ``"useful"``, ``"2/2"``.
    verdict: str
    #: The verdict as a number in [0, 1].
    value: float
    reason: str | None
    #: Claims: the ranks of the retrieved chunks that support or contradict the claim.
    chunks: list[int]
    #: The sentences the judge picked from a chunk (sentence and binary relevance); the
    #: sentence a claim comes from.
    extracted: list[str]
    #: Per judge model, when several graded relevance.
    models: dict[str, float]


class _SampleResultRequired(TypedDict):
    #: ``None`` only with an ``outcome``: there was nothing to score.
    score: float | None


class SampleResult(_SampleResultRequired, total=False):
    """One sample's score within a comparison (:meth:`~pytest_ragmetrics.results.MetricResult.to_json`;
    a run that shows no verdicts keeps only ``id``, ``score``, ``key`` and ``labels_found``)."""

    id: str | None
    #: ``"no_claims"`` when a claim-based metric's answer made no claim: ``score`` is then None.
    outcome: str
    explanation: str | None
    #: e.g. ``"without reference"``.
    mode: str | None
    #: Every judgment behind the score came from the cache or the judgment store.
    cached: bool
    verdicts: list[Verdict]
    #: ``{model: score}`` when several judge models graded relevance.
    models: dict[str, float] | None
    #: The judge models the score rests on.
    judges: list[str]
    #: A digest of the sample's question, contexts and references: one evaluation.
    key: str | None
    #: A digest of its question, reference and relevance labels: the same golden question, however
    #: it was retrieved. A baseline comparison matches samples by id and checks this.
    reference_key: str | None
    #: The prompt versions of the judgments behind the score.
    prompt_versions: list[str]
    #: The sentence splitter's identity, when the metric split text.
    splitter: str | None
    #: How the judge was asked (``temperature 0, seed 0, n 1``), when a judge made the score.
    sampling: str | None
    #: Label metrics only: whether any retrieved id is labelled at all.
    labels_found: bool
    #: With a labelled set: the score the labels give the sample by the same formula, when every
    #: judgment behind it is labelled (the judge-corrected means' labelled samples).
    labelled: float


class _ResultRowRequired(TypedDict):
    metric: str
    #: pytest node id of the test that made the comparison.
    nodeid: str
    #: ``"graded"``, ``"sentence"`` or ``"binary"`` for context relevance, else ``None``.
    method: str | None
    samples: list[SampleResult]


class ResultRow(_ResultRowRequired, total=False):
    """One recorded comparison (one threshold assertion): ``score op threshold`` and its outcome."""

    #: ``"score"`` (one sample's score) or an aggregate in the canonical spelling of
    #: :func:`pytest_ragmetrics.gates.normalize_stat`: ``"mean"``, ``"quantile(0.1)"``...
    stat: str
    score: float | None
    #: One sample's comparison: ``"no_claims"`` when it had no score to compare (it failed).
    outcome: str
    #: A comparison over several samples: how many had no claims (not in the statistic).
    no_claims: int
    #: ``">="``, ``">"``, ``"<="`` or ``"<"``.
    op: str
    threshold: float
    passed: bool
    #: Every judgment behind the comparison came from the cache or the judgment store.
    cached: bool
    judge_calls: int
    #: The judge models the scores rest on; empty: no judge was involved (label metrics).
    judges: list[str]
    #: One line a person can act on.
    explanation: str | None
    #: Made in an xfail test: shown as XFAIL/XPASS, left out of aggregates and gates.
    xfail: bool
    #: ``[file, line]`` of the assertion.
    where: list[str | int] | None


class CorrectedMean(TypedDict, total=False):
    """The judge-corrected mean of a metric with labelled samples (PPI++, see
    :func:`pytest_ragmetrics.stats.corrected_mean`); ``mean``, ``low`` and ``high`` are None, with a
    ``reason``, when there are too few labelled samples or they draw an interval of no width."""

    mean: float | None
    low: float | None
    high: float | None
    confidence: float
    #: Samples with a labelled score (n) and the other samples the judge scored (N).
    labelled: int
    unlabelled: int
    #: The mean of the labelled scores, and the judge's mean over the same samples.
    labels_mean: float
    judge_mean_labelled: float
    #: How much the estimate leans on the judge (0: the labels' own mean, 1: plain PPI).
    weight: float
    #: How many labels alone would give an interval this narrow (None when the labels do not vary).
    effective_labels: float | None
    reason: str


class MetricSummary(TypedDict, total=False):
    """Aggregate of every per-sample score of one metric (and method); the figures ``None`` at n 0."""

    metric: str
    method: str | None
    n: int
    mean: float | None
    min: float | None
    max: float | None
    #: With a labelled set matching some of the samples: the judge-corrected mean.
    corrected: CorrectedMean
    #: Evaluations without a score because the answer made no claim (not in n; only when some).
    no_claims: int


class GateRow(TypedDict, total=False):
    """One evaluated gate, as produced by :func:`pytest_ragmetrics.gates.evaluate_gates`."""

    #: As the user wrote it.
    spec: str
    metric: str
    method: str | None
    #: Canonical spelling.
    stat: str
    op: str
    threshold: float
    #: The statistic over full-precision scores; ``None`` without scores.
    value: float | None
    n: int
    passed: bool
    #: ``value - threshold``, ``None`` without a value.
    margin: float | None
    #: ``None``, or why the gate has no value
    #: (``"... not measured: none of the run's 3 samples has a score ..."``).
    reason: str | None
    #: The run's samples this metric did not score (their tests stopped at an earlier failing
    #: check, or do not ask for it).
    not_measured: int
    #: Not evaluated: a partial run (selected tests, ``--allow-partial``) never scored the metric.
    skipped: bool
    #: ``corrected_mean`` gates: the corrected mean the gate read, and which bound of its interval
    #: decided (``"lower"`` for ``>=`` and ``>``, ``"upper"`` for ``<=`` and ``<``).
    corrected: CorrectedMean
    bound: str
    #: Evaluations without a score because the answer made no claim (not in n; only when some).
    no_claims: int


class JudgeSummary(TypedDict, total=False):
    """What judging the run took."""

    #: ``None`` when every comparison was scored without a judge.
    model: str | None
    cache_mode: str | None
    cache_dir: str | None
    store_dir: str | None
    #: Where each judgment came from (:data:`pytest_ragmetrics.report.display.JUDGE_SOURCES`): judged
    #: now, read from the committed store, read from the local cache, and answers the run already
    #: had, asked for again.
    calls: int
    store_hits: int
    cache_hits: int
    reused: int
    #: Answers the run had without a call: ``store_hits + cache_hits + reused``.
    recorded: int
    prompt_tokens: int
    completion_tokens: int
    tokens_saved: int
    retries: int
    reasks: int
    errors: int
    #: Wall time; the JSON file leaves it out unless timing is asked for.
    seconds: float
    #: ``None`` when the model has no configured price.
    cost: float | None
    #: The response format judge requests were sent with (``auto`` finds it out), when any was sent.
    response_format: str | None
    #: Why that format and not a stricter one: the server's rejections, or None.
    response_format_reason: str | None
    #: With a spending cap only: the caps (None: no such cap) and the requests they refused (more
    #: than 0 fails the run).
    max_judge_calls: int | None
    max_judge_tokens: int | None
    refused_calls: int
    #: Answers the judgment store could not record although recording was asked for (a full disk,
    #: a read-only store), and why; present only when some were not: the run failed.
    unrecorded: int
    unrecorded_reason: str
    #: Why these figures leave out some of the run's judging (an xdist worker that crashed never
    #: reported its calls, tokens and cost); present only when they do.
    partial: str


class LabelSummary(TypedDict, total=False):
    """How label metrics' labels met what was retrieved (present only when such samples were scored)."""

    #: Distinct samples that retrieved something.
    samples: int
    #: Those where no retrieved id is labelled at all.
    not_found: int
    #: Most of at least three samples: the labels look stale.
    stale: bool


class ErrorRow(TypedDict, total=False):
    """A test that a ragmetrics error stopped before its comparison (e.g. a judgment not recorded)."""

    nodeid: str
    #: ``setup``, ``call`` or ``teardown``.
    when: str
    #: The exception's class name.
    error: str
    #: Its first line.
    message: str
    xfail: bool


class Counts(TypedDict, total=False):
    """``{"passed": int, "failed": int}``."""

    passed: int
    failed: int


class SuiteRecord(TypedDict, total=False):
    """The tests the run collected before any deselection and those it ran, a count and a digest each
    (the digest of a union of disjoint sets is the sum of theirs modulo 2**256): ``report merge``
    reads them to find a missing shard."""

    collected: int
    collected_digest: str
    ran: int
    ran_digest: str
    #: The SHA-256 of the content of each file the suite was collected from (its test files and the
    #: samples files its markers name), by path relative to the rootdir: ``report merge`` refuses
    #: shards cut from different versions of a file.
    files: dict[str, str]


class JudgeWarning(TypedDict, total=False):
    """A judgment kind whose answers are nearly all alike."""

    kind: str
    answer: str
    count: int
    total: int
    share: float
    message: str


class RestingOn(TypedDict, total=False):
    """What rests on a judgment kind whose floor failed."""

    gates: list[str]
    comparisons: int
    tests: list[str]


class JudgeCheckFloor(TypedDict, total=False):
    """One judge agreement floor (``context_precision kappa >= 0.6``) and how it came out."""

    spec: str
    kind: str
    stat: str
    model: str | None
    value: float | None
    passed: bool
    reason: str | None
    #: The labelled units the value is over, and the floor's error rates at that number: the chance
    #: it fails a good judge (``false_alarm``) and passes a bad one (``miss``), as a controls floor's.
    judged: int
    false_alarm: float
    miss: float
    #: Too few labelled units to decide: the floor passes and its reason says so.
    skipped: bool
    #: Failed floors only.
    resting_on: RestingOn


class JudgeCheck(TypedDict, total=False):
    """The judge check (``--rag-judge-check``): agreement with a labelled set per judgment kind."""

    #: The labelled set.
    source: str
    model: str
    #: Per judgment kind: agreement figures, confusion matrix, disagreements (see
    #: :mod:`pytest_ragmetrics.calibration.check`).
    kinds: list[dict[str, Any]]
    floors: list[JudgeCheckFloor]
    passed: bool
    #: Why the check could not be judged at all, or None.
    error: str | None
    #: One line on the items the judge gave no usable answer for, or None.
    item_errors: str | None


class _ControlFloorRequired(TypedDict):
    spec: str


class ControlFloor(_ControlFloorRequired, total=False):
    """One controls floor (``context_precision controls <= 0.2``, ``context_precision
    positive_controls >= 0.8``) and how it came out."""

    kind: str
    #: ``negative`` or ``positive`` controls.
    expected: str
    #: The share of those controls judged useful / relevant / needed.
    value: float | None
    passed: bool
    reason: str | None
    #: The controls judged, and the floor's error rates at that number: the chance it fails a good
    #: judge (``false_alarm``) and passes a bad one (``miss``).
    judged: int
    false_alarm: float
    miss: float
    #: Too few controls to decide: the floor passes and its reason says so.
    skipped: bool


class _ControlKindRequired(TypedDict):
    kind: str
    judged: int
    #: Of the ``judged``: those judged useful / relevant / needed.
    positive: int


class ControlDecided(TypedDict):
    """One control judged: an id of the judgments that decided it (a digest of their keys, the same
    in every shard that judged it) and whether the judge found it positive."""

    id: str
    positive: bool


class ControlKind(_ControlKindRequired, total=False):
    """How one judgment kind's controls came out (the ``report merge`` of shards adds them up)."""

    #: ``negative`` or ``positive`` controls.
    expected: str
    #: The verdict counted as positive: ``useful``, ``relevant``, ``needed``...
    verdict: str
    #: ``positive / judged``; None when none was judged.
    share: float | None
    #: Controls the judge gave no usable answer for, and the first reasons.
    errors: int
    error_reasons: list[str]
    examples: list[dict[str, Any]]
    #: Each of the ``judged`` controls: ``report merge`` counts a control two shards judged (they
    #: scored the same samples) once.
    decided: list[ControlDecided]


class JudgeControls(TypedDict, total=False):
    """The negative controls (``--rag-judge-controls``), from
    :func:`pytest_ragmetrics.calibration.controls.run_controls`. A failed floor or an error fails the
    run."""

    pairs: int
    model: str
    #: Per judgment kind and expected verdict.
    kinds: list[ControlKind]
    floors: list[ControlFloor]
    warnings: list[str]
    passed: bool
    error: str | None


class MovedSample(TypedDict, total=False):
    """One matched sample of a baseline comparison."""

    id: str
    baseline: float
    current: float
    #: ``current - baseline``.
    delta: float


class PermutationTestInfo(TypedDict, total=False):
    """How the paired sign-flip permutation test was computed."""

    #: ``"exact"`` or ``"monte carlo"``.
    method: str
    permutations: int
    seed: int


class BaselineMetric(TypedDict, total=False):
    """The comparison of one metric (and method) with the baseline
    (:func:`pytest_ragmetrics.baseline.compare_metric`). The numbers are ``None`` when the metric is
    not comparable or nothing matched."""

    metric: str
    method: str | None
    label: str
    comparable: bool
    #: Why not comparable (another judge model, prompt version, sentence splitter).
    reason: str | None
    #: Matched samples.
    n: int
    baseline_mean: float | None
    current_mean: float | None
    #: ``current_mean - baseline_mean``.
    delta: float | None
    #: The ``confidence`` interval of the delta (paired bootstrap).
    ci_low: float | None
    ci_high: float | None
    confidence: float
    #: Two-sided p of the paired sign-flip permutation test.
    p_value: float | None
    #: One-sided p that the scores fell (``p_drop``) or rose (``p_rise``).
    p_drop: float | None
    p_rise: float | None
    #: Matched samples whose score changed (the test sees only these), and the smallest one-sided
    #: p the test can reach with them.
    changed_n: int
    min_p: float | None
    test: PermutationTestInfo | None
    #: The largest fall of one matched sample.
    max_drop: float | None
    #: ``worse``, ``better``, ``not significant``, ``unchanged``, ``not comparable``, ``not
    #: measured``, ``no matched samples``.
    verdict: str
    #: The samples that moved most each way, and every matched one.
    regressed: list[MovedSample]
    improved: list[MovedSample]
    pairs: list[MovedSample]
    #: Only in this run.
    new: list[str]
    #: In the baseline and in this run, but not scored for this metric (the test stopped at an
    #: earlier failing check, or does not ask for it; in a partial run, every baseline sample it lacks).
    not_measured: list[str]
    #: In the baseline, not in this run at all.
    removed: list[str]
    #: Question, reference or labels changed.
    changed: list[str]
    #: In the baseline and in this run, the answer without claims in one or both: no score to pair.
    no_claims: list[str]
    #: One id naming two evaluations in a run.
    ambiguous: list[str]


class Provenance(TypedDict, total=False):
    """What made a run's scores: a baseline records it, and a comparison names every difference."""

    #: The judge models the scores rest on.
    judge_models: list[str]
    #: The prompt versions of the judgments behind them.
    prompt_versions: list[str]
    #: The sentence splitters' identities.
    splitters: list[str]
    #: A digest of the golden set: every sample's id and reference key.
    golden_set: str
    #: The samples it covers (each sample's own content digest is its ``key`` in ``results``).
    samples: int


class BaselineComparison(TypedDict, total=False):
    """The comparison with a baseline report (:func:`pytest_ragmetrics.baseline.compare_reports`)."""

    #: The baseline's path.
    source: str | None
    #: ``{"baseline": ..., "current": ...}``: shown, not decisive.
    plugin_version: dict[str, str | None]
    #: Every way the two runs' scores were made differently (judge model, prompt versions, sentence
    #: splitter, judge sampling, golden set: see :class:`Provenance`), one line each.
    differences: list[str]
    #: Why the comparison was refused (another judge model, prompt version, splitter or judge
    #: sampling, unless mixed scores are allowed), or None. A refused comparison fails the run.
    refused: str | None
    metrics: list[BaselineMetric]


class RegressionGateRow(TypedDict, total=False):
    """One evaluated regression gate (:func:`pytest_ragmetrics.baseline.evaluate_regression_gates`)."""

    spec: str
    metric: str
    method: str | None
    #: ``mean drop``, ``any drop``, ``mean rise`` or ``any rise``.
    stat: str
    op: str
    threshold: float
    #: ``"p < 0.05"`` or ``None``.
    significance: str | None
    #: The drop (a rise gate: the rise), over full-precision scores; ``None`` without one.
    value: float | None
    #: The matched samples it was evaluated over.
    n: int
    #: The baseline's samples this run did not measure.
    not_measured: int
    #: Matched by id, but not compared: the answer made no claim in one run or both (only when some).
    no_claims: int
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    #: One-sided p of the paired sign-flip test that the scores fell (a rise gate: rose).
    p_value: float | None
    #: What the gate can see at its size: the matched samples whose score changed, and the smallest
    #: one-sided p the test can reach with them.
    changed_n: int
    min_p: float | None
    #: ``"sign-flip, one-sided (drop)"`` (or ``(rise)``): the test behind ``p_value``.
    test: str | None
    passed: bool
    #: The drop is beyond the tolerance, and the test cannot call it significant at this size.
    inconclusive: bool
    margin: float | None
    #: Why it failed without a value.
    reason: str | None
    #: Why a drop beyond the threshold passed, or what made it inconclusive.
    note: str | None
    #: The samples that fell (a rise gate: rose) most.
    worst: list[MovedSample]
    skipped: bool


class MisledClaim(TypedDict, total=False):
    """An answer claim a retrieved chunk supports but the reference does not (see
    :func:`pytest_ragmetrics.metrics.answer.misled_claims`): retrieval misled the answer."""

    id: str | None
    key: str
    index: int
    claim: str
    chunks: list[int]
    reason: str | None
    reference_verdict: str
    reference_reason: str | None


class Summary(TypedDict, total=False):
    """Run-wide figures."""

    #: Per ``(metric, method)``, over every per-sample score of the run.
    metrics: list[MetricSummary]
    gates: list[GateRow]
    judge: JudgeSummary
    labels: LabelSummary
    #: Judgment store entries no test used and no skipped test may need (what ``cache prune``
    #: deletes); ``None`` after a run that did not cover the whole suite.
    unused_store_entries: int | None
    errors: list[ErrorRow]
    #: pytest's test outcomes.
    tests: Counts
    #: Over ``results``; renderers derive their counts from ``results`` themselves.
    comparisons: Counts
    #: The run's settings that change scores (see :data:`pytest_ragmetrics.report.build.
    #: SCORING_SETTINGS`): ``report merge`` refuses shards that differ in them.
    scoring: dict[str, Any]
    suite: SuiteRecord
    #: What made the scores: judge models, prompt versions, splitters, golden set digest.
    provenance: Provenance
    #: Per judgment kind, how many of the run's distinct judgments' verdicts gave each answer
    #: (``{"context_precision": {"no": 3, "yes": 22}}``): what ``judge_warnings`` are decided on.
    judge_answers: dict[str, dict[str, int]]
    judge_warnings: list[JudgeWarning]
    judge_check: JudgeCheck
    judge_controls: JudgeControls
    baseline: BaselineComparison
    regression_gates: list[RegressionGateRow]
    #: Samples scored on faithfulness and answer correctness: the answer claims retrieval misled.
    misled: list[MisledClaim]


class _RunReportRequired(TypedDict):
    version: int
    results: list[ResultRow]


class RunReport(_RunReportRequired, total=False):
    """The whole report: ``{"version": 1, "results": [...], "summary": {...}}``."""

    #: The pytest-ragmetrics version that wrote the report.
    plugin_version: str
    summary: Summary


_JSON_TYPE_NAMES: dict[Any, str] = {
    str: "a string",
    float: "a number",
    int: "a whole number",
    bool: "true or false",
    list: "a list",
    dict: "an object",
    type(None): "null",
}


@functools.cache
def _fields(typed_dict: type) -> tuple[dict[str, Any], frozenset[str]]:
    """A ``TypedDict``'s field types and its required keys."""
    return typing.get_type_hints(typed_dict), typed_dict.__required_keys__  # type: ignore[attr-defined]


def _expected(hint: Any) -> str:
    """``a string or null``: what a value of type ``hint`` looks like in JSON."""
    if hint is Any:
        return "anything"
    if typing.is_typeddict(hint):
        return "an object"
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(dict.fromkeys(_expected(arg) for arg in typing.get_args(hint)))
    return _JSON_TYPE_NAMES.get(origin or hint, getattr(hint, "__name__", str(hint)))


def _matches(value: Any, hint: Any) -> bool:
    """Whether ``value`` has the JSON type of ``hint``, its items aside."""
    if hint is Any:
        return True
    if typing.is_typeddict(hint):
        return isinstance(value, dict)
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(hint))
    kind = origin or hint
    if kind is float:  # JSON numbers: int or float, never bool
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is type(None):
        return value is None
    return isinstance(value, kind)


def _walk(value: Any, hint: Any, where: str) -> Iterator[tuple[str, str]]:
    """``(field, what is wrong with it)`` for every field of ``value`` not of the type ``hint``."""
    if not _matches(value, hint):
        yield where, f"is {json.dumps(value)[:40]}, expected {_expected(hint)}"
        return
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        # The one alternative it matches decides how its inside is read.
        hint = next(arg for arg in typing.get_args(hint) if _matches(value, arg))
    if typing.is_typeddict(hint):
        fields, required = _fields(hint)
        for name in sorted(required - value.keys()):
            yield f"{where}.{name}", "is missing"
        for name, item in value.items():
            if name in fields:  # a field of a newer version is not this one's to judge
                yield from _walk(item, fields[name], f"{where}.{name}" if where else name)
    elif typing.get_origin(hint) is list:
        (item_hint,) = typing.get_args(hint)
        for index, item in enumerate(value):
            yield from _walk(item, item_hint, f"{where}[{index}]")
    elif typing.get_origin(hint) is dict:
        _, item_hint = typing.get_args(hint)
        for key, item in value.items():
            yield from _walk(item, item_hint, f"{where}.{key}")


def schema_problems(report: Any) -> list[str]:
    """Every field of ``report`` whose value is not of the type :class:`RunReport` declares for it,
    each with its path: ``results[3].samples[0].score is "0.5", expected a number or null``.

    The ``TypedDict`` classes above are the schema: the writer follows them, this walks them, and the
    docs point at them. Fields they do not declare (written by a newer version) are left alone.
    """
    if not isinstance(report, dict):
        return [f"the report is {json.dumps(report)[:40]}, expected an object"]
    return [f"{where} {what}" for where, what in problems_by_field(report).items()]


def problems_by_field(report: dict[str, Any]) -> dict[str, str]:
    """:func:`schema_problems` by field: ``{"results[3].samples[0].score": 'is "0.5", expected a
    number or null'}``, for a reader that names some fields' problems in its own words."""
    return dict(_walk(report, RunReport, ""))


def check_version(report: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless ``report`` is a run report of a version this package renders."""
    version = report.get("version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"unsupported ragmetrics report version {version!r}; this pytest-ragmetrics renders "
            f"version {SCHEMA_VERSION}"
        )
