"""pytest-html: each test's scores in its row and its verdicts under it (real pytest-html, real judge
over HTTP from the fake server)."""

import html
import json
import re
from pathlib import Path
from typing import Any

import pytest

import pytest_ragmetrics.pytest_html_scores
import pytest_ragmetrics.report.html  # noqa: F401
from pytest_ragmetrics.testing import FakeJudgeServer

pytest.importorskip("pytest_html")
pytest_plugins = ["pytester"]


def judge(body):
    """Chunks naming Paris are useful; reference sentences naming Paris are attributed."""
    payload = json.loads(body["messages"][-1]["content"])
    schema = body["response_format"]["json_schema"]["name"]
    if schema == "context_precision":
        useful = "Paris" in payload["chunk"]
        return {"reason": "names Paris" if useful else "off <b>topic</b>", "useful": useful}
    if schema == "context_recall":
        joined = " ".join(payload["contexts"].values())
        return {
            f"sentence_{i}": {"reason": "checked", "attributed": "Paris" not in s or "Paris" in joined}
            for i, s in payload["reference_sentences"].items()
        }
    raise AssertionError(schema)


TESTS = """
from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall

SAMPLE = RagSample("What is the capital of France?", ["Bread <b>is</b> cheap.", "Paris is the capital."],
                   ground_truth="The capital of France is Paris.", id="q1")

def test_precision():
    assert_context_precision(SAMPLE) >= 0.9

def test_recall():
    assert_context_recall(SAMPLE) >= 0.5

def test_plain():
    pass
"""


@pytest.fixture
def project(pytester, monkeypatch):
    with FakeJudgeServer(judge) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\n")
        pytester.makepyfile(test_rag=TESTS)
        yield pytester


def html_tests(path: Path) -> tuple[str, dict[str, Any]]:
    """The per-test data pytest-html embeds in its page."""
    page = path.read_text(encoding="utf-8")
    blob = re.search(r'data-jsonblob="([^"]*)"', page)
    assert blob, "no data-jsonblob in pytest-html's page"
    return page, json.loads(html.unescape(blob.group(1)))["tests"]


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["serial", "xdist"])
def test_pytest_html_rows_carry_scores_and_verdicts(project, xdist):
    result = project.runpytest("--html=report.html", "--self-contained-html", *xdist)
    result.assert_outcomes(passed=2, failed=1)
    page, tests = html_tests(project.path / "report.html")
    assert "col-ragmetrics" in page  # the column header
    row = {nodeid.split("::")[-1]: entries[-1] for nodeid, entries in tests.items()}
    precision = row["test_precision"]["resultsTableRow"][-1]
    assert "FAIL</span> context_precision 0.500 &gt;= 0.9" in precision
    assert "PASS</span> context_recall 1.000 &gt;= 0.5" in row["test_recall"]["resultsTableRow"][-1]
    assert row["test_plain"]["resultsTableRow"][-1] == '<td class="col-ragmetrics"></td>'
    # Under the test: the verdicts and the judge's reasons, escaped.
    (extra,) = [e for e in row["test_precision"]["extras"] if e["format_type"] == "html"]
    assert "Sample q1: score 0.500" in extra["content"]
    assert "off &lt;b&gt;topic&lt;/b&gt;" in extra["content"]
    assert "Bread &lt;b&gt;is&lt;/b&gt; cheap." in extra["content"]
    assert not [e for e in row["test_plain"]["extras"] if e["format_type"] == "html"]


def test_without_html_output_the_scores_module_is_not_loaded(project):
    project.makeconftest("""
        import sys
        def pytest_unconfigure(config):
            print("LOADED", "pytest_ragmetrics.pytest_html_scores" in sys.modules)
    """)
    result = project.runpytest_subprocess("-s", "-k", "plain")
    result.stdout.fnmatch_lines(["LOADED False"])
