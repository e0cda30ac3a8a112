"""Agreement between a judge and labels: pure functions over two equal-length lists of answers.

Plain Python, no numpy: these run inside a test session. Every figure that can be undefined (a kappa
when labels and verdicts all fall in one class, an F1 when nobody said "yes") is ``None``, never NaN.

* Cohen's kappa: (observed - expected agreement) / (1 - expected), the chance agreement taken from
  each rater's own class shares (Cohen 1960). With ``weights="linear"`` or ``"quadratic"`` it is the
  weighted kappa for ordered classes (Cohen 1968): a disagreement between 0 and 2 costs more than one
  between 0 and 1, by |i - j| or (i - j)² over the class positions. Same definition as scikit-learn's
  ``cohen_kappa_score``.
* F1 of the positive class: 2·TP / (2·TP + FP + FN), the labels being the truth.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal, TypeVar

__all__ = ["accuracy", "cohen_kappa", "confusion_matrix", "f1_score"]

T = TypeVar("T", bound=Hashable)
Weights = Literal["linear", "quadratic"]


def _check(labels: Sequence[object], verdicts: Sequence[object]) -> None:
    if len(labels) != len(verdicts):
        raise ValueError(f"{len(labels)} labels but {len(verdicts)} verdicts; they must pair up")


def confusion_matrix(labels: Sequence[T], verdicts: Sequence[T], classes: Sequence[T]) -> list[list[int]]:
    """Counts ``m[i][j]`` of items labelled ``classes[i]`` that the judge answered ``classes[j]``."""
    _check(labels, verdicts)
    position = {c: i for i, c in enumerate(classes)}
    if len(position) != len(classes):
        raise ValueError(f"classes must be distinct, got {list(classes)}")
    matrix = [[0] * len(classes) for _ in classes]
    for label, verdict in zip(labels, verdicts, strict=True):
        for value in (label, verdict):
            if value not in position:
                raise ValueError(f"{value!r} is not one of the classes {list(classes)}")
        matrix[position[label]][position[verdict]] += 1
    return matrix


def accuracy(labels: Sequence[object], verdicts: Sequence[object]) -> float | None:
    """Share of items where the judge gave the label; ``None`` for no items."""
    _check(labels, verdicts)
    if not labels:
        return None
    return sum(a == b for a, b in zip(labels, verdicts, strict=True)) / len(labels)


def cohen_kappa(
    labels: Sequence[T], verdicts: Sequence[T], classes: Sequence[T], weights: Weights | None = None
) -> float | None:
    """Cohen's kappa, or the linearly / quadratically weighted kappa over the ordered ``classes``.

    ``None`` when it is undefined: no items, or no disagreement was possible by chance (both the
    labels and the verdicts all fall in one class, so 1 - expected agreement is 0).
    """
    matrix = confusion_matrix(labels, verdicts, classes)
    n = len(labels)
    if n == 0:
        return None
    k = len(classes)
    rows = [sum(matrix[i]) for i in range(k)]
    cols = [sum(matrix[i][j] for i in range(k)) for j in range(k)]

    def weight(i: int, j: int) -> float:
        if weights is None:
            return 0.0 if i == j else 1.0
        if weights == "linear":
            return float(abs(i - j))
        if weights == "quadratic":
            return float((i - j) ** 2)
        raise ValueError(f"weights must be None, 'linear' or 'quadratic'; got {weights!r}")

    # kappa = 1 - observed disagreement / expected disagreement (both weighted). Integers until the
    # final division, so a perfect agreement is exactly 1.0.
    observed = sum(weight(i, j) * matrix[i][j] for i in range(k) for j in range(k)) * n
    expected = sum(weight(i, j) * rows[i] * cols[j] for i in range(k) for j in range(k))
    if expected == 0:
        return None
    return 1.0 - observed / expected


def f1_score(labels: Sequence[bool], verdicts: Sequence[bool]) -> float | None:
    """F1 of the positive (``True``) class, labels being the truth; ``None`` when neither the labels
    nor the verdicts hold a positive (precision and recall are both 0/0)."""
    _check(labels, verdicts)
    tp = sum(1 for a, b in zip(labels, verdicts, strict=True) if a and b)
    fp = sum(1 for a, b in zip(labels, verdicts, strict=True) if b and not a)
    fn = sum(1 for a, b in zip(labels, verdicts, strict=True) if a and not b)
    if tp + fp + fn == 0:
        return None
    return 2 * tp / (2 * tp + fp + fn)
