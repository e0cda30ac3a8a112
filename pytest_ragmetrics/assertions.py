"""Threshold assertions: ``assert_context_recall(sample) >= 0.8``.

The helpers judge right away and return a :class:`ScoreCheck`. Comparing it with a threshold raises
``AssertionError`` with a readable explanation when the comparison fails, so it works as a bare
statement and inside ``assert``. Given a list of samples the mean is compared; ``.min()``,
``.quantile(q)`` and ``.pass_rate(threshold)`` give the other dataset-level statistics.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any

from ._scope import current_test
from .errors import ConfigError, JudgmentPending
from .redact import one_line
from .results import MetricResult
from .sample import RagSample, as_samples
from .specs import compare, format_metric, threshold_problem
from .stats import percentile


def _threshold(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise TypeError(f"a metric threshold must be a number, got {type(value).__name__}: {value!r}")
    return float(value)


def _check_range(subject: str, threshold: float) -> None:
    problem = threshold_problem(subject, threshold)
    if problem is not None:
        raise ConfigError(problem)


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile q must be between 0 and 1, got {q!r}")
    return percentile(sorted(values), q)


def _short(text: str, limit: int = 100) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Threshold:
    """A check is compared with a threshold: ``==`` and truth are errors that say so."""

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (int, float)):
            raise TypeError(
                "compare a ragmetrics check with >=, >, <= or <, e.g. `... >= 0.8`; == is not a threshold"
            )
        return NotImplemented

    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise TypeError("compare a ragmetrics check with a threshold, e.g. `assert_context_recall(s) >= 0.8`")


class _Comparable(_Threshold):
    """Comparison operators that assert; subclasses provide ``value`` and ``_describe``."""

    value: float
    #: The compared value lies in [0, 1]: a threshold outside it is an error, not a doomed check.
    bounded: bool = False

    def _subject_name(self) -> str:
        raise NotImplementedError

    def _unscored(self) -> str | None:
        """Why there is no value to compare (every sample had no claims), or None."""
        return None

    def _used(self) -> None:
        """The check was compared (even with a threshold refused): no "never compared" warning."""

    def _compare(self, op: str, other: object) -> bool:
        __tracebackhide__ = True  # the failure is in the user's test line, not in here
        threshold = _threshold(other)
        if self.bounded:
            self._used()
            if not 0.0 <= threshold <= 1.0:  # in range, the subject's name is not needed
                _check_range(self._subject_name(), threshold)
        # No score to compare (an answer without claims): the check fails, saying so.
        # The same float-noise tolerance as the gates: a mean of 0.7999999999999999 meets >= 0.8.
        passed = self._unscored() is None and compare(self.value, op, threshold)
        self._record(op, threshold, passed)
        if not passed:
            raise AssertionError(self._failure(op, threshold))
        return True

    def __ge__(self, other: object) -> bool:
        __tracebackhide__ = True
        return self._compare(">=", other)

    def __gt__(self, other: object) -> bool:
        __tracebackhide__ = True
        return self._compare(">", other)

    def __le__(self, other: object) -> bool:
        __tracebackhide__ = True
        return self._compare("<=", other)

    def __lt__(self, other: object) -> bool:
        __tracebackhide__ = True
        return self._compare("<", other)

    def __float__(self) -> float:
        return self._number()

    def _number(self) -> float:
        """The compared value; ``ValueError`` when there is none (every sample's answer made no
        claim), never a silent 0, as :meth:`MetricResult.number` refuses one sample's."""
        missing = self._unscored()
        if missing is not None:
            raise ValueError(f"{self._described()} has no score: {missing}")
        return float(self.value)

    def _described(self) -> str:
        """What the value is of, as a failure names it: ``faithfulness of sample 'q1'``."""
        return self._subject_name()

    def _record(self, op: str, threshold: float, passed: bool) -> None:
        raise NotImplementedError

    def _failure(self, op: str, threshold: float) -> str:
        raise NotImplementedError


