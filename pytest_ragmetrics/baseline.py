"""Comparing a run with a baseline run: what got worse, by how much, and whether it is real.

A *baseline* is the JSON run report of an accepted run (see :mod:`pytest_ragmetrics.report`): one
format for both, so a report written with ``--rag-report-json``, a merged shard report, or a file
saved with ``--rag-save-baseline`` can each serve as the baseline of a later run.
``--rag-save-baseline`` writes the report in its reproducible form (:func:`baseline_form`): without
the judge's cache and call counters, which differ between a cold and a warm cache, and without the
comparison with an earlier baseline, so that saving the same judgments twice gives the same bytes.

Everything here is pure data in, data out: no pytest, no judge, no files (a report is read from its
file by :func:`pytest_ragmetrics.report.load.load_report`).

Matching. Per metric (``context_relevance`` per method), a run's per-sample scores are read from
every comparison outside xfail tests, as the aggregates are. Samples are matched by id, and a
matched sample's *reference key* (a digest of its question, its reference and its relevance labels
when it has them) is checked: a sample whose question, reference or labels changed is listed as
changed, never compared. A sample of the baseline that this run did not score for a metric is *not
measured* when the run has it all the same (another metric scored it: its test stopped at an earlier
failing check, or does not ask for this metric), or when the run was partial (selected tests);
otherwise it is *removed* from the golden set. Samples only in this run are new. An id that names
two different evaluations in one run (the same id with different contexts, say) is ambiguous and
left out. A sample in both runs whose answer made no claim in one of them (``no_claims``: no score)
was measured, and is listed as such, not paired.

Comparability. Scores are comparable only when they were made the same way: the same judge
model(s), the same prompt versions and the same sentence splitter (each recorded per sample in the
report), and the judge asked alike (its *sampling*, recorded per sample too): the same temperature
(the graded temperature for graded relevance), seed and n, which are part of every judgment's key.
Otherwise the metric is *not comparable*, with the reason, and its regression gates fail. The
plugin version is shown but does not decide: what changes scores is in the prompt
versions and the splitter's identity.

Statistics (:mod:`pytest_ragmetrics.stats`): the delta is the mean over matched samples of current
minus baseline score, with a 95% paired bootstrap interval and the p-value of a paired sign-flip
permutation test, both with a fixed seed, so the same two runs always give the same figures.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeGuard

from .errors import ConfigError
from .metrics.answer import NO_CLAIMS
from .specs import format_metric, format_number, format_sampling
from .stats import DEFAULT_CONFIDENCE, DEFAULT_SEED, bootstrap_ci, format_p, mean, sign_flip_tests

if TYPE_CHECKING:
    from .specs import MetricCatalog

#: A file's digest in ``summary.suite.files``.

__all__ = [
    "REGRESSION_GATE_FORM",
    "REGRESSION_STATS",
    "SIGNIFICANCE",
    "TOP_SAMPLES",
    "RegressionGate",
    "RunScores",
    "baseline_form",
    "compare_reports",
    "evaluate_regression_gates",
    "find_metric",
    "parse_regression_gate",
    "parse_regression_gates",
    "prompt_name",
    "provenance",
    "run_scores",
    "scored_differently",
]

#: p below this makes a change "worse" or "better" rather than "not significant" in the reports.
SIGNIFICANCE = 0.05
#: Samples listed per direction as the ones that moved most.
TOP_SAMPLES = 5
# Score differences this small are not movement: float noise, or a baseline written by a version that
# rounded scores to six decimals.
_NOISE = 1e-6


@dataclass
class MetricScores:
    """One run's per-sample scores of one metric, and what they were made with."""

    #: sample id -> (score, reference key or None)
    samples: dict[str, tuple[float, str | None]] = field(default_factory=dict)
    #: sample id -> the content key of its evaluation, to notice one id naming two evaluations
    evaluations: dict[str, str | None] = field(default_factory=dict)
    ambiguous: set[str] = field(default_factory=set)
    judges: set[str] = field(default_factory=set)
    prompt_versions: set[str] = field(default_factory=set)
    splitters: set[str] = field(default_factory=set)
    #: sample id -> reference key, of the evaluations without a score: the answer made no claim.
    no_claims: dict[str, str | None] = field(default_factory=dict)
    #: How the judge was asked (temperature, seed, n), when a judge made the scores.
    sampling: set[str] = field(default_factory=set)


