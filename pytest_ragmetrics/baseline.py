"""Comparing a run with a baseline run: what got worse, by how much, and whether it is real.

A *baseline* is the JSON run report of an accepted run (see :mod:`pytest_ragmetrics.report`): one
format for both, so a report written with ``--rag-report-json``, a merged shard report, or a file
saved with ``--rag-save-baseline`` can each serve as the baseline of a later run.
``--rag-save-baseline`` writes the report in its reproducible form (:func:`baseline_form`): without
the judge's cache and call counters, which differ between a cold and a warm cache, and without the
comparison with an earlier baseline, so that saving the same judgments twice gives the same bytes.

Everything here is pure data in, data out: no pytest, no judge, no files (except :func:`load_report`).

Matching. Per metric (``context_relevance`` per method), a run's per-sample scores are read from
every comparison outside xfail tests, as the aggregates are. Samples are matched by id, and a
matched sample's *reference key* (a digest of its question and reference) is checked: a sample whose
question or reference changed is listed as changed, never compared. Samples only in the baseline are
removed, samples only in this run are new. An id that names two different evaluations in one run
(the same id with different contexts, say) is ambiguous and left out.

Comparability. Scores are comparable only when they were made the same way: the same judge
model(s), the same prompt versions and the same sentence splitter (each recorded per sample in the
report). Otherwise the metric is *not comparable*, with the reason, and its regression gates fail.
The plugin version is shown but does not decide: what changes scores is in the prompt versions and
the splitter's identity.

Statistics (:mod:`pytest_ragmetrics.stats`): the delta is the mean over matched samples of current
minus baseline score, with a 95% paired bootstrap interval and the p-value of a paired sign-flip
permutation test, both with a fixed seed, so the same two runs always give the same figures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import ConfigError
from .report.model import check_version, metric_label
from .stats import DEFAULT_CONFIDENCE, DEFAULT_SEED, bootstrap_ci, sign_flip_p_value

__all__ = [
    "SIGNIFICANCE",
    "TOP_SAMPLES",
    "RunScores",
    "baseline_form",
    "compare_reports",
    "load_report",
    "run_scores",
]

#: p below this makes a change "worse" or "better" rather than "not significant" in the reports.
SIGNIFICANCE = 0.05
#: Samples listed per direction as the ones that moved most.
TOP_SAMPLES = 5
# Score differences smaller than this are float noise, not movement.
_NOISE = 1e-9


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
            if sid is None or not isinstance(score, (int, float)) or isinstance(score, bool):
                continue
            metric.judges.update(sample.get("judges") or row.get("judges") or ())
            metric.prompt_versions.update(sample.get("prompt_versions") or ())
            if sample.get("splitter"):
                metric.splitters.add(str(sample["splitter"]))
            evaluation = sample.get("key")
            if sid in metric.evaluations:
                if metric.evaluations[sid] != evaluation or metric.samples[sid][0] != score:
                    metric.ambiguous.add(sid)
                continue
            metric.evaluations[sid] = evaluation
            metric.samples[sid] = (float(score), sample.get("reference_key"))
    for metric in scores.values():
        for sid in metric.ambiguous:
            metric.samples.pop(sid, None)
    return scores


def _listed(values: Iterable[str]) -> str:
    return ", ".join(sorted(values)) or "none"


def _incomparable(baseline: MetricScores, current: MetricScores) -> str | None:
    """Why two runs' scores of one metric were made differently, or None when they were not."""
    reasons = []
    facts = (
        ("judged by", baseline.judges, current.judges),
        ("prompt versions", baseline.prompt_versions, current.prompt_versions),
        ("sentence splitter", baseline.splitters, current.splitters),
    )
    for what, before, now in facts:
        # A run that never needed the fact (no judge call, nothing split) cannot contradict it.
        if before and now and before != now:
            reasons.append(f"{what} {_listed(before)} in the baseline, {_listed(now)} now")
    return "; ".join(reasons) or None


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
) -> dict[str, Any]:
    """The comparison of one metric: one entry of ``summary.baseline.metrics`` (see the report docs)."""
    new = sorted(set(current.samples) - set(baseline.samples))
    removed = sorted(set(baseline.samples) - set(current.samples))
    changed: list[str] = []
    pairs: list[tuple[str, float, float]] = []
    for sid in sorted(set(baseline.samples) & set(current.samples)):
        (before, before_key), (now, now_key) = baseline.samples[sid], current.samples[sid]
        if before_key and now_key and before_key != now_key:
            changed.append(sid)  # same id, another question or reference: not the same test case
        else:
            pairs.append((sid, before, now))
    reason = _incomparable(baseline, current)
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
        "test": None,
        "max_drop": None,
        "verdict": "not comparable" if reason else "no matched samples",
        "regressed": [],
        "improved": [],
        "new": new,
        "removed": removed,
        "changed": changed,
        "ambiguous": sorted(baseline.ambiguous | current.ambiguous),
    }
    if reason is not None or not pairs:
        return out
    differences = [now - before for _, before, now in pairs]
    baseline_mean = math.fsum(before for _, before, _ in pairs) / len(pairs)
    current_mean = math.fsum(now for _, _, now in pairs) / len(pairs)
    interval = bootstrap_ci(differences, seed=seed)
    test = sign_flip_p_value(differences, seed=seed)
    delta = math.fsum(differences) / len(differences)
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
        test={"method": test.method, "permutations": test.permutations, "seed": seed},
        max_drop=max(0.0, max(before - now for _, before, now in pairs)) if moved else 0.0,
        verdict=_verdict(delta, test.p_value, moved),
        regressed=regressed,
        improved=improved[:top],
    )
    return out


