"""Pure scoring arithmetic: the exact vectors of the metric definitions, and the property tests."""

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, strategies as st

from pytest_ragmetrics.metrics.precision import average_precision
from pytest_ragmetrics.metrics.recall import recall_score
from pytest_ragmetrics.metrics.relevance import binary_score, graded_score, sentence_score
from pytest_ragmetrics.results import MetricResult, aggregate

PRECISION_VECTORS = [
    ([1], Fraction(1)),
    ([1, 0], Fraction(1)),
    ([0, 1], Fraction(1, 2)),
    ([1, 0, 1], Fraction(5, 6)),
    ([0, 1, 1], Fraction(7, 12)),
    ([0, 0, 1], Fraction(1, 3)),
    ([0, 1, 0, 1], Fraction(1, 2)),
    ([1, 0, 0, 0], Fraction(1)),
    ([0, 0, 0, 1], Fraction(1, 4)),
    ([0, 0], Fraction(0)),
]


@pytest.mark.parametrize(
    ("verdicts", "expected"), PRECISION_VECTORS, ids=[str(v) for v, _ in PRECISION_VECTORS]
)
def test_context_precision_vectors(verdicts, expected):
    assert average_precision([bool(v) for v in verdicts]) == float(expected)


def test_perfect_ranking_is_exactly_one():
    """No epsilon in the denominator: a perfect ranking reaches 1.0 exactly (RAGAS never does)."""
    assert average_precision([True] * 7 + [False] * 3) == 1.0


def test_seed_worked_example_follows_the_formula_not_the_text():
    """The seed's example claims [0, 1] -> 0.25; its own formula gives 0.5, which we follow."""
    assert average_precision([False, True]) == 0.5


@pytest.mark.parametrize(
    ("verdicts", "expected"), [([1, 0], 0.5), ([1, 1, 0, 0], 0.5), ([1, 1, 1], 1.0), ([0], 0.0)]
)
def test_context_recall_vectors(verdicts, expected):
    assert recall_score([bool(v) for v in verdicts]) == expected


def test_context_recall_without_sentences_is_an_error_not_nan():
    with pytest.raises(ValueError, match="at least one reference sentence"):
        recall_score([])


@pytest.mark.parametrize(
    ("ratings", "expected"), [([2, 0], 0.5), ([2, 1, 0], 0.5), ([2, 2], 1.0), ([1], 0.5), ([], 0.0)]
)
def test_graded_relevance_vectors(ratings, expected):
    assert graded_score(ratings) == expected


def test_sentence_and_binary_relevance():
    assert sentence_score([1, 0, 2], [2, 3, 5]) == 3 / 10
    assert sentence_score([], []) == 0.0
    assert binary_score([True, False, True, False]) == 0.5
    assert binary_score([]) == 0.0


@given(st.lists(st.booleans(), min_size=1, max_size=30))
def test_precision_stays_in_unit_interval(verdicts):
    assert 0.0 <= average_precision(verdicts) <= 1.0


@given(st.lists(st.booleans(), max_size=40))
def test_precision_is_the_float_of_the_exact_fraction(verdicts):
    """Bit for bit the float of the formula's exact value, so recorded scores never move."""
    hits, total = 0, Fraction(0)
    for k, useful in enumerate(verdicts, start=1):
        if useful:
            hits += 1
            total += Fraction(hits, k)
    assert average_precision(verdicts) == (float(total / hits) if hits else 0.0)


@given(st.integers(min_value=1, max_value=20), st.integers(min_value=0, max_value=20))
def test_precision_is_one_when_all_useful_chunks_come_first(useful, not_useful):
    assert average_precision([True] * useful + [False] * not_useful) == 1.0


@given(st.lists(st.booleans(), min_size=2, max_size=25), st.data())
def test_precision_never_rises_when_a_useful_chunk_moves_down(verdicts, data):
    useful_positions = [i for i, v in enumerate(verdicts) if v]
    below = [i for i, v in enumerate(verdicts) if not v]
    if not useful_positions or not below:
        return
    i = data.draw(st.sampled_from(useful_positions))
    candidates = [j for j in below if j > i]
    if not candidates:
        return
    j = data.draw(st.sampled_from(candidates))
    moved = list(verdicts)
    moved[i], moved[j] = moved[j], moved[i]
    assert average_precision(moved) <= average_precision(verdicts)


def test_metric_result_behaves_as_a_float():
    r = MetricResult(0.75, "context_recall", sample_id="q1")
    assert float(r) == 0.75
    assert r >= 0.7 and r > 0.5 and r <= 0.75 and r < 0.8
    assert r + 0.25 == 1.0 and 1 - r == 0.25 and r * 2 == 1.5 and r / 3 == 0.25
    assert round(r, 1) == 0.8
    assert r == 0.75
    assert "context_recall" in repr(r) and "q1" in repr(r)