#: ``(metric, method)`` -> that metric's scores in one run.
RunScores = dict[tuple[str, "str | None"], MetricScores]


def _sample_id(sample: Mapping[str, Any]) -> str | None:
    sid = sample.get("id")
    if sid is not None:
        return str(sid)
    # A sample without an id is known by its question and reference.
    key = sample.get("reference_key")
    return f"(no id) {key}" if key else None


def run_scores(report: Mapping[str, Any]) -> RunScores:
    """Every per-sample score of a run report, by metric and sample id (see the module docstring)."""
    scores: RunScores = {}
    for row in report.get("results") or ():
        if row.get("xfail"):
            continue  # a deliberately broken retriever says nothing about this one
        metric = scores.setdefault((str(row.get("metric")), row.get("method")), MetricScores())
        for sample in row.get("samples") or ():
            sid = _sample_id(sample)
            score = sample.get("score")
            # An answer without claims was measured all the same: it has an outcome in place of a score.
            unscored = score is None and sample.get("outcome") == NO_CLAIMS
            if sid is None or not (unscored or _is_number(score)):
                continue
            metric.judges.update(sample.get("judges") or row.get("judges") or ())
            metric.prompt_versions.update(sample.get("prompt_versions") or ())
            if sample.get("splitter"):
                metric.splitters.add(str(sample["splitter"]))
            if sample.get("sampling"):
                metric.sampling.add(str(sample["sampling"]))
            evaluation = sample.get("key")
            if sid in metric.evaluations:
                if metric.evaluations[sid] != evaluation:
                    metric.ambiguous.add(sid)
                continue
            metric.evaluations[sid] = evaluation
            if unscored:
                metric.no_claims[sid] = sample.get("reference_key")
            else:
                # Full precision: the JSON report writes every float exactly as the run had it.
                metric.samples[sid] = (float(score), sample.get("reference_key"))
    for key, metric in scores.items():
        for sid in metric.ambiguous:
            metric.samples.pop(sid, None)
            metric.no_claims.pop(sid, None)
        if metric.judges and not metric.sampling:  # a report from before samples recorded it
            metric.sampling.update(_sampling(report, key))
    return scores


def _is_number(value: Any) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _sampling(report: Mapping[str, Any], key: tuple[str, str | None]) -> list[str]:
    """How the judge was asked for the judgments of metric ``key`` in a report whose samples do not
    say (``sampling``: written since), from the run's ``summary.scoring``: the settings besides the
    model and the prompt that every judgment's key holds (temperature, seed, n). Graded relevance is
    judged at the graded temperature, every other kind at the temperature. A report without them
    says nothing, and contradicts nothing."""
    summary = report.get("summary")
    scoring = summary.get("scoring") if isinstance(summary, Mapping) else None
    if not isinstance(scoring, Mapping):
        return []
    graded = key == ("context_relevance", "graded")
    temperature = scoring.get("graded_temperature" if graded else "temperature")
    seed, n = scoring.get("seed"), scoring.get("judge_n")
    if not (_is_number(temperature) and _is_number(n)) or not (seed is None or _is_number(seed)):
        return []
    return [format_sampling(temperature, seed if seed is None else int(seed), int(n))]


def _ids_in_run(report: Mapping[str, Any]) -> set[str]:
    """The ids of every sample a run report has a comparison of, scored or not, xfail or not."""
    ids = set()
    for row in report.get("results") or ():
        for sample in row.get("samples") or ():
            sid = _sample_id(sample)
            if sid is not None:
                ids.add(sid)
    return ids


