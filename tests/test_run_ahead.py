"""--rag-run-ahead: while a test waits for the judge, the bodies of the next tests of its function run
up to their first score, so a first run of tests that call the retriever in their body judges their
samples together. Only bodies that can run faithfully out of turn do; nothing runs ahead in replay, in
a warm run, under xdist or after -x stops the run; what a body prints or raises ahead is dropped."""

import json
import re
import threading
from collections import Counter

import pytest

from pytest_ragmetrics.testing import default_responder
from tests.test_prefetch import stop_recorder
from tests.test_prefetch_within import Overlap, question

pytest_plugins = ["pytester"]

#: A retriever test that notes each run of its body in ``runs`` ("i" before its first score, "done i"
#: after its last one); FIXTURES and SETUP are replaced per test.
RETRIEVER_TEST = """
import pytest
from pytest_ragmetrics import (
    RagSample, assert_context_precision, assert_context_recall, assert_context_relevance,
)

def note(text):
    with open("runs", "a") as fh:
        fh.write(text + "\\n")

def retrieve(i):
    return [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."]
FIXTURE
PARAMETRIZE
def test_retrieved(i ARGS):
    note(str(i))
    SETUP
    sample = RagSample(
        f"What is the limit of plan {i}?", retrieve(i), ground_truth=f"The limit is {i} GB.", id=f"s{i}"
    )
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
    note(f"done {i}")
"""


def retriever_test(count, args="", setup="pass", fixture=""):
    return (
        RETRIEVER_TEST.replace("PARAMETRIZE", f'@pytest.mark.parametrize("i", range({count}))')
        .replace("FIXTURE", fixture)
        .replace(" ARGS", args)
        .replace("SETUP", setup)
    )


def runs(pytester):
    """How many times each test's body started, and how many times it got past its last score."""
    lines = pytester.path.joinpath("runs").read_text().split()
    text = pytester.path.joinpath("runs").read_text().splitlines()
    started = Counter(int(line) for line in text if not line.startswith("done"))
    done = Counter(int(line.split()[1]) for line in text if line.startswith("done"))
    assert lines  # the body ran
    return started, done


class Together:
    """Holds every request about the plans in ``plans`` until all ``parties`` of them have arrived:
    they can only all be answered if they were all in flight together."""

    def __init__(self, plans, parties):
        self.plans = set(plans)
        self.barrier = threading.Barrier(parties)
        self.broken = False

    def __call__(self, body):
        if question(body) in self.plans:
            try:
                self.barrier.wait(timeout=10)
            except threading.BrokenBarrierError:
                self.broken = True
        return default_responder(body)


def test_the_next_tests_bodies_run_ahead_and_are_judged_together(pytester, serve):
    """At the first test's first score the bodies of the next eleven run up to their first score;
    each score the first test asks for is started on their samples too, so all their calls are in
    flight together, each judged once."""
    together = Together(plans=range(1, 12), parties=11 * 5)
    server = serve(together)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(12))
    result = pytester.runpytest("--rag-run-ahead", "--rag-concurrency=64", "-p", "no:randomly")
    result.assert_outcomes(passed=12)
    assert not together.broken  # plans 1 to 11: their 55 requests were at the server at once
    assert server.request_count == 12 * 5  # nothing judged twice
    started, done = runs(pytester)
    # Each body ran to its end once; those run ahead also started once before their turn.
    assert done == Counter(range(12))
    assert started == Counter({0: 1, **{i: 2 for i in range(1, 12)}})


def test_without_the_option_each_body_runs_once(pytester, serve):
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(6))
    pytester.runpytest("--rag-concurrency=64", "-p", "no:randomly").assert_outcomes(passed=6)
    started, done = runs(pytester)
    assert started == done == Counter(range(6))


def test_the_window_bounds_how_far_bodies_run_ahead(pytester, serve):
    """As many tests ahead as judge calls allowed at once, at least 8: at each test's first score the
    window after it slides on, so one more body runs ahead."""
    server = serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(30))
    pytester.runpytest("--rag-run-ahead", "--rag-concurrency=4", "-p", "no:randomly").assert_outcomes(
        passed=30
    )
    started, done = runs(pytester)
    assert done == Counter(range(30))
    # Test 0 runs 1..8 ahead, test 1 runs 9, test 2 runs 10...
    assert started == Counter({0: 1, **{i: 2 for i in range(1, 30)}})
    assert server.request_count == 30 * 5


@pytest.mark.parametrize(
    ("args", "setup", "fixture"),
    [
        (", tmp_path", "pass", ""),  # a function-scoped fixture
        (", request", "pass", ""),
        ("", "pass", "@pytest.fixture(autouse=True)\ndef each():\n    yield\n"),  # autouse, function scope
        (", retriever", "pass", "@pytest.fixture\ndef retriever():\n    return retrieve\n"),
    ],
    ids=["tmp_path", "request", "autouse", "function-fixture"],
)
def test_a_body_that_needs_its_own_setup_never_runs_ahead(pytester, serve, args, setup, fixture):
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(6, args, setup, fixture))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=6)
    started, done = runs(pytester)
    assert started == done == Counter(range(6))


