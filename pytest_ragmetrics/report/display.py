"""What every renderer of the run report shows alike (see :mod:`pytest_ragmetrics.report`): whether
the run passed (:func:`outcome`), each row's and gate's status, and the wording of scores, margins,
counts, gates and the judge's figures.

The report's schema is :mod:`pytest_ragmetrics.report_schema`; renderers accept any ``Mapping`` of
that shape and read optional fields with ``.get`` so that a report from an older or newer plugin
still renders.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from ..specs import format_number
from ..stats import format_p

__all__ = [
    "JUDGE_SOURCES",
    "PRUNE_COMMAND",
    "Outcome",
    "baseline_refused",
    "cap_stop",
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
    "score_text",
    "spending_cap",
    "verdict_chunks",
]

#: Removes judgment store entries no test used any more; the reports suggest it.
PRUNE_COMMAND = "python -m pytest_ragmetrics cache prune"


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
    """``1 new (q16), 3 removed (q13, q14, q15)``: the samples a comparison could not match, or None.

    Beside a comparison of matched samples the line starts ``besides the 15 compared:``: the
    samples it lists are others than the ``n`` its row counts (a golden set scored under two ids by
    two tests can show 15 compared and 15 not measured for one metric)."""
    parts = []
    for key, word in (
        ("new", "new"),
        ("not_measured", "not measured in this run"),
        ("removed", "removed from the golden set"),
        ("changed", "changed question, reference or labels"),
        ("no_claims", "with no claims in one run, not compared"),
        ("ambiguous", "ambiguous id"),
    ):
        ids = entry.get(key) or []
        if ids:
            shown = ", ".join(str(i) for i in ids[:limit]) + (", ..." if len(ids) > limit else "")
            parts.append(f"{len(ids)} {word} ({shown})")
    if not parts:
        return None
    n = entry.get("n") or 0
    return (f"besides the {format_count(n)} compared: " if n else "") + ", ".join(parts)


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
    if gate.get("no_claims"):
        text += f", {format_count(gate['no_claims'])} with no claims"
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
    if judge.get("partial"):
        figures.append(("partial", str(judge["partial"])))
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
