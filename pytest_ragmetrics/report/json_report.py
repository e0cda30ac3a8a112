"""The machine-readable report (``--rag-report-json``): deterministic JSON of the run report.

Two runs with the same judgments write byte-identical files, so the report can be committed, diffed
and compared in CI: keys are sorted, and what depends on the machine rather than on the judgments
(:data:`LOCAL_FIGURES`: the judge's wall-clock ``seconds``) is left out unless asked for.

Floats are written in full precision (the shortest text that reads back as the same float), so a
gate decided over a report, a merge of shard reports or a baseline gives the outcome the run gave:
rounding is for display only.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..report_schema import check_version

__all__ = ["LOCAL_FIGURES", "result_order", "sort_results", "to_json"]

#: ``summary.judge`` figures that describe this machine, not the run's judgments: two replays of the
#: same store differ in them. Where each judgment came from (``calls``, ``store_hits``, ``cache_hits``,
#: ``reused``) is kept: the store is read before the cache, so two replays count alike.
LOCAL_FIGURES = ("seconds",)


def _normalized(value: Any, ndigits: int | None) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            # JSON has no NaN; a NaN score is a bug upstream and must not be written as one.
            raise ValueError(f"cannot write non-finite number {value!r} to the ragmetrics JSON report")
        # + 0.0 so that -0.0 is written as 0.0
        return (value if ndigits is None else round(value, ndigits)) + 0.0
    if isinstance(value, Mapping):
        return {str(key): _normalized(item, ndigits) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_normalized(item, ndigits) for item in value]
    raise TypeError(f"the ragmetrics report holds plain JSON types only, got {type(value).__name__}")


def _method_key(method: Any) -> tuple[int, str]:
    # None sorts before any method name, without comparing None to str.
    return (0, "") if method is None else (1, str(method))


def sort_results(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """``rows`` sorted by ``(nodeid, metric, method, stat)``; ties keep their recorded order.

    Under pytest-xdist rows arrive in whatever order workers finish, so the plugin sorts them with
    this before writing a report.
    """
    return sorted(rows, key=result_order)


def result_order(row: Mapping[str, Any]) -> tuple[str, str, tuple[int, str], str]:
    """Where ``row`` stands in a report: its place in :func:`sort_results`' order."""
    return (
        str(row.get("nodeid", "")),
        str(row.get("metric", "")),
        _method_key(row.get("method")),
        str(row.get("stat", "")),
    )


def to_json(report: Mapping[str, Any], *, include_timing: bool = False, ndigits: int | None = None) -> str:
    """Serialize a run report: sorted keys, indent 2, floats in full precision (or rounded to
    ``ndigits`` decimals, for display), trailing newline.

    Rows stay in the order given (sort them with :func:`sort_results` first). The machine-local
    figures of ``summary.judge`` (:data:`LOCAL_FIGURES`: wall-clock ``seconds``) are omitted unless
    ``include_timing`` is true.
    Raises ``ValueError`` for an unsupported ``version`` or a NaN/infinite number.
    """
    check_version(report)
    data = _normalized(report, ndigits)
    judge = (data.get("summary") or {}).get("judge")
    if not include_timing and isinstance(judge, dict):
        if "recorded" not in judge and ("cache_hits" in judge or "store_hits" in judge):
            judge["recorded"] = sum(judge.get(name) or 0 for name in ("cache_hits", "store_hits", "reused"))
        for name in LOCAL_FIGURES:
            judge.pop(name, None)
    return json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
