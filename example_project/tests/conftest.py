"""Fixtures: the golden set, turned into RagSamples by running the retriever under test."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest
from ragapp.retriever import retrieve, retrieve_weak

from pytest_ragmetrics import RagSample, load_samples

GOLDEN = Path(__file__).resolve().parent.parent / "golden.jsonl"


@cache
def golden_set() -> tuple[RagSample, ...]:
    """The golden questions and reference answers, without contexts (the retriever supplies those)."""
    return tuple(load_samples(GOLDEN))


def with_contexts(retriever: Callable[[str], list[str]], id_prefix: str = "") -> list[RagSample]:
    """Every golden sample with the contexts ``retriever`` returns for its question."""
    return [replace(s.with_contexts(retriever(s.question)), id=f"{id_prefix}{s.id}") for s in golden_set()]


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