class ScoreCheck(_Comparable):
    """A metric judged on one sample or a list of samples, waiting to be compared with a threshold."""

    def __init__(self, results: list[MetricResult], single: bool, where: tuple[str, int] | None) -> None:
        self.results = results
        self.single = single
        self.where = where
        self.compared = False
        #: The results with a score; the others have an outcome instead (``no_claims``) and are
        #: counted apart from the statistics.
        self.scored: list[MetricResult]
        if single:  # the mean of one score, without the lists
            self.scored = results if results[0].outcome is None else []
            self.value = math.fsum([results[0].score]) if self.scored else 0.0
        else:
            self.scored = [r for r in results if r.outcome is None]
            scores = [r.score for r in self.scored]
            self.value = math.fsum(scores) / len(scores) if scores else 0.0

    @property
    def unscored(self) -> list[MetricResult]:
        """The results without a score (an answer without claims), in sample order."""
        return [r for r in self.results if r.outcome is not None]

    def _unscored(self) -> str | None:
        if self.scored:
            return None
        outcomes = sorted({str(r.outcome).replace("_", " ") for r in self.results})
        if self.single:
            return self.results[0].explanation or outcomes[0]
        return f"none of the {len(self.results)} samples has a score ({', '.join(outcomes)})"

    # -- what users read ---------------------------------------------------------------------
    @property
    def result(self) -> MetricResult:
        """The single sample's result (for a list, use ``results``)."""
        if not self.single:
            raise AttributeError("this check covers several samples; use .results")
        return self.results[0]

    @property
    def score(self) -> float:
        """The compared value: the sample's score, or the mean over samples; ``ValueError`` when
        no sample has a score."""
        return self._number()

    @property
    def name(self) -> str:
        return self.results[0].name

    @property
    def stat(self) -> str:
        return "score" if self.single else "mean"

    def _subject_name(self) -> str:
        return self.name

    def _described(self) -> str:
        return self._subject(self.stat)

    def _used(self) -> None:
        self.compared = True

    def mean(self) -> Stat:
        return Stat(self, "mean", self.value)

    def _scores(self) -> list[float]:
        return [r.score for r in self.scored]

    def min(self) -> Stat:
        return Stat(self, "min", min(self._scores(), default=0.0))

    def max(self) -> Stat:
        return Stat(self, "max", max(self._scores(), default=0.0))

    def quantile(self, q: float) -> Stat:
        return Stat(self, f"quantile({q:g})", quantile(self._scores(), q) if self.scored else 0.0)

    def pass_rate(self, threshold: float) -> Stat:
        """Share of the samples with a score whose score is at least ``threshold`` (samples without
        claims are counted apart, in the failure message and the report)."""
        t = _threshold(threshold)
        if self.bounded:
            self.compared = True
            _check_range(self.name, t)
        scores = self._scores()
        rate = sum(1 for v in scores if compare(v, ">=", t)) / len(scores) if scores else 0.0
        return Stat(self, f"pass_rate(>={t:g})", rate)

    def __repr__(self) -> str:
        value = f"{self.value:.4g}" if self._unscored() is None else "no score"
        return f"<ScoreCheck {self.name} {self.stat}={value} over {len(self.results)} sample(s)>"

    # -- failure message and record ---------------------------------------------------------------
    def _subject(self, stat: str) -> str:
        if self.single:
            r = self.results[0]
            return f"{r.name} of sample {r.sample_id!r}" if r.sample_id is not None else r.name
        return f"{self.name} {stat} over {len(self.results)} samples"

    def failure_message(self, stat: str, value: float, op: str, threshold: float) -> str:
        # A judge's words (its reasons, and the explanations that quote them) reach the terminal
        # escaped, as a chunk's text is (its repr): an ESC in them would rewrite the screen.
        missing = self._unscored()
        if missing is not None:
            lines = [f"{self._subject(stat)} has no score, expected {op} {threshold:g}", f"  why: {missing}"]
            if not self.single:
                lines += [
                    f"  - {r.sample_id}: {one_line(_short(r.explanation, 140))}" for r in self.unscored[:5]
                ]
            return "\n".join(lines)
        unscored = self.unscored
        apart = ""
        if unscored and not self.single:
            ids = ", ".join(str(r.sample_id) for r in unscored[:5]) + (", ..." if len(unscored) > 5 else "")
            outcomes = ", ".join(sorted({str(r.outcome).replace("_", " ") for r in unscored}))
            apart = f" ({len(unscored)} more without a score, {outcomes}: {ids})"
        lines = [f"{self._subject(stat)} = {value:.3f}, expected {op} {threshold:g}{apart}"]
        if self.single:
            r = self.results[0]
            if r.mode:
                lines.append(f"  mode: {r.mode}")
            lines.append(f"  why: {one_line(r.explanation)}")
            bad = r.failing_verdicts() if op in (">=", ">") else [v for v in r.verdicts if v.value > 0]
            for v in bad[:10]:
                where = f" (rank {v.rank})" if v.rank is not None and v.item != "chunk" else ""
                if v.chunks:
                    where += f" (chunk{'s' if len(v.chunks) > 1 else ''} {', '.join(map(str, v.chunks))})"
                lines.append(f"  - {v.item} {v.index}{where} [{v.label}] {_short(v.text, 70)!r}")
                if v.reason:
                    lines.append(f"      judge: {one_line(_short(v.reason, 160))}")
                if r.method == "sentence":
                    picked = " ".join(repr(_short(text, 100)) for text in v.extracted) or "none"
                    lines.append(f"      picked: {picked}")
            if len(bad) > 10:
                lines.append(f"  ... and {len(bad) - 10} more")
        else:
            worst = sorted(self.scored, key=lambda r: (r.score, str(r.sample_id)))
            if op in ("<=", "<"):
                worst.reverse()
            lines.append("  worst samples:")
            for r in worst[:5]:
                lines.append(f"  - {r.sample_id}: {r.score:.3f}  {one_line(_short(r.explanation, 140))}")
        return "\n".join(lines)

    def _failure(self, op: str, threshold: float) -> str:
        return self.failure_message(self.stat, self.value, op, threshold)

    def _record(self, op: str, threshold: float, passed: bool) -> None:
        self.record(self.stat, self.value, op, threshold, passed)

    def record(self, stat: str, value: float, op: str, threshold: float, passed: bool) -> None:
        self.compared = True
        scope = current_test.get()
        if scope is None:
            return
        results = self.results
        first = results[0]
        row: dict[str, Any] = {
            "nodeid": scope.nodeid,
            "metric": first.metric,
            "method": first.method,
            "stat": stat,
            "score": value if self.scored else None,
        }
        unscored = len(results) - len(self.scored)
        if unscored:
            if self.single:
                row["outcome"] = first.outcome
            else:
                row["no_claims"] = unscored
        # Tuples, not lists: what a run keeps of every comparison to its end holds no container the
        # garbage collector must walk again and again; the report makes them lists (see
        # pytest_ragmetrics.report.build.result_json).
        if self.single:
            judges = first.judges  # the engine's own tuple: one model or none, nothing to sort
            if len(judges) > 1:
                judges = tuple(sorted(set(judges)))
            cached, judge_calls = first.cached, first.judge_calls
        else:
            cached = all(r.cached for r in results)
            judge_calls = sum(r.judge_calls for r in results)
            judges = tuple(sorted({judge for r in results for judge in r.judges}))
        row["op"] = op
        row["threshold"] = threshold
        row["passed"] = passed
        row["cached"] = cached
        row["judge_calls"] = judge_calls
        row["judges"] = judges
        row["explanation"] = first.explanation if self.single else self._failure_or_summary(stat, value)
        # The recorder makes them JSON, with their verdicts only if something shows them, and the
        # place its path as shown.
        row["samples"] = results
        row["where"] = self.where
        scope.record(row)

    def _failure_or_summary(self, stat: str, value: float) -> str:
        missing = self._unscored()
        if missing is not None:
            return missing
        worst = min(self.scored, key=lambda r: (r.score, str(r.sample_id)))
        n = len(self.scored)
        text = f"{stat} {value:.3f} over {n} samples; lowest {worst.sample_id}: {worst.score:.3f}"
        unscored = self.unscored
        if unscored:
            text += f"; {len(unscored)} without a score (no claims): " + ", ".join(
                str(r.sample_id) for r in unscored[:5]
            )
        return text


