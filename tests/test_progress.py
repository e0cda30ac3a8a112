"""Judging progress: in place on a terminal, plain lines in logs, from xdist workers to the controller,
and nothing for a warm or quick run."""

import json
import os
import pty
import re
import subprocess
import sys

import pytest

# Imported here, so in-process runs do not count loading them as time spent waiting on the judge.
import pytest_ragmetrics.engine
import pytest_ragmetrics.judge.cache
import pytest_ragmetrics.judge.openai_judge
import pytest_ragmetrics.metrics.builtin
import pytest_ragmetrics.text  # noqa: F401
from pytest_ragmetrics.progress import (
    ControllerProgress,
    ProgressLine,
    WorkerProgress,
    format_done,
    format_progress,
    format_xdist_progress,
)
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

SLOW_TEST = """
from pytest_ragmetrics import RagSample, assert_context_relevance

def test_slow():
    chunks = [f"Paris fact number {i}." for i in range(CHUNKS)]
    assert_context_relevance(RagSample("Where is Paris?", chunks, id="slow"), method="graded") >= 0.0

def test_quick():
    pass
"""


@pytest.fixture
def slow_project(pytester, monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        pytester.makeini("[pytest]\n")
        pytester.server = server
        yield pytester


def test_progress_text_gives_judged_total_rate_and_time_left():
    assert format_progress(0, 1, None) == "ragmetrics: judged 0/1 judge call"
    assert format_progress(12, 40, 2.0) == "ragmetrics: judged 12/40 judge calls, 2.0/s, about 14s left"
    assert format_progress(40, 40, 2.0) == "ragmetrics: judged 40/40 judge calls, 2.0/s"
    assert format_progress(1, 500, 0.1).endswith("about 1h23m left")
    assert format_progress(10, 100, 1.0).endswith("about 1m30s left")
    assert format_xdist_progress(40, 3.2, 50, 126, 12.4) == (
        "ragmetrics: judged 40 judge calls, 3.2/s; 50/126 tests, about 12s left"
    )
    assert format_xdist_progress(1, None, 0, 126, None) == "ragmetrics: judged 1 judge call; 0/126 tests"
    assert format_done(126, 17.0) == "ragmetrics: judged 126 judge calls in 17s, 7.4/s"


def assert_one_unbroken_dots_line(result: pytest.RunResult) -> None:
    """pytest's line of dots reads as without progress, and nothing of ours comes before it."""
    lines = result.stdout.lines
    [end] = [i for i, line in enumerate(lines) if line.endswith("[100%]")]
    assert re.fullmatch(r"(test_rag\.py )?\.\. +\[100%\]", lines[end]), lines[end]
    assert not any("ragmetrics: judged" in line for line in lines[:end])


def test_in_a_log_a_cold_run_ends_with_one_progress_line_and_keeps_the_dots_line(slow_project, monkeypatch):
    monkeypatch.setattr(ProgressLine, "plain_after", 0.2)  # a shorter wait earns the line: a quicker test
    slow_project.server.delay(0.1)  # six calls one at a time: 0.6 s of waiting, three times the 0.2 s
    slow_project.makepyfile(test_rag=SLOW_TEST.replace("CHUNKS", "6"))
    cold = slow_project.runpytest("--rag-concurrency=1")
    cold.assert_outcomes(passed=2)
    assert_one_unbroken_dots_line(cold)
    assert cold.stdout.str().count("ragmetrics: judged") == 1
    cold.stdout.fnmatch_lines(["*[100%]", "*", "ragmetrics: judged 6 judge calls in *s, *.*/s"])
    quiet = slow_project.runpytest("--rag-concurrency=1", "-q", "--rag-cache=off")
    quiet.assert_outcomes(passed=2)
    assert "ragmetrics: judged" not in quiet.stdout.str()
    warm = slow_project.runpytest("--rag-concurrency=1")
    warm.assert_outcomes(passed=2)
    assert "ragmetrics: judged" not in warm.stdout.str()


def test_a_wait_shorter_than_the_log_threshold_prints_nothing_and_keeps_the_dots_line(
    slow_project, monkeypatch
):
    # A busy machine can stretch a short wait past the real threshold; this one is out of reach.
    monkeypatch.setattr(ProgressLine, "plain_after", 60.0)
    slow_project.server.delay(0.3)
    slow_project.makepyfile(test_rag=SLOW_TEST.replace("CHUNKS", "1"))
    result = slow_project.runpytest("-q")
    result.assert_outcomes(passed=2)
    assert "ragmetrics" not in result.stdout.str()
    dots = [line for line in result.stdout.lines if line.endswith("[100%]")]
    assert dots and dots[0].startswith("..  ")


def test_progress_on_a_terminal_is_drawn_in_place_and_erased(slow_project):
    """Through a real pseudo-terminal: the figures follow the dots and are erased before pytest writes."""
    # Eight calls one at a time: 2.4 s of waiting, drawn after the first second and again half a
    # second later at least (ProgressLine.tty_after, tty_every).
    slow_project.server.delay(0.3)
    slow_project.makepyfile(test_rag=SLOW_TEST.replace("CHUNKS", "8"))
    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": "120", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rag-concurrency=1", "--color=no"],
        cwd=slow_project.path,
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
    )
    os.close(child)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(main)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0, out
    assert "\x1b7 ragmetrics: judged " in out, repr(out)
    first = out.index("\x1b7 ragmetrics: judged ")  # saved the cursor, then the figures
    assert "\x1b8\x1b[K ragmetrics: judged " in out[first:]  # updated in place
    # Erased before the test's dot: the dots line reads as without progress.
    assert "\x1b8\x1b[K.." in out or "\x1b8\x1b[K." in out
    assert "\n" not in out[first : out.index("[100%]")]


