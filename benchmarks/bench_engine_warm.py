"""A warm rerun through the whole engine: samples -> requests -> cache -> verdicts -> scores.

``bench_cache_lookup.py`` measures the cache alone; this adds what a real rerun pays on top (building
requests, hashing keys, scoring). 1,000 samples with two chunks, precision and graded relevance:
4,000 judgments, all answered from a real diskcache after one cold pass with a scripted judge.

    python benchmarks/bench_engine_warm.py [--samples 1000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings
from pytest_ragmetrics.judge.base import JudgeRequest

METRICS = ["context_precision", "context_relevance[graded]"]


def answer(request: JudgeRequest) -> dict[str, object]:
    if request.kind == "context_precision":
        return {"reason": "states the fact", "useful": True}
    return {"reason": "answers the question", "rating": 2}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    samples = [
        RagSample(
            f"What does article {i} say about storage limits?",
            [f"Article {i} says the limit is {i} GB. It applies to every plan.", f"Unrelated text {i}."],
            ground_truth=f"The limit is {i} GB.",
            id=f"s{i}",
        )
        for i in range(args.samples)
    ]
    judgments = args.samples * 2 * len(METRICS)
    with tempfile.TemporaryDirectory() as cache_dir:
        judge = ScriptedJudge(answer)
        with Evaluator(Settings(cache_dir=cache_dir), judge=judge) as evaluator:
            start = time.perf_counter()
            evaluator.evaluate(samples, METRICS)
            cold = time.perf_counter() - start
            rates = []
            for _ in range(args.rounds):
                start = time.perf_counter()
                evaluator.evaluate(samples, METRICS)
                rates.append(judgments / (time.perf_counter() - start))
    print(f"judgments per run:   {judgments:,}  (judge calls in the cold run: {judge.calls:,})")
    print(f"cold run (scripted): {cold:.2f} s")
    print(f"warm reruns:         median {statistics.median(rates):,.0f} judgments/s over {args.rounds} runs")


if __name__ == "__main__":
    main()
