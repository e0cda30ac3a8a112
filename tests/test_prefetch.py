"""Judging ahead: the next tests' scores start while one runs, within the concurrency bound, never in
replay, and nothing more is sent once the run stops."""

import json

import pytest
from pytest_env import COUNT_HANDOVERS

import pytest_ragmetrics.assertions
import pytest_ragmetrics.engine
import pytest_ragmetrics.judge.cache
import pytest_ragmetrics.judge.openai_judge
import pytest_ragmetrics.loaders
import pytest_ragmetrics.metrics.builtin
import pytest_ragmetrics.prefetch
import pytest_ragmetrics.text  # noqa: F401
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


@pytest.fixture
def judge_server(monkeypatch):
    with FakeJudgeServer(latency=0.2) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server


def golden(count: int) -> str:
    return "\n".join(
        json.dumps(
            {
                "id": f"s{i}",
                "question": f"What is the limit of plan {i}?",
                "contexts": [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."],
                "ground_truth": f"The limit is {i} GB.",
            }
        )
        for i in range(count)
    )


GOLDEN_TEST = """
import pytest
from pytest_ragmetrics import assert_context_precision, assert_context_relevance

@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_golden(rag_sample):
    assert_context_precision(rag_sample) >= THRESHOLD
    assert_context_relevance(rag_sample, "graded") >= 0.5
"""


@pytest.fixture
def project(pytester, judge_server):
    pytester.makeini("[pytest]\n")
    pytester.path.joinpath("golden.jsonl").write_text(golden(12))
    pytester.makepyfile(test_golden=GOLDEN_TEST.replace("THRESHOLD", "0.5"))
    return pytester


def test_a_golden_set_is_judged_ahead_within_the_concurrency_bound(project, judge_server):
    project.makeconftest(COUNT_HANDOVERS)
    result = project.runpytest("--rag-concurrency=6", "-p", "no:randomly")
    result.assert_outcomes(passed=12)
    # Each test needs 4 calls (2 chunks x 2 metrics) and asks for 2 at a time: more in flight than
    # that is judging ahead, and never more than the bound.
    assert judge_server.request_count == 12 * 4
    assert 2 < judge_server.max_in_flight <= 6
    # The scores of the tests ahead start together: one hand-over to the judging thread per score of
    # the first test, which teaches the plan and starts the next 11 tests (a window of 8 and a half).
    assert int(project.path.joinpath("handovers").read_text()) == 2


def test_a_window_of_tests_stays_started_ahead_topped_up_half_a_window_at_a_time(project, monkeypatch):
    """At least a window of tests ahead of the running one (8 here) has its scores started, topped up
    by half a window at a time: a hand-over to the judging thread every few tests, not at each."""
    project.makeconftest(COUNT_HANDOVERS)
    project.path.joinpath("golden.jsonl").write_text(golden(20))
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        project.runpytest("--rag-concurrency=6", "-p", "no:randomly").assert_outcomes(passed=20)
    assert server.request_count == 20 * 4  # nothing judged twice
    # The first test's two scores start tests 2-13; the sixth test, with 7 started after it, starts
    # 14-18; the eleventh starts 19-20; from the sixteenth on there is nothing left to start.
    assert int(project.path.joinpath("handovers").read_text()) == 2 + 2


def test_the_first_test_of_a_golden_set_is_not_judged_alone(project, judge_server):
    """Each score the first test asks for is started for the next tests at once, not once that test
    is over: the judge is busy from the start of a cold run."""
    project.makeconftest("""
        import pathlib, time

        def pytest_runtest_logreport(report):
            if report.when == "call" and report.nodeid.endswith("[s0]"):
                pathlib.Path("first_done").write_text(repr(time.time()))
    """)
    project.runpytest("--rag-concurrency=6", "-p", "no:randomly").assert_outcomes(passed=12)
    first_done = float(project.path.joinpath("first_done").read_text())
    during = [json.dumps(r.body) for r in judge_server.requests if r.received_at < first_done]
    assert any("plan 0?" in body for body in during)
    assert any("plan 0?" not in body for body in during)  # the next tests' own samples
    assert judge_server.request_count == 12 * 4  # nothing judged twice
    assert judge_server.max_in_flight <= 6


CUSTOM_METRICS = """
import os, pathlib
from pytest_ragmetrics import MetricResult, hookimpl


class Noted:
    \"\"\"Notes each sample it scores and the test running then.\"\"\"

    methods, default_method, uses_judge = (), None, False

    def __init__(self, name, ahead):
        self.name = name
        if ahead:
            self.scored_ahead = True

    async def score(self, sample, method, ctx):
        running = os.environ.get("PYTEST_CURRENT_TEST", "none[-]").split(" ")[0]
        with pathlib.Path(self.name).open("a") as notes:
            notes.write(f"{sample.id} {running}\\n")
        return MetricResult(1.0, self.name, sample_id=sample.id)


@hookimpl
def pytest_ragmetrics_metrics():
    return [Noted("in_turn", ahead=False), Noted("eager", ahead=True)]
"""


def test_a_custom_metric_is_scored_in_its_tests_turn_unless_it_says_otherwise(project, judge_server):
    """Judging ahead starts only metrics that say ``scored_ahead``: a custom metric's code runs while
    its own test runs, never for a test that has not started."""
    project.makeconftest(CUSTOM_METRICS)
    project.makepyfile(
        test_golden=GOLDEN_TEST.replace("THRESHOLD", "0.5")
        .replace(
            "    assert_context_precision(",
            "    assert_metric(rag_sample, 'in_turn') >= 1\n"
            "    assert_metric(rag_sample, 'eager') >= 1\n    assert_context_precision(",
        )
        .replace("import assert_context_precision", "import assert_metric, assert_context_precision")
    )
    project.runpytest("--rag-concurrency=6", "-p", "no:randomly").assert_outcomes(passed=12)

    def notes(name: str) -> list[tuple[str, str]]:
        lines = project.path.joinpath(name).read_text().splitlines()
        return [(sample, running.rsplit("[", 1)[1].rstrip("]")) for sample, running in map(str.split, lines)]

    in_turn = notes("in_turn")
    assert sorted(sample for sample, _ in in_turn) == sorted(f"s{i}" for i in range(12))
    assert all(sample == running for sample, running in in_turn)
    eager = notes("eager")  # said it may be: started for the next tests while an earlier one ran
    assert sorted(sample for sample, _ in eager) == sorted(f"s{i}" for i in range(12))
    assert any(sample != running for sample, running in eager)
    assert judge_server.request_count == 12 * 4  # the built-in metrics are judged ahead still
    assert judge_server.max_in_flight > 2


def test_without_prefetching_a_test_waits_for_each_score(project, judge_server):
    """The same suite against the same judge, one test at a time: what prefetching saves."""
    project.makepyfile(
        test_golden=GOLDEN_TEST.replace("THRESHOLD", "0.5").replace("(samples=", "(judge_n=1, samples=")
    )
    result = project.runpytest("--rag-concurrency=6", "-p", "no:randomly", "-k", "s0")
    result.assert_outcomes(passed=1)
    assert judge_server.max_in_flight == 2


LEFT_BEHIND = """
import json, pathlib
from pytest_ragmetrics.plugin import session_key

ended, left, looked = [], [], []

def pytest_runtest_logreport(report):
    if report.when == "teardown":
        ended.append(report.nodeid)

def pytest_runtest_setup(item):
    session = item.config.stash.get(session_key, None)
    prefetcher = session.prefetcher if session is not None else None
    if prefetcher is not None and ended:
        looked.append(item.nodeid)
        left.extend(nodeid for nodeid, _ in prefetcher._pending.values() if nodeid in ended)

def pytest_sessionfinish():
    pathlib.Path("left.json").write_text(json.dumps({"left": left, "looked": len(looked)}))
"""


def test_what_a_test_did_not_take_is_dropped_at_its_end(project, judge_server):
    """A test whose first comparison fails never asks for its second score, started ahead for it:
    that is dropped when the test ends, as is nothing of a test that took all of its scores."""
    project.makepyfile(  # the first test takes both scores (the plan); the others fail at the first
        test_golden=GOLDEN_TEST.replace("THRESHOLD", '(0.0 if rag_sample.id == "s0" else 1.5)')
        + """
@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_taken(rag_sample):
    assert_context_precision(rag_sample) >= 0.0
    assert_context_relevance(rag_sample, "graded") >= 0.0
"""
    )
    project.makeconftest(LEFT_BEHIND)
    project.runpytest("--rag-concurrency=6", "-p", "no:randomly").assert_outcomes(failed=11, passed=13)
    seen = json.loads(project.path.joinpath("left.json").read_text())
    assert seen["left"] == []
    assert seen["looked"] == 2 * 12 - 1


def test_nothing_is_judged_ahead_in_replay(project, judge_server):
    project.runpytest("--rag-cache=replay", "--rag-concurrency=6").assert_outcomes(failed=12)
    assert judge_server.request_count == 0


def stop_recorder(linger: float) -> str:
    """A conftest noting when a test failed (in ``stopped_at``), and letting the run linger
    ``linger`` seconds at its end: anything not cancelled has time to reach the judge."""
    return f"""
import pathlib, time, pytest

@pytest.hookimpl(trylast=True)
def pytest_runtest_logreport(report):
    if report.failed:
        pathlib.Path("stopped_at").write_text(repr(time.time()))

@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish():
    time.sleep({linger})
"""


def test_a_stopped_run_sends_nothing_for_the_tests_it_will_not_run(project, judge_server):
    """The first test fails under -x while the next tests are judged ahead: from then on only the
    calls already in flight arrive, everything still waiting for the concurrency bound is dropped."""
    project.makepyfile(test_golden=GOLDEN_TEST.replace("THRESHOLD", "1.5"))  # the first test fails
    project.path.joinpath("golden.jsonl").write_text(golden(40))
    project.makeconftest(stop_recorder(1.0))
    result = project.runpytest("-x", "--rag-concurrency=4", "-p", "no:randomly")
    result.assert_outcomes(failed=1)
    stopped_at = float(project.path.joinpath("stopped_at").read_text())
    later = [r for r in judge_server.requests if r.received_at > stopped_at]
    assert len(later) <= 4  # at most the calls in flight when the run stopped
    assert judge_server.request_count < 40  # of the 80 the golden set's precision needs