def _method_key(key: tuple[str, str | None]) -> tuple[str, str]:
    return (key[0], key[1] or "")


def compare_reports(
    baseline: Mapping[str, Any],
    current: Mapping[str, Any],
    *,
    source: str | None = None,
    seed: int = DEFAULT_SEED,
    top: int = TOP_SAMPLES,
) -> dict[str, Any]:
    """Compare ``current`` with ``baseline`` (two run reports): ``summary.baseline`` of the report.

    ``{"source": where the baseline came from, "plugin_version": {"baseline", "current"},
    "metrics": [one entry per metric scored in either run, see :func:`compare_metric`]}``.
    """
    before, now = run_scores(baseline), run_scores(current)
    metrics = [
        {
            "label": metric_label(*key),
            **compare_metric(
                key[0],
                key[1],
                before.get(key, MetricScores()),
                now.get(key, MetricScores()),
                seed=seed,
                top=top,
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
        "metrics": metrics,
    }


def find_metric(comparison: Mapping[str, Any], metric: str, method: str | None) -> Mapping[str, Any] | None:
    """The comparison entry of one metric, or None when neither run scored it."""
    for entry in comparison.get("metrics") or ():
        if entry.get("metric") == metric and entry.get("method") == method:
            return entry  # type: ignore[no-any-return]
    return None


def baseline_form(report: Mapping[str, Any]) -> dict[str, Any]:
    """``report`` as a baseline file holds it: the same report, minus what differs between two runs of
    the same judgments (the judge's counters and timing) and the comparison with an earlier baseline."""
    out = dict(report)
    summary = dict(out.get("summary") or {})
    summary.pop("baseline", None)
    summary.pop("regression_gates", None)
    judge = summary.get("judge")
    if isinstance(judge, Mapping):
        summary["judge"] = {"model": judge.get("model")}
    out["summary"] = summary
    return out


def load_report(path: str | Path, what: str = "baseline") -> dict[str, Any]:
    """Read a JSON run report (a baseline, or a shard's report); :class:`ConfigError` naming the file
    and the problem when it is missing, not JSON, or not a run report this package reads."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{what} file {str(path)!r} is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} file {str(path)!r} is not a ragmetrics JSON report (not an object)")
    try:
        check_version(data)
    except ValueError as exc:
        raise ConfigError(f"{what} file {str(path)!r}: {exc}") from None
    results = data.get("results")
    if not isinstance(results, list) or not all(isinstance(r, dict) for r in results):
        raise ConfigError(f"{what} file {str(path)!r} has no 'results' list: not a ragmetrics JSON report")
    return data


def sample_lines(samples: Sequence[Mapping[str, Any]]) -> list[str]:
    """``q03 1.000 -> 0.000 (-1.000)`` per moved sample, for messages and reports."""
    return [
        f"{s['id']} {s['baseline']:.3f} -> {s['current']:.3f} ({s['current'] - s['baseline']:+.3f})"
        for s in samples
    ]
