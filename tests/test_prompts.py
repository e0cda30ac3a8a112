"""Every prompt's worked examples show both polarities: a judge shown only a "yes" leans to "yes"."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from pytest_ragmetrics import claim_judgments as C, judgments as J
from pytest_ragmetrics.kinds import KINDS

PROMPTS = {
    **{name: kind.prompt for name, kind in KINDS.items()},
    "context_precision without reference": J.PRECISION_WITHOUT_REFERENCE,
    "claim_verdicts against a text": C.VERDICTS_TEXT_PROMPT,
}


def outputs(system: str) -> list[dict[str, Any]]:
    """The answers of the prompt's worked examples."""
    return [json.loads(line) for line in re.findall(r"^output: (\{.*\})$", system, re.MULTILINE)]


def polarities(answer: dict[str, Any]) -> set[bool]:
    """Which verdicts an example answer shows: True for a positive one, False for a negative one."""
    if "useful" in answer:
        return {answer["useful"]}
    if "rating" in answer:
        return {answer["rating"] > 0}
    if "relevant_sentences" in answer:
        return {bool(answer["relevant_sentences"])}
    shown = set()
    for verdict in answer.values():
        if "verdict" in verdict:  # a claim's verdict: supported, or contradicted / not_found
            shown.add(verdict["verdict"] == "supported")
            continue
        for claim in verdict.get("claims", [verdict]):
            # A sentence's claims (decomposition): some, or none; else an attributed claim.
            shown.add(bool(claim) if isinstance(claim, str) else claim["attributed"])
        if verdict.get("claims") == []:
            shown.add(False)
    return shown


@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_every_prompt_shows_a_positive_and_a_negative_example(name):
    examples = outputs(PROMPTS[name].system)
    assert examples, f"{name}: no worked example"
    shown = set().union(*(polarities(e) for e in examples))
    assert shown == {True, False}, f"{name}: its examples only show {shown}"
