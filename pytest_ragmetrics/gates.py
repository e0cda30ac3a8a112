"""Suite-level quality gates: ``context_recall mean >= 0.80`` over every sample scored in a run.

A gate is one line of the ``rag_gates`` ini option (or ``--rag-gate``)::

    <metric>[<method>] <stat> <op> <threshold>

    context_recall mean >= 0.80
    context_precision min >= 0.5
    context_relevance[graded] p10 > 0.4
    context_recall pass_rate(>=0.8) >= 0.9

Statistics (see :func:`compute_stat`): ``mean``, ``min``, ``max``, ``median`` (= ``quantile(0.5)``),
``quantile(q)`` with ``0 <= q <= 1``, ``pNN`` (= ``quantile(NN/100)``), and ``pass_rate(<op> <x>)``,
the fraction of samples whose score satisfies ``<op> <x>``. Operators: ``>=``, ``>``, ``<=``, ``<``.

A metric with methods (``context_relevance``) needs one in a gate, ``context_relevance[graded]``:
the methods score on different scales, so their scores are never pooled.

Everything here is pure arithmetic over plain floats: no pytest, no judge. Malformed gates raise
:class:`~pytest_ragmetrics.errors.ConfigError`, which the plugin turns into ``pytest.UsageError``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError

__all__ = [
    "BUILTIN_METRICS",
    "COMPARISON_OPS",
    "DEFAULT_METHODS",
    "GATE_FORM",
    "Gate",
    "aggregate",
    "compare",
    "compute_stat",
    "evaluate_gates",
    "format_number",
    "normalize_stat",
    "parse_gate",
    "parse_gates",
]

#: Metrics shipped with the package; the plugin adds custom registered metrics to this set.
BUILTIN_METRICS: frozenset[str] = frozenset({"context_precision", "context_recall", "context_relevance"})

#: Which metrics take a ``[method]`` and which methods they accept.
DEFAULT_METHODS: Mapping[str, frozenset[str]] = {
    "context_relevance": frozenset({"graded", "sentence", "binary"}),
}

#: Comparison operators a gate (or ``pass_rate``) may use.
COMPARISON_OPS: tuple[str, ...] = (">=", ">", "<=", "<")

#: The expected form, quoted in every parse error.
GATE_FORM = (
    "expected '<metric>[<method>] <stat> <op> <threshold>', e.g. 'context_recall mean >= 0.80' or "
    "'context_relevance[graded] p10 > 0.4'; stat is one of mean, min, max, median, pNN, quantile(q), "
    "pass_rate(>=x); op is one of >=, >, <=, <"
)

# Scores are means of fractions (2/3, 0.1 + 0.2, ...). Float noise must not flip a gate that sits
# exactly on its threshold, so comparisons allow this much slack in the passing direction.
_EPSILON = 1e-9

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_GATE_RE = re.compile(
    r"""^\s*
    (?P<metric>[A-Za-z_][A-Za-z0-9_.-]*)
    \s*(?:\[\s*(?P<method>[^\]]*?)\s*\])?
    \s+(?P<stat>[A-Za-z_]\w*(?:\s*\([^)]*\))?)
    \s*(?P<op>>=|<=|>|<|==|!=|=)
    \s*(?P<threshold>\S+)
    \s*$""",
    re.VERBOSE,
)
_QUANTILE_RE = re.compile(rf"^quantile\(\s*(?P<q>{_NUMBER})\s*\)$")
_PERCENTILE_RE = re.compile(r"^p(?P<p>\d{1,3})$")
_PASS_RATE_RE = re.compile(rf"^pass_rate\(\s*(?P<op>>=|<=|>|<)\s*(?P<x>{_NUMBER})\s*\)$")


@dataclass(frozen=True)
class Gate:
    """One parsed quality gate.

    ``stat`` is in canonical form (``mean``, ``min``, ``max``, ``quantile(0.1)``,
    ``pass_rate(>=0.8)``), the same spelling result rows use for aggregate comparisons. ``spec`` is
    the line as the user wrote it, runs of whitespace collapsed, e.g. ``context_recall mean >= 0.80``.
    """

    metric: str
    method: str | None
    stat: str
    op: str
    threshold: float
    spec: str

    @property
    def key(self) -> tuple[str, str | None]:
        """The ``(metric, method)`` pair this gate reads scores for."""
        return (self.metric, self.method)


def format_number(value: float) -> str:
    """Shortest text that reads back as ``value``: ``0.8``, ``1``, ``0.125``."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def _parse_number(text: str) -> float | None:
    if not re.fullmatch(_NUMBER, text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def normalize_stat(stat: str) -> str:
    """Canonical spelling of a statistic (``p10`` -> ``quantile(0.1)``); :class:`ConfigError` if unknown."""
    text = stat.strip()
    lowered = text.lower()
    if lowered in ("mean", "min", "max"):
        return lowered
    if lowered == "median":
        return "quantile(0.5)"
    match = _PERCENTILE_RE.match(lowered)
    if match:
        pct = int(match["p"])
        if pct > 100:
            raise ConfigError(f"percentile {text!r} is out of range: use p0 .. p100")
        return f"quantile({format_number(pct / 100)})"
    match = _QUANTILE_RE.match(lowered)
    if match:
        q = float(match["q"])
        if not 0.0 <= q <= 1.0:
            raise ConfigError(f"quantile {text!r} is out of range: q must be between 0 and 1")
        return f"quantile({format_number(q)})"
    match = _PASS_RATE_RE.match(lowered)
    if match:
        return f"pass_rate({match['op']}{format_number(float(match['x']))})"
    raise ConfigError(
        f"unknown statistic {text!r}: use mean, min, max, median, pNN (e.g. p10), quantile(q) "
        "(e.g. quantile(0.1)) or pass_rate(<op><x>) (e.g. pass_rate(>=0.8))"
    )


def parse_gate(
    line: str,
    known_metrics: Collection[str] | None = None,
    methods: Mapping[str, Collection[str]] | None = None,
) -> Gate:
    """Parse one gate line such as ``context_recall mean >= 0.80``.

    ``known_metrics`` are the metric names a gate may name (default: :data:`BUILTIN_METRICS`; the
    plugin passes built-ins plus custom registered metrics). ``methods`` maps each metric that takes
    a ``[method]`` to the methods it accepts (default: :data:`DEFAULT_METHODS`).

    Raises :class:`ConfigError` naming the line and the expected form when it does not parse, or
    when the metric, method, statistic, operator or threshold is not one we can use.
    """
    metrics = BUILTIN_METRICS if known_metrics is None else known_metrics
    method_table = DEFAULT_METHODS if methods is None else methods

    def fail(why: str) -> ConfigError:
        return ConfigError(f"invalid ragmetrics gate {line.strip()!r}: {why}; {GATE_FORM}")

    match = _GATE_RE.match(line)
    if match is None:
        raise fail("cannot parse it")
    metric = match["metric"]
    method = match["method"]
    if metric not in metrics:
        known = ", ".join(sorted(metrics)) or "(none)"
        raise fail(f"unknown metric {metric!r} (known metrics: {known})")
    if method is None and method_table.get(metric):
        # Pooling graded ratings with sentence shares would mix three scales into one number.
        choices = " or ".join(f"{metric}[{m}]" for m in sorted(method_table[metric]))
        raise fail(f"{metric} needs a method: write {choices}")
    if method is not None:
        allowed = method_table.get(metric)
        if not allowed:
            raise fail(f"metric {metric!r} takes no [method]")
        if method not in allowed:
            raise fail(f"unknown method {method!r} for {metric} (use one of: {', '.join(sorted(allowed))})")
    op = match["op"]
    if op not in COMPARISON_OPS:
        raise fail(f"unsupported operator {op!r}")
    threshold = _parse_number(match["threshold"])
    if threshold is None:
        raise fail(f"threshold {match['threshold']!r} is not a finite number")
    try:
        stat = normalize_stat(match["stat"])
    except ConfigError as exc:
        raise fail(str(exc)) from None
    # The spec is what the user wrote (so they can find it in their config), whitespace tidied.
    spec = " ".join(line.split())
    return Gate(metric=metric, method=method, stat=stat, op=op, threshold=threshold, spec=spec)


def parse_gates(
    text_or_lines: str | Iterable[str],
    known_metrics: Collection[str] | None = None,
    methods: Mapping[str, Collection[str]] | None = None,
) -> list[Gate]:
    """Parse gates from ini ``linelist`` values or a block of text, one gate per line.

    In a single string (an environment variable, say) ``;`` separates gates too. Blank lines and
    comments (from ``#`` to the end of the line) are skipped. Arguments after the first as for
    :func:`parse_gate`.
    """
    # A gate never contains ';', so it can stand for a newline where newlines are awkward.
    lines = text_or_lines.replace(";", "\n").splitlines() if isinstance(text_or_lines, str) else text_or_lines
    gates: list[Gate] = []
    for raw in lines:
        # A gate never contains '#', so everything from the first one on is a comment.
        line = raw.split("#", 1)[0].strip()
        if line:
            gates.append(parse_gate(line, known_metrics, methods))
    return gates


def compare(value: float, op: str, threshold: float) -> bool:
    """``value <op> threshold``, tolerant of float noise (1e-9) in the passing direction."""
    if op == ">=":
        return value >= threshold - _EPSILON
    if op == ">":
        return value > threshold + _EPSILON
    if op == "<=":
        return value <= threshold + _EPSILON
    if op == "<":
        return value < threshold - _EPSILON
    raise ValueError(f"unsupported comparison operator {op!r}; use one of {', '.join(COMPARISON_OPS)}")


def _checked(scores: Iterable[float]) -> list[float]:
    values = [float(s) for s in scores]
    if any(not math.isfinite(v) for v in values):
        # A NaN would make every comparison False and every mean NaN: a scoring bug, not a score.
        raise ValueError(f"scores must be finite numbers, got {values!r}")
    return values


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default, Hyndman & Fan type 7).
    pos = (len(sorted_values) - 1) * q
    lower = math.floor(pos)
    upper = min(lower + 1, len(sorted_values) - 1)
    frac = pos - lower
    return sorted_values[lower] + (sorted_values[upper] - sorted_values[lower]) * frac


