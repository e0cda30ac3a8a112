"""What the suite's own pytest runs (pytester's, the example project's, the docs') leave out, the
conftests they share, and how a test interrupts a run twice."""

from typing import Any

#: Installed plugins no run of this suite uses: Hypothesis's imports all of Hypothesis at the end of
#: every run, anyio's and platformdirs' their packages at its start. Together they cost about a second
#: and a half of CPU a process, in every subprocess and every xdist worker.
SPARE_PLUGINS = "-p no:hypothesispytest -p no:anyio -p no:platformdirs"

#: A conftest writing how many times the tests handed work to the judging loop (to ``handovers``).
COUNT_HANDOVERS = """
import pathlib, pytest
from pytest_ragmetrics.plugin import session_key

@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item, nextitem):
    if nextitem is None:
        runner = item.config.stash[session_key].runner
        pathlib.Path("handovers").write_text(str(runner.handovers))
"""


#: A conftest whose scripted judge finds a chunk useful, and a reference sentence attributed, when the
#: chunk says "good": what the contexts say decides every score exactly.
GOOD_CHUNK_JUDGE = """
import json

from pytest_ragmetrics import ScriptedJudge, hookimpl


def script(request):
    payload = json.loads(request.messages[-1]["content"])
    if request.kind == "context_precision":
        return {"reason": "r", "useful": "good" in payload["chunk"]}
    joined = " ".join(payload["contexts"].values())
    return {f"sentence_{i}": {"reason": "r", "attributed": "good" in joined}
            for i in payload["reference_sentences"]}


@hookimpl
def pytest_ragmetrics_make_judge(settings):
    return ScriptedJudge(script, model=settings.judge_model)
"""


def takes_ctrl_c() -> None:
    """Run in a child process a test interrupts (``preexec_fn``): Ctrl-C stops it as in a terminal,
    even where the suite runs with Ctrl-C ignored (a background job of a shell without job control,
    as some CI runners start it), which the child would inherit, Python then installing no handler."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def interrupted_twice(run: Any, server: Any, requests: int, release: Any) -> str:
    """The output of ``run`` (a child process writing lines) given Ctrl-C once ``server`` holds
    ``requests`` requests, and again when it says it waits for their answers; ``release`` (an event)
    then lets the server answer."""
    import signal

    lines: list[str] = []
    with run:
        try:
            assert server.wait_for_requests(requests)  # a judgment is held at the server
            run.send_signal(signal.SIGINT)
            for line in run.stdout:
                lines.append(line)
                if "Ctrl-C again" in line:  # the exit waits for the held answer: interrupt that wait
                    run.send_signal(signal.SIGINT)
        finally:
            release.set()
    return "".join(lines)
