"""Consistency of the answers' hand labels (answer_labels.jsonl, and the claim verdicts of labels.jsonl)
with the generator, the golden set,
the retriever and the library's sentence splitter.

No judge involved. If the generator, the retriever or the splitter changes what is judged, these fail
before a re-recording with ``-p hand_labels`` would, naming what has no label.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ragapp.generator import generate, generate_weak
from ragapp.retriever import retrieve_docs

from pytest_ragmetrics import split_sentences

HERE = Path(__file__).resolve().parent.parent
# The answers' labels, and the claim verdicts against the contexts that the labelled set holds.
ROWS = [json.loads(line) for line in (HERE / "answer_labels.jsonl").read_text().splitlines() if line.strip()]
ROWS += [
    {**row, "chunks": row["metadata"]["chunks"]}
    for row in map(json.loads, (HERE / "labels.jsonl").read_text().splitlines())
    if row["kind"] == "claim_verdicts"
]
GOLDEN = [json.loads(line) for line in (HERE / "golden.jsonl").read_text().splitlines() if line.strip()]
CLAIMS = {row["sentence"]: row["claims"] for row in ROWS if row["kind"] == "claims"}
VERDICTS = ("supported", "contradicted", "not_found")


def claims_of(text: str) -> list[str]:
    return [claim for sentence in split_sentences(text) for claim in CLAIMS[sentence]]


def verdicts_against(key: str, value: object) -> dict[str, str]:
    """Claim -> verdict of every claim_verdicts row whose evidence ``key`` is ``value``."""
    out: dict[str, str] = {}
    for row in ROWS:
        if row["kind"] == "claim_verdicts" and row.get(key) == value:
            out.update(zip(row["claims"], row["verdicts"], strict=True))
    return out


@pytest.mark.parametrize("golden", GOLDEN, ids=[g["id"] for g in GOLDEN])
def test_every_claim_the_judge_can_be_asked_about_is_labelled(golden: dict[str, str]) -> None:
    docs = retrieve_docs(golden["question"])
    contexts = [d.text for d in docs]
    answers = [generator(golden["question"], docs) for generator in (generate, generate_weak)]
    for answer in answers:
        missing = [s for s in split_sentences(answer) if s not in CLAIMS]
        assert not missing, f"sentences without claims: {missing}"
        assert set(claims_of(answer)) <= set(verdicts_against("contexts", contexts))
        assert set(claims_of(golden["ground_truth"])) == set(verdicts_against("text", answer))
    assert set(claims_of(answers[1])) == set(verdicts_against("text", golden["ground_truth"]))
    rated = [
        r["answer"] for r in ROWS if r["kind"] == "answer_relevancy" and r["question"] == golden["question"]
    ]
    assert sorted(rated) == sorted(answers)


def test_verdicts_name_the_chunks_they_rest_on() -> None:
    """A supported or contradicted claim names the article it rests on; a claim not found names none."""
    for row in ROWS:
        if row["kind"] != "claim_verdicts":
            continue
        assert set(row["verdicts"]) <= set(VERDICTS), row["id"]
        assert len(row["reasons"]) == len(row["claims"]) == len(row["verdicts"]), row["id"]
        if "contexts" not in row:
            continue  # against a text: there are no chunks to name
        for verdict, chunks in zip(row["verdicts"], row["chunks"], strict=True):
            assert bool(chunks) == (verdict != "not_found"), row["id"]
            assert all(1 <= n <= len(row["contexts"]) for n in chunks), row["id"]
