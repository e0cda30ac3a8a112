"""The judge-corrected mean (PPI++): checked against an independent numpy implementation of ppi_py's
``ppi_mean_pointestimate`` / ``ppi_mean_ci`` formulas, and by its coverage in a simulation."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import pytest

from pytest_ragmetrics.stats import corrected_mean

np = pytest.importorskip("numpy")
scipy_stats = pytest.importorskip("scipy.stats")


def _ppi_numpy(
    labels: Sequence[float], judged: Sequence[float], judged_unlabelled: Sequence[float], alpha: float = 0.05
) -> tuple[float, float, float, float, float]:
    """PPI++ for a mean as ppi_py computes it (lam=None, optim_mode "overall", identity Hessian),
    written from its formulas with numpy arrays: gradients at the lam=1 estimate, lam from
    _calc_lam_glm clipped to [0, 1], standard deviations with numpy's default ddof=0."""
    y, y_hat, y_u = (np.asarray(a, dtype=float) for a in (labels, judged, judged_unlabelled))
    n, big_n = y.shape[0], y_u.shape[0]
    pointest_1 = y_u.mean() + (y - y_hat).mean()
    grads = y - pointest_1
    grads_hat = y_hat - pointest_1
    grads_hat_u = y_u - pointest_1
    cent, cent_hat = grads - grads.mean(), grads_hat - grads_hat.mean()
    num = (1 / n) * (cent @ cent_hat + cent_hat @ cent)
    var_hat = np.cov(np.concatenate([grads_hat, grads_hat_u]))
    lam = float(np.clip(num / (2 * (1 + n / big_n) * var_hat), 0, 1))
    theta = (lam * y_u).mean() + (y - lam * y_hat).mean()
    imputed_std = (lam * y_u).std() / np.sqrt(big_n)
    rectifier_std = (y - lam * y_hat).std() / np.sqrt(n)
    half = scipy_stats.norm.ppf(1 - alpha / 2) * np.sqrt(imputed_std**2 + rectifier_std**2)
    return theta, theta - half, theta + half, lam, rectifier_std**2 + imputed_std**2


def _biased_judge(
    rng: random.Random, size: int, bias: float, noise: float
) -> tuple[list[float], list[float]]:
    truth = [rng.betavariate(4, 2) for _ in range(size)]
    judged = [min(1.0, max(0.0, t + bias + rng.gauss(0, noise))) for t in truth]
    return truth, judged


@pytest.mark.parametrize("case", range(12))
def test_corrected_mean_and_interval_equal_ppi_py_formulas_in_numpy(case: int) -> None:
    rng = random.Random(case)
    n, big_n = rng.randint(5, 60), rng.randint(10, 400)
    bias, noise = rng.uniform(-0.1, 0.1), rng.uniform(0.01, 0.4)
    truth, judged = _biased_judge(rng, n + big_n, bias, noise)
    y, y_hat, y_u = truth[:n], judged[:n], judged[n:]
    if case % 3 == 0:  # per-sample scores of a metric are often fractions of a few chunks
        y = [round(v * 3) / 3 for v in y]
    ours = corrected_mean(y, y_hat, y_u, confidence=0.95)
    theta, low, high, lam, se2 = _ppi_numpy(y, y_hat, y_u, alpha=0.05)
    assert ours.mean == pytest.approx(theta, abs=1e-12)
    assert ours.low == pytest.approx(low, abs=1e-12)
    assert ours.high == pytest.approx(high, abs=1e-12)
    assert ours.weight == pytest.approx(lam, abs=1e-12)
    assert (ours.labelled, ours.unlabelled) == (n, big_n)
    assert ours.effective_labels == pytest.approx(float(np.var(y)) / se2, rel=1e-9)


