"""The RAGAS half of bench_answer_tokens.py; it runs in a separate environment that has RAGAS 0.4.

Not imported by anything: bench_answer_tokens.py starts it with that environment's Python, writes the
samples and the servers' addresses to its stdin as JSON, and reads the scores from its stdout. Each
(metric, sample) pair gets its own client, whose requests carry an ``x-bench`` header naming the pair,
so the servers can attribute every request. RAGAS's current metrics (``ragas.metrics.collections``)
are used with their defaults: Faithfulness, AnswerRelevancy (strictness 3, with embeddings) and
FactualCorrectness (mode f1, atomicity and coverage low).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # no usage analytics: nothing leaves the machine

from openai import AsyncOpenAI
from ragas.embeddings.base import embedding_factory
from ragas.llms.base import llm_factory
from ragas.metrics.collections import AnswerRelevancy, FactualCorrectness, Faithfulness

MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"


def client(base_url: str, tag: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url, api_key="sk-bench", default_headers={"x-bench": tag}, max_retries=0)


async def score(job: dict[str, Any], metric: str, sample: dict[str, Any]) -> float:
    tag = f"{metric}/{sample['id']}"
    llm = llm_factory(MODEL, client=client(job["chat_url"], tag))
    if metric == "faithfulness":
        result = await Faithfulness(llm=llm).ascore(
            user_input=sample["question"], response=sample["answer"], retrieved_contexts=sample["contexts"]
        )
    elif metric == "answer_relevancy":
        embeddings = embedding_factory(
            "openai", model=EMBEDDING_MODEL, client=client(job["embeddings_url"], tag)
        )
        result = await AnswerRelevancy(llm=llm, embeddings=embeddings).ascore(
            user_input=sample["question"], response=sample["answer"]
        )
    else:
        result = await FactualCorrectness(llm=llm).ascore(
            response=sample["answer"], reference=sample["ground_truth"]
        )
    return float(result.value)


async def main() -> None:
    job = json.load(sys.stdin)
    scores: dict[str, dict[str, float]] = {}
    for metric in job["metrics"]:
        for sample in job["samples"]:  # one at a time, as the requests of one sample are counted
            scores.setdefault(metric, {})[sample["id"]] = await score(job, metric, sample)
    json.dump(scores, sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
