"""Against a real model: needs OPENAI_API_KEY and the network, so deselected by default.

Run with:  OPENAI_API_KEY=sk-... python -m pytest -m real_judge
(RAGMETRICS_JUDGE_MODEL and OPENAI_BASE_URL choose another model or server.)
"""

import os

import pytest

from pytest_ragmetrics import Evaluator, RagSample, Settings

pytestmark = [
    pytest.mark.real_judge,
    pytest.mark.skipif(not os.environ.get("OPENAI_API_KEY"), reason="needs OPENAI_API_KEY"),
]

SAMPLE = RagSample(
    "Where is France and what is its capital?",
    [
        "The country is also renowned for its wines and sophisticated cuisine.",
        "France, in Western Europe, encompasses medieval cities, alpine villages and Mediterranean beaches. "
        "Paris, its capital, is famed for its fashion houses and the Louvre.",
    ],
    ground_truth="France is in Western Europe. Its capital is Paris.",
    id="france",
)


@pytest.fixture(scope="module")
def evaluator():
    settings = Settings(judge_model=os.environ.get("RAGMETRICS_JUDGE_MODEL", "gpt-4o-mini"), cache="off")
    with Evaluator(settings) as ev:
        yield ev


def test_real_judge_finds_the_useful_chunk_at_rank_two(evaluator):
    result = evaluator.score(SAMPLE, "context_precision")
    assert [v.label for v in result.verdicts] == ["not useful", "useful"]
    assert result.score == 0.5


def test_real_judge_attributes_both_reference_sentences(evaluator):
    assert evaluator.score(SAMPLE, "context_recall").score == 1.0


def test_real_judge_rates_relevance(evaluator):
    graded = evaluator.score(SAMPLE, "context_relevance", "graded")
    assert graded.verdicts[0].value < graded.verdicts[1].value
