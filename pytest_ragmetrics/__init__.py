"""pytest-ragmetrics: regression tests for RAG systems, the retrieval half and the answer.

Importing this package is cheap and has no side effects: the public names below are loaded on first
access, and the judge's heavy dependencies (openai, nltk, diskcache) only when a judgment is needed.
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
    "RagMetricsWarning": "judge.cache",
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
    from .assertions import (
        ScoreCheck,
        assert_answer_correctness,
        assert_answer_relevancy,
        assert_context_precision,
        assert_context_recall,
        assert_context_relevance,
        assert_faithfulness,
        assert_metric,
    )
    from .engine import (
        EvaluationResult,
        Evaluator,
        aevaluate,
        answer_correctness,
        answer_relevancy,
        context_precision,
        context_recall,
        context_relevance,
        evaluate,
        faithfulness,
    )
    from .errors import (
        ConfigError,
        InvalidJudgeAnswer,
        JudgeCallCapReached,
        JudgeError,
        JudgeUnavailable,
        JudgmentNotRecorded,
        RagMetricsError,
        RagMetricsWarning,
    )
    from .hookspecs import hookimpl
    from .judge.base import Judge, JudgeAnswer, JudgeRequest, ScriptedJudge, Usage
    from .loaders import SampleLoadError, load_samples
    from .results import MetricResult, Verdict
    from .sample import RagSample
    from .settings import Settings
    from .text import split_sentences
