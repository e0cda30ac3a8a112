"""Merging the reports of the shards of one run (a CI matrix, ``report merge``), and a partial
run's report into the baseline it replaces part of.

Pure functions of reports read back from JSON: the comparisons are pooled and every figure is
recomputed by :mod:`.build` as the whole run would have made it. Before merging, :func:`shard_problems`
says why the reports are not the shards of one run, and :func:`scored_twice` names an evaluation two
shards scored differently.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..baseline import prompt_name, provenance, run_scores, scored_differently
from ..calibration.controls import merge_controls
from ..calibration.degenerate import tally_warnings
from ..judge.stats import COUNTERS
from ..specs import format_metric, format_number, sampling_temperature
from .build import REPORT_VERSION, comparison_counts, label_summary, metric_summaries, misled_answers
from .json_report import result_order, sort_results

__all__ = ["keep_untouched_entries", "merge_reports", "scored_twice", "shard_problems"]


def _merged_judge(judges: list[Mapping[str, Any]]) -> dict[str, Any]:
    models = sorted({m.strip() for j in judges for m in str(j.get("model") or "").split(",") if m.strip()})
    merged: dict[str, Any] = {"model": ", ".join(models) or None}
    for key in ("cache_mode", "cache_dir", "store_dir"):
        merged[key] = next((j[key] for j in judges if j.get(key) is not None), None)
    for key in COUNTERS:
        merged[key] = sum(int(j.get(key) or 0) for j in judges)
    seconds = [j["seconds"] for j in judges if isinstance(j.get("seconds"), (int, float))]
    if seconds:
        merged["seconds"] = sum(seconds)
    costs = [j.get("cost") for j in judges]
    merged["cost"] = None if not costs or any(c is None for c in costs) else sum(costs)
    partial = next((j["partial"] for j in judges if isinstance(j.get("partial"), str)), None)
    if partial is not None:  # a shard's figures that leave some judging out leave it out of the sum
        merged["partial"] = partial
    capped = [j for j in judges if "refused_calls" in j]
    if capped:  # a shard the spending cap stopped stops the merged run too
        merged["refused_calls"] = sum(int(j.get("refused_calls") or 0) for j in capped)
        for key in ("max_judge_calls", "max_judge_tokens"):
            caps = {j.get(key) for j in capped}
            merged[key] = caps.pop() if len(caps) == 1 else None  # shards capped alike, else unknown
    return merged


def merge_reports(reports: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One run report from the reports of the shards of one run (a CI matrix, say).

    Comparisons are pooled and sorted and the per-metric figures recomputed from them, exactly as the
    whole run would have; the judge's figures are summed. The shards' own gate outcomes are dropped:
    each saw only part of the run. Evaluate gates over the merged report instead (``report merge
    --gates``). A shard cannot know which judgment store entries the others used, so
    ``unused_store_entries`` is left out. Every shard checks the judge on the whole labelled set, so
    the run's judge check is theirs: the first that failed, if one did (what rests on its failed
    floors is left for :func:`judge_check_section` over the merged comparisons and gates). Each shard
    drew its controls from the samples it scored: the run's controls are all of them (see
    :func:`~pytest_ragmetrics.calibration.controls.merge_controls`). The judge's answers are tallied
    over all shards (a judgment two shards both made counts in each) and warned about as one run's.
    """
    rows = [dict(row) for report in reports for row in report.get("results") or ()]
    versions = sorted({str(r["plugin_version"]) for r in reports if r.get("plugin_version")})
    summaries = [r.get("summary") or {} for r in reports]
    judges = [s["judge"] for s in summaries if isinstance(s.get("judge"), Mapping)]
    summary: dict[str, Any] = {
        "metrics": metric_summaries(rows),
        "gates": [],
        "comparisons": comparison_counts(rows),
    }
    if judges:
        summary["judge"] = _merged_judge(judges)
    labels = label_summary(rows)
    if labels:
        summary["labels"] = labels
    misled = misled_answers(rows)
    if misled:
        summary["misled"] = misled
    errors = [dict(e) for s in summaries for e in s.get("errors") or () if isinstance(e, Mapping)]
    if errors:
        summary["errors"] = sorted(errors, key=lambda e: (str(e.get("nodeid")), str(e.get("when"))))
    suites = [s["suite"] for s in summaries if isinstance(s.get("suite"), Mapping)]
    if suites and len(suites) == len(summaries):
        from .._run import add_digests  # here, not on top: it imports pytest, which a merge need not load

        summary["suite"] = {
            "collected": suites[0].get("collected"),
            "collected_digest": suites[0].get("collected_digest"),
            "ran": sum(int(s.get("ran", 0)) for s in suites),
            "ran_digest": add_digests(str(s.get("ran_digest")) for s in suites),
        }
        files: dict[str, str] = {}
        for suite in suites:
            for path, digest in (suite.get("files") or {}).items():
                files.setdefault(path, digest)
        if files:
            summary["suite"]["files"] = dict(sorted(files.items()))
    scorings = [s.get("scoring") for s in summaries]
    if scorings and all(isinstance(v, Mapping) and v == scorings[0] for v in scorings):
        summary["scoring"] = dict(scorings[0])  # type: ignore[arg-type]
    controls = [s["judge_controls"] for s in summaries if isinstance(s.get("judge_controls"), Mapping)]
    if controls:
        summary["judge_controls"] = merge_controls(controls)
    tallies: dict[str, dict[str, int]] = {}
    for s in summaries:
        answers = s.get("judge_answers")
        for kind, counts in answers.items() if isinstance(answers, Mapping) else ():
            into = tallies.setdefault(kind, {})
            for answer, count in counts.items():
                into[answer] = into.get(answer, 0) + count
    tallies = {kind: dict(sorted(tallies[kind].items())) for kind in sorted(tallies)}
    if tallies:
        summary["judge_answers"] = tallies
    # A judge that does not discriminate, over the whole run's answers: a shard may have had too
    # few to tell. The labelled samples' warnings are each shard's own, said once.
    warnings = tally_warnings(tallies)
    for s in summaries:
        for warning in s.get("judge_warnings") or ():
            labelled = isinstance(warning, Mapping) and warning.get("kind") == "labelled_sample"
            if labelled and warning not in warnings:
                warnings.append(dict(warning))
    if warnings:
        summary["judge_warnings"] = warnings
    checks = [s["judge_check"] for s in summaries if isinstance(s.get("judge_check"), Mapping)]
    if checks:
        check = next((c for c in checks if not c.get("passed")), checks[0])
        floors = [{k: v for k, v in f.items() if k != "resting_on"} for f in check.get("floors") or ()]
        summary["judge_check"] = {**check, "floors": floors}
    tests = [s["tests"] for s in summaries if isinstance(s.get("tests"), Mapping)]
    if tests:
        summary["tests"] = {k: sum(int(t.get(k, 0)) for t in tests) for k in ("passed", "failed")}
    merged: dict[str, Any] = {"version": REPORT_VERSION}
    if versions:
        merged["plugin_version"] = ", ".join(versions)
    merged["results"] = [dict(r) for r in sort_results(rows)]
    merged["summary"] = summary
    summary["provenance"] = provenance(merged)
    return merged


