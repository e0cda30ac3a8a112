"""Suite-level quality gates: ``context_recall mean >= 0.80`` over every sample scored in a run.

A gate is one line of the ``rag_gates`` ini option (or ``--rag-gate``)::

    <metric>[<method>] <stat> <op> <threshold>

    context_recall mean >= 0.80
    context_precision min >= 0.5
    context_relevance[graded] p10 > 0.4
    context_recall pass_rate(>=0.8) >= 0.9
    ndcg@10 mean >= 0.7

Statistics (see :func:`compute_stat`): ``mean``, ``min``, ``max``, ``median`` (= ``quantile(0.5)``),
``quantile(q)`` with ``0 <= q <= 1``, ``pNN`` (= ``quantile(NN/100)``), and ``pass_rate(<op> <x>)``,
the fraction of samples whose score satisfies ``<op> <x>``. Operators: ``>=``, ``>``, ``<=``, ``<``.

``corrected_mean`` (``context_precision corrected_mean >= 0.7``) is the judge-corrected mean over a
labelled subset (:func:`pytest_ragmetrics.stats.corrected_mean`), decided on its confidence interval:
the lower bound must meet ``>=`` / ``>``, the upper bound ``<=`` / ``<``.

A metric with methods (``context_relevance``) needs one in a gate, ``context_relevance[graded]``:
the methods score on different scales, so their scores are never pooled.

Everything here is pure arithmetic over plain floats: no pytest, no judge. Malformed gates raise
:class:`~pytest_ragmetrics.errors.ConfigError`, which the plugin turns into ``pytest.UsageError``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .errors import ConfigError
from .results import aggregate
from .specs import (
    BUILTIN_CATALOG,
    COMPARISON_OPS,
    LABEL_METRICS,
    MetricCatalog,
    MetricName,
    compare,
    format_metric,
    format_number,
    gate_lines,
    parse_gate_line,
)
from .stats import mean, percentile

__all__ = [
    "BUILTIN_METRICS",
    "COMPARISON_OPS",
    "CORRECTED_MEAN",
    "DEFAULT_METHODS",
    "GATE_FORM",
    "Gate",
    "aggregate",
    "compare",
    "compute_stat",
    "evaluate_gates",
    "format_number",
    "normalize_stat",
    "not_measured_reason",
    "parse_gate",
    "parse_gates",
]

#: Metrics shipped with the package; the plugin adds custom registered metrics to this set.
BUILTIN_METRICS: frozenset[str] = frozenset(BUILTIN_CATALOG.methods)

#: Which metrics take a ``[method]`` and which methods they accept.
DEFAULT_METHODS: Mapping[str, frozenset[str]] = {
    name: frozenset(methods) for name, methods in BUILTIN_CATALOG.methods.items() if methods
}

#: The statistic of a gate on the judge-corrected mean, decided on its interval's bound.
CORRECTED_MEAN = "corrected_mean"

#: The expected form, quoted in every parse error.
GATE_FORM = (
    "expected '<metric>[<method>] <stat> <op> <threshold>', e.g. 'context_recall mean >= 0.80', "
    "'context_relevance[graded] p10 > 0.4' or 'ndcg@10 mean >= 0.7'; stat is one of mean, min, max, "
    "median, pNN, quantile(q), "
    "pass_rate(>=x), corrected_mean; op is one of >=, >, <=, <"
)

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
# Compiled at first use (the re module keeps what it compiled): most runs name no such statistic.
_QUANTILE = rf"^quantile\(\s*(?P<q>{_NUMBER})\s*\)$"
_PERCENTILE = r"^p(?P<p>\d{1,3})$"
_PASS_RATE = rf"^pass_rate\(\s*(?P<op>>=|<=|>|<)\s*(?P<x>{_NUMBER})\s*\)$"


@dataclass(frozen=True)
class Gate:
    """One parsed quality gate.

    ``stat`` is in canonical form (``mean``, ``min``, ``max``, ``quantile(0.1)``,
    ``pass_rate(>=0.8)``), the same spelling result rows use for aggregate comparisons. ``spec`` is
    the line as the user wrote it, runs of whitespace collapsed, e.g. ``context_recall mean >= 0.80``.
    ``metric`` is the metric as result rows name it (``context_recall``, ``ndcg@5``).
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


