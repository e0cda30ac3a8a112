"""A judge for the answer-metric tests, answering the fake server's requests by what they hold.

Decomposition: a sentence's claims are its parts around " and "; a sentence saying it does not know
has none. Verdicts: a claim is supported by a piece of evidence that contains it, contradicted by one
that contains it with other numbers, else not found. Relevancy: non-committal when the answer says it
does not know, else rated 2.
"""

from __future__ import annotations

import json
import re
from typing import Any


def _norm(text: str) -> str:
    return " ".join(text.lower().rstrip(".").split())


def _numbers_blanked(text: str) -> str:
    return re.sub(r"\d+", "#", _norm(text))


def decompose(sentence: str) -> list[str]:
    if "know" in sentence.lower():
        return []
    return [part.strip().rstrip(".") + "." for part in sentence.split(" and ") if part.strip()]


def verdict(claim: str, pieces: list[str]) -> tuple[str, list[int]]:
    found = [i for i, p in enumerate(pieces, start=1) if _norm(claim) in _norm(p)]
    if found:
        return "supported", found
    against = [i for i, p in enumerate(pieces, start=1) if _numbers_blanked(claim) in _numbers_blanked(p)]
    if against:
        return "contradicted", against
    return "not_found", []


def answer(payload: dict[str, Any]) -> dict[str, Any]:
    """The answer to one request's user message (its JSON document)."""
    if "sentences" in payload and "question" not in payload:
        return {f"sentence_{n}": {"claims": decompose(s)} for n, s in payload["sentences"].items()}
    if "claims" in payload:
        contexts = payload.get("contexts")
        pieces = list(contexts.values()) if contexts is not None else [payload["text"]]
        out = {}
        for n, claim in payload["claims"].items():
            decided, where = verdict(claim, pieces)
            entry: dict[str, Any] = {"reason": f"judged {decided}", "verdict": decided}
            if contexts is not None:
                entry["chunks"] = where
            out[f"claim_{n}"] = entry
        return out
    if "answer" in payload and "chunk" not in payload:
        evasive = "know" in payload["answer"].lower()
        return {
            "reason": "evasive" if evasive else "on topic",
            "committal": not evasive,
            "rating": 0 if evasive else 2,
        }
    raise AssertionError(f"not an answer-metric request: {payload}")


def responder(body: dict[str, Any]) -> dict[str, Any]:
    """A :class:`~pytest_ragmetrics.testing.FakeJudgeServer` responder."""
    return answer(json.loads(body["messages"][-1]["content"]))


def script(request: Any) -> dict[str, Any]:
    """The same judge for a :class:`~pytest_ragmetrics.ScriptedJudge`."""
    return answer(json.loads(request.messages[-1]["content"]))
