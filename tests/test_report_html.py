"""The HTML report: self-contained, every piece of user text escaped, sortable in a real browser."""

from __future__ import annotations

import base64
import hashlib
import html
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from report_example import example_report

from pytest_ragmetrics.report.html import to_html

SCRIPT_ALERT = "<script>alert(1)</script>"
# Each of these would leave a visible mark on the page if the browser ran it.
SCRIPT_TITLE = "<script>document.title='pwned'</script>"
IMG_ONERROR = "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"
ATTRIBUTE_BREAKOUT = "\"><script>document.title='pwned-attr'</script><b x=\""


def _search(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    match = re.search(pattern, text, flags)
    assert match, pattern
    return match


def hostile_report(alert: str = SCRIPT_ALERT) -> dict[str, Any]:
    """The example report with markup in every kind of user text, plus two extra rows for sorting."""
    report = example_report()
    recall = report["results"][1]
    recall["nodeid"] = f"tests/test_rag.py::test_recall[{ATTRIBUTE_BREAKOUT}]"
    recall["explanation"] = f"context says {alert} and <b>bold</b>"
    verdict = recall["samples"][0]["verdicts"][1]
    verdict["text"] = f"Its capital is Paris. {SCRIPT_TITLE}"
    verdict["reason"] = f"the contexts never name the capital {IMG_ONERROR}"
    recall["samples"][0]["id"] = "<i>q1</i>"
    report["results"][2]["samples"][0]["models"] = {"<u>evil-model</u>": 0.75}
    report["summary"]["gates"][0]["spec"] = "context_precision mean >= 0.80 <b>gate</b>"
    report["summary"]["judge"]["model"] = "<script>document.title='model'</script>"
    report["summary"]["judge"]["store_dir"] = "tests/<judgments>"
    # A tiny score whose text ("1e-05") sorts wrongly as a string, and a row without a score.
    report["results"].append(
        dict(report["results"][0], nodeid="tests/test_rag.py::test_tiny", score=0.00001, passed=False)
    )
    report["results"].append(dict(report["results"][0], nodeid="tests/test_rag.py::test_none", score=None))
    return report


def test_page_is_a_complete_document():
    page = to_html(example_report())
    assert page.startswith("<!DOCTYPE html>\n")
    assert page.endswith("</html>\n")
    assert "<title>ragmetrics report</title>" in page
    assert 'id="results-table"' in page
    assert page.count('<tbody class="result ') == 3
    assert page.count("<details>") == 3


def test_page_loads_nothing_from_outside():
    page = to_html(example_report())
    assert "<link" not in page
    assert not re.search(r"\b(src|href)\s*=", page)
    assert "http://" not in page and "https://" not in page
    assert "@import" not in page
    assert "url(" not in page


def test_summary_cards_gates_metrics_and_judge():
    page = to_html(example_report())
    assert '<div class="num bad">2/3</div><div class="label">comparisons passed</div>' in page
    assert '<div class="num bad">1/2</div><div class="label">gates passed</div>' in page
    assert '<div class="num ">$0.00036</div>' in page
    assert "<code>context_recall min &gt;= 0.6</code>" in page
    assert '<td class="num">-0.100</td>' in page
    assert "<td>context_relevance[graded]</td>" in page
    assert (
        "<dt>unused store entries</dt><dd>2 (remove with: python -m pytest_ragmetrics cache prune)</dd>"
        in page
    )
    assert "Failed: 1 of 3 comparisons failed, 1 of 2 gates failed." in page


def test_rows_carry_sort_values_and_details():
    page = to_html(example_report())
    assert 'data-test="tests/test_rag.py::test_recall[q1]"' in page
    assert 'data-score="0.8333333333333334"' in page
    assert 'data-result="0"' in page
    assert "the contexts never name the capital" in page
    assert "By judge model: gpt-4o-mini 0.750, llama3 0.750" in page
    for key in ("test", "comparison", "score", "threshold", "result", "judge"):
        assert f'<th data-key="{key}"' in page


@pytest.mark.parametrize("text", [SCRIPT_ALERT, SCRIPT_TITLE, IMG_ONERROR, ATTRIBUTE_BREAKOUT, "<b>bold</b>"])
def test_user_text_is_escaped(text):
    page = to_html(hostile_report())
    assert text not in page
    assert html.escape(text, quote=True) in page


def test_the_only_markup_in_the_page_is_ours():
    page = to_html(hostile_report())
    assert page.count("<script") == 1
    assert "<img" not in page
    assert "<i>" not in page and "<u>" not in page and "<b>" not in page
    assert "&lt;i&gt;q1&lt;/i&gt;" in page
    assert "&lt;u&gt;evil-model&lt;/u&gt;" in page
    assert "tests/&lt;judgments&gt;" in page


def test_no_report_data_inside_the_script():
    page = to_html(hostile_report())
    script = _search(r"<script>(.*?)</script>", page, re.S).group(1)
    for word in ("capital", "test_recall", "gpt-4o-mini", "pwned", "0.833"):
        assert word not in script


def test_content_security_policy_pins_our_script_and_style_by_hash():
    page = to_html(example_report())
    policy = html.unescape(_search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1))
    script = _search(r"<script>(.*?)</script>", page, re.S).group(1)
    style = _search(r"<style>(.*?)</style>", page, re.S).group(1)

    def sha(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    assert "default-src 'none'" in policy
    assert f"script-src {sha(script)}" in policy
    assert f"style-src {sha(style)}" in policy
    assert "unsafe-inline" not in policy


def test_xfail_rows_are_marked():
    report = example_report()
    report["results"][1]["xfail"] = True
    report["summary"]["gates"] = []
    page = to_html(report)
    assert '<tbody class="result xfail"' in page
    assert '<td class="warn">XFAIL</td>' in page
    assert "Passed:" in page


def test_empty_report_renders():
    page = to_html({"version": 1, "results": [], "summary": {}})
    assert "No comparisons recorded." in page
    assert 'id="results-table"' not in page


# --- in a real browser -------------------------------------------------------------------------------

CHROMIUM = shutil.which("chromium")


def _dump_dom(tmp_path: Path, page: str, fragment: str = "") -> str:
    """Load ``page`` in headless Chromium, let its script run, and return the DOM it ended with."""
    path = tmp_path / "report.html"
    path.write_text(page, encoding="utf-8")
    assert CHROMIUM is not None, "the browser tests are skipped without chromium"
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--virtual-time-budget=2000",
        "--dump-dom",
        path.as_uri() + fragment,
    ]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        pytest.fail("chromium did not finish within 60 s (a modal dialog from injected script blocks it)")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "</html>" in done.stdout, done.stderr[-2000:]
    return done.stdout


