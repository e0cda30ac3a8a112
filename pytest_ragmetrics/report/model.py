"""Types of the run report (see :mod:`pytest_ragmetrics.report`) and helpers every renderer shares.

The ``TypedDict`` classes document the shape; renderers accept any ``Mapping`` of that shape and read
optional fields with ``.get`` so that a report from an older or newer plugin still renders.

PYTEST_DONT_REWRITE
"""

# No ``from __future__ import annotations`` here: a ``TypedDict`` turns every annotation given as text
# into a ``typing.ForwardRef``, which compiles it, and these classes have hundreds of fields; the
# classes are written in the order they refer to each other, so their annotations evaluate as they
# are read, at a fraction of that cost (every run that prints the short summary imports this module).

import functools
import json
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, TypedDict

from ..specs import format_number

__all__ = [
    "JUDGE_SOURCES",
    "PRUNE_COMMAND",
    "SCHEMA_VERSION",
    "BaselineComparison",
    "BaselineMetric",
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
    "Outcome",
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
    "baseline_refused",
    "cap_stop",
    "check_version",
    "comparison_label",
    "control_share",
    "controls_failed",
    "corrected_detail",
    "corrected_text",
    "count_text",
    "error_line",
    "error_rows",
    "format_cost",
    "format_count",
    "format_delta",
    "format_margin",
    "format_p",
    "format_score",
    "format_threshold",
    "gate_sees",
    "gate_status",
    "judge_figures",
    "judge_sources",
    "judge_status",
    "metric_label",
    "misled_line",
    "moved_samples",
    "outcome",
    "picked_sentences",
    "recorded_answers",
    "regression_gate_detail",
    "report_notes",
    "row_fails",
    "row_status",
    "sample_changes",
    "schema_problems",
    "score_text",
    "spending_cap",
    "verdict_chunks",
]

#: The ``version`` this package writes and reads.
SCHEMA_VERSION = 1

