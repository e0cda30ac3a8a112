"""A small judge request for the judge, cache and store tests (the engine builds the real ones)."""

from __future__ import annotations

from typing import Any

from pytest_ragmetrics.judge.base import JudgeRequest

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "useful": {"type": "boolean"}},
    "required": ["reason", "useful"],
    "additionalProperties": False,
}


def make_request(i: int = 0, **overrides: Any) -> JudgeRequest:
    """Request number ``i``: distinct ``i`` give distinct cache keys; ``overrides`` replace fields."""
    fields: dict[str, Any] = {
        "kind": "context_precision",
        "prompt_version": "1",
        "model": "judge-model",
        "messages": (
            {"role": "system", "content": "You judge retrieved chunks."},
            {"role": "user", "content": f"Is chunk {i} useful to answer the question?"},
        ),
        "schema_name": "chunk_verdict",
        "schema": SCHEMA,
        "inputs": {"question": "Où est Paris ?", "chunk": f"chunk {i}"},
        "label": f"test_rag[sample-{i}] chunk 1",
    }
    fields.update(overrides)
    return JudgeRequest(**fields)
