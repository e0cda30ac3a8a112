"""The RAGAS half of bench_retrieval_parity.py; it runs in a separate environment that has RAGAS 0.4.

Not imported by anything: bench_retrieval_parity.py starts it with that environment's Python, writes
the cases and the server's address to its stdin as JSON, and reads RAGAS's scores from its stdout.
Every (metric, case) pair is scored on its own, with RAGAS's current metrics
(``ragas.metrics.collections``: ContextPrecision, ContextRecall, ContextUtilization) and the older
ones ``ragas.evaluate()`` takes (``ragas.metrics``: LLMContextPrecisionWithReference,
LLMContextRecall, LLMContextPrecisionWithoutReference, on a LangChain chat model), each at its
defaults, or those the job names (``metrics``); the two without a reference are given the case's
reference as the system's answer. A score is a number, ``"nan"``, or ``"error: <what RAGAS
raised>"``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # no usage analytics: nothing leaves the machine

from _peers import score_each
from openai import AsyncOpenAI
from ragas.llms.base import llm_factory
from ragas.metrics.collections import ContextPrecision, ContextRecall, ContextUtilization

MODEL = "gpt-4o-mini"
METRICS = (
    "context_precision",
    "context_recall",
    "context_utilization",
    "legacy_context_precision",
    "legacy_context_recall",
    "legacy_context_utilization",
)


async def legacy_score(job: dict[str, Any], metric: str, case: dict[str, Any]) -> float:
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import (
        LLMContextPrecisionWithoutReference,
        LLMContextPrecisionWithReference,
        LLMContextRecall,
    )
    from ragas.run_config import RunConfig

    chat = ChatOpenAI(
        model=MODEL, base_url=job["chat_url"], api_key="sk-bench", max_retries=0,
        default_headers={"x-bench": f"{metric}/{case['id']}"},
    )  # fmt: skip
    llm = LangchainLLMWrapper(chat)
    legacy: Any
    if metric == "legacy_context_utilization":  # the reference's text as the system's answer
        sample = SingleTurnSample(
            user_input=case["question"], retrieved_contexts=case["contexts"], response=case["reference"]
        )
        legacy = LLMContextPrecisionWithoutReference(llm=llm)
    else:
        sample = SingleTurnSample(
            user_input=case["question"], retrieved_contexts=case["contexts"], reference=case["reference"]
        )
        legacy = (
            LLMContextPrecisionWithReference(llm=llm)
            if metric == "legacy_context_precision"
            else LLMContextRecall(llm=llm)
        )
    legacy.init(RunConfig(max_retries=0))
    return float(await legacy.single_turn_ascore(sample))


async def score(job: dict[str, Any], metric: str, case: dict[str, Any]) -> float:
    if metric.startswith("legacy_"):
        return await legacy_score(job, metric, case)
    client = AsyncOpenAI(
        base_url=job["chat_url"], api_key="sk-bench", max_retries=0,
        default_headers={"x-bench": f"{metric}/{case['id']}"},
    )  # fmt: skip
    llm = llm_factory(MODEL, client=client)
    if metric == "context_utilization":  # the reference's text as the system's answer
        result = await ContextUtilization(llm=llm).ascore(
            user_input=case["question"], retrieved_contexts=case["contexts"], response=case["reference"]
        )
        return float(result.value)
    kind = ContextPrecision if metric == "context_precision" else ContextRecall
    result = await kind(llm=llm).ascore(
        user_input=case["question"], retrieved_contexts=case["contexts"], reference=case["reference"]
    )
    return float(result.value)


async def main() -> None:
    job = json.load(sys.stdin)
    json.dump(await score_each(job, job.get("metrics", METRICS), score), sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
