"""Replay runs write the same JSON report, whatever the machine's cache held."""

import json

import pytest

from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

RETRIEVER_TEST = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_relevance

@pytest.mark.parametrize("i", range(10))
def test_retrieved(i):
    chunks = [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."]
    assert_context_relevance(RagSample(f"What is the limit of plan {i}?", chunks, id=f"s{i}"), "graded") >= 0.5
"""


@pytest.fixture
def judge_server(monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server


def test_two_replays_write_byte_identical_json_reports(pytester, judge_server):
    """Both replays read the store first (the second has the cache the first filled): same file,
    where each judgment came from included."""
    pytester.makeini("[pytest]\nrag_store_dir = judgments\n")
    pytester.makepyfile(test_retrieved=RETRIEVER_TEST)
    pytester.runpytest("--rag-cache-dir=recording").assert_outcomes(passed=10)
    reports = []
    for i in range(2):
        pytester.runpytest(
            "--rag-cache=replay", "--rag-cache-dir=fresh", f"--rag-report-json=r{i}.json"
        ).assert_outcomes(passed=10)
        reports.append(pytester.path.joinpath(f"r{i}.json").read_bytes())
    assert reports[0] == reports[1]
    judge = json.loads(reports[0])["summary"]["judge"]
    assert judge["recorded"] == 20 and judge["calls"] == 0
    assert (judge["store_hits"], judge["cache_hits"], judge["reused"]) == (20, 0, 0)
    assert "seconds" not in judge
