"""One payment per judgment: the processes of a run (xdist workers) ask the judge once per judgment
whatever the cache mode and whether or not the cache database can be used."""

from __future__ import annotations

import pytest

from pytest_ragmetrics.testing import FakeJudgeServer

SAME_SAMPLE = """
    import pytest
    from pytest_ragmetrics import RagSample, assert_context_precision

    SAMPLE = RagSample(
        "Where is Paris?",
        ["Paris is in France.", "Lyon is a city.", "The Seine flows through Paris."],
        "Paris is in France.",
        id="paris",
    )

    @pytest.mark.parametrize("i", range(8))
    def test_same(i):
        assert_context_precision(SAMPLE) >= 0.0
"""


@pytest.fixture
def project(pytester, monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\n")
        pytester.makepyfile(test_same=SAME_SAMPLE)
        yield pytester, server


def test_refresh_under_xdist_judges_each_judgment_once(project):
    """Eight tests on two workers need the same three judgments: refreshed once, not once per worker."""
    pytester, server = project
    result = pytester.runpytest("-n", "2", "-p", "xdist", "--rag-cache=refresh", "--rag-cache-dir=c")
    result.assert_outcomes(passed=8)
    assert server.request_count == 3


def test_a_cache_that_is_not_a_database_costs_no_second_payment_under_xdist(project, capfd):
    pytester, server = project
    (pytester.path / "c").mkdir()
    (pytester.path / "c" / "cache.db").write_bytes(b"not a database" * 100)
    result = pytester.runpytest("-n", "2", "-p", "xdist", "--rag-cache-dir=c")
    result.assert_outcomes(passed=8)
    assert server.request_count == 3
    # The workers write to this process's stderr, which capfd holds: what they print at exit is there.
    assert "Traceback" not in result.stdout.str() + result.stderr.str() + capfd.readouterr().err
