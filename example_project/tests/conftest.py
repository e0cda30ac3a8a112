"""Fixtures: the golden set, turned into RagSamples by running the retriever under test."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from ragapp.retriever import retrieve, retrieve_weak

from pytest_ragmetrics import RagSample

GOLDEN = Path(__file__).resolve().parent.parent / "golden.jsonl"


@cache
def golden_set() -> tuple[RagSample, ...]:
    """The golden questions and reference answers, without contexts (the retriever supplies those).

    Read with json rather than ``pytest_ragmetrics.load_samples``, which requires a ``contexts`` field:
    a golden set for testing a retriever has none until the retriever runs.
    """
    with open(GOLDEN, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return tuple(RagSample(r["question"], (), ground_truth=r["ground_truth"], id=r["id"]) for r in rows)


def with_contexts(retriever: Callable[[str], list[str]], id_prefix: str = "") -> list[RagSample]:
    """Every golden sample with the contexts ``retriever`` returns for its question."""
    return [replace(s, contexts=tuple(retriever(s.question)), id=f"{id_prefix}{s.id}") for s in golden_set()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # A test asking for `sample` runs once per golden question, named by its id (test_recall[q01]).
    if "sample" in metafunc.fixturenames:
        samples = with_contexts(retrieve)
        metafunc.parametrize("sample", samples, ids=[s.id for s in samples])


@pytest.fixture(scope="session")
def samples() -> list[RagSample]:
    """The whole golden set, retrieved with the production BM25 retriever."""
    return with_contexts(retrieve)


@pytest.fixture(scope="session")
def weak_samples() -> list[RagSample]:
    """The golden set retrieved with the deliberately weakened retriever (ids prefixed ``weak-``)."""
    return with_contexts(retrieve_weak, id_prefix="weak-")
