"""Commands over saved JSON reports: ``baseline compare`` and ``report merge``.

``python -m pytest_ragmetrics baseline compare BASELINE CURRENT`` prints how the run that wrote
CURRENT compares with BASELINE, and evaluates regression gates over the comparison.
``python -m pytest_ragmetrics report merge --output MERGED IN [IN ...]`` merges the JSON reports of
the shards of one run (a CI matrix) into the report the whole run would have written, and can
evaluate the aggregate gates and the comparison with a baseline once, over the merged result.

Both exit like pytest: 0 when everything evaluated passed, 1 when a gate failed (for ``merge``, also
when a shard recorded a failing comparison), 4 for a usage error (a malformed gate, a regression gate
without a baseline, a missing, unreadable or invalid report, reports that are not the shards of one
run: see :func:`~pytest_ragmetrics.report.merge.shard_problems`).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import shutil
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import EXIT_USAGE, ConfigError, RagMetricsWarning

__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "add_commands", "run"]

EXIT_OK = 0
EXIT_FAILED = 1
#: The top-level commands this module handles.
COMMANDS = ("baseline", "report")


def _gate_arguments(sub: argparse.ArgumentParser, *, baseline: bool) -> None:
    sub.add_argument(
        "--gates",
        action="store_true",
        help="evaluate the gates configured for pytest here: rag_gates and rag_regression_gates"
        + (", compared with rag_baseline" if baseline else "")
        + " (pytest configuration file of this directory, or RAGMETRICS_* variables)",
    )
    sub.add_argument(
        "--gate",
        action="append",
        metavar="GATE",
        help="an aggregate gate, e.g. 'context_recall mean >= 0.8'; repeatable; replaces rag_gates",
    )
    sub.add_argument(
        "--regression-gate",
        action="append",
        metavar="GATE",
        help="a regression gate, e.g. 'context_precision mean drop <= 0.02 at p < 0.05'; repeatable; "
        "replaces rag_regression_gates",
    )
    sub.add_argument(
        "--allow-inconclusive",
        action="store_true",
        help="let a regression gate pass when its drop (or rise) is beyond the tolerance but the one-sided "
        "test cannot call it significant (inconclusive: fails by default; rag_allow_inconclusive with "
        "--gates)",
    )
    if baseline:
        sub.add_argument(
            "--baseline",
            type=Path,
            metavar="PATH",
            help="compare the merged run with this baseline (a JSON report); replaces rag_baseline",
        )


def add_commands(commands: Any) -> None:
    """Add ``baseline compare`` and ``report merge`` to the ``add_subparsers()`` object ``commands``."""
    baseline = commands.add_parser("baseline", help="compare a run's JSON report with a baseline")
    actions = baseline.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    compare = actions.add_parser(
        "compare", help="print how CURRENT compares with BASELINE; exit 1 when a regression gate fails"
    )
    compare.add_argument("baseline_path", metavar="BASELINE", type=Path, help="the baseline's JSON report")
    compare.add_argument("current_path", metavar="CURRENT", type=Path, help="the JSON report of the run")
    compare.add_argument(
        "--allow-mixed",
        action="store_true",
        help="compare with a baseline scored by another judge model, prompt version, sentence splitter or "
        "judge sampling (temperature, seed, n) (refused by default, as report merge refuses such shards; "
        "the differences are named either way)",
    )
    _gate_arguments(compare, baseline=False)
    report = commands.add_parser("report", help="work with JSON run reports")
    report_actions = report.add_subparsers(dest="action", metavar="ACTION")
    report_actions.required = True
    merge = report_actions.add_parser(
        "merge", help="merge the JSON reports of a run's shards into one; optionally evaluate gates"
    )
    merge.add_argument("--output", "-o", type=Path, required=True, metavar="MERGED", help="merged report")
    merge.add_argument("inputs", nargs="+", type=Path, metavar="IN", help="the shards' JSON reports")
    merge.add_argument(
        "--allow-mixed",
        action="store_true",
        help="merge shards made with different package versions, judge models, prompt versions, "
        "settings that change scores or test and samples files, and compare with a baseline scored "
        "differently (refused by default)",
    )
    merge.add_argument(
        "--allow-partial",
        action="store_true",
        help="merge shards that do not add up to the whole suite (a missing shard; refused by default)",
    )
    _gate_arguments(merge, baseline=True)


class TextWriter:
    """The renderers' line writer over a text stream (no colour)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.fullwidth = min(shutil.get_terminal_size((100, 24)).columns, 120)

    def line(self, s: str = "", **markup: bool) -> None:
        print(s, file=self.out)

    def sep(
        self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
    ) -> None:
        width = fullwidth or self.fullwidth
        print(f" {title} ".center(width, sepchar) if title else sepchar * width, file=self.out)


