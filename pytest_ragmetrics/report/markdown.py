"""The Markdown report (``--rag-report-md``), written for CI job summaries (GitHub-flavoured Markdown).

Append it to ``$GITHUB_STEP_SUMMARY`` and a pull request shows the headline, gates, per-metric figures,
why each failing comparison failed, and what the judge cost.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from ..redact import short_reason
from ..report_schema import check_version
from ..stats import format_p
from .display import (
    PRUNE_COMMAND,
    baseline_refused,
    cap_stop,
    comparison_label,
    control_share,
    controls_failed,
    corrected_detail,
    corrected_text,
    count_text,
    error_line,
    error_rows,
    format_count,
    format_delta,
    format_margin,
    format_score,
    format_threshold,
    gate_sees,
    gate_status,
    judge_figures,
    metric_label,
    misled_line,
    moved_samples,
    outcome,
    picked_sentences,
    report_notes,
    row_fails,
    sample_changes,
    score_text,
    verdict_chunks,
)

__all__ = ["DEFAULT_MAX_FAILURES", "PRUNE_COMMAND", "escape_markdown", "to_markdown"]

#: Failing comparisons listed in full; GitHub caps a job summary at 1 MiB.
DEFAULT_MAX_FAILURES = 50

#: Judge check items without a usable answer listed one by one (the JSON report has them all).
MAX_ITEM_ERRORS = 20


PASS_MARK = "✅"
FAIL_MARK = "❌"


def _mark(gate: Mapping[str, Any]) -> str:
    """A gate's status cell: a mark, and the word for a skipped or inconclusive one."""
    status = gate_status(gate)
    if status == "SKIP":
        return "⏭️"
    mark = PASS_MARK if gate.get("passed") else FAIL_MARK
    return f"{mark} inconclusive" if status == "INCONCLUSIVE" else mark


# Characters that start inline Markdown (or GitHub's $math$) markup. CommonMark lets a backslash escape
# any ASCII punctuation, so escaping these always yields the literal character. Line-start markup
# (#, -, 1.) needs no escape: user text never starts a line here. Links need "[", which is escaped.
_MARKUP = re.compile(r"([\\`*_\[\]|~$])")
_WHITESPACE = re.compile(r"\s+")


def escape_markdown(text: Any) -> str:
    """``text`` as literal inline Markdown, safe in a table cell: no markup, no HTML, one line.

    ``|`` would end a table cell and a newline the table, ``<b>`` would render as HTML, ``*``, ``_``,
    `` ` `` and ``[`` as emphasis, code and links, ``$`` as math on GitHub.
    """
    one_line = _WHITESPACE.sub(" ", str(text)).strip()
    escaped = one_line.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKUP.sub(r"\\\1", escaped)


def _code_span(text: Any) -> str:
    """``text`` as a code span, outside a table: shown as written, since Markdown reads no escape in one
    (an escaped gate line would show its backslashes and ``&lt;``), or escaped when it holds a backtick,
    which would end the span."""
    one_line = _WHITESPACE.sub(" ", str(text)).strip()
    return escape_markdown(one_line) if "`" in one_line else f"`{one_line}`"


