"""A comparison as JUnit XML properties of its test (``--junitxml``), through pytest's public
``item.user_properties``: score, threshold and outcome, numbered in the order the test made them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def comparison_properties(number: int, row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The properties of the ``number``-th comparison of a test, e.g.
    ``ragmetrics.1.context_recall.score = 0.5``."""
    prefix = f"ragmetrics.{number}.{row['metric']}" + (f"[{row['method']}]" if row["method"] else "")
    return [
        (f"{prefix}.{row['stat']}", f"{row['score']:.6g}"),
        (f"{prefix}.threshold", f"{row['op']} {row['threshold']:g}"),
        (f"{prefix}.passed", "true" if row["passed"] else "false"),
    ]