def _catalog(reports: Iterable[Mapping[str, Any]]) -> Any:
    """The metrics gates may name: the built-in ones and every metric the reports scored."""
    from ..specs import BUILTIN_CATALOG, MetricCatalog, parse_metric_name

    methods = {name: set(m) for name, m in BUILTIN_CATALOG.methods.items()}
    ranked = set(BUILTIN_CATALOG.ranked)
    for report in reports:
        for row in report.get("results") or ():
            try:
                name = parse_metric_name(str(row.get("metric")))
            except ConfigError:
                continue
            methods.setdefault(name.name, set())
            if row.get("method"):
                methods[name.name].add(str(row["method"]))
            if name.k is not None:
                ranked.add(name.name)
    # The built-in metrics lie in [0, 1] here as in a run: a gate they cannot meet is refused alike.
    return MetricCatalog(
        {n: tuple(sorted(m)) for n, m in methods.items()},
        frozenset(ranked),
        BUILTIN_CATALOG.plain,
        BUILTIN_CATALOG.bounded,
    )


def _gate_lines(args: argparse.Namespace, ini: Mapping[str, str]) -> tuple[Sequence[str], Sequence[str], Any]:
    """(aggregate gate lines, regression gate lines, configured settings or None). With ``--gates``,
    ``rag_allow_inconclusive`` and ``rag_allow_mixed_baseline`` of the configuration count too."""
    from ..settings import configured, refuse_empty_lines

    refuse_empty_lines(args.gate, "--gate")
    refuse_empty_lines(args.regression_gate, "--regression-gate")
    settings = configured(ini) if args.gates else None
    gates = args.gate or (settings.gates if settings else ())
    regression = args.regression_gate or (settings.regression_gates if settings else ())
    if settings is not None:
        args.allow_inconclusive = args.allow_inconclusive or settings.allow_inconclusive
        args.allow_mixed = args.allow_mixed or settings.allow_mixed_baseline
    return gates, regression, settings


def _refuse_mixed(report: Mapping[str, Any], command: str) -> None:
    """A usage error when the comparison with the baseline was refused (scored differently)."""
    from .display import baseline_refused

    refused = baseline_refused(report)
    if refused:
        raise ConfigError(
            f"{command}: {refused}\n(--allow-mixed compares anyway; the differences stay named)"
        )


def _warn_scored_twice(reports: Sequence[Mapping[str, Any]], paths: Sequence[Path], command: str) -> None:
    """Say which evaluations the reports score twice, differently: only one of the scores counts."""
    from .merge import scored_twice

    said = scored_twice(reports, [str(path) for path in paths])
    if said:
        warnings.warn(f"{command}: {said}", RagMetricsWarning, stacklevel=2)


def ran_part(report: Mapping[str, Any]) -> bool:
    """Whether the run of ``report`` ran part of the tests it collected (a shard, ``-k``...), as its
    ``summary.suite`` records: a sample it lacks is then not measured, not removed."""
    suite = (report.get("summary") or {}).get("suite")
    return isinstance(suite, Mapping) and int(suite.get("ran", 0)) < int(suite.get("collected", 0))


def _render(report: Mapping[str, Any], out: TextIO) -> None:
    from .closing import controls_failures, judge_check_failures
    from .display import cap_stop
    from .terminal import render_sections

    render_sections(report, TextWriter(out))
    # What else fails the report, so that an exit status of 1 never comes without a word.
    stopped = cap_stop(report)
    lines = [*judge_check_failures(report), *controls_failures(report)]
    for line in [*lines, *([f"ragmetrics: {stopped}"] if stopped else [])]:
        print(line, file=out)


