"""The terminal summary section (``--rag-report``) and the one-line report header.

Writes through pytest's ``TerminalWriter`` (or anything with ``line(text, **markup)``,
``sep(sepchar, title, **markup)`` and an optional ``fullwidth``). Colour is requested with markup
keywords only; the writer decides whether to emit it (it honours ``NO_COLOR`` and ``--color``).

Verbosity follows pytest: ``-q`` lists failing comparisons only, the default adds passing ones and
explains failures, ``-v`` explains every comparison, ``-vv`` adds every sample's verdicts and reasons.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from ..redact import one_line
from ..report_schema import check_version
from ..stats import format_p
from .closing import floor_detail, plural, resting_on
from .display import (
    PRUNE_COMMAND,
    comparison_label,
    corrected_detail,
    corrected_text,
    count_text,
    error_line,
    error_rows,
    format_cost,
    format_count,
    format_delta,
    format_margin,
    format_score,
    format_threshold,
    gate_status,
    judge_sources,
    judge_status,
    metric_label,
    misled_line,
    moved_samples,
    outcome,
    picked_sentences,
    regression_gate_detail,
    report_notes,
    response_format_text,
    row_fails,
    row_status,
    sample_changes,
    score_text,
    verdict_chunks,
)

__all__ = [
    "PRUNE_COMMAND",
    "TITLE",
    "LineWriter",
    "header_line",
    "render_sections",
    "render_terminal",
]

#: Title of the section in pytest's terminal summary.
TITLE = "ragmetrics report"


_GAP = "  "


class LineWriter(Protocol):
    """The part of pytest's ``TerminalWriter`` this module uses."""

    def line(self, s: str = "", **markup: bool) -> None: ...

    def sep(
        self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
    ) -> None: ...


def _wrap(parts: Sequence[str], width: int, indent: str = "  ") -> list[str]:
    """Join ``parts`` with ", " into lines of at most ``width`` (a part longer than that stands alone)."""
    lines: list[str] = []
    current = ""
    for part in parts:
        candidate = f"{current}, {part}" if current else part
        # ">=": leave room for the comma that ends a broken line.
        if current and len(candidate) >= width:
            lines.append(current + ",")
            current = indent + part
        else:
            current = candidate
    if current:
        lines.append(current)
    return lines


def _fullwidth(tw: Any) -> int:
    width = getattr(tw, "fullwidth", 80)
    return width if isinstance(width, int) and width > 0 else 80


