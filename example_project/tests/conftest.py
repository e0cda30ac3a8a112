"""Fixtures: the golden set, turned into RagSamples by running the retriever under test."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from ragapp.retriever import Doc, retrieve_docs, retrieve_weak_docs

from pytest_ragmetrics import RagSample, load_samples

GOLDEN = Path(__file__).resolve().parent.parent / "golden.jsonl"


@cache
def golden_set() -> tuple[RagSample, ...]:
    """The golden questions, reference answers and relevant article ids, without contexts (the
    retriever supplies those)."""
    return tuple(load_samples(GOLDEN))


def with_contexts(retriever: Callable[[str], list[Doc]], id_prefix: str = "") -> list[RagSample]:
    """Every golden sample with the articles ``retriever`` returns for its question.

    The articles carry their ids, so the samples get ``context_ids`` beside the texts, and the label
    metrics (``ndcg@3``, ``mrr``...) can compare them with the golden set's ``reference_context_ids``.
    """
    return [replace(s.with_contexts(retriever(s.question)), id=f"{id_prefix}{s.id}") for s in golden_set()]


def retriever_under_test() -> Callable[[str], list[Doc]]:
    """BM25; or, with ``EXAMPLE_RETRIEVER=weak``, the weakened retriever (to watch the committed
    baseline catch it: see README.md)."""
    return retrieve_weak_docs if os.environ.get("EXAMPLE_RETRIEVER") == "weak" else retrieve_docs


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test asking for `sample` runs once per golden question, named by its id (test_recall[q01]).
    if "sample" in metafunc.fixturenames:
        samples = with_contexts(retriever_under_test())
        metafunc.parametrize("sample", samples, ids=[s.id for s in samples])


@pytest.fixture(scope="session")
def samples() -> list[RagSample]:
    """The whole golden set, retrieved with the production BM25 retriever."""
    return with_contexts(retriever_under_test())


@pytest.fixture(scope="session")
def weak_samples() -> list[RagSample]:
    """The golden set retrieved with the deliberately weakened retriever (ids prefixed ``weak-``)."""
    return with_contexts(retrieve_weak_docs, id_prefix="weak-")
