"""Comparisons and gates as JUnit XML properties (``--junitxml``), through pytest's public APIs: a
comparison as properties of its test (``item.user_properties``), numbered in the order the test made
them; a gate as a test-suite property (``record_testsuite_property``).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from typing import Any


def comparison_properties(number: int, row: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The properties of the ``number``-th comparison of a test, e.g.
    ``ragmetrics.1.context_recall.score = 0.5``."""
    threshold = row["threshold"]
    # The sign in the key: 0.0 and -0.0 are equal keys, written differently.
    score_name, threshold_property, passed, failed = _shared_properties(
        number, row["metric"], row["method"], row["stat"], row["op"], threshold, math.copysign(1.0, threshold)
    )
    return [(score_name, _score(row)), threshold_property, passed if row["passed"] else failed]


@functools.lru_cache(maxsize=1024)
def _shared_properties(
    number: int, metric: str, method: str | None, stat: str, op: str, threshold: float, sign: float
) -> tuple[str, tuple[str, str], tuple[str, str], tuple[str, str]]:
    """What a comparison's properties share with the same comparison in the suite's other tests:
    the score's name, the threshold's property and both outcomes' properties, made once."""
    prefix = f"ragmetrics.{number}.{metric}" + (f"[{method}]" if method else "")
    return (
        f"{prefix}.{stat}",
        (f"{prefix}.threshold", f"{op} {threshold:g}"),
        (f"{prefix}.passed", "true"),
        (f"{prefix}.passed", "false"),
    )


def gate_properties(number: int, gate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The test-suite properties of the ``number``-th gate, e.g. ``ragmetrics.gate.1.passed = true``."""
    prefix = f"ragmetrics.gate.{number}"
    value = gate.get("value")
    outcome = "skipped" if gate.get("skipped") else "true" if gate["passed"] else "false"
    properties = [
        (f"{prefix}.spec", str(gate["spec"])),
        (f"{prefix}.value", "n/a" if value is None else f"{value:.6g}"),
        (f"{prefix}.n", str(gate.get("n", 0))),
        (f"{prefix}.passed", outcome),
    ]
    if gate.get("margin") is not None:
        properties.append((f"{prefix}.margin", f"{gate['margin']:+.6g}"))
    if gate.get("not_measured") is not None:
        properties.append((f"{prefix}.not_measured", str(gate["not_measured"])))
    return properties


def regression_gate_properties(number: int, gate: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The test-suite properties of the ``number``-th regression gate, e.g.
    ``ragmetrics.regression_gate.1.passed = inconclusive``, with what it can see at its size
    (``changed_n``, ``min_p``) and its one-sided ``p_value``."""
    prefix = f"ragmetrics.regression_gate.{number}"
    if gate.get("skipped"):
        outcome = "skipped"
    elif gate.get("inconclusive"):
        outcome = "inconclusive"
    else:
        outcome = "true" if gate.get("passed") else "false"
    properties = [(f"{prefix}.spec", str(gate.get("spec", "")))]
    for name in ("value", "p_value", "min_p"):
        value = gate.get(name)
        properties.append((f"{prefix}.{name}", "n/a" if value is None else f"{value:.6g}"))
    for name in ("n", "changed_n", "not_measured"):
        properties.append((f"{prefix}.{name}", str(gate.get(name) or 0)))
    return [*properties, (f"{prefix}.passed", outcome)]


def _score(row: Mapping[str, Any]) -> str:
    """The score as a property value; an outcome without a score by name (``no claims``)."""
    if row.get("score") is None:
        return str(row.get("outcome") or "no score").replace("_", " ")
    return f"{row['score']:.6g}"