def keep_untouched_entries(
    earlier: Mapping[str, Any], report: Mapping[str, Any], replaced: Iterable[str]
) -> tuple[dict[str, Any] | None, int, list[str]]:
    """What a partial run saves as the baseline: ``report`` merged (as :func:`merge_reports` merges
    shards) with the comparisons of ``earlier``, the baseline file's, whose tests are not in
    ``replaced`` (the tests the run ran), and the errors of those tests; how many tests' entries
    were kept; and how the run's scores were made differently from the kept entries'. A partial
    ``--snapshot-update`` of syrupy keeps the snapshots of the tests it did not run in the same way;
    a full run writes the baseline whole, without the tests that are gone.

    With a difference (another judge model, say) there is no baseline to save (``None``): the merged
    file would mix the two, and every later comparison with it would be refused, as ``report merge``
    refuses such shards."""
    replaced = set(replaced)
    kept = [row for row in earlier.get("results") or () if row.get("nodeid") not in replaced]
    if not kept:
        return dict(report), 0, []
    summary = earlier.get("summary") or {}
    errors = [
        e for e in summary.get("errors") or () if isinstance(e, Mapping) and e.get("nodeid") not in replaced
    ]
    part: dict[str, Any] = {"results": kept, "summary": {"errors": errors}}
    for name in ("judge", "scoring"):  # the scoring settings are kept only when the two runs' agree
        if name in summary:
            part["summary"][name] = summary[name]
    if earlier.get("plugin_version"):
        part["plugin_version"] = earlier["plugin_version"]
    count = len({row.get("nodeid") for row in kept})
    differences = scored_differently(part, report)
    if differences:
        return None, count, differences
    return merge_reports([report, part]), count, []


