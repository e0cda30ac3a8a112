"""The Markdown report for CI job summaries: content, and escaping of user text."""

from __future__ import annotations

import re

import pytest
from report_example import example_report

from pytest_ragmetrics.report.markdown import escape_markdown, to_markdown


def _section(text: str, title: str) -> str:
    """The lines under ``### title`` up to the next heading."""
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^#|\Z)", text, re.S | re.M)
    assert match, f"no section {title!r} in:\n{text}"
    return match.group(1)


def _cells(line: str) -> list[str]:
    """A GFM table row split on unescaped pipes, as GitHub splits it."""
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


@pytest.mark.parametrize(
    ("raw", "escaped"),
    [
        ("a | b", r"a \| b"),
        ("<b>bold</b>", "&lt;b&gt;bold&lt;/b&gt;"),
        ("<script>alert(1)</script>", "&lt;script&gt;alert(1)&lt;/script&gt;"),
        ("**x** _y_ `z`", r"\*\*x\*\* \_y\_ \`z\`"),
        ("[link](http://evil)", r"\[link\](http://evil)"),
        ("cost $5 and $6", r"cost \$5 and \$6"),
        ("~~gone~~", r"\~\~gone\~\~"),
        ("back\\slash", r"back\\slash"),
        ("line one\nline two\r\n\tthree", "line one line two three"),
        ("AT&T", "AT&amp;T"),
        (None, "None"),
    ],
)
def test_escape_markdown(raw, escaped):
    assert escape_markdown(raw) == escaped


def test_headline_for_a_failing_run():
    text = to_markdown(example_report())
    assert text.splitlines()[0] == "## ❌ ragmetrics: 1 of 3 comparisons failed, 1 of 2 gates failed"
    assert "Tests: 2 passed, 1 failed" in text


def test_headline_for_a_passing_run():
    report = example_report()
    report["results"] = [row for row in report["results"] if row["passed"]]
    report["summary"]["gates"] = report["summary"]["gates"][:1]
    text = to_markdown(report)
    assert text.splitlines()[0] == "## ✅ ragmetrics: all 2 comparisons passed, all 1 gates passed"
    assert "### Failing comparisons" not in text


def test_gates_table_with_marks_values_and_margins():
    gates = _section(to_markdown(example_report()), "Gates").strip().splitlines()
    assert _cells(gates[0]) == ["", "Gate", "Value", "n", "Margin"]
    assert _cells(gates[2]) == ["✅", "context\\_precision mean &gt;= 0.80", "0.833", "1", "+0.033"]
    assert _cells(gates[3]) == ["❌", "context\\_recall min &gt;= 0.6", "0.500", "1", "-0.100"]


def test_gate_without_evaluations_shows_its_reason():
    report = example_report()
    report["summary"]["gates"].append(
        {"spec": "context_relevance mean >= 0.5", "metric": "context_relevance", "method": None,
         "stat": "mean", "op": ">=", "threshold": 0.5, "value": None, "n": 0, "passed": False,
         "margin": None, "reason": "no recorded evaluations of context_relevance in this run"}
    )  # fmt: skip
    last = _section(to_markdown(report), "Gates").strip().splitlines()[-1]
    cells = _cells(last)
    assert cells[0] == "❌"
    assert cells[2] == "n/a"
    assert "no recorded evaluations of context\\_relevance" in cells[4]


def test_metrics_table():
    rows = _section(to_markdown(example_report()), "Metrics").strip().splitlines()
    assert _cells(rows[0]) == ["Metric", "n", "Mean", "Min", "Max"]
    assert _cells(rows[-1]) == ["context\\_relevance\\[graded\\]", "2", "0.625", "0.500", "0.750"]


def test_failing_comparisons_with_explanations_and_verdict_reasons():
    section = _section(to_markdown(example_report()), "Failing comparisons")
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert len(table) == 3  # header, rule, the one failing comparison
    assert _cells(table[2]) == [
        "tests/test\\_rag.py::test\\_recall\\[q1\\]",
        "context\\_recall",
        "0.500",
        "&gt;= 0.8",
        "reference sentence 2 'Its capital is Paris.' is not supported by any context",
    ]
    assert "the contexts never name the capital" in section
    assert "<summary>Verdicts: tests/test_rag.py::test_recall[q1] · context_recall</summary>" in section
    # Passing comparisons are not listed as failures, and supported verdicts are not listed as causes.
    assert "test\\_precision" not in section
    assert "France is in Europe" not in section


def test_judge_figures():
    judge = _section(to_markdown(example_report()), "Judge")
    figures = {cells[0]: cells[1] for cells in map(_cells, judge.strip().splitlines()[2:])}
    assert figures["judge model"] == "gpt-4o-mini"
    assert figures["judge calls"] == "3"
    assert figures["cache hits"] == "40"
    assert figures["store hits"] == "2"
    assert figures["tokens"] == "1,500 (1,200 prompt + 300 completion)"
    assert figures["tokens saved"] == "9,000"
    assert figures["cost"] == "\\$0.00036"
    assert figures["cache"] == "readwrite (.pytest\\_cache/d/ragmetrics)"
    assert figures["judgment store"] == "tests/judgments"
    assert figures["unused store entries"] == "2 (remove with `python -m pytest_ragmetrics cache prune`)"


