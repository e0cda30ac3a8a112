"""Shared test configuration: the fake OpenAI-compatible judge server fixture."""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest
from pytest_env import SPARE_PLUGINS

import pytest_ragmetrics

if TYPE_CHECKING:
    from pytest_ragmetrics.testing import FakeJudgeServer, Responder

pytest_plugins = ["pytest_ragmetrics.testing"]

# The pytest processes this suite starts (pytester's subprocesses and xdist workers, the example
# project's and the docs' runs) may keep their compiled modules: without it, each one compiles and
# assertion-rewrites every module of the package and of pytest's plugins again, a second and a half of
# CPU a process where the environment sets PYTHONDONTWRITEBYTECODE (as container images often do).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# pytester's in-process runs drop the modules first imported during a run when it ends. Importing
# every module of the package now keeps one copy of each (one RagSample class) for the whole session,
# whatever order the tests run in.
# (pytest_ragmetrics.testing is left to pytest_plugins, which rewrites its asserts.)
for _module in pkgutil.walk_packages(pytest_ragmetrics.__path__, "pytest_ragmetrics."):
    if _module.name != "pytest_ragmetrics.testing":
        importlib.import_module(_module.name)
# The same holds for the libraries the package imports only once it judges: an in-process run that
# judged would otherwise leave them to be imported again by the next one (openai alone is some 600
# modules, a second of CPU a run). Whether a run imports them is checked in processes of their own.
import diskcache  # noqa: E402, F401
import openai  # noqa: E402


def _load_the_http_stack() -> None:
    """Load the modules the HTTP client imports at its first request (its connection pool, the
    event loop's socket streams), by one failed request of each client to a port nothing listens on.
    Else the first in-process run that judged would drop them as it ends, and the next would import
    another copy whose errors the client's first copy does not know: a refused connection would then
    reach the judge as the connection pool's own error, not the SDK's."""
    import asyncio
    import contextlib
    import socket

    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        base_url = f"http://127.0.0.1:{free.getsockname()[1]}/v1"
    ask = {"model": "m", "messages": [{"role": "user", "content": "?"}]}
    with (
        openai.OpenAI(api_key="unused", base_url=base_url, max_retries=0) as client,
        contextlib.suppress(openai.APIConnectionError),
    ):
        client.chat.completions.create(**ask)  # type: ignore[call-overload]

    async def refused() -> None:
        async with openai.AsyncOpenAI(api_key="unused", base_url=base_url, max_retries=0) as client:
            with contextlib.suppress(openai.APIConnectionError):
                await client.chat.completions.create(**ask)  # type: ignore[call-overload]

    asyncio.run(refused())


_load_the_http_stack()


@pytest.fixture
def serve(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Responder], FakeJudgeServer]]:
    """Start a FakeJudgeServer with a responder; the runs of the test (pytester's too) judge with it."""
    from pytest_ragmetrics.testing import FakeJudgeServer

    servers: list[FakeJudgeServer] = []

    def start(responder: Responder) -> FakeJudgeServer:
        server = FakeJudgeServer(responder).start()
        servers.append(server)
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def pytester(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """pytester, its runs spared the installed plugins no run of this suite uses."""
    monkeypatch.setenv("PYTEST_ADDOPTS", SPARE_PLUGINS)
    return pytester
