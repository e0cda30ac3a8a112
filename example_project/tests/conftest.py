"""Fixtures: the golden set, turned into RagSamples by running the retriever and the generator under test."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from ragapp.generator import generate, generate_weak
from ragapp.retriever import Doc, retrieve_docs, retrieve_weak_docs

from pytest_ragmetrics import RagSample, load_samples

GOLDEN = Path(__file__).resolve().parent.parent / "golden.jsonl"


@cache
def golden_set() -> tuple[RagSample, ...]:
    """The golden questions, reference answers and relevant article ids, without contexts (the
    retriever supplies those)."""
    return tuple(load_samples(GOLDEN))


Generator = Callable[[str, list[Doc]], str]


def with_contexts(
    retriever: Callable[[str], list[Doc]], id_prefix: str = "", generator: Generator | None = None
) -> list[RagSample]:
    """Every golden sample with the articles ``retriever`` returns for its question, and the answer
    ``generator`` composes from them.

    The articles carry their ids, so the samples get ``context_ids`` beside the texts, and the label
    metrics (``ndcg@3``, ``mrr``...) can compare them with the golden set's ``reference_context_ids``.
    """
    out = []
    for s in golden_set():
        docs = retriever(s.question)
        answer = generator(s.question, docs) if generator is not None else None
        out.append(replace(s.with_contexts(docs), id=f"{id_prefix}{s.id}", answer=answer))
    return out


def retriever_under_test() -> Callable[[str], list[Doc]]:
    """BM25; or, with ``EXAMPLE_RETRIEVER=weak``, the weakened retriever (to watch the committed
    baseline catch it: see README.md)."""
    return retrieve_weak_docs if os.environ.get("EXAMPLE_RETRIEVER") == "weak" else retrieve_docs


def generator_under_test() -> Generator:
    """The answer generator; or, with ``EXAMPLE_GENERATOR=weak``, the weakened one that adds a fact no
    article holds (to watch faithfulness catch it: see README.md)."""
    return generate_weak if os.environ.get("EXAMPLE_GENERATOR") == "weak" else generate


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test asking for `sample` runs once per golden question, named by its id (test_recall[q01]).
    if "sample" in metafunc.fixturenames:
        samples = with_contexts(retriever_under_test(), generator=generator_under_test())
        metafunc.parametrize("sample", samples, ids=[s.id for s in samples])


@pytest.fixture(scope="session")
def samples() -> list[RagSample]:
    """The whole golden set, retrieved with the production BM25 retriever and answered from it."""
    return with_contexts(retriever_under_test(), generator=generator_under_test())


@pytest.fixture(scope="session")
def weak_samples() -> list[RagSample]:
    """The golden set retrieved with the deliberately weakened retriever (ids prefixed ``weak-``)."""
    return with_contexts(retrieve_weak_docs, id_prefix="weak-")


@pytest.fixture(scope="session")
def weak_answer_samples() -> list[RagSample]:
    """The golden set retrieved with BM25 and answered by the weakened generator, which adds a fact
    no article holds (ids prefixed ``weak-answer-``)."""
    return with_contexts(retrieve_docs, id_prefix="weak-answer-", generator=generate_weak)
