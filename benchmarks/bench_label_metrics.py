"""Label metrics (no judge): 100,000 labelled samples scored on ``ndcg@10``, in three ways.

* the pure scorer, ``labels.ndcg(ranking, grades, 10)``: the arithmetic alone;
* a full result per sample (verdicts and explanation), ``LabelMetric.score_now``;
* ``evaluate(samples, metrics=["ndcg@10"])``: the whole engine, as a test or a script uses it.

Each sample retrieves 10 ids out of 1,000 and has 1 to 5 graded labels (seeded, so every run scores
the same data). Rates are given per second of wall time and per second of this process's CPU time;
the bounds apply to CPU time, which a busy shared machine does not distort: 100,000 samples/s for
the pure scorer and 8,000 samples/s through ``evaluate`` (a result with verdicts and an explanation
per sample; about a third of that time is garbage collection of the 100,000 results). Run it a
few times and take the median.

    python benchmarks/bench_label_metrics.py [--samples 100000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable

from pytest_ragmetrics import RagSample
from pytest_ragmetrics.engine import Evaluator
from pytest_ragmetrics.metrics import labels
from pytest_ragmetrics.metrics.builtin import LabelMetric
from pytest_ragmetrics.settings import Settings

SCORER_BOUND = 100_000
EVALUATE_BOUND = 8_000


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


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds (this process, all threads) that ``fn()`` takes."""
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--samples", type=int, default=100_000)
    args = parser.parse_args()
    n = args.samples
    samples = make_samples(n)
    pairs = [(s.context_ids or (), s.reference_context_ids or {}) for s in samples]

    scores: list[float] = []
    scorer = timed(lambda: scores.extend(labels.ndcg(r, g, 10) for r, g in pairs))
    metric = LabelMetric("ndcg", 10)
    results = timed(lambda: [metric.score_now(s) for s in samples])
    with Evaluator(Settings()) as evaluator:
        evaluated = []
        through = timed(lambda: evaluated.append(evaluator.evaluate(samples, ["ndcg@10"])))
        judge_built = evaluator.built_judge is not None
    mean = sum(scores) / n
    assert abs(evaluated[0].aggregates["ndcg@10"]["mean"] - mean) < 1e-9

    print(f"samples: {n:,}  (mean ndcg@10 {mean:.4f}, cpus: {os.cpu_count()})")
    print(f"{'':30} {'per wall second':>16} {'per CPU second':>16}")
    for label, (wall, cpu) in (
        ("pure scorer", scorer),
        ("result with verdicts", results),
        ("evaluate(samples, ndcg@10)", through),
    ):
        print(f"{label:30} {n / wall:>16,.0f} {n / cpu:>16,.0f}  samples  ({wall:.2f} s wall)")
    print(f"judge built / openai imported: {judge_built} / {'openai' in sys.modules}")
    bounds = (("pure scorer", scorer, SCORER_BOUND), ("evaluate", through, EVALUATE_BOUND))
    for label, (_, cpu), bound in bounds:
        rate = n / cpu
        verdict = "met" if rate >= bound else "NOT met"
        print(f"bound {label}: {bound:,} samples per CPU second -> {rate / bound:.2f}x, {verdict}")


if __name__ == "__main__":
    main()
