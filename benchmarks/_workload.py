"""The workload the benchmarks share: a synthetic golden set and a judge that answers any request.

Each sample has a question, three retrieved chunks of four sentences and a two-sentence reference,
about the size of a real RAG golden-set entry. Imported by the scripts in this directory.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pytest_ragmetrics import RagSample
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.testing import conforming_value

#: The five metric methods of a full run: precision, recall and the three kinds of relevance.
FIVE_METHODS = (
    "context_precision",
    "context_recall",
    "context_relevance[graded]",
    "context_relevance[sentence]",
    "context_relevance[binary]",
)

#: The assertion of a pytest test that checks each method.
ASSERTIONS = {
    "context_precision": "assert_context_precision(rag_sample) >= 0.0",
    "context_recall": "assert_context_recall(rag_sample) >= 0.0",
    "context_relevance[graded]": 'assert_context_relevance(rag_sample, "graded") >= 0.0',
    "context_relevance[sentence]": 'assert_context_relevance(rag_sample, "sentence") >= 0.0',
    "context_relevance[binary]": 'assert_context_relevance(rag_sample, "binary") >= 0.0',
}


def assertions(methods: tuple[str, ...] = FIVE_METHODS) -> str:
    """The body of a pytest test that checks ``methods``."""
    return "".join(f"    {ASSERTIONS[m]}\n" for m in methods)


#: The test body of a pytest test that checks the same five methods.
FIVE_ASSERTIONS = assertions()

IMPORTS = (
    "from pytest_ragmetrics import (\n"
    "    assert_context_precision, assert_context_recall, assert_context_relevance,\n"
    ")\n"
)


def sample_fields(i: int) -> dict[str, Any]:
    chunks = [
        (
            f"Article {i}.{c} covers storage plan {c} of region {i % 17}. "
            f"The limit for this plan is {i * 3 + c} GB per workspace. "
            f"Older workspaces created before release {i % 9}.{c} keep their previous limit. "
            f"Administrators can raise it by contacting support with ticket type {c}."
        )
        for c in range(3)
    ]
    return {
        "id": f"s{i}",
        "question": f"What storage limit applies to plan {i % 3} in region {i % 17} (case {i})?",
        "contexts": chunks,
        "ground_truth": f"The limit is {i * 3} GB per workspace. Older workspaces keep their limit.",
    }


def make_samples(count: int) -> list[RagSample]:
    return [
        RagSample(f["question"], f["contexts"], ground_truth=f["ground_truth"], id=f["id"])
        for f in map(sample_fields, range(count))
    ]


def write_golden(path: Path, count: int) -> None:
    with path.open("w", encoding="utf-8") as fh:
        for i in range(count):
            fh.write(json.dumps(sample_fields(i)) + "\n")


def answer(request: JudgeRequest) -> Any:
    """A conforming answer to any of our requests (the most positive verdict)."""
    return conforming_value(request.schema)
