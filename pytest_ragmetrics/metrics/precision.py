"""Context precision: rank-aware average precision over per-chunk usefulness verdicts.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..results import Verdict, because


def average_precision(useful: Sequence[bool]) -> float:
    """Σ_k precision@k · v_k / (number of useful chunks); 0.0 when no chunk is useful.

    Computed exactly (a sum of fractions kept as two integers: the float of the exact quotient, as
    :class:`fractions.Fraction` gives it), so a perfect ranking is exactly 1.0 (no epsilon in the
    denominator). ``[0, 1]`` gives 0.5: the seed document's worked example says 0.25, which
    contradicts its own formula.
    """
    hits = 0
    numerator, denominator = 0, 1  # the sum so far, numerator / denominator in lowest terms
    for k, is_useful in enumerate(useful, start=1):
        if is_useful:
            hits += 1
            numerator, denominator = numerator * k + hits * denominator, denominator * k
            common = math.gcd(numerator, denominator)
            numerator, denominator = numerator // common, denominator // common
    # int / int is correctly rounded: the same float as float(Fraction(numerator, denominator * hits)).
    return numerator / (denominator * hits) if hits else 0.0


def explain_precision(verdicts: Sequence[Verdict]) -> str:
    """Name the non-useful chunks ranked above useful ones, or say why the score is 0 or 1."""
    useful_ranks = [v.rank for v in verdicts if v.value >= 1.0]
    n = len(verdicts)
    if not useful_ranks:
        worst = "; ".join(
            f"chunk {v.index} (rank {v.rank}){because(v.reason)}" for v in verdicts[:3] if v.reason
        )
        return f"none of the {n} chunks is useful for the reference" + (f" ({worst})" if worst else "")
    last_useful = max(r for r in useful_ranks if r is not None)
    misranked = [v for v in verdicts if v.value < 1.0 and v.rank is not None and v.rank < last_useful]
    if not misranked:
        return f"all {len(useful_ranks)} useful chunks are ranked before any chunk that is not useful"
    parts = [
        f"chunk {v.index} (rank {v.rank}) is not useful for the reference" + because(v.reason)
        for v in misranked
    ]
    first_useful = min(r for r in useful_ranks if r is not None)
    tail = (
        f"the first useful chunk is at rank {first_useful}"
        if first_useful > 1
        else f"useful chunks are at ranks {', '.join(str(r) for r in useful_ranks)}"
    )
    return "; ".join(parts) + f"; {tail}"
