"""The engine and the assertion helpers in a plain Python script: no pytest anywhere."""

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from pytest_env import interrupted_twice, takes_ctrl_c

from pytest_ragmetrics.testing import FakeJudgeServer, default_responder

SCRIPT = textwrap.dedent("""
    import sys
    from pytest_ragmetrics import (
        Evaluator, RagSample, ScriptedJudge, Settings, assert_context_recall, context_precision, evaluate,
    )

    def judge(request):
        if request.kind == "context_recall":
            return {f"sentence_{i}": {"reason": "r", "attributed": i == 1}
                    for i in range(1, len(request.inputs["reference_sentences"]) + 1)}
        if request.kind == "context_precision":
            return {"reason": "r", "useful": "Paris" in request.inputs["chunk"]}
        return {"reason": "r", "rating": 2}

    sample = RagSample("Capital of France?", ["Bread is tasty.", "Paris is the capital."],
                       ground_truth="France is a country. Paris is its capital.", id="s1")
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(judge)) as ev:
        print("precision", float(context_precision(sample, evaluator=ev)))
        out = evaluate([sample], ["context_recall", "context_relevance[graded]"], evaluator=ev)
        print("aggregates", out.aggregates["context_recall"]["mean"], out.aggregates["context_relevance[graded]"]["n"])
        assert_context_recall(sample, evaluator=ev) >= 0.5
        try:
            assert_context_recall(sample, evaluator=ev) >= 0.8
        except AssertionError as exc:
            print("ASSERTION", str(exc).splitlines()[0])
    print("pytest imported:", "pytest" in sys.modules or "_pytest" in sys.modules)
""")