def test_a_weight_outside_zero_to_one_is_clipped_like_ppi_py() -> None:
    # A judge that scores against the labels: the tuned weight would be negative, ppi_py clips it to 0
    # and the estimate is the labels' own mean.
    y = [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    y_hat = [1.0, 0.8, 0.6, 0.4, 0.2, 0.0]
    y_u = [0.1, 0.9, 0.5, 0.3]
    ours = corrected_mean(y, y_hat, y_u)
    theta, low, high, lam, _ = _ppi_numpy(y, y_hat, y_u)
    assert lam == ours.weight == 0.0
    assert ours.mean == pytest.approx(theta) == pytest.approx(0.5)
    assert (ours.low, ours.high) == pytest.approx((low, high))


def test_without_unlabelled_samples_the_corrected_mean_is_the_labels_mean_with_its_normal_interval() -> None:
    y = [0.0, 0.5, 1.0, 1.0, 0.5]
    ours = corrected_mean(y, [1.0, 1.0, 1.0, 1.0, 1.0], [])
    interval = scipy_stats.norm.interval(0.95, loc=np.mean(y), scale=np.std(y) / math.sqrt(len(y)))
    assert ours.weight == 0.0
    assert ours.mean == pytest.approx(0.6)
    assert (ours.low, ours.high) == pytest.approx(interval)
    assert ours.effective_labels == pytest.approx(5)


def test_a_judge_that_agrees_perfectly_is_worth_more_labels_than_were_given() -> None:
    rng = random.Random(3)
    truth = [rng.random() for _ in range(220)]
    ours = corrected_mean(truth[:20], truth[:20], truth[20:])
    # At rho = 1 the tuned weight is about N / (N + n) and the 20 labels are worth many more.
    assert 0.7 < ours.weight < 1.0
    assert ours.effective_labels is not None and ours.effective_labels > 60


def test_when_nothing_varies_the_interval_has_no_width_as_ppi_py_gives_it() -> None:
    # Labels equal to the judge's scores of them: the weight is 0 and the labels do not vary.
    y, y_hat, y_u = [1.0, 1.0], [1.0, 1.0], [0.1, 0.2, 0.3] * 10
    ours = corrected_mean(y, y_hat, y_u)
    theta, low, high, _, _ = _ppi_numpy(y, y_hat, y_u)
    assert (ours.mean, ours.low, ours.high) == (theta, low, high) == (1.0, 1.0, 1.0)
    # A mean of 0.1s is not exactly 0.1 in floats: still no width, exactly (low == high is what the
    # report reads), not the rounding of that mean.
    tenths = corrected_mean([0.1] * 3, [0.1] * 3, [])
    assert tenths.low == tenths.high == tenths.mean


@pytest.mark.parametrize(
    "args, message",
    [
        (([0.5], [0.5], [0.1]), "at least two labelled"),
        (([0.5, 0.2], [0.5], [0.1]), "2 labelled scores but 1 judged"),
        (([0.5, float("nan")], [0.5, 0.1], [0.1]), "finite"),
    ],
)
def test_unusable_input_is_a_clear_error(args: tuple[list[float], list[float], list[float]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        corrected_mean(*args)


def test_corrected_interval_covers_the_true_mean_where_the_judges_mean_never_does() -> None:
    """The reference simulation, smaller: a judge biased by +0.06 with noise 0.15, 1,000 samples of
    which 100 are labelled at random. The judge's mean misses the truth every time; the corrected 95%
    interval covers it about 95% of the time and is narrower than the labels' own."""
    rng = random.Random(2023)
    covered = judge_near = narrower = 0
    repetitions = 100
    for _ in range(repetitions):
        truth, judged = _biased_judge(rng, 1000, 0.06, 0.15)
        target = sum(truth) / len(truth)
        labelled = set(rng.sample(range(1000), 100))
        y = [truth[i] for i in sorted(labelled)]
        y_hat = [judged[i] for i in sorted(labelled)]
        y_u = [judged[i] for i in range(1000) if i not in labelled]
        result = corrected_mean(y, y_hat, y_u)
        covered += result.low <= target <= result.high
        judge_near += abs(sum(judged) / len(judged) - target) < 0.02
        labels_only = corrected_mean(y, y_hat, [])
        narrower += (result.high - result.low) < (labels_only.high - labels_only.low)
    assert 0.88 <= covered / repetitions <= 1.0
    assert judge_near == 0
    assert narrower == repetitions


@pytest.mark.parametrize(
    "n, op, threshold, good, bad",
    [(12, "<=", 0.2, 0.05, 0.5), (40, "<=", 0.1, 0.05, 0.5), (10, ">=", 0.8, 0.95, 0.5), (3, ">=", 0.9, 0.95, 0.5),
     (1500, "<=", 0.2, 0.05, 0.3), (1, "<=", 0.2, 0.05, 0.5)],
)  # fmt: skip
def test_floor_error_rates_are_binomial_tails_as_scipy_gives_them(
    n: int, op: str, threshold: float, good: float, bad: float
) -> None:
    from pytest_ragmetrics.gates import compare
    from pytest_ragmetrics.stats import floor_error_rates

    def passes(k: int) -> bool:
        return compare(k / n, op, threshold)

    false_alarm, miss = floor_error_rates(n, passes, good, bad)
    passing = np.array([passes(k) for k in range(n + 1)])
    ks = np.arange(n + 1)
    assert false_alarm == pytest.approx(float(scipy_stats.binom.pmf(ks[~passing], n, good).sum()), abs=1e-12)
    assert miss == pytest.approx(float(scipy_stats.binom.pmf(ks[passing], n, bad).sum()), abs=1e-12)
