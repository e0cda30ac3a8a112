"""Judging within a test: a test that builds its sample in its body (a retriever called there) has the
scores its function's earlier tests asked for started together at its first assertion, within the
concurrency bound, never in replay, cancelled by -x, and also inside xdist workers."""

import json
import threading
import time

from pytest_ragmetrics.testing import default_responder
from tests.test_prefetch import stop_recorder

pytest_plugins = ["pytester"]

RETRIEVER_TEST = """
import pytest
from pytest_ragmetrics import (
    RagSample, assert_context_precision, assert_context_recall, assert_context_relevance,
)

def retrieve(i):
    return [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."][:CHUNKS] + [
        f"Plan {i} note {c}." for c in range(CHUNKS - 2)
    ]

@pytest.mark.parametrize("i", range(COUNT))
def test_retrieved(i):
    sample = RagSample(
        f"What is the limit of plan {i}?", retrieve(i), ground_truth=f"The limit is {i} GB.", id=f"s{i}"
    )
BODY"""

#: Precision and graded relevance judge each of the two chunks, recall judges them at once: 5 calls.
THREE_ASSERTIONS = """\
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""


def retriever_test(count, body=THREE_ASSERTIONS, chunks=2):
    return RETRIEVER_TEST.replace("COUNT", str(count)).replace("CHUNKS", str(chunks)).replace("BODY", body)


def question(request):
    """The plan number a judge request is about ("What is the limit of plan 3?" -> 3); None for a
    request whose body never arrived (the client cancelled it while sending)."""
    if not isinstance(request, dict):
        return None
    content = request["messages"][-1]["content"]
    return int(json.loads(content)["question"].split("plan ")[1].rstrip("?"))


def kind(request):
    return request["response_format"]["json_schema"]["name"] if isinstance(request, dict) else None


class Overlap:
    """A responder that counts, per plan number, how many of its requests the server holds at once
    (each is held ``hold`` seconds); for the plans in ``together`` it holds each request until all
    ``parties`` requests of that plan have arrived, so they must all be in flight together."""

    def __init__(self, hold=0.05, together=(), parties=5):
        self.hold = hold
        self.lock = threading.Lock()
        self.now: dict[int, int] = {}
        self.peak: dict[int, int] = {}
        self.barriers = {plan: threading.Barrier(parties) for plan in together}
        self.broken: list[int] = []

    def __call__(self, body):
        plan = question(body)
        with self.lock:
            self.now[plan] = self.now.get(plan, 0) + 1
            self.peak[plan] = max(self.peak.get(plan, 0), self.now[plan])
        try:
            barrier = self.barriers.get(plan)
            if barrier is not None:
                try:
                    barrier.wait(timeout=10)
                except threading.BrokenBarrierError:
                    self.broken.append(plan)  # not all of them came: they were not started together
            else:
                time.sleep(self.hold)
            return default_responder(body)
        finally:
            with self.lock:
                self.now[plan] -= 1


def test_a_retriever_tests_other_scores_start_at_its_first_assertion(pytester, serve):
    """The first test asks for its scores one at a time; once it passed, each later test of the
    function has all five of its calls in flight together from its first assertion."""
    overlap = Overlap(together=(2, 5))
    server = serve(overlap)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(6))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=6)
    assert overlap.broken == []  # plans 2 and 5 each had their 5 requests at the server at once
    assert overlap.peak[0] == 2  # the first test: nothing known yet, one assertion at a time
    assert server.request_count == 6 * 5  # nothing judged twice


def test_scores_started_within_a_test_respect_the_concurrency_bound(pytester, serve):
    overlap = Overlap(hold=0.3)
    server = serve(overlap)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(5))
    pytester.runpytest("--rag-concurrency=3", "-p", "no:randomly").assert_outcomes(passed=5)
    assert server.max_in_flight == 3
    assert max(overlap.peak.values()) == 3
    assert server.request_count == 5 * 5


def test_a_test_whose_first_score_differs_has_nothing_started(pytester, serve):
    body = """\
    if i == 3:  # asks for recall first: not the plan the others follow
        assert_context_recall(sample) >= 0.5
    assert_context_precision(sample) >= 0.5
    if i != 3:
        assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
    overlap = Overlap(together=(2, 4))
    server = serve(overlap)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(5, body))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=5)
    assert overlap.peak[3] == 2  # one assertion at a time
    assert overlap.broken == []  # the tests around it had their 5 requests in flight together
    assert server.request_count == 5 * 5


