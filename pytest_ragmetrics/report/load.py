"""Reading a run report back from its file (a baseline, a shard given to ``report merge``): the
file read as JSON, its version and schema checked (:mod:`pytest_ragmetrics.report_schema`), and the
values a run writes checked on top of their types, each problem named with its field.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from stat import S_ISREG
from typing import Any

from ..errors import ConfigError
from ..metrics.answer import NO_CLAIMS
from ..report_schema import check_version, problems_by_field, schema_problems
from ..specs import BUILTIN_CATALOG

__all__ = ["load_report", "report_problems"]

_SHA256 = re.compile(r"[0-9a-f]{64}")


def load_report(path: str | Path, what: str = "baseline") -> dict[str, Any]:
    """Read a JSON run report (a baseline, or a shard's report); :class:`ConfigError` naming the file
    and the problem when it is missing, not JSON, or not a run report this package reads."""
    try:
        # os.stat, not Path.exists: a symbolic link that loops is said to be one, not to be missing.
        if not S_ISREG(os.stat(path).st_mode):  # /dev/zero would be read forever, a FIFO wait for a writer
            raise ConfigError(f"{what} file {str(path)!r} is not a regular file")
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{what} file {str(path)!r} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} file {str(path)!r} is not UTF-8 text: {exc.reason}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"{what} file {str(path)!r} is not JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{what} file {str(path)!r} is nested too deeply to be a run report") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} file {str(path)!r} is not a ragmetrics JSON report (not an object)")
    try:
        check_version(data)
    except ValueError as exc:
        raise ConfigError(f"{what} file {str(path)!r}: {exc}") from None
    results = data.get("results")
    if not isinstance(results, list):
        raise ConfigError(f"{what} file {str(path)!r} has no 'results' list: not a ragmetrics JSON report")
    problems = report_problems(data)
    if problems:
        listed = "".join(f"\n  {problem}" for problem in problems[:_PROBLEMS_SHOWN])
        more = len(problems) - _PROBLEMS_SHOWN
        if more > 0:
            listed += f"\n  ... and {more} more"
        raise ConfigError(f"{what} file {str(path)!r} is not a valid ragmetrics report:{listed}")
    return data


#: Problems listed per invalid report file; the rest are counted.
_PROBLEMS_SHOWN = 10


def _outside_unit(value: Any) -> bool:
    """A number outside [0, 1]; anything else is judged by the schema."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not 0.0 <= float(value) <= 1.0


def _non_finite(value: Any, where: str) -> Iterable[tuple[str, str]]:
    """``(field, what is wrong)`` for every NaN or infinity anywhere in ``value`` (Python writes them
    as NaN and Infinity), and every whole number too large for a float (JSON has no bound on digits:
    it would overflow when read)."""
    if isinstance(value, float) and not math.isfinite(value):
        yield where, f"is {value!r}, expected a finite number"
    elif isinstance(value, int) and abs(value) > sys.float_info.max:
        yield where, f"is a whole number of {len(str(abs(value)))} digits, expected a finite number"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{where}[{index}]")


def _bounded(metric: str) -> bool:
    """Whether ``metric``'s scores lie in [0, 1]: every built-in metric's do. Other metrics are
    only required to be finite (a registered metric may say ``bounded = False``)."""
    return metric.partition("@")[0] in BUILTIN_CATALOG.bounded


def _outcome_problems(entry: Mapping[str, Any], where: str) -> list[str]:
    """What is wrong with the ``outcome`` of a comparison or a sample: a run writes only
    ``no_claims``, and only with a null score. Statistics count such an entry apart from the scored
    ones, so a word nobody checked must not decide which side it falls on."""
    if "outcome" not in entry:
        return []
    outcome, score = entry["outcome"], entry.get("score")
    if not isinstance(outcome, str):
        return []  # the schema's type check names it
    if outcome != NO_CLAIMS:
        return [
            f'{where}.outcome is {json.dumps(outcome)[:40]}, expected "{NO_CLAIMS}" (the only outcome a '
            "run writes)"
        ]
    if score is not None:
        return [
            f'{where}.outcome is "{NO_CLAIMS}" beside the score {score!r}; a run writes an outcome only '
            "with a null score"
        ]
    return []


def report_problems(report: Mapping[str, Any]) -> list[str]:
    """What makes ``report`` unusable as a baseline or a shard, each problem with its field:
    ``results[3].samples[0].score is 5.0, outside [0, 1] (context_precision)``. Empty when none.

    The types are those the report's ``TypedDict`` schema declares
    (:func:`~pytest_ragmetrics.report_schema.schema_problems`); on top of them, every number finite,
    every built-in metric's score in [0, 1] and the suite's digests hexadecimal.
    """
    non_finite = list(_non_finite(report, ""))
    if non_finite:  # a NaN would also fail every range check below: one message each
        # One in a field that holds no number (a sample's id) is said to be of the wrong type, as
        # the schema says it: "expected a finite number" would send the reader to the wrong fix.
        mistyped = problems_by_field(dict(report))
        return [f"{where} {mistyped.get(where, what)}" for where, what in non_finite]
    problems = schema_problems(dict(report))
    for r, row in enumerate(report.get("results") or ()):
        if not isinstance(row, dict):
            continue
        metric = row.get("metric")
        bounded = isinstance(metric, str) and _bounded(metric)
        problems += _outcome_problems(row, f"results[{r}]")
        samples = row.get("samples")
        for i, sample in enumerate(samples if isinstance(samples, list) else ()):
            if not isinstance(sample, dict):
                continue
            # A run writes a null score only beside the outcome that says why (an answer without claims).
            if sample.get("score", 0) is None and not sample.get("outcome"):
                problems.append(f"results[{r}].samples[{i}].score is null without an outcome saying why")
            problems += _outcome_problems(sample, f"results[{r}].samples[{i}]")
            # The labels' score of a sample too: the judge-corrected means are made of it.
            for name in ("score", "labelled") if bounded else ():
                if _outside_unit(sample.get(name)):
                    problems.append(
                        f"results[{r}].samples[{i}].{name} is {sample[name]!r}, outside [0, 1] ({metric})"
                    )
        if bounded and _outside_unit(row.get("score")):  # every statistic of such scores is too
            problems.append(f"results[{r}].score is {row['score']!r}, outside [0, 1] ({metric})")
    summary = report.get("summary")
    suite = summary.get("suite") if isinstance(summary, dict) else None
    if isinstance(suite, dict):  # what a run writes: all four, whole counts, ran <= collected
        for name in ("collected", "collected_digest", "ran", "ran_digest"):
            if name not in suite:
                problems.append(f"summary.suite.{name} is missing")
        counts = {n: suite.get(n) for n in ("collected", "ran")}
        for name, count in counts.items():
            if isinstance(count, int) and not isinstance(count, bool) and count < 0:
                problems.append(f"summary.suite.{name} is {count}, expected a count of tests")
        collected, ran = counts["collected"], counts["ran"]
        if isinstance(collected, int) and isinstance(ran, int) and ran > collected >= 0:
            problems.append(f"summary.suite.ran is {ran}, more than the {collected} tests collected")
    for name in ("collected_digest", "ran_digest"):
        value = suite.get(name) if isinstance(suite, dict) else None
        if isinstance(value, str):
            try:
                int(value, 16)
            except ValueError:
                problems.append(f"summary.suite.{name} is {json.dumps(value)[:40]}, expected hex digits")
    controls = summary.get("judge_controls") if isinstance(summary, dict) else None
    kinds = controls.get("kinds") if isinstance(controls, dict) else None
    for k, kind in enumerate(kinds if isinstance(kinds, list) else ()):
        judged, positive = (kind.get(n) if isinstance(kind, dict) else None for n in ("judged", "positive"))
        if isinstance(judged, int) and isinstance(positive, int) and not 0 <= positive <= judged:
            where = f"summary.judge_controls.kinds[{k}].positive"
            problems.append(f"{where} is {positive}, expected a count of the {judged} judged")
        decided = kind.get("decided") if isinstance(kind, dict) else None
        if isinstance(decided, list) and all(isinstance(d, dict) for d in decided):
            ids = {d.get("id") for d in decided}
            says = (len(ids), sum(d.get("positive") is True for d in decided))
            if len(ids) != len(decided) or says != (judged, positive):
                where = f"summary.judge_controls.kinds[{k}].decided"
                problems.append(
                    f"{where} lists {len(decided)} controls ({len(ids)} distinct, {says[1]} positive), "
                    f"expected the {judged} judged, {positive} positive"
                )
    floors = controls.get("floors") if isinstance(controls, dict) else None
    for f, floor in enumerate(floors if isinstance(floors, list) else ()):
        spec = floor.get("spec") if isinstance(floor, dict) else None
        if isinstance(spec, str):
            from ..calibration.check import parse_floor

            try:
                parse_floor(spec)
            except ConfigError as exc:  # its message quotes the spec and says what is wrong with it
                problems.append(f"summary.judge_controls.floors[{f}].spec: {exc}")
    tallies = summary.get("judge_answers") if isinstance(summary, dict) else None
    for kind, counts in tallies.items() if isinstance(tallies, dict) else ():
        for answer, count in counts.items() if isinstance(counts, dict) else ():
            if isinstance(count, int) and count < 0:
                where = f"summary.judge_answers.{kind}.{answer}"
                problems.append(f"{where} is {count}, expected a count of verdicts")
    files = suite.get("files") if isinstance(suite, dict) else None
    for path, digest in (files or {}).items() if isinstance(files, dict) else ():
        if isinstance(digest, str) and not _SHA256.fullmatch(digest):
            problems.append(
                f"summary.suite.files[{json.dumps(path)[:80]}] is {json.dumps(digest)[:40]}, expected a "
                "SHA-256 digest (64 hex digits)"
            )
            break  # one is enough to name the damage
    return problems
