"""The judge figures answer "where did each judgment come from?": judged now (calls), read from the
committed store, read from the local cache, reused within the run; the same meaning with and
without pytest-xdist, in the terminal report and the JSON report."""

import json

import pytest

from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

#: Each test scores binary and sentence relevance of its two chunks: both methods read one judgment
#: per chunk, so the second asks for what the first already has (2 judgments, 4 uses).
TESTS = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_relevance

@pytest.mark.parametrize("i", range(6))
def test_retrieved(i):
    chunks = [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."]
    sample = RagSample(f"What is the limit of plan {i}?", chunks, id=f"s{i}")
    assert_context_relevance(sample, "binary") >= 0.0
    assert_context_relevance(sample, "sentence") >= 0.0
"""
JUDGMENTS, USES = 6 * 2, 6 * 4


@pytest.fixture
def project(pytester, monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\nrag_store_dir = judgments\nrag_response_format = json_schema\n")
        pytester.makepyfile(test_retrieved=TESTS)
        yield pytester, server


def figures(pytester, *args):
    result = pytester.runpytest_subprocess("--rag-report-json=report.json", "--rag-report", *args)
    result.assert_outcomes(passed=6)
    judge = json.loads(pytester.path.joinpath("report.json").read_text())["summary"]["judge"]
    line = next(line for line in result.stdout.lines if line.startswith("judge "))
    return judge, line


def where(judge):
    return judge["calls"], judge["store_hits"], judge["cache_hits"], judge["reused"]


def test_a_first_run_judges_each_judgment_once_and_reuses_it_within_the_run(project):
    pytester, server = project
    judge, line = figures(pytester, "--rag-cache-dir=cache")
    assert where(judge) == (JUDGMENTS, 0, 0, USES - JUDGMENTS)
    assert server.request_count == JUDGMENTS
    assert f"{JUDGMENTS} calls, 0 cache hits, 0 store hits, {USES - JUDGMENTS} reused" in line


@pytest.mark.parametrize("workers", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "xdist"])
def test_a_replay_with_an_empty_cache_reads_the_store_and_counts_no_cache_hit(project, workers):
    pytester, server = project
    figures(pytester, "--rag-cache-dir=recording")
    judge, line = figures(pytester, "--rag-cache=replay", "--rag-cache-dir=empty", *workers)
    calls, store, cache, reused = where(judge)
    assert (calls, cache) == (0, 0)
    assert store + reused == USES and store >= JUDGMENTS  # each process reads what it needs once
    assert " 0 cache hits" in line
    assert server.request_count == JUDGMENTS  # the recording run's


def test_with_the_cache_off_reuse_is_not_a_cache_hit(project):
    pytester, _ = project
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")  # no store either
    judge, _ = figures(pytester, "--rag-cache=off")
    assert where(judge) == (JUDGMENTS, 0, 0, USES - JUDGMENTS)
