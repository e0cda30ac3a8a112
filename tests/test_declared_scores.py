"""Scores a test declares (``@pytest.mark.ragmetrics(metrics=[...])``) start together at its first one:
a test that builds its sample in its body waits about one judge call, not one per assertion. Nothing
but judging happens ahead: each test body runs once, in its turn."""

import json
import threading
from typing import Any

from pytest_env import COUNT_HANDOVERS

from pytest_ragmetrics.testing import default_responder

pytest_plugins = ["pytester"]

RETRIEVER_TEST = """
import pathlib
import pytest
from pytest_ragmetrics import (
    RagSample, assert_context_precision, assert_context_recall, assert_context_relevance,
)

def retrieve(i):
    with pathlib.Path("bodies.log").open("a") as log:
        log.write(f"{i}\\n")  # every body that runs, in the order it runs
    return [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."]

MARKER
@pytest.mark.parametrize("i", range(COUNT))
def test_retrieved(i):
    sample = RagSample(
        f"What is the limit of plan {i}?", retrieve(i), ground_truth=f"The limit is {i} GB.", id=f"s{i}"
    )
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""

DECLARED = '@pytest.mark.ragmetrics(metrics=["context_precision", "context_recall", "context_relevance[graded]"])'
#: Precision and graded relevance judge each of the two chunks, recall judges them at once: 5 calls.
CALLS = 5


def retriever_test(count: int, marker: str = DECLARED) -> str:
    return RETRIEVER_TEST.replace("COUNT", str(count)).replace("MARKER", marker)


def plan(body: dict[str, Any]) -> int:
    content = body["messages"][-1]["content"]
    return int(json.loads(content)["question"].split("plan ")[1].rstrip("?"))


class Together:
    """Holds each request until all ``parties`` requests of its plan have arrived: they can only be
    answered if they were all in flight at once (a barrier, not a clock)."""

    def __init__(self, parties: int = CALLS, timeout: float = 10.0) -> None:
        self.parties = parties
        self.timeout = timeout
        self.lock = threading.Lock()
        self.barriers: dict[int, threading.Barrier] = {}
        self.broken: list[int] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any] | str:
        with self.lock:
            barrier = self.barriers.setdefault(plan(body), threading.Barrier(self.parties))
        try:
            barrier.wait(timeout=self.timeout)
        except threading.BrokenBarrierError:
            self.broken.append(plan(body))
        return default_responder(body)


def test_a_tests_declared_scores_are_in_flight_together(pytester, serve):
    together = Together()
    server = serve(together)
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makeconftest(COUNT_HANDOVERS)
    pytester.makepyfile(test_retrieved=retriever_test(4))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=4)
    assert together.broken == []  # every test had its five calls at the server at once
    assert server.request_count == 4 * CALLS  # nothing judged twice
    assert pytester.path.joinpath("bodies.log").read_text().split() == ["0", "1", "2", "3"]
    # The three declared scores start with one hand-over to the judging thread per test.
    assert pytester.path.joinpath("handovers").read_text() == "4"


def test_without_a_declaration_a_test_asks_one_score_at_a_time(pytester, serve):
    together = Together(timeout=0.5)
    server = serve(together)
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makepyfile(test_retrieved=retriever_test(1, marker=""))
    pytester.runpytest("--rag-concurrency=8", "-p", "no:randomly").assert_outcomes(passed=1)
    assert together.broken  # its calls came in groups of at most two
    assert server.max_in_flight == 2


def test_declared_scores_respect_the_concurrency_bound(pytester, serve):
    server = serve(default_responder)
    server.delay(0.05)
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makepyfile(test_retrieved=retriever_test(3))
    pytester.runpytest("--rag-concurrency=3", "-p", "no:randomly").assert_outcomes(passed=3)
    assert server.max_in_flight == 3
    assert server.request_count == 3 * CALLS


def test_nothing_is_started_in_replay(pytester, serve):
    server = serve(default_responder)
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makepyfile(test_retrieved=retriever_test(2))
    pytester.runpytest("--rag-cache=replay", "-p", "no:randomly").assert_outcomes(failed=2)
    assert server.request_count == 0


def test_under_xdist_each_worker_starts_its_tests_declared_scores_together(pytester, serve):
    together = Together()
    server = serve(together)
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makepyfile(test_retrieved=retriever_test(4))
    result = pytester.runpytest("-n", "2", "-p", "xdist", "--rag-concurrency=8")
    result.assert_outcomes(passed=4)
    assert together.broken == []
    assert server.request_count == 4 * CALLS
    assert sorted(pytester.path.joinpath("bodies.log").read_text().split()) == ["0", "1", "2", "3"]


def test_a_declaration_that_is_not_a_list_of_metric_names_is_a_usage_error(pytester):
    pytester.makeini("[pytest]\nrag_response_format = json_schema\n")
    pytester.makepyfile(test_retrieved=retriever_test(1, marker='@pytest.mark.ragmetrics(metrics="context_recall")'))
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*metrics=...) must be a list of metric names*"])
    pytester.makepyfile(test_retrieved=retriever_test(1, marker='@pytest.mark.ragmetrics(metrics=["recall[["])'))
    result = pytester.runpytest()
    result.stderr.fnmatch_lines(["*ragmetrics(metrics=...)*"])
