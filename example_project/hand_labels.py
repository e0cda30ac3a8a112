"""A judge that answers from the hand labels in labels.jsonl (judge model name ``hand-labelled``).

No LLM was used to record the judgments in judgments/: a person labelled every (question, article)
pair that either retriever returns, and every reference sentence against the articles retrieved, in
labels.jsonl. That file is a labelled set in the library's format (it is also the judge check's
calibration set, see pyproject.toml), and this plugin turns its labels into judge answers. Load it
only when re-recording the store by hand:

    pytest --rag-cache=refresh -p hand_labels

The answers were labelled the same way: each answer claim's verdict against the articles retrieved
(with the article that supports or contradicts it) in labels.jsonl, and in answer_labels.jsonl the
claims a person found in every sentence of every answer and reference, each claim's verdict against
the reference or the answer, and whether each answer addresses its question.

It never invents a verdict: a question, article, reference, sentence or claim without a label raises
``HandLabelError`` naming the text, and the run fails instead of recording a guess.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from pytest_ragmetrics import JudgeRequest, ScriptedJudge, hookimpl
from pytest_ragmetrics.calibration.labels import LabelledItem, load_labels
from pytest_ragmetrics.judgments import canonical_contexts
from pytest_ragmetrics.text import normalize_text

HERE = Path(__file__).resolve().parent
LABELS = HERE / "labels.jsonl"
ANSWER_LABELS = HERE / "answer_labels.jsonl"
MODEL = "hand-labelled"


class HandLabelError(LookupError):
    """Something the judge was asked about has no hand label."""


def squash(text: str) -> str:
    """Normalized text with runs of whitespace collapsed, for matching a chunk to its sentences."""
    return re.sub(r"\s+", " ", normalize_text(text)).strip()


def _short(text: str, limit: int = 90) -> str:
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


class Labels:
    """labels.jsonl indexed by what each kind of judge request holds (normalized as the library does)."""

    def __init__(self, items: list[LabelledItem]) -> None:
        self.by_kind: dict[str, dict[Any, LabelledItem]] = {}
        for item in items:
            self.by_kind.setdefault(item.kind, {})[self._key(item)] = item

    @staticmethod
    def _key(item: LabelledItem) -> Any:
        question = normalize_text(item.question)
        if item.kind == "context_precision":
            return question, normalize_text(item.reference or ""), normalize_text(item.chunk or "")
        if item.kind == "context_recall":
            # Recall requests carry their contexts in canonical order: their order does not matter.
            return question, tuple(canonical_contexts([normalize_text(c) for c in item.contexts]))
        if item.kind == "context_relevance_sentences":
            return question, squash(item.chunk or "")
        return question, normalize_text(item.chunk or "")

    def find(self, kind: str, key: Any, what: str) -> LabelledItem:
        item = self.by_kind.get(kind, {}).get(key)
        if item is None:
            raise HandLabelError(f"no {kind} item in labels.jsonl for {what}")
        return item


@lru_cache(maxsize=1)
def labels() -> Labels:
    return Labels(load_labels(LABELS))


class AnswerLabels:
    """answer_labels.jsonl indexed by what each kind of answer-side request holds (squashed text)."""

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.claims: dict[str, list[str]] = {}
        # (claim, evidence) -> (verdict, reason, the texts of the chunks that support or contradict it)
        self.verdicts: dict[tuple[str, Any], tuple[str, str, tuple[str, ...]]] = {}
        self.relevancy: dict[tuple[str, str], dict[str, Any]] = {}
        for row in rows:
            if row["kind"] == "claims":
                self.claims[squash(row["sentence"])] = row["claims"]
            elif row["kind"] == "answer_relevancy":
                self.relevancy[squash(row["question"]), squash(row["answer"])] = row
            else:
                contexts = row.get("contexts")
                evidence = self.evidence(contexts, row.get("text"))
                chunks = row.get("chunks") or [[] for _ in row["claims"]]
                for claim, verdict, reason, numbers in zip(
                    row["claims"], row["verdicts"], row["reasons"], chunks, strict=True
                ):
                    texts = tuple(squash(contexts[n - 1]) for n in numbers) if contexts else ()
                    self.verdicts[squash(claim), evidence] = (verdict, reason, texts)

    @staticmethod
    def evidence(contexts: list[str] | None, text: str | None) -> Any:
        """The key of what claims are checked against: the contexts as a set, or one text."""
        return frozenset(squash(c) for c in contexts) if contexts is not None else squash(text or "")


@lru_cache(maxsize=1)
def answer_labels() -> AnswerLabels:
    """answer_labels.jsonl, and the claim verdicts against the contexts that labels.jsonl holds (in the
    labelled-set format, so the judge check measures the judge on them too; their chunks in metadata)."""
    with ANSWER_LABELS.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    for item in load_labels(LABELS):
        if item.kind == "claim_verdicts":
            rows.append(
                {
                    "kind": item.kind,
                    "contexts": list(item.contexts),
                    "claims": list(item.claims or ()),
                    "verdicts": list(item.label),
                    "reasons": list(item.reasons),
                    "chunks": item.metadata["chunks"],
                }
            )
    return AnswerLabels(rows)


def answer_side(request: JudgeRequest) -> dict[str, Any]:
    """Answer a request about an answer: its claims, their verdicts, or its relevancy."""
    lab = answer_labels()
    inputs = request.inputs
    if request.kind == "claim_decomposition":
        out: dict[str, Any] = {}
        for i, sentence in enumerate(inputs["sentences"], start=inputs.get("first_sentence", 1)):
            claims = lab.claims.get(squash(sentence))
            if claims is None:
                raise HandLabelError(f"no claims in answer_labels.jsonl for the sentence {_short(sentence)}")
            out[f"sentence_{i}"] = {"claims": list(claims)}
        return out
    if request.kind == "claim_verdicts":
        contexts = inputs.get("contexts")
        evidence = AnswerLabels.evidence(contexts, inputs.get("text"))
        against = (
            f"these {len(contexts)} contexts"
            if contexts is not None
            else f"the text {_short(inputs['text'])}"
        )
        out = {}
        for i, claim in enumerate(inputs["claims"], start=inputs.get("first_claim", 1)):
            found = lab.verdicts.get((squash(claim), evidence))
            if found is None:
                raise HandLabelError(
                    f"no verdict in answer_labels.jsonl for the claim {_short(claim)} against {against}"
                )
            verdict, reason, texts = found
            answer: dict[str, Any] = {"reason": reason, "verdict": verdict}
            if contexts is not None:
                answer["chunks"] = [n for n, c in enumerate(contexts, start=1) if squash(c) in texts]
            out[f"claim_{i}"] = answer
        return out
    row = lab.relevancy.get((squash(inputs["question"]), squash(inputs["answer"])))
    if row is None:
        raise HandLabelError(
            f"no answer_relevancy label in answer_labels.jsonl for question {_short(inputs['question'])} "
            f"and answer {_short(inputs['answer'])}"
        )
    return {"reason": row["reason"], "committal": row["committal"], "rating": row["rating"]}


def answer(request: JudgeRequest) -> dict[str, Any]:
    """Answer one judge request from labels.jsonl or answer_labels.jsonl, in its answer schema."""
    if request.kind in ("claim_decomposition", "claim_verdicts", "answer_relevancy"):
        return answer_side(request)
    lab = labels()
    inputs = request.inputs
    kind = request.kind
    question = inputs["question"]
    what = f"question {_short(question)}"

    if kind == "context_precision":
        key = (question, inputs["reference"], inputs["chunk"])
        item = lab.find(kind, key, f"{what}, chunk {_short(inputs['chunk'])} and this reference")
        return {"reason": item.reason, "useful": item.label}

    if kind == "context_relevance_graded":
        item = lab.find(kind, (question, inputs["chunk"]), f"{what} and chunk {_short(inputs['chunk'])}")
        return {"reason": item.reason, "rating": item.label}

    if kind == "context_relevance_sentences":
        joined = squash(" ".join(inputs["sentences"]))
        item = lab.find(kind, (question, joined), f"{what} and chunk {_short(joined)}")
        count = len(inputs["sentences"])
        if any(n > count for n in item.label):
            raise HandLabelError(
                f"{item.where}: labelled sentence numbers {list(item.label)}, but the library split the "
                f"chunk into {count} sentences; relabel relevant_sentences to match the split"
            )
        return {"reason": item.reason, "relevant_sentences": list(item.label)}

    if kind in ("context_recall", "context_recall_claims"):
        contexts = tuple(inputs["contexts"])
        item = lab.find(
            "context_recall", (question, contexts), f"{what} and these {len(contexts)} retrieved contexts"
        )
        given = inputs["reference_sentences"]
        if len(given) != len(item.label) or squash(" ".join(given)) != squash(item.reference or ""):
            raise HandLabelError(
                f"{item.where}: the library split the reference into {given}, which does not match the "
                f"labelled reference and its {len(item.label)} attributed entries; relabel it"
            )
        out: dict[str, Any] = {}
        for i, (ok, reason) in enumerate(zip(item.label, item.reasons, strict=True), start=1):
            if kind == "context_recall":
                out[f"sentence_{i}"] = {"reason": reason, "attributed": ok}
            else:
                # Labelled per sentence: each reference sentence is labelled as one claim.
                claim = {"claim": given[i - 1], "reason": reason, "attributed": ok}
                out[f"sentence_{i}"] = {"claims": [claim]}
        return out

    raise HandLabelError(f"no hand labels for judge requests of kind {kind!r}")


@hookimpl
def pytest_ragmetrics_make_judge(settings: Any) -> ScriptedJudge:
    return ScriptedJudge(answer, model=MODEL)