def compute_stat(stat: str, scores: Iterable[float]) -> float | None:
    """The statistic ``stat`` (any spelling :func:`normalize_stat` accepts) of ``scores``.

    Returns ``None`` for no scores: an empty list has no mean, and ``None`` is never mistaken for a
    passing value. ``quantile(q)`` interpolates linearly between closest ranks (numpy's default).
    """
    canonical = normalize_stat(stat)
    values = _checked(scores)
    if not values:
        return None
    if canonical == "mean":
        return math.fsum(values) / len(values)
    if canonical == "min":
        return min(values)
    if canonical == "max":
        return max(values)
    match = _QUANTILE_RE.match(canonical)
    if match:
        return _quantile(sorted(values), float(match["q"]))
    match = _PASS_RATE_RE.match(canonical)
    if match:
        op, x = match["op"], float(match["x"])
        return sum(1 for v in values if compare(v, op, x)) / len(values)
    raise AssertionError(f"unhandled statistic {canonical!r}")  # pragma: no cover


def aggregate(scores: Iterable[float]) -> dict[str, Any]:
    """``{"n", "mean", "min", "max"}`` of ``scores``; the three figures are ``None`` when there are none."""
    values = _checked(scores)
    if not values:
        return {"n": 0, "mean": None, "min": None, "max": None}
    return {"n": len(values), "mean": math.fsum(values) / len(values), "min": min(values), "max": max(values)}