def normalize_stat(stat: str) -> str:
    """Canonical spelling of a statistic (``p10`` -> ``quantile(0.1)``); :class:`ConfigError` if unknown."""
    text = stat.strip()
    lowered = text.lower()
    if lowered in ("mean", "min", "max", CORRECTED_MEAN):
        return lowered
    if lowered == "median":
        return "quantile(0.5)"
    match = re.match(_PERCENTILE, lowered)
    if match:
        pct = int(match["p"])
        if pct > 100:
            raise ConfigError(f"percentile {text!r} is out of range: use p0 .. p100")
        return f"quantile({format_number(pct / 100)})"
    match = re.match(_QUANTILE, lowered)
    if match:
        q = float(match["q"])
        if not 0.0 <= q <= 1.0:
            raise ConfigError(f"quantile {text!r} is out of range: q must be between 0 and 1")
        return f"quantile({format_number(q)})"
    match = re.match(_PASS_RATE, lowered)
    if match:
        return f"pass_rate({match['op']}{format_number(float(match['x']))})"
    raise ConfigError(
        f"unknown statistic {text!r}: use mean, min, max, median, pNN (e.g. p10), quantile(q) "
        "(e.g. quantile(0.1)), pass_rate(<op><x>) (e.g. pass_rate(>=0.8)) or corrected_mean"
    )


def _catalog(
    known_metrics: Collection[str] | MetricCatalog | None, methods: Mapping[str, Collection[str]] | None
) -> MetricCatalog:
    if isinstance(known_metrics, MetricCatalog):
        return known_metrics
    if known_metrics is None and methods is None:
        return BUILTIN_CATALOG
    names = BUILTIN_METRICS if known_metrics is None else known_metrics
    method_table = DEFAULT_METHODS if methods is None else methods
    return MetricCatalog(
        {name: tuple(sorted(method_table.get(name, ()))) for name in names},
        plain={n: m for n, m in BUILTIN_CATALOG.plain.items() if n in names},
        bounded=BUILTIN_CATALOG.bounded & frozenset(names),
    )


def parse_gate(
    line: str,
    known_metrics: Collection[str] | MetricCatalog | None = None,
    methods: Mapping[str, Collection[str]] | None = None,
) -> Gate:
    """Parse one gate line such as ``context_recall mean >= 0.80``.

    ``known_metrics`` is a :class:`~pytest_ragmetrics.specs.MetricCatalog` or the metric names a
    gate may name (default: the built-in metrics; the plugin passes the catalog of every registered
    metric). ``methods`` maps each metric that takes a ``[method]`` to the methods it accepts.

    Raises :class:`ConfigError` naming the line and the expected form when it does not parse, or
    when the metric, method, statistic, operator or threshold is not one we can use.
    """
    parsed = parse_gate_line(line, what="gate", form=GATE_FORM)
    try:
        catalog = _catalog(known_metrics, methods)
        subject = catalog.check(parsed.subject, require_method=True)
        stat = normalize_stat(parsed.stat)
        catalog.check_threshold(subject, parsed.threshold, stat)
        if stat == CORRECTED_MEAN:
            _check_correctable(subject)
        if stat.startswith("pass_rate("):
            inner = float(stat[len("pass_rate(") :].lstrip("<>=").rstrip(")"))
            catalog.check_threshold(subject, inner)
    except ConfigError as exc:
        raise parsed.error(str(exc)) from None
    if parsed.condition is not None:
        raise parsed.error("'at ...' conditions belong to regression gates, not aggregate gates")
    return Gate(
        metric=subject.metric,
        method=subject.method,
        stat=stat,
        op=parsed.op,
        threshold=parsed.threshold,
        spec=parsed.spec,
    )


def _check_correctable(subject: MetricName) -> None:
    """:class:`ConfigError` when ``subject`` can never have a labelled score, so a ``corrected_mean``
    gate over it could only fail: a label metric has no judge to correct, and a metric resting on a
    judgment kind that a labelled set cannot label (an answer's claims, say) is never labelled."""
    from .kinds import KINDS  # the table of judgment kinds and their prompts: for such a gate only

    if subject.name in LABEL_METRICS:
        problem = f"{subject} is computed from labels, with no judge to correct"
    else:
        unlabelled = [
            kind.name for kind in KINDS.values() if kind.labels is None and subject.key in kind.metrics
        ]
        if not unlabelled:
            return
        problem = (
            f"{subject} rests on {' and '.join(unlabelled)} judgments, which a labelled set cannot label, "
            "so it has no judge-corrected mean"
        )
    labelled = {key for kind in KINDS.values() if kind.labels is not None for key in kind.metrics}
    blocked = {key for kind in KINDS.values() if kind.labels is None for key in kind.metrics}
    names = sorted({name for name, _ in labelled - blocked})
    raise ConfigError(f"{problem}; corrected_mean takes {', '.join(names[:-1])} or {names[-1]}")


