"""The RAGAS half of bench_answer_parity.py; it runs in a separate environment that has RAGAS 0.4.

Not imported by anything: bench_answer_parity.py starts it with that environment's Python, writes the
cases and the servers' addresses to its stdin as JSON, and reads RAGAS's scores from its stdout. Every
(metric, case) pair is scored on its own, with RAGAS's current metrics (``ragas.metrics.collections``)
at their defaults unless named: Faithfulness; FactualCorrectness in modes f1, precision and recall;
AnswerCorrectness with ``weights=[1.0, 0.0]`` (its factuality alone, no embeddings); AnswerRelevancy
(strictness 3, with embeddings). A score is a number, ``"nan"``, or ``"error: <what RAGAS raised>"``.
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
from ragas.embeddings.base import embedding_factory
from ragas.llms.base import llm_factory
from ragas.metrics.collections import (
    AnswerCorrectness,
    AnswerRelevancy,
    FactualCorrectness,
    Faithfulness,
)

MODEL = "gpt-4o-mini"
EMBEDDING_MODEL = "text-embedding-3-small"
METRICS = (
    "faithfulness",
    "factual_correctness",
    "factual_correctness_precision",
    "factual_correctness_recall",
    "answer_correctness_factuality",
    "answer_relevancy",
    "legacy_faithfulness",
    "legacy_factual_correctness",
    "legacy_factual_correctness_precision",
    "legacy_factual_correctness_recall",
    "legacy_answer_correctness_factuality",
    "legacy_answer_relevancy",
)


def client(base_url: str, tag: str) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url, api_key="sk-bench", default_headers={"x-bench": tag}, max_retries=0)


async def legacy_score(job: dict[str, Any], metric: str, case: dict[str, Any]) -> float:
    """The metrics ``ragas.evaluate()`` takes (``ragas.metrics``), on a LangChain chat model."""
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from ragas.dataset_schema import SingleTurnSample
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import (
        AnswerCorrectness as LegacyAnswerCorrectness,
        AnswerRelevancy as LegacyAnswerRelevancy,
        FactualCorrectness as LegacyFactualCorrectness,
        Faithfulness as LegacyFaithfulness,
    )
    from ragas.run_config import RunConfig

    tag = f"{metric}/{case['id']}"
    chat = ChatOpenAI(
        model=MODEL, base_url=job["chat_url"], api_key="sk-bench", max_retries=0,
        default_headers={"x-bench": tag},
    )  # fmt: skip
    llm = LangchainLLMWrapper(chat)
    sample = SingleTurnSample(
        user_input=case["question"], response=case["answer"], reference=case["reference"],
        retrieved_contexts=case["contexts"],
    )  # fmt: skip
    name = metric.removeprefix("legacy_")
    legacy: Any
    if name == "faithfulness":
        legacy = LegacyFaithfulness(llm=llm)
    elif name.startswith("factual_correctness"):
        mode = name.rpartition("_")[2] if name != "factual_correctness" else "f1"
        legacy = LegacyFactualCorrectness(llm=llm, mode=mode)
    elif name == "answer_correctness_factuality":
        legacy = LegacyAnswerCorrectness(llm=llm, weights=[1.0, 0.0])
    else:
        embeddings = OpenAIEmbeddings(
            model=EMBEDDING_MODEL, base_url=job["embeddings_url"], api_key="sk-bench",
            check_embedding_ctx_length=False,  # send the texts, not tiktoken's ids (no download)
        )  # fmt: skip
        legacy = LegacyAnswerRelevancy(llm=llm, embeddings=LangchainEmbeddingsWrapper(embeddings))
    legacy.init(RunConfig(max_retries=0))
    return float(await legacy.single_turn_ascore(sample))


async def score(job: dict[str, Any], metric: str, case: dict[str, Any]) -> float:
    if metric.startswith("legacy_"):
        return await legacy_score(job, metric, case)
    llm = llm_factory(MODEL, client=client(job["chat_url"], f"{metric}/{case['id']}"))
    question, answer, reference = case["question"], case["answer"], case["reference"]
    if metric == "faithfulness":
        result = await Faithfulness(llm=llm).ascore(
            user_input=question, response=answer, retrieved_contexts=case["contexts"]
        )
    elif metric.startswith("factual_correctness"):
        mode = metric.rpartition("_")[2] if metric != "factual_correctness" else "f1"
        result = await FactualCorrectness(llm=llm, mode=mode).ascore(response=answer, reference=reference)
    elif metric == "answer_correctness_factuality":
        result = await AnswerCorrectness(llm=llm, weights=[1.0, 0.0]).ascore(
            user_input=question, response=answer, reference=reference
        )
    else:
        embeddings = embedding_factory(
            "openai", model=EMBEDDING_MODEL, client=client(job["embeddings_url"], case["id"])
        )
        result = await AnswerRelevancy(llm=llm, embeddings=embeddings).ascore(
            user_input=question, response=answer
        )
    return float(result.value)


async def main() -> None:
    job = json.load(sys.stdin)
    json.dump(await score_each(job, job.get("metrics", METRICS), score), sys.stdout)


if __name__ == "__main__":
    asyncio.run(main())