def _table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A GFM table; ``align`` has one letter per column: l(eft), r(ight), c(enter)."""
    rule = {"l": ":---", "r": "---:", "c": ":---:"}
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(rule[a] for a in align) + " |"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return lines


def _headline(report: Mapping[str, Any]) -> str:
    result = outcome(report)
    if result["comparisons"] == 0 and result["gates"] == 0 and not result["errors"] and result["passed"]:
        return "## ragmetrics: no comparisons recorded"
    parts = []
    if result["errors"]:
        parts.append(f"{result['errors']} test{'s' if result['errors'] != 1 else ''} stopped by an error")
    if result["comparisons"]:
        if result["comparisons_failed"]:
            text = f"{result['comparisons_failed']} of {result['comparisons']} comparisons failed"
        elif result["comparisons_xfailed"]:
            passed = result["comparisons"] - result["comparisons_xfailed"]
            text = f"{passed} of {result['comparisons']} comparisons passed"
        else:
            text = f"all {result['comparisons']} comparisons passed"
        if result["comparisons_xfailed"]:
            text += f" ({result['comparisons_xfailed']} in xfail tests failed as expected)"
        parts.append(text)
    if result["gates"]:
        if result["gates_failed"]:
            parts.append(f"{result['gates_failed']} of {result['gates']} gates failed")
        else:
            parts.append(f"all {result['gates']} gates passed")
    check = (report.get("summary") or {}).get("judge_check")
    if check and not check.get("passed"):
        parts.append("the judge check failed")
    if controls_failed(report):
        parts.append("the controls failed")
    if cap_stop(report):
        parts.append("the judge spending cap stopped the run")
    if baseline_refused(report):
        parts.append("the baseline was refused")
    mark = PASS_MARK if result["passed"] else FAIL_MARK
    return f"## {mark} ragmetrics: " + ", ".join(parts)


def _gates(gates: list[Mapping[str, Any]]) -> list[str]:
    rows = []
    for gate in gates:
        margin = format_margin(gate.get("margin"))
        if gate.get("reason"):
            margin = f"{margin} ({escape_markdown(gate['reason'])})"
        rows.append(
            [
                _mark(gate),
                escape_markdown(gate.get("spec", "")),
                format_score(gate.get("value")),
                count_text(gate),
                margin,
            ]
        )
    return ["### Gates", "", *_table(["", "Gate", "Value", "n", "Margin"], "clrrl", rows), ""]


def _baseline(comparison: Mapping[str, Any]) -> list[str]:
    metrics: list[Mapping[str, Any]] = list(comparison.get("metrics") or [])
    rows = []
    for m in metrics:
        verdict = escape_markdown(m.get("verdict", "?"))
        if m.get("reason"):
            verdict += f": {escape_markdown(m['reason'])}"
        rows.append(
            [
                escape_markdown(m.get("label") or metric_label(str(m.get("metric", "?")), m.get("method"))),
                format_count(m.get("n", 0)),
                format_score(m.get("baseline_mean")),
                format_score(m.get("current_mean")),
                format_delta(m),
                escape_markdown(format_p(m.get("p_value"))),
                f"**{verdict}**" if m.get("verdict") in ("worse", "not comparable") else verdict,
            ]
        )
    source = comparison.get("source")
    title = "### vs baseline" + (f" `{source}`" if source and "`" not in str(source) else "")
    scored = [f"- differs: {escape_markdown(d)}" for d in comparison.get("differences") or ()]
    if comparison.get("refused"):
        scored.insert(0, f"- **refused, scored differently:** {escape_markdown(comparison['refused'])}")
    lines = [
        title,
        "",
        *scored,
        *([""] if scored else []),
        *_table(["Metric", "n", "Baseline", "Current", "Δ [95% CI]", "p", "Verdict"], "lrrrrrl", rows),
        "",
    ]
    notes = []
    for m in metrics:
        label = escape_markdown(m.get("label") or m.get("metric", "?"))
        if m.get("regressed"):
            notes.append(
                f"- most regressed {label}: " + escape_markdown(", ".join(moved_samples(m["regressed"])))
            )
        changes = sample_changes(m)
        if changes:
            notes.append(f"- {label}: {escape_markdown(changes)}")
    return [*lines, *notes, ""] if notes else lines


def _regression_gates(gates: list[Mapping[str, Any]]) -> list[str]:
    rows = []
    for gate in gates:
        if gate.get("value") is None:
            cells = [escape_markdown(gate.get("reason") or "no value"), "", "", ""]
        else:
            cells = [
                format_score(gate.get("value")),
                format_delta(gate),
                escape_markdown(format_p(gate.get("p_value"))),
                escape_markdown(", ".join(moved_samples(gate.get("worst") or []))),
            ]
        # Over how many matched samples, how many of them changed (all the test sees), the smallest
        # p it can reach with them, and how many of the baseline's samples this run did not measure.
        counts = [
            format_count(gate.get("n", 0)),
            format_count(gate.get("changed_n") or 0),
            escape_markdown(format_p(gate.get("min_p"))),
            format_count(gate.get("not_measured") or 0),
        ]
        rows.append([_mark(gate), escape_markdown(gate.get("spec", "")), *cells[:3], *counts, cells[3]])
    header = [
        "",
        "Regression gate",
        "Drop",
        "Δ [95% CI]",
        "p (one-sided)",
        "n",
        "Changed",
        "Smallest p",
        "Not measured",
        "Worst samples",
    ]
    notes = [
        f"- {_code_span(gate.get('spec', ''))}: "
        + escape_markdown("; ".join(text for text in (gate.get("note"), gate_sees(gate)) if text))
        for gate in gates
        if gate.get("note") or gate_sees(gate)
    ]
    return [
        "### Regression gates",
        "",
        *_table(header, "clrrrrrrrl", rows),
        "",
        *notes,
        *([""] if notes else []),
    ]


def _metrics(metrics: list[Mapping[str, Any]]) -> list[str]:
    corrected = any(m.get("corrected") for m in metrics)
    rows = [
        [
            escape_markdown(metric_label(str(m.get("metric", "?")), m.get("method"))),
            count_text(m),
            format_score(m.get("mean")),
            format_score(m.get("min")),
            format_score(m.get("max")),
        ]
        + (
            [
                escape_markdown(
                    f"{corrected_text(m['corrected'])} ({corrected_detail(m['corrected'])})"
                    if m.get("corrected")
                    else ""
                )
            ]
            if corrected
            else []
        )
        for m in metrics
    ]
    header = ["Metric", "n", "Mean", "Min", "Max"] + (["Corrected mean [95% CI]"] if corrected else [])
    return ["### Metrics", "", *_table(header, "lrrrr" + ("l" if corrected else ""), rows), ""]


def _weak_verdicts(row: Mapping[str, Any]) -> list[str]:
    """Bullets for the verdicts that pulled a failing comparison down, with the judge's reasons."""
    lines: list[str] = []
    for sample in row.get("samples") or []:
        for verdict in sample.get("verdicts") or []:
            value = verdict.get("value")
            if isinstance(value, (int, float)) and value >= 1:
                continue
            where = f"{verdict.get('item', 'item')} {verdict.get('index', '?')}"
            if verdict.get("rank") is not None:
                where += f" (rank {verdict['rank']})"
            where += verdict_chunks(verdict)
            text = f"- sample {escape_markdown(sample.get('id', '?'))}, {escape_markdown(where)}"
            if verdict.get("text"):
                text += f" “{escape_markdown(verdict['text'])}”"
            text += f": **{escape_markdown(verdict.get('verdict', '?'))}**"
            if verdict.get("reason"):
                text += f" — {escape_markdown(short_reason(str(verdict['reason'])))}"
            if row.get("method") == "sentence":
                picked = picked_sentences(verdict)
                text += "; picked " + (" ".join(f"“{escape_markdown(s)}”" for s in picked) or "none")
            lines.append(text)
    return lines