class Stat(_Comparable):
    """A dataset-level statistic of a :class:`ScoreCheck` (min, quantile, pass rate...)."""

    def __init__(self, check: ScoreCheck, stat: str, value: float) -> None:
        check.compared = True  # deriving a statistic is using the check
        self.check = check
        self.stat = stat
        self.value = value
        # A pass rate lies in [0, 1] whatever the metric; other statistics share the metric's range.
        self.bounded = check.bounded or stat.startswith("pass_rate")

    def __repr__(self) -> str:
        value = f"{self.value:.4g}" if self._unscored() is None else "no score"
        return f"<Stat {self.check.name} {self.stat}={value}>"

    def _subject_name(self) -> str:
        return f"{self.check.name} {self.stat}"

    def _described(self) -> str:
        return self.check._subject(self.stat)

    def _unscored(self) -> str | None:
        return self.check._unscored()

    def _record(self, op: str, threshold: float, passed: bool) -> None:
        self.check.record(self.stat, self.value, op, threshold, passed)

    def _failure(self, op: str, threshold: float) -> str:
        return self.check.failure_message(self.stat, self.value, op, threshold)


def _make_check(
    samples: RagSample | Sequence[RagSample], metric: str, method: str | None, evaluator: Any, depth: int = 2
) -> ScoreCheck:
    __tracebackhide__ = True
    frame = sys._getframe(depth)
    where = (frame.f_code.co_filename, frame.f_lineno)
    batch, single = as_samples(samples)
    scope = current_test.get()
    if evaluator is None and scope is not None:
        evaluator = scope.evaluator
    elif evaluator is None:
        from .engine import get_evaluator

        evaluator = get_evaluator()
    bounded = getattr(evaluator.metric(metric), "bounded", True) is not False
    try:
        if single:
            results = [evaluator.score(batch[0], metric, method)]
        else:
            batch = _with_ids(batch)
            results = evaluator.score_many(batch, metric, method)
    except JudgmentPending as exc:  # a batch export (--rag-batch): the score waits for the batch
        pending = PendingCheck(format_metric(metric, method), exc, where, bounded)
        if scope is not None:
            scope.checks.append(pending)
        return pending  # type: ignore[return-value]  # compares like one, holds no score yet
    check = ScoreCheck(results, single, where)
    check.bounded = bounded
    if scope is not None:
        scope.checks.append(check)
    return check


