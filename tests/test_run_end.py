"""The end of a run: the report's comparisons reach whoever reads them, and the run lets go of them."""

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from pytest_env import interrupted_twice, takes_ctrl_c

pytest_plugins = ["pytester"]

SCRIPTED_JUDGE = """
import pytest
from pytest_ragmetrics import ScriptedJudge
from pytest_ragmetrics.testing import conforming_value

@pytest.hookimpl(tryfirst=True)
def pytest_ragmetrics_make_judge(settings):
    return ScriptedJudge(lambda request: conforming_value(request.schema))
"""


def scripted_project(pytester: pytest.Pytester, count: int, test: str, conftest: str = "") -> pytest.Pytester:
    """A golden set of ``count`` one-chunk samples, the test file ``test``, a scripted judge and a
    disk cache in the project (``conftest`` adds to the conftest.py)."""
    pytester.makeini("[pytest]\nrag_cache_dir = cache\n")
    golden = [
        {"id": f"s{i}", "question": f"Limit of plan {i}?", "contexts": [f"Plan {i} has {i} GB."],
         "ground_truth": f"{i} GB."}
        for i in range(count)
    ]  # fmt: skip
    pytester.path.joinpath("golden.jsonl").write_text("\n".join(map(json.dumps, golden)))
    pytester.makepyfile(test_golden=test)
    pytester.makeconftest(SCRIPTED_JUDGE + conftest)
    return pytester


SUITE = """
import pytest
from pytest_ragmetrics import assert_context_precision, assert_context_relevance

@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_golden(rag_sample):
    assert_context_precision(rag_sample) >= 0.0
    assert_context_relevance(rag_sample, "graded") >= 0.0
"""

CONFTEST = """
import json, pathlib
from pytest_ragmetrics.plugin import session_key

def pytest_terminal_summary(terminalreporter):
    reports = [r for key in ("passed", "failed") for r in terminalreporter.stats.get(key, [])]
    kept = sum(hasattr(r, "ragmetrics") for r in reports)
    pathlib.Path("kept.json").write_text(json.dumps({"reports": len(reports), "with_rows": kept}))

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    from pytest_ragmetrics.plugin import _rows_key

    # The tests' own lists of comparisons waiting for their reports: handed over, none left.
    pathlib.Path("stashed.json").write_text(json.dumps(sum(_rows_key in i.stash for i in session.items)))

@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    state = config.stash.get(session_key, None)
    if state is not None:
        pathlib.Path("released.json").write_text(
            json.dumps({"rows": len(state.rows), "report": state.final_report is not None})
        )
"""

HOOK = """
import json, pathlib

def pytest_ragmetrics_report(report):
    verdicts = [len(s["verdicts"]) for r in report["results"] for s in r["samples"]]
    pathlib.Path("hooked.json").write_text(json.dumps(verdicts))
    lists = {type(r[name]).__name__ for r in report["results"] for name in ("judges", "samples", "where")}
    pathlib.Path("containers.json").write_text(json.dumps(sorted(lists)))
"""

KEPT = """
import json, pathlib
import pytest
from pytest_ragmetrics.plugin import session_key

@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session):
    rows = session.config.stash[session_key].rows
    pathlib.Path("rows.json").write_text(json.dumps([s for row in rows for s in row["samples"]]))
"""


@pytest.fixture
def suite(pytester):
    pytester.syspathinsert()  # the project's own plugins (-p hooks), in the in-process runs
    return scripted_project(pytester, 6, SUITE, CONFTEST)


def read(pytester: pytest.Pytester, name: str) -> Any:
    """The JSON a file of the project holds (an object or a list)."""
    return json.loads(pytester.path.joinpath(name).read_text())


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_test_reports_do_not_keep_the_comparisons_the_report_holds(suite, workers):
    suite.runpytest("-p", "no:randomly", "--rag-report-json=report.json", *workers).assert_outcomes(passed=6)
    assert read(suite, "kept.json") == {"reports": 6, "with_rows": 0}
    assert read(suite, "stashed.json") == 0
    assert len(read(suite, "report.json")["results"]) == 6 * 2
    assert read(suite, "released.json") == {"rows": 0, "report": False}


