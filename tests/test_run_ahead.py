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


def project(pytester, serve, source, responder):
    """A project of one test file, ``source``, judged by a FakeJudgeServer answering with ``responder``."""
    server = serve(responder)
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_retrieved=source)
    return server


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
    """The first test teaches the plan; before the second test's body runs, its body and those of
    the ten after it run up to their first score, so all their calls are in flight together, each
    judged once."""
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
    project(pytester, serve, retriever_test(6), Overlap(hold=0.0))
    pytester.runpytest("--rag-concurrency=64", "-p", "no:randomly").assert_outcomes(passed=6)
    started, done = runs(pytester)
    assert started == done == Counter(range(6))


def test_the_window_bounds_how_far_bodies_run_ahead(pytester, serve):
    """As many tests ahead as judge calls allowed at once, at least 8: at each test's first score the
    window after it slides on, so one more body runs ahead."""
    server = project(pytester, serve, retriever_test(30), Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "--rag-concurrency=4", "-p", "no:randomly").assert_outcomes(
        passed=30
    )
    started, done = runs(pytester)
    assert done == Counter(range(30))
    # Before its body test 1 runs 1..9 ahead, test 2 runs 10, test 3 runs 11...
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
    project(pytester, serve, retriever_test(6, args, setup, fixture), Overlap(hold=0.0))
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
    project(pytester, serve, source, Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=5)
    started = Counter(pytester.path.joinpath("runs").read_text().split())
    assert started == Counter({"0": 1, "1": 2, "2": 2, "3": 2, "4": 2})


def test_what_a_body_prints_or_raises_ahead_is_left_to_its_own_turn(pytester, serve):
    """Test 4's retriever fails: the failure is test 4's alone, reported once, in its turn; test 1,
    which ran the bodies of tests 1 to 5 ahead, shows only its own turn's output."""
    setup = """print(f"retrieving {i}")
    if i == 4:
        raise LookupError("the index is down")"""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    source = retriever_test(6, setup=setup).replace(
        '    note(f"done {i}")', '    note(f"done {i}")\n    assert i != 1'
    )
    pytester.makepyfile(test_retrieved=source)
    result = pytester.runpytest("--rag-run-ahead", "-p", "no:randomly", "-rA")
    result.assert_outcomes(passed=4, failed=2)
    output = result.stdout.str()
    assert len(re.findall(r"^E +LookupError: the index is down$", output, re.MULTILINE)) == 1
    captured_1 = output.split("Captured stdout call -")[1].split("___")[0]
    assert captured_1.strip("- \n").split() == ["retrieving", "1"]
    started, done = runs(pytester)
    assert started[4] == 2 and 4 not in done


def test_nothing_runs_ahead_in_replay_or_a_warm_run(pytester, serve):
    server = project(pytester, serve, retriever_test(6), Overlap(hold=0.0))
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
    project(pytester, serve, retriever_test(8), Overlap(hold=0.0))
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
    server = project(pytester, serve, source, Overlap(hold=0.0))
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
    """Under -x the third test fails before its first score: what was started for the bodies run
    ahead and still waits for the concurrency bound is never sent."""
    setup = """assert i != 2, "this retrieval is broken\""""
    server = project(pytester, serve, retriever_test(20, setup=setup), Overlap(hold=0.5))
    pytester.makeconftest(stop_recorder(2.0))
    result = pytester.runpytest("-x", "--rag-run-ahead", "--rag-concurrency=2", "-p", "no:randomly")
    result.assert_outcomes(passed=2, failed=1)
    stopped_at = float(pytester.path.joinpath("stopped_at").read_text())
    assert len([r for r in server.requests if r.received_at > stopped_at]) <= 2  # in flight then
    started, _ = runs(pytester)
    assert max(started) <= 10  # the windows run ahead before the second and third tests, no further


HEAD = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall

def note(text):
    with open("runs", "a") as fh:
        fh.write(text + "\\n")

def make(i, extra=""):
    return RagSample(f"What is the limit of plan {i}?", [f"Plan {i} has a limit of {i} GB.{extra}"],
                     ground_truth=f"The limit is {i} GB.")
"""


def noted(pytester):
    return pytester.path.joinpath("runs").read_text().splitlines()


def test_a_test_pytest_does_not_run_never_runs_ahead(pytester, serve):
    source = (
        HEAD
        + """