def test_unpriced_judge_and_clean_store_are_left_out():
    report = example_report()
    report["summary"]["judge"]["cost"] = None
    report["summary"]["unused_store_entries"] = 0
    judge = _section(to_markdown(report), "Judge")
    assert "cost" not in judge
    assert "unused" not in judge


def test_user_text_cannot_break_tables_or_inject_markup():
    report = example_report()
    row = report["results"][1]
    row["nodeid"] = "tests/test_x.py::test_y[a|b]"
    row["explanation"] = "chunk says <b>bold</b> | **not** a cell\nnew line <script>alert(1)</script>"
    row["samples"][0]["verdicts"][1]["reason"] = "reason with | pipe and <img src=x onerror=alert(1)>"
    text = to_markdown(report)
    failures = _section(text, "Failing comparisons")
    table = [line for line in failures.splitlines() if line.startswith("|")]
    assert len(table) == 3
    assert all(len(_cells(line)) == 5 for line in table)
    assert "<b>" not in text
    assert "<script>" not in text
    assert "<img" not in text
    assert "&lt;b&gt;bold&lt;/b&gt; \\| \\*\\*not\\*\\* a cell new line &lt;script&gt;" in text
    # The verdict summary sits in an HTML block, so it is HTML-escaped rather than Markdown-escaped.
    assert "<summary>Verdicts: tests/test_x.py::test_y[a|b] · context_recall</summary>" in text


def test_failures_beyond_the_limit_are_counted_not_listed():
    report = example_report()
    failing = report["results"][1]
    report["results"] = [dict(failing, nodeid=f"tests/t.py::test_{i}") for i in range(5)]
    text = to_markdown(report, max_failures=2)
    table = [
        line for line in _section(text, "Failing comparisons").splitlines() if line.startswith("| tests")
    ]
    assert len(table) == 2
    assert "…and 3 more failing comparisons" in text


def test_xfail_comparisons_do_not_fail_the_run():
    report = example_report()
    report["results"][1]["xfail"] = True
    report["summary"]["gates"] = []
    text = to_markdown(report)
    assert text.splitlines()[0] == (
        "## ✅ ragmetrics: 2 of 3 comparisons passed (1 in xfail tests failed as expected)"
    )
    assert "### Failing comparisons" not in text


def test_empty_report():
    text = to_markdown({"version": 1, "results": [], "summary": {}})
    assert text == "## ragmetrics: no comparisons recorded\n"


def test_unsupported_version_is_refused():
    with pytest.raises(ValueError, match="version"):
        to_markdown({"version": 99})


def test_sentence_relevance_failures_quote_the_sentences_the_judge_picked():
    report = example_report()
    row = report["results"][1]
    row.update(method="sentence", metric="context_relevance")
    row["samples"][0]["verdicts"] = [
        {"item": "chunk", "index": 1, "rank": 1, "text": "Paris is in France. It has a river.",
         "verdict": "1/2 sentences needed", "value": 0.5, "reason": "the location", "extracted": ["Paris is in France."]},
        {"item": "chunk", "index": 2, "rank": 2, "text": "Bread is *cheap*.",
         "verdict": "0/1 sentences needed", "value": 0.0, "reason": "off topic"},
    ]  # fmt: skip
    text = to_markdown(report)
    assert "**1/2 sentences needed** — the location; picked “Paris is in France.”" in text
    assert "**0/1 sentences needed** — off topic; picked none" in text


def _notes(text: str, title: str) -> list[str]:
    """The list items under ``### title``."""
    return [line for line in _section(text, title).splitlines() if line.startswith("- ")]


def test_a_regression_gate_note_quotes_the_gate_line_as_written_in_its_code_span():
    """Markdown reads no escape inside a code span: an escaped gate line showed ``\\_`` and ``&lt;``."""
    report = example_report()
    spec = "context_recall mean drop <= 0.02 at p < 0.05"
    report["summary"]["regression_gates"] = [
        {"spec": spec, "passed": True, "value": 0.0, "delta": 0.0, "p_value": 1.0, "n": 15, "changed_n": 0}
    ]
    notes = _notes(to_markdown(report), "Regression gates")
    assert notes == [f"- `{spec}`: can see: 0 of 15 matched samples changed"]
    report["summary"]["regression_gates"][0]["spec"] = "a `quoted` <gate>"  # a backtick would end the span
    notes = _notes(to_markdown(report), "Regression gates")
    assert notes == [r"- a \`quoted\` &lt;gate&gt;: can see: 0 of 15 matched samples changed"]
