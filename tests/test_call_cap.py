"""The judge call cap: at most N requests reach the judge in a run, xdist workers together."""

from __future__ import annotations

import json
import threading

import pytest

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.errors import JudgeCallCapReached
from pytest_ragmetrics.judge.budget import JudgeBudget
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.testing import FakeJudgeServer

QUESTION = "Where is France and what is its capital?"
REFERENCE = "France is in Western Europe. Its capital is Paris."
CHUNKS = [f"Chunk number {i} about France." for i in range(5)]


def test_a_budget_in_memory_gives_exactly_its_calls():
    budget = JudgeBudget(calls=3)
    assert [budget.take() for _ in range(5)] == [True, True, True, False, False]
    assert budget.spent == (3, 0) and budget.exhausted
    assert not JudgeBudget(calls=0).take()


def test_a_budget_shared_through_a_file_never_gives_more_than_its_cap(tmp_path):
    """Four connections (as four processes would open) take from eight threads at once."""
    path = tmp_path / "calls.sqlite"
    JudgeBudget.create(25, None, path).close()
    budgets = [JudgeBudget(25, None, path) for _ in range(4)]
    granted: list[bool] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def take(budget: JudgeBudget) -> None:
        start.wait()
        for _ in range(10):
            ok = budget.take()
            with lock:
                granted.append(ok)

    threads = [threading.Thread(target=take, args=(budgets[i % 4],)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert granted.count(True) == 25 and len(granted) == 80
    assert {b.spent for b in budgets} == {(25, 0)}
    for budget in budgets:
        budget.close()


def test_a_token_cap_refuses_once_the_answers_used_it_across_processes(tmp_path):
    path = tmp_path / "budget.sqlite"
    first, second = JudgeBudget.create(None, 100, path), JudgeBudget(None, 100, path)
    assert first.take() and second.take()  # two calls in flight: neither has answered yet
    first.spend(60)
    assert second.take()
    second.spend(60)  # 120: the calls in flight passed the cap by their own size
    assert not first.take() and not second.take()
    assert first.spent == (3, 120)
    assert "the judge token cap of 100 tokens is reached" in first.refusal("chunk 1", lambda n, v: f"{n}={v}")
    assert "max_judge_tokens=200" in first.refusal("chunk 1", lambda n, v: f"{n}={v}")
    first.close()
    second.close()


def test_stats_count_the_requests_a_budget_refused():
    stats = JudgeStats(budget=JudgeBudget(calls=1))
    assert stats.take_call() and not stats.take_call() and not stats.take_call()
    assert stats.refused == 2
    assert stats.to_json()["max_judge_calls"] == 1 and stats.to_json()["refused_calls"] == 2
    controller = JudgeStats()
    controller.merge_json(stats.to_json())
    controller.merge_json(stats.to_json())
    assert (controller.max_judge_calls, controller.max_judge_tokens, controller.refused) == (1, None, 4)
    assert "max_judge_calls" not in JudgeStats().to_json()


def test_a_script_stops_at_the_cap_and_keeps_what_was_judged(fake_judge_server, monkeypatch, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    first = RagSample(QUESTION, CHUNKS[:3], REFERENCE, id="first")
    second = RagSample(QUESTION, CHUNKS[3:], REFERENCE, id="second")
    settings = Settings(
        judge_base_url=fake_judge_server.base_url, cache_dir=str(tmp_path / "cache"), max_judge_calls=3
    )
    with Evaluator(settings) as ev:
        assert ev.score(first, "context_precision").score == 1.0
        with pytest.raises(JudgeCallCapReached) as info:
            ev.score(second, "context_precision")
    assert fake_judge_server.request_count == 3
    message = str(info.value)
    assert "the judge call cap of 3 call(s) is reached" in message
    assert "RAGMETRICS_MAX_JUDGE_CALLS=6" in message and "what was judged is kept" in message
    # What was judged was kept: a run allowed no call at all scores the first sample.
    with Evaluator(settings.replace(max_judge_calls=0)) as ev:
        assert ev.score(first, "context_precision").score == 1.0
    assert fake_judge_server.request_count == 3


CAPPED_TESTS = """
    import pytest
    from pytest_ragmetrics import RagSample, assert_context_precision

    @pytest.mark.parametrize("i", range(6))
    def test_precision(i):
        sample = RagSample("Question {}?".format(i), ["Chunk of test {}.".format(i)], "Answer.", id=str(i))
        assert_context_precision(sample) >= 0.5
"""


@pytest.fixture
def capped_project(pytester, monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\n")
        pytester.makepyfile(test_capped=CAPPED_TESTS)
        yield pytester, server


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "-n 2"])
def test_a_pytest_run_stops_at_exactly_the_cap(capped_project, xdist):
    pytester, server = capped_project
    result = pytester.runpytest("--rag-max-judge-calls=4", "-p", "no:randomly", *xdist)
    assert server.request_count == 4
    result.assert_outcomes(passed=4, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*JudgeCallCapReached: the judge call cap of 4 call(s) is reached*",
            "*ragmetrics: the judge spending cap stopped the run: 2 judge call(s) refused past 4 judge call(s) "
            "(--rag-max-judge-calls=8 *to allow more); what was judged is kept; the first test it stopped: test_capped.py::test_precision*",
        ]
    )
    # What was judged is kept: the next run pays only for the two tests left.
    again = pytester.runpytest("--rag-max-judge-calls=2", "-p", "no:randomly", *xdist)
    again.assert_outcomes(passed=6)
    assert server.request_count == 6
    assert "spending cap" not in again.stdout.str()


def test_a_pytest_run_stops_sending_once_its_token_cap_is_used(capped_project):
    pytester, server = capped_project
    result = pytester.runpytest("--rag-max-judge-tokens=1", "-p", "no:randomly", "--rag-concurrency=1")
    assert server.request_count == 1  # the first answer used more than the cap: nothing more was sent
    result.assert_outcomes(passed=1, failed=5)
    result.stdout.fnmatch_lines(
        [
            "*JudgeCallCapReached: the judge token cap of 1 tokens is reached*--rag-max-judge-tokens=2*",
            "*the judge spending cap stopped the run: 5 judge call(s) refused past 1 tokens*",
        ]
    )


def test_the_cap_is_a_setting_of_the_run_not_of_a_test(capped_project):
    pytester, _ = capped_project
    pytester.makepyfile(
        test_marked="""
        import pytest

        @pytest.mark.ragmetrics(max_judge_calls=1)
        def test_marked():
            pass
        """
    )
    result = pytester.runpytest("test_marked.py")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*max_judge_calls applies to the whole run*"])


def test_judging_a_golden_set_ahead_never_spends_past_the_cap(capped_project):
    """The golden set's samples are judged ahead of their tests, through the same budget."""
    pytester, server = capped_project
    rows = [
        {"id": str(i), "question": f"Question {i}?", "contexts": [f"Chunk {i}."], "ground_truth": "A."}
        for i in range(8)
    ]
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in rows))
    pytester.makepyfile(
        test_capped="""
        import pytest
        from pytest_ragmetrics import assert_context_precision, assert_context_relevance

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_golden(rag_sample):
            assert_context_precision(rag_sample) >= 0.5
            assert_context_relevance(rag_sample, method="graded") >= 0.5
        """
    )
    result = pytester.runpytest("--rag-max-judge-calls=5", "--rag-report-json=report.json")
    assert server.request_count == 5
    assert result.ret == 1
    judge = json.loads((pytester.path / "report.json").read_text())["summary"]["judge"]
    assert judge["max_judge_calls"] == 5 and judge["refused_calls"] >= 1 and judge["calls"] == 5


