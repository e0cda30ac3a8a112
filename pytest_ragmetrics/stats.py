"""Statistics over paired scores: pure functions, standard library only, deterministic.

Two runs scored the same samples; ``differences[i]`` is sample ``i``'s current score minus its
baseline score. The question is whether the mean difference is real or noise:

- :func:`bootstrap_ci`: a percentile confidence interval for the mean difference, from resampling the
  pairs with replacement (the paired bootstrap; Efron & Tibshirani, *An Introduction to the
  Bootstrap*, ch. 13).
- :func:`sign_flip_p_value`: the p-value of a paired permutation test, two-sided or one-sided (did
  the scores fall? did they rise?). Under the null hypothesis each difference is as likely to have
  had the other sign, so the observed sum is compared with the sums of every sign assignment: all
  ``2**m`` of them when there are few non-zero differences (exact), otherwise a fixed number drawn at
  random with a fixed seed (Monte Carlo, with the ``(count + 1) / (resamples + 1)`` estimate that
  never reports p = 0). With it, what the test can see at its size: the ``m`` differences that are
  not zero, and the smallest p any data of that size could give. :func:`sign_flip_tests` gives the
  three alternatives' p-values from one set of draws.
- :func:`floor_error_rates`: how often a floor on the share of controls a judge gets wrong fails a
  good judge and passes a bad one, at the number of controls drawn (binomial).
- :func:`corrected_mean`: the judge-corrected mean of a metric with a labelled subset, and its
  confidence interval (prediction-powered inference, PPI++: Angelopoulos, Duchi & Zrnic,
  arXiv 2311.01453; the mean estimator of the ``ppi_py`` reference code).

Randomness comes from a :class:`random.Random` seeded by the caller, so the same inputs always give
the same interval and p-value, byte for byte, on every platform. No numpy or scipy at run time; the
tests check both functions against scipy.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from typing import NamedTuple

__all__ = [
    "ALTERNATIVES",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_SEED",
    "EXACT_MAX_NONZERO",
    "BootstrapInterval",
    "CorrectedMean",
    "PermutationTest",
    "bootstrap_ci",
    "bootstrap_resamples",
    "corrected_mean",
    "floor_error_rates",
    "format_p",
    "mean",
    "percentile",
    "sign_flip_p_value",
    "sign_flip_tests",
    "smallest_p",
]

#: Confidence level of intervals unless told otherwise.
DEFAULT_CONFIDENCE = 0.95
#: Seed of the random draws unless told otherwise: any fixed value makes results reproducible.
DEFAULT_SEED = 0
#: Up to this many non-zero differences the sign-flip test enumerates every sign assignment.
EXACT_MAX_NONZERO = 16

# Differences are compared as integers in units of 1e-9 (far below any score difference that
# matters), so a tie between the observed sum and a permuted one is a tie whatever order floats
# were added in. Each difference is rounded to a unit on its own, so sums that are equal in exact
# arithmetic can still differ by a few units (three thirds make 999999999 units, not 10**9): the
# sign-flip test counts sums within that rounding of each other as ties.
_SCALE = 10**9


class BootstrapInterval(NamedTuple):
    """The ends of a bootstrap percentile interval."""

    low: float
    high: float


#: The alternatives :func:`sign_flip_p_value` tests, as scipy names them: the mean difference is not
#: zero, is below zero (the scores fell), or is above zero (they rose).
ALTERNATIVES = ("two-sided", "less", "greater")


class PermutationTest(NamedTuple):
    """A permutation test's p-value; ``method`` is ``"exact"`` or ``"monte carlo"``."""

    p_value: float
    method: str
    #: Sign assignments counted: ``2**m`` when exact, the number of draws otherwise.
    permutations: int
    #: ``"two-sided"``, ``"less"`` or ``"greater"``.
    alternative: str = "two-sided"
    #: ``m``: the differences that are not zero, the only ones the test sees.
    nonzero: int = 0
    #: The smallest p this test can give with ``nonzero`` differences, whatever they are: ``1 /
    #: 2**m`` one-sided and ``2 / 2**m`` two-sided when exact, ``1 / (resamples + 1)`` by Monte Carlo.
    #: When it is not below a significance level, no data of this size can be significant at it.
    min_p: float = 1.0


def _finite(values: Sequence[float], what: str) -> list[float]:
    out = list(map(float, values))
    if not all(map(math.isfinite, out)):
        raise ValueError(f"{what} must be finite numbers, got {out!r}")
    return out