def test_a_session_fixture_the_running_test_holds_is_passed_to_bodies_run_ahead(pytester, serve):
    fixture = """
import itertools
SETUPS = itertools.count()

@pytest.fixture(scope="session")
def retriever():
    note(f"setup {next(SETUPS)}")
    return retrieve
"""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    source = retriever_test(6, ", retriever", fixture=fixture).replace(
        "retrieve(i), ground", "retriever(i), ground"
    )
    pytester.makepyfile(test_retrieved=source)
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=6)
    text = pytester.path.joinpath("runs").read_text().splitlines()
    assert text.count("setup 0") == 1 and "setup 1" not in text
    assert Counter(line for line in text if line.isdigit()) == Counter(
        {"0": 1, "1": 2, "2": 2, "3": 2, "4": 2, "5": 2}
    )


def test_methods_of_a_test_class_run_ahead_on_an_instance_of_their_own(pytester, serve):
    source = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall

class TestRetrieval:
    seen = None

    @pytest.mark.parametrize("i", range(5))
    def test_retrieved(self, i):
        assert self.seen is None  # a fresh instance: nothing left by a run ahead
        self.seen = i
        with open("runs", "a") as fh:
            fh.write(f"{i}\\n")
        sample = RagSample(f"What is the limit of plan {i}?", [f"Plan {i} has a limit of {i} GB."],
                           ground_truth=f"The limit is {i} GB.")
        assert_context_precision(sample) >= 0.5
        assert_context_recall(sample) >= 0.5
"""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=source)
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=5)
    started = Counter(pytester.path.joinpath("runs").read_text().split())
    assert started == Counter({"0": 1, "1": 2, "2": 2, "3": 2, "4": 2})


def test_what_a_body_prints_or_raises_ahead_is_left_to_its_own_turn(pytester, serve):
    """Test 4's retriever fails: the failure is test 4's alone, reported once, in its turn; test 0,
    which ran the bodies of tests 1 to 5 ahead, shows nothing of their output."""
    setup = """print(f"retrieving {i}")
    if i == 4:
        raise LookupError("the index is down")"""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    source = retriever_test(6, setup=setup).replace(
        '    note(f"done {i}")', '    note(f"done {i}")\n    assert i != 0'
    )
    pytester.makepyfile(test_retrieved=source)
    result = pytester.runpytest("--rag-run-ahead", "-p", "no:randomly", "-rA")
    result.assert_outcomes(passed=4, failed=2)
    output = result.stdout.str()
    assert len(re.findall(r"^E +LookupError: the index is down$", output, re.MULTILINE)) == 1
    captured_0 = output.split("Captured stdout call")[1].split("___")[0]
    assert "retrieving 0" in captured_0 and "retrieving 2" not in captured_0
    started, done = runs(pytester)
    assert started[4] == 2 and 4 not in done


def test_nothing_runs_ahead_in_replay_or_a_warm_run(pytester, serve):
    server = serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(6))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=6)
    assert server.request_count == 6 * 5
    for mode in ("replay", "readwrite"):
        pytester.path.joinpath("runs").unlink()
        result = pytester.runpytest("--rag-run-ahead", f"--rag-cache={mode}", "-p", "no:randomly")
        result.assert_outcomes(passed=6)
        started, done = runs(pytester)
        assert started == done == Counter(range(6)), mode
    assert server.request_count == 6 * 5


def test_nothing_runs_ahead_under_xdist(pytester, serve):
    """A worker does not know which tests it runs next: running their bodies would be work lost."""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(8))
    result = pytester.runpytest_subprocess("-n", "2", "-p", "xdist", "--rag-run-ahead")
    result.assert_outcomes(passed=8)
    started, done = runs(pytester)
    assert started == done == Counter(range(8))


def test_a_body_whose_sample_changes_is_scored_on_the_sample_of_its_turn(pytester, serve):
    """A retriever that returns something else each time: what was started ahead is not taken, the
    test is scored on what its own turn retrieved."""
    setup = """global CALLS
    CALLS = globals().get("CALLS", 0) + 1"""
    source = retriever_test(5, setup=setup).replace(
        'f"Plan {i} costs {i} dollars."]', 'f"Plan {i} costs {i} dollars."] + [f"Run {CALLS}."] * (i == 3)'
    )
    server = serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=source)
    pytester.runpytest(
        "--rag-run-ahead", "-p", "no:randomly", "--rag-report-json=report.json"
    ).assert_outcomes(passed=5)
    runs_seen = {
        word
        for r in server.requests
        if question(r.body) == 3
        for word in re.findall(r"Run [0-9]+", r.body["messages"][-1]["content"])
    }
    assert len(runs_seen) == 2  # what was started ahead, and what its turn retrieved
    report = json.loads(pytester.path.joinpath("report.json").read_text())
    assert len(report["results"]) == 5 * 3  # the comparisons of each turn; nothing from a body run ahead


def test_a_stopped_run_runs_no_more_bodies_and_cancels_what_they_started(pytester, serve):
    """Under -x the third test fails: what was started for the bodies run ahead and still waits for
    the concurrency bound is never sent."""
    setup = """assert i != 2, "this retrieval is broken\""""
    server = serve(Overlap(hold=0.5))
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=retriever_test(20, setup=setup))
    pytester.makeconftest(stop_recorder(2.0))
    result = pytester.runpytest("-x", "--rag-run-ahead", "--rag-concurrency=2", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    stopped_at = float(pytester.path.joinpath("stopped_at").read_text())
    assert len([r for r in server.requests if r.received_at > stopped_at]) <= 2  # in flight then
    started, _ = runs(pytester)
    assert max(started) <= 9  # the window run ahead at the second test's first score, no further
