"""The terminal summary section and the report header line."""

from __future__ import annotations

import io
from typing import Any

import pytest
from report_example import example_report

from pytest_ragmetrics.report.cli import TextWriter
from pytest_ragmetrics.report.terminal import header_line, render_terminal


def render(report: dict[str, Any], verbosity: int = 0, width: int = 120) -> list[str]:
    """The section as plain lines, rendered through the plain-text writer of the commands."""
    out = io.StringIO()
    tw = TextWriter(out)
    tw.fullwidth = width
    render_terminal(report, tw, verbosity)
    return out.getvalue().splitlines()


class RecordingWriter:
    """Records each line with the markup it was asked for."""

    fullwidth = 120

    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, bool]]] = []

    def line(self, s: str = "", **markup: bool) -> None:
        self.lines.append((s, markup))

    def sep(
        self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
    ) -> None:
        self.lines.append((f"{sepchar * 3} {title} {sepchar * 3}", markup))


def _row(lines: list[str], needle: str) -> str:
    [line] = [line for line in lines if needle in line and not line.startswith(" ")]
    return line


def test_section_title_and_one_row_per_comparison():
    lines = render(example_report(), verbosity=1)
    assert lines[0].startswith("=") and " ragmetrics report " in lines[0]
    assert lines[1].split() == ["result", "score", "threshold", "comparison", "judge", "test"]
    assert _row(lines, "test_precision[q2]").split() == [
        "PASS", "0.833", ">=", "0.5", "context_precision", "cached", "tests/test_rag.py::test_precision[q2]",
    ]  # fmt: skip
    assert _row(lines, "test_recall[q1]").split() == [
        "FAIL", "0.500", ">=", "0.8", "context_recall", "judged", "tests/test_rag.py::test_recall[q1]",
    ]  # fmt: skip
    assert "context_relevance[graded] mean" in _row(lines, "test_relevance_golden_set")


def test_columns_are_aligned():
    lines = render(example_report(), verbosity=1)
    header = lines[1]
    rows = [line for line in lines if line.startswith(("PASS ", "FAIL ")) and "tests/" in line]
    assert len(rows) == 3
    for row, comparison in zip(
        rows, ["context_precision", "context_recall", "context_relevance"], strict=True
    ):
        assert row.index(comparison) == header.index("comparison")
        assert row[header.index("threshold") : header.index("threshold") + 2] == ">="
        assert row[header.index("result") : header.index("result") + 4] in ("PASS", "FAIL")
        assert row[header.index("judge") : header.index("judge") + 6] in ("cached", "judged")
        assert row[header.index("test") :].startswith("tests/test_rag.py::")
        # Scores are right-aligned under their header.
        end = header.index("score") + len("score")
        assert row[end - 5 : end] in ("0.833", "0.500", "0.625")
        assert row[end] == " "


def test_default_verbosity_explains_failures_only():
    lines = render(example_report())
    failing = lines.index(_row(lines, "test_recall[q1]"))
    assert (
        lines[failing + 1]
        == "    reference sentence 2 'Its capital is Paris.' is not supported by any context"
    )
    assert not any("useful chunks at ranks" in line for line in lines)
    assert not any("the contexts never name the capital" in line for line in lines)


def test_default_lists_what_did_not_pass_and_counts_the_passing_rows():
    lines = render(example_report())
    assert _row(lines, "test_recall[q1]").startswith("FAIL")
    assert not any("test_precision[q2]" in line or "test_relevance_golden_set" in line for line in lines)
    assert "(2 passing comparisons not shown; -v lists them)" in lines
    assert any(line.startswith("FAIL  context_recall min >= 0.6") for line in lines)  # gates stay


def _sentence_report() -> dict[str, Any]:
    report = example_report()
    row = report["results"][0]
    row.update(metric="context_relevance", method="sentence", passed=False, score=0.25, threshold=0.5)
    row["samples"][0]["verdicts"] = [
        {"item": "chunk", "index": 1, "rank": 1, "text": "Paris is in France. It has a river.",
         "verdict": "1/2 sentences needed", "value": 0.5, "reason": "the location", "extracted": ["Paris is in France."]},
        {"item": "chunk", "index": 2, "rank": 2, "text": "Bread is cheap.",
         "verdict": "0/1 sentences needed", "value": 0.0, "reason": "off topic", "extracted": []},
    ]  # fmt: skip
    return report


def test_sentence_relevance_rows_quote_the_sentences_the_judge_picked():
    lines = render(_sentence_report())  # a failing row: shown, with its picks
    row = lines.index(_row(lines, "test_precision[q2]"))
    assert lines[row + 2 : row + 4] == [
        "      chunk 1 picked 'Paris is in France.'",
        "      chunk 2 picked none",
    ]
    verbose = render(_sentence_report(), verbosity=2)
    assert (
        "        chunk 1 (rank 1) 'Paris is in France. It has a river.': 1/2 sentences needed - the location; "
        "picked 'Paris is in France.'"
    ) in verbose