def _failures(rows: list[Mapping[str, Any]], max_failures: int) -> list[str]:
    failing = [row for row in rows if row_fails(row)]
    if not failing:
        return []
    shown = failing[:max_failures]
    table = [
        [
            escape_markdown(row.get("nodeid", "?")),
            escape_markdown(comparison_label(row)),
            score_text(row),
            escape_markdown(format_threshold(row.get("op"), row.get("threshold"))),
            escape_markdown(row.get("explanation") or ""),
        ]
        for row in shown
    ]
    lines = [
        "### Failing comparisons",
        "",
        *_table(["Test", "Comparison", "Score", "Threshold", "Why"], "llrll", table),
        "",
    ]
    for row in shown:
        bullets = _weak_verdicts(row)
        if bullets:
            # A blank line after <summary> makes GitHub render the Markdown inside <details>.
            # <summary> sits in an HTML block, where Markdown escapes would show: escape as HTML there.
            summary = html.escape(" ".join(f"{row.get('nodeid', '?')} · {comparison_label(row)}".split()))
            lines += ["<details>", f"<summary>Verdicts: {summary}</summary>", "", *bullets, "", "</details>"]
    if len(failing) > len(shown):
        lines += ["", f"…and {len(failing) - len(shown)} more failing comparisons (see the JSON report)."]
    lines.append("")
    return lines


