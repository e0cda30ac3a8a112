"""The table of judgment kinds: every kind of judgment the package asks for, by name, in one place.

Each entry (a :class:`~pytest_ragmetrics.judgments.JudgmentKind`) is written beside its prompts, and
holds everything particular to its kind: how it is asked, how its answers read as verdicts, the metrics
that read it, and how a labelled item, a negative control, drift and ``store rejudge`` judge it. The
metrics, the judge check, the negative controls, drift and rejudge find a kind here and never switch
on its name, so a new kind is one new entry in :data:`KINDS`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .claim_judgments import ANSWER_KINDS
from .judge.base import JudgeRequest
from .judgments import RETRIEVAL_KINDS, JudgmentKind

__all__ = ["KINDS", "answer_classes", "control_kinds", "kind_of", "labelled_kinds"]

#: Every kind of judgment, by name, in report order. Read when needed, never copied at import.
KINDS: dict[str, JudgmentKind] = {**RETRIEVAL_KINDS, **ANSWER_KINDS}


def kind_of(name: str) -> JudgmentKind | None:
    """The kind ``name`` denotes: a kind's name, or a metric name with its method
    (``context_relevance[graded]``); spaces are ignored. None for anything else."""
    name = name.replace(" ", "")
    for kind in KINDS.values():
        if name == kind.name or name in kind.aliases:
            return kind
    return None


def labelled_kinds() -> list[JudgmentKind]:
    """The kinds a labelled set can hold, in report order."""
    return [kind for kind in KINDS.values() if kind.labels is not None]


def control_kinds() -> list[JudgmentKind]:
    """The kinds negative controls are drawn for, in report order."""
    return [kind for kind in KINDS.values() if kind.control is not None]


def answer_classes(request: JudgeRequest, choices: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """What one judgment decided, as classes that can be counted: ``yes`` / ``no`` (precision; recall,
    one per reference sentence), the rating ``0`` / ``1`` / ``2`` (graded), ``none`` / ``some`` / ``all``
    of the sentences (sentence selection); see :attr:`~pytest_ragmetrics.judgments.JudgmentKind.decision`."""
    kind = KINDS.get(request.kind)
    return kind.decision(request, choices) if kind is not None else ()
