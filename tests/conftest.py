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
import openai  # noqa: E402, F401


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
