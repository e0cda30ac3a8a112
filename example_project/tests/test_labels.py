"""Consistency of the hand labels with the corpus, the golden set and the library's sentence splitter.

No judge involved. If the splitter changes how an article or a reference is split, these fail before
a re-recording with ``-p hand_labels`` would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ragapp.retriever import load_corpus, retrieve_ids, retrieve_weak_ids

from pytest_ragmetrics import split_sentences
from pytest_ragmetrics.calibration.labels import load_labels

HERE = Path(__file__).resolve().parent.parent
ITEMS = load_labels(HERE / "labels.jsonl")
GOLDEN = [json.loads(line) for line in (HERE / "golden.jsonl").read_text().splitlines() if line.strip()]
TEXTS = {d.id: d.text for d in load_corpus()}
CHUNK_KINDS = ("context_precision", "context_relevance_graded", "context_relevance_sentences")


def labelled(kind: str) -> dict[tuple[str, object], object]:
    # Recall judges the contexts taken together: their order does not matter.
    return {
        (i.question, frozenset(i.contexts) if kind == "context_recall" else i.chunk): i.label
        for i in ITEMS
        if i.kind == kind
    }


def test_every_item_asks_a_golden_question_about_corpus_articles() -> None:
    questions = {g["question"]: g for g in GOLDEN}
    assert {i.question for i in ITEMS} == set(questions)
    articles = set(TEXTS.values())
    for item in ITEMS:
        assert {item.chunk} <= articles if item.chunk else set(item.contexts) <= articles, item.where
        if item.reference is not None:
            assert item.reference == questions[item.question]["ground_truth"], item.where


@pytest.mark.parametrize("item", GOLDEN, ids=[g["id"] for g in GOLDEN])
def test_every_article_either_retriever_returns_is_labelled(item: dict[str, str]) -> None:
    returned = set(retrieve_ids(item["question"])) | set(retrieve_weak_ids(item["question"]))
    for kind in CHUNK_KINDS:
        assert {(item["question"], TEXTS[d]) for d in returned} <= set(labelled(kind)), kind


@pytest.mark.parametrize("item", GOLDEN, ids=[g["id"] for g in GOLDEN])
def test_recall_is_labelled_for_what_each_retriever_returns(item: dict[str, str]) -> None:
    recall = labelled("context_recall")
    sentences = split_sentences(item["ground_truth"])
    for retrieve in (retrieve_ids, retrieve_weak_ids):
        contexts = frozenset(TEXTS[d] for d in retrieve(item["question"]))
        assert len(recall[(item["question"], contexts)]) == len(sentences)  # type: ignore[arg-type]


def test_sentence_numbers_fit_the_library_split_and_agree_with_the_ratings() -> None:
    ratings = labelled("context_relevance_graded")
    for item in ITEMS:
        if item.kind == "context_relevance_sentences":
            assert item.chunk is not None
            assert max(item.label, default=0) <= len(split_sentences(item.chunk)), item.where
            assert bool(item.label) == (ratings[(item.question, item.chunk)] > 0), item.where
