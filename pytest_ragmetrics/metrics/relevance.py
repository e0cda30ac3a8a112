"""Context relevance: sentence share (RAGAS), binary per chunk (Haystack docs), graded 0–2 (NVIDIA-style),
and ``any``, the question-level "is any chunk relevant" score read from the same per-chunk judgments.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..results import Verdict, because


def sentence_score(selected: Sequence[int], totals: Sequence[int]) -> float:
    """Relevant sentences over all sentences of all chunks; 0.0 when the chunks have no sentences."""
    total = sum(totals)
    return sum(selected) / total if total else 0.0


def binary_score(relevant: Sequence[bool]) -> float:
    """Share of chunks with at least one relevant sentence; 0.0 without chunks."""
    return sum(1 for r in relevant if r) / len(relevant) if relevant else 0.0


def any_score(relevant: Sequence[bool]) -> float:
    """1.0 when at least one chunk has a relevant sentence, else 0.0 (also without chunks)."""
    return 1.0 if any(relevant) else 0.0


def graded_score(ratings: Sequence[float]) -> float:
    """Mean of rating / 2 over chunks (ratings 0, 1, 2, or a mean of those); 0.0 without chunks."""
    return math.fsum(r / 2 for r in ratings) / len(ratings) if ratings else 0.0


def explain_sentence(verdicts: Sequence[Verdict], selected: int, total: int) -> str:
    head = f"{selected} of {total} context sentences are needed to answer the question"
    empty = [v for v in verdicts if v.value == 0.0]
    if empty:
        head += "; " + "; ".join(
            f"chunk {v.index} (rank {v.rank}) has no needed sentence{because(v.reason)}" for v in empty
        )
    return head


def explain_binary(verdicts: Sequence[Verdict]) -> str:
    empty = [v for v in verdicts if v.value < 1.0]
    if not empty:
        return f"all {len(verdicts)} chunks contain a sentence needed to answer the question"
    return "; ".join(
        f"chunk {v.index} (rank {v.rank}) has no sentence needed to answer the question{because(v.reason)}"
        for v in empty
    )


def explain_any(verdicts: Sequence[Verdict]) -> str:
    relevant = [v for v in verdicts if v.value >= 1.0]
    if relevant:
        ranks = ", ".join(str(v.rank) for v in relevant)
        return (
            f"{len(relevant)} of {len(verdicts)} chunks contain a sentence needed to answer (ranks {ranks})"
        )
    return f"none of the {len(verdicts)} chunks contains a sentence needed to answer the question"


_RATING_WORDS = {0: "not relevant", 1: "partially relevant", 2: "fully relevant"}


def rating_label(rating: float, unanimous: bool = True) -> str:
    """``2/2 (fully relevant)``, or ``1.5/2 (mean over judges)``; a whole mean of ratings that
    disagree (2 and 0) is a mean too, not a rating none of the judges gave."""
    rounded = round(rating)
    word = _RATING_WORDS.get(rounded, "")
    shown = f"{rating:g}" if rating == rounded else f"{rating:.2f}"
    return f"{shown}/2 ({word})" if rating == rounded and unanimous else f"{shown}/2 (mean over judges)"


def explain_graded(verdicts: Sequence[Verdict]) -> str:
    low = [v for v in verdicts if v.value < 1.0]
    if not low:
        return f"all {len(verdicts)} chunks are rated fully relevant"
    return "; ".join(f"chunk {v.index} (rank {v.rank}) rated {v.label}{because(v.reason)}" for v in low)
