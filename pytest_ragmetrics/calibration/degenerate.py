"""Noticing a judge that does not discriminate, without labels: nearly every answer of a kind alike.

A judge that calls every chunk useful, or rates every chunk 2, makes every threshold pass. Over enough
judgments of one kind (:data:`MIN_JUDGMENTS` answers), when one answer makes up at least
:data:`MAX_SHARE` of them, the report warns. Selecting *some* of a chunk's sentences is never
suspicious in itself; selecting none, or all, of every chunk's sentences is.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from .. import kinds as K

__all__ = ["MAX_SHARE", "MIN_JUDGMENTS", "answer_tallies", "degenerate_kinds", "tally_warnings"]

#: Answers of one kind needed before the share of one answer means anything.
MIN_JUDGMENTS = 20
#: Share of identical answers from which the judge may not be discriminating.
MAX_SHARE = 0.95


def answer_tallies(answers: Iterable[tuple[str, Iterable[str]]]) -> dict[str, dict[str, int]]:
    """Per judgment kind, how many verdicts gave each answer, both in name order (a kind whose
    judgments decide no verdict, as a claim decomposition, is left out): what a report
    records (``summary.judge_answers``), and what ``report merge`` adds up over the shards.

    ``answers`` holds one ``(kind, classes)`` per distinct judgment (see
    :func:`~pytest_ragmetrics.judgments.answer_classes`).
    """
    decided: dict[str, list[str]] = {}
    for kind, classes in answers:  # one judgment each: gathered per kind, then counted at once
        each = decided.get(kind)
        if each is None:
            each = decided[kind] = []
        each.extend(classes)
    return {kind: dict(sorted(Counter(decided[kind]).items())) for kind in sorted(decided) if decided[kind]}


def tally_warnings(
    tallies: Mapping[str, Mapping[str, int]],
    *,
    min_judgments: int = MIN_JUDGMENTS,
    max_share: float = MAX_SHARE,
) -> list[dict[str, Any]]:
    """Warnings for the judgment kinds of ``tallies`` (see :func:`answer_tallies`) whose answers are
    nearly all the same: per suspicious kind in name order, ``kind``, ``answer``, ``count``,
    ``total``, ``share`` and a ``message``."""
    warnings = []
    for kind in sorted(tallies):
        counts = tallies[kind]
        total = sum(counts.values())
        if total < min_judgments:
            continue
        answer, count = max(counts.items(), key=lambda item: item[1])
        share = count / total
        if share < max_share or answer == "some":
            continue
        entry = K.KINDS.get(kind)
        what = f"{entry.decides if entry is not None else 'answer'} {answer}"
        warnings.append(
            {
                "kind": kind,
                "answer": answer,
                "count": count,
                "total": total,
                "share": share,
                "message": f"the judge answered '{what}' to {count} of {total} {kind} verdicts "
                f"({share:.0%}): it may not be discriminating; check it against labelled verdicts "
                "(--rag-judge-check) or with controls (--rag-judge-controls)",
            }
        )
    return warnings


def degenerate_kinds(
    answers: Iterable[tuple[str, Iterable[str]]],
    *,
    min_judgments: int = MIN_JUDGMENTS,
    max_share: float = MAX_SHARE,
) -> list[dict[str, Any]]:
    """Warnings for the judgment kinds whose answers are nearly all the same (see
    :func:`tally_warnings`); ``answers`` as :func:`answer_tallies` takes them."""
    return tally_warnings(answer_tallies(answers), min_judgments=min_judgments, max_share=max_share)