def _compare(args: argparse.Namespace, ini: Mapping[str, str], out: TextIO) -> int:
    from ..baseline import parse_regression_gates
    from ..gates import parse_gates
    from .build import attach_baseline, evaluate_run_gates
    from .display import outcome
    from .load import load_report

    gate_lines, regression_lines, _ = _gate_lines(args, ini)
    baseline = load_report(args.baseline_path, "baseline")
    current = load_report(args.current_path, "report")
    for report, path in ((baseline, args.baseline_path), (current, args.current_path)):
        _warn_scored_twice([report], [path], "baseline compare")
    catalog = _catalog([baseline, current])
    gates = parse_gates(gate_lines, catalog)
    regression = parse_regression_gates(regression_lines, catalog)
    summary = {
        k: v for k, v in (current.get("summary") or {}).items() if k not in ("baseline", "regression_gates")
    }
    partial = ran_part(current)
    # Only the gates evaluated here decide; those the run evaluated itself are in its own report.
    summary["gates"] = evaluate_run_gates(gates, current["results"], partial=partial) if gates else []
    current = {**current, "summary": summary}
    attach_baseline(
        current,
        baseline,
        source=str(args.baseline_path),
        regression_gates=regression,
        partial=partial,
        allow_inconclusive=args.allow_inconclusive,
        allow_mixed=args.allow_mixed,
    )
    _refuse_mixed(current, "baseline compare")
    _render(current, out)
    result = outcome({**current, "results": []})
    return EXIT_OK if result["passed"] else EXIT_FAILED


def _merge(args: argparse.Namespace, ini: Mapping[str, str], out: TextIO) -> int:
    from .._files import write_text_atomic
    from ..baseline import parse_regression_gates
    from ..gates import parse_gates
    from .build import (
        attach_baseline,
        check_replaceable,
        evaluate_run_gates,
        judge_check_section,
    )
    from .display import outcome
    from .json_report import to_json
    from .load import load_report
    from .merge import merge_reports, shard_problems

    gate_lines, regression_lines, settings = _gate_lines(args, ini)
    baseline_path = args.baseline or (Path(settings.baseline) if settings and settings.baseline else None)
    if regression_lines and baseline_path is None:
        raise ConfigError(
            "regression gates need a baseline to compare with: pass --baseline PATH (or set rag_baseline "
            "and use --gates)"
        )
    seen: dict[Path, Path] = {}
    for path in args.inputs:
        try:
            real = path.resolve()
        except (OSError, RuntimeError):  # a symbolic link loop (RuntimeError before Python 3.13): read
            real = path.absolute()  # below, and refused naming it
        first = seen.setdefault(real, path)
        if first is not path:
            raise ConfigError(f"report merge: {str(path)!r} is given twice")
    check_replaceable(args.output, "json", "report merge --output")
    shards = [load_report(path, "report") for path in args.inputs]
    problems = shard_problems(
        shards,
        [str(path) for path in args.inputs],
        allow_mixed=args.allow_mixed,
        allow_partial=args.allow_partial,
    )
    if problems:
        raise ConfigError(
            "report merge: these reports are not the shards of one run:"
            + "".join(f"\n  {problem}" for problem in problems)
            + "\n(--allow-mixed merges shards made with different settings or files, --allow-partial shards "
            "that do not make the whole suite)"
        )
    _warn_scored_twice(shards, args.inputs, "report merge")
    baseline = load_report(baseline_path, "baseline") if baseline_path is not None else None
    catalog = _catalog([*shards, *([baseline] if baseline else [])])
    gates = parse_gates(gate_lines, catalog)
    regression = parse_regression_gates(regression_lines, catalog)
    merged = merge_reports(shards)
    # Shards that do not make the whole suite (--allow-partial): aggregate and regression gates over
    # a metric no shard reached are both skipped, as in a run of selected tests.
    partial = ran_part(merged)
    if gates:
        merged["summary"]["gates"] = evaluate_run_gates(gates, merged["results"], partial=partial)
    summary, check = merged["summary"], merged["summary"].get("judge_check")
    if check is not None:
        summary["judge_check"] = judge_check_section(check, merged["results"], summary["gates"])
    if baseline is not None:
        attach_baseline(
            merged,
            baseline,
            source=str(baseline_path),
            regression_gates=regression,
            partial=partial,
            allow_inconclusive=args.allow_inconclusive,
            allow_mixed=args.allow_mixed,
        )
        _refuse_mixed(merged, "report merge")
    try:
        write_text_atomic(args.output, to_json(merged))
    except OSError as exc:
        raise ConfigError(
            f"cannot write the merged report {str(args.output)!r}: {exc.strerror or exc}"
        ) from None
    result = outcome(merged)
    print(
        f"merged {len(shards)} reports ({result['comparisons']} comparisons, "
        f"{result['comparisons_failed']} failed) into {args.output}",
        file=out,
    )
    _render(merged, out)
    return EXIT_OK if result["passed"] else EXIT_FAILED


def run(args: argparse.Namespace, ini: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """Run ``baseline compare`` or ``report merge``; ``ini`` holds the pytest configuration's values."""
    try:
        if args.command == "baseline":
            return _compare(args, ini, out)
        return _merge(args, ini, out)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