def _judge(summary: Mapping[str, Any]) -> list[str]:
    judge = summary.get("judge") or {}
    rows = []
    if judge.get("model"):
        rows.append(["judge model", escape_markdown(judge["model"])])
    rows += [[label, escape_markdown(text)] for label, text in judge_figures(judge)]
    if judge.get("cache_mode"):
        cache = str(judge["cache_mode"])
        if judge.get("cache_dir"):
            cache += f" ({judge['cache_dir']})"
        rows.append(["cache", escape_markdown(cache)])
    if judge.get("store_dir"):
        rows.append(["judgment store", escape_markdown(judge["store_dir"])])
    unused = summary.get("unused_store_entries") or 0
    if unused:
        rows.append(["unused store entries", f"{format_count(unused)} (remove with `{PRUNE_COMMAND}`)"])
    return ["### Judge", "", *_table(["Figure", "Value"], "ll", rows), ""]


def _score(value: Any) -> str:
    return "–" if value is None else f"{value:.3f}"


def _judge_check(check: Mapping[str, Any]) -> list[str]:
    lines = ["### Judge check", ""]
    source = escape_markdown(check.get("source", "?"))
    lines += [f"Labelled set {source}, judge {escape_markdown(check.get('model', '?'))}.", ""]
    if check.get("error"):
        return [*lines, f"**FAIL**: the judge check could not run: {escape_markdown(check['error'])}", ""]
    rows = []
    for k in check.get("kinds") or []:
        names = [escape_markdown(k.get(name, "?")) for name in ("kind", "model", "unit")]
        figures = [_score(k.get(name)) for name in ("accuracy", "kappa", "weighted_kappa", "f1")]
        disagreements = format_count(len(k.get("disagreements") or []))
        errors = format_count(k.get("errors") or 0)
        rows.append([*names, format_count(k.get("n", 0)), *figures, disagreements, errors])
    header = [
        "Kind",
        "Judge",
        "Unit",
        "n",
        "Accuracy",
        "Kappa",
        "Weighted kappa",
        "F1",
        "Disagreements",
        "No usable answer",
    ]
    lines += _table(header, "lllrrrrrrr", rows)
    lines += ["", "Kappa is Cohen's; the weighted kappa (graded ratings) uses quadratic weights.", ""]
    if check.get("item_errors"):
        lines += [f"**FAIL**: {escape_markdown(check['item_errors'])}", ""]
    items = [(k, e) for k in check.get("kinds") or [] for e in k.get("error_items") or []]
    for k, error in items[:MAX_ITEM_ERRORS]:
        where = f"{error.get('id')!r} ({error.get('where')})"
        lines.append(
            f"- {escape_markdown(k.get('kind', '?'))} item {escape_markdown(where)}: no usable answer: "
            f"{escape_markdown(error.get('reason', ''))}"
        )
    if len(items) > MAX_ITEM_ERRORS:
        lines.append(f"- …and {len(items) - MAX_ITEM_ERRORS} more items without a usable answer")
    if items:
        lines.append("")
    for floor in check.get("floors") or []:
        status = "not decided" if floor.get("skipped") else "PASS" if floor.get("passed") else "**FAIL**"
        text = f"- {status} {escape_markdown(floor.get('spec', '?'))}: {_score(floor.get('value'))}"
        if (floor.get("skipped") or not floor.get("passed")) and floor.get("reason"):
            text += f" ({escape_markdown(floor['reason'])})"
        resting = floor.get("resting_on")
        if resting and (resting.get("gates") or resting.get("comparisons")):
            gates = ", ".join(f"gate {escape_markdown(g)}" for g in resting.get("gates") or [])
            comparisons = f"{resting.get('comparisons', 0)} comparisons"
            text += f"; resting on this judge: {gates + ', ' if gates else ''}{comparisons}"
        lines.append(text)
    return [*lines, ""]


