"""Assembling the run report (its format is described in :mod:`pytest_ragmetrics.report`).

Pure functions of what a run recorded: the comparison rows its tests made, the judge figures and
the gate outcomes. The plugin calls them at the end of the session; merging the shards of a run
(:mod:`.merge`) calls them on rows read back from JSON reports.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._files import replaceable, starts_json_object
from ..errors import ConfigError
from .json_report import sort_results

if TYPE_CHECKING:
    from ..baseline import RegressionGate
    from ..gates import Gate
    from ..judge.stats import JudgeStats
    from ..settings import Settings

__all__ = [
    "REPORT_VERSION",
    "attach_baseline",
    "build_report",
    "check_replaced",
    "comparison_counts",
    "corrected_means",
    "evaluate_run_gates",
    "label_summary",
    "labelled_ids",
    "metric_summaries",
    "misled_answers",
    "no_claims_counts",
    "per_sample_scores",
    "run_samples",
    "write_reports",
]

REPORT_VERSION = 1


#: Every distinct evaluation of a run's rows, as ``((metric, method), sample)`` (see
#: :func:`_distinct_samples`): the summaries that read it all read one list, made once.
_Distinct = list[tuple[tuple[str, "str | None"], Mapping[str, Any]]]


def result_json(row: Mapping[str, Any]) -> dict[str, Any]:
    """A comparison as the report holds it: a run keeps its judges, samples and place as tuples
    (see :meth:`pytest_ragmetrics.assertions.ScoreCheck.record`), the report as lists."""
    result = dict(row)
    for name in ("judges", "samples", "where"):
        value = result.get(name)
        if type(value) is tuple:
            result[name] = list(value)
    return result


def _distinct_samples(rows: Iterable[Mapping[str, Any]]) -> _Distinct:
    """Every distinct evaluation, as ``((metric, method), sample)``; xfail comparisons left out.

    A sample scored in several comparisons counts once, from the first of them in the report's order
    (:func:`~.json_report.sort_results`), not the order they were made in: tests scoring one sample
    differently (with another judge model, say) then count the same one in the run, under
    pytest-xdist whichever worker finishes first, and in ``report merge`` of its report.
    """
    # Per metric and method, its (metric, method) and the keys of its samples seen: a large run's
    # thousands of rows make no key of their own.
    specs: dict[str, dict[str | None, tuple[tuple[str, str | None], set[str]]]] = {}
    distinct: _Distinct = []
    for row in sort_results(rows):
        if row.get("xfail"):
            continue
        metric, method = row["metric"], row["method"]
        methods = specs.get(metric)
        if methods is None:
            methods = specs[metric] = {}
        known = methods.get(method)
        if known is None:
            known = methods[method] = ((metric, method), set())
        spec, seen = known
        for i, sample in enumerate(row["samples"]):
            key = sample.get("key") or f"{row['nodeid']}#{i}"
            if key not in seen:
                seen.add(key)
                distinct.append((spec, sample))
    return distinct


def per_sample_scores(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str | None], list[float]]:
    """Every distinct evaluation's score per (metric, method), for aggregates and gates.

    A sample scored in several comparisons (a per-sample test and a dataset test, or the mean and the
    min of one list) counts once: samples are told apart by their content, whatever their ids.
    Comparisons in xfail tests are left out.
    """
    return _scores_of(_distinct_samples(rows))


def _scores_of(distinct: _Distinct) -> dict[tuple[str, str | None], list[float]]:
    return _tally(distinct)[0]


_Key = tuple[str, "str | None"]


def _tally(
    distinct: _Distinct,
) -> tuple[dict[_Key, list[float]], dict[_Key, int], dict[_Key, list[tuple[float, float]]]]:
    """In one pass over the distinct evaluations, per (metric, method): the scores (an empty list
    for a metric whose every evaluation went without one), the count without a score (see
    :func:`no_claims_counts`), and the (labelled, judged) score pairs of the labelled ones."""
    scores: dict[_Key, list[float]] = {}
    unscored: dict[_Key, int] = {}
    pairs: dict[_Key, list[tuple[float, float]]] = {}
    for key, sample in distinct:
        values = scores.get(key)
        if values is None:
            values = scores[key] = []
        if sample.get("score") is None and sample.get("outcome"):  # see _unscored
            unscored[key] = unscored.get(key, 0) + 1
            continue
        values.append(float(sample["score"]))
        labelled = sample.get("labelled")
        if labelled is not None:
            pairs.setdefault(key, []).append((float(labelled), values[-1]))
    return scores, unscored, pairs


def _unscored(sample: Mapping[str, Any]) -> bool:
    """An evaluation with an outcome instead of a score (an answer without claims)."""
    return sample.get("score") is None and bool(sample.get("outcome"))


def no_claims_counts(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str | None], int]:
    """Per (metric, method), the distinct evaluations without a score because the answer made no
    claim (``outcome`` ``no_claims``): counted apart from :func:`per_sample_scores`, never as a number."""
    return _no_claims_of(_distinct_samples(rows))


def _no_claims_of(distinct: _Distinct) -> dict[tuple[str, str | None], int]:
    return _tally(distinct)[1]


def labelled_ids(
    rows: Iterable[Mapping[str, Any]],
) -> tuple[dict[tuple[str, str | None], list[str]], dict[tuple[str, str | None], list[str]]]:
    """Per (metric, method): the ids of the distinct evaluations with a labelled score, and of all."""
    labelled: dict[tuple[str, str | None], list[str]] = {}
    scored: dict[tuple[str, str | None], list[str]] = {}
    for key, sample in _distinct_samples(rows):
        scored.setdefault(key, []).append(str(sample.get("id")))
        if sample.get("labelled") is not None:
            labelled.setdefault(key, []).append(str(sample.get("id")))
    return labelled, scored


def corrected_means(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """The judge-corrected mean per (metric, method) with labelled evaluations (``summary.metrics``'s
    ``corrected``): the samples with a labelled score are the n, every other distinct evaluation of
    the metric the judge scored is one of the N (see :func:`pytest_ragmetrics.stats.corrected_mean`).
    """
    return _corrected_means_of(_distinct_samples(rows))


def _corrected_means_of(distinct: _Distinct) -> dict[tuple[str, str | None], dict[str, Any]]:
    return _corrected_from(distinct, _tally(distinct)[2])


def _corrected_from(
    distinct: _Distinct, pairs: Mapping[_Key, list[tuple[float, float]]]
) -> dict[tuple[str, str | None], dict[str, Any]]:
    """:func:`corrected_means`, from the labelled evaluations' score ``pairs`` (see :func:`_tally`)."""
    if not pairs:  # nothing labelled: no corrected mean, and no need for the unlabelled scores
        return {}
    from ..stats import corrected_mean

    unlabelled: dict[tuple[str, str | None], list[float]] = {}
    for key, sample in distinct:
        if key in pairs and not _unscored(sample) and sample.get("labelled") is None:
            unlabelled.setdefault(key, []).append(float(sample["score"]))
    out: dict[tuple[str, str | None], dict[str, Any]] = {}
    for key, labelled in pairs.items():
        y = [label for label, _ in labelled]
        y_hat = [judged for _, judged in labelled]
        others = unlabelled.get(key, [])
        entry: dict[str, Any] = {
            "labelled": len(y),
            "unlabelled": len(others),
            "labels_mean": math.fsum(y) / len(y),
            "judge_mean_labelled": math.fsum(y_hat) / len(y_hat),
        }
        if len(y) < 2:
            why = "one labelled sample; a corrected mean needs at least two"
            out[key] = {**entry, "mean": None, "low": None, "high": None, "reason": why}
            continue
        result = corrected_mean(y, y_hat, others)
        if result.low == result.high:
            # Two labels of 1 the judge also scored 1 draw an interval of no width: a gate on its
            # bound would pass on them with certainty, whatever the judge says of the other samples.
            why = (
                f"the {len(y)} labelled samples draw an interval of no width: their labels do not vary "
                "beyond what the judge's scores of them explain; label more samples"
            )
            out[key] = {**entry, "mean": None, "low": None, "high": None, "reason": why}
            continue
        out[key] = {
            **entry,
            # Every score lies in [0, 1]: so does the mean, whatever the normal interval says.
            "mean": min(1.0, max(0.0, result.mean)),
            "low": max(0.0, result.low),
            "high": min(1.0, result.high),
            "confidence": result.confidence,
            "weight": result.weight,
            "effective_labels": result.effective_labels,
        }
    return out