@pytest.mark.parametrize("bad", [float("nan"), -0.1, 1.5])
def test_metric_result_refuses_nan_and_out_of_range(bad):
    with pytest.raises(ValueError, match="context_precision"):
        MetricResult(bad, "context_precision")


def test_aggregate_of_nothing_is_explicit_not_nan():
    assert aggregate([]) == {"n": 0, "mean": None, "min": None, "max": None}
    assert aggregate([0.5, 1.0, 0.0]) == {"n": 3, "mean": 0.5, "min": 0.0, "max": 1.0}


def test_metric_result_formats_and_negates_like_a_float():
    r = MetricResult(0.5, "context_recall")
    assert f"{r:.2f}" == "0.50" and f"{r}" == "0.5"
    assert -r == -0.5 and +r == 0.5 and abs(r) == 0.5 and r**2 == 0.25 and 2**r == 2**0.5


def test_metric_result_refuses_a_bool_score():
    with pytest.raises(ValueError, match="score must be a number"):
        MetricResult(True, "context_recall")


def test_settings_built_directly_are_validated():
    from pytest_ragmetrics import ConfigError, Settings

    with pytest.raises(ConfigError, match=r"Settings\.judge_n must be at least 1"):
        Settings(judge_n=0)
    with pytest.raises(ConfigError, match=r"Settings\.judge_n must be at most 128; got 100000"):
        Settings(judge_n=100000)  # OpenAI takes n up to 128
    assert Settings(judge_n=128, temperature=0.7).judge_n == 128
    with pytest.raises(
        ConfigError, match=r"Settings\.relevance_method must be one of graded, sentence, binary"
    ):
        Settings(relevance_method="bogus")
    with pytest.raises(ConfigError, match=r"Settings\.temperature must be a finite number"):
        Settings(temperature=float("nan"))
    for name in ("temperature", "graded_temperature", "timeout", "price_input"):
        with pytest.raises(ConfigError, match=rf"Settings\.{name} must be a finite number"):
            kwargs: dict[str, Any] = {name: float("inf")}
            Settings(**kwargs)
    assert Settings(relevance_models=("big", "small", "big")).relevance_models == ("big", "small")


def test_a_check_compared_with_equals_says_to_use_a_threshold_operator():
    from pytest_ragmetrics.assertions import PendingCheck, ScoreCheck
    from pytest_ragmetrics.errors import JudgmentPending

    scored = ScoreCheck([MetricResult(0.5, "context_recall")], single=True, where=None)
    pending = PendingCheck("context_recall", JudgmentPending(1, "b.jsonl"), where=None, bounded=True)
    for check in (scored, pending):
        with pytest.raises(TypeError, match="== is not a threshold"):
            check == 0.5
        with pytest.raises(TypeError, match="with a threshold"):
            bool(check)


def test_checks_tolerate_float_noise_like_the_gates():
    from pytest_ragmetrics.assertions import ScoreCheck

    results = [MetricResult(s, "context_recall", sample_id=str(i)) for i, s in enumerate([0.7, 0.8, 0.9])]
    check = ScoreCheck(results, single=False, where=None)
    assert check.value != 0.8  # (0.7 + 0.8 + 0.9) / 3 is 0.7999999999999999 in floats
    assert check >= 0.8
    assert check.pass_rate(0.8) >= 2 / 3


def test_a_threshold_outside_the_range_of_a_bounded_metric_is_an_error():
    from pytest_ragmetrics.assertions import ScoreCheck
    from pytest_ragmetrics.errors import ConfigError

    results = [MetricResult(s, "context_recall", sample_id=str(i)) for i, s in enumerate([0.7, 0.9])]
    check = ScoreCheck(results, single=False, where=None)
    check.bounded = True
    with pytest.raises(ConfigError, match=r"context_recall lies between 0 and 1, so a threshold of 2 is out"):
        check >= 2
    with pytest.raises(ConfigError, match="context_recall min lies between 0 and 1"):
        check.min() >= -1
    with pytest.raises(ConfigError, match="out of range"):
        check.pass_rate(80)
    assert check >= 0.8
    opted_out = ScoreCheck([MetricResult(0.5, "odd_metric")], single=False, where=None)
    assert opted_out <= 250  # bounded = False: no range check on the value
    with pytest.raises(ConfigError, match="odd_metric pass_rate"):
        opted_out.pass_rate(0.4) >= 50  # a rate is a share whatever the metric


def test_helpers_know_that_built_in_metrics_are_bounded():
    from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings, assert_context_precision
    from pytest_ragmetrics.errors import ConfigError

    sample = RagSample("q?", ["a chunk."], ground_truth="g.")
    judge = ScriptedJudge(lambda r: {"reason": "r", "useful": True})
    with (
        Evaluator(Settings(cache="off"), judge=judge) as ev,
        pytest.raises(ConfigError, match="context_precision lies between 0 and 1"),
    ):
        assert_context_precision(sample, evaluator=ev) >= 90