def _controls(section: Mapping[str, Any]) -> list[str]:
    lines = ["### Controls", ""]
    lines += [
        f"{format_count(section.get('pairs', 0))} controls, judge "
        f"{escape_markdown(section.get('model') or '?')}: negative ones pair a question with a chunk "
        "retrieved for an unrelated sample (a judge that tells chunks apart finds few of them useful, "
        "relevant or needed), positive ones offer a sample its own reference (it finds nearly all so).",
        "",
    ]
    if section.get("error"):
        return [
            *lines,
            f"**FAIL**: the controls could not be judged: {escape_markdown(section['error'])}",
            "",
        ]
    rows = [
        [
            escape_markdown(k.get("kind", "?")),
            escape_markdown(control_share(k)),
            format_count(k.get("errors") or 0),
        ]
        for k in section.get("kinds") or []
    ]
    lines += [*_table(["Kind", "Judged", "Not judged"], "llr", rows), ""]
    reasons = [(k, r) for k in section.get("kinds") or [] for r in k.get("error_reasons") or []]
    lines += [f"- {escape_markdown(k.get('kind', '?'))} not judged: {escape_markdown(r)}" for k, r in reasons]
    lines += [""] if reasons else []
    for warning in section.get("warnings") or []:
        lines += [f"> **Warning:** {escape_markdown(warning)}", ""]
    for floor in section.get("floors") or []:
        status = "PASS" if floor.get("passed") else "**FAIL**"
        text = f"- {status} {escape_markdown(floor.get('spec', '?'))}: {_score(floor.get('value'))}"
        if floor.get("reason"):
            text += f" ({escape_markdown(floor['reason'])})"
        lines.append(text)
    return [*lines, ""]


def to_markdown(report: Mapping[str, Any], *, max_failures: int = DEFAULT_MAX_FAILURES) -> str:
    """Render a run report as GitHub-flavoured Markdown (ends with a newline).

    Every piece of user text (test ids, explanations, verdict reasons, model names, paths) is escaped
    with :func:`escape_markdown`. At most ``max_failures`` failing comparisons are listed in full.
    """
    check_version(report)
    summary: Mapping[str, Any] = report.get("summary") or {}
    rows: list[Mapping[str, Any]] = list(report.get("results") or [])
    lines = [_headline(report), ""]
    lines += [f"> {escape_markdown(note)}\n" for note in report_notes(report)]
    tests = summary.get("tests") or {}
    if tests:
        lines += [
            f"Tests: {format_count(tests.get('passed', 0))} passed, "
            f"{format_count(tests.get('failed', 0))} failed",
            "",
        ]
    if error_rows(report):
        lines += ["### Errors", "", *(f"- {escape_markdown(error_line(e))}" for e in error_rows(report)), ""]
    if summary.get("gates"):
        lines += _gates(summary["gates"])
    if summary.get("regression_gates"):
        lines += _regression_gates(summary["regression_gates"])
    if summary.get("baseline"):
        lines += _baseline(summary["baseline"])
    if summary.get("metrics"):
        lines += _metrics(summary["metrics"])
    lines += _failures(rows, max_failures)
    if summary.get("misled"):
        lines += [
            "### Answers misled by retrieval",
            "",
            *(f"- {escape_markdown(misled_line(entry))}" for entry in summary["misled"]),
            "",
        ]
    if summary.get("judge_check"):
        lines += _judge_check(summary["judge_check"])
    if summary.get("judge_controls"):
        lines += _controls(summary["judge_controls"])
    for warning in summary.get("judge_warnings") or []:
        lines += [f"> **Warning:** {escape_markdown(warning.get('message', ''))}", ""]
    stopped = cap_stop(report)
    if stopped:
        lines += [f"> **{escape_markdown(stopped[0].upper() + stopped[1:])}.**", ""]
    if summary.get("judge") or summary.get("unused_store_entries"):
        lines += _judge(summary)
    return "\n".join(lines).rstrip("\n") + "\n"
