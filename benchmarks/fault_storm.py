"""A fault storm against the judge: what is lost, what is paid twice, how long a dead judge costs.

The real engine, the real OpenAI client over HTTP and a real disk cache, against the local
``FakeJudgeServer`` scripted (with a fixed seed) to answer a share of the requests with HTTP 500,
HTTP 429, a schema-violating answer, or a hang longer than the client's timeout. Then:

* the storm run: every sample evaluated (concurrently, one evaluation per sample as a test would),
  counting judge requests, failed evaluations and wrong scores (against a clean run);
* the rerun with a warm cache and a healthy judge: the judge calls it still pays (what the storm
  run paid for but did not record), and whether any cached entry is malformed;
* a dead judge (nothing listening) and a judge refusing the key (HTTP 401): evaluations one after
  the other, as tests run, with the seconds and the requests they cost.

    python benchmarks/fault_storm.py [--samples 40] [--seed 7] [--dead-tests 4]

Prints one figure per line; ``FAULT_STORM_DEBUG=1`` also prints each failed evaluation. It uses only
APIs that every version has, so the same script measures an older checkout
(``PYTHONPATH=<checkout> python benchmarks/fault_storm.py``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.testing import FakeJudgeServer

METRICS = ["context_precision", "context_recall", "context_relevance[graded]"]
TIMEOUT = 2.0  # seconds per request: a hang costs this much


def truth(body: dict[str, Any]) -> dict[str, Any]:
    """The deterministic judge: chunks that name the sample's fact are useful and relevant."""
    payload: dict[str, Any] = {}
    for message in body["messages"]:  # the material; a re-ask appends plain-text messages after it
        if message.get("role") == "user":
            try:
                payload = json.loads(message["content"])
            except (TypeError, ValueError):
                continue
    name = body["response_format"]["json_schema"]["name"]
    if name == "context_precision":
        useful = "limit" in payload["chunk"]
        return {"reason": "states the limit" if useful else "unrelated", "useful": useful}
    if name == "context_recall":
        contexts = " ".join(payload["contexts"].values())
        return {
            f"sentence_{i}": {"reason": "checked", "attributed": "limit" in contexts}
            for i in payload["reference_sentences"]
        }
    rating = 2 if "limit" in payload["chunk"] else 0
    return {"reason": f"rated {rating}", "rating": rating}


def samples(n: int) -> list[RagSample]:
    return [
        RagSample(
            f"What is the storage limit of plan {i}?",
            [f"Plan {i} has a storage limit of {i} GB.", f"Plan {i} was launched in spring."],
            ground_truth=f"The storage limit is {i} GB.",
            id=f"s{i}",
        )
        for i in range(n)
    ]


class Storm:
    """Decides, per request and with a fixed seed, which fault (if any) the server answers with."""

    def __init__(self, server: FakeJudgeServer, seed: int, rates: dict[str, float]) -> None:
        self.server = server
        self.random = random.Random(seed)
        self.rates = rates
        self.planned: list[str] = []
        self.malformed = 0

    def plan(self, requests: int) -> None:
        """Queue the server's behaviour for the next ``requests`` requests."""
        for _ in range(requests):
            roll = self.random.random()
            for kind, rate in self.rates.items():
                if roll < rate:
                    self.planned.append(kind)
                    if kind == "http_500":
                        self.server.fail_next(500)
                    elif kind == "http_429":
                        self.server.fail_next(429, headers={"retry-after-ms": "20"})
                    elif kind == "hang":
                        self.server.hang_next(seconds=TIMEOUT * 3)
                    break
                roll -= rate
            else:
                self.planned.append("normal")
                self.server.hang_next(seconds=0.0)  # answer normally

    def served(self, requests: int) -> dict[str, int]:
        """How many of the first ``requests`` requests got each behaviour (they are served in order)."""
        counts = {kind: 0 for kind in (*self.rates, "normal")}
        for kind in self.planned[:requests]:
            counts[kind] += 1
        return counts

    def responder(self, malformed_rate: float) -> Any:
        def answer(body: dict[str, Any]) -> dict[str, Any] | str:
            if self.random.random() < malformed_rate:
                self.malformed += 1
                return {"reason": "forgot the verdict"}  # schema-violating
            return truth(body)

        return answer


def evaluate_each(settings: Settings, batch: list[RagSample]) -> tuple[dict[str, dict[str, float]], int]:
    """Every sample evaluated on its own (as a test would), concurrently; (scores, failed samples)."""
    scores: dict[str, dict[str, float]] = {}
    failed = 0

    async def main(ev: Evaluator) -> list[Any]:
        return await asyncio.gather(*(ev.aevaluate([s], METRICS) for s in batch), return_exceptions=True)

    with Evaluator(settings) as ev:
        for sample, outcome in zip(batch, asyncio.run(main(ev)), strict=True):
            if isinstance(outcome, BaseException):
                failed += 1
                if os.environ.get("FAULT_STORM_DEBUG"):
                    print("  failed:", type(outcome).__name__, str(outcome)[:300])
                continue
            sid = sample.id or ""
            scores[sid] = {name: r.score for name, r in outcome.results[sid].items()}
    return scores, failed


