"""Label metrics through real pytest runs: assertions, gates, every report format, no judge, stale labels."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# In-process pytester runs drop modules first imported inside them; importing the package's modules
# here keeps one copy of each class (RagSample...) for the outer and the inner runs.
import pytest_ragmetrics.assertions
import pytest_ragmetrics.engine
import pytest_ragmetrics.metrics.builtin
import pytest_ragmetrics.metrics.labels
import pytest_ragmetrics.report.html
import pytest_ragmetrics.report.markdown
import pytest_ragmetrics.report.terminal  # noqa: F401
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

LABELLED = """
import sys

from pytest_ragmetrics import RagSample, assert_metric


SAMPLES = [
    RagSample("q1", ["a", "b", "c"], id="s1", context_ids=["d1", "d2", "d3"],
              reference_context_ids={"d1": 2, "d3": 1}),
    RagSample("q2", ["a", "b"], id="s2", context_ids=["d4", "d5"], reference_context_ids=["d4"]),
    RagSample("q3", ["Paris is the capital.", "Bread."], id="s3",
              reference_contexts=["paris is the capital"]),
]


def test_one_sample():
    assert_metric(SAMPLES[0], "ndcg@5") >= 0.8


def test_golden_set():
    check = assert_metric(SAMPLES, "recall@2")
    check.min() >= 0.5
    check.pass_rate(1.0) >= 0.6


def test_without_at_k():
    assert_metric(SAMPLES, "mrr") >= 1.0


def test_zz_no_openai_was_imported():
    assert "openai" not in sys.modules
"""


@pytest.fixture
def no_judge(pytester, monkeypatch):
    """No judge server and no key: any judge call would fail the run."""
    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "RAGMETRICS_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    return pytester


def test_label_metrics_run_without_a_judge_and_show_in_every_report(no_judge):
    no_judge.makepyfile(test_labels=LABELLED)
    no_judge.makeini(
        "[pytest]\nrag_gates =\n    ndcg@5 mean >= 0.7\n    recall@2 min >= 0.5\n    mrr p10 >= 1\n"
    )
    args = [
        "-v",
        "--rag-report",
        "--rag-report-json=r.json",
        "--rag-report-md=r.md",
        "--rag-report-html=r.html",
    ]
    # A process of its own: whether openai was imported can only be told in a fresh interpreter
    # (a test of this suite that ran before may have imported it, or a judge thread may still be ending).
    result = no_judge.runpytest_subprocess(*args)
    result.assert_outcomes(passed=4)
    for line in (
        "*result*score*threshold*comparison*judge*test",
        "PASS*1.000*>= 1*mrr mean*no judge*test_without_at_k",
        "PASS*0.950*>= 0.8*ndcg@5*no judge*test_one_sample",
        "PASS*0.500*>= 0.5*recall@2 min*no judge*test_golden_set",
        "no judge used: every comparison was scored from labels, at no cost",
    ):
        result.stdout.fnmatch_lines([line])
    result.stdout.fnmatch_lines(
        ["PASS*ndcg@5 mean >= 0.7*", "PASS*recall@2 min >= 0.5*", "PASS*mrr p10 >= 1*"]
    )
    assert "judged" not in result.stdout.str()

    report = json.loads((no_judge.path / "r.json").read_text())
    rows = {row["metric"]: row for row in report["results"] if row["stat"] in ("score", "mean")}
    assert rows["ndcg@5"]["method"] is None
    assert rows["ndcg@5"]["judges"] == [] and rows["ndcg@5"]["judge_calls"] == 0
    assert rows["ndcg@5"]["samples"][0]["labels_found"] is True
    text_sample = rows["mrr"]["samples"][2]
    assert text_sample["mode"] == "matched by text" and "labels_found" not in text_sample
    metrics = {m["metric"]: m for m in report["summary"]["metrics"]}
    assert metrics["recall@2"]["n"] == 3 and metrics["recall@2"]["mean"] == pytest.approx((0.5 + 1 + 1) / 3)
    assert report["summary"]["judge"]["model"] is None
    assert report["summary"]["judge"]["calls"] == 0
    assert report["summary"]["labels"] == {"samples": 2, "not_found": 0, "stale": False}
    markdown = (no_judge.path / "r.md").read_text()
    assert "> no judge used: every comparison was scored from labels" in markdown
    assert "ndcg@5" in markdown
    html = (no_judge.path / "r.html").read_text()
    assert '<p class="note">no judge used' in html
    assert "<td>no judge</td>" in html


def test_a_failing_label_metric_explains_itself(no_judge):
    no_judge.makepyfile(
        test_labels="""
        from pytest_ragmetrics import RagSample, assert_metric

        def test_ranking():
            sample = RagSample("q", ["intro", "answer"], id="s1", context_ids=["d7", "d1"],
                               reference_context_ids={"d1": 2, "d2": 1})
            assert_metric(sample, "ndcg@1") >= 0.5
        """
    )
    result = no_judge.runpytest("--rag-report")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        [
            "*ndcg@1 of sample 's1' = 0.000, expected >= 0.5",
            "*why: nDCG 0.000: 0 of 2 relevant ids in the top 1; missing 'd1', 'd2'",
            "*- chunk 1 [[]not labelled[]] 'intro'",
            "*- relevant id 1 [[]not in the top 1[]] 'd1'",
        ]
    )


def test_bad_metric_names_and_missing_labels_are_clear_errors(no_judge):
    no_judge.makepyfile(
        test_labels="""
        import pytest
        from pytest_ragmetrics import RagSample, assert_metric

        LABELLED = RagSample("q", ["a"], id="s1", context_ids=["d1"], reference_context_ids=["d1"])

        def test_zero_cut_off():
            with pytest.raises(ValueError, match=r"cut-off @0 of ndcg must be at least 1"):
                assert_metric(LABELLED, "ndcg@0")

        def test_judged_metric_has_no_cut_off():
            with pytest.raises(ValueError, match=r"metric 'context_recall' takes no @k cut-off"):
                assert_metric(LABELLED, "context_recall@3")

        def test_no_labels():
            with pytest.raises(ValueError, match=r"recall@3 needs retrieval labels: sample 's2' has neither"):
                assert_metric(RagSample("q", ["a"], id="s2"), "recall@3")

        def test_ids_only_on_one_side():
            sample = RagSample("q", ["a"], id="s3", reference_context_ids=["d1"])
            with pytest.raises(ValueError, match=r"has reference_context_ids but its contexts carry no ids"):
                assert_metric(sample, "recall@3")
        """
    )
    no_judge.runpytest().assert_outcomes(passed=4)


def test_an_unknown_cut_off_metric_in_a_gate_is_a_usage_error(no_judge):
    no_judge.makeini("[pytest]\nrag_gates = context_precision@5 mean >= 0.5\n")
    no_judge.makepyfile(test_nothing="def test_ok():\n    pass\n")
    result = no_judge.runpytest()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*metric 'context_precision' takes no @k cut-off*"])


STALE = """
from pytest_ragmetrics import RagSample, assert_metric