#: Evaluations scored twice that a warning lists; the rest are counted.
_TWICE_SHOWN = 10


def scored_twice(reports: Sequence[Mapping[str, Any]], names: Sequence[str]) -> str | None:
    """A warning naming every evaluation the reports ``names`` (one per report) score differently in
    two places, or ``None``: one metric's score of one sample's content (its ``key``) that two
    comparisons give two values. Each evaluation counts once, from the first comparison in the
    report's order (see :func:`_distinct_samples`), so the other score is left out of every figure.

    Legitimate when the judges differed (two tests asking different models), or when the judge
    sampled above temperature 0 (shards judging live each drew their own answer); otherwise the
    report was edited, or a server answered one request two ways. The warning says which.
    """
    pairs = zip(reports, names, strict=True)
    tagged = sorted(
        ((row, name) for report, name in pairs for row in report.get("results") or ()),
        key=lambda pair: result_order(pair[0]),
    )
    # (metric, method, key) -> every score it was given, the first the one counted, with where from
    found: dict[tuple[str, str | None, str], list[tuple[Any, str, Mapping[str, Any]]]] = {}
    for row, name in tagged:
        if row.get("xfail"):
            continue
        for sample in row.get("samples") or ():
            key = sample.get("key")
            if isinstance(key, str) and key:
                score = sample.get("score")
                value = sample.get("outcome") if score is None else float(score)
                found.setdefault((str(row["metric"]), row.get("method"), key), []).append(
                    (value, f"{name} ({row.get('nodeid')})", sample)
                )
    lines = []
    for (metric, method, key), given in found.items():
        values = {value for value, _, _ in given}
        if len(values) < 2:
            continue
        sid = next((s.get("id") for _, _, s in given if s.get("id") is not None), None)
        shown = ", ".join(
            f"{format_number(v) if isinstance(v, float) else v} in {where}" for v, where, _ in given
        )
        judges = {tuple(s.get("judges") or ()) for _, _, s in given}
        samplings = {str(s.get("sampling")) for _, _, s in given if s.get("sampling")}
        temperatures = [sampling_temperature(text) for text in samplings]
        if len(judges) > 1 or len(samplings) > 1:
            why = "judged by different models or sampling"
        elif any(t is not None and t > 0 for t in temperatures):
            why = f"judged at {next(iter(samplings))}, where each live judging draws its own answer"
        else:
            why = "judged alike: an edited report, or a judge that answered one request two ways"
        what = f"sample {sid!r}, evaluation {key[:12]}" if sid is not None else f"evaluation {key[:12]}"
        lines.append(f"{format_metric(metric, method)}: {what}: {shown} ({why})")
    if not lines:
        return None
    listed = "".join(f"\n  {line}" for line in lines[:_TWICE_SHOWN])
    if len(lines) > _TWICE_SHOWN:
        listed += f"\n  ... and {len(lines) - _TWICE_SHOWN} more"
    return (
        f"{len(lines)} evaluation(s) scored differently in two places; each counts once, with the first "
        f"score listed:{listed}"
    )


def _shown_values(values: Mapping[str, Any]) -> str:
    return ", ".join(f"{name} {value}" for name, value in values.items())


