"""A judge server that accepts every connection and never answers, through the real openai client and
through pytest runs; and a slow server, which is not taken for one."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.errors import JudgeUnavailable
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


class SilentServer:
    """A TCP server on 127.0.0.1 that accepts every connection, reads nothing and never answers: a
    hung judge. Every attempt of the client opens a connection of its own (one given up on is
    closed), so ``connections`` counts the requests sent."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0), backlog=64)
        self._listener.settimeout(0.05)  # to see the stop
        self._held: list[socket.socket] = []
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True, name="SilentServer")
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/v1"

    @property
    def connections(self) -> int:
        with self._lock:
            return len(self._held)

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._listener.accept()
            except TimeoutError:
                continue
            with self._lock:
                self._held.append(connection)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._listener.close()
        with self._lock:
            for connection in self._held:
                connection.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    server = SilentServer()
    yield server
    server.stop()


def silent_judge(server: SilentServer, **kwargs: Any) -> OpenAIJudge:
    options: dict[str, Any] = {
        "api_key": "sk-dummy",
        "base_url": server.base_url,
        "timeout": 0.3,
        "max_retries": 1,
        "retry_backoff": 0.01,
    }
    options.update(kwargs)
    return OpenAIJudge(**options)


def judge_each(judge: OpenAIJudge | CachedJudge, count: int, together: bool = False) -> list[Any]:
    """Judge ``count`` requests, one after the other or all at once; what each returned or raised."""

    async def go() -> list[Any]:
        requests = [make_request(i) for i in range(count)]
        try:
            if together:
                return list(await asyncio.gather(*(judge.judge(r) for r in requests), return_exceptions=True))
            outcomes: list[Any] = []
            for request in requests:
                try:
                    outcomes.append(await judge.judge(request))
                except JudgeUnavailable as exc:
                    outcomes.append(exc)
            return outcomes
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_a_judge_that_never_answers_fails_the_remaining_judgments_at_once(silent_server):
    """Every attempt of the first judgment timed out and nothing came back meanwhile: the server is
    not answering, said once with what to set, and the later judgments fail without being sent,
    where each waited through its own timeouts (five minutes a judgment by default)."""
    stats = JudgeStats()
    errors = judge_each(silent_judge(silent_server, stats=stats), 4)
    assert all(isinstance(e, JudgeUnavailable) for e in errors)
    first = str(errors[0])
    assert first.startswith(f"the LLM judge at {silent_server.base_url}/ is not answering:")
    assert "timed out after 0.3s on each of its 2 attempt(s)" in first
    assert "RAGMETRICS_TIMEOUT=0.6" in first and "RAGMETRICS_MAX_RETRIES=3" in first
    for later in errors[1:]:
        assert str(later) == f"{first}; the remaining judgments of this run fail without asking"
    assert silent_server.connections == 2  # the first judgment's two attempts, and nothing after
    assert stats.retries == 1 and stats.errors == 4


def test_the_judgments_queued_behind_a_judge_that_never_answers_fail_at_once(silent_server):
    """Two in flight, four waiting for a slot: the first two give up after their attempts (the
    second sends no attempt after the first gave up), the four fail without being sent. (The
    format known: with auto, the first judgment alone finds it, while the others wait.)"""
    inner = silent_judge(silent_server, response_format="json_schema")
    cached = CachedJudge(lambda: inner, mode="off", stats=inner.stats, concurrency=2)
    errors = judge_each(cached, 6, together=True)
    assert all(isinstance(e, JudgeUnavailable) for e in errors)
    assert all("is not answering" in str(e) for e in errors)
    # The four never sent; the second in flight too, unless its last attempt had left already.
    assert sum("fail without asking" in str(e) for e in errors) >= 4
    assert 2 < silent_server.connections <= 2 * 2


def test_a_slow_server_that_answers_other_requests_is_retried_as_before():
    """One judgment's attempts all time out while the server answers another's: the server is slow,
    not hung; the judgment fails after its retries, and the next one is asked and answered."""
    release = threading.Event()

    def slow_for_chunk_0(body: dict[str, Any]) -> dict[str, Any]:
        if "chunk 0 " in body["messages"][-1]["content"]:
            release.wait(10)
        return {"reason": "fake judge", "useful": True}

    server = FakeJudgeServer(slow_for_chunk_0).start()
    try:
        judge = OpenAIJudge(
            api_key="sk-dummy",
            base_url=server.base_url,
            timeout=1.0,  # room for 1's answer on a loaded machine: it must come within 0's attempts
            max_retries=1,
            retry_backoff=0.01,
            response_format="json_schema",  # known: with auto, 1 would wait for 0 to find it
        )

        async def go() -> list[Any]:
            try:
                # 0 leaves first (one request leaves at a time), 1 is answered during its attempts.
                both = await asyncio.gather(
                    judge.judge(make_request(0)), judge.judge(make_request(1)), return_exceptions=True
                )
                return [*both, await judge.judge(make_request(2))]
            finally:
                await judge.aclose()

        slow, answered, later = asyncio.run(go())
    finally:
        release.set()
        server.stop()
    assert isinstance(slow, JudgeUnavailable)
    assert "timed out after 1s; gave up after 2 attempt(s)" in str(slow)
    assert "not answering" not in str(slow)
    assert answered.choices and later.choices
    assert server.request_count == 4  # 0 twice, 1, 2


TESTS = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_precision

@pytest.mark.parametrize("i", range(4))
def test_precision(i):
    sample = RagSample(f"Where is Paris? ({i})", ["Paris is in France."], ground_truth="In France.", id=f"s{i}")
    assert_context_precision(sample) >= 0.5
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "two workers"])
def test_a_run_against_a_judge_that_never_answers_fails_its_tests_at_once(
    pytester, monkeypatch, silent_server, workers
):
    """Each process finds the server silent once, through its first judgment's attempts; its other
    tests fail at once with the same message, which the end of the run counts."""
    monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", silent_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_rag=TESTS)
    result = pytester.runpytest("-p", "no:randomly", "--rag-timeout=0.3", "--rag-max-retries=1", *workers)
    result.assert_outcomes(failed=4)
    out = result.stdout.str()
    assert "is not answering" in out and "--rag-timeout=0.6" in out and "--rag-max-retries=3" in out
    processes = 2 if workers else 1
    # Two attempts in each process that ran a test (one, or two workers), none for the other tests.
    assert 2 <= silent_server.connections <= 2 * processes
    if not workers:
        result.stdout.fnmatch_lines(["ragmetrics: 3 tests failed with the same error: *not answering*"])
