"""The lines a run closes with when it shows no report (no ``--rag-report``): its failed gates and
checks, and the judge's warnings, each ``(line, colour)``; ``report check`` prints them too.

Apart from the report's renderer (:mod:`.terminal`, which shares these helpers): every run that
judged prints these lines, and only a run that shows its report loads the renderer.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..redact import one_line
from .display import baseline_refused, format_count, format_margin, format_score, regression_gate_detail

__all__ = [
    "ALLOW_MIXED_HINT",
    "controls_failures",
    "failure_lines",
    "floor_detail",
    "judge_check_failures",
    "plural",
    "resting_on",
]


def plural(count: Any, singular: str, plural: str | None = None) -> str:
    word = singular if count == 1 else (plural or singular + "s")
    return f"{format_count(count)} {word}"


def floor_detail(floor: Mapping[str, Any], kinds: Sequence[Mapping[str, Any]]) -> str:
    if floor.get("value") is None:
        return str(floor.get("reason") or "no value")
    kind = next(
        (k for k in kinds if k.get("kind") == floor.get("kind") and k.get("model") == floor.get("model")), {}
    )
    text = f"{floor.get('stat')} {format_score(floor.get('value'))}"
    if kind:
        text += f" over {plural(kind.get('n', 0), str(kind.get('unit', 'unit')))}"
    return text + f", judge {floor.get('model')}"


def resting_on(floor: Mapping[str, Any]) -> str | None:
    resting = floor.get("resting_on")
    if not resting:
        return None
    parts = [f"gate '{g}'" for g in resting.get("gates") or []]
    if resting.get("comparisons"):
        tests = plural(len(resting.get("tests") or []), "test")
        parts.append(f"{plural(resting['comparisons'], 'comparison')} in {tests}")
    return "resting on this judge: " + (", ".join(parts) if parts else "no gate or comparison of this run")


def judge_check_failures(report: Mapping[str, Any]) -> list[str]:
    """One line per failed agreement floor (or the reason the judge check could not run), and per
    judgment kind answered nearly all alike, for the short summary printed without ``--rag-report``."""
    summary = report.get("summary") or {}
    warnings = [f"ragmetrics warning: {w.get('message')}" for w in summary.get("judge_warnings") or []]
    check = summary.get("judge_check")
    # A floor passed on too few labelled units says so plainly, as a controls floor does.
    warnings = [
        f"ragmetrics warning: judge check floor {floor.get('spec')}: {one_line(floor.get('reason') or '')}"
        for floor in (check or {}).get("floors") or ()
        if floor.get("skipped")
    ] + warnings
    if not check or check.get("passed"):
        return warnings
    if check.get("error"):
        return [f"ragmetrics judge check failed: {one_line(check['error'])}", *warnings]
    lines = []
    if check.get("item_errors"):
        lines.append(f"ragmetrics judge check failed: {one_line(check['item_errors'])}")
    for floor in check.get("floors") or []:
        if not floor.get("passed"):
            detail = floor_detail(floor, check.get("kinds") or [])
            line = f"ragmetrics judge check failed: {floor.get('spec')} ({detail})"
            resting = resting_on(floor)
            lines.append(line + (f"; {resting}" if resting else ""))
    return lines + warnings


def controls_failures(report: Mapping[str, Any]) -> list[str]:
    """One line per failed negative-controls floor, or the reason the controls could not be judged
    (worded as the run's closing lines)."""
    section = (report.get("summary") or {}).get("judge_controls") or {}
    if section.get("error"):
        return [f"ragmetrics controls could not be judged: {one_line(section['error'])}"]
    return [
        f"ragmetrics controls floor failed: {floor.get('spec')} ({floor.get('reason')})"
        for floor in section.get("floors") or []
        if not floor.get("passed")
    ]


#: How to compare with a baseline scored differently all the same.
ALLOW_MIXED_HINT = "--rag-allow-mixed-baseline compares anyway"


def failure_lines(report: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The short summary printed without ``--rag-report``: one ``(line, colour)`` per failed gate,
    failed regression gate and failed agreement floor, then the judge warnings."""
    summary = report.get("summary") or {}
    lines = []
    for gate in summary.get("gates") or ():
        if not gate["passed"]:
            why = gate.get("reason") or (
                f"value {format_score(gate['value'])}, margin {format_margin(gate.get('margin'))}"
            )
            lines.append((f"ragmetrics gate failed: {gate['spec']} ({why})", "red"))
    for gate in summary.get("regression_gates") or ():
        if not gate["passed"]:
            detail = regression_gate_detail(gate)
            failed = "inconclusive" if gate.get("inconclusive") else "failed"
            lines.append((f"ragmetrics regression gate {failed}: {gate['spec']} ({detail})", "red"))
    refused = baseline_refused(report)
    if refused:
        lines.append((f"ragmetrics: {refused} ({ALLOW_MIXED_HINT})", "red"))
    for line in judge_check_failures(report):
        lines.append((line, "yellow" if line.startswith("ragmetrics warning") else "red"))
    return lines