def test_quiet_shows_only_failing_rows_plus_aggregates_and_gates():
    lines = render(example_report(), verbosity=-1)
    text = "\n".join(lines)
    assert "test_recall[q1]" in text
    assert "test_precision" not in text
    assert "test_relevance_golden_set" not in text
    assert "(2 other comparisons not shown; -v lists them)" in text
    assert any(" metrics " in line for line in lines)
    assert any(line.startswith("FAIL  context_recall min >= 0.6") for line in lines)


def test_quiet_with_nothing_failing_says_so():
    report = example_report()
    report["results"] = [row for row in report["results"] if row["passed"]]
    lines = render(report, verbosity=-1)
    assert "no failing comparisons among 2 (-v lists them)" in lines


def test_verbose_explains_every_row():
    lines = render(example_report(), verbosity=1)
    assert "    useful chunks at ranks 1 and 3; chunk at rank 2 is not useful" in lines
    assert "    mean of 2 samples" in lines
    assert not any("names the country" in line for line in lines)


def test_very_verbose_lists_every_verdict_and_reason():
    lines = render(example_report(), verbosity=2)
    assert "      sample q1: score 0.500" in lines
    verdict = (
        "reference sentence 2 'Its capital is Paris.': not supported - the contexts never name the capital"
    )
    assert "        " + verdict in lines
    assert "        chunk 1 (rank 2) 'Bread is cheap.': not useful - off topic" in lines
    assert (
        "      sample g1: score 0.750 (without reference); by judge model: gpt-4o-mini 0.750, llama3 0.750"
        in lines
    )


def test_multiline_user_text_stays_on_one_indented_line():
    report = example_report()
    report["results"][1]["explanation"] = "first\nsecond\n\nthird"
    lines = render(report)
    assert "    first second third" in lines


def test_metric_aggregates():
    lines = render(example_report())
    start = next(i for i, line in enumerate(lines) if " metrics " in line)
    assert lines[start + 1].split() == ["metric", "n", "mean", "min", "max"]
    assert lines[start + 2].split() == ["context_precision", "1", "0.833", "0.833", "0.833"]
    assert lines[start + 4].split() == ["context_relevance[graded]", "2", "0.625", "0.500", "0.750"]


def test_gates_with_pass_fail_value_and_margin():
    lines = render(example_report())
    assert _row(lines, "context_precision mean >= 0.80").split() == [
        "PASS", "context_precision", "mean", ">=", "0.80", "value", "0.833", "n=1", "margin", "+0.033",
    ]  # fmt: skip
    assert _row(lines, "context_recall min >= 0.6").split()[-2:] == ["margin", "-0.100"]


def test_gate_without_evaluations_shows_the_reason_without_widening_the_other_rows():
    report = example_report()
    valued = report["summary"]["gates"][0]
    report["summary"]["gates"] = [
        valued,
        {"spec": "context_relevance mean >= 0.5", "metric": "context_relevance", "method": None,
         "stat": "mean", "op": ">=", "threshold": 0.5, "value": None, "n": 0, "passed": False,
         "margin": None, "reason": "no recorded evaluations of context_relevance in this run"},
    ]  # fmt: skip
    lines = render(report)
    line = _row(lines, "context_relevance mean >= 0.5")
    assert line.startswith("FAIL")
    assert line.endswith("no recorded evaluations of context_relevance in this run")
    other = _row(lines, valued["spec"])
    assert "value" in other and "  " * 4 not in other.split("value", 1)[1]  # one gap between its columns
    assert line.index("no recorded") == other.index("value")  # the reason starts in the value column


def test_judge_figures_cache_and_store_lines():
    lines = render(example_report(), width=200)
    start = next(i for i, line in enumerate(lines) if " judge " in line and line.startswith("-"))
    assert lines[start + 1] == (
        "judge gpt-4o-mini: 3 calls, 2 store hits, 40 cache hits, 5 reused, "
        "1,500 tokens (1,200 prompt + 300 completion), 9,000 tokens saved, cost $0.00036, 1 retry, "
        "0 re-asks, 0 errors, 1.23s judging"
    )
    assert lines[start + 2] == "cache readwrite at .pytest_cache/d/ragmetrics, judgment store tests/judgments"
    assert lines[start + 3] == (
        "2 unused judgment store entries; remove them with: python -m pytest_ragmetrics cache prune"
    )


def test_judge_figures_wrap_to_the_terminal_width():
    lines = render(example_report(), width=80)
    start = next(i for i, line in enumerate(lines) if line.startswith("judge gpt-4o-mini"))
    block: list[str] = []
    for line in lines[start:]:
        if block and not line.startswith("  "):
            break
        block.append(line)
    assert len(block) > 1
    assert all(len(line) <= 80 for line in block)
    assert "".join(line.strip() + " " for line in block).startswith(
        "judge gpt-4o-mini: 3 calls, 2 store hits,"
    )


