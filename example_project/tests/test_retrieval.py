"""Retrieval quality of the production BM25 retriever, judged against the golden set.

Judgments are replayed from judgments/ (hand-labelled, see README.md); the expected score of every
sample is printed by ``python expected_scores.py``. With k=3 articles per question and usually one
article that answers it, relevance per sample is about 1/3: the thresholds below are set for that.

The label metrics at the end need no judgment at all: they compare the retrieved article ids with the
golden set's ``reference_context_ids`` (hand-graded: 2 = answers the question, 1 = answers part of it).
"""

from __future__ import annotations

import pytest

from pytest_ragmetrics import (
    RagSample,
    assert_context_precision,
    assert_context_recall,
    assert_context_relevance,
    assert_metric,
)

# --- one sample at a time (test_recall[q01] ... test_recall[q15]) ----------------------------------


def test_recall(sample: RagSample) -> None:
    # 0.5, not 0.8: q06 asks about "Europe" and BM25 misses the data-regions article ("European").
    assert assert_context_recall(sample) >= 0.5


def test_precision(sample: RagSample) -> None:
    # q11 and q14 rank an unhelpful article first (0.5); q13 has one in the middle (0.83).
    assert assert_context_precision(sample) >= 0.5


@pytest.mark.parametrize(
    ("method", "threshold"),
    [
        ("graded", 0.15),  # mean rating/2 over 3 chunks: one fully relevant chunk gives 0.33
        ("sentence", 0.05),  # relevant sentences / all sentences of the 3 chunks
        ("binary", 0.3),  # at least one of the 3 chunks has a relevant sentence
    ],
)
def test_relevance(sample: RagSample, method: str, threshold: float) -> None:
    assert assert_context_relevance(sample, method=method) >= threshold


# --- the whole golden set ----------------------------------------------------------------------


def test_recall_mean(samples: list[RagSample]) -> None:
    assert assert_context_recall(samples) >= 0.8  # expected 0.967


def test_precision_min(samples: list[RagSample]) -> None:
    assert assert_context_precision(samples).min() >= 0.5  # expected 0.5 (q11, q14)


def test_graded_relevance_p10(samples: list[RagSample]) -> None:
    assert assert_context_relevance(samples, method="graded").quantile(0.1) >= 0.3  # expected 0.333


def test_recall_pass_rate(samples: list[RagSample]) -> None:
    # Fraction of samples with recall >= 0.8: expected 14/15 = 0.933.
    assert assert_context_recall(samples).pass_rate(0.8) >= 0.75


# --- from the golden set's labelled article ids: no judge, no cost ---------------------------------


def test_ndcg(sample: RagSample) -> None:
    # q06 misses the data-regions article (0.613); q11 and q14 rank the answer second (0.631).
    assert assert_metric(sample, "ndcg@3") >= 0.6


def test_ndcg_mean(samples: list[RagSample]) -> None:
    assert assert_metric(samples, "ndcg@3") >= 0.85  # expected 0.920


def test_mrr_min(samples: list[RagSample]) -> None:
    # Every question finds a relevant article at rank 1 or 2: the reciprocal rank is never below 1/2.
    assert assert_metric(samples, "mrr").min() >= 0.5


def test_hit_rate_at_1(samples: list[RagSample]) -> None:
    assert assert_metric(samples, "hit_rate@1") >= 0.8  # expected 13/15 = 0.867