def test_under_xdist_a_log_gets_one_line_at_the_end_and_an_unbroken_dots_line(slow_project):
    slow_project.server.delay(0.8)
    slow_project.makepyfile(test_rag=SLOW_TEST.replace("CHUNKS", "6"))
    result = slow_project.runpytest("-n", "2", "-p", "xdist", "--rag-concurrency=1")
    result.assert_outcomes(passed=2)
    assert_one_unbroken_dots_line(result)
    assert result.stdout.str().count("ragmetrics: judged") == 1
    result.stdout.fnmatch_lines(["ragmetrics: judged 6 judge calls in *s*"])


def test_under_xdist_time_left_is_reckoned_from_the_runs_known_number_of_tests(pytester):
    controller = ControllerProgress(pytester.parseconfig())
    try:
        assert controller._text(1, 2, None) == "ragmetrics: judged 1/2 judge calls"  # tests not known yet
        controller.pytest_xdist_node_collection_finished(None, [f"t{i}" for i in range(126)])
        controller.pytest_xdist_node_collection_finished(None, [f"t{i}" for i in range(126)])
        assert controller.tests == 126
        assert controller._tests_since is not None
        controller._tests_since -= 10.0  # ten seconds into the run, 50 tests done
        controller.tests_done = 50
        text = controller._text(40, 41, 4.0)
        assert text.startswith("ragmetrics: judged 40 judge calls, 4.0/s; 50/126 tests, about 1")
        assert text.endswith("s left") and "/41" not in text
    finally:
        controller.stop()


def test_controller_adds_up_fresh_worker_files_and_ignores_broken_ones(tmp_path, pytester):
    config = pytester.parseconfig()
    controller = ControllerProgress(config)
    try:
        counts = {"gw0": (3, 5), "gw1": (1, 4)}
        for worker, (judged, total) in counts.items():

            def live(j: int = judged, t: int = total) -> tuple[int, int]:
                return j, t

            progress = WorkerProgress(controller.directory, worker, live)
            progress.waiting(2.5 if worker == "gw0" else 0.7)
        with open(os.path.join(controller.directory, "gw2.json"), "w") as fh:
            fh.write("{not json")
        with open(os.path.join(controller.directory, "gw3.json"), "w") as fh:
            json.dump({"judged": 1, "total": 1, "waited": 9.0, "at": 0}, fh)  # stale: long ago
        assert controller.figures() == (5, 10, 2.5)
    finally:
        controller.stop()
    assert not os.path.exists(controller.directory)
