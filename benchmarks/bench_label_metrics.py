"""Label metrics (no judge): 100,000 labelled samples scored on ``ndcg@10``, in three ways.

* the pure scorer, ``labels.ndcg(ranking, grades, 10)``: the arithmetic alone;
* a full result per sample (verdicts and explanation), ``LabelMetric.score_now``;
* ``evaluate(samples, metrics=["ndcg@10"])``: the whole engine, as a test or a script uses it.

Each sample retrieves 10 ids out of 1,000 and has 1 to 5 graded labels (seeded, so every run scores
the same data). Bounds: 100,000 samples/s for the pure scorer and 20,000 samples/s through
``evaluate``, on one core. Run it a few times on a busy machine and take the median.

    python benchmarks/bench_label_metrics.py [--samples 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

from pytest_ragmetrics import RagSample
from pytest_ragmetrics.engine import Evaluator
from pytest_ragmetrics.metrics import labels
from pytest_ragmetrics.metrics.builtin import LabelMetric
from pytest_ragmetrics.settings import Settings

SCORER_BOUND = 100_000
EVALUATE_BOUND = 20_000


def make_samples(count: int, seed: int = 0) -> list[RagSample]:
    rng = random.Random(seed)
    pool = [f"doc-{i}" for i in range(1000)]
    samples = []
    for n in range(count):
        ranking = rng.sample(pool, 10)
        # Half the labels come from the ranking, so scores spread between 0 and 1.
        relevant = rng.sample(ranking, rng.randint(0, 3)) + rng.sample(pool, rng.randint(1, 2))
        grades = {doc: rng.randint(1, 3) for doc in relevant}
        samples.append(
            RagSample(
                f"question {n}",
                [f"chunk text of {doc}" for doc in ranking],
                id=f"s{n}",
                context_ids=ranking,
                reference_context_ids=grades,
            )
        )
    return samples


def timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    args = parser.parse_args()
    n = args.samples
    samples = make_samples(n)
    pairs = [(s.context_ids or (), s.reference_context_ids or {}) for s in samples]

    scores: list[float] = []
    scorer_s = timed(lambda: scores.extend(labels.ndcg(r, g, 10) for r, g in pairs))
    metric = LabelMetric("ndcg", 10)
    results_s = timed(lambda: [metric.score_now(s) for s in samples])
    with Evaluator(Settings()) as evaluator:
        evaluated = []
        evaluate_s = timed(lambda: evaluated.append(evaluator.evaluate(samples, ["ndcg@10"])))
        judge_built = evaluator.built_judge is not None
    mean = sum(scores) / n
    assert abs(evaluated[0].aggregates["ndcg@10"]["mean"] - mean) < 1e-9

    print(f"samples:                      {n:,}  (mean ndcg@10 {mean:.4f}, cpus: {os.cpu_count()})")
    print(f"pure scorer:                 {n / scorer_s:>10,.0f} samples/s  ({scorer_s:.2f} s)")
    print(f"result with verdicts:        {n / results_s:>10,.0f} samples/s  ({results_s:.2f} s)")
    print(f"evaluate(samples, ndcg@10):  {n / evaluate_s:>10,.0f} samples/s  ({evaluate_s:.2f} s)")
    print(f"judge built / openai imported: {judge_built} / {'openai' in sys.modules}")
    for label, rate, bound in (
        ("pure scorer", n / scorer_s, SCORER_BOUND),
        ("evaluate", n / evaluate_s, EVALUATE_BOUND),
    ):
        verdict = "met" if rate >= bound else "NOT met"
        print(f"bound {label}: {bound:>10,} samples/s  -> {rate / bound:.1f}x, {verdict}")


if __name__ == "__main__":
    main()