def test_a_report_hook_gets_every_comparison_when_nothing_else_asks_for_them(suite):
    suite.makepyfile(hooks=HOOK)
    suite.runpytest("-p", "no:randomly", "-p", "hooks").assert_outcomes(passed=6)
    verdicts = read(suite, "hooked.json")
    assert len(verdicts) == 6 * 2 and all(n >= 1 for n in verdicts)
    # A run keeps a comparison's judges, samples and place as tuples; the hook gets the report's lists.
    assert read(suite, "containers.json") == ["list"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_run_nobody_reads_keeps_each_comparisons_score_and_key_alone(suite, workers):
    """No report, baseline or report hook: the verdicts are never made JSON nor held to the end (an
    xdist worker still sends them: the controller decides what it reads)."""
    suite.makepyfile(kept=KEPT)
    run = suite.runpytest_subprocess if workers else suite.runpytest
    run("-p", "no:randomly", "-p", "kept", *workers).assert_outcomes(passed=6)
    samples = read(suite, "rows.json")
    assert len(samples) == 6 * 2
    if workers:
        assert all(s["verdicts"] for s in samples)
    else:
        assert all(set(s) == {"id", "score", "key"} for s in samples)
    assert sorted(s["id"] for s in samples) == sorted(f"s{i}" for i in range(6) for _ in range(2))


def test_a_report_without_readers_still_gates(suite):
    result = suite.runpytest("-p", "no:randomly", "--rag-gate=context_precision mean <= 0.5")
    result.assert_outcomes(passed=6)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*ragmetrics gate failed: context_precision mean <= 0.5*"])


TWO_TESTS = """
from pytest_ragmetrics import RagSample, assert_context_precision

def test_answered():
    assert_context_precision(RagSample("Answered?", ["Chunk one."], "One.")) >= 0.0

def test_held():
    assert_context_precision(RagSample("Held?", ["Chunk two."], "Two.")) >= 0.0
"""


@contextlib.contextmanager
def held_judge(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, Any]]:
    """TWO_TESTS against a fake judge that holds the second test's judgment until ``release`` is
    set: yields ``(server, release)``, with the run's environment pointing at the server."""
    import threading

    from pytest_ragmetrics.testing import FakeJudgeServer, default_responder

    release = threading.Event()

    def responder(body: Any) -> Any:
        if "Held?" in json.dumps(body):
            release.wait(60)
        return default_responder(body)

    pytester.makepyfile(test_two=TWO_TESTS)
    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # lines reach the pipe as pytest writes them
    with FakeJudgeServer(responder) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server, release


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_a_second_ctrl_c_stops_waiting_for_answers_in_one_line_and_keeps_those_received(
    pytester, monkeypatch
):
    """Ctrl-C while a judgment is held at the server; Ctrl-C again while the run waits for its answer."""
    with held_judge(pytester, monkeypatch) as (server, release):
        run = pytester.popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--rag-cache-dir=c"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=takes_ctrl_c,
        )
        output = interrupted_twice(run, server, 2, release)  # the second test's judgment is held
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "ragmetrics: waiting for the answers to 1 judge request already sent, to record them" in output
    assert "ragmetrics: interrupted again: the answers received are recorded" in output
    assert "Traceback" not in output
    replay = pytester.runpytest("-p", "no:cacheprovider", "--rag-cache-dir=c", "--rag-cache=replay", "-k", "ans")
    replay.assert_outcomes(passed=1)  # the answer received before the interrupts was recorded


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM to a child process is POSIX")
def test_sigterm_ends_the_run_as_ctrl_c_does_and_records_the_answers_on_their_way(pytester, monkeypatch):
    """A SIGTERM (a CI job's timeout) while a judgment is held at the server: the run waits for its
    answer, records it, writes the report and says it was interrupted, instead of dying silently."""
    import signal

    lines: list[str] = []
    with held_judge(pytester, monkeypatch) as (server, release):
        run = pytester.popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
             "--rag-cache-dir=c", "--rag-report-json=report.json"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )  # fmt: skip
        with run:
            try:
                assert server.wait_for_requests(2)  # the second test's judgment is held
                run.send_signal(signal.SIGTERM)
                for line in run.stdout:
                    lines.append(line)
                    if "waiting for the answers" in line:
                        release.set()  # the held answer arrives while the run waits for it
            finally:
                release.set()
    output = "".join(lines)
    assert run.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "ragmetrics: waiting for the answers to 1 judge request already sent, to record them" in output
    assert "KeyboardInterrupt: SIGTERM" in output
    assert "Traceback" not in output
    assert json.loads((pytester.path / "report.json").read_text())["summary"]
    replay = pytester.runpytest("-p", "no:cacheprovider", "--rag-cache-dir=c", "--rag-cache=replay")
    replay.assert_outcomes(passed=2)  # both answers were recorded, the one received after the SIGTERM too