def parse_gates(
    text_or_lines: str | Iterable[str],
    known_metrics: Collection[str] | MetricCatalog | None = None,
    methods: Mapping[str, Collection[str]] | None = None,
) -> list[Gate]:
    """Parse gates from ini ``linelist`` values or a block of text, one gate per line.

    In a single string (an environment variable, say) ``;`` separates gates too. Blank lines and
    comments (from ``#`` to the end of the line) are skipped. Arguments after the first as for
    :func:`parse_gate`.
    """
    return [parse_gate(line, known_metrics, methods) for line in gate_lines(text_or_lines)]


def _checked(scores: Iterable[float]) -> list[float]:
    values = [float(s) for s in scores]
    if any(not math.isfinite(v) for v in values):
        # A NaN would make every comparison False and every mean NaN: a scoring bug, not a score.
        raise ValueError(f"scores must be finite numbers, got {values!r}")
    return values


def compute_stat(stat: str, scores: Iterable[float]) -> float | None:
    """The statistic ``stat`` (any spelling :func:`normalize_stat` accepts) of ``scores``.

    Returns ``None`` for no scores: an empty list has no mean, and ``None`` is never mistaken for a
    passing value. ``quantile(q)`` interpolates linearly between closest ranks (numpy's default).
    """
    canonical = normalize_stat(stat)
    if canonical == CORRECTED_MEAN:
        raise ValueError("corrected_mean needs labelled scores: see evaluate_gates(corrected=...)")
    values = _checked(scores)
    if not values:
        return None
    if canonical == "mean":
        return mean(values)
    if canonical == "min":
        return min(values)
    if canonical == "max":
        return max(values)
    match = re.match(_QUANTILE, canonical)
    if match:
        return percentile(sorted(values), float(match["q"]))
    match = re.match(_PASS_RATE, canonical)
    if match:
        op, x = match["op"], float(match["x"])
        return sum(1 for v in values if compare(v, op, x)) / len(values)
    raise AssertionError(f"unhandled statistic {canonical!r}")  # pragma: no cover


def gate_fields(gate: Any) -> dict[str, Any]:
    """The fields of a gate's report row that say which gate it is, an aggregate or a regression
    gate alike: the line as written (``spec``) and what it was parsed into."""
    return {
        "spec": gate.spec,
        "metric": gate.metric,
        "method": gate.method,
        "stat": gate.stat,
        "op": gate.op,
        "threshold": gate.threshold,
    }


def not_measured_reason(label: str, samples: int, *, baseline: bool = False) -> str:
    """Why a gate has no value: ``context_recall not measured: none of the run's 3 samples has a
    score (...)``. Aggregate and regression gates over a metric no sample reached say it in these
    words; an aggregate gate counts the run's samples, a regression gate (``baseline``) the
    baseline's samples the run has without a score. Either count may hold samples whose tests never
    ask for the metric, so the words say whose samples they are, not that each was tried."""
    if not samples:
        return f"{label} not measured: 0 samples (no sample of this run)"
    where = (
        "its test stopped at an earlier failing check, or does not ask for it"
        if samples == 1
        else "their tests stopped at an earlier failing check, or do not ask for it"
    )
    if baseline:
        whose = f"this run has no score for {samples} of the baseline's samples"
    elif samples == 1:
        whose = "the run's one sample has no score"
    else:
        whose = f"none of the run's {samples} samples has a score"
    return f"{label} not measured: {whose} ({where})"


def _scores_for(
    gate: Gate, per_sample_scores: Mapping[tuple[str, str | None], Sequence[float]]
) -> list[float]:
    # A metric with methods always names one in a gate (parse_gate), so this is an exact lookup.
    return list(per_sample_scores.get((gate.metric, gate.method), ()))