def _listed(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "none"


#: A prompt's version, ``claim-verdicts-contexts-1``: the prompt's name, then its number.
_PROMPT_VERSION = re.compile(r"(.+)-[0-9]+")


def prompt_name(version: str) -> str:
    """The prompt a version is of: ``claim-verdicts-contexts`` for ``claim-verdicts-contexts-1``."""
    match = _PROMPT_VERSION.fullmatch(version)
    return match.group(1) if match else ""  # versions of another form are compared as one prompt


def _changed_prompts(before: Iterable[str], now: Iterable[str]) -> tuple[set[str], set[str]]:
    """The prompt versions of ``before`` and of ``now`` that differ, among the prompts both used.

    A prompt one run never sent cannot contradict the other: a faithfulness whose answers all made
    no claim asked for no verdicts, and a context precision with every ground truth never asked the
    prompt without one. Only a prompt both sent, in another version, makes the scores differ.
    """
    before, now = set(before), set(now)
    shared = {prompt_name(v) for v in before} & {prompt_name(v) for v in now}
    return (
        {v for v in before - now if prompt_name(v) in shared},
        {v for v in now - before if prompt_name(v) in shared},
    )


def _incomparable(baseline: MetricScores, current: MetricScores) -> str | None:
    """Why two runs' scores of one metric were made differently, or None when they were not."""
    reasons = []
    facts = (
        ("judged by", baseline.judges, current.judges),
        ("prompt versions", baseline.prompt_versions, current.prompt_versions),
        ("sentence splitter", baseline.splitters, current.splitters),
        ("judge sampling", baseline.sampling, current.sampling),
    )
    for what, before, now in facts:
        before, now = _contradicting(what, before, now)
        if before or now:
            reasons.append(f"{what} {_listed(before)} in the baseline, {_listed(now)} now")
    return "; ".join(reasons) or None


def _contradicting(what: str, before: set[str], now: set[str]) -> tuple[set[str], set[str]]:
    """What two runs recorded of one fact of how scores were made, where they contradict each
    other: both empty when they do not. A run that never needed the fact (no judge call, nothing
    split) cannot contradict it; prompt versions are compared prompt by prompt."""
    if what == "prompt versions":
        return _changed_prompts(before, now)
    return (before, now) if before and now and before != now else (set(), set())


def _measured(scores: MetricScores) -> dict[str, str | None]:
    """sample id -> reference key of every evaluation of a run's metric, with a score or without
    (no claims)."""
    return {**{sid: key for sid, (_, key) in scores.samples.items()}, **scores.no_claims}


def _moved(sid: str, before: float, now: float) -> dict[str, Any]:
    return {"id": sid, "baseline": before, "current": now, "delta": now - before}


def _verdict(delta: float, p_value: float, moved: bool) -> str:
    if not moved:
        return "unchanged"
    if p_value < SIGNIFICANCE:
        return "worse" if delta < 0 else "better"
    return "not significant"


def compare_metric(
    metric: str,
    method: str | None,
    baseline: MetricScores,
    current: MetricScores,
    *,
    seed: int = DEFAULT_SEED,
    top: int = TOP_SAMPLES,
    in_run: set[str] | None = None,
    partial: bool = False,
    allow_mixed: bool = False,
) -> dict[str, Any]:
    """The comparison of one metric: one entry of ``summary.baseline.metrics`` (see the report docs).

    Scores made differently (another judge model, prompt version, splitter or judge sampling) are not
    comparable, unless ``allow_mixed``: then they are compared all the same (the comparison names the
    difference).

    ``in_run`` holds the ids of every sample the current run has (any metric, scored or not): a
    baseline sample among them, or any when the run is ``partial``, is not measured, not removed.
    """
    was, now_in = _measured(baseline), _measured(current)
    new = sorted(set(now_in) - set(was))
    missing = sorted(set(was) - set(now_in) - current.ambiguous)
    measured_elsewhere = in_run or set()
    not_measured = [sid for sid in missing if partial or sid in measured_elsewhere]
    removed = [sid for sid in missing if not (partial or sid in measured_elsewhere)]
    changed: list[str] = []
    no_claims: list[str] = []
    pairs: list[tuple[str, float, float]] = []
    for sid in sorted(set(was) & set(now_in)):
        before_key, now_key = was[sid], now_in[sid]
        if before_key and now_key and before_key != now_key:
            changed.append(sid)  # same id, another question or reference: not the same test case
        elif sid in baseline.no_claims or sid in current.no_claims:
            no_claims.append(sid)  # measured in both runs, without a score in one: nothing to pair
        else:
            pairs.append((sid, baseline.samples[sid][0], current.samples[sid][0]))
    reason = None if allow_mixed else _incomparable(baseline, current)
    out: dict[str, Any] = {
        "metric": metric,
        "method": method,
        "comparable": reason is None,
        "reason": reason,
        "n": len(pairs),
        "baseline_mean": None,
        "current_mean": None,
        "delta": None,
        "ci_low": None,
        "ci_high": None,
        "confidence": DEFAULT_CONFIDENCE,
        "p_value": None,
        "p_drop": None,
        "p_rise": None,
        "changed_n": 0,
        "min_p": None,
        "test": None,
        "max_drop": None,
        "verdict": "not comparable" if reason else "not measured" if not_measured else "no matched samples",
        "regressed": [],
        "improved": [],
        "pairs": [],
        "new": new,
        "not_measured": not_measured,
        "removed": removed,
        "changed": changed,
        "no_claims": no_claims,
        "ambiguous": sorted(baseline.ambiguous | current.ambiguous),
    }
    if reason is not None or not pairs:
        return out
    # A difference below the noise floor is no change: the tests do not see it.
    differences = [0.0 if abs(now - before) <= _NOISE else now - before for _, before, now in pairs]
    baseline_mean = mean([before for _, before, _ in pairs])
    current_mean = mean([now for _, _, now in pairs])
    interval = bootstrap_ci(differences, seed=seed)
    tests = sign_flip_tests(differences, seed=seed)
    test, drop, rise = tests["two-sided"], tests["less"], tests["greater"]
    delta = mean(differences)
    moved = any(abs(d) > _NOISE for d in differences)
    # Most moved first; ties by id so the lists are the same on every run.
    ordered = sorted(pairs, key=lambda p: (p[2] - p[1], p[0]))
    regressed = [_moved(*p) for p in ordered if p[2] - p[1] < -_NOISE][:top]
    improved = [_moved(*p) for p in sorted(pairs, key=lambda p: (p[1] - p[2], p[0])) if p[2] - p[1] > _NOISE]
    out.update(
        baseline_mean=baseline_mean,
        current_mean=current_mean,
        delta=delta if moved else 0.0,
        ci_low=interval.low if moved else 0.0,
        ci_high=interval.high if moved else 0.0,
        p_value=test.p_value,
        p_drop=drop.p_value,
        p_rise=rise.p_value,
        changed_n=drop.nonzero,
        min_p=drop.min_p,
        test={"method": test.method, "permutations": test.permutations, "seed": seed},
        max_drop=max(0.0, max(before - now for _, before, now in pairs)) if moved else 0.0,
        verdict=_verdict(delta, test.p_value, moved),
        regressed=regressed,
        improved=improved[:top],
        pairs=[_moved(*p) for p in pairs],
    )
    return out


def _method_key(key: tuple[str, str | None]) -> tuple[str, str]:
    return (key[0], key[1] or "")


def provenance(report: Mapping[str, Any]) -> dict[str, Any]:
    """What made a run's scores (:class:`~pytest_ragmetrics.report_schema.Provenance`): the judge
    models, prompt versions and sentence splitters of every sample scored outside xfail tests, and a
    digest of the golden set (every sample's id and reference key). Each sample's own content digest
    is its ``key`` in the results."""
    scores = run_scores(report)
    golden: dict[str, str] = {}
    for metric in scores.values():
        for sid, reference_key in _measured(metric).items():
            golden.setdefault(sid, str(reference_key))
    text = "\n".join(f"{sid}\t{key}" for sid, key in sorted(golden.items()))
    return {
        "judge_models": sorted({j for m in scores.values() for j in m.judges}),
        "prompt_versions": sorted({v for m in scores.values() for v in m.prompt_versions}),
        "splitters": sorted({v for m in scores.values() for v in m.splitters}),
        "golden_set": hashlib.sha256(text.encode("utf-8")).hexdigest()[:16],
        "samples": len(golden),
    }


#: The facts of how a score was made, as :class:`MetricScores` holds them: a baseline that differs in
#: one is refused unless mixed scores are allowed.
_FACTS = (
    ("judge model", "judges"),
    ("prompt versions", "prompt_versions"),
    ("sentence splitter", "splitters"),
    ("judge sampling", "sampling"),
)

#: Settings of ``summary.scoring`` that change how the judge is asked but are no part of a judgment's
#: key: a judgment recorded with one is replayed with another, so a baseline that differs in one is
#: named, not refused. ``report merge`` refuses shards that differ in them: shards of one run agree
#: on every setting.
_UNKEYED_SETTINGS = ("judge_provider", "response_format", "judge_max_tokens")


def _differences(
    before: RunScores, now: RunScores, baseline: Mapping[str, Any], current: Mapping[str, Any]
) -> tuple[list[str], list[str]]:
    """``(every difference in how the two runs' scores were made, those that refuse the comparison)``,
    one line each: ``judge model: model-a in the baseline, model-b now (context_recall)``."""
    grouped: dict[tuple[str, str, str], list[str]] = {}
    for key in sorted(set(before) & set(now), key=_method_key):
        for what, attribute in _FACTS:
            old, new = _contradicting(what, getattr(before[key], attribute), getattr(now[key], attribute))
            if old or new:
                grouped.setdefault((what, _listed(old), _listed(new)), []).append(format_metric(*key))
    refusing = [
        f"{what}: {old} in the baseline, {new} now ({', '.join(labels)})"
        for (what, old, new), labels in grouped.items()
    ]
    lines = list(refusing)
    lines += _unkeyed_differences(baseline, current)
    was, now_ = provenance(baseline), provenance(current)
    if was["golden_set"] != now_["golden_set"]:
        lines.append(
            f"golden set: {was['samples']} samples (digest {was['golden_set']}) in the baseline, "
            f"{now_['samples']} (digest {now_['golden_set']}) now; each metric lists the samples"
        )
    return lines, refusing


def _unkeyed_differences(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """The settings of :data:`_UNKEYED_SETTINGS` the two runs' ``summary.scoring`` record differently,
    one line each; a report that does not record them contradicts none."""
    summaries = [report.get("summary") for report in (baseline, current)]
    was, now = (summary.get("scoring") if isinstance(summary, Mapping) else None for summary in summaries)
    if not (isinstance(was, Mapping) and isinstance(now, Mapping)):
        return []
    lines = []
    for setting in _UNKEYED_SETTINGS:
        old, new = was.get(setting, _UNSET), now.get(setting, _UNSET)
        if old is not _UNSET and new is not _UNSET and old != new:
            lines.append(
                f"setting {setting}: {json.dumps(old)} in the baseline, {json.dumps(new)} now (the judge "
                "was asked otherwise; no part of a judgment's key, so judgments recorded with either "
                "are replayed alike and only those judged anew may differ)"
            )
    return lines


_UNSET = object()


def scored_differently(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """How ``current``'s scores were made differently from ``baseline``'s in the ways that refuse a
    comparison of the two (judge model, prompt versions, sentence splitter, judge sampling), one line
    each as :func:`compare_reports` names them; ``[]`` when the two may be compared."""
    return _differences(run_scores(baseline), run_scores(current), baseline, current)[1]


def compare_reports(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    source: str | None = None,
    seed: int = DEFAULT_SEED,
    top: int = TOP_SAMPLES,
    partial: bool = False,
    allow_mixed: bool = False,
) -> dict[str, Any]:
    """Compare ``current`` with ``baseline`` (two run reports): ``summary.baseline`` of the report
    (:class:`~pytest_ragmetrics.report_schema.BaselineComparison`).

    ``{"source": where the baseline came from, "plugin_version": {"baseline", "current"},
    "differences": every way the two runs' scores were made differently, "refused": why the
    comparison is refused or None, "metrics": [one entry per metric scored in either run, see
    :func:`compare_metric`]}``. Scores made with another judge model, prompt version, sentence
    splitter or judge sampling are refused (their metrics not comparable) unless ``allow_mixed``, as
    ``report merge`` refuses such shards. ``partial``: the current run ran selected tests, so a sample
    it lacks is not measured, not removed.
    """
    before, now = run_scores(baseline), run_scores(current)
    in_run = _ids_in_run(current)
    differences, refusing = _differences(before, now, baseline, current)
    metrics = [
        {
            "label": format_metric(*key),
            **compare_metric(
                key[0],
                key[1],
                before.get(key, MetricScores()),
                now.get(key, MetricScores()),
                seed=seed,
                top=top,
                in_run=in_run,
                partial=partial,
                allow_mixed=allow_mixed,
            ),
        }
        for key in sorted(set(before) | set(now), key=_method_key)
    ]
    return {
        "source": source,
        "plugin_version": {
            "baseline": baseline.get("plugin_version"),
            "current": current.get("plugin_version"),
        },
        "differences": differences,
        "refused": "; ".join(refusing) if refusing and not allow_mixed else None,
        "metrics": metrics,
    }


def find_metric(comparison: Mapping[str, Any], metric: str, method: str | None) -> Mapping[str, Any] | None:
    """The comparison entry of one metric, or None when neither run scored it."""
    for entry in comparison.get("metrics") or ():
        if entry.get("metric") == metric and entry.get("method") == method:
            return entry  # type: ignore[no-any-return]
    return None


# What a baseline leaves out of a report: what differs between two runs of the same judgments (whether
# a judgment was cached, the judge's counters), what only explains a score (verdicts with the chunk
# texts and reasons, explanations, the line of the assertion), which would make a committed baseline
# a hundred times larger than the scores it keeps.
_RUN_ONLY_ROW = frozenset({"cached", "judge_calls", "explanation", "where"})
_RUN_ONLY_SAMPLE = frozenset({"cached", "verdicts", "explanation"})


def baseline_form(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` as a baseline file holds it: the same report format, with the scores and what they
    were made with, without what differs between two runs of the same judgments, without the
    verdicts and explanations behind each score, without the comparisons of xfail tests, and
    without the comparison with an earlier baseline."""
    out = dict(report)
    out["results"] = [
        {
            **{k: v for k, v in row.items() if k not in _RUN_ONLY_ROW},
            "samples": [
                {k: v for k, v in s.items() if k not in _RUN_ONLY_SAMPLE} for s in row.get("samples") or ()
            ],
        }
        for row in out.get("results") or ()
        if not row.get("xfail")  # never compared: a deliberately broken retriever is not a baseline
    ]
    summary = dict(out.get("summary") or {})
    summary.pop("baseline", None)
    summary.pop("regression_gates", None)
    summary.pop("suite", None)  # which tests ran: nothing a later run is compared on
    judge = summary.get("judge")
    if isinstance(judge, Mapping):
        summary["judge"] = {"model": judge.get("model")}
    out["summary"] = summary
    return out


# --- regression gates ------------------------------------------------------------------------------

#: The statistics a regression gate may bound: a fall of the scores (a metric where higher is
#: better, as every built-in one is) or a rise (a metric of your own where lower is better).
REGRESSION_STATS = ("mean drop", "any drop", "mean rise", "any rise")
#: The expected form, quoted in every parse error.
REGRESSION_GATE_FORM = (
    "expected '<metric>[<method>] mean drop <= <x> [at p < <alpha>]' or '<metric>[<method>] any drop "
    "<= <x>' ('rise' for a metric where lower is better), e.g. 'context_precision mean drop <= 0.02 at "
    "p < 0.05' or 'context_recall any drop <= 0.3'"
)


@dataclass(frozen=True)
class RegressionGate:
    """One parsed regression gate: how far ``metric[method]`` may fall below the baseline (or rise
    above it).

    ``stat`` is ``mean drop`` (baseline mean minus current mean over matched samples) or ``any drop``
    (the largest fall of one matched sample); ``mean rise`` and ``any rise`` are their mirror images,
    for a metric where lower is better. With ``significance`` (``("<", 0.05)``), a mean change beyond
    the threshold fails only when the one-sided paired test's p (in the gate's direction) satisfies it
    as well.
    """

    metric: str
    method: str | None
    stat: str
    op: str
    threshold: float
    significance: tuple[str, float] | None
    spec: str

    @property
    def label(self) -> str:
        return format_metric(self.metric, self.method)

    @property
    def direction(self) -> str:
        """``drop`` or ``rise``: the change the gate bounds."""
        return self.stat.split()[1]


def parse_regression_gate(line: str, catalog: MetricCatalog | None = None) -> RegressionGate:
    """Parse one regression gate such as ``context_precision mean drop <= 0.02 at p < 0.05``.

    ``catalog`` holds the metrics a gate may name (default: the built-in ones). Raises
    :class:`ConfigError` quoting the line and the expected form when it is malformed.
    """
    from .specs import BUILTIN_CATALOG, parse_gate_line

    parsed = parse_gate_line(line, what="regression gate", form=REGRESSION_GATE_FORM)
    try:
        subject = (catalog or BUILTIN_CATALOG).check(parsed.subject, require_method=True)
    except ConfigError as exc:
        raise parsed.error(str(exc)) from None
    stat = parsed.stat.lower()
    if stat not in REGRESSION_STATS:
        raise parsed.error(
            f"unknown statistic {parsed.stat!r}: use 'mean drop' or 'any drop' ('mean rise' or 'any rise' "
            "for a metric where lower is better)"
        )
    direction = stat.split()[1]
    if parsed.op not in ("<=", "<"):
        raise parsed.error(f"a {direction} is bounded from above: use <= or <, not {parsed.op}")
    if parsed.threshold < 0:
        raise parsed.error(f"the {direction} tolerance {format_number(parsed.threshold)} is negative")
    significance: tuple[str, float] | None = None
    if parsed.condition is not None:
        name, op, value = parsed.condition
        if not stat.startswith("mean "):
            raise parsed.error(
                f"'at p ...' applies to 'mean {direction}' only: one sample's {direction} has no test"
            )
        if name != "p" or op not in ("<", "<="):
            raise parsed.error(
                f"the condition must bound the p-value, e.g. 'at p < 0.05', not 'at {name} {op}'"
            )
        if not 0.0 < value <= 1.0:
            raise parsed.error(f"the significance level {format_number(value)} must be in (0, 1]")
        significance = (op, value)
    return RegressionGate(
        metric=subject.metric,
        method=subject.method,
        stat=stat,
        op=parsed.op,
        threshold=parsed.threshold,
        significance=significance,
        spec=parsed.spec,
    )


def parse_regression_gates(
    text_or_lines: str | Iterable[str], catalog: MetricCatalog | None = None
) -> list[RegressionGate]:
    """Parse regression gates, one per line (``;`` separates them in a single string)."""
    from .specs import gate_lines

    return [parse_regression_gate(line, catalog) for line in gate_lines(text_or_lines)]


def evaluate_regression_gates(
    gates: Iterable[RegressionGate],
    comparison: Mapping[str, Any] | None,
    *,
    partial: bool = False,
    allow_inconclusive: bool = False,
) -> list[dict[str, Any]]:
    """Evaluate regression gates against a comparison (:func:`compare_reports`): the
    ``summary.regression_gates`` rows (:class:`~pytest_ragmetrics.report_schema.RegressionGateRow`).

    ``value`` is the drop (a ``rise`` gate: the rise) over full-precision scores, ``p_value`` the
    one-sided p of the paired sign-flip test that the scores fell (rose), and every row says what the
    gate can see at its size:
    ``changed_n`` matched samples whose score changed, and ``min_p``, the smallest one-sided p the
    test can reach with them. A mean change beyond the threshold fails when its p satisfies the gate's
    significance; when it does not, the drop is *inconclusive*: it fails too, unless
    ``allow_inconclusive`` (``--rag-allow-inconclusive``) accepts it. A gate over a metric that is not
    comparable fails with the reason; one with no matched samples fails, unless ``partial`` (a run of
    selected tests), where it is skipped, as aggregate gates are.
    """
    from .gates import compare, gate_fields, not_measured_reason

    rows: list[dict[str, Any]] = []
    for gate in gates:
        entry = find_metric(comparison or {}, gate.metric, gate.method) or {}
        significance = (
            f"p {gate.significance[0]} {format_number(gate.significance[1])}" if gate.significance else None
        )
        tested = gate.stat.startswith("mean ")
        rise = gate.direction == "rise"
        row: dict[str, Any] = {
            **gate_fields(gate),
            "significance": significance,
            "value": None,
            "n": entry.get("n", 0),
            "not_measured": len(entry.get("not_measured") or ()),
            **({"no_claims": len(entry["no_claims"])} if entry.get("no_claims") else {}),
            "delta": entry.get("delta"),
            "ci_low": entry.get("ci_low"),
            "ci_high": entry.get("ci_high"),
            "p_value": entry.get("p_rise" if rise else "p_drop") if tested else None,
            "changed_n": entry.get("changed_n", 0),
            "min_p": entry.get("min_p") if tested else None,
            "test": f"sign-flip, one-sided ({gate.direction})" if tested else None,
            "passed": False,
            "inconclusive": False,
            "margin": None,
            "reason": None,
            "note": None,
            "worst": [],
        }
        rows.append(row)
        if entry and not entry.get("comparable", True):
            row["reason"] = f"{gate.label} is not comparable with the baseline: {entry.get('reason')}"
            continue
        if not entry or not entry.get("n") or entry.get("delta") is None:
            row["reason"] = f"no samples of {gate.label} matched the baseline"
            if row["not_measured"]:
                row["reason"] = not_measured_reason(gate.label, row["not_measured"], baseline=True)
            elif row.get("no_claims"):
                row["reason"] += f": {row['no_claims']} with no claims in one run, not compared"
            if partial:
                row.update(passed=True, skipped=True, reason=f"not evaluated: {row['reason']} (partial run)")
            continue
        pairs = entry.get("pairs") or []
        sign = -1.0 if rise else 1.0  # a drop is baseline minus current; a rise, current minus baseline
        if tested:
            value = -sign * float(entry["delta"])
            worst = list(entry.get("improved" if rise else "regressed") or [])[:3]
        else:
            value = max([0.0, *(sign * (p["baseline"] - p["current"]) for p in pairs)])
            worst = sorted(
                (
                    p
                    for p in pairs
                    if not compare(sign * (p["baseline"] - p["current"]), gate.op, gate.threshold)
                ),
                key=lambda p: (sign * (p["current"] - p["baseline"]), p["id"]),
            )[:3]
        value = round(value, 12) + 0.0  # float noise off, -0.0 to 0.0, as aggregate gates do
        within = compare(value, gate.op, gate.threshold)
        passed = within
        if not within and gate.significance is not None:
            p_value, min_p = row["p_value"], row["min_p"]
            if p_value is None or not compare(p_value, *gate.significance):
                # Beyond the tolerance, not shown to be real: never a pass on the test's word alone.
                passed = allow_inconclusive
                row["inconclusive"] = True
                if min_p is not None and not compare(min_p, *gate.significance):
                    changed = row["changed_n"]
                    why = (
                        f"with {changed} changed sample{'' if changed == 1 else 's'} the one-sided test "
                        f"cannot go below p {format_p(min_p)}, so it can never show {significance}"
                    )
                else:
                    why = f"p = {format_p(p_value)} does not reach {significance}"
                accepted = (
                    f"; accepted: inconclusive {gate.direction}s are allowed" if allow_inconclusive else ""
                )
                row["note"] = f"inconclusive: a {gate.direction} beyond the tolerance, but {why}{accepted}"
        row.update(
            value=value,
            passed=passed,
            margin=round(value - gate.threshold, 12) + 0.0,
            worst=worst if not within else [],
        )
    return rows