def test_only_scores_every_passing_test_asked_for_are_started(pytester, serve):
    """The first test also asks for sentence relevance, the next ones do not: after the second test
    the plan no longer has it, so the tests after it have none started for them."""
    body = """\
    assert_context_precision(sample) >= 0.5
    if i == 0:
        assert_context_relevance(sample, "sentence") >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
    server = serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(6, body))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=6)
    sentence = {question(r.body) for r in server.requests if kind(r.body) == "context_relevance_sentences"}
    # The second test had it started (the first test's plan, narrowed once it passed), no later one.
    assert sentence == {0, 1}


def test_a_failing_test_does_not_teach_its_plan(pytester, serve):
    """A test that fails at its first assertion asked for one score only: the plan is still the
    passing tests' one."""
    body = """\
    assert_context_precision(sample) >= 0.5
    assert i != 1, "this retrieval is broken"
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
    overlap = Overlap(together=(2, 3))
    serve(overlap)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(4, body))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=3, failed=1)
    assert overlap.broken == []  # the tests after it had their 5 requests in flight together


STATE_PROBE = """
import pathlib
from pytest_ragmetrics.plugin import state_key

def _prefetcher(config):
    state = config.stash.get(state_key, None)
    return state.prefetcher if state is not None else None

def pytest_runtest_setup(item):
    prefetcher = _prefetcher(item.config)
    if prefetcher is not None:
        others = sorted({owner for owner, _, _ in prefetcher._pending.values() if owner != item.nodeid})
        if others:
            with open("leaks", "a") as fh:
                fh.write(f"{item.nodeid}: {others}\\n")

def pytest_sessionfinish(session):
    prefetcher = _prefetcher(session.config)
    pathlib.Path("started").write_text(str(prefetcher.started if prefetcher else 0))
"""


def test_scores_a_test_did_not_take_are_not_handed_to_another_test(pytester, serve):
    """The second test fails at its first assertion with its other scores started: they are no
    longer waiting to be taken when the next test starts."""
    body = """\
    assert_context_precision(sample) >= 0.5
    assert i != 1, "this retrieval is broken"
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(STATE_PROBE)
    pytester.makepyfile(test_retrieved=retriever_test(4, body))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=3, failed=1)
    # Started within the 3 tests after the first: 2 scores each besides their first one.
    assert int(pytester.path.joinpath("started").read_text()) == 3 * 2
    assert not pytester.path.joinpath("leaks").exists()


def test_nothing_is_started_within_a_test_in_replay(pytester, serve):
    server = serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(STATE_PROBE)
    pytester.makepyfile(test_retrieved=retriever_test(4))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=4)
    assert int(pytester.path.joinpath("started").read_text()) > 0
    assert server.request_count == 4 * 5
    # Every judgment is recorded now, so the replayed tests pass and teach the plan.
    replay = pytester.runpytest("--rag-cache=replay", "--rag-concurrency=8", "-p", "no:randomly")
    replay.assert_outcomes(passed=4)
    assert int(pytester.path.joinpath("started").read_text()) == 0
    assert server.request_count == 4 * 5


def test_a_stopped_run_cancels_what_a_failing_test_had_started(pytester, serve):
    """Under -x the second test fails after its first score while the rest of its plan waits for
    the concurrency bound: from then on only the calls already in flight arrive, the others are
    never sent."""
    body = """\
    assert_context_precision(sample) >= 0.5
    assert i != 1, "this retrieval is broken"
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
    server = serve(Overlap(hold=0.5))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(4, body, chunks=4))
    pytester.makeconftest(stop_recorder(2.0))
    result = pytester.runpytest("-x", "--rag-concurrency=2", "-p", "no:randomly")
    result.assert_outcomes(passed=1, failed=1)
    stopped_at = float(pytester.path.joinpath("stopped_at").read_text())
    second = [r for r in server.requests if question(r.body) == 1]
    assert len([r for r in second if r.received_at > stopped_at]) <= 2  # in flight when it stopped
    assert len(second) < 9  # 4 chunks x 2 metrics + recall: the rest of its plan was never sent
    assert {question(r.body) for r in server.requests} - {None} == {0, 1}


def test_scores_are_started_within_tests_under_xdist(pytester, serve):
    """A worker does not know which tests it runs next, but it knows the sample its running test
    built: the later tests a worker runs have their five calls in flight together."""
    overlap = Overlap(together=(9,))
    server = serve(overlap)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(10))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "--rag-concurrency=8")
    result.assert_outcomes(passed=10)
    assert overlap.broken == []  # the last test is never a worker's first
    assert server.request_count == 10 * 5