def _columns(cells: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Cells padded into aligned columns; the indices in ``right`` are right-aligned."""
    if not cells:
        return []
    widths = [max(len(row[i]) for row in cells) for i in range(len(cells[0]))]
    lines = []
    for row in cells:
        parts = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append(_GAP.join(parts).rstrip())
    return lines


def _verdict_line(verdict: Mapping[str, Any]) -> str:
    where = f"{verdict.get('item', 'item')} {verdict.get('index', '?')}"
    if verdict.get("rank") is not None:
        where += f" (rank {verdict['rank']})"
    where += verdict_chunks(verdict)
    text = where
    if verdict.get("text"):
        text += f" '{one_line(verdict['text'])}'"
    text += f": {verdict.get('verdict', '?')}"
    if verdict.get("reason"):
        text += f" - {one_line(verdict['reason'])}"
    picked = picked_sentences(verdict)
    if picked:
        text += "; picked " + " ".join(f"'{s}'" for s in picked)
    return text


def _picked_lines(row: Mapping[str, Any]) -> list[str]:
    """For a one-sample comparison of the sentence method: which sentences of each chunk the judge
    picked, quoted (``-v``)."""
    samples = row.get("samples") or []
    if len(samples) != 1 or row.get("method") != "sentence":
        return []
    lines = []
    for verdict in samples[0].get("verdicts") or []:
        where = f"{verdict.get('item', 'item')} {verdict.get('index', '?')}"
        picked = picked_sentences(verdict)
        lines.append(
            f"{where} picked " + " ".join(f"'{s}'" for s in picked) if picked else f"{where} picked none"
        )
    return lines


def _sample_lines(row: Mapping[str, Any]) -> list[str]:
    lines = []
    for sample in row.get("samples") or []:
        head = f"sample {sample.get('id', '?')}: score {score_text(sample)}"
        if sample.get("mode"):
            head += f" ({sample['mode']})"
        models = sample.get("models")
        if models:
            head += "; by judge model: " + ", ".join(
                f"{name} {format_score(score)}" for name, score in sorted(models.items())
            )
        lines.append(head)
        lines += ["  " + _verdict_line(verdict) for verdict in sample.get("verdicts") or []]
    return lines


def _render_results(tw: LineWriter, rows: list[Mapping[str, Any]], verbosity: int, width: int) -> None:
    # By default what needs a look (failures, and expected failures of xfail tests); -v lists every
    # comparison, -q only the failures.
    shown = [
        row for row in rows if verbosity >= 1 or row_fails(row) or (verbosity == 0 and not row.get("passed"))
    ]
    if not shown:
        tw.line(f"no failing comparisons among {len(rows)} (-v lists them)", green=True)
        return
    # The test id comes last and is never cut: the columns before it are short and aligned, and a
    # long parametrized id stays readable (it may run past the terminal's edge, as pytest's own do).
    cells = [
        [
            row_status(row),
            score_text(row),
            format_threshold(row.get("op"), row.get("threshold")),
            comparison_label(row),
            judge_status(row),
            row.get("nodeid", "?"),
        ]
        for row in shown
    ]
    header = ["result", "score", "threshold", "comparison", "judge", "test"]
    others = sum(max(len(r[i]) for r in [header, *cells]) for i in range(len(header) - 1))
    room = width - others - len(_GAP) * (len(header) - 1)
    # Ids too long for the room left: head each file's rows with the file, and show the test part.
    grouped = any(len(cell[-1]) > room for cell in cells)
    files: list[str | None] = []
    for cell in cells:
        path, sep, rest = cell[-1].partition("::")
        files.append(path if grouped and sep else None)
        if grouped and sep:
            cell[-1] = rest
    lines = _columns([header, *cells], right={1})
    tw.line(lines[0], bold=True)
    current_file: str | None = None
    for row, line, file in zip(shown, lines[1:], files, strict=True):
        if file is not None and file != current_file:
            tw.line(file, bold=True)
        current_file = file
        passed = bool(row.get("passed"))
        fails = row_fails(row)
        tw.line(line, green=passed, red=fails, yellow=not passed and not fails)
        if row.get("explanation") and (not passed or verbosity >= 1):
            tw.line(f"    {one_line(row['explanation'])}")
        if verbosity == 1 or (verbosity < 1 and not passed):
            for detail in _picked_lines(row):
                tw.line(f"      {detail}")
        if verbosity >= 2:
            for detail in _sample_lines(row):
                tw.line(f"      {detail}")
    hidden = len(rows) - len(shown)
    if hidden:
        what = "passing comparisons" if verbosity == 0 else "other comparisons"
        tw.line(f"({hidden} {what} not shown; -v lists them)")


def _render_metrics(tw: LineWriter, metrics: list[Mapping[str, Any]]) -> None:
    corrected = [m for m in metrics if m.get("corrected")]
    confidence = next((m["corrected"].get("confidence") for m in corrected), None) or 0.95
    head = ["metric", "n", "mean", "min", "max"]
    cells = [head + ([f"corrected [{confidence:.0%} CI]"] if corrected else [])]
    cells += [
        [
            metric_label(str(m.get("metric", "?")), m.get("method")),
            count_text(m),
            format_score(m.get("mean")),
            format_score(m.get("min")),
            format_score(m.get("max")),
        ]
        + ([corrected_text(m.get("corrected")) if m.get("corrected") else ""] if corrected else [])
        for m in metrics
    ]
    lines = _columns(cells, right={1, 2, 3, 4})
    tw.line(lines[0], bold=True)
    for line in lines[1:]:
        tw.line(line)
    for m in corrected:
        label = metric_label(str(m.get("metric", "?")), m.get("method"))
        tw.line(f"corrected {label}: {corrected_detail(m['corrected'])}")


def _render_gates(tw: LineWriter, gates: list[Mapping[str, Any]]) -> None:
    cells = []
    for gate in gates:
        if gate.get("value") is None:
            detail = ["", "", ""]  # its reason, added below, would widen the value column of every row
        else:
            detail = [
                f"value {format_score(gate.get('value'))}",
                f"n={count_text(gate)}",
                f"margin {format_margin(gate.get('margin'))}",
            ]
        cells.append([gate_status(gate), str(gate.get("spec", "?")), *detail])
    # The value column starts where its widest value-less row would put it.
    indent = max(len(c[0]) for c in cells) + len(_GAP) + max(len(c[1]) for c in cells) + len(_GAP)
    for gate, line in zip(gates, _columns(cells, right=set()), strict=True):
        if gate.get("value") is None:
            line = f"{line.ljust(indent)}{gate.get('reason') or 'no value'}"
        passed = bool(gate.get("passed"))
        tw.line(
            line, green=passed and not gate.get("skipped"), yellow=bool(gate.get("skipped")), red=not passed
        )


def _render_baseline(tw: LineWriter, comparison: Mapping[str, Any], width: int) -> None:
    """One row per metric (n, baseline, current, delta [CI], p, verdict), then what moved most."""
    metrics: list[Mapping[str, Any]] = list(comparison.get("metrics") or [])
    if comparison.get("refused"):
        tw.line(f"REFUSED  scored differently: {one_line(comparison['refused'])}", red=True)
        tw.line("    (--rag-allow-mixed-baseline, or --allow-mixed in baseline compare, compares anyway)")
    for difference in comparison.get("differences") or ():
        tw.line(f"differs: {one_line(difference)}", yellow=True)
    confidence = next((m.get("confidence") for m in metrics if m.get("confidence")), 0.95)
    header = ["metric", "n", "baseline", "current", f"delta [{confidence:.0%} CI]", "p", "verdict"]
    cells = [
        [
            str(m.get("label") or metric_label(str(m.get("metric", "?")), m.get("method"))),
            format_count(m.get("n", 0)),
            format_score(m.get("baseline_mean")),
            format_score(m.get("current_mean")),
            format_delta(m),
            format_p(m.get("p_value")),
            str(m.get("verdict", "?")),
        ]
        for m in metrics
    ]
    lines = _columns([header, *cells], right={1, 2, 3})
    tw.line(lines[0], bold=True)
    for entry, line in zip(metrics, lines[1:], strict=True):
        verdict = entry.get("verdict")
        tw.line(line, red=verdict in ("worse", "not comparable"), green=verdict == "better")
        if entry.get("reason"):
            tw.line(f"    {one_line(entry['reason'])}", yellow=True)
        changes = sample_changes(entry)
        if changes:
            tw.line(f"    {changes}")
    regressed = [m for m in metrics if m.get("regressed")]
    if regressed:
        tw.line("most regressed samples", bold=True)
        for entry in regressed:
            label = str(entry.get("label") or entry.get("metric"))
            for line in _wrap(
                [
                    f"{label}: " + ", ".join(moved_samples(entry["regressed"][:1])),
                    *moved_samples(entry["regressed"][1:]),
                ],
                width,
                indent="    ",
            ):
                tw.line("  " + line)


def _render_regression_gates(tw: LineWriter, gates: list[Mapping[str, Any]]) -> None:
    for gate in gates:
        status = gate_status(gate)
        passed = bool(gate.get("passed"))
        tw.line(
            f"{status}  {gate.get('spec', '?')}  {regression_gate_detail(gate)}",
            green=status == "PASS",
            yellow=passed and status != "PASS",
            red=not passed,
        )


#: Disagreements listed per judgment kind below -v.
DISAGREEMENTS_SHOWN = 5


def _cell(value: Any) -> str:
    return "-" if value is None else format_score(value)


def _render_judge_check(tw: LineWriter, check: Mapping[str, Any], verbosity: int) -> None:
    passed = bool(check.get("passed"))
    tw.line(f"labelled set {check.get('source', '?')}, judge {check.get('model', '?')}")
    if check.get("error"):
        tw.line(f"FAIL  the judge check could not run: {one_line(check['error'])}", red=True)
        return
    kinds: list[Mapping[str, Any]] = list(check.get("kinds") or [])
    several = len({k.get("model") for k in kinds}) > 1
    header = [
        "kind",
        *(["judge"] if several else []),
        "unit",
        "n",
        "accuracy",
        "kappa",
        "weighted_kappa",
        "f1",
    ]
    cells = [header]
    for k in kinds:
        cells.append(
            [
                str(k.get("kind", "?")),
                *([str(k.get("model", "?"))] if several else []),
                str(k.get("unit", "?")),
                format_count(k.get("n", 0)),
                _cell(k.get("accuracy")),
                _cell(k.get("kappa")),
                _cell(k.get("weighted_kappa")),
                _cell(k.get("f1")),
            ]
        )
    first = 3 if several else 2
    lines = _columns(cells, right=set(range(first, len(header))))
    tw.line(lines[0], bold=True)
    for line in lines[1:]:
        tw.line(line)
    tw.line(
        "kappa: Cohen's; weighted_kappa: quadratic weights (graded ratings); f1 of yes / needed / supported"
    )
    for k in kinds:
        for error in k.get("error_items") or []:
            where = f"{error.get('id')!r} ({error.get('where')})"
            reason = one_line(error.get("reason", ""))
            tw.line(f"FAIL  {k.get('kind')} item {where}: no usable answer: {reason}", red=True)
    floors = list(check.get("floors") or [])
    cells = [[gate_status(f), str(f.get("spec", "?")), floor_detail(f, kinds)] for f in floors]
    for floor, line in zip(floors, _columns(cells, right=set()), strict=True):
        ok, undecided = bool(floor.get("passed")), bool(floor.get("skipped"))
        tw.line(line, green=ok and not undecided, yellow=undecided, red=not ok)
        if undecided:
            tw.line(f"      {one_line(floor.get('reason') or '')}")
        if not ok:
            if floor.get("reason") and floor.get("value") is not None:
                tw.line(f"      {one_line(floor['reason'])}")
            resting = resting_on(floor)
            if resting:
                tw.line(f"      {resting}")
    for k in kinds:
        failing = any(not f.get("passed") and f.get("kind") == k.get("kind") for f in floors)
        if verbosity >= 1 or failing:
            classes = [str(c) for c in k.get("classes") or []]
            matrix = k.get("confusion") or []
            rows = "; ".join(
                f"label {c}: " + " ".join(str(n) for n in counts)
                for c, counts in zip(classes, matrix, strict=False)
            )
            tw.line(f"confusion {k.get('kind')} (judge answered {' / '.join(classes)}): {rows}")
        disagreements = list(k.get("disagreements") or [])
        if not disagreements:
            continue
        shown = disagreements if verbosity >= 1 else disagreements[:DISAGREEMENTS_SHOWN]
        tw.line(
            f"{k.get('kind')}: {plural(len(disagreements), 'disagreement')} with the labels",
            yellow=passed,
            red=not passed,
        )
        for d in shown:
            tw.line(
                f"  {d.get('id')} ({d.get('where')}): label {d.get('label')}, judge {d.get('verdict')}"
                f" - '{one_line(d.get('text', ''))}'"
            )
            if d.get("reason"):
                tw.line(f"      judge: {one_line(d['reason'])}")
        if len(shown) < len(disagreements):
            tw.line(f"  ({len(disagreements) - len(shown)} more; -v lists them all)")


def _judge_parts(judge: Mapping[str, Any]) -> list[str]:
    prompt = judge.get("prompt_tokens") or 0
    completion = judge.get("completion_tokens") or 0
    model = judge.get("model")
    # Where the judgments came from, in the order and with the meaning of every report format.
    sources = [plural(count, one, many) for _, one, many, count in judge_sources(judge)]
    parts = [
        (f"judge {model}: " if model else "judge: ") + sources[0],
        *sources[1:],
        f"{plural(prompt + completion, 'token')} ({format_count(prompt)} prompt + "
        f"{format_count(completion)} completion)",
        f"{plural(judge.get('tokens_saved', 0), 'token')} saved",
    ]
    cost = format_cost(judge.get("cost"))
    if cost is not None:
        parts.append(f"cost {cost}")
    parts += [
        plural(judge.get("retries", 0), "retry", "retries"),
        plural(judge.get("reasks", 0), "re-ask"),
        plural(judge.get("errors", 0), "error"),
    ]
    seconds = judge.get("seconds")
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool):
        parts.append(f"{seconds:.2f}s judging")
    described = response_format_text(judge)
    if described:
        parts.append(f"response format {described}")
    return parts


def _storage_line(judge: Mapping[str, Any], rootdir: str | os.PathLike[str] | None) -> str | None:
    parts = []
    if judge.get("cache_mode"):
        cache = f"cache {judge['cache_mode']}"
        if judge.get("cache_dir") and judge["cache_mode"] != "off":
            cache += f" at {_display_path(judge['cache_dir'], rootdir)}"
        parts.append(cache)
    if judge.get("store_dir"):
        parts.append(f"judgment store {_display_path(judge['store_dir'], rootdir)}")
    return ", ".join(parts) or None


def render_sections(report: Mapping[str, Any], tw: LineWriter) -> None:
    """The gates, the comparison with the baseline and the regression gates, each under its separator
    (the part of the report that ``python -m pytest_ragmetrics baseline compare`` prints too)."""
    summary: Mapping[str, Any] = report.get("summary") or {}
    if summary.get("gates"):
        tw.sep("-", "gates")
        _render_gates(tw, summary["gates"])
    comparison = summary.get("baseline")
    if comparison:
        source = comparison.get("source")
        tw.sep("-", f"vs baseline {source}" if source else "vs baseline")
        _render_baseline(tw, comparison, _fullwidth(tw))
    if summary.get("regression_gates"):
        tw.sep("-", "regression gates")
        _render_regression_gates(tw, summary["regression_gates"])


def render_terminal(
    report: Mapping[str, Any],
    tw: LineWriter,
    verbosity: int = 0,
    *,
    rootdir: str | os.PathLike[str] | None = None,
) -> None:
    """Write the ``ragmetrics report`` section of pytest's terminal summary.

    Aligned comparison rows (test, metric[method] and statistic, score, threshold, PASS/FAIL,
    judged/cached), then per-metric aggregates, gates with their margins, the judge's figures, cache
    and store locations, and a hint when the judgment store holds unused entries.
    ``verbosity`` is pytest's (``config.get_verbosity()``): 0 lists the comparisons that did not
    pass, explained (with the sentences the judge picked, for one-sample sentence relevance);
    below 0 only the failing ones; 1 lists and explains every comparison; 2 adds each sample's
    verdicts.
    Cache and store paths inside ``rootdir`` are shown relative to it.
    """
    check_version(report)
    summary: Mapping[str, Any] = report.get("summary") or {}
    rows: list[Mapping[str, Any]] = list(report.get("results") or [])
    width = _fullwidth(tw)
    result = outcome(report)
    tw.sep("=", TITLE, red=not result["passed"], green=result["passed"], bold=True)
    if rows:
        _render_results(tw, rows, verbosity, width)
    elif not error_rows(report):
        tw.line("no ragmetrics comparisons recorded")
    for note in report_notes(report):
        tw.line(note, yellow=note.startswith("labels look stale"))
    if error_rows(report):
        tw.sep("-", "errors")
        for error in error_rows(report):
            tw.line(
                f"ERROR  {error_line(error)}", red=not error.get("xfail"), yellow=bool(error.get("xfail"))
            )
    if summary.get("metrics"):
        tw.sep("-", "metrics")
        _render_metrics(tw, summary["metrics"])
    render_sections(report, tw)
    if summary.get("misled"):
        tw.sep("-", "answers misled by retrieval")
        for entry in summary["misled"]:
            tw.line(one_line(misled_line(entry)), yellow=True)
    if summary.get("judge_check"):
        tw.sep("-", "judge check")
        _render_judge_check(tw, summary["judge_check"], verbosity)
    judge = summary.get("judge")
    unused = summary.get("unused_store_entries") or 0
    if judge or unused or summary.get("judge_warnings"):
        tw.sep("-", "judge")
    if judge:
        for line in _wrap(_judge_parts(judge), width):
            tw.line(line)
        storage = _storage_line(judge, rootdir)
        if storage:
            tw.line(storage)
        if judge.get("partial"):
            tw.line(f"partial figures: {one_line(judge['partial'])}", yellow=True)
    for warning in summary.get("judge_warnings") or []:
        tw.line(f"warning: {warning.get('message')}", yellow=True)
    if unused:
        tw.line(
            f"{format_count(unused)} unused judgment store entries; remove them with: {PRUNE_COMMAND}",
            yellow=True,
        )


def _display_path(path: Any, rootdir: str | os.PathLike[str] | None) -> str:
    text = str(path)
    if rootdir is None:
        return text
    try:
        return str(Path(text).resolve().relative_to(Path(rootdir).resolve()))
    except (ValueError, OSError, RuntimeError):
        # Outside the rootdir (a shared cache in $HOME, say): the absolute path is the useful one. (A
        # symbolic link loop: RuntimeError before Python 3.13.)
        return text


def header_line(settings: Mapping[str, Any], rootdir: str | os.PathLike[str] | None = None) -> str:
    """pytest's report header line, e.g.
    ``ragmetrics: judge gpt-4o-mini, cache readwrite (.pytest_cache/d/ragmetrics), store tests/judgments``.

    ``settings`` has the keys of ``summary["judge"]``: ``model``, ``cache_mode``, ``cache_dir``,
    ``store_dir`` and the configured ``response_format`` (missing or ``None`` ones are left out, and so
    is ``auto``, which the report resolves). Paths inside ``rootdir`` are shown relative
    to it.
    """
    parts = [f"judge {settings.get('model') or 'not configured'}"]
    mode = settings.get("cache_mode")
    if mode:
        cache = f"cache {mode}"
        if settings.get("cache_dir") and mode != "off":
            cache += f" ({_display_path(settings['cache_dir'], rootdir)})"
        parts.append(cache)
    if settings.get("store_dir"):
        parts.append(f"store {_display_path(settings['store_dir'], rootdir)}")
    fmt = settings.get("response_format")
    if fmt and fmt != "auto":  # auto finds the format out while judging: the report says which
        parts.append(f"response format {fmt}")
    return "ragmetrics: " + ", ".join(parts)
