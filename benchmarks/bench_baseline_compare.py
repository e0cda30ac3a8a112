"""Time to compare a run with its baseline: the statistics added to the end of a run.

Builds two synthetic run reports of ``--samples`` samples scored on the five metric methods (scores
on a grid of twelfths, about a third of them moved between the runs, as after a retriever change)
and times :func:`pytest_ragmetrics.baseline.compare_reports`: per metric, a paired bootstrap
(2,000 resamples at this size) and a 10,000-draw sign-flip permutation test (exact enumeration is
cheaper; a moved third keeps the Monte Carlo path busy).

Bound: 2 s for 1,000 samples on five metrics (about the cost of judging nothing: the comparison
runs once, at the end of a run that took far longer). The figure is the process's CPU time, the
median of ``--repeat`` runs, since on a shared machine wall time mostly measures the neighbours;
wall time is printed beside it.

    python benchmarks/bench_baseline_compare.py [--samples 1000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from typing import Any

from pytest_ragmetrics.baseline import compare_reports

BOUND_SECONDS = 2.0
METRICS = (
    ("context_precision", None),
    ("context_recall", None),
    ("context_relevance", "graded"),
    ("context_relevance", "sentence"),
    ("context_relevance", "binary"),
)


def report(scores: dict[tuple[str, str | None], list[float]]) -> dict[str, Any]:
    rows = []
    for (metric, method), values in scores.items():
        samples = [
            {"id": f"q{i:05d}", "score": v, "key": f"k{i}-{v}", "reference_key": f"r{i}", "judges": ["m"]}
            for i, v in enumerate(values)
        ]
        rows.append({"nodeid": f"t::{metric}", "metric": metric, "method": method, "samples": samples})
    return {"version": 1, "results": rows, "summary": {}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = random.Random(1)
    before: dict[tuple[str, str | None], list[float]] = {}
    after: dict[tuple[str, str | None], list[float]] = {}
    for key in METRICS:
        before[key] = [rng.randint(0, 12) / 12 for _ in range(args.samples)]
        after[key] = [
            min(1.0, max(0.0, v + rng.choice((-2, -1, 1)) / 12)) if rng.random() < 1 / 3 else v
            for v in before[key]
        ]
    baseline, current = report(before), report(after)
    times, walls = [], []
    for _ in range(args.repeat):
        start, wall = time.process_time(), time.perf_counter()
        comparison = compare_reports(baseline, current)
        times.append(time.process_time() - start)
        walls.append(time.perf_counter() - wall)
    seconds = statistics.median(times)
    ratio = seconds / BOUND_SECONDS * (1000 / args.samples)
    tests = {m["test"]["method"] for m in comparison["metrics"]}
    print(f"compare {args.samples} samples x {len(METRICS)} metrics ({', '.join(sorted(tests))} tests)")
    bound = f"bound {BOUND_SECONDS} s per 1,000 samples, ratio {ratio:.2f}"
    print(f"  CPU time, median of {args.repeat}: {seconds:.2f} s  ({bound})")
    print(f"  wall time, median:     {statistics.median(walls):.2f} s")
    print(f"  bound:          {'met' if ratio <= 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