def run_samples(rows: Iterable[Mapping[str, Any]]) -> int:
    """How many distinct samples the run's comparisons outside xfail tests hold (by id, else by
    content), whatever metric scored them: a metric no test reached leaves them all not measured."""
    return len(
        {
            str(sample.get("id") or sample.get("key") or f"{row.get('nodeid')}#{i}")
            for row in rows
            if not row.get("xfail")
            for i, sample in enumerate(row.get("samples") or ())
        }
    )


def evaluate_run_gates(
    gates: Sequence[Gate], rows: Sequence[Mapping[str, Any]], *, partial: bool = False
) -> list[dict[str, Any]]:
    """The aggregate gates over a run's comparison rows: ``summary.gates``. The one way every path
    decides them (the run, ``report merge``, ``baseline compare``), over full-precision scores, with
    the judge-corrected means ``corrected_mean`` gates read (:func:`corrected_means`)."""
    from ..gates import evaluate_gates

    distinct = _distinct_samples(rows)
    scores, unscored, pairs = _tally(distinct)
    return evaluate_gates(
        gates,
        scores,
        partial=partial,
        corrected=_corrected_from(distinct, pairs),
        run_samples=run_samples(rows),
        no_claims=unscored,
    )


def metric_summaries(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``summary.metrics``: n, mean, min and max per (metric, method) over every distinct evaluation
    with a score, and ``no_claims``, the count of those without one (only when there are some)."""
    from ..results import aggregate

    distinct = _distinct_samples(rows)
    scores, unscored, pairs = _tally(distinct)
    corrected = _corrected_from(distinct, pairs)
    return [
        {"metric": metric, "method": method, **aggregate(values, no_claims=unscored.get((metric, method), 0))}
        | ({"corrected": corrected[metric, method]} if (metric, method) in corrected else {})
        for (metric, method), values in sorted(scores.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
    ]


#: The metrics whose verdicts tell which chunk misled an answer (see :func:`misled_answers`).
_MISLED_FROM = ("faithfulness", "answer_correctness")


def misled_answers(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """``summary.misled``: for every sample scored on both faithfulness and answer correctness (told
    apart by content), the answer claims a retrieved chunk supports but the reference does not, with
    that chunk (:func:`~pytest_ragmetrics.metrics.answer.misled_claims`). No judge call: both metrics'
    verdicts are in the rows. Comparisons in xfail tests are left out."""
    from ..metrics.answer import misled_claims

    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.get("xfail") or row.get("metric") not in _MISLED_FROM:
            continue
        for i, sample in enumerate(row.get("samples") or ()):
            if not sample.get("verdicts"):
                continue
            key = sample.get("key") or f"{row.get('nodeid')}#{i}"
            entry = found.setdefault(key, {"id": sample.get("id")})
            entry.setdefault(row["metric"], sample["verdicts"])
    misled = [
        {"id": entry["id"], "key": key, **claim}
        for key, entry in found.items()
        if all(metric in entry for metric in _MISLED_FROM)
        for claim in misled_claims(entry["faithfulness"], entry["answer_correctness"])
    ]
    return sorted(misled, key=lambda e: (str(e["id"]), str(e["key"]), int(e.get("index") or 0)))


def comparison_counts(rows: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``summary.comparisons``: how many comparisons passed and failed."""
    counts = {"passed": 0, "failed": 0}
    for row in rows:
        counts["passed" if row.get("passed") else "failed"] += 1
    return counts


#: Settings that change the scores a judge gives: shards of one run must agree on them.
SCORING_SETTINGS = (
    "judge_model",
    "judge_provider",
    "relevance_models",
    "relevance_method",
    "response_format",
    "temperature",
    "graded_temperature",
    "seed",
    "judge_n",
    "judge_max_tokens",
)


def scoring_settings(settings: Settings) -> dict[str, Any]:
    """``summary.scoring``: the run's settings that change scores (:data:`SCORING_SETTINGS`)."""
    out = {name: getattr(settings, name) for name in SCORING_SETTINGS}
    out["relevance_models"] = list(out["relevance_models"])
    return out


def build_report(
    rows: list[dict[str, Any]],
    *,
    settings: Settings,
    stats: JudgeStats,
    gate_results: list[dict[str, Any]],
    unused_store_entries: int | None,
    shown: Callable[[str], str],
    default_cache_dir: str,
    baseline: Mapping[str, Any] | None = None,
    baseline_source: str | None = None,
    regression_gates: Sequence[RegressionGate] = (),
    partial: bool = False,
    allow_inconclusive: bool = False,
    allow_mixed: bool = False,
    errors: list[dict[str, Any]] | None = None,
    judge_check: Mapping[str, Any] | None = None,
    judge_controls: Mapping[str, Any] | None = None,
    answers: Iterable[tuple[str, Iterable[str]]] = (),
    with_results: bool = True,
    suite: Mapping[str, Any] | None = None,
    label_warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The plain-JSON run report that every renderer reads.

    ``with_results=False`` leaves its ``results`` list empty (the summary is whole): for a run that
    shows and writes no report (see :func:`report_wanted`), the per-comparison part is never read.

    ``shown`` turns a local path into the one reports print (relative to the rootdir when inside it).
    With a ``baseline`` report, the comparison and the ``regression_gates`` are attached (see
    :func:`attach_baseline`; ``partial`` as for gates, ``allow_inconclusive`` and ``allow_mixed`` as
    there). ``summary.provenance`` records what made the scores (see
    :func:`pytest_ragmetrics.baseline.provenance`), which a later comparison with this report as
    its baseline checks.
    Every string passes through :func:`~pytest_ragmetrics.redact.redact`.
    ``judge_check`` is the judge check's outcome (see :func:`~pytest_ragmetrics.calibration.check.
    run_judge_check`), if one ran; the report adds what rests on each judgment kind that failed.
    ``judge_controls`` is the negative controls' outcome (see :func:`~pytest_ragmetrics.calibration.
    controls.run_controls`), if they were judged: ``summary["judge_controls"]``.
    ``answers`` holds what each distinct judgment decided, ``(kind, classes)``, tallied per kind in
    ``summary["judge_answers"]``: a kind whose answers are nearly all alike gets a warning in
    ``summary["judge_warnings"]``; so does each of
    ``label_warnings`` (why the labelled samples behind the corrected means may not be a uniform sample).
    ``suite`` records the tests the run collected before deselection and those it ran (see
    :class:`pytest_ragmetrics._suite.SuiteRecord`); ``summary["suite"]``, read by ``report merge``.
    The settings that change scores are recorded in ``summary["scoring"]``, for the same reason.
    """
    from .. import __version__
    from ..calibration.degenerate import answer_tallies, tally_warnings

    s = settings
    metrics = metric_summaries(rows)
    used_models = sorted({judge for row in rows for judge in row.get("judges") or ()})
    # Every comparison scored from labels: no judge model to name (the figures still say 0 calls).
    no_judge = bool(rows) and all(row.get("judges") in ([], ()) for row in rows)
    judge = {
        "model": None if no_judge else ", ".join(used_models) or s.judge_model,
        "cache_mode": s.cache,
        "cache_dir": None if s.cache == "off" else shown(s.cache_dir or default_cache_dir),
        "store_dir": shown(s.store_dir) if s.store_dir else None,
        **stats.to_json(),
        # Answers served without a call, wherever they were found: the same on every machine that
        # replays the same judgments (cache_hits, store_hits and reused split it by what this
        # machine had, and by how xdist shared the tests out).
        "recorded": stats.cache_hits + stats.store_hits + stats.reused,
        "cost": stats.cost(s.price_input, s.price_output),
    }
    comparisons = comparison_counts(rows)
    summary: dict[str, Any] = {
        "metrics": metrics,
        "gates": gate_results,
        "judge": judge,
        "unused_store_entries": unused_store_entries,
        # Tests a ragmetrics error stopped before their comparison, in test order.
        "errors": sorted(errors or [], key=lambda e: (e["nodeid"], e["when"])),
        "comparisons": comparisons,
        **({"labels": labels} if (labels := label_summary(rows)) else {}),
        **({"misled": misled} if (misled := misled_answers(rows)) else {}),
        "scoring": scoring_settings(s),
        **({"suite": dict(suite)} if suite else {}),
    }
    tallies = answer_tallies(answers)
    if tallies:
        summary["judge_answers"] = tallies
    warnings = tally_warnings(tallies)
    warnings += [{"kind": "labelled_sample", "message": message} for message in label_warnings]
    if warnings:
        summary["judge_warnings"] = warnings
    if judge_check is not None:
        summary["judge_check"] = judge_check_section(judge_check, rows, gate_results)
    if judge_controls is not None:
        summary["judge_controls"] = dict(judge_controls)
    results: list[dict[str, Any]] = []
    if with_results:
        results = [result_json(r) for r in sort_results(rows)]
    from ..redact import redact_json

    # Judge reasons and error texts (of the judge check and the controls too) quote what servers
    # said: no credential reaches a report.
    report: dict[str, Any] = redact_json(
        {"version": REPORT_VERSION, "plugin_version": __version__, "results": results, "summary": summary}
    )
    if with_results:
        from ..baseline import provenance

        report["summary"]["provenance"] = provenance(report)
    if baseline is not None:
        attach_baseline(
            report,
            baseline,
            source=baseline_source,
            regression_gates=regression_gates,
            partial=partial,
            allow_inconclusive=allow_inconclusive,
            allow_mixed=allow_mixed,
        )
    return report


def attach_baseline(
    report: dict[str, Any],
    baseline: Mapping[str, Any],
    *,
    source: str | None = None,
    regression_gates: Sequence[RegressionGate] = (),
    partial: bool = False,
    allow_inconclusive: bool = False,
    allow_mixed: bool = False,
) -> dict[str, Any]:
    """Compare ``report`` with ``baseline`` and add ``summary.baseline`` and, when there are regression
    gates, ``summary.regression_gates`` (see :mod:`pytest_ragmetrics.baseline`). Returns ``report``.

    ``allow_mixed`` compares scores made with another judge model, prompt version or splitter
    (refused otherwise); ``allow_inconclusive`` lets a regression gate pass on a drop its test cannot
    call significant."""
    from ..baseline import compare_reports, evaluate_regression_gates

    comparison = compare_reports(baseline, report, source=source, partial=partial, allow_mixed=allow_mixed)
    summary = report.setdefault("summary", {})
    summary["baseline"] = comparison
    if regression_gates:
        summary["regression_gates"] = evaluate_regression_gates(
            regression_gates, comparison, partial=partial, allow_inconclusive=allow_inconclusive
        )
    return report


#: Below this many labelled samples, a collapse is not called stale labels: too few to tell.
STALE_MIN_SAMPLES = 3


def label_summary(rows: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Whether the labels of label-metric samples met what was retrieved, or None without such samples.

    ``samples`` counts distinct samples (by content) that retrieved something and were scored from
    label ids; ``not_found`` those where no retrieved id is labelled at all. ``stale`` is true when
    that is most of them (and at least :data:`STALE_MIN_SAMPLES` were scored): after a re-chunking
    or re-indexing every id changes, and the scores collapse because the labels, not retrieval, broke.
    """
    found: dict[str, bool] = {}
    for row in rows:
        for i, sample in enumerate(row.get("samples") or ()):
            flag = sample.get("labels_found")
            if flag is not None:
                found.setdefault(sample.get("key") or f"{row.get('nodeid')}#{i}", bool(flag))
    if not found:
        return None
    missing = sum(1 for flag in found.values() if not flag)
    stale = len(found) >= STALE_MIN_SAMPLES and missing * 2 > len(found)
    return {"samples": len(found), "not_found": missing, "stale": stale}


def judge_check_section(
    check: Mapping[str, Any], rows: Iterable[Mapping[str, Any]], gate_results: Iterable[Mapping[str, Any]]
) -> dict[str, Any]:
    """The judge check with, for every failed floor, the gates and comparisons resting on that judge.

    A floor on ``context_precision`` concerns the precision judgments, so every gate and comparison
    over ``context_precision`` rests on it; ``context_relevance_sentences`` carries both the sentence
    and the binary method.
    """
    from ..calibration.check import metrics_of_kind

    rows, gate_results = list(rows), list(gate_results)
    floors = []
    for floor in check.get("floors") or []:
        floor = dict(floor)
        if not floor.get("passed"):
            metrics = set(metrics_of_kind(floor.get("kind", "")))
            tests = [r["nodeid"] for r in rows if (r.get("metric"), r.get("method")) in metrics]
            floor["resting_on"] = {
                "gates": [g["spec"] for g in gate_results if (g.get("metric"), g.get("method")) in metrics],
                "comparisons": len(tests),
                "tests": sorted(set(tests)),
            }
        floors.append(floor)
    return {**check, "floors": floors}


def report_wanted(settings: Settings) -> bool:
    """Whether the run report is shown or written anywhere: the terminal report, a report file, the
    GitHub step summary or a saved baseline (what :func:`write_reports` and ``--rag-report`` do)."""
    s = settings
    return bool(
        s.report
        or s.report_json
        or s.report_md
        or s.report_html
        or s.save_baseline
        or (s.github_summary and os.environ.get("GITHUB_STEP_SUMMARY"))
    )


def write_reports(
    report: dict[str, Any],
    settings: Settings,
    *,
    save_baseline: bool = True,
    baseline: Mapping[str, Any] | None = None,
) -> list[str]:
    """Write the report files the settings ask for (the baseline only with ``save_baseline``, from
    ``baseline`` when given, else from ``report``), and append to ``$GITHUB_STEP_SUMMARY``.

    Returns what could not be written, one message each (the path and why: a directory that is a
    file, a full disk): each file is written or not on its own, and a failure leaves the old file.
    """
    from .._files import write_text_atomic

    s = settings
    failed: list[str] = []

    def write(what: str, path: str, text: Callable[[], str]) -> None:
        try:
            write_text_atomic(path, text())
        except OSError as exc:
            failed.append(f"cannot write {what} to {path} ({exc})")

    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if s.report_json:
        from .json_report import to_json

        write("the JSON report", s.report_json, lambda: to_json(report))
    if s.report_md or (s.github_summary and summary):
        from .markdown import to_markdown

        text = to_markdown(report)
        if s.report_md:
            write("the Markdown report", s.report_md, lambda: text)
        if s.github_summary and summary:
            try:
                with open(summary, "a", encoding="utf-8", errors="backslashreplace") as fh:
                    fh.write(text + "\n")
            except OSError as exc:
                failed.append(f"cannot append the report to the GitHub step summary {summary} ({exc})")
    if s.report_html:
        from .html import to_html

        write("the HTML report", s.report_html, lambda: to_html(report))
    if s.save_baseline and save_baseline:
        from ..baseline import baseline_form
        from .json_report import to_json

        saved = report if baseline is None else baseline
        write("the baseline", s.save_baseline, lambda: to_json(baseline_form(saved)))
    return failed


#: The top-level names of a JSON run report (and a baseline): the first one written, whatever the order.
_REPORT_NAMES = frozenset({"plugin_version", "results", "summary", "version"})


def _json_report(head: bytes) -> bool:
    return starts_json_object(head, _REPORT_NAMES)


def _markdown_report(head: bytes) -> bool:
    """Whether ``head`` starts as our Markdown report does (``## ✅ ragmetrics: ...``): a README that
    merely mentions ragmetrics is not one."""
    first = head.lstrip().split(b"\n", 1)[0]
    return first.startswith(b"## ") and b"ragmetrics: " in first


def _html_report(head: bytes) -> bool:
    """Whether ``head`` starts as our HTML report does: any other HTML page is not one."""
    return head.startswith(b"<!DOCTYPE html") and b"<title>ragmetrics report</title>" in head


#: Each kind of report file: its name in messages, and whether a file's first bytes start as one.
_KINDS: dict[str, tuple[str, Callable[[bytes], bool]]] = {
    "json": ("JSON report or baseline", _json_report),
    "markdown": ("Markdown report", _markdown_report),
    "html": ("HTML report", _html_report),
}


def check_replaced(settings: Settings, given_as: Callable[[str], str] | None = None) -> None:
    """Refuse, before any test, to write a report or a baseline over a file that is no such report
    (a golden set, a labelled set chosen by a slip of the tab key): it would be lost at the run's end.
    ``given_as`` names a setting as the run was given it (by default, its command-line option)."""
    from ..options import OPTIONS_BY_NAME

    named = given_as or (lambda name: OPTIONS_BY_NAME[name].cli_name)
    written: dict[str, str] = {}  # each file written, by the setting that writes it
    for name, path, kind in (
        ("report_json", settings.report_json, "json"),
        ("save_baseline", settings.save_baseline, "json"),
        ("report_md", settings.report_md, "markdown"),
        ("report_html", settings.report_html, "html"),
    ):
        if not path:
            continue
        check_replaceable(path, kind, named(name))
        # Two files written to one path: the last written would replace the other at the run's end
        # (a pipe or a device is written to, not replaced: /dev/stdout may take them all).
        if os.path.exists(path) and not os.path.isfile(path):
            continue
        real = os.path.realpath(path)
        if real in written:
            raise ConfigError(
                f"{named(name)}: {os.fspath(path)} is the file {named(written[real])} writes too; the one "
                "written last would replace the other: give each its own path",
                setting=named(name),
            )
        written[real] = name


def check_replaceable(path: str | os.PathLike[str], kind: str, option: str) -> None:
    """Raise :class:`ConfigError` naming ``option`` when ``path`` holds a file that is no report of
    ``kind`` (``json``, ``markdown`` or ``html``): writing the report there would lose it. A report
    of that kind, an empty file or no file at all may be written over."""
    what, ours = _KINDS[kind]
    if not replaceable(path, ours):
        raise ConfigError(
            f"{option}: {os.fspath(path)} exists and is not a ragmetrics {what}; it is left alone: choose "
            "another path (or delete the file if it should be replaced)",
            setting=option,
        )