def test_unpriced_judge_cache_off_and_clean_store():
    report = example_report()
    judge = report["summary"]["judge"]
    judge.update(cost=None, cache_mode="off", cache_dir=None, store_dir=None, calls=1, seconds=None)
    report["summary"]["unused_store_entries"] = 0
    text = "\n".join(render(report, width=200))
    assert "cost" not in text
    assert "judge gpt-4o-mini: 1 call," in text
    assert "judging" not in text
    assert "\ncache off\n" in text + "\n"
    assert "prune" not in text


def test_long_nodeids_are_grouped_under_their_file_and_never_cut():
    report = example_report()
    long_id = "tests/integration/retrieval/test_rag_pipeline.py::test_recall_golden_set[" + "x" * 80 + "]"
    report["results"][1]["nodeid"] = long_id
    for row in report["results"]:
        row["explanation"] = None
    lines = render(report, width=100, verbosity=1)
    table = lines[2 : lines.index(next(line for line in lines if " metrics " in line))]
    assert table[0] == "tests/test_rag.py"
    assert table[1].endswith("  test_precision[q2]")
    assert table[2] == "tests/integration/retrieval/test_rag_pipeline.py"
    assert table[3].endswith("  test_recall_golden_set[" + "x" * 80 + "]")
    assert table[4] == "tests/test_rag.py"  # the file heading comes back when the file changes
    assert table[5].endswith("  test_relevance_golden_set")


def test_ids_that_fit_are_shown_whole_without_file_headings():
    lines = render(example_report(), width=120, verbosity=1)
    assert "tests/test_rag.py" not in lines
    assert _row(lines, "test_relevance_golden_set").endswith("  tests/test_rag.py::test_relevance_golden_set")


def test_markup_colours_failing_rows_red_and_passing_rows_green():
    tw = RecordingWriter()
    render_terminal(example_report(), tw, 1)
    by_text = {text: markup for text, markup in tw.lines}
    failing = next(markup for text, markup in tw.lines if "test_recall[q1]" in text)
    passing = next(markup for text, markup in tw.lines if "test_precision[q2]" in text)
    assert failing.get("red") is True and not failing.get("green")
    assert passing.get("green") is True and not passing.get("red")
    assert by_text["=== ragmetrics report ==="].get("red") is True
    assert next(m for t, m in tw.lines if t.startswith("2 unused")).get("yellow") is True


def test_xfail_comparisons_are_marked_and_hidden_by_quiet():
    report = example_report()
    report["results"][1]["xfail"] = True
    report["summary"]["gates"] = []
    assert _row(render(report), "test_recall[q1]").split()[0] == "XFAIL"
    quiet = render(report, verbosity=-1)
    assert not any("test_recall" in line for line in quiet)
    tw = RecordingWriter()
    render_terminal(report, tw, 0)
    assert tw.lines[0][1].get("green") is True  # the run passed
    markup = next(m for t, m in tw.lines if "test_recall[q1]" in t)
    assert markup.get("yellow") is True and not markup.get("red")


def test_empty_report():
    lines = render({"version": 1, "results": [], "summary": {}})
    assert lines[1:] == ["no ragmetrics comparisons recorded"]


def test_unsupported_version_is_refused():
    with pytest.raises(ValueError, match="version"):
        render({"version": 0})


def test_header_line():
    settings = {
        "model": "gpt-4o-mini",
        "cache_mode": "readwrite",
        "cache_dir": ".pytest_cache/d/ragmetrics",
        "store_dir": "tests/judgments",
    }
    assert header_line(settings) == (
        "ragmetrics: judge gpt-4o-mini, cache readwrite (.pytest_cache/d/ragmetrics), store tests/judgments"
    )
    assert (
        header_line({"model": "m", "cache_mode": "off", "cache_dir": "/x"})
        == "ragmetrics: judge m, cache off"
    )
    assert header_line({}) == "ragmetrics: judge not configured"


def test_header_line_shows_paths_relative_to_rootdir(tmp_path):
    settings = {"model": "m", "cache_mode": "replay", "cache_dir": str(tmp_path / ".cache" / "rm"),
                "store_dir": str(tmp_path / "tests" / "judgments")}  # fmt: skip
    assert header_line(settings, rootdir=tmp_path) == (
        "ragmetrics: judge m, cache replay (.cache/rm), store tests/judgments"
    )
    outside = {"model": "m", "cache_mode": "readwrite", "cache_dir": "/var/cache/rm"}
    assert header_line(outside, rootdir=tmp_path) == "ragmetrics: judge m, cache readwrite (/var/cache/rm)"


def test_cache_and_store_paths_relative_to_rootdir(tmp_path):
    report = example_report()
    report["summary"]["judge"].update(
        cache_dir=str(tmp_path / ".cache"), store_dir=str(tmp_path / "judgments")
    )
    out = io.StringIO()
    tw = TextWriter(out)
    tw.fullwidth = 200
    render_terminal(report, tw, 0, rootdir=tmp_path)
    assert "cache readwrite at .cache, judgment store judgments\n" in out.getvalue()
