"""The built-in implementations of our hooks. They run last, so any conftest or plugin can override
the judge or the splitter, and add metrics beside the built-in ones.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, cast

import pluggy

from . import hookspecs
from .hookspecs import hookimpl

if TYPE_CHECKING:
    from .judge.base import Judge
    from .judge.openai_judge import ResponseFormat
    from .metrics.builtin import Metric
    from .settings import Settings
    from .text import Splitter


@hookimpl(trylast=True)
def pytest_ragmetrics_make_judge(settings: Settings) -> Judge:
    from . import _scope
    from .judge.openai_judge import OpenAIJudge
    from .settings import wording

    azure = settings.judge_provider == "azure"
    return OpenAIJudge(
        model=settings.judge_model,
        base_url=None if azure else settings.judge_base_url,
        # Azure: the endpoint from the base-URL setting or AZURE_OPENAI_ENDPOINT, the version from
        # OPENAI_API_VERSION, the key from AZURE_OPENAI_API_KEY (the SDK's own variables).
        azure=azure,
        azure_endpoint=settings.judge_base_url if azure else None,
        timeout=settings.timeout,
        max_retries=settings.max_retries,
        max_reasks=settings.max_reasks,
        response_format=cast("ResponseFormat", settings.response_format),
        # Built when a test (or a script) first needs the judge: its messages name what that can set.
        how_to_set=wording(_scope.in_pytest(), _scope.command_line.get()),
        max_tokens=settings.judge_max_tokens,
    )


@hookimpl(trylast=True)
def pytest_ragmetrics_make_splitter(settings: Settings) -> Splitter:
    from .text import default_splitter

    return default_splitter()


@hookimpl
def pytest_ragmetrics_metrics() -> list[Metric]:
    from .metrics.answer_metrics import answer_metrics
    from .metrics.builtin import builtin_metrics

    return [*builtin_metrics(), *answer_metrics()]


def register(pluginmanager: pluggy.PluginManager) -> None:
    """Register these hooks in a pytest run's plugin manager, once: when the run first asks them (its
    ragmetrics session is made, a marker names metrics), not in a run that never does."""
    if pluginmanager.get_plugin("ragmetrics-builtins") is None:
        pluginmanager.register(sys.modules[__name__], "ragmetrics-builtins")


def plugin_manager() -> pluggy.PluginManager:
    """A plugin manager for use outside pytest: our specs, these built-ins, and every package that
    registers itself under the ``pytest_ragmetrics`` entry-point group."""
    pm = pluggy.PluginManager("pytest")
    pm.add_hookspecs(hookspecs)
    pm.register(sys.modules[__name__], "ragmetrics-builtins")
    pm.load_setuptools_entrypoints("pytest_ragmetrics")
    return pm