def _scores_for(
    gate: Gate, per_sample_scores: Mapping[tuple[str, str | None], Sequence[float]]
) -> list[float]:
    # A metric with methods always names one in a gate (parse_gate), so this is an exact lookup.
    return list(per_sample_scores.get((gate.metric, gate.method), ()))


def evaluate_gates(
    gates: Iterable[Gate],
    per_sample_scores: Mapping[tuple[str, str | None], Sequence[float]],
) -> list[dict[str, Any]]:
    """Evaluate ``gates`` against every per-sample score of the run, keyed by ``(metric, method)``.

    Returns one ``summary["gates"]`` row per gate, in order: ``spec``, ``metric``, ``method``,
    ``stat``, ``op``, ``threshold``, ``value``, ``n``, ``passed``, ``margin`` (``value - threshold``)
    and ``reason`` (``None``, or why the gate failed without a value). A gate whose metric has no
    recorded scores fails with ``value`` ``None``: a gate that checked nothing must not pass.
    """
    rows: list[dict[str, Any]] = []
    for gate in gates:
        scores = _scores_for(gate, per_sample_scores)
        value = compute_stat(gate.stat, scores)
        label = gate.metric if gate.method is None else f"{gate.metric}[{gate.method}]"
        if value is None:
            passed = False
            margin = None
            reason: str | None = f"no recorded evaluations of {label} in this run"
        else:
            # 12 decimals: drop float noise (0.7999999999999999) without touching real differences.
            value = round(value, 12) + 0.0  # + 0.0 turns -0.0 into 0.0
            passed = compare(value, gate.op, gate.threshold)
            margin = round(value - gate.threshold, 12) + 0.0
            reason = None
        rows.append(
            {
                "spec": gate.spec,
                "metric": gate.metric,
                "method": gate.method,
                "stat": gate.stat,
                "op": gate.op,
                "threshold": gate.threshold,
                "value": value,
                "n": len(scores),
                "passed": passed,
                "margin": margin,
                "reason": reason,
            }
        )
    return rows
