"""A small, realistic run report for the report renderers' tests (the schema by example)."""

from __future__ import annotations

from typing import Any

from pytest_ragmetrics.report_schema import SCHEMA_VERSION


def example_report() -> dict[str, Any]:
    """A small, realistic run report: the schema by example.

    Three comparisons (one failing recall, one passing precision, one passing aggregate relevance),
    two gates (one failing), judge figures with a price. Returns a fresh dict on every call, so
    callers may modify it.
    """
    return {
        "version": SCHEMA_VERSION,
        "results": [
            {
                "nodeid": "tests/test_rag.py::test_precision[q2]",
                "metric": "context_precision",
                "method": None,
                "stat": "score",
                "score": 0.8333333333333334,
                "op": ">=",
                "threshold": 0.5,
                "passed": True,
                "cached": True,
                "explanation": "useful chunks at ranks 1 and 3; chunk at rank 2 is not useful",
                "samples": [
                    {
                        "id": "q2",
                        "score": 0.8333333333333334,
                        "explanation": None,
                        "mode": None,
                        "verdicts": [
                            {
                                "item": "chunk",
                                "index": 0,
                                "rank": 1,
                                "text": "Paris is in France.",
                                "verdict": "useful",
                                "value": 1,
                                "reason": "names the country",
                            },
                            {
                                "item": "chunk",
                                "index": 1,
                                "rank": 2,
                                "text": "Bread is cheap.",
                                "verdict": "not useful",
                                "value": 0,
                                "reason": "off topic",
                            },
                            {
                                "item": "chunk",
                                "index": 2,
                                "rank": 3,
                                "text": "France's capital is Paris.",
                                "verdict": "useful",
                                "value": 1,
                                "reason": "answers the question",
                            },
                        ],
                        "models": None,
                    }
                ],
            },
            {
                "nodeid": "tests/test_rag.py::test_recall[q1]",
                "metric": "context_recall",
                "method": None,
                "stat": "score",
                "score": 0.5,
                "op": ">=",
                "threshold": 0.8,
                "passed": False,
                "cached": False,
                "explanation": "reference sentence 2 'Its capital is Paris.' is not supported by any context",
                "samples": [
                    {
                        "id": "q1",
                        "score": 0.5,
                        "explanation": "1 of 2 reference sentences supported",
                        "mode": None,
                        "verdicts": [
                            {
                                "item": "reference sentence",
                                "index": 1,
                                "rank": None,
                                "text": "France is in Europe.",
                                "verdict": "supported",
                                "value": 1,
                                "reason": "context 1 says so",
                            },
                            {
                                "item": "reference sentence",
                                "index": 2,
                                "rank": None,
                                "text": "Its capital is Paris.",
                                "verdict": "not supported",
                                "value": 0,
                                "reason": "the contexts never name the capital",
                            },
                        ],
                        "models": None,
                    }
                ],
            },
            {
                "nodeid": "tests/test_rag.py::test_relevance_golden_set",
                "metric": "context_relevance",
                "method": "graded",
                "stat": "mean",
                "score": 0.625,
                "op": ">=",
                "threshold": 0.6,
                "passed": True,
                "cached": True,
                "explanation": "mean of 2 samples",
                "samples": [
                    {
                        "id": "g1",
                        "score": 0.75,
                        "explanation": None,
                        "mode": "without reference",
                        "verdicts": [
                            {
                                "item": "chunk",
                                "index": 0,
                                "rank": 1,
                                "text": "Opening hours are 9-5.",
                                "verdict": "2/2",
                                "value": 1,
                                "reason": "directly relevant",
                            },
                            {
                                "item": "chunk",
                                "index": 1,
                                "rank": 2,
                                "text": "We were founded in 1999.",
                                "verdict": "1/2",
                                "value": 0.5,
                                "reason": "background only",
                            },
                        ],
                        "models": {"gpt-4o-mini": 0.75, "llama3": 0.75},
                    },
                    {
                        "id": "g2",
                        "score": 0.5,
                        "explanation": None,
                        "mode": None,
                        "verdicts": [],
                        "models": {"gpt-4o-mini": 0.5, "llama3": 0.5},
                    },
                ],
            },
        ],
        "summary": {
            "metrics": [
                {
                    "metric": "context_precision",
                    "method": None,
                    "n": 1,
                    "mean": 0.8333333333333334,
                    "min": 0.8333333333333334,
                    "max": 0.8333333333333334,
                },
                {"metric": "context_recall", "method": None, "n": 1, "mean": 0.5, "min": 0.5, "max": 0.5},
                {
                    "metric": "context_relevance",
                    "method": "graded",
                    "n": 2,
                    "mean": 0.625,
                    "min": 0.5,
                    "max": 0.75,
                },
            ],
            "gates": [
                {
                    "spec": "context_precision mean >= 0.80",
                    "metric": "context_precision",
                    "method": None,
                    "stat": "mean",
                    "op": ">=",
                    "threshold": 0.8,
                    "value": 0.8333333333333334,
                    "n": 1,
                    "passed": True,
                    "margin": 0.033333333333,
                    "reason": None,
                },
                {
                    "spec": "context_recall min >= 0.6",
                    "metric": "context_recall",
                    "method": None,
                    "stat": "min",
                    "op": ">=",
                    "threshold": 0.6,
                    "value": 0.5,
                    "n": 1,
                    "passed": False,
                    "margin": -0.1,
                    "reason": None,
                },
            ],
            "judge": {
                "model": "gpt-4o-mini",
                "cache_mode": "readwrite",
                "cache_dir": ".pytest_cache/d/ragmetrics",
                "store_dir": "tests/judgments",
                "calls": 3,
                "cache_hits": 40,
                "store_hits": 2,
                "reused": 5,
                "prompt_tokens": 1200,
                "completion_tokens": 300,
                "tokens_saved": 9000,
                "retries": 1,
                "reasks": 0,
                "errors": 0,
                "seconds": 1.2345678,
                "cost": 0.00036,
            },
            "unused_store_entries": 2,
            "tests": {"passed": 2, "failed": 1},
        },
    }