def test_engine_and_assertions_run_without_pytest(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "precision 0.5" in lines
    assert "aggregates 0.5 1" in lines
    assert "ASSERTION context_recall of sample 's1' = 0.500, expected >= 0.8" in lines
    assert "pytest imported: False" in lines


ERRORS_SCRIPT = textwrap.dedent("""
    import os
    from pytest_ragmetrics import Evaluator, RagSample, Settings, context_recall
    from pytest_ragmetrics.errors import RagMetricsError

    for name in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_ENDPOINT"):
        os.environ.pop(name, None)
    sample = RagSample("Capital of France?", ["Paris is the capital."], ground_truth="Paris.")
    for settings in (Settings(), Settings(cache="replay", store_dir="judgments"),
                     Settings(judge_provider="azure")):
        try:
            with Evaluator(settings) as ev:
                context_recall(sample, evaluator=ev)
        except RagMetricsError as exc:
            print("ERROR", exc)
""")


def test_script_errors_speak_of_settings_not_pytest_options(tmp_path):
    out = subprocess.run([sys.executable, "-c", ERRORS_SCRIPT], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    errors = [line for line in out.stdout.splitlines() if line.startswith("ERROR")]
    assert len(errors) == 3, out.stdout
    assert "no API key" in errors[0] and "Settings(cache='replay')" in errors[0]
    assert "no recorded judgment" in errors[1] and "Settings(cache='readwrite')" in errors[1]
    assert "Azure OpenAI judge needs the endpoint" in errors[2] and "Settings(judge_base_url=" in errors[2]
    assert "--rag-" not in out.stdout


def test_a_script_with_several_judge_samples_at_temperature_zero_is_warned(tmp_path):
    script = (
        "import warnings\n"
        "from pytest_ragmetrics import Evaluator, Settings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    Evaluator(Settings(judge_n=3)).close()\n"
        "    Evaluator(Settings(judge_n=3, temperature=0.7)).close()\n"
        "print([str(w.message) for w in caught])\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("identical answers") == 1
    assert "Settings(temperature=0.7)" in out.stdout


STORE_SCRIPT = textwrap.dedent("""
    import os, sys
    os.environ["RAGMETRICS_STORE_DIR"] = "judgments"
    os.environ["RAGMETRICS_JUDGE_BASE_URL"] = sys.argv[1]
    os.environ["RAGMETRICS_RESPONSE_FORMAT"] = "json_schema"
    os.environ["OPENAI_API_KEY"] = "test-key-not-secret"
    from pytest_ragmetrics import RagSample, context_precision, context_recall, evaluate

    samples = [
        RagSample(f"What is the limit of plan {i}?", [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i}."],
                  ground_truth=f"The limit is {i} GB.", id=f"s{i}")
        for i in range(150)
    ]
    for sample in samples[:4]:
        context_precision(sample)
        context_recall(sample)
    evaluate(samples[4:], ["context_precision", "context_recall"])
    print("scored")  # and exits without closing anything: the default evaluator closes at exit
""")


def test_a_script_scoring_with_a_store_leaves_every_shard_sorted_and_nothing_pending(tmp_path):
    from pytest_ragmetrics.testing import FakeJudgeServer

    with FakeJudgeServer() as server:
        out = subprocess.run(
            [sys.executable, "-c", STORE_SCRIPT, server.base_url],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=300,
        )
        received = server.request_count
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "scored"
    shards = sorted((tmp_path / "judgments").glob("*.jsonl"))
    assert shards
    keys = []
    for shard in shards:
        lines = shard.read_text(encoding="utf-8").splitlines()
        assert lines == sorted(lines), shard.name  # sorted at exit: no appended tail left
        keys += [line for line in lines if line.startswith('{"key":')]
    assert len(keys) == received == 150 * 3  # every answer received is in the store, once
    leftovers = [p.name for p in (tmp_path / "judgments").iterdir() if p.suffix != ".jsonl"]
    assert sorted(leftovers) == [".gitattributes", ".gitignore"]  # no temporary file, no lock file


HELD_SCRIPT = textwrap.dedent("""
    from pytest_ragmetrics import RagSample, context_precision

    context_precision(RagSample("Held?", ["Chunk two."], "Two."))
""")


def held_and_interrupted_twice(
    script: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[str, int]:
    """Run ``script`` against a judge that holds the request asking "Held?", Ctrl-C it twice while the
    answer is held (see :func:`interrupted_twice`): what it printed, and its exit status."""
    release = threading.Event()

    def responder(body):
        if "Held?" in json.dumps(body):
            release.wait(60)
        return default_responder(body)

    monkeypatch.setenv("PYTHONUNBUFFERED", "1")  # lines reach the pipe as they are written
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    monkeypatch.setenv("RAGMETRICS_CACHE_DIR", str(tmp_path / "c"))
    with FakeJudgeServer(responder) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        run = subprocess.Popen(
            [sys.executable, "-c", script],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=tmp_path,
            preexec_fn=takes_ctrl_c,
        )
        assert run.stdout is not None
        output = interrupted_twice(run, server, 1, release)
    return output, run.returncode


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_a_second_ctrl_c_while_a_script_exits_stops_waiting_in_one_line(tmp_path, monkeypatch):
    """Ctrl-C stops a script while a judgment is held at the server; at exit the script's evaluator
    waits for the answer already sent, saying so; Ctrl-C again stops that wait with one line, not an
    "Exception ignored in atexit callback" traceback."""
    output, _ = held_and_interrupted_twice(HELD_SCRIPT, tmp_path, monkeypatch)
    waiting = "ragmetrics: waiting for the answers to 1 judge request already sent, to record them"
    assert waiting in output, output
    after = output[output.index(waiting) :]
    assert "ragmetrics: interrupted again: the answers received are recorded, the rest dropped" in after
    assert "Traceback" not in after and "Exception ignored" not in after, output


HELD_IN_WITH_SCRIPT = textwrap.dedent("""
    from pytest_ragmetrics import Evaluator, RagSample

    with Evaluator() as evaluator:
        evaluator.score(RagSample("Held?", ["Chunk two."], "Two."), "context_precision")
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGINT to a child process is POSIX")
def test_ctrl_c_in_an_evaluator_s_with_block_says_it_waits_and_again_stops_waiting(tmp_path, monkeypatch):
    """Ctrl-C in ``with Evaluator()``: leaving the block waits for the answer already sent, saying
    so, as a script's own evaluator does at exit, where it waited up to 30 seconds without a word."""
    output, returncode = held_and_interrupted_twice(HELD_IN_WITH_SCRIPT, tmp_path, monkeypatch)
    waiting = "ragmetrics: waiting for the answers to 1 judge request already sent, to record them"
    assert waiting in output, output
    after = output[output.index(waiting) :]
    assert "ragmetrics: interrupted again: the answers received are recorded, the rest dropped" in after
    assert after.rstrip().endswith("KeyboardInterrupt"), output  # the first Ctrl-C goes on, as it came
    assert returncode != 0


LOST_CTRL_C_SCRIPT = """
import asyncio, signal, sys
from pytest_ragmetrics.judging_loop import LoopRunner

runner = LoopRunner()
runner.run(asyncio.sleep(0))  # the loop's thread is started, taking Ctrl-C as any thread does
# This thread no longer takes Ctrl-C: the kernel hands it to the loop's thread, and Python only sets
# its flag, as when Ctrl-C arrives just before this thread blocks. Its wait is not interrupted.
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


async def waited_for():
    # Said from the loop's thread, once this thread is inside run(): a Ctrl-C sent on seeing it
    # reaches this thread in its wait (or just before it blocks), never before its try below.
    print("waiting", flush=True)
    await asyncio.sleep(3600)


try:
    runner.run(waited_for())
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signal masks")
def test_a_ctrl_c_that_interrupts_no_wait_still_stops_a_score_waited_for():
    """A Ctrl-C the waiting thread's block never sees (it came just before the block) still stops the
    wait: the thread looks at it between pieces of its wait, rather than waiting on for the answer."""
    import signal

    run = subprocess.Popen(
        [sys.executable, "-c", LOST_CTRL_C_SCRIPT], stdout=subprocess.PIPE, text=True, preexec_fn=takes_ctrl_c
    )
    assert run.stdout is not None
    try:
        assert run.stdout.readline().strip() == "waiting"
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=30)
    finally:
        run.kill()
    assert out.strip() == "interrupted"