@pytest.mark.parametrize("i", [0, 1, 2, pytest.param(3, marks=pytest.mark.xfail(run=False, reason="crashes")), 4])
def test_retrieved(i):
    note(str(i))
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
"""
    )
    server = project(pytester, serve, source, Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=4, xfailed=1)
    assert Counter(noted(pytester)) == Counter({"0": 1, "1": 2, "2": 2, "4": 2})
    assert 3 not in {question(r.body) for r in server.requests}  # nothing judged for it


@pytest.mark.parametrize("indirect", ["", ", indirect=True"])
def test_a_wider_fixture_built_from_a_parameter_is_never_taken_from_the_running_test(
    pytester, serve, indirect
):
    """parametrize(scope="module") or an indirect parameter: the running test's module fixture was built
    for its own parameter, not for the tests after it."""
    fixture = (
        "@pytest.fixture(scope='module')\ndef index(request):\n    return {'plan': request.param}\n"
        if indirect
        else "@pytest.fixture(scope='module')\ndef index(i):\n    return {'plan': i}\n"
    )
    name = "index" if indirect else "i"
    source = (
        HEAD
        + fixture
        + f"""
@pytest.mark.parametrize("{name}", range(4), scope="module"{indirect})
def test_retrieved(index):
    note(str(index["plan"]))
    sample = make(index["plan"])
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
"""
    )
    server = project(pytester, serve, source, Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=4)
    # Only the second test ran ahead, with its own fixtures, before its own body.
    assert Counter(noted(pytester)) == Counter({"0": 1, "1": 2, "2": 1, "3": 1})
    assert server.request_count == 4 * 2  # nothing judged for samples no test uses


def test_what_a_body_logs_ahead_stays_out_of_the_running_tests_report(pytester, serve):
    source = (
        HEAD
        + """
import logging

@pytest.mark.parametrize("i", range(5))
def test_retrieved(i):
    logging.getLogger("retriever").warning(f"retrieving {i}")
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    assert i != 1
"""
    )
    project(pytester, serve, source, Overlap(hold=0.0))
    result = pytester.runpytest("--rag-run-ahead", "-p", "no:randomly")
    result.assert_outcomes(passed=4, failed=1)
    section = result.stdout.str().split("Captured log call")[1].split("=====")[0]
    assert "retrieving 1" in section
    assert "retrieving 2" not in section, section


def test_a_body_that_scores_through_evaluate_stops_there_ahead(pytester, serve):
    """evaluate() is a score too: a body run ahead stops at it rather than judging and going on, and
    the report's judge figures are those of a run without the option."""
    source = (
        HEAD
        + """
from pytest_ragmetrics import evaluate

@pytest.mark.parametrize("i", range(5))
def test_retrieved(i):
    sample = make(i)
    note(f"start {i}")
    result = evaluate([make(i, " Extra.")], ["context_recall"])
    note(f"evaluated {i}")
    assert result is not None
    assert_context_precision(sample) >= 0.5
"""
    )
    project(pytester, serve, source, Overlap(hold=0.0))
    without = judge_figures(pytester, "--rag-cache-dir=c1")
    pytester.path.joinpath("runs").unlink()
    with_ = judge_figures(pytester, "--rag-cache-dir=c2", "--rag-run-ahead")
    assert without["summary"]["judge"] == with_["summary"]["judge"]
    runs = Counter(line.split()[0] for line in noted(pytester))
    assert runs["evaluated"] == 5 and runs["start"] == 5 + 4  # tests 1 to 4 also ran ahead, up to it


def test_a_ragmetrics_config_taking_arguments_keeps_bodies_from_running_ahead(pytester, serve):
    """Its settings can differ from test to test, and scores started ahead would use the running
    test's."""
    source = (
        HEAD
        + """
@pytest.fixture
def ragmetrics_config(model):
    return {"judge_model": model}

@pytest.mark.parametrize(("model", "i"), [(f"m{i}", i) for i in range(4)])
def test_retrieved(model, i):
    note(str(i))
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
"""
    )
    server = project(pytester, serve, source, Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=4)
    assert {(r.body["model"], question(r.body)) for r in server.requests} == {(f"m{i}", i) for i in range(4)}
    assert Counter(noted(pytester)) == Counter(str(i) for i in range(4))


TIMER_CONFTEST = """
import signal, pytest

@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    # What pytest-timeout's signal method does.
    def handler(signum, frame):
        pytest.fail("Timeout (>5.0s)", pytrace=False)
    signal.signal(signal.SIGALRM, handler)
    signal.setitimer(signal.ITIMER_REAL, 5.0)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
"""