class PendingCheck(_Threshold):
    """A check whose score waits for judgments written to a batch file (``pytest --rag-batch``).

    Every comparison with a threshold holds (the threshold is still checked), nothing is recorded,
    and the test ends as skipped with a reason naming the batch file: a test with several assertions
    writes the requests of each of them in one run. Reading the score itself raises
    :class:`~pytest_ragmetrics.errors.JudgmentPending`, which skips the test there.
    """

    def __init__(
        self, name: str, pending: JudgmentPending, where: tuple[str, int] | None, bounded: bool
    ) -> None:
        self.name = name
        self.pending = pending
        self.where = where
        self.bounded = bounded
        self.compared = False

    def __repr__(self) -> str:
        return f"<PendingCheck {self.name}: {self.pending.count} judgment(s) in {self.pending.path}>"

    def _holds(self, other: object) -> bool:
        threshold = _threshold(other)
        self.compared = True
        if self.bounded:
            _check_range(self.name, threshold)
        return True

    __ge__ = __gt__ = __le__ = __lt__ = _holds

    def _wait(self) -> Any:
        raise self.pending.with_traceback(None)

    @property
    def score(self) -> float:
        return self._wait()  # type: ignore[no-any-return]

    value = result = results = score

    def __float__(self) -> float:
        return self._wait()  # type: ignore[no-any-return]

    def mean(self) -> PendingCheck:
        return self

    min = max = mean

    def quantile(self, q: float) -> PendingCheck:
        return self

    def pass_rate(self, threshold: float) -> PendingCheck:
        self._holds(threshold)
        return self


def _with_ids(samples: list[RagSample]) -> list[RagSample]:
    import dataclasses

    return [s if s.id is not None else dataclasses.replace(s, id=f"#{i}") for i, s in enumerate(samples)]


def assert_context_precision(
    samples: RagSample | Sequence[RagSample], *, evaluator: Any = None
) -> ScoreCheck:
    """Judge context precision; compare the result with a threshold: ``... >= 0.7``."""
    __tracebackhide__ = True
    return _make_check(samples, "context_precision", None, evaluator)


def assert_context_recall(
    samples: RagSample | Sequence[RagSample], method: str | None = None, *, evaluator: Any = None
) -> ScoreCheck:
    """Judge context recall (``method``: sentence, the default, or claims); compare with a threshold:
    ``... >= 0.8``."""
    __tracebackhide__ = True
    return _make_check(samples, "context_recall", method, evaluator)


def assert_context_relevance(
    samples: RagSample | Sequence[RagSample], method: str | None = None, *, evaluator: Any = None
) -> ScoreCheck:
    """Judge context relevance (``method``: graded, sentence, binary or any); compare with a threshold."""
    __tracebackhide__ = True
    return _make_check(samples, "context_relevance", method, evaluator)


def assert_faithfulness(
    samples: RagSample | Sequence[RagSample], method: str | None = None, *, evaluator: Any = None
) -> ScoreCheck:
    """Judge faithfulness (``method``: supported, the default, or not_contradicted); compare with a
    threshold: ``... >= 0.9``. An answer without claims has no score: the comparison fails saying so."""
    __tracebackhide__ = True
    return _make_check(samples, "faithfulness", method, evaluator)


def assert_answer_relevancy(samples: RagSample | Sequence[RagSample], *, evaluator: Any = None) -> ScoreCheck:
    """Judge answer relevancy; compare with a threshold: ``... >= 0.5``."""
    __tracebackhide__ = True
    return _make_check(samples, "answer_relevancy", None, evaluator)


def assert_answer_correctness(
    samples: RagSample | Sequence[RagSample], method: str | None = None, *, evaluator: Any = None
) -> ScoreCheck:
    """Judge answer correctness (``method``: f1, the default, precision or recall); compare with a
    threshold: ``... >= 0.7``. An answer without claims has no score: the comparison fails saying so."""
    __tracebackhide__ = True
    return _make_check(samples, "answer_correctness", method, evaluator)


def assert_metric(
    samples: RagSample | Sequence[RagSample], metric: str, method: str | None = None, *, evaluator: Any = None
) -> ScoreCheck:
    """The same for any registered metric, including custom ones: ``assert_metric(s, "my_metric") >= 0.5``."""
    __tracebackhide__ = True
    return _make_check(samples, metric, method, evaluator)