# The corpus was re-chunked: the retriever now returns ids the golden set has never heard of.
SAMPLES = [
    RagSample(f"q{n}", ["a", "b"], id=f"s{n}", context_ids=[f"new-{n}-1", f"new-{n}-2"],
              reference_context_ids=[f"old-{n}"])
    for n in range(STALE_COUNT)
] + [
    RagSample(f"q{n}", ["a", "b"], id=f"s{n}", context_ids=[f"doc-{n}", "other"],
              reference_context_ids=[f"doc-{n}"])
    for n in range(STALE_COUNT, 4)
]


def test_golden_set():
    assert_metric(SAMPLES, "recall@5") >= 0.0
"""


@pytest.mark.parametrize(("stale_count", "stale"), [(3, True), (2, False)])
def test_the_report_says_when_labels_look_stale(no_judge, stale_count, stale):
    no_judge.makepyfile(test_labels=STALE.replace("STALE_COUNT", str(stale_count)))
    result = no_judge.runpytest("--rag-report", "--rag-report-json=r.json", "--rag-report-md=r.md")
    result.assert_outcomes(passed=1)
    report = json.loads((no_judge.path / "r.json").read_text())
    assert report["summary"]["labels"] == {"samples": 4, "not_found": stale_count, "stale": stale}
    markdown = (no_judge.path / "r.md").read_text()
    if stale:
        result.stdout.fnmatch_lines(
            ["labels look stale: in 3 of 4 labelled samples no retrieved id is labelled*"]
        )
        assert "labels look stale" in markdown
    else:
        assert "labels look stale" not in result.stdout.str() + markdown


def test_label_and_judged_metrics_side_by_side(pytester, monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makepyfile(
            test_both="""
            from pytest_ragmetrics import RagSample, assert_context_relevance, assert_metric

            SAMPLE = RagSample("Where is Paris?", ["Paris is in France."], id="s1",
                               context_ids=["d1"], reference_context_ids=["d1"])

            def test_judged():
                assert_context_relevance(SAMPLE, method="binary") >= 0.0

            def test_labels():
                assert_metric(SAMPLE, "hit_rate@1") >= 1.0
            """
        )
        result = pytester.runpytest("-v", "--rag-report", "--rag-report-json=r.json")
        result.assert_outcomes(passed=2)
        assert server.request_count == 1
    result.stdout.fnmatch_lines(["*hit_rate@1*no judge*test_labels"])
    result.stdout.fnmatch_lines(["*context_relevance*judged*test_judged"])
    assert "no judge used" not in result.stdout.str()
    report = json.loads((pytester.path / "r.json").read_text())
    assert report["summary"]["judge"]["model"] == "gpt-4o-mini"


def test_the_documented_label_example_runs_without_a_judge(no_judge):
    page = (Path(__file__).resolve().parent.parent / "docs" / "label-metrics.md").read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```python[^\n]*\n(.*?)```", page, flags=re.S) if "context_ids=" in b)
    no_judge.makepyfile(test_docs_example=block)
    result = no_judge.runpytest("-v", "--rag-report")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["PASS*0.760*>= 0.75*ndcg@5*no judge*"])
