"""Metric names and gate-like lines: the one place that knows their syntax.

A **metric name** is what tests, gates, reports and baselines call a metric::

    context_precision              a metric without methods
    context_relevance[graded]      a metric with its method
    context_recall                 a metric whose plain name means one of its methods (sentence);
    context_recall[claims]         its other method
    ndcg@5                         a ranked metric cut off at rank 5 (``ndcg`` alone: the whole ranking)

A **gate-like line** compares a statistic of a metric with a number. Aggregate gates, regression gates
and judge agreement floors are all written this way and all parsed by :func:`parse_gate_line`::

    <metric name> <statistic words> <op> <number> [at <name> <op> <number>]

    context_recall mean >= 0.8
    context_relevance[graded] p10 > 0.4
    context_precision mean drop <= 0.02 at p < 0.05
    context_precision kappa >= 0.6

This module checks syntax and which metric names exist (:class:`MetricCatalog`); what a statistic
means is up to the module that evaluates the line (``gates``, ``baseline``, ``calibration``).
Everything here is pure: no pytest, no judge. Errors are :class:`~pytest_ragmetrics.errors.ConfigError`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

__all__ = [
    "BUILTIN_CATALOG",
    "COMPARISON_OPS",
    "LABEL_METRICS",
    "GateLine",
    "MetricCatalog",
    "MetricName",
    "compare",
    "format_metric",
    "format_number",
    "gate_lines",
    "parse_finite",
    "parse_gate_line",
    "parse_metric_name",
    "registered_metrics",
    "subject_names",
    "threshold_problem",
]

#: Comparison operators a gate-like line may use.
COMPARISON_OPS: tuple[str, ...] = (">=", ">", "<=", "<")

_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]*"
_SUBJECT = rf"(?P<name>{_NAME})(?:@(?P<k>\d+))?\s*(?:\[\s*(?P<method>[^\]]*?)\s*\])?"
_METRIC_RE = re.compile(rf"^\s*{_SUBJECT}\s*$")
_STAT_WORD = r"[A-Za-z_]\w*(?:\s*\([^)]*\))?"  # mean, drop, quantile(0.1), pass_rate(>=0.8)
_OP = r">=|<=|>|<|==|!=|="
# Compiled at first use (the re module keeps what it compiled): a run with no gate-like line never needs it.
_LINE = rf"""(?x)^\s*
    {_SUBJECT}
    \s+(?P<stat>{_STAT_WORD}(?:\s+{_STAT_WORD})*)
    \s*(?P<op>{_OP})
    \s*(?P<threshold>[^\s]+)
    (?:\s+at\s+(?P<cond_name>[A-Za-z_]\w*)\s*(?P<cond_op>{_OP})\s*(?P<cond_value>\S+))?
    \s*$"""


# Scores are means of fractions (2/3, 0.1 + 0.2, ...). Float noise must not flip a comparison that
# sits exactly on its threshold (an assertion's, a gate's), so it allows this much slack in the
# passing direction.
_EPSILON = 1e-9


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


def format_number(value: float) -> str:
    """Shortest text that reads back as ``value``: ``0.8``, ``1``, ``0.125``."""
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def format_sampling(temperature: float, seed: int | None, n: int) -> str:
    """``temperature 0, seed 0, n 1``: how the judge was asked, besides the model and the prompt
    (what every judgment's key holds), as a result records it and a baseline comparison names it."""
    shown_seed = "none" if seed is None else str(seed)
    return f"temperature {format_number(temperature)}, seed {shown_seed}, n {format_number(n)}"


def sampling_temperature(sampling: str) -> float | None:
    """The temperature a :func:`format_sampling` text names, or ``None`` when it names none."""
    head, _, _ = sampling.partition(",")
    word, _, value = head.partition(" ")
    return parse_finite(value) if word == "temperature" else None


def parse_finite(text: str) -> float | None:
    """``text`` as a finite float, or ``None`` when it is not a plain finite number."""
    if not re.fullmatch(_NUMBER, text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def format_metric(metric: str, method: str | None) -> str:
    """``("context_relevance", "graded")`` -> ``context_relevance[graded]``; ``("ndcg@5", None)``
    -> ``ndcg@5``."""
    return metric if method is None else f"{metric}[{method}]"


@dataclass(frozen=True)
class MetricName:
    """A parsed metric name: ``name`` (``ndcg``), ``k`` (``5`` in ``ndcg@5``) and ``method``."""

    name: str
    method: str | None = None
    k: int | None = None

    @property
    def metric(self) -> str:
        """The metric as result rows, aggregates and baselines name it: ``ndcg@5``, ``context_recall``."""
        return self.name if self.k is None else f"{self.name}@{self.k}"

    @property
    def key(self) -> tuple[str, str | None]:
        """``(metric, method)``: how scores are grouped in reports, gates and baselines."""
        return (self.metric, self.method)

    def __str__(self) -> str:
        return format_metric(self.metric, self.method)


def _from_match(match: re.Match[str]) -> MetricName:
    k = match["k"]
    return MetricName(match["name"], match["method"], int(k) if k else None)


@dataclass(frozen=True)
class MetricCatalog:
    """Which metric names exist: each metric's methods, and which metrics take a cut-off ``@k``.

    ``plain`` maps a metric with methods whose plain name means one of them (``context_recall``
    means ``context_recall[sentence]``) to that method: its plain name needs no method anywhere,
    and naming that method is the same as the plain name.
    """

    methods: Mapping[str, tuple[str, ...]]
    ranked: frozenset[str] = field(default_factory=frozenset)
    plain: Mapping[str, str] = field(default_factory=dict)
    #: Metrics whose scores lie in [0, 1]: every registered metric, as results are scores in [0, 1],
    #: unless the metric object says ``bounded = False``.
    bounded: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def of(cls, metrics: Iterable[Any]) -> MetricCatalog:
        """The catalog of registered metric objects (``name``, ``methods``, optional ``takes_k`` and
        ``plain_method``)."""
        methods: dict[str, tuple[str, ...]] = {}
        ranked: set[str] = set()
        plain: dict[str, str] = {}
        bounded: set[str] = set()
        for metric in metrics:
            methods[metric.name] = tuple(metric.methods or ())
            if getattr(metric, "takes_k", False):
                ranked.add(metric.name)
            if getattr(metric, "plain_method", None):
                plain[metric.name] = str(metric.plain_method)
            if getattr(metric, "bounded", True) is not False:
                bounded.add(metric.name)
        return cls(methods, frozenset(ranked), plain, frozenset(bounded))

    def merged(self, other: MetricCatalog) -> MetricCatalog:
        return MetricCatalog(
            {**self.methods, **other.methods},
            self.ranked | other.ranked,
            {**self.plain, **other.plain},
            self.bounded | other.bounded,
        )

    def check_threshold(self, name: MetricName, threshold: float, stat: str = "") -> None:
        """:class:`ConfigError` when ``threshold`` lies outside [0, 1] and the statistic cannot:
        any statistic of a bounded metric, and a pass rate (``stat`` starting ``pass_rate``) of any."""
        if name.name in self.bounded or stat.startswith("pass_rate"):
            problem = threshold_problem(str(name), threshold)
            if problem is not None:
                raise ConfigError(problem)

    def check(self, name: MetricName, *, require_method: bool = False) -> MetricName:
        """``name`` if it names a known metric, method and cut-off; else :class:`ConfigError` saying why.

        With ``require_method``, a metric with methods must name one: graded ratings and sentence
        shares are different scales, so a gate or a baseline never pools them.
        """
        if name.name not in self.methods:
            known = ", ".join(sorted(self.methods)) or "(none)"
            raise ConfigError(f"unknown metric {name.name!r} (known metrics: {known})")
        allowed = self.methods[name.name]
        if name.k is not None:
            if name.name not in self.ranked:
                raise ConfigError(f"metric {name.name!r} takes no @k cut-off")
            if name.k < 1:
                raise ConfigError(f"cut-off @{name.k} of {name.name} must be at least 1")
        if name.method is None:
            if require_method and allowed and name.name not in self.plain:
                choices = " or ".join(f"{name.metric}[{m}]" for m in sorted(allowed))
                raise ConfigError(f"{name.metric} needs a method: write {choices}")
        elif not allowed:
            raise ConfigError(f"metric {name.name!r} takes no [method]")
        elif name.method not in allowed:
            raise ConfigError(
                f"unknown method {name.method!r} for {name.name} (use one of: {', '.join(sorted(allowed))})"
            )
        elif name.method == self.plain.get(name.name):
            return MetricName(name.name, None, name.k)
        return name


def threshold_problem(subject: str, threshold: float) -> str | None:
    """Why ``threshold`` cannot be a threshold of ``subject``, whose values lie in [0, 1], or None."""
    if 0.0 <= threshold <= 1.0:
        return None
    return (
        f"{subject} lies between 0 and 1, so a threshold of {format_number(threshold)} is out of range "
        "(a check against it could never tell a good retriever from a bad one)"
    )


#: Retrieval metrics computed from labels, with no judge (``pytest_ragmetrics.metrics.labels``); each
#: takes a cut-off: ``ndcg@5``, ``recall@3``, or ``ndcg`` for the whole ranking.
LABEL_METRICS: tuple[str, ...] = ("hit_rate", "recall", "precision", "mrr", "ndcg", "average_precision")

#: The metrics shipped with the package; registries of custom metrics merge into it.
BUILTIN_CATALOG = MetricCatalog(
    {
        "context_precision": (),
        "context_recall": ("sentence", "claims"),
        "context_relevance": ("graded", "sentence", "binary", "any"),
        **dict.fromkeys(LABEL_METRICS, ()),
        "faithfulness": ("supported", "not_contradicted"),
        "answer_relevancy": (),
        "answer_correctness": ("f1", "precision", "recall"),
    },
    frozenset(LABEL_METRICS),
    plain={"context_recall": "sentence", "faithfulness": "supported", "answer_correctness": "f1"},
    bounded=frozenset(
        {
            "context_precision",
            "context_recall",
            "context_relevance",
            *LABEL_METRICS,
            "faithfulness",
            "answer_relevancy",
            "answer_correctness",
        }
    ),
)


def parse_metric_name(
    text: str, catalog: MetricCatalog | None = None, *, require_method: bool = False
) -> MetricName:
    """Parse ``context_relevance[graded]`` or ``ndcg@5``; with a ``catalog``, also check that it exists."""
    match = _METRIC_RE.match(text) if isinstance(text, str) else None
    if match is None:
        raise ConfigError(
            f"invalid metric name {text!r}: "
            "write e.g. 'context_recall', 'context_relevance[graded]' or 'ndcg@5'"
        )
    name = _from_match(match)
    return name if catalog is None else catalog.check(name, require_method=require_method)


@dataclass(frozen=True)
class GateLine:
    """The syntax of one gate-like line; what it means is up to the caller.

    ``stat`` holds the statistic words with whitespace collapsed (``mean``, ``mean drop``,
    ``kappa``, ``pass_rate(>=0.8)``); ``condition`` the optional ``at p < 0.05`` as
    ``("p", "<", 0.05)``; ``spec`` the line as written, whitespace tidied.
    """

    subject: MetricName
    stat: str
    op: str
    threshold: float
    condition: tuple[str, str, float] | None
    spec: str
    what: str = "gate"
    form: str = ""

    def error(self, why: str) -> ConfigError:
        """A :class:`ConfigError` about this line that quotes it and the expected form."""
        return _line_error(self.spec, why, self.what, self.form)


def _line_error(line: str, why: str, what: str, form: str) -> ConfigError:
    return ConfigError(f"invalid ragmetrics {what} {line.strip()!r}: {why}" + (f"; {form}" if form else ""))


def parse_gate_line(line: str, *, what: str = "gate", form: str = "") -> GateLine:
    """Split one gate-like line into its parts (syntax only).

    ``what`` names the kind of line in errors (``gate``, ``regression gate``, ``agreement floor``) and
    ``form`` is the expected form quoted in every error. Raises :class:`ConfigError` when the line
    does not parse, an operator is not one of :data:`COMPARISON_OPS`, or a number is not finite.
    """
    match = re.match(_LINE, line)
    if match is None:
        raise _line_error(line, "cannot parse it", what, form)
    spec = " ".join(line.split())
    for op in (match["op"], match["cond_op"]):
        if op is not None and op not in COMPARISON_OPS:
            why = f"unsupported operator {op!r} (use one of {', '.join(COMPARISON_OPS)})"
            raise _line_error(line, why, what, form)
    threshold = parse_finite(match["threshold"])
    if threshold is None:
        raise _line_error(line, f"threshold {match['threshold']!r} is not a finite number", what, form)
    condition: tuple[str, str, float] | None = None
    if match["cond_name"] is not None:
        value = parse_finite(match["cond_value"])
        if value is None:
            why = f"{match['cond_name']} value {match['cond_value']!r} is not a finite number"
            raise _line_error(line, why, what, form)
        condition = (match["cond_name"], match["cond_op"], value)
    return GateLine(
        subject=_from_match(match),
        stat=" ".join(match["stat"].split()),
        op=match["op"],
        threshold=threshold,
        condition=condition,
        spec=spec,
        what=what,
        form=form,
    )


def gate_lines(text_or_lines: str | Iterable[str]) -> list[str]:
    """The gate-like lines of ini ``linelist`` values or a block of text.

    In a single string (an environment variable, say) ``;`` separates lines too. Blank lines and
    comments (from ``#`` to the end of the line) are skipped: no gate-like line contains ``;`` or ``#``.
    """
    lines = text_or_lines.replace(";", "\n").splitlines() if isinstance(text_or_lines, str) else text_or_lines
    kept: list[str] = []
    for raw in lines:
        line = raw.split("#", 1)[0].strip()
        if line:
            kept.append(line)
    return kept


def subject_names(text_or_lines: str | Iterable[str]) -> set[str]:
    """The base metric names that the parseable gate-like lines among ``text_or_lines`` name."""
    names: set[str] = set()
    for line in gate_lines(text_or_lines):
        match = re.match(_LINE, line)
        if match is not None:
            names.add(match["name"])
    return names


def registered_metrics(batches: Iterable[Any]) -> list[Any]:
    """The metrics the ``pytest_ragmetrics_metrics`` hooks returned (``batches``, one list per
    hook), in order. :class:`ConfigError` for a return that is no list of metrics, naming it: a
    metric alone, or an object without a ``name`` or a ``score``, failed later with an error that
    named neither the hook nor the object."""
    metrics: list[Any] = []
    for batch in batches:
        if batch is None:
            continue
        if not isinstance(batch, (list, tuple)):
            raise ConfigError(
                f"a pytest_ragmetrics_metrics hook returned {type(batch).__name__} {batch!r:.60}, not a list "
                "of metrics"
            )
        for metric in batch:
            name = getattr(metric, "name", None)
            if not isinstance(name, str) or not name or not callable(getattr(metric, "score", None)):
                raise ConfigError(
                    f"a pytest_ragmetrics_metrics hook returned {metric!r:.60}, which is no metric: a metric "
                    "has a name (a str) and an async score(sample, method, ctx)"
                )
            metrics.append(metric)
    return metrics