@pytest.mark.skipif(not hasattr(__import__("signal"), "setitimer"), reason="no interval timers")
def test_nothing_runs_ahead_while_a_timer_signal_is_armed(pytester, serve):
    """Its handler's exception (a timeout) must reach the running test, not a body run ahead."""
    serve(Overlap(hold=0.0))
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(TIMER_CONFTEST)
    pytester.makepyfile(test_retrieved=retriever_test(5))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=5)
    started, done = runs(pytester)
    assert started == done == Counter(range(5))


def test_bodies_run_ahead_outside_the_running_tests_body(pytester, serve):
    """Nothing the running test's body holds (a lock around its scores, a patch) is held while the
    bodies run ahead: they run before it starts."""
    source = (
        HEAD
        + """
import threading
LOCK = threading.Lock()

@pytest.mark.parametrize("i", range(4))
def test_retrieved(i):
    got = LOCK.acquire(timeout=3)
    note(f"{i} {got}")
    try:
        sample = make(i)
        assert_context_precision(sample) >= 0.5
        assert_context_recall(sample) >= 0.5
    finally:
        if got:
            LOCK.release()
"""
    )
    project(pytester, serve, source, Overlap(hold=0.0))
    pytester.runpytest("--rag-run-ahead", "-p", "no:randomly").assert_outcomes(passed=4)
    assert len(noted(pytester)) == 1 + 3 * 2 and all(line.endswith("True") for line in noted(pytester))


def judge_figures(pytester, *args):
    pytester.runpytest("-p", "no:randomly", "--rag-report-json=report.json", *args)
    report = json.loads(pytester.path.joinpath("report.json").read_text())
    report["summary"]["judge"].pop("cache_dir")
    for row in report["results"]:
        row.pop("where", None)
    return report


@pytest.mark.parametrize(
    ("body", "args"),
    [
        (
            """
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
""",
            (),
        ),
        (  # the first test fails once, then passes on its rerun
            """
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    import os
    if i == 0 and not os.path.exists("failed-once"):
        open("failed-once", "w").close()
        assert False
""",
            ("--reruns", "1"),
        ),
        (  # tests branch: odd ones ask for recall first, on another sample
            """
    sample = make(i)
    if i % 2:
        assert_context_recall(make(i, " Odd.")) >= 0.0
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
""",
            (),
        ),
        (  # the first test fails at its first assertion
            """
    sample = make(i)
    assert_context_precision(sample) >= (2 if i == 0 else 0.5)
    assert_context_recall(sample) >= 0.5
""",
            (),
        ),
        (  # only the first test asks for graded relevance too
            """
    from pytest_ragmetrics import assert_context_relevance
    sample = make(i)
    assert_context_precision(sample) >= 0.5
    if i == 0:
        assert_context_relevance(sample, "graded") >= 0.0
    assert_context_recall(sample) >= 0.5
""",
            (),
        ),
    ],
    ids=["plain", "rerun", "branch", "first-fails", "first-asks-more"],
)
def test_a_run_ahead_reports_what_a_run_without_it_reports(pytester, serve, body, args):
    """Outcomes, every report row and the judge figures (calls, hits, tokens) are the same; but the
    scores the first passing test asked for and later tests do not are judged for the bodies run
    ahead before the second test narrows the plan (without the option, for the second test only)."""
    source = HEAD + '\n@pytest.mark.parametrize("i", range(6))\ndef test_retrieved(i):' + body
    project(pytester, serve, source, Overlap(hold=0.0))
    without = judge_figures(pytester, "--rag-cache-dir=c1", "-p", "no:cacheprovider", *args)
    pytester.path.joinpath("failed-once").unlink(missing_ok=True)
    with_ = judge_figures(pytester, "--rag-cache-dir=c2", "-p", "no:cacheprovider", "--rag-run-ahead", *args)
    a, b = without["summary"]["judge"], with_["summary"]["judge"]
    if "graded" in body:
        assert b.pop("calls") - a.pop("calls") == 4  # graded relevance for tests 2 to 5
        for name in ("prompt_tokens", "completion_tokens"):
            assert b.pop(name) > a.pop(name)
    assert a == b
    assert without["summary"].get("tests") == with_["summary"].get("tests")
    assert without["results"] == with_["results"]
