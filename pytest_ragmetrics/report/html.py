"""The HTML report (``--rag-report-html``): one self-contained page, no external resources.

Summary cards, gates, per-metric figures, and a sortable table of comparisons in which every row
opens (``<details>``) onto each sample's verdicts and the judge's reasons.

Safety: questions, contexts and judge reasons are untrusted text (a retrieved chunk may well contain
``<script>``). Every piece of it goes through :func:`html.escape`, and no data is embedded in the
script: the sorter reads ``data-*`` attributes from the DOM. As a second line of defence the page
carries a Content-Security-Policy that allows only its own inline style and script, by hash, so even
markup that slipped through escaping could not run or load anything.

Sorting: click a column header (again to reverse it), or open the page with ``#sort=<key>-<asc|desc>``
(e.g. ``#sort=score-desc``); the keys are ``test``, ``comparison``, ``score``, ``threshold``,
``result`` and ``judge``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping, Sequence
from html import escape
from typing import Any

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
    gate_status,
    judge_figures,
    judge_sources,
    judge_status,
    metric_label,
    misled_line,
    moved_samples,
    outcome,
    picked_sentences,
    regression_gate_detail,
    report_notes,
    row_fails,
    row_status,
    sample_changes,
    score_text,
    verdict_chunks,
)

__all__ = ["SORT_KEYS", "comparison_cell", "test_fragment", "to_html"]

#: Column keys the results table sorts by (``#sort=<key>-<dir>``).
SORT_KEYS: tuple[str, ...] = ("test", "comparison", "score", "threshold", "result", "judge", "delta")

_CSS = """
:root { color-scheme: light dark; --ok: #1a7f37; --bad: #cf222e; --warn: #9a6700; --line: #d0d7de;
  --muted: #656d76; --card: rgba(127, 127, 127, 0.08); }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 1.5rem auto;
  max-width: 1200px; padding: 0 1rem; }
h1 { font-size: 1.5rem; margin: 0 0 0.25rem; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 0.5rem; }
h4 { margin: 0.75rem 0 0.25rem; }
.headline { margin: 0 0 1rem; color: var(--muted); }
.note { margin: 0 0 1rem; padding: 0.5rem 0.8rem; border-left: 4px solid var(--muted);
  background: var(--card); }
.ok { color: var(--ok); } .bad { color: var(--bad); } .warn { color: var(--warn); }
.cards { display: flex; flex-wrap: wrap; gap: 0.75rem; }
.card { background: var(--card); border-radius: 8px; padding: 0.6rem 0.9rem; min-width: 8rem; }
.card .num { font-size: 1.35rem; font-weight: 600; }
.card .label { color: var(--muted); font-size: 0.85rem; }
table { border-collapse: collapse; width: 100%; }
th, td { border-bottom: 1px solid var(--line); padding: 0.3rem 0.5rem; text-align: left;
  vertical-align: top; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; }
