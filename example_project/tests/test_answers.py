"""The answers of the generator, judged against the articles retrieved and the reference answers.

Judgments are replayed from judgments/ (hand-labelled, see README.md); the expected score of every
sample is printed by ``python expected_scores.py``. The generator copies the two sentences of the
retrieved articles that share most words with the question, so every claim it makes is supported
(faithfulness 1.0), but some of those sentences miss the point of the question: relevancy and
correctness are far from perfect, and the thresholds below are set for that.
"""

from __future__ import annotations

from pytest_ragmetrics import (
    RagSample,
    assert_answer_correctness,
    assert_answer_relevancy,
    assert_faithfulness,
)

# --- one sample at a time (test_faithfulness[q01] ... test_faithfulness[q15]) ----------------------


def test_faithfulness(sample: RagSample) -> None:
    # Every claim of the answer must be supported by a retrieved article.
    assert assert_faithfulness(sample) >= 0.9


# --- the whole golden set ----------------------------------------------------------------------


def test_faithfulness_mean(samples: list[RagSample]) -> None:
    assert assert_faithfulness(samples) >= 0.9  # expected 1.000


def test_nothing_contradicted(samples: list[RagSample]) -> None:
    # DeepEval's definition, from the same verdicts: no claim contradicts an article.
    assert assert_faithfulness(samples, method="not_contradicted").min() >= 1.0  # expected 1.000


def test_answer_relevancy_mean(samples: list[RagSample]) -> None:
    # q11 and q13 answer with sentences about something else (0.0); six answer only part (0.5).
    assert assert_answer_relevancy(samples) >= 0.6  # expected 0.700


def test_answer_correctness_recall_mean(samples: list[RagSample]) -> None:
    # Share of the reference's claims the answer states: two sentences rarely hold all of them.
    assert assert_answer_correctness(samples, method="recall") >= 0.4  # expected 0.472


def test_answer_correctness_mean(samples: list[RagSample]) -> None:
    assert assert_answer_correctness(samples) >= 0.35  # F1, expected 0.404


def test_relevancy_does_not_see_an_invented_fact(weak_answer_samples: list[RagSample]) -> None:
    """Answer relevancy judges whether an answer addresses its question, not whether it is true: the
    weakened generator's invented sentence leaves it where it was (expected 0.767; it even lifts q11,
    whose invented sentence is about money back). Faithfulness catches it (test_regression.py)."""
    assert assert_answer_relevancy(weak_answer_samples) >= 0.7
