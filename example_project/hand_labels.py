"""A judge that answers from the hand labels in labels.jsonl (judge model name ``hand-labelled``).

No LLM was used to record the judgments in judgments/: a person labelled every (question, article)
pair that either retriever returns, and every reference sentence against the articles retrieved, in
labels.jsonl. That file is a labelled set in the library's format (it is also the judge check's
calibration set, see pyproject.toml), and this plugin turns its labels into judge answers. Load it
only when re-recording the store by hand:

    pytest --rag-cache=refresh -p hand_labels

It never invents a verdict: a question, article or reference without a label raises
``HandLabelError`` naming the text, and the run fails instead of recording a guess.
"""

from __future__ import annotations

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


def answer(request: JudgeRequest) -> dict[str, Any]:
    """Answer one judge request from labels.jsonl, in the request's answer schema."""
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