def shard_problems(
    reports: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    *,
    allow_mixed: bool = False,
    allow_partial: bool = False,
) -> list[str]:
    """Why the reports ``names`` (one per report) are not the shards of one run, or ``[]``.

    Always: a sample id naming different samples in two shards (another commit's shard, say).
    Unless ``allow_mixed``: different package versions, settings that change scores
    (``summary.scoring``), per metric, different judge models, prompt versions or sentence
    splitters, or different contents of a file the shards were collected from (a test file, a golden
    set: ``summary.suite.files``). Unless ``allow_partial``: shards that collected different suites,
    a shard without a record of its tests, or tests of the suite that ran in no shard (a missing
    shard) or in several.
    """
    problems: list[str] = []
    # A sample id naming two different samples: its evaluation's content key differs.
    contents: dict[str, dict[str, set[str]]] = {}
    metrics_of: dict[str, set[str]] = {}
    facts: dict[tuple[str, str, str], dict[str, str]] = {}
    for report, name in zip(reports, names, strict=True):
        for key, scores in run_scores(report).items():
            label = format_metric(*key)
            for sid, evaluation in scores.evaluations.items():
                contents.setdefault(sid, {}).setdefault(str(evaluation), set()).add(name)
                metrics_of.setdefault(sid, set()).add(label)
            for what, values in (
                ("judge models", scores.judges),
                ("sentence splitter", scores.splitters),
            ):
                if values:
                    facts.setdefault((label, what, ""), {})[name] = ", ".join(sorted(values))
            # Prompt by prompt: a shard whose answers all made no claim sent no verdict prompt, and
            # contradicts no shard that did.
            prompts: dict[str, list[str]] = {}
            for version in scores.prompt_versions:
                prompts.setdefault(prompt_name(version), []).append(version)
            for prompt, sent in prompts.items():
                facts.setdefault((label, "prompt versions", prompt), {})[name] = ", ".join(sorted(sent))
    for sid, by_key in sorted(contents.items()):
        files = sorted({n for ns in by_key.values() for n in ns})
        if len(by_key) > 1 and len(files) > 1:  # within one report, the baseline's "ambiguous"
            problems.append(
                f"sample id {sid!r} names different samples in {', '.join(files)} "
                f"({', '.join(sorted(metrics_of[sid]))}): shards of different commits?"
            )
    if not allow_mixed:
        pairs = list(zip(reports, names, strict=True))
        versions = {n: r.get("plugin_version") for r, n in pairs if r.get("plugin_version")}
        if len(set(versions.values())) > 1:
            problems.append(f"written by different pytest-ragmetrics versions: {_shown_values(versions)}")
        scorings = {n: (r.get("summary") or {}).get("scoring") for r, n in pairs}
        known = {n: v for n, v in scorings.items() if isinstance(v, Mapping)}
        for setting in sorted({k for v in known.values() for k in v}):
            written = {n: json.dumps(v.get(setting)) for n, v in known.items()}
            if len(set(written.values())) > 1:
                problems.append(f"setting {setting} differs: {_shown_values(written)}")
        for (label, what, _), by_name in sorted(facts.items()):
            if len(set(by_name.values())) > 1:
                problems.append(f"{label}: {what} differ: {_shown_values(by_name)}")
        problems += _file_problems(reports, names)
    if not allow_partial:
        problems += _suite_problems(reports, names)
    return problems


def _file_problems(reports: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    """The files the shards were collected from that differ between them (another commit's shard)."""
    digests: dict[str, dict[str, str]] = {}
    for report, name in zip(reports, names, strict=True):
        suite = (report.get("summary") or {}).get("suite")
        files = suite.get("files") if isinstance(suite, Mapping) else None
        for path, digest in (files or {}).items():
            digests.setdefault(path, {})[name] = digest
    # A file only some shards collected (shards named by path) is the suite check's business.
    changed = sorted(path for path, by_name in digests.items() if len(set(by_name.values())) > 1)
    if not changed:
        return []
    shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    return [f"the shards were collected from different versions of {shown}: shards of different commits?"]


def _suite_problems(reports: Sequence[Mapping[str, Any]], names: Sequence[str]) -> list[str]:
    from .._run import add_digests

    found = {n: (r.get("summary") or {}).get("suite") for r, n in zip(reports, names, strict=True)}
    suites: dict[str, Mapping[str, Any]] = {n: s for n, s in found.items() if isinstance(s, Mapping)}
    missing = [n for n in found if n not in suites]
    if missing:
        return [
            f"{', '.join(missing)} record(s) no test list (written by an older version?): "
            "cannot tell whether a shard is missing"
        ]
    collected = {n: (s["collected"], s["collected_digest"]) for n, s in suites.items()}
    if len(set(collected.values())) > 1:
        counts = {n: f"{c} tests" for n, (c, _) in collected.items()}
        return [
            f"the shards collected different test suites ({_shown_values(counts)}): shard by "
            "deselection (-k, -m, a splitting plugin) over one suite for the merge to check it"
        ]
    total, digest = next(iter(collected.values()))
    ran = sum(int(s["ran"]) for s in suites.values())
    ran_digest = add_digests(str(s["ran_digest"]) for s in suites.values())
    if ran < total:
        return [
            f"{total - ran} of the {total} tests collected ran in no shard: a shard is missing or "
            "stopped early"
        ]
    if ran > total or ran_digest != digest:
        return [f"the shards ran {ran} tests of the {total} collected: some ran in more than one shard"]
    return []