def mean(values: Sequence[float]) -> float:
    """The arithmetic mean (exactly rounded sum); ``ValueError`` for no values."""
    data = _finite(values, "values")
    if not data:
        raise ValueError("the mean of no values is undefined")
    return math.fsum(data) / len(data)


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Quantile ``q`` (0..1) of already sorted values, interpolating linearly between closest ranks.

    numpy's default (Hyndman & Fan type 7), which scipy's percentile bootstrap uses too.
    """
    if not sorted_values:
        raise ValueError("the percentile of no values is undefined")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"q must be between 0 and 1, got {q!r}")
    pos = (len(sorted_values) - 1) * q
    lower = math.floor(pos)
    upper = min(lower + 1, len(sorted_values) - 1)
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * (pos - lower)


def bootstrap_resamples(n: int) -> int:
    """The default number of bootstrap resamples for ``n`` pairs: 5,000, fewer for large runs so that
    a comparison stays within about two million draws per metric, but never fewer than 1,000, the
    fewest whose 2.5 % and 97.5 % quantiles are steady: above 2,000 pairs a comparison draws 1,000
    times ``n`` (20 million at 20,000 pairs, a few seconds)."""
    return max(1000, min(5000, 2_000_000 // max(n, 1)))


def bootstrap_ci(
    differences: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int | None = None,
    seed: int = DEFAULT_SEED,
) -> BootstrapInterval:
    """Percentile bootstrap interval of the mean of ``differences`` (one per matched pair).

    ``resamples`` times (default :func:`bootstrap_resamples`), draw ``n`` differences with
    replacement and take their mean; the interval runs from the ``(1 - confidence) / 2`` to the
    ``(1 + confidence) / 2`` quantile of those means. Resampling the differences is resampling the
    pairs, which keeps each sample's two scores together. With one difference, or all equal, the
    interval is that value at both ends.
    """
    data = _finite(differences, "differences")
    if not data:
        raise ValueError("a bootstrap interval needs at least one difference")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    n = len(data)
    resamples = bootstrap_resamples(n) if resamples is None else resamples
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    if min(data) == max(data):
        return BootstrapInterval(data[0], data[0])
    # Integer units: exact sums, the same on every platform, and faster to add than floats.
    units = [round(d * _SCALE) for d in data]
    choices = random.Random(seed).choices
    means = sorted(sum(choices(units, k=n)) / (n * _SCALE) for _ in range(resamples))
    alpha = 1.0 - confidence
    return BootstrapInterval(percentile(means, alpha / 2), percentile(means, 1 - alpha / 2))


def smallest_p(
    nonzero: int, alternative: str = "two-sided", method: str = "exact", resamples: int = 0
) -> float:
    """The smallest p :func:`sign_flip_p_value` can give with ``nonzero`` non-zero differences."""
    if nonzero == 0:
        return 1.0
    if method != "exact":
        return 1.0 / (resamples + 1)
    tails = 1.0 if alternative != "two-sided" else 2.0
    return float(min(1.0, tails / 2.0**nonzero))


def sign_flip_p_value(
    differences: Sequence[float],
    *,
    alternative: str = "two-sided",
    resamples: int = 10000,
    seed: int = DEFAULT_SEED,
    exact_max_nonzero: int = EXACT_MAX_NONZERO,
) -> PermutationTest:
    """p-value of the paired sign-flip permutation test of the mean difference.

    ``alternative`` as scipy's ``permutation_test`` names it: ``"two-sided"`` (the mean difference is
    not zero), ``"less"`` (it is below zero: the scores fell) or ``"greater"`` (they rose). The
    statistic is the sum of the differences (equivalently their mean). A zero difference has the
    same value under either sign and is left out. With ``m`` non-zero differences and ``m <=
    exact_max_nonzero``, every one of the ``2**m`` sign assignments is enumerated and p is the share
    whose sum is at least as extreme as the observed one (absolute sum two-sided; at most the
    observed sum for ``less``, at least it for ``greater``). Above that, ``resamples`` assignments are
    drawn with a :class:`random.Random` seeded with ``seed`` and p = (count + 1) / (resamples + 1).
    With no non-zero difference there is nothing to test: p = 1.
    """
    if alternative not in ALTERNATIVES:
        raise ValueError(f"alternative must be one of {', '.join(ALTERNATIVES)}, got {alternative!r}")
    tests = sign_flip_tests(differences, resamples=resamples, seed=seed, exact_max_nonzero=exact_max_nonzero)
    return tests[alternative]


def sign_flip_tests(
    differences: Sequence[float],
    *,
    resamples: int = 10000,
    seed: int = DEFAULT_SEED,
    exact_max_nonzero: int = EXACT_MAX_NONZERO,
) -> dict[str, PermutationTest]:
    """:func:`sign_flip_p_value` for each alternative (``"two-sided"``, ``"less"``, ``"greater"``),
    from one enumeration or one set of draws: each p is the one that call gives, at a third of the
    cost of three calls (a comparison of 20,000 changed samples draws 10,000 times 2,500 lookups)."""
    data = _finite(differences, "differences")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples!r}")
    units = [round(d * _SCALE) for d in data]
    magnitudes = [abs(u) for u in units if u != 0]
    m = len(magnitudes)
    if m == 0:
        return {alt: PermutationTest(1.0, "exact", 1, alt, 0, 1.0) for alt in ALTERNATIVES}
    observed = sum(units)
    # A permuted sum differs from the observed one by twice the flipped differences, each rounded
    # by at most half a unit: sums within m units of each other may be equal in exact arithmetic
    # (scores of k/3, k/7), and are counted as ties, as scipy counts sums equal up to float error.
    # A sum is as extreme as the observed one for "less" at most at ``low``, for "greater" at least
    # at ``high``, two-sided when its absolute value is at least ``far``.
    low, high, far = observed + m, observed - m, abs(observed) - m

    if m <= exact_max_nonzero:
        sums = [0]
        for value in magnitudes:
            sums = [s + value for s in sums] + [s - value for s in sums]
        counts = {
            "two-sided": sum(1 for s in sums if abs(s) >= far),
            "less": sum(1 for s in sums if s <= low),
            "greater": sum(1 for s in sums if s >= high),
        }
        return {
            alt: PermutationTest(count / len(sums), "exact", len(sums), alt, m, smallest_p(m, alt))
            for alt, count in counts.items()
        }
    # Monte Carlo: one random bit per difference says whether it keeps its sign. The differences are
    # taken 8 at a time, with the sums of all 256 sign patterns of each group precomputed, so one
    # draw costs m / 8 table lookups.
    groups = [magnitudes[i : i + 8] for i in range(0, m, 8)]
    tables = [
        (
            [
                sum(v if pattern >> bit & 1 else -v for bit, v in enumerate(group))
                for pattern in range(1 << len(group))
            ],
            (1 << len(group)) - 1,
        )
        for group in groups
    ]
    rng = random.Random(seed)
    both = below = above = 0
    for _ in range(resamples):
        bits = rng.getrandbits(m)
        total = 0
        for table, mask in tables:
            total += table[bits & mask]
            bits >>= 8
        if total <= low:
            below += 1
        if total >= high:
            above += 1
        if abs(total) >= far:
            both += 1
    counts = {"two-sided": both, "less": below, "greater": above}
    return {
        alt: PermutationTest(
            (count + 1) / (resamples + 1),
            "monte carlo",
            resamples,
            alt,
            m,
            smallest_p(m, alt, "monte carlo", resamples),
        )
        for alt, count in counts.items()
    }


class CorrectedMean(NamedTuple):
    """A judge-corrected mean (:func:`corrected_mean`) with its confidence interval."""

    #: The estimate of the mean the labels would give over every sample.
    mean: float
    low: float
    high: float
    confidence: float
    #: Samples with a label (n) and samples the judge scored without one (N).
    labelled: int
    unlabelled: int
    #: How much the estimate leans on the judge: 0 is the labels' own mean, 1 is plain PPI.
    weight: float
    #: The number of labels alone that would give an interval this narrow, or None when the labels
    #: do not vary (their own interval has no width to compare with).
    effective_labels: float | None


def format_p(value: float | None) -> str:
    """A p-value as messages and reports write it: ``0.0312``, ``<0.0001``, or ``n/a``."""
    if value is None:
        return "n/a"
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


def _population_variance(values: Sequence[float]) -> float:
    if min(values) == max(values):  # exactly 0, not the rounding of a centre that is not one of them
        return 0.0
    centre = math.fsum(values) / len(values)
    return math.fsum((v - centre) ** 2 for v in values) / len(values)


def corrected_mean(
    labels: Sequence[float],
    judged: Sequence[float],
    unlabelled: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> CorrectedMean:
    """The judge-corrected mean of a metric and its confidence interval (PPI++ with a tuned weight).

    ``labels[i]`` is labelled sample ``i``'s score from the person's labels (Y), ``judged[i]`` the
    judge's score of the same sample (Ŷ), and ``unlabelled`` the judge's scores of the samples without
    labels (Ŷᵘ). With n labelled and N unlabelled samples, as ``ppi_py``'s ``ppi_mean_pointestimate``
    and ``ppi_mean_ci`` (``lam=None``) compute them:

    * weight λ = Cov(Y, Ŷ) / ((1 + n/N) · Var(Ŷ and Ŷᵘ together)), clipped to [0, 1] (the covariance
      over the n pairs, divided by n; the variance over all n + N judge scores, divided by n + N - 1);
    * estimate θ = λ · mean(Ŷᵘ) + mean(Y - λŶ);
    * interval θ ± z · sqrt(λ² · Var(Ŷᵘ) / N + Var(Y - λŶ) / n), variances divided by their count,
      z the normal quantile of ``(1 + confidence) / 2``.

    Without unlabelled samples (N = 0), or when the judge gave every sample one score, λ is 0 and the
    estimate is the labels' own mean with its normal interval. ``effective_labels`` is Var(Y) / se²:
    how many labels alone would give the same standard error. Needs at least two labelled samples.

    When nothing varies (the labels less λ times the judge's scores of them, and, with λ above 0,
    the judge's scores of the unlabelled samples) the interval has no width: ``low == high``, as
    ``ppi_py`` gives it. That is not certainty, only a normal interval with nothing to draw on; the
    report gives no interval then (see :func:`pytest_ragmetrics.report.build.corrected_means`).
    """
    y = _finite(labels, "labels")
    y_hat = _finite(judged, "judged scores")
    y_u = _finite(unlabelled, "unlabelled judged scores")
    n, big_n = len(y), len(y_u)
    if len(y_hat) != n:
        raise ValueError(f"{n} labelled scores but {len(y_hat)} judged scores of them")
    if n < 2:
        raise ValueError("a corrected mean needs at least two labelled samples")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1, got {confidence!r}")
    weight = 0.0
    if big_n:
        everything = y_hat + y_u
        centre = math.fsum(everything) / len(everything)
        spread = math.fsum((v - centre) ** 2 for v in everything) / (len(everything) - 1)
        if spread > 0:
            y_mean, h_mean = math.fsum(y) / n, math.fsum(y_hat) / n
            covariance = math.fsum((a - y_mean) * (b - h_mean) for a, b in zip(y, y_hat, strict=True)) / n
            weight = min(1.0, max(0.0, covariance / ((1 + n / big_n) * spread)))
    rectified = [a - weight * b for a, b in zip(y, y_hat, strict=True)]
    imputed = weight * math.fsum(y_u) / big_n if big_n else 0.0
    estimate = imputed + math.fsum(rectified) / n
    variance = _population_variance(rectified) / n
    if big_n and weight:
        variance += weight**2 * _population_variance(y_u) / big_n
    from statistics import NormalDist  # here: a run that corrects no mean never loads it

    z = NormalDist().inv_cdf((1 + confidence) / 2)
    half = z * math.sqrt(variance)
    label_variance = _population_variance(y)
    effective = label_variance / variance if variance > 0 and label_variance > 0 else None
    return CorrectedMean(estimate, estimate - half, estimate + half, confidence, n, big_n, weight, effective)


def _binomial_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 1.0 if k == 0 else 0.0
    if p >= 1.0:
        return 1.0 if k == n else 0.0
    # In logs: comb(n, k) alone overflows a float from n of about a thousand.
    log = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return math.exp(log + k * math.log(p) + (n - k) * math.log1p(-p))


def floor_error_rates(n: int, passes: Callable[[int], bool], good: float, bad: float) -> tuple[float, float]:
    """``(false alarm, miss)`` of a floor over ``n`` controls, each judged positive independently.

    ``passes(k)`` says whether the floor passes with ``k`` of the ``n`` controls judged positive; a
    good judge judges each control positive with probability ``good``, a bad one with ``bad``. The
    false-alarm rate is the chance the floor fails the good judge, the miss rate the chance it passes
    the bad one (binomial tails, as ``scipy.stats.binom`` gives them).
    """
    if n < 1:
        raise ValueError(f"error rates need at least one control, got {n}")
    for name, p in (("good", good), ("bad", bad)):
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"{name} must be a probability, got {p!r}")
    passing = [passes(k) for k in range(n + 1)]
    false_alarm = math.fsum(_binomial_pmf(k, n, good) for k in range(n + 1) if not passing[k])
    miss = math.fsum(_binomial_pmf(k, n, bad) for k in range(n + 1) if passing[k])
    return min(1.0, false_alarm), min(1.0, miss)
