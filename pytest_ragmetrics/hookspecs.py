"""Extension points of pytest-ragmetrics.

Implement them in a ``conftest.py`` or a plugin module (inside pytest), or in a package exposing the
``pytest_ragmetrics`` entry-point group (plain Python, see
:func:`pytest_ragmetrics.builtin_hooks.plugin_manager`). Mark
implementations with :data:`hookimpl`::

    from pytest_ragmetrics import hookimpl

    @hookimpl
    def pytest_ragmetrics_make_judge(settings):
        return MyJudge(settings.judge_model)

The built-in metrics, judge and sentence splitter are registered through these same hooks.
(``PYTEST_DONT_REWRITE``: pytest leaves the asserts of this module, as of every module of the package,
as they are.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from .judge.base import Judge
    from .metrics.builtin import Metric
    from .settings import Settings
    from .text import Splitter

# pytest's plugin manager only collects specs and implementations marked for project "pytest"; using
# the same project name lets one conftest hook serve both the pytest plugin and plain scripts.
hookspec = pluggy.HookspecMarker("pytest")
hookimpl = pluggy.HookimplMarker("pytest")


@hookspec(firstresult=True)
def pytest_ragmetrics_make_judge(settings: Settings) -> Judge | None:
    """Return the judge that answers judge requests, or None to leave it to the next implementation.

    The built-in implementation returns the OpenAI-compatible client configured by ``settings``. The
    returned judge sits behind the cache and judgment store, so it only sees requests that are not
    recorded; it must validate answers against ``request.schema`` (see ``JudgeRequest``).
    """


@hookspec(firstresult=True)
def pytest_ragmetrics_make_splitter(settings: Settings) -> Splitter | None:
    """Return the sentence splitter: a callable ``(text) -> list[str]`` of verbatim sentences.

    The built-in one is nltk's Punkt with parameters shipped in this package. The splitter decides the
    denominators of context recall and sentence-level relevance, so changing it changes scores.
    """


@hookspec
def pytest_ragmetrics_metrics() -> list[Metric] | None:
    """Return metrics to register (objects following the ``Metric`` protocol).

    Every implementation's metrics are collected; a name registered twice is an error.
    """


@hookspec
def pytest_ragmetrics_report(report: dict[str, Any]) -> None:
    """Called once per run with the final plain-JSON report (the ``--rag-report-json`` content).

    Use it to send scores to a dashboard or to add fields before the report files are written.
    """