def test_answers_paid_for_are_kept_when_the_cap_refuses_a_sibling_chunk(
    fake_judge_server, monkeypatch, tmp_path
):
    """The cap refuses chunk 4 while the answers of chunks 1 to 3 are still being written: all three
    are written (a cancelled judgment's answer used to be dropped with its queued write)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    sample = RagSample(QUESTION, CHUNKS, REFERENCE, id="france")
    settings = Settings(
        judge_base_url=fake_judge_server.base_url,
        cache_dir=str(tmp_path / "cache"),
        max_judge_calls=3,
        concurrency=1,
    )
    with Evaluator(settings) as ev, pytest.raises(JudgeCallCapReached):
        ev.score(sample, "context_precision")
    assert fake_judge_server.request_count == 3
    with Evaluator(settings.replace(max_judge_calls=2)) as ev:
        assert ev.score(sample, "context_precision").score == 1.0
    assert fake_judge_server.request_count == 5


def test_a_token_cap_counts_an_estimate_when_the_server_reports_no_usage(fake_judge_server, monkeypatch, tmp_path):
    """A server that sends no ``usage``: the cap still stops the run, after one warning saying so."""
    from pytest_ragmetrics.errors import RagMetricsWarning

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    fake_judge_server.usage = None
    samples = [RagSample(QUESTION, [chunk], REFERENCE, id=str(i)) for i, chunk in enumerate(CHUNKS)]
    settings = Settings(
        judge_base_url=fake_judge_server.base_url, cache_dir=str(tmp_path / "cache"), max_judge_tokens=300, concurrency=1
    )
    with pytest.warns(RagMetricsWarning, match="reports no token usage") as caught, Evaluator(settings) as ev:
        refused = 0
        for sample in samples:
            try:
                ev.score(sample, "context_precision")
            except JudgeCallCapReached:
                refused += 1
    assert 1 <= fake_judge_server.request_count < len(samples) and refused >= 1
    assert sum("reports no token usage" in str(w.message) for w in caught) == 1


def test_an_absurd_token_count_keeps_the_answer_and_the_cap(capped_project):
    """usage.total_tokens of 10**30: the answer paid for is recorded and scored, then the cap holds."""
    pytester, server = capped_project
    huge = 10**30
    server.usage = {"prompt_tokens": huge, "completion_tokens": 1, "total_tokens": huge + 1}
    result = pytester.runpytest("--rag-max-judge-tokens=1000", "-p", "no:randomly", "--rag-concurrency=1")
    result.assert_outcomes(passed=1, failed=5)
    assert server.request_count == 1 and "OverflowError" not in result.stdout.str()
    replay = pytester.runpytest("--rag-cache=replay", "-p", "no:randomly", "test_capped.py::test_precision[0]")
    replay.assert_outcomes(passed=1)  # the answer paid for was recorded


@pytest.mark.parametrize("damage", ["deleted", "garbled"])
def test_a_budget_file_damaged_mid_run_is_one_clear_error(tmp_path, damage):
    import shutil

    directory = tmp_path / "budget"
    directory.mkdir()
    path = directory / "budget.sqlite"
    budget = JudgeBudget.create(10, 100, path)
    assert budget.take()
    budget.close()
    if damage == "deleted":
        shutil.rmtree(directory)
    else:
        path.write_bytes(b"not a database " * 100)
    later = JudgeBudget(10, 100, path)  # a worker that opens it now
    later.spend(5)  # an answer came back: its bookkeeping never raises
    from pytest_ragmetrics.errors import JudgeUnavailable

    for _ in range(2):
        with pytest.raises(JudgeUnavailable, match=r"the judge spending budget of this run cannot be counted any more: its file .*budget.sqlite is unusable") as info:
            later.take()
        assert "\n" not in str(info.value)
    assert later.spent == (0, 5)


@pytest.mark.parametrize("value", ["100000000000000000000000", "-1", "1e23", "lots", "1.5"])
@pytest.mark.parametrize("option", ["--rag-max-judge-calls", "--rag-max-judge-tokens"])
def test_a_cap_out_of_range_is_a_usage_error_at_start(pytester, option, value):
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest(f"{option}={value}")
    assert result.ret == 4
    errors = [line for line in result.stderr.lines if "error" in line.lower()]
    assert len(errors) == 1 and option in errors[0] and "Traceback" not in result.stderr.str()


def test_under_a_cap_the_tests_in_order_get_the_budget_and_the_run_says_where_it_stopped(capped_project):
    """Six tests of a golden set, each 3 chunks scored twice (6 calls), under a cap of 12 calls:
    the first two pass and the third is where the cap stopped the run; judging the next tests' first
    scores ahead would have spent the calls the running test's second score needs."""
    pytester, server = capped_project
    rows = [
        {"id": f"s{i}", "question": f"Question {i}?", "contexts": [f"Chunk {i}.{j}." for j in range(3)],
         "ground_truth": "A."}
        for i in range(6)
    ]
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in rows))
    pytester.makepyfile(
        test_capped="""
        import pytest
        from pytest_ragmetrics import assert_context_precision, assert_context_relevance

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_golden(rag_sample):
            assert_context_precision(rag_sample) >= 0.5
            assert_context_relevance(rag_sample, method="graded") >= 0.5
        """
    )
    result = pytester.runpytest("--rag-max-judge-calls=12", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=4)
    assert server.request_count == 12
    result.stdout.fnmatch_lines(["*spending cap stopped the run*the first test it stopped: test_capped.py::test_golden[[]s2[]]"])
