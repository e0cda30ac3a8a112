"""Context recall: the share of reference sentences, or of their claims, that the contexts support.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Sequence

from ..results import Verdict, because


def recall_score(attributed: Sequence[bool]) -> float:
    """attributed / total. A reference without sentences is an error, never NaN."""
    if not attributed:
        raise ValueError("context recall needs at least one reference sentence")
    return sum(1 for a in attributed if a) / len(attributed)


def explain_recall(verdicts: Sequence[Verdict]) -> str:
    missing = [v for v in verdicts if v.value < 1.0]
    if not missing:
        return f"all {len(verdicts)} reference sentences are supported by the contexts"
    parts = [
        f"reference sentence {v.index} {_quote(v.text)} is not supported by any context" + because(v.reason)
        for v in missing
    ]
    return "; ".join(parts)


def explain_claims(verdicts: Sequence[Verdict]) -> str:
    """Name the unsupported claims and the reference sentence each comes from."""
    missing = [v for v in verdicts if v.value < 1.0]
    if not missing:
        return f"all {len(verdicts)} reference claims are supported by the contexts"
    parts = [
        f"claim {v.index} {_quote(v.text)}"
        + (f" (of {_quote(v.extracted[0])})" if v.extracted and v.extracted[0] != v.text else "")
        + " is not supported by any context"
        + because(v.reason)
        for v in missing
    ]
    supported = len(verdicts) - len(missing)
    return f"{supported} of {len(verdicts)} reference claims are supported; " + "; ".join(parts)


def _quote(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return "'" + (text if len(text) <= limit else text[: limit - 1] + "…") + "'"
