"""The judge figures answer "where did each judgment come from?": judged now (calls), read from the
committed store, read from the local cache, reused within the run; the same meaning with and
without pytest-xdist, in the terminal, JSON, Markdown and HTML reports."""

import json
import re
from typing import Any

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


def figures(pytester: pytest.Pytester, *args: str) -> tuple[dict[str, Any], str]:
    result = pytester.runpytest(
        "--rag-report-json=report.json",
        "--rag-report-md=report.md",
        "--rag-report-html=report.html",
        "--rag-report",
        *args,
    )
    result.assert_outcomes(passed=6)
    judge: dict[str, Any] = json.loads(pytester.path.joinpath("report.json").read_text())["summary"]["judge"]
    line = next(line for line in result.stdout.lines if line.startswith("judge "))
    return judge, line


def where(judge: dict[str, Any]) -> tuple[int, int, int, int]:
    return judge["calls"], judge["store_hits"], judge["cache_hits"], judge["reused"]


def test_a_first_run_judges_each_judgment_once_and_reuses_it_within_the_run(project):
    pytester, server = project
    judge, line = figures(pytester, "--rag-cache-dir=cache")
    assert where(judge) == (JUDGMENTS, 0, 0, USES - JUDGMENTS)
    assert server.request_count == JUDGMENTS
    assert f"{JUDGMENTS} calls, 0 store hits, 0 cache hits, {USES - JUDGMENTS} reused" in line


def test_every_report_format_gives_the_same_four_figures_in_the_same_order(project):
    """The terminal, JSON, Markdown and HTML reports of one warm run: calls, store, cache, reused."""
    pytester, _ = project
    figures(pytester, "--rag-cache-dir=cache")  # record: the store and the cache hold every judgment
    # A cache hit needs a judgment the store lacks: drop every other shard of the store.
    for shard in sorted(pytester.path.joinpath("judgments").glob("*.jsonl"))[::2]:
        shard.unlink()
    judge, line = figures(pytester, "--rag-cache-dir=cache")
    calls, store, cache, reused = where(judge)
    assert calls == 0 and store > 0 and cache > 0 and reused > 0

    terminal = re.search(r"(\d+) calls?, (\d+) store hits?, (\d+) cache hits?, (\d+) reused", line)
    assert terminal and tuple(map(int, terminal.groups())) == (calls, store, cache, reused)
    markdown = pytester.path.joinpath("report.md").read_text()
    rows = re.findall(
        r"^\| (judge calls|store hits|cache hits|reused in the run) \| (\d+) \|$", markdown, re.M
    )
    assert rows == [
        ("judge calls", str(calls)),
        ("store hits", str(store)),
        ("cache hits", str(cache)),
        ("reused in the run", str(reused)),
    ]
    page = pytester.path.joinpath("report.html").read_text()
    section = page[page.index('<section id="judge">') :]
    pairs = re.findall(
        r"<dt>(judge calls|store hits|cache hits|reused in the run)</dt><dd>(\d+)</dd>", section
    )
    assert pairs == rows
    cards = re.findall(
        r'<div class="num ">(\d+)</div><div class="label">(judge calls|store hits|cache hits|reused in the run)<',
        page,
    )
    assert [(label, n) for n, label in cards] == rows


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


def test_the_figures_of_a_run_whose_xdist_worker_crashed_say_they_leave_its_judging_out(project):
    """A worker killed after it judged (the OOM killer, a segfault) never reports its figures: the
    report and the terminal say the counts leave them out, where they read as the run's whole."""
    pytester, server = project
    pytester.makepyfile(
        test_killed="""
        import os, signal
        from pytest_ragmetrics import RagSample, assert_context_relevance

        def test_killed():
            sample = RagSample("What is the limit?", ["The limit is 5 GB."], id="killed")
            assert_context_relevance(sample, "binary") >= 0.0
            os.kill(os.getpid(), signal.SIGKILL)
        """
    )
    result = pytester.runpytest("-n", "2", "-p", "xdist", "--rag-report-json=report.json", "--rag-report")
    result.assert_outcomes(passed=6, failed=1)
    judge = json.loads(pytester.path.joinpath("report.json").read_text())["summary"]["judge"]
    assert judge["calls"] < server.request_count == JUDGMENTS + 1
    assert judge["partial"].startswith("an xdist worker crashed before it reported")
    result.stdout.fnmatch_lines(["partial figures: an xdist worker crashed before it reported: *"])
