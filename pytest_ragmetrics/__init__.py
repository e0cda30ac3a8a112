"""pytest-ragmetrics: regression tests for RAG systems, the retrieval half and the answer.

Importing this package is cheap and has no side effects: the public names below are loaded on first
access, and the judge's heavy dependencies (openai, nltk, diskcache) only when a judgment is needed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.3.0.dev0"

_EXPORTS: dict[str, str] = {
    "RagSample": "sample",
    "load_samples": "loaders",
    "MetricResult": "results",
    "Verdict": "results",
    "context_precision": "engine",
    "context_recall": "engine",
    "context_relevance": "engine",
    "faithfulness": "engine",
    "answer_relevancy": "engine",
    "answer_correctness": "engine",
    "evaluate": "engine",
    "aevaluate": "engine",
    "Evaluator": "engine",
    "EvaluationResult": "engine",
    "Settings": "settings",
    "assert_context_precision": "assertions",
    "assert_context_recall": "assertions",
    "assert_context_relevance": "assertions",
    "assert_faithfulness": "assertions",
    "assert_answer_relevancy": "assertions",
    "assert_answer_correctness": "assertions",
    "assert_metric": "assertions",
    "ScoreCheck": "assertions",
    "SampleLoadError": "loaders",
    "RagMetricsWarning": "errors",
    "JudgeRequest": "judge.base",
    "JudgeAnswer": "judge.base",
    "Judge": "judge.base",
    "ScriptedJudge": "judge.base",
    "Usage": "judge.base",
    "RagMetricsError": "errors",
    "ConfigError": "errors",
    "JudgeError": "errors",
    "InvalidJudgeAnswer": "errors",
    "JudgeUnavailable": "errors",
    "JudgeCallCapReached": "errors",
    "JudgmentNotRecorded": "errors",
    "split_sentences": "text",
    "hookimpl": "hookspecs",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'pytest_ragmetrics' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__


if TYPE_CHECKING:  # pragma: no cover
    # `X as X`: exported for type checkers (the lazy table above exports them at run time).
    from .assertions import (
        ScoreCheck as ScoreCheck,
        assert_answer_correctness as assert_answer_correctness,
        assert_answer_relevancy as assert_answer_relevancy,
        assert_context_precision as assert_context_precision,
        assert_context_recall as assert_context_recall,
        assert_context_relevance as assert_context_relevance,
        assert_faithfulness as assert_faithfulness,
        assert_metric as assert_metric,
    )
    from .engine import (
        EvaluationResult as EvaluationResult,
        Evaluator as Evaluator,
        aevaluate as aevaluate,
        answer_correctness as answer_correctness,
        answer_relevancy as answer_relevancy,
        context_precision as context_precision,
        context_recall as context_recall,
        context_relevance as context_relevance,
        evaluate as evaluate,
        faithfulness as faithfulness,
    )
    from .errors import (
        ConfigError as ConfigError,
        InvalidJudgeAnswer as InvalidJudgeAnswer,
        JudgeCallCapReached as JudgeCallCapReached,
        JudgeError as JudgeError,
        JudgeUnavailable as JudgeUnavailable,
        JudgmentNotRecorded as JudgmentNotRecorded,
        RagMetricsError as RagMetricsError,
        RagMetricsWarning as RagMetricsWarning,
    )
    from .hookspecs import hookimpl as hookimpl
    from .judge.base import (
        Judge as Judge,
        JudgeAnswer as JudgeAnswer,
        JudgeRequest as JudgeRequest,
        ScriptedJudge as ScriptedJudge,
        Usage as Usage,
    )
    from .loaders import (
        SampleLoadError as SampleLoadError,
        load_samples as load_samples,
    )
    from .results import (
        MetricResult as MetricResult,
        Verdict as Verdict,
    )
    from .sample import RagSample as RagSample
    from .settings import Settings as Settings
    from .text import split_sentences as split_sentences