#: Removes judgment store entries no test used any more; the reports suggest it.
PRUNE_COMMAND = "python -m pytest_ragmetrics cache prune"


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
    ``reason``, when there are too few labelled samples."""

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
    #: ``None``, or why the gate has no value (``"... not measured: 3 samples ..."``).
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
    #: Where each judgment came from (:data:`JUDGE_SOURCES`): judged now, read from the committed
    #: store, read from the local cache, and answers the run already had, asked for again.
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


class Outcome(TypedDict):
    """Pass/fail counts derived from a report (see :func:`outcome`)."""

    passed: bool
    comparisons: int
    comparisons_failed: int
    comparisons_xfailed: int
    gates: int
    gates_failed: int
    errors: int
    tests_passed: int
    tests_failed: int


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


def _walk(value: Any, hint: Any, where: str) -> Iterator[str]:
    if not _matches(value, hint):
        yield f"{where} is {json.dumps(value)[:40]}, expected {_expected(hint)}"
        return
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        # The one alternative it matches decides how its inside is read.
        hint = next(arg for arg in typing.get_args(hint) if _matches(value, arg))
    if typing.is_typeddict(hint):
        fields, required = _fields(hint)
        for name in sorted(required - value.keys()):
            yield f"{where}.{name} is missing"
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
    return list(_walk(report, RunReport, ""))


def check_version(report: Mapping[str, Any]) -> None:
    """Raise ``ValueError`` unless ``report`` is a run report of a version this package renders."""
    version = report.get("version")
    if version != SCHEMA_VERSION:
        raise ValueError(
            f"unsupported ragmetrics report version {version!r}; this pytest-ragmetrics renders "
            f"version {SCHEMA_VERSION}"
        )


def _rows(report: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    return report.get("results") or []


def _summary(report: Mapping[str, Any]) -> Mapping[str, Any]:
    return report.get("summary") or {}


def row_fails(row: Mapping[str, Any]) -> bool:
    """The comparison failed, outside an xfail test: it fails the report."""
    return not row.get("passed") and not row.get("xfail")


def row_status(row: Mapping[str, Any]) -> str:
    """``PASS`` or ``FAIL``; ``XFAIL`` / ``XPASS`` for a comparison made in an xfail test."""
    passed = bool(row.get("passed"))
    if row.get("xfail"):
        return "XPASS" if passed else "XFAIL"
    return "PASS" if passed else "FAIL"


def judge_status(row: Mapping[str, Any]) -> str:
    """The judge column of a comparison: ``judged``, ``cached``, or ``no judge`` (label metrics)."""
    if row.get("judges") in ([], ()) and not row.get("judge_calls"):
        return "no judge"
    return "cached" if row.get("cached") else "judged"


def report_notes(report: Mapping[str, Any]) -> list[str]:
    """Notes on the run as a whole that every renderer shows: no judge used, stale labels."""
    summary = _summary(report)
    labels = summary.get("labels") or {}
    notes = []
    judge = summary.get("judge") or {}
    if _rows(report) and judge and judge.get("model") is None and not judge.get("calls"):
        notes.append("no judge used: every comparison was scored from labels, at no cost")
    if labels.get("stale"):
        notes.append(
            f"labels look stale: in {labels.get('not_found')} of {labels.get('samples')} labelled samples "
            "no retrieved id is labelled at all; if the corpus was re-chunked or re-indexed, the ids "
            "changed: update reference_context_ids (label scores of 0 here say nothing about retrieval)"
        )
    return notes


def outcome(report: Mapping[str, Any]) -> Outcome:
    """How the run went: the report passes when no comparison (outside xfail tests), no gate, no
    judge agreement floor and no negative-controls floor failed, and no spending cap stopped the run.

    Test counts are reported but do not decide: a test can fail for reasons that have nothing to do
    with retrieval quality, and pytest already says so.
    """
    rows = _rows(report)
    # Regression gates (against a baseline) decide like aggregate gates.
    gates = [*(_summary(report).get("gates") or []), *(_summary(report).get("regression_gates") or [])]
    tests = _summary(report).get("tests") or {}
    comparisons_failed = sum(1 for row in rows if row_fails(row))
    gates_failed = sum(1 for gate in gates if not gate.get("passed"))
    errors = sum(1 for error in error_rows(report) if not error.get("xfail"))
    check = _summary(report).get("judge_check")
    return Outcome(
        passed=comparisons_failed == 0
        and gates_failed == 0
        and errors == 0
        and (not check or bool(check.get("passed")))
        and not controls_failed(report)
        and cap_stop(report) is None
        and baseline_refused(report) is None,
        comparisons=len(rows),
        comparisons_failed=comparisons_failed,
        comparisons_xfailed=sum(1 for row in rows if row.get("xfail") and not row.get("passed")),
        gates=len(gates),
        gates_failed=gates_failed,
        errors=errors,
        tests_passed=int(tests.get("passed", 0)),
        tests_failed=int(tests.get("failed", 0)),
    )


def picked_sentences(verdict: Mapping[str, Any]) -> list[str]:
    """The sentences the judge picked from a chunk (sentence and binary relevance), one line each."""
    return [" ".join(str(s).split()) for s in verdict.get("extracted") or () if str(s).strip()]


def error_rows(report: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
    """Tests a ragmetrics error stopped before their comparison."""
    return _summary(report).get("errors") or []


def error_line(error: Mapping[str, Any]) -> str:
    """``tests/test_x.py::test_a: JudgmentNotRecorded: no recorded judgment for ...``."""
    where = str(error.get("nodeid", "?"))
    if error.get("when") not in (None, "call"):
        where += f" ({error['when']})"
    text = f"{where}: {error.get('error', 'error')}"
    if error.get("message"):
        text += f": {' '.join(str(error['message']).split())}"
    return text + (" (xfail)" if error.get("xfail") else "")


def metric_label(metric: str, method: str | None) -> str:
    """``context_recall`` or ``context_relevance[graded]``."""
    return metric if not method else f"{metric}[{method}]"


def comparison_label(row: Mapping[str, Any]) -> str:
    """What a comparison compared: the metric, plus the statistic when it is an aggregate."""
    label = metric_label(str(row.get("metric", "?")), row.get("method"))
    stat = row.get("stat") or "score"
    return label if stat == "score" else f"{label} {stat}"


def format_score(value: float | None, digits: int = 3) -> str:
    """A score with fixed decimals, or ``n/a`` when there is none."""
    if value is None:
        return "n/a"
    return f"{value:.{digits}f}"


def misled_line(entry: Mapping[str, Any]) -> str:
    """``sample q1: answer claim 2 'X' is not in the reference but supported by chunk 3: ...``."""
    from ..metrics.answer import explain_misled

    return f"sample {entry.get('id') or '?'}: {explain_misled(entry)}"


def score_text(entry: Mapping[str, Any], digits: int = 3) -> str:
    """A row's or a sample's score, or its outcome when it has none (``no claims``)."""
    if entry.get("score") is None and entry.get("outcome"):
        return str(entry["outcome"]).replace("_", " ")
    return format_score(entry.get("score"), digits)


def count_text(entry: Mapping[str, Any]) -> str:
    """``n`` of a metric summary or gate, and beside it those without claims: ``4 (+1 no claims)``."""
    text = format_count(entry.get("n", 0))
    unscored = entry.get("no_claims")
    return f"{text} (+{format_count(unscored)} no claims)" if unscored else text


def verdict_chunks(verdict: Mapping[str, Any]) -> str:
    """`` (chunk 2)`` or `` (chunks 1, 3)``: the chunks that support or contradict a claim, or ``""``."""
    chunks = verdict.get("chunks") or []
    if not chunks:
        return ""
    return f" (chunk{'s' if len(chunks) > 1 else ''} {', '.join(str(c) for c in chunks)})"


def format_margin(value: float | None, digits: int = 3) -> str:
    """A signed difference (``+0.010``, ``-0.200``), or ``n/a``."""
    if value is None:
        return "n/a"
    text = f"{value:+.{digits}f}"
    # A margin that rounds to zero is neither ahead nor behind.
    return text.replace("-", "+") if float(text) == 0 else text


def format_p(value: float | None) -> str:
    """A p-value: ``0.0312``, ``<0.0001``, or ``n/a``."""
    if value is None:
        return "n/a"
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


def format_delta(entry: Mapping[str, Any]) -> str:
    """A baseline comparison's delta with its interval: ``-0.120 [-0.180, -0.060]``, or ``n/a``."""
    delta = entry.get("delta")
    if delta is None:
        return "n/a"
    low, high = format_margin(entry.get("ci_low")), format_margin(entry.get("ci_high"))
    return f"{format_margin(delta)} [{low}, {high}]"


