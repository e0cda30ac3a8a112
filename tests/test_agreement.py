"""Agreement statistics, checked against scikit-learn and textbook worked examples."""

import math
from collections.abc import Sequence

import pytest
from hypothesis import given, settings, strategies as st

from pytest_ragmetrics.calibration.agreement import accuracy, cohen_kappa, confusion_matrix, f1_score

sklearn_metrics = pytest.importorskip("sklearn.metrics")


def test_kappa_of_the_textbook_two_rater_example():
    """Wikipedia's worked example: 50 proposals, 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no: κ = 0.4."""
    labels = [True] * 25 + [False] * 25
    verdicts = [True] * 20 + [False] * 5 + [True] * 10 + [False] * 15
    assert confusion_matrix(labels, verdicts, [True, False]) == [[20, 5], [10, 15]]
    assert cohen_kappa(labels, verdicts, [False, True]) == pytest.approx(0.4)
    assert accuracy(labels, verdicts) == pytest.approx(0.7)


def test_perfect_agreement_is_exactly_one_and_chance_level_is_zero():
    labels = [0, 1, 2, 2, 1, 0]
    for weights in (None, "linear", "quadratic"):
        assert cohen_kappa(labels, labels, [0, 1, 2], weights) == 1.0
    # Always answering "yes" agrees only by chance: kappa 0 whatever the labels.
    labels = [True, False, True, False, False]
    assert cohen_kappa(labels, [True] * 5, [False, True]) == 0.0


def test_kappa_is_undefined_not_nan_when_everything_is_one_class():
    assert cohen_kappa([True] * 4, [True] * 4, [False, True]) is None
    assert cohen_kappa([], [], [False, True]) is None
    assert accuracy([], []) is None
    assert f1_score([False, False], [False, False]) is None


def test_mismatched_lengths_and_unknown_classes_are_errors():
    with pytest.raises(ValueError, match="2 labels but 1 verdicts"):
        cohen_kappa([0, 1], [0], [0, 1])
    with pytest.raises(ValueError, match="3 is not one of the classes"):
        confusion_matrix([0, 3], [0, 1], [0, 1, 2])


ratings = st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.sampled_from([0, 1, 2])), min_size=1, max_size=40)
booleans = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40)


def _sk_kappa(
    labels: Sequence[int], verdicts: Sequence[int], classes: Sequence[int], weights: str | None = None
) -> float:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # sklearn warns before returning nan for 0/0
        kappa: float = sklearn_metrics.cohen_kappa_score(labels, verdicts, labels=classes, weights=weights)
        return kappa


@settings(max_examples=120, deadline=None)
@given(pairs=ratings, weights=st.sampled_from([None, "linear", "quadratic"]))
def test_kappa_matches_scikit_learn(pairs, weights):
    labels, verdicts = [a for a, _ in pairs], [b for _, b in pairs]
    ours = cohen_kappa(labels, verdicts, [0, 1, 2], weights)
    theirs = _sk_kappa(labels, verdicts, [0, 1, 2], weights)
    if ours is None:
        assert math.isnan(theirs)
    else:
        assert ours == pytest.approx(theirs, abs=1e-12)


@settings(max_examples=120, deadline=None)
@given(pairs=booleans)
def test_yes_no_kappa_f1_confusion_and_accuracy_match_scikit_learn(pairs):
    labels, verdicts = [a for a, _ in pairs], [b for _, b in pairs]
    ours = cohen_kappa(labels, verdicts, [False, True])
    theirs = _sk_kappa(labels, verdicts, [False, True])
    assert math.isnan(theirs) if ours is None else ours == pytest.approx(theirs, abs=1e-12)
    assert (
        confusion_matrix(labels, verdicts, [False, True])
        == sklearn_metrics.confusion_matrix(labels, verdicts, labels=[False, True]).tolist()
    )
    assert accuracy(labels, verdicts) == pytest.approx(sklearn_metrics.accuracy_score(labels, verdicts))
    f1 = f1_score(labels, verdicts)
    if f1 is None:
        assert not any(labels) and not any(verdicts)
    else:
        assert f1 == pytest.approx(sklearn_metrics.f1_score(labels, verdicts, zero_division=0.0))