def evaluate_gates(
    gates: Iterable[Gate],
    per_sample_scores: Mapping[tuple[str, str | None], Sequence[float]],
    *,
    partial: bool = False,
    corrected: Mapping[tuple[str, str | None], Mapping[str, Any]] | None = None,
    run_samples: int = 0,
    no_claims: Mapping[tuple[str, str | None], int] | None = None,
) -> list[dict[str, Any]]:
    """Evaluate ``gates`` against every per-sample score of the run, keyed by ``(metric, method)``.

    ``corrected`` holds the judge-corrected means by ``(metric, method)`` (``summary.metrics``'s
    ``corrected`` entries) that ``corrected_mean`` gates read: such a gate's value is the interval's
    lower bound for ``>=`` and ``>``, its upper bound for ``<=`` and ``<``.

    Returns one ``summary["gates"]`` row per gate, in order: ``spec``, ``metric``, ``method``,
    ``stat``, ``op``, ``threshold``, ``value``, ``n``, ``passed``, ``margin`` (``value - threshold``)
    and ``reason`` (``None``, or why the gate failed without a value). Every statistic is computed
    over full-precision scores with one exactly rounded sum (:func:`pytest_ragmetrics.stats.mean`),
    so the same scores give the same outcome in whatever order a run, a merge or a comparison reads
    them. A gate whose metric has no recorded scores fails with ``value`` ``None`` and the reason
    :func:`not_measured_reason` gives (``not_measured``: the ``run_samples`` of the run, which no
    test reached it for): a gate that checked nothing must not pass, unless the run was ``partial``
    (``pytest -k x``, named test paths, ``report merge --allow-partial``): then a gate over a metric
    that selection never scored says nothing about it, and is reported as skipped (``skipped:
    True``), as regression gates are.

    ``no_claims`` counts, per ``(metric, method)``, the evaluations without a score because the answer
    made no claim: the statistic is over the scored samples (``n``), and the row says how many had no
    claims (``no_claims``, when there are some). A gate whose samples all had no claims fails.
    """
    rows: list[dict[str, Any]] = []
    for gate in gates:
        if gate.stat == CORRECTED_MEAN:
            rows.append(_corrected_gate(gate, (corrected or {}).get(gate.key), partial))
            continue
        scores = _scores_for(gate, per_sample_scores)
        value = compute_stat(gate.stat, scores)
        label = format_metric(gate.metric, gate.method)
        unscored = (no_claims or {}).get(gate.key, 0)
        if value is None:
            passed = False
            margin = None
            reason: str | None = not_measured_reason(label, run_samples)
            if unscored:
                reason = f"no evaluation of {label} has a score: all {unscored} had no claims"
            elif partial:
                passed, reason = True, f"not evaluated: {reason} (partial run)"
        else:
            # 12 decimals: drop float noise (0.7999999999999999) without touching real differences.
            value = round(value, 12) + 0.0  # + 0.0 turns -0.0 into 0.0
            passed = compare(value, gate.op, gate.threshold)
            margin = round(value - gate.threshold, 12) + 0.0
            reason = None
        rows.append(
            {
                **gate_fields(gate),
                "value": value,
                "n": len(scores),
                "passed": passed,
                "margin": margin,
                "reason": reason,
                **({"not_measured": run_samples} if value is None and not unscored else {}),
                **({"no_claims": unscored} if unscored else {}),
                **({"skipped": True} if value is None and partial and not unscored else {}),
            }
        )
    return rows


def _corrected_gate(gate: Gate, corrected: Mapping[str, Any] | None, partial: bool) -> dict[str, Any]:
    """A ``corrected_mean`` gate: decided on the bound of the interval on the losing side."""
    label = format_metric(gate.metric, gate.method)
    upper = gate.op in ("<=", "<")
    bound = None if corrected is None else corrected.get("high" if upper else "low")
    row: dict[str, Any] = {
        **gate_fields(gate),
        "value": None,
        "n": 0 if corrected is None else int(corrected.get("labelled") or 0),
        "passed": False,
        "margin": None,
        "reason": None,
    }
    if corrected is not None:
        row["corrected"] = dict(corrected)
    if bound is None:
        why = (
            f"no labelled samples of {label} in this run: the corrected mean needs the labelled set "
            "(rag_judge_check) to label every judgment of some of the samples scored"
            if corrected is None
            else f"no corrected mean of {label}: {corrected.get('reason') or 'not enough labelled samples'}"
        )
        if partial:
            return {**row, "passed": True, "reason": f"not evaluated: {why} (partial run)", "skipped": True}
        return {**row, "reason": why}
    value = round(float(bound), 12) + 0.0
    return {
        **row,
        "value": value,
        "passed": compare(value, gate.op, gate.threshold),
        "margin": round(value - gate.threshold, 12) + 0.0,
        "bound": "upper" if upper else "lower",
    }