def malformed_cache_entries(cache_dir: Path) -> tuple[int, int]:
    """(entries, entries whose answer does not fit its judgment kind) in the diskcache database."""
    required = {
        "context_precision": {"reason", "useful"},
        "context_relevance_graded": {"reason", "rating"},
    }
    entries = bad = 0
    with sqlite3.connect(cache_dir / "cache.db") as db:
        for (value,) in db.execute("SELECT value FROM Cache WHERE value IS NOT NULL"):
            try:
                record = json.loads(value)
            except (TypeError, ValueError):
                continue  # not an entry of ours (e.g. a claim token)
            if not isinstance(record, dict) or "answer" not in record:
                continue
            entries += 1
            for choice in record["answer"]["choices"]:
                keys = required.get(record.get("kind", ""))
                recall_ok = record.get("kind") != "context_recall" or all(
                    isinstance(v, dict) and "attributed" in v
                    for k, v in choice.items()
                    if k.startswith("sentence_")
                )
                if (keys is not None and not keys <= set(choice)) or not recall_ok:
                    bad += 1
    return entries, bad


def sequential_failures(settings: Settings, batch: list[RagSample]) -> tuple[float, int]:
    """Seconds for evaluating the samples one after the other against a failing judge; failures."""
    failures = 0
    started = time.perf_counter()
    with Evaluator(settings) as ev:
        for sample in batch:
            try:
                ev.evaluate([sample], ["context_recall"])
            except Exception:
                failures += 1
    return time.perf_counter() - started, failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--dead-tests", type=int, default=4)
    args = parser.parse_args()
    os.environ["OPENAI_API_KEY"] = "sk-fault-storm-000000"
    rates = {"http_500": 0.15, "http_429": 0.10, "hang": 0.05}
    malformed_rate = 0.10
    batch = samples(args.samples)

    with tempfile.TemporaryDirectory() as tmp:
        base = Settings(timeout=TIMEOUT, max_retries=2, cache_dir=str(Path(tmp) / "clean"))
        with FakeJudgeServer(truth) as clean:
            clean_settings = base.replace(judge_base_url=clean.base_url, timeout=60.0, max_retries=4)
            expected, clean_failed = evaluate_each(clean_settings, batch)
        if clean_failed:
            raise SystemExit(f"the clean run failed {clean_failed} evaluation(s): the machine is too busy")

        cache_dir = Path(tmp) / "storm"
        with FakeJudgeServer() as server:
            storm = Storm(server, args.seed, rates)
            server.responder = storm.responder(malformed_rate)
            storm.plan(20 * args.samples * 6)  # more than the run can ask for
            settings = base.replace(judge_base_url=server.base_url, cache_dir=str(cache_dir))
            started = time.perf_counter()
            scores, failed = evaluate_each(settings, batch)
            seconds = time.perf_counter() - started
            storm_requests = server.request_count
        wrong = sum(
            1
            for sid, by_metric in scores.items()
            for name, score in by_metric.items()
            if abs(score - expected[sid][name]) > 1e-12
        )
        entries, bad = malformed_cache_entries(cache_dir)

        with FakeJudgeServer(truth) as healthy:
            healthy_settings = settings.replace(judge_base_url=healthy.base_url, timeout=60.0, max_retries=4)
            again, failed_again = evaluate_each(healthy_settings, batch)
            rerun_calls = healthy.request_count
        wrong_again = sum(
            1
            for sid, by_metric in again.items()
            for name, score in by_metric.items()
            if abs(score - expected[sid][name]) > 1e-12
        )

        print(f"samples: {len(batch)} x {len(METRICS)} metrics (seed {args.seed})")
        served = storm.served(storm_requests)
        print(
            f"faults served: {storm_requests} requests: "
            + ", ".join(f"{kind} {count}" for kind, count in served.items())
            + f"; {storm.malformed} of the normal answers schema-violating"
        )
        print(
            "fault rates: "
            + ", ".join(f"{kind} {rate:.0%}" for kind, rate in rates.items())
            + f", malformed answers {malformed_rate:.0%} of the answered ones"
        )
        print(
            f"storm run: {storm_requests} judge requests, {failed} failed sample evaluations, {seconds:.1f}s"
        )
        print(f"storm run: wrong scores among those that succeeded: {wrong}")
        print(f"cache after the storm: {entries} entries, {bad} malformed")
        print(
            f"rerun (warm cache, healthy judge): {rerun_calls} judge calls, {failed_again} failed, "
            f"{wrong_again} wrong scores"
        )

        dead = samples(args.dead_tests)
        with FakeJudgeServer() as gone:
            dead_url = gone.base_url  # nothing listens here once the server stops
        dead_settings = Settings(judge_base_url=dead_url, cache="off", max_retries=4, timeout=5.0)
        dead_seconds, dead_failures = sequential_failures(dead_settings, dead)
        print(
            f"dead judge: {args.dead_tests} tests one after the other: {dead_seconds:.1f}s "
            f"({dead_seconds / args.dead_tests:.1f}s per test), {dead_failures} failed"
        )
        with FakeJudgeServer() as refusing:
            refusing.fail_next(401, times=10_000)
            key_settings = Settings(judge_base_url=refusing.base_url, cache="off")
            key_seconds, key_failures = sequential_failures(key_settings, dead)
            print(
                f"refused key (HTTP 401): {args.dead_tests} tests: {refusing.request_count} requests, "
                f"{key_seconds:.1f}s, {key_failures} failed"
            )


if __name__ == "__main__":
    main()