class _ResultRows(HTMLParser):
    """Collects the data-* attributes of the results table's row groups, in document order."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[dict[str, str]] = []

    def handle_starttag(self, tag, attrs):
        values = {name: value or "" for name, value in attrs}
        if tag == "tbody" and "result" in values.get("class", "").split():
            self.rows.append({name[5:]: value for name, value in values.items() if name.startswith("data-")})


def _result_rows(dom: str) -> list[dict[str, str]]:
    parser = _ResultRows()
    parser.feed(dom)
    return parser.rows


browser = pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (apt install chromium)")


@pytest.mark.browser
@browser
def test_browser_sorts_scores_numerically_and_runs_no_injected_markup(tmp_path):
    # alert() would block headless Chromium; this injection leaves a mark instead.
    report = hostile_report(alert="<script>document.title='pwned-alert'</script>")
    dom = _dump_dom(tmp_path, to_html(report), "#sort=score-desc")

    # Nothing injected ran: the title is ours, the body carries no mark, no element was created.
    assert re.search(r"<title>ragmetrics report</title>", dom)
    assert "pwned" not in _search(r"<title>.*?</title>", dom, re.S).group(0)
    assert not re.search(r"<body[^>]*data-pwned", dom)
    assert dom.count("<script") == 1
    assert "<img" not in dom

    # Our script ran: it recorded the sort and marked the header...
    assert 'data-sorted="score-desc"' in dom
    assert re.search(r'<th data-key="score"[^>]*aria-sort="descending"', dom)
    # ...and ordered rows by numeric score, highest first, the row without a score last.
    rows = _result_rows(dom)
    assert [row["score"] for row in rows] == ["0.8333333333333334", "0.625", "0.5", "1e-05", ""]

    # The injected markup is on the page as text.
    assert (
        "context says &lt;script&gt;document.title='pwned-alert'&lt;/script&gt; and &lt;b&gt;bold&lt;/b&gt;"
        in dom
    )


@pytest.mark.browser
@browser
def test_browser_sorts_by_text_ascending_and_keeps_details_with_their_row(tmp_path):
    dom = _dump_dom(tmp_path, to_html(example_report()), "#sort=test-asc")
    assert 'data-sorted="test-asc"' in dom
    assert [row["test"] for row in _result_rows(dom)] == sorted(
        row["nodeid"] for row in example_report()["results"]
    )
    # Each row's <details> moved with it: the recall row is followed by the recall reasons.
    recall = dom.index('data-test="tests/test_rag.py::test_recall[q1]"')
    relevance = dom.index('data-test="tests/test_rag.py::test_relevance_golden_set"')
    assert recall < dom.index("the contexts never name the capital") < relevance


@pytest.mark.browser
@browser
def test_browser_without_a_sort_hash_keeps_the_report_order(tmp_path):
    report = example_report()
    report["results"].reverse()
    dom = _dump_dom(tmp_path, to_html(report))
    assert 'data-sorted="' not in dom
    assert [row["test"] for row in _result_rows(dom)] == [row["nodeid"] for row in report["results"]]


def test_sentence_relevance_verdicts_quote_the_sentences_the_judge_picked():
    report = example_report()
    row = report["results"][0]
    row.update(method="sentence", metric="context_relevance")
    row["samples"][0]["verdicts"][0]["extracted"] = ["Paris is <b>in</b> France."]
    page = to_html(report)
    assert '<div class="picked">picked: <q>Paris is &lt;b&gt;in&lt;/b&gt; France.</q></div>' in page
    assert page.count('<div class="picked">picked: none</div>') == 2  # the other two chunks
    assert '<div class="picked">' not in to_html(example_report())  # other methods pick nothing
