"""A judge that answers from the hand labels in labels.json (judge model name ``hand-labelled``).

No LLM was used to record the judgments in judgments/: a person labelled every (question, article)
pair in labels.json, and this plugin turns those labels into judge answers. Load it only when
re-recording the store by hand:

    pytest --rag-cache=refresh -p hand_labels

It never invents a verdict: a question, article or sentence it cannot find in the labels raises
``HandLabelError`` naming the text, and the run fails instead of recording a guess.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_ragmetrics import JudgeRequest, ScriptedJudge, hookimpl

HERE = Path(__file__).resolve().parent
MODEL = "hand-labelled"


class HandLabelError(LookupError):
    """Something the judge was asked about has no hand label."""


def normalize(text: str) -> str:
    """The library's input normalization: NFC, \\r\\n -> \\n, trailing whitespace stripped."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


def squash(text: str) -> str:
    """Normalized text with runs of whitespace collapsed, for matching sentences."""
    return re.sub(r"\s+", " ", normalize(text)).strip()


def _short(text: str, limit: int = 90) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def _jsonl(name: str) -> list[dict[str, Any]]:
    with open(HERE / name, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


class Labels:
    def __init__(self) -> None:
        self.golden = {g["id"]: g for g in _jsonl("golden.jsonl")}
        self.docs = {d["id"]: d for d in _jsonl("corpus.jsonl")}
        self.qid_by_question = {normalize(g["question"]): qid for qid, g in self.golden.items()}
        self.doc_by_text = {normalize(d["text"]): did for did, d in self.docs.items()}
        self.labels: dict[str, Any] = json.loads((HERE / "labels.json").read_text(encoding="utf-8"))[
            "questions"
        ]

    def question_id(self, question: str) -> str:
        qid = self.qid_by_question.get(normalize(question))
        if qid is None:
            raise HandLabelError(
                f"question not in golden.jsonl, so it has no hand labels: {_short(question)}"
            )
        if qid not in self.labels:
            raise HandLabelError(f"question {qid} has no entry in labels.json: {_short(question)}")
        return qid

    def doc_id(self, chunk: str) -> str:
        did = self.doc_by_text.get(normalize(chunk))
        if did is None:
            raise HandLabelError(
                f"chunk is not an article of corpus.jsonl, so it has no hand label: {_short(chunk)}"
            )
        return did

    def doc_id_of_sentences(self, sentences: list[str]) -> str:
        """The article that the library split into ``sentences`` (compared with whitespace collapsed)."""
        joined = squash(" ".join(sentences))
        for did, doc in self.docs.items():
            if squash(doc["text"]) == joined:
                return did
        raise HandLabelError(f"sentences do not make up an article of corpus.jsonl: {_short(joined)}")

    def entry(self, qid: str, did: str) -> dict[str, Any]:
        """The labels of article ``did`` for question ``qid``; unlisted articles are labelled irrelevant."""
        entry = self.labels[qid]["docs"].get(did)
        if entry is not None:
            return entry
        title = self.docs[did]["title"]
        return {
            "useful": False,
            "rating": 0,
            "relevant_sentences": [],
            "reason": f"The article '{title}' does not address this question (not labelled: irrelevant).",
        }


def _reason(entry: Mapping[str, Any], kind: str) -> str:
    return str(entry.get(f"{kind}_reason") or entry["reason"])


@lru_cache(maxsize=1)
def labels() -> Labels:
    return Labels()


def answer(request: JudgeRequest) -> dict[str, Any]:
    """Answer one judge request from labels.json, in the request's answer schema."""
    lab = labels()
    inputs = request.inputs
    kind = request.kind
    qid = lab.question_id(inputs["question"])

    if kind == "context_precision":
        reference = normalize(inputs["reference"])
        if reference != normalize(lab.golden[qid]["ground_truth"]):
            raise HandLabelError(
                f"{qid}: usefulness was labelled against the ground truth in golden.jsonl, but the request's "
                f"reference ({inputs.get('reference_kind')}) differs: {_short(reference)}"
            )
        entry = lab.entry(qid, lab.doc_id(inputs["chunk"]))
        return {"reason": _reason(entry, "useful"), "useful": bool(entry["useful"])}

    if kind == "context_relevance_graded":
        entry = lab.entry(qid, lab.doc_id(inputs["chunk"]))
        return {"reason": _reason(entry, "rating"), "rating": int(entry["rating"])}

    if kind == "context_relevance_sentences":
        sentences = [squash(s) for s in inputs["sentences"]]
        did = lab.doc_id_of_sentences(inputs["sentences"])
        entry = lab.entry(qid, did)
        numbers = []
        for wanted in entry["relevant_sentences"]:
            matches = [i for i, s in enumerate(sentences, start=1) if s == squash(wanted)]
            if len(matches) != 1:
                raise HandLabelError(
                    f"{qid}/{did}: labelled relevant sentence {_short(wanted)} is not exactly one of the "
                    f"sentences the library split the article into: {sentences}"
                )
            numbers.append(matches[0])
        return {"reason": _reason(entry, "sentences"), "relevant_sentences": sorted(numbers)}

    if kind in ("context_recall", "context_recall_claims"):
        retrieved = [lab.doc_id(c) for c in inputs["contexts"]]
        support = lab.labels[qid]["reference_support"]
        given = [squash(s) for s in inputs["reference_sentences"]]
        labelled = [squash(s["sentence"]) for s in support]
        if given != labelled:
            raise HandLabelError(
                f"{qid}: the library split the reference into {given}, but labels.json labels the sentences "
                f"{labelled}; relabel reference_support to match the split"
            )
        out: dict[str, Any] = {}
        for i, s in enumerate(support, start=1):
            hits = [d for d in s["supported_by"] if d in retrieved]
            if hits:
                titles = ", ".join(f"'{lab.docs[d]['title']}'" for d in hits)
                reason = f"Stated in the retrieved article {titles}."
            else:
                elsewhere = ", ".join(f"'{lab.docs[d]['title']}'" for d in s["supported_by"])
                reason = "None of the retrieved contexts states this" + (
                    f"; only the article {elsewhere}, which was not retrieved, does." if elsewhere else "."
                )
            if kind == "context_recall":
                out[f"sentence_{i}"] = {"reason": reason, "attributed": bool(hits)}
            else:
                # Labelled per sentence: each reference sentence is labelled as one claim.
                claim = {"claim": s["sentence"], "reason": reason, "attributed": bool(hits)}
                out[f"sentence_{i}"] = {"claims": [claim]}
        return out

    raise HandLabelError(f"no hand labels for judge requests of kind {kind!r} (question {qid})")


@hookimpl
def pytest_ragmetrics_make_judge(settings: Any) -> ScriptedJudge:
    return ScriptedJudge(answer, model=MODEL)