def moved_samples(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """``q03 1.000 -> 0.000 (-1.000)`` for each sample of a baseline comparison's most moved."""
    return [
        f"{s.get('id', '?')} {format_score(s.get('baseline'))} -> {format_score(s.get('current'))} "
        f"({format_margin(s.get('delta'))})"
        for s in samples
    ]


def sample_changes(entry: Mapping[str, Any], limit: int = 5) -> str | None:
    """``1 new (q16), 3 removed (q13, q14, q15)``: the samples a comparison could not match, or None."""
    parts = []
    for key, word in (
        ("new", "new"),
        ("not_measured", "not measured in this run"),
        ("removed", "removed from the golden set"),
        ("changed", "changed question, reference or labels"),
        ("ambiguous", "ambiguous id"),
    ):
        ids = entry.get(key) or []
        if ids:
            shown = ", ".join(str(i) for i in ids[:limit]) + (", ..." if len(ids) > limit else "")
            parts.append(f"{len(ids)} {word} ({shown})")
    return ", ".join(parts) or None


def regression_gate_detail(gate: Mapping[str, Any]) -> str:
    """What a regression gate measured: ``drop 0.120, delta -0.120 [-0.180, -0.060], p 0.0001
    one-sided, n=15; worst q03 1.000 -> 0.000 (-1.000); can see: 15 of 15 matched samples changed;
    smallest one-sided p with 15: <0.0001``, or why it has no value."""
    if gate.get("value") is None:
        return str(gate.get("reason") or "no value")
    direction = str(gate.get("stat") or "mean drop").split()[-1]
    parts = [f"{direction} {format_score(gate.get('value'))}", f"delta {format_delta(gate)}"]
    if gate.get("p_value") is not None:
        parts.append(f"p {format_p(gate['p_value'])}" + (" one-sided" if gate.get("test") else ""))
    text = ", ".join([*parts, f"n={format_count(gate.get('n', 0))}"])
    if gate.get("not_measured"):
        text += f", {format_count(gate['not_measured'])} not measured"
    if gate.get("note"):
        text += f" ({gate['note']})"
    worst = moved_samples(gate.get("worst") or [])
    if worst:
        text += "; worst " + ", ".join(worst)
    sees = gate_sees(gate)
    return text + (f"; {sees}" if sees else "")


def format_threshold(op: str | None, threshold: float | None) -> str:
    """``>= 0.8``: the threshold as the user wrote it, without padding zeros."""
    if threshold is None:
        return "n/a"
    return f"{op or '?'} {format_number(threshold)}"


def format_count(value: Any) -> str:
    """An integer with thousands separators; anything else as text."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "n/a" if value is None else str(value)


def format_cost(cost: float | None) -> str | None:
    """``$0.0012`` (four significant decimals for small sums), or ``None`` when the judge is unpriced."""
    if cost is None:
        return None
    if cost == 0:
        return "$0"
    if cost >= 1:
        return f"${cost:,.2f}"
    return f"${cost:.4g}" if cost >= 1e-4 else f"${cost:.2e}"


#: Where the run's judgments came from, in the order every renderer shows them: judged now (requests
#: sent and answered), read from the committed judgment store, read from the local cache, and answers
#: the run already had, asked for again. ``(field of summary.judge, label, singular, plural)``: the
#: label heads a figure in the Markdown and HTML reports, the words count it in the terminal's line.
JUDGE_SOURCES: tuple[tuple[str, str, str, str], ...] = (
    ("calls", "judge calls", "call", "calls"),
    ("store_hits", "store hits", "store hit", "store hits"),
    ("cache_hits", "cache hits", "cache hit", "cache hits"),
    ("reused", "reused in the run", "reused", "reused"),
)


def judge_sources(judge: Mapping[str, Any]) -> list[tuple[str, str, str, Any]]:
    """The four counts of :data:`JUDGE_SOURCES` as ``(label, singular, plural, count)``.

    A report written before the four were kept apart has the calls and only the sum of the others
    (``recorded``): that sum is shown as one figure instead of three made-up ones.
    """
    if "cache_hits" not in judge and "store_hits" not in judge and "recorded" in judge:
        return [
            ("judge calls", "call", "calls", judge.get("calls", 0)),
            ("recorded answers", "recorded answer", "recorded answers", judge.get("recorded") or 0),
        ]
    return [(label, one, many, judge.get(field, 0)) for field, label, one, many in JUDGE_SOURCES]


def recorded_answers(judge: Mapping[str, Any]) -> int:
    """Answers the run had without a call: from the store, the cache, or reused (``recorded``)."""
    if "cache_hits" in judge or "store_hits" in judge:
        return sum(int(judge.get(name) or 0) for name in ("cache_hits", "store_hits", "reused"))
    return int(judge.get("recorded") or 0)


def spending_cap(judge: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The run's judge spending caps and the requests they refused, as ``(label, text)`` pairs; none
    when the run had no cap."""
    if "refused_calls" not in judge:
        return []
    figures = []
    if judge.get("max_judge_calls") is not None:
        figures.append(("call cap", f"{format_count(judge['max_judge_calls'])} calls"))
    if judge.get("max_judge_tokens") is not None:
        figures.append(("token cap", f"{format_count(judge['max_judge_tokens'])} tokens"))
    return [*figures, ("calls refused by the cap", format_count(judge.get("refused_calls") or 0))]


def cap_stop(report: Mapping[str, Any]) -> str | None:
    """``the judge spending cap stopped the run: 2 judge calls refused past the cap of 4 calls``, or
    None when no cap refused a call."""
    judge = _summary(report).get("judge") or {}
    refused = judge.get("refused_calls")
    if not isinstance(refused, int) or isinstance(refused, bool) or refused <= 0:
        return None
    caps = [text for label, text in spending_cap(judge) if label in ("call cap", "token cap")]
    calls = "judge call" if refused == 1 else "judge calls"
    of = f" of {' and '.join(caps)}" if caps else ""
    return (
        f"the judge spending cap stopped the run: {format_count(refused)} {calls} refused past the "
        f"cap{of}; what was judged is kept"
    )


def baseline_refused(report: Mapping[str, Any]) -> str | None:
    """``the baseline base.json was scored differently: judge model: a in the baseline, b now
    (context_recall)``, or None when the comparison was not refused (or there was none)."""
    comparison = _summary(report).get("baseline") or {}
    if not comparison.get("refused"):
        return None
    source = f" {comparison['source']}" if comparison.get("source") else ""
    return f"the baseline{source} was scored differently: {comparison['refused']}"


def gate_status(gate: Mapping[str, Any]) -> str:
    """``PASS``, ``FAIL``, ``SKIP`` (not evaluated in a partial run) or ``INCONCLUSIVE`` (a drop
    beyond the tolerance the test cannot call significant: fails unless allowed)."""
    if gate.get("skipped"):
        return "SKIP"
    if gate.get("inconclusive"):
        return "INCONCLUSIVE"
    return "PASS" if gate.get("passed") else "FAIL"


def gate_sees(gate: Mapping[str, Any]) -> str | None:
    """What a regression gate can see at its size: ``can see: 5 of 12 matched samples changed;
    smallest one-sided p with 5: 0.0312``, or None without matched samples."""
    if not gate.get("n"):
        return None
    changed = int(gate.get("changed_n") or 0)
    text = f"can see: {format_count(changed)} of {format_count(gate.get('n'))} matched samples changed"
    if gate.get("min_p") is not None and changed:
        text += f"; smallest one-sided p with {format_count(changed)}: {format_p(gate['min_p'])}"
    return text


def controls_failed(report: Mapping[str, Any]) -> bool:
    """The negative controls were asked for and did not pass (a floor failed, or they could not be
    judged)."""
    controls = _summary(report).get("judge_controls") or {}
    return bool(controls) and not controls.get("passed")


def control_share(kind: Mapping[str, Any]) -> str:
    """``3 of 12 judged useful (25%)``: how one judgment kind's negative controls came out;
    ``positive controls: 11 of 12 judged useful (92%)`` for its positive ones."""
    share = kind.get("share")
    percent = "-" if not isinstance(share, (int, float)) else f"{share:.0%}"
    text = (
        f"{format_count(kind.get('positive', 0))} of {format_count(kind.get('judged', 0))} judged "
        f"{kind.get('verdict', '?')} ({percent})"
    )
    return f"positive controls: {text}" if kind.get("expected") == "positive" else text


def judge_figures(judge: Mapping[str, Any], *, include_timing: bool = True) -> list[tuple[str, str]]:
    """The judge's figures as ``(label, text)`` pairs, in the order every renderer shows them."""
    prompt = judge.get("prompt_tokens") or 0
    completion = judge.get("completion_tokens") or 0
    figures: list[tuple[str, str]] = [
        *((label, format_count(count)) for label, _, _, count in judge_sources(judge)),
        (
            "tokens",
            f"{format_count(prompt + completion)} ({format_count(prompt)} prompt + "
            f"{format_count(completion)} completion)",
        ),
        ("tokens saved", format_count(judge.get("tokens_saved", 0))),
    ]
    cost = format_cost(judge.get("cost"))
    if cost is not None:
        figures.append(("cost", cost))
    figures += [
        ("retries", format_count(judge.get("retries", 0))),
        ("re-asks", format_count(judge.get("reasks", 0))),
        ("errors", format_count(judge.get("errors", 0))),
        *spending_cap(judge),
    ]
    seconds = judge.get("seconds")
    if include_timing and isinstance(seconds, (int, float)):
        figures.append(("judge time", f"{seconds:.2f}s"))
    described = response_format_text(judge)
    if described:
        figures.append(("response format", described))
    return figures


def response_format_text(judge: Mapping[str, Any]) -> str | None:
    """``json_object (the server turned down json_schema (HTTP 500: ...))``, or None when unknown."""
    fmt = judge.get("response_format")
    if not fmt:
        return None
    reason = judge.get("response_format_reason")
    return f"{fmt} ({reason})" if reason else str(fmt)


def corrected_text(corrected: Mapping[str, Any] | None) -> str:
    """``0.871 [0.802, 0.940]``: a judge-corrected mean with its interval; ``n/a`` without one."""
    if not corrected or corrected.get("mean") is None:
        return "n/a"
    return (
        f"{format_score(corrected['mean'])} [{format_score(corrected.get('low'))}, "
        f"{format_score(corrected.get('high'))}]"
    )


def corrected_detail(corrected: Mapping[str, Any]) -> str:
    """``40 labelled + 160 judged only, weight 0.62, worth 71.3 labels``: what a corrected mean rests
    on, or why there is none."""
    counts = (
        f"{format_count(corrected.get('labelled', 0))} labelled + "
        f"{format_count(corrected.get('unlabelled', 0))} judged only"
    )
    if corrected.get("mean") is None:
        return f"{counts}: {corrected.get('reason') or 'too few labelled samples'}"
    text = f"{counts}, weight {float(corrected.get('weight') or 0):.2f}"
    effective = corrected.get("effective_labels")
    if isinstance(effective, (int, float)):
        text += f", worth {effective:.1f} labels"
    return text
