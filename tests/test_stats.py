"""Paired statistics: checked against scipy and against enumeration by hand."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable

import pytest

from pytest_ragmetrics.stats import (
    ALTERNATIVES,
    bootstrap_ci,
    mean,
    percentile,
    sign_flip_p_value,
    sign_flip_tests,
    smallest_p,
)

np = pytest.importorskip("numpy")
scipy_stats = pytest.importorskip("scipy.stats")


def _scipy_sign_flip(baseline: list[float], current: list[float], n_resamples: int) -> float:
    result = scipy_stats.permutation_test(
        (baseline, current),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_resamples,
        alternative="two-sided",
        random_state=np.random.default_rng(12345),
    )
    return float(result.pvalue)


def _pairs(rng: random.Random, n: int, shift: float, grid: int = 8) -> tuple[list[float], list[float]]:
    # Scores on a grid of 1/8: exactly representable, so scipy's float sums tie where ours do.
    baseline = [rng.randint(0, grid) / grid for _ in range(n)]
    current = [min(1.0, max(0.0, b + rng.choice((-2, -1, 0, 0, 1)) / grid + shift)) for b in baseline]
    return baseline, current


@pytest.mark.parametrize("case", range(8))
def test_exact_sign_flip_p_value_equals_scipy_exact_permutation_test(case: int) -> None:
    rng = random.Random(case)
    n = rng.randint(3, 12)
    baseline, current = _pairs(rng, n, shift=rng.choice((0.0, -0.125, 0.125)))
    differences = [c - b for b, c in zip(baseline, current, strict=True)]
    ours = sign_flip_p_value(differences)
    assert ours.method == "exact"
    # With n_resamples >= 2**n scipy enumerates every pairing too: the two must agree exactly.
    assert ours.p_value == pytest.approx(_scipy_sign_flip(baseline, current, 2**n), abs=1e-12)


def test_exact_sign_flip_p_value_matches_enumeration_by_hand() -> None:
    differences = [-0.5, -0.25, 0.0, 0.25, -1.0]
    observed = abs(sum(differences))
    sums = [
        abs(sum(s * d for s, d in zip(signs, differences, strict=True)))
        for signs in itertools.product((1, -1), repeat=5)
    ]
    expected = sum(1 for s in sums if s >= observed - 1e-12) / len(sums)
    assert sign_flip_p_value(differences).p_value == pytest.approx(expected, abs=1e-15)
    # The zero difference is left out: it has the same value under either sign.
    assert sign_flip_p_value(differences).permutations == 16


def test_monte_carlo_sign_flip_p_value_agrees_with_scipy_within_sampling_error() -> None:
    rng = random.Random(7)
    baseline, current = _pairs(rng, 60, shift=-0.03)
    differences = [c - b for b, c in zip(baseline, current, strict=True)]
    ours = sign_flip_p_value(differences, resamples=20000)
    assert ours.method == "monte carlo"
    theirs = _scipy_sign_flip(baseline, current, 20000)
    # Two independent Monte Carlo estimates of the same p: the standard error of each is at most
    # sqrt(p (1 - p) / 20000); four of the difference's standard errors is a generous bound.
    se = math.sqrt(2 * theirs * (1 - theirs) / 20000) + 1e-4
    assert abs(ours.p_value - theirs) <= 4 * se, (ours, theirs)
    assert 0.0 < theirs < 1.0


def test_sign_flip_detects_a_broad_drop_and_not_a_single_collapse() -> None:
    broad = [-0.2] * 12 + [-0.1, 0.0, 0.05]
    assert sign_flip_p_value(broad).p_value < 0.05
    single = [0.0] * 14 + [-1.0]
    # One sample moved: half of all sign assignments are as extreme as that.
    assert sign_flip_p_value(single).p_value == 1.0


def test_sign_flip_with_no_change_has_p_one() -> None:
    assert sign_flip_p_value([0.0, 0.0, 0.0])[:3] == (1.0, "exact", 1)
    assert sign_flip_p_value([]).p_value == 1.0


def test_float_noise_does_not_break_ties() -> None:
    # 0.1 + 0.2 - 0.3 is 5.55e-17, not 0: the test treats it as the tie it is.
    assert sign_flip_p_value([0.1 + 0.2 - 0.3, 0.0]).p_value == 1.0
    thirds = [2 / 3 - 1 / 3, -1 / 3]
    assert sign_flip_p_value(thirds).p_value == 1.0  # +1/3 and -1/3: every assignment as extreme


def test_p_value_and_interval_are_reproducible_byte_for_byte() -> None:
    rng = random.Random(3)
    differences = [rng.uniform(-0.5, 0.3) for _ in range(40)]
    assert repr(sign_flip_p_value(differences)) == repr(sign_flip_p_value(list(differences)))
    assert repr(bootstrap_ci(differences)) == repr(bootstrap_ci(list(differences)))
    assert bootstrap_ci(differences, seed=1) != bootstrap_ci(differences, seed=2)


def test_bootstrap_interval_agrees_with_scipy_percentile_bootstrap() -> None:
    rng = random.Random(11)
    baseline, current = _pairs(rng, 40, shift=-0.05)
    differences = [c - b for b, c in zip(baseline, current, strict=True)]
    ours = bootstrap_ci(differences, resamples=20000)
    theirs = scipy_stats.bootstrap(
        (np.array(differences),),
        np.mean,
        confidence_level=0.95,
        n_resamples=20000,
        method="percentile",
        random_state=np.random.default_rng(5),
    ).confidence_interval
    # Independent draws of the same bootstrap distribution: its 2.5% and 97.5% points agree to
    # within a small fraction of the distribution's spread.
    spread = float(np.std(differences)) / math.sqrt(len(differences))
    assert ours.low == pytest.approx(theirs.low, abs=0.1 * spread)
    assert ours.high == pytest.approx(theirs.high, abs=0.1 * spread)
    assert ours.low < mean(differences) < ours.high


def test_bootstrap_interval_matches_the_exact_bootstrap_distribution_for_tiny_n() -> None:
    differences = [-0.5, 0.0, 0.25, -0.25]
    n = len(differences)
    # Every one of the n**n equally likely resamples, enumerated.
    means = sorted(sum(pick) / n for pick in itertools.product(differences, repeat=n))
    exact = (float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5)))
    ours = bootstrap_ci(differences, resamples=40000)
    assert ours.low == pytest.approx(exact[0], abs=0.02)
    assert ours.high == pytest.approx(exact[1], abs=0.02)


def test_bootstrap_of_constant_differences_is_that_value() -> None:
    assert bootstrap_ci([0.0] * 5) == (0.0, 0.0)
    assert bootstrap_ci([-0.25]) == (-0.25, -0.25)


def test_percentile_is_numpys_default() -> None:
    values = sorted(random.Random(2).random() for _ in range(17))
    for q in (0.0, 0.025, 0.1, 0.5, 0.975, 1.0):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q * 100)), abs=1e-15)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: bootstrap_ci([]), "at least one difference"),
        (lambda: bootstrap_ci([0.1], confidence=1.0), "confidence"),
        (lambda: bootstrap_ci([0.1, 0.2], resamples=0), "resamples"),
        (lambda: sign_flip_p_value([float("nan")]), "finite"),
        (lambda: mean([]), "no values"),
    ],
)
def test_bad_input_is_refused_with_a_clear_error(call: Callable[[], object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        call()


def _scipy_one_sided(baseline: list[float], current: list[float], alternative: str) -> float:
    result = scipy_stats.permutation_test(
        (baseline, current),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=2 ** len(baseline),  # >= every pairing: scipy enumerates them all
        alternative=alternative,
    )
    return float(result.pvalue)


@pytest.mark.parametrize("alternative", ["less", "greater"])
@pytest.mark.parametrize("case", range(6))
def test_one_sided_sign_flip_p_value_equals_scipy_exact_permutation_test(case: int, alternative: str) -> None:
    rng = random.Random(100 + case)
    n = rng.randint(3, 12)
    baseline, current = _pairs(rng, n, shift=rng.choice((0.0, -0.125, 0.125)))
    differences = [c - b for b, c in zip(baseline, current, strict=True)]
    ours = sign_flip_p_value(differences, alternative=alternative)
    assert (ours.method, ours.alternative) == ("exact", alternative)
    assert ours.p_value == pytest.approx(_scipy_one_sided(baseline, current, alternative), abs=1e-12)


def test_one_sided_p_of_five_collapses_in_twelve_is_one_in_32_by_enumeration() -> None:
    """The regression of the docs: recall 1.0 -> 0.0 on 5 of 12 samples. Two-sided, no data of 5
    changed samples goes below 2/32; one-sided, the all-fall assignment is 1 of 32."""
    differences = [-1.0] * 5 + [0.0] * 7
    assignments = list(itertools.product((1, -1), repeat=5))
    at_most = sum(1 for signs in assignments if sum(-s for s in signs) <= -5) / len(assignments)
    drop = sign_flip_p_value(differences, alternative="less")
    assert drop.p_value == at_most == 1 / 32
    assert (drop.nonzero, drop.min_p) == (5, 1 / 32)
    two_sided = sign_flip_p_value(differences)
    assert (two_sided.p_value, two_sided.min_p) == (2 / 32, 2 / 32)
    assert sign_flip_p_value(differences, alternative="greater").p_value == 1.0
    baseline, current = [1.0] * 12, [0.0] * 5 + [1.0] * 7
    assert drop.p_value == pytest.approx(_scipy_one_sided(baseline, current, "less"), abs=1e-12)


def test_the_smallest_reachable_p_is_reached_by_the_most_extreme_data() -> None:
    for m in range(1, 9):
        drop = sign_flip_p_value([-0.25 * (1 + i % 3) for i in range(m)], alternative="less")
        assert drop.p_value == drop.min_p == smallest_p(m, "less") == 1 / 2**m
    many = sign_flip_p_value([-0.5] * 40, alternative="less", resamples=999)
    assert many.method == "monte carlo" and many.p_value == many.min_p == 1 / 1000


def test_monte_carlo_one_sided_p_value_agrees_with_scipy_within_sampling_error() -> None:
    rng = random.Random(7)
    baseline, current = _pairs(rng, 40, shift=-0.03)
    differences = [c - b for b, c in zip(baseline, current, strict=True)]
    ours = sign_flip_p_value(differences, alternative="less", resamples=20000)
    assert ours.method == "monte carlo"
    theirs = scipy_stats.permutation_test(
        (baseline, current),
        lambda x, y, axis: np.mean(y - x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=20000,
        alternative="less",
        random_state=np.random.default_rng(1),
    ).pvalue
    assert ours.p_value == pytest.approx(float(theirs), abs=0.02)


def test_an_unknown_alternative_is_refused() -> None:
    with pytest.raises(ValueError, match="alternative must be one of two-sided, less, greater"):
        sign_flip_p_value([0.5], alternative="down")


def _p_in_exact_arithmetic(numerators: list[int], alternative: str) -> float:
    """The sign-flip p of differences ``numerators[i] / 42``, in integers: exact arithmetic."""
    observed = sum(numerators)
    sums = [
        sum(s * abs(d) for s, d in zip(signs, numerators, strict=True))
        for signs in itertools.product((1, -1), repeat=len(numerators))
    ]
    if alternative == "less":
        return sum(1 for s in sums if s <= observed) / len(sums)
    if alternative == "greater":
        return sum(1 for s in sums if s >= observed) / len(sums)
    return sum(1 for s in sums if abs(s) >= abs(observed)) / len(sums)


@pytest.mark.parametrize("alternative", ["two-sided", "less", "greater"])
@pytest.mark.parametrize("case", range(6))
def test_sums_equal_in_exact_arithmetic_tie_for_scores_in_thirds_and_sevenths(
    case: int, alternative: str
) -> None:
    """Three differences of 1/3 and one of -1 sum to 0 exactly, not after rounding each to 1e-9."""
    rng = random.Random(200 + case)
    grid = (3, 6, 7)[case % 3]
    # In 42nds, the least common multiple of the grids: integers, so the enumeration is exact.
    numerators = [rng.choice((-1, 1)) * rng.randint(1, grid) * (42 // grid) for _ in range(rng.randint(3, 7))]
    numerators += [-42, 14, 14, 14]
    ours = sign_flip_p_value([d / 42 for d in numerators], alternative=alternative)
    assert ours.method == "exact"
    assert ours.p_value == _p_in_exact_arithmetic(numerators, alternative)


def test_a_drop_in_thirds_has_its_exact_one_sided_p_by_monte_carlo_too() -> None:
    differences = [1 / 3, 1 / 3, 1 / 3, -1.0, 0.5]
    assert sign_flip_p_value(differences, alternative="less").p_value == 21 / 32
    drawn = sign_flip_p_value(differences, alternative="less", resamples=20000, exact_max_nonzero=0)
    assert drawn.method == "monte carlo"
    # 21/32 up to sampling error (standard error 0.0034); miscounting the exact ties gives 20/32.
    assert drawn.p_value == pytest.approx(21 / 32, abs=0.015)


@pytest.mark.parametrize("exact_max_nonzero", [16, 0], ids=["exact", "monte carlo"])
def test_one_set_of_draws_gives_each_alternative_the_p_of_scipys_test(exact_max_nonzero: int) -> None:
    # Scores in sevenths, some ties among the sums: each alternative's p from the one enumeration or
    # the one set of draws equals scipy's exact p (within Monte Carlo error when drawn).
    differences = [3 / 7, -1 / 7, 2 / 7, 1 / 7, -2 / 7, 1 / 7, 0.0, 4 / 7, -1 / 7, 1 / 7]
    tests = sign_flip_tests(differences, resamples=20000, exact_max_nonzero=exact_max_nonzero)
    assert sorted(tests) == sorted(ALTERNATIVES)
    for alternative, test in tests.items():
        expected = scipy_stats.permutation_test(
            (np.asarray(differences),),
            np.sum,
            permutation_type="samples",
            n_resamples=np.inf,
            alternative=alternative,
        ).pvalue
        assert test.alternative == alternative and test.nonzero == 9
        if exact_max_nonzero:
            assert test.p_value == pytest.approx(expected, abs=1e-12) and test.permutations == 2**9
        else:
            assert test.method == "monte carlo" and abs(test.p_value - expected) < 4 * math.sqrt(0.25 / 20000)