th button { font: inherit; font-weight: 600; background: none; border: 0; padding: 0; cursor: pointer;
  color: inherit; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
tbody.result tr.detail td { border-bottom: 2px solid var(--line); padding-top: 0; }
tbody.result.fail tr.main td:first-child { box-shadow: inset 3px 0 var(--bad); }
tbody.result.pass tr.main td:first-child { box-shadow: inset 3px 0 var(--ok); }
tbody.result.xfail tr.main td:first-child { box-shadow: inset 3px 0 var(--warn); }
summary { cursor: pointer; color: var(--muted); }
.test { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; overflow-wrap: anywhere;
  min-width: 20em; }
table.verdicts { margin: 0.25rem 0 0.5rem; font-size: 0.92em; }
table.verdicts tr.weak td { background: rgba(207, 34, 46, 0.07); }
dl.figures { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dl.figures dt { color: var(--muted); } dl.figures dd { margin: 0; }
code { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; }
.picked { color: var(--muted); margin-top: 0.2rem; }
"""

# The sorter. It reads values from data-* attributes only; nothing from the report is in here.
_JS = """
(function () {
  "use strict";
  var table = document.getElementById("results-table");
  if (!table) { return; }
  var heads = Array.prototype.slice.call(table.querySelectorAll("thead th[data-key]"));
  function index(body) { return parseInt(body.getAttribute("data-index"), 10); }
  function value(body, key, type) {
    var v = body.getAttribute("data-" + key);
    if (type === "num") { return v === null || v === "" ? null : parseFloat(v); }
    return v === null ? "" : v;
  }
  function sortBy(key, dir) {
    var th = heads.filter(function (h) { return h.getAttribute("data-key") === key; })[0];
    if (!th) { return false; }
    var type = th.getAttribute("data-type");
    var sign = dir === "desc" ? -1 : 1;
    var bodies = Array.prototype.slice.call(table.tBodies);
    bodies.sort(function (a, b) {
      var x = value(a, key, type), y = value(b, key, type), c;
      if (type === "num") {
        /* rows without a value go last whichever the direction */
        if (x === null || y === null) { c = (x === null ? 1 : 0) - (y === null ? 1 : 0); }
        else { c = sign * (x - y); }
      } else {
        c = sign * (x < y ? -1 : x > y ? 1 : 0);
      }
      return c || index(a) - index(b);
    });
    bodies.forEach(function (b) { table.appendChild(b); });
    heads.forEach(function (h) {
      h.setAttribute("aria-sort", h !== th ? "none" : dir === "desc" ? "descending" : "ascending");
    });
    table.setAttribute("data-sorted", key + "-" + dir);
    return true;
  }
  function fromHash() {
    var m = /^#sort=([a-z]+)-(asc|desc)$/.exec(window.location.hash);
    if (m) { sortBy(m[1], m[2]); }
  }
  heads.forEach(function (th) {
    th.querySelector("button").addEventListener("click", function () {
      var key = th.getAttribute("data-key");
      var dir = th.getAttribute("aria-sort") === "ascending" ? "desc" : "asc";
      if (sortBy(key, dir)) {
        try { history.replaceState(null, "", "#sort=" + key + "-" + dir); } catch (e) { /* file:// quirks */ }
      }
    });
  });
  window.addEventListener("hashchange", fromHash);
  fromHash();
})();
"""


_STATUS_CLASS = {"pass": "ok", "fail": "bad", "xfail": "warn"}


def _csp_hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


_CSP = (
    f"default-src 'none'; style-src {_csp_hash(_CSS)}; script-src {_csp_hash(_JS)}; "
    "img-src 'none'; form-action 'none'; base-uri 'none'"
)


def _e(value: Any) -> str:
    """Escape anything for HTML text or a quoted attribute."""
    return escape("" if value is None else str(value), quote=True)


def _breakable_nodeid(nodeid: str) -> str:
    """The escaped node id, with a line-break opportunity after each ``::``."""
    return "::<wbr>".join(_e(part) for part in nodeid.split("::"))


def _num_attr(value: Any) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return repr(float(value))
    return ""


def _cards(report: Mapping[str, Any]) -> str:
    result = outcome(report)
    summary = report.get("summary") or {}
    judge = summary.get("judge") or {}
    cards: list[tuple[str, str, str]] = []
    if result["comparisons"]:
        ok = result["comparisons"] - result["comparisons_failed"] - result["comparisons_xfailed"]
        css = "ok" if not result["comparisons_failed"] else "bad"
        cards.append((f"{ok}/{result['comparisons']}", "comparisons passed", css))
    if result["gates"]:
        ok = result["gates"] - result["gates_failed"]
        css = "ok" if not result["gates_failed"] else "bad"
        cards.append((f"{ok}/{result['gates']}", "gates passed", css))
    if summary.get("tests"):
        css = "bad" if result["tests_failed"] else "ok"
        cards.append(
            (
                f"{result['tests_passed']}/{result['tests_passed'] + result['tests_failed']}",
                "tests passed",
                css,
            )
        )
    if judge:
        # Where the judgments came from, as in the judge section below (same labels, same order).
        cards += [(format_count(count), label, "") for label, _, _, count in judge_sources(judge)]
        cost = dict(judge_figures(judge)).get("cost")
        if cost is not None:
            cards.append((cost, "judge cost", ""))
    parts = [
        f'<div class="card"><div class="num {css}">{_e(num)}</div><div class="label">{_e(label)}</div></div>'
        for num, label, css in cards
    ]
    return '<section class="cards">' + "".join(parts) + "</section>"


def _gates(gates: list[Mapping[str, Any]]) -> str:
    rows = []
    for gate in gates:
        passed = bool(gate.get("passed"))
        status = gate_status(gate)
        note = f' <span class="bad">{_e(gate["reason"])}</span>' if gate.get("reason") else ""
        rows.append(
            f'<tr class="{"pass" if passed else "fail"}">'
            f'<td class="{"ok" if passed else "bad"}">{status}</td>'
            f"<td><code>{_e(gate.get('spec', ''))}</code>{note}</td>"
            f'<td class="num">{_e(format_score(gate.get("value")))}</td>'
            f'<td class="num">{_e(count_text(gate))}</td>'
            f'<td class="num">{_e(format_margin(gate.get("margin")))}</td></tr>'
        )
    return (
        '<section id="gates"><h2>Gates</h2><table><thead><tr><th>Result</th><th>Gate</th>'
        '<th class="num">Value</th><th class="num">n</th><th class="num">Margin</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _judge_check(check: Mapping[str, Any], warnings: list[Mapping[str, Any]]) -> str:
    source, model = _e(check.get("source", "?")), _e(check.get("model", "?"))
    head = f"<p>Labelled set <code>{source}</code>, judge {model}.</p>"
    notes = "".join(f'<p class="bad">Warning: {_e(w.get("message", ""))}</p>' for w in warnings)
    if not check:  # no labelled set: the warnings about answers nearly all alike, alone
        return f'<section id="judge-check"><h2>Judge answers</h2>{notes}</section>'
    if check.get("error"):
        return (
            f'<section id="judge-check"><h2>Judge check</h2>{head}'
            f'<p class="bad">The judge check could not run: {_e(check["error"])}</p>{notes}</section>'
        )
    kinds = "".join(
        "<tr>"
        + "".join(f"<td>{_e(k.get(name, '?'))}</td>" for name in ("kind", "model", "unit"))
        + f'<td class="num">{_e(format_count(k.get("n", 0)))}</td>'
        + "".join(
            f'<td class="num">{_e(format_score(k.get(name)) if k.get(name) is not None else "-")}</td>'
            for name in ("accuracy", "kappa", "weighted_kappa", "f1")
        )
        + f'<td class="num">{_e(format_count(len(k.get("disagreements") or [])))}</td>'
        + f'<td class="num">{_e(format_count(k.get("errors") or 0))}</td></tr>'
        for k in check.get("kinds") or []
    )
    items = "".join(
        f'<li class="bad">{_e(k.get("kind", "?"))} item {_e(repr(e.get("id")))} ({_e(e.get("where"))}): '
        f"no usable answer: {_e(e.get('reason', ''))}</li>"
        for k in check.get("kinds") or []
        for e in k.get("error_items") or []
    )
    if check.get("item_errors"):
        items = f'<p class="bad">{_e(check["item_errors"])}</p><ul>{items}</ul>'
    elif items:
        items = f"<ul>{items}</ul>"
    return (
        f'<section id="judge-check"><h2>Judge check</h2>{head}<table><thead><tr><th>Kind</th><th>Judge</th>'
        '<th>Unit</th><th class="num">n</th><th class="num">Accuracy</th><th class="num">Kappa</th>'
        '<th class="num">Weighted kappa</th><th class="num">F1</th><th class="num">Disagreements</th>'
        f'<th class="num">No usable answer</th></tr></thead><tbody>{kinds}</tbody></table>{items}'
        f"{_floors(check.get('floors') or [])}{notes}</section>"
    )


def _controls(section: Mapping[str, Any]) -> str:
    head = (
        f"<p>{_e(format_count(section.get('pairs', 0)))} controls, judge {_e(section.get('model') or '?')}: "
        "negative ones pair a question with a chunk retrieved for an unrelated sample (a judge that tells "
        "chunks apart finds few of them useful, relevant or needed), positive ones offer a sample its own "
        "reference (it finds nearly all so).</p>"
    )
    if section.get("error"):
        return (
            f'<section id="judge-controls"><h2>Controls</h2>{head}'
            f'<p class="bad">The controls could not be judged: {_e(section["error"])}</p></section>'
        )
    kinds = list(section.get("kinds") or [])
    rows = "".join(
        f"<tr><td>{_e(k.get('kind', '?'))}</td><td>{_e(control_share(k))}</td>"
        f'<td class="num">{_e(format_count(k.get("errors") or 0))}</td></tr>'
        for k in kinds
    )
    reasons = "".join(
        f'<li class="bad">{_e(k.get("kind", "?"))} not judged: {_e(reason)}</li>'
        for k in kinds
        for reason in k.get("error_reasons") or []
    )
    warnings = "".join(f'<p class="warn">Warning: {_e(w)}</p>' for w in section.get("warnings") or [])
    return (
        f'<section id="judge-controls"><h2>Controls</h2>{head}<table><thead><tr><th>Kind</th>'
        f'<th>Judged</th><th class="num">Not judged</th></tr></thead><tbody>{rows}</tbody></table>'
        + (f"<ul>{reasons}</ul>" if reasons else "")
        + warnings
        + _floors(section.get("floors") or [])
        + "</section>"
    )


def _floors(floors: Sequence[Mapping[str, Any]]) -> str:
    """The table of the judge check's or the controls' floors, each passed or failed; "" when none."""
    if not floors:
        return ""
    rows = "".join(
        f'<tr class="{"pass" if f.get("passed") else "fail"}">'
        f'<td class="{"ok" if f.get("passed") else "bad"}">{"PASS" if f.get("passed") else "FAIL"}</td>'
        f"<td><code>{_e(f.get('spec', ''))}</code> {_e(f.get('reason') or '')}</td>"
        f'<td class="num">{_e(format_score(f.get("value")))}</td></tr>'
        for f in floors
    )
    return (
        '<table><thead><tr><th>Result</th><th>Floor</th><th class="num">Value</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _corrected_cell(m: Mapping[str, Any]) -> str:
    corrected = m.get("corrected")
    if not corrected:
        return "<td></td>"
    return (
        f'<td class="num" title="{_e(corrected_detail(corrected))}">{_e(corrected_text(corrected))}'
        f"<br><small>{_e(corrected_detail(corrected))}</small></td>"
    )


def _metrics(metrics: list[Mapping[str, Any]]) -> str:
    corrected = any(m.get("corrected") for m in metrics)
    rows = [
        f"<tr><td>{_e(metric_label(str(m.get('metric', '?')), m.get('method')))}</td>"
        f'<td class="num">{_e(count_text(m))}</td>'
        f'<td class="num">{_e(format_score(m.get("mean")))}</td>'
        f'<td class="num">{_e(format_score(m.get("min")))}</td>'
        f'<td class="num">{_e(format_score(m.get("max")))}</td>'
        + (_corrected_cell(m) if corrected else "")
        + "</tr>"
        for m in metrics
    ]
    return (
        '<section id="metrics"><h2>Metrics</h2><table><thead><tr><th>Metric</th><th class="num">n</th>'
        '<th class="num">Mean</th><th class="num">Min</th><th class="num">Max</th>'
        + ('<th class="num">Corrected mean [95% CI]</th>' if corrected else "")
        + "</tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table></section>"
    )


def _picked(verdict: Mapping[str, Any], method: str | None) -> str:
    """The sentences the judge picked from a chunk, quoted, under the chunk's text (sentence method)."""
    if method != "sentence":
        return ""
    picked = picked_sentences(verdict)
    quoted = " ".join(f"<q>{_e(s)}</q>" for s in picked) if picked else "none"
    return f'<div class="picked">picked: {quoted}</div>'


def _sample(sample: Mapping[str, Any], method: str | None = None) -> str:
    title = f"Sample {sample.get('id', '?')}: score {score_text(sample)}"
    if sample.get("mode"):
        title += f" ({sample['mode']})"
    out = [f"<h4>{_e(title)}</h4>"]
    if sample.get("explanation"):
        out.append(f"<p>{_e(sample['explanation'])}</p>")
    models = sample.get("models")
    if models:
        listed = ", ".join(f"{_e(name)} {_e(format_score(score))}" for name, score in sorted(models.items()))
        out.append(f"<p>By judge model: {listed}</p>")
    verdicts = sample.get("verdicts") or []
    if verdicts:
        rows = []
        for v in verdicts:
            value = v.get("value")
            weak = isinstance(value, (int, float)) and value < 1
            rows.append(
                f'<tr class="{"weak" if weak else "full"}"><td>{_e(v.get("item", ""))}</td>'
                f'<td class="num">{_e(v.get("index", ""))}</td>'
                f'<td class="num">{_e(v.get("rank") if v.get("rank") is not None else "")}</td>'
                f"<td>{_e(v.get('text', ''))}{_picked(v, method)}</td>"
                f"<td>{_e(str(v.get('verdict', '')) + verdict_chunks(v))}</td>"
                f'<td class="num">{_e(format_score(value, 2) if isinstance(value, (int, float)) else "")}'
                "</td>"
                f"<td>{_e(v.get('reason') or '')}</td></tr>"
            )
        out.append(
            '<table class="verdicts"><thead><tr><th>Item</th><th class="num">#</th><th class="num">Rank</th>'
            '<th>Text</th><th>Verdict</th><th class="num">Value</th><th>Reason</th></tr></thead><tbody>'
            + "".join(rows)
            + "</tbody></table>"
        )
    return "".join(out)


#: ``(metric, method, sample id)`` -> (baseline score, current score) of every matched sample.
_Pairs = Mapping[tuple[str, Any, str], tuple[float, float]]


def _pairs(comparison: Mapping[str, Any] | None) -> _Pairs:
    if not comparison:
        return {}
    return {
        (str(m.get("metric")), m.get("method"), str(p.get("id"))): (p["baseline"], p["current"])
        for m in comparison.get("metrics") or []
        for p in m.get("pairs") or []
    }


def _row_delta(row: Mapping[str, Any], pairs: _Pairs) -> tuple[float | None, str]:
    """The change of a comparison's samples since the baseline: the sample's own change, or the mean
    change of those of its samples the baseline had."""
    moved = [
        pairs[key]
        for sample in row.get("samples") or []
        if (key := (str(row.get("metric")), row.get("method"), str(sample.get("id")))) in pairs
    ]
    if not moved:
        return None, "new"
    delta = sum(now - before for before, now in moved) / len(moved)
    if len(moved) == 1:
        return delta, f"{format_margin(delta)} (was {format_score(moved[0][0])})"
    return delta, f"{format_margin(delta)} (mean of {len(moved)})"


def _result(index: int, row: Mapping[str, Any], pairs: _Pairs | None = None) -> str:
    passed = bool(row.get("passed"))
    status = row_status(row)
    css = "pass" if passed else "fail" if row_fails(row) else "xfail"
    label = comparison_label(row)
    judge = judge_status(row)
    attrs = {
        "index": str(index),
        "test": str(row.get("nodeid", "")),
        "comparison": label,
        "score": _num_attr(row.get("score")),
        "threshold": _num_attr(row.get("threshold")),
        # Sorting ascending by result puts what fails the run first.
        "result": {"fail": "0", "xfail": "1", "pass": "2"}[css],
        "judge": judge,
    }
    delta_cell = ""
    if pairs is not None:
        delta, shown = _row_delta(row, pairs)
        attrs["delta"] = _num_attr(delta)
        css_delta = "bad" if delta is not None and delta < -1e-9 else "ok" if delta and delta > 1e-9 else ""
        delta_cell = f'<td class="num {css_delta}">{_e(shown)}</td>'
    data = " ".join(f'data-{key}="{_e(value)}"' for key, value in attrs.items())
    main = (
        '<tr class="main">'
        f'<td class="test">{_breakable_nodeid(str(row.get("nodeid", "?")))}</td><td>{_e(label)}</td>'
        f'<td class="num">{_e(score_text(row))}</td>'
        f'<td class="num">{_e(format_threshold(row.get("op"), row.get("threshold")))}</td>'
        f'<td class="{_STATUS_CLASS[css]}">{status}</td><td>{judge}</td>{delta_cell}</tr>'
    )
    samples = row.get("samples") or []
    what = row.get("explanation") or f"{len(samples)} sample{'s' if len(samples) != 1 else ''}"
    body = "".join(_sample(sample, row.get("method")) for sample in samples) or (
        "<p>No per-sample details recorded.</p>"
    )
    detail = (
        f'<tr class="detail"><td colspan="{6 if pairs is None else 7}"><details>'
        f"<summary>{_e(what)}</summary>{body}</details></td></tr>"
    )
    return f'<tbody class="result {css}" {data}>{main}{detail}</tbody>'


def _results(rows: list[Mapping[str, Any]], comparison: Mapping[str, Any] | None = None) -> str:
    columns = [
        ("test", "text", "Test", ""),
        ("comparison", "text", "Comparison", ""),
        ("score", "num", "Score", "num"),
        ("threshold", "num", "Threshold", "num"),
        ("result", "num", "Result", ""),
        ("judge", "text", "Judge", ""),
    ]
    pairs = _pairs(comparison) if comparison else None
    if pairs is not None:
        columns.append(("delta", "num", "vs baseline", "num"))
    heads = "".join(
        f'<th data-key="{key}" data-type="{kind}" aria-sort="none"{f" class={css!r}" if css else ""}>'
        f'<button type="button">{title}</button></th>'
        for key, kind, title, css in columns
    )
    bodies = "".join(_result(i, row, pairs) for i, row in enumerate(rows))
    return (
        '<section id="results"><h2>Comparisons</h2>'
        '<p class="headline">Click a column to sort; open a row for its samples, verdicts and reasons.</p>'
        f'<table id="results-table"><thead><tr>{heads}</tr></thead>{bodies}</table></section>'
    )


def _baseline(comparison: Mapping[str, Any]) -> str:
    metrics: list[Mapping[str, Any]] = list(comparison.get("metrics") or [])
    rows = []
    sections = []
    for m in metrics:
        label = str(m.get("label") or metric_label(str(m.get("metric", "?")), m.get("method")))
        verdict = str(m.get("verdict", "?"))
        css = "bad" if verdict in ("worse", "not comparable") else "ok" if verdict == "better" else ""
        anchor = "baseline-" + "".join(ch if ch.isalnum() else "-" for ch in label)
        rows.append(
            f'<tr><td><a href="#{_e(anchor)}">{_e(label)}</a></td>'
            f'<td class="num">{_e(format_count(m.get("n", 0)))}</td>'
            f'<td class="num">{_e(format_score(m.get("baseline_mean")))}</td>'
            f'<td class="num">{_e(format_score(m.get("current_mean")))}</td>'
            f'<td class="num">{_e(format_delta(m))}</td>'
            f'<td class="num">{_e(format_p(m.get("p_value")))}</td>'
            f'<td class="{css}">{_e(verdict)}</td></tr>'
        )
        facts = [f"<p>{_e(m['reason'])}</p>"] if m.get("reason") else []
        test = m.get("test") or {}
        if test:
            facts.append(
                f"<p>Paired sign-flip permutation test ({_e(test.get('method'))}, "
                f"{_e(format_count(test.get('permutations')))} sign assignments); "
                f"{_e(format_count(m.get('n', 0)))} matched samples; largest single drop "
                f"{_e(format_score(m.get('max_drop')))}.</p>"
            )
        changes = sample_changes(m, limit=50)
        if changes:
            facts.append(f"<p>Not compared: {_e(changes)}</p>")
        for key, title in (("regressed", "Most regressed"), ("improved", "Most improved")):
            if m.get(key):
                items = "".join(f"<li>{_e(text)}</li>" for text in moved_samples(m[key]))
                facts.append(f"<h4>{title}</h4><ul>{items}</ul>")
        sections.append(f'<section id="{_e(anchor)}"><h3>{_e(label)}</h3>{"".join(facts)}</section>')
    source = comparison.get("source")
    intro = f'<p class="headline">Compared with <code>{_e(source)}</code>.</p>' if source else ""
    if comparison.get("refused"):
        refused = _e(f"Refused, scored differently: {comparison['refused']}")
        intro += f'<p class="note bad" id="baseline-refused">{refused}</p>'
    differences = "".join(f"<li>{_e(d)}</li>" for d in comparison.get("differences") or ())
    if differences:
        intro += f'<ul id="baseline-differences">{differences}</ul>'
    return (
        f'<section id="baseline"><h2>vs baseline</h2>{intro}<table><thead><tr><th>Metric</th>'
        '<th class="num">n</th><th class="num">Baseline</th><th class="num">Current</th>'
        '<th class="num">Delta [95% CI]</th><th class="num">p</th><th>Verdict</th></tr></thead><tbody>'
        + "".join(rows)
        + "</tbody></table>"
        + "".join(sections)
        + "</section>"
    )


def _regression_gates(gates: list[Mapping[str, Any]]) -> str:
    rows = []
    for gate in gates:
        passed = bool(gate.get("passed"))
        status = gate_status(gate)
        rows.append(
            f'<tr class="{"pass" if passed else "fail"}">'
            f'<td class="{"ok" if passed else "bad"}">{status}</td>'
            f"<td><code>{_e(gate.get('spec', ''))}</code></td>"
            f"<td>{_e(regression_gate_detail(gate))}</td></tr>"
        )
    return (
        '<section id="regression-gates"><h2>Regression gates</h2><table><thead><tr><th>Result</th>'
        "<th>Gate</th><th>Detail</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></section>"
    )


def _judge(summary: Mapping[str, Any], include_timing: bool) -> str:
    judge = summary.get("judge") or {}
    items: list[tuple[str, str]] = []
    if judge.get("model"):
        items.append(("judge model", str(judge["model"])))
    items += judge_figures(judge, include_timing=include_timing) if judge else []
    if judge.get("cache_mode"):
        cache = str(judge["cache_mode"])
        if judge.get("cache_dir"):
            cache += f" ({judge['cache_dir']})"
        items.append(("cache", cache))
    if judge.get("store_dir"):
        items.append(("judgment store", str(judge["store_dir"])))
    unused = summary.get("unused_store_entries") or 0
    if unused:
        items.append(("unused store entries", f"{format_count(unused)} (remove with: {PRUNE_COMMAND})"))
    body = "".join(f"<dt>{_e(label)}</dt><dd>{_e(text)}</dd>" for label, text in items)
    return f'<section id="judge"><h2>Judge</h2><dl class="figures">{body}</dl></section>'


def to_html(
    report: Mapping[str, Any], *, title: str = "ragmetrics report", include_timing: bool = True
) -> str:
    """Render a run report as one self-contained HTML page (inline CSS and JS, nothing fetched).

    All report text is escaped; see the module docstring for the page's safety measures and for
    sorting by URL hash. ``include_timing`` shows the judge's wall-clock time.
    """
    check_version(report)
    summary: Mapping[str, Any] = report.get("summary") or {}
    rows: list[Mapping[str, Any]] = list(report.get("results") or [])
    result = outcome(report)
    if result["comparisons"] == 0 and result["gates"] == 0 and not result["errors"] and result["passed"]:
        headline = "No comparisons recorded."
    else:
        bits = []
        if result["errors"]:
            bits.append(f"{result['errors']} test{'s' if result['errors'] != 1 else ''} stopped by an error")
        if result["comparisons"]:
            bits.append(f"{result['comparisons_failed']} of {result['comparisons']} comparisons failed")
        if result["comparisons_xfailed"]:
            bits.append(f"{result['comparisons_xfailed']} failed as expected (xfail)")
        if result["gates"]:
            bits.append(f"{result['gates_failed']} of {result['gates']} gates failed")
        check = summary.get("judge_check")
        if check and not check.get("passed"):
            bits.append("the judge check failed")
        if controls_failed(report):
            bits.append("the controls failed")
        if cap_stop(report):
            bits.append("the judge spending cap stopped the run")
        if baseline_refused(report):
            bits.append("the baseline was refused")
        headline = ("Passed: " if result["passed"] else "Failed: ") + ", ".join(bits) + "."
    status = "ok" if result["passed"] else "bad"
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_e(_CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f'<header><h1 class="{status}">{_e(title)}</h1><p class="headline" id="headline">{_e(headline)}</p>'
        "</header>",
        _cards(report),
        *(f'<p class="note">{_e(note)}</p>' for note in report_notes(report)),
    ]
    stopped = cap_stop(report)
    if stopped:
        parts.append(f'<p class="note bad" id="spending-cap">{_e(stopped[0].upper() + stopped[1:])}.</p>')
    if error_rows(report):
        items = "".join(
            f'<li class="{"warn" if e.get("xfail") else "bad"}">{_e(error_line(e))}</li>'
            for e in error_rows(report)
        )
        parts.append(f'<section id="errors"><h2>Errors</h2><ul>{items}</ul></section>')
    if summary.get("gates"):
        parts.append(_gates(summary["gates"]))
    if summary.get("regression_gates"):
        parts.append(_regression_gates(summary["regression_gates"]))
    if summary.get("baseline"):
        parts.append(_baseline(summary["baseline"]))
    if summary.get("metrics"):
        parts.append(_metrics(summary["metrics"]))
    if rows:
        parts.append(_results(rows, summary.get("baseline")))
    if summary.get("misled"):
        items = "".join(f"<li>{_e(misled_line(entry))}</li>" for entry in summary["misled"])
        parts.append(f'<section id="misled"><h2>Answers misled by retrieval</h2><ul>{items}</ul></section>')
    if summary.get("judge_check") or summary.get("judge_warnings"):
        parts.append(_judge_check(summary.get("judge_check") or {}, summary.get("judge_warnings") or []))
    if summary.get("judge_controls"):
        parts.append(_controls(summary["judge_controls"]))
    if summary.get("judge") or summary.get("unused_store_entries"):
        parts.append(_judge(summary, include_timing))
    parts.append(f"<script>{_JS}</script></body></html>")
    return "\n".join(parts) + "\n"


def comparison_cell(rows: Sequence[Mapping[str, Any]]) -> str:
    """One test's comparisons in a line each (``FAIL context_recall 0.500 >= 0.8``), escaped, for a
    table cell of another report (pytest-html's results table)."""
    lines = []
    for row in rows:
        css = "pass" if row.get("passed") else "fail" if row_fails(row) else "xfail"
        threshold = format_threshold(row.get("op"), row.get("threshold"))
        lines.append(
            f'<span class="{_STATUS_CLASS[css]}">{row_status(row)}</span> {_e(comparison_label(row))} '
            f"{_e(score_text(row))} {_e(threshold)}"
        )
    return "<br>".join(lines)


def test_fragment(rows: Sequence[Mapping[str, Any]]) -> str:
    """One test's comparisons as an HTML fragment for another report (pytest-html's extras): each
    comparison's outcome and explanation, then every sample's verdicts and the judge's reasons.

    Everything is escaped as in :func:`to_html`; the fragment has no script and no style sheet.
    """
    parts = ['<div class="ragmetrics">']
    for row in rows:
        parts.append(
            f"<p><strong>{_e(row_status(row))}</strong> {_e(comparison_label(row))} = "
            f"{_e(score_text(row))}, expected "
            f"{_e(format_threshold(row.get('op'), row.get('threshold')))}"
            + (f": {_e(row['explanation'])}" if row.get("explanation") else "")
            + "</p>"
        )
        parts.extend(_sample(sample, row.get("method")) for sample in row.get("samples") or [])
    parts.append("</div>")
    return "".join(parts)
