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

HERE = Path(__file__).resolve().parent.parent
LABELS = json.loads((HERE / "labels.json").read_text(encoding="utf-8"))["questions"]
GOLDEN = [json.loads(line) for line in (HERE / "golden.jsonl").read_text().splitlines() if line.strip()]
TEXTS = {d.id: d.text for d in load_corpus()}


def test_every_golden_question_is_labelled() -> None:
    assert sorted(LABELS) == sorted(g["id"] for g in GOLDEN)
    assert all(LABELS[g["id"]]["question"] == g["question"] for g in GOLDEN)


@pytest.mark.parametrize("item", GOLDEN, ids=[g["id"] for g in GOLDEN])
def test_every_article_either_retriever_returns_is_labelled(item: dict[str, str]) -> None:
    returned = set(retrieve_ids(item["question"])) | set(retrieve_weak_ids(item["question"]))
    assert returned <= set(LABELS[item["id"]]["docs"])


@pytest.mark.parametrize("item", GOLDEN, ids=[g["id"] for g in GOLDEN])
def test_reference_sentences_match_the_library_split(item: dict[str, str]) -> None:
    labelled = [s["sentence"] for s in LABELS[item["id"]]["reference_support"]]
    assert split_sentences(item["ground_truth"]) == labelled


@pytest.mark.parametrize("qid", sorted(LABELS))
def test_relevant_sentences_are_verbatim_sentences_of_the_article(qid: str) -> None:
    for doc_id, entry in LABELS[qid]["docs"].items():
        sentences = split_sentences(TEXTS[doc_id])
        assert all(s in sentences for s in entry["relevant_sentences"]), doc_id
        assert (entry["rating"] > 0) == bool(entry["relevant_sentences"]), doc_id
    for s in LABELS[qid]["reference_support"]:
        assert set(s["supported_by"]) <= set(TEXTS)
