"""Comparing a run with a baseline: matching, statistics, comparability, regression gates.

Runs are scored by the real engine with a scripted judge: a chunk is useful (and relevant) when it
says "good", so the contexts given to each sample decide its scores exactly.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import answer_judge
import pytest

from pytest_ragmetrics import claim_judgments, judgments
from pytest_ragmetrics.baseline import (
    baseline_form,
    compare_reports,
    evaluate_regression_gates,
    find_metric,
    parse_regression_gate,
    parse_regression_gates,
    run_scores,
)
from pytest_ragmetrics.engine import Evaluator
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.judge.base import JudgeRequest, ScriptedJudge
from pytest_ragmetrics.report.display import regression_gate_detail, sample_changes
from pytest_ragmetrics.report.json_report import to_json
from pytest_ragmetrics.report.load import load_report
from pytest_ragmetrics.sample import RagSample
from pytest_ragmetrics.settings import Settings

GOOD, BAD = "This chunk is good.", "This chunk is off topic."
#: Contexts giving context precision 1.0, 0.5 and 0.0.
TOP, SECOND, NONE = [GOOD, BAD], [BAD, GOOD], [BAD, BAD]


def script(request: JudgeRequest) -> dict[str, Any]:
    payload = json.loads(request.messages[-1]["content"])
    if request.kind == judgments.PRECISION:
        return {
            "reason": "says good" if "good" in payload["chunk"] else "no",
            "useful": "good" in payload["chunk"],
        }
    if request.kind == judgments.RECALL:
        joined = " ".join(payload["contexts"].values())
        return {
            f"sentence_{i}": {"reason": "r", "attributed": "good" in joined}
            for i in payload["reference_sentences"]
        }
    if request.kind == judgments.SENTENCES:
        chosen = [int(i) for i, text in payload["sentences"].items() if "good" in text]
        return {"reason": "r", "relevant_sentences": chosen}
    return {"reason": "r", "rating": 2 if "good" in payload["chunk"] else 0}


def sample(sid: str, contexts: Sequence[str], question: str | None = None) -> RagSample:
    return RagSample(
        question or f"What does chunk {sid} say?",
        list(contexts),
        ground_truth=f"Chunk {sid} is good.",
        id=sid,
    )


def run(
    samples: Sequence[RagSample],
    metrics: Sequence[tuple[str, str | None]] = (("context_precision", None),),
    *,
    judge_model: str = "scripted-model",
    seed: int | None = 0,
) -> dict[str, Any]:
    """A run report with one dataset-level comparison per metric, as the plugin records it."""
    rows = []
    settings = Settings(cache="off", judge_model=judge_model, seed=seed)
    with Evaluator(settings, judge=ScriptedJudge(script)) as evaluator:
        for metric, method in metrics:
            results = evaluator.score_many(samples, metric, method)
            rows.append(
                {
                    "nodeid": f"tests/test_rag.py::test_{metric}",
                    "metric": metric,
                    "method": method,
                    "stat": "mean",
                    "score": sum(r.score for r in results) / len(results),
                    "op": ">=",
                    "threshold": 0.0,
                    "passed": True,
                    "judges": sorted({j for r in results for j in r.judges}),
                    "samples": [r.to_json() for r in results],
                }
            )
    return {"version": 1, "results": rows, "summary": {}}


def golden(contexts: Sequence[Sequence[str]]) -> list[RagSample]:
    return [sample(f"q{i + 1:02d}", c) for i, c in enumerate(contexts)]


def precision(comparison: Mapping[str, Any]) -> Mapping[str, Any]:
    entry = find_metric(comparison, "context_precision", None)
    assert entry is not None
    return entry


BASE = golden([TOP] * 10 + [SECOND] * 5)


def test_identical_runs_give_delta_zero_and_no_regression() -> None:
    entry = precision(compare_reports(run(BASE), run(BASE)))
    assert entry["comparable"] and entry["n"] == 15
    assert entry["delta"] == 0.0 and entry["ci_low"] == 0.0 and entry["ci_high"] == 0.0
    assert entry["p_value"] == 1.0
    assert entry["verdict"] == "unchanged"
    assert entry["regressed"] == [] and entry["improved"] == []
    assert entry["baseline_mean"] == entry["current_mean"] == pytest.approx(25 / 30)


def test_a_broad_drop_over_15_samples_is_significant() -> None:
    current = golden([SECOND] * 10 + [NONE] * 5)  # every sample loses half a point
    entry = precision(compare_reports(run(BASE), run(current)))
    assert entry["n"] == 15
    assert entry["delta"] == pytest.approx(-0.5)
    assert entry["ci_low"] == entry["ci_high"] == pytest.approx(-0.5)  # every pair moved the same
    assert entry["p_value"] == pytest.approx(2 / 2**15)  # exact: only all-negative or all-positive
    assert entry["test"] == {"method": "exact", "permutations": 2**15, "seed": 0}
    assert entry["verdict"] == "worse"
    assert [s["id"] for s in entry["regressed"]] == ["q01", "q02", "q03", "q04", "q05"]
    assert entry["max_drop"] == pytest.approx(0.5)


def test_a_single_collapse_is_not_significant_but_is_the_largest_drop() -> None:
    current = golden([NONE] + [TOP] * 9 + [SECOND] * 5)
    entry = precision(compare_reports(run(BASE), run(current)))
    assert entry["delta"] == pytest.approx(-1 / 15)
    assert entry["p_value"] == 1.0
    assert entry["verdict"] == "not significant"
    assert entry["max_drop"] == pytest.approx(1.0)
    assert entry["regressed"] == [{"id": "q01", "baseline": 1.0, "current": 0.0, "delta": -1.0}]
    assert entry["ci_low"] < entry["delta"] <= entry["ci_high"] <= 0.0


def test_improvements_are_listed_most_improved_first() -> None:
    current = golden([TOP] * 12 + [SECOND] * 3)
    entry = precision(compare_reports(run(BASE), run(current)))
    assert entry["delta"] == pytest.approx(1 / 15)
    assert [s["id"] for s in entry["improved"]] == ["q11", "q12"]


def test_new_removed_and_changed_samples_are_counted_never_matched() -> None:
    current = [
        *golden([TOP] * 12)[:12],  # q13..q15 removed
        sample("q16", TOP),  # new
    ]
    current[0] = sample("q01", NONE, question="A different question?")  # changed: another question
    entry = precision(compare_reports(run(BASE), run(current)))
    assert entry["new"] == ["q16"]
    assert entry["removed"] == ["q13", "q14", "q15"]
    assert entry["changed"] == ["q01"]
    assert entry["n"] == 11  # q02..q12
    assert entry["regressed"] == []  # q01 dropped to 0 but is a different test case


def test_one_id_naming_two_evaluations_is_ambiguous_and_left_out() -> None:
    twice = run(BASE)
    twice["results"].append({**twice["results"][0], "nodeid": "tests/test_rag.py::test_other"})
    twice["results"][1] = json.loads(json.dumps(twice["results"][1]))
    twice["results"][1]["samples"] = twice["results"][1]["samples"][:1]
    twice["results"][1]["samples"][0].update(key="another-retrieval", score=0.0)
    entry = precision(compare_reports(run(BASE), twice))
    assert entry["ambiguous"] == ["q01"]
    assert entry["n"] == 14


def test_xfail_comparisons_are_not_part_of_the_run() -> None:
    current = run(BASE)
    weak = run(golden([NONE] * 15))["results"][0]
    current["results"].append({**weak, "nodeid": "tests/test_weak.py::test_weak", "xfail": True})
    assert precision(compare_reports(run(BASE), current))["verdict"] == "unchanged"


def test_another_judge_model_is_not_comparable() -> None:
    entry = precision(compare_reports(run(BASE), run(BASE, judge_model="other-model")))
    assert not entry["comparable"]
    assert entry["verdict"] == "not comparable"
    assert entry["reason"] == "judged by scripted-model in the baseline, other-model now"
    assert entry["delta"] is None and entry["p_value"] is None


def test_another_judge_seed_is_not_comparable_and_a_report_that_does_not_say_contradicts_none() -> None:
    entry = precision(compare_reports(run(BASE), run(BASE, seed=7)))
    assert not entry["comparable"]
    assert entry["reason"] == (
        "judge sampling temperature 0, seed 0, n 1 in the baseline, temperature 0, seed 7, n 1 now"
    )
    older = run(BASE)  # written before samples recorded their sampling, and without summary.scoring
    for s in older["results"][0]["samples"]:
        del s["sampling"]
    assert precision(compare_reports(older, run(BASE, seed=7)))["comparable"]
    older["summary"]["scoring"] = {"temperature": 0.0, "graded_temperature": 0.1, "seed": 0, "judge_n": 1}
    assert not precision(compare_reports(older, run(BASE, seed=7)))["comparable"]


def test_a_baseline_whose_judge_was_asked_otherwise_outside_the_key_is_named_not_refused() -> None:
    """Response format, token limit and provider are no part of a judgment's key: named, compared."""
    scoring = {"judge_provider": "openai", "response_format": "auto", "judge_max_tokens": None, "seed": 0}
    baseline, current = run(BASE), run(BASE)
    baseline["summary"]["scoring"] = scoring
    current["summary"]["scoring"] = {**scoring, "response_format": "json_object", "judge_max_tokens": 4096}
    comparison = compare_reports(baseline, current)
    assert comparison["refused"] is None and precision(comparison)["comparable"]
    assert [line.split(" (")[0] for line in comparison["differences"]] == [
        'setting response_format: "auto" in the baseline, "json_object" now',
        "setting judge_max_tokens: null in the baseline, 4096 now",
    ]
    assert "no part of a judgment's key" in comparison["differences"][0]
    del current["summary"]["scoring"]["judge_provider"]  # a report that does not say contradicts none
    current["summary"]["scoring"]["response_format"] = "auto"
    assert compare_reports(baseline, current)["differences"] == [comparison["differences"][1]]


def test_another_prompt_version_is_not_comparable(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = run(BASE)
    kind = judgments.RETRIEVAL_KINDS[judgments.PRECISION]
    prompt = kind.prompt
    monkeypatch.setitem(
        judgments.RETRIEVAL_KINDS,
        judgments.PRECISION,
        dataclasses.replace(kind, prompt=judgments.Prompt("precision-99", prompt.system)),
    )
    entry = precision(compare_reports(baseline, run(BASE)))
    assert not entry["comparable"]
    assert entry["reason"] == f"prompt versions {prompt.version} in the baseline, precision-99 now"


def answer_run(answers: Sequence[str]) -> dict[str, Any]:
    """A run report of faithfulness over one sample per answer, judged by the answer tests' judge."""
    samples = [
        RagSample("When did the tower open?", ["The tower opened in 1889."], "It opened in 1889.", a, f"a{i}")
        for i, a in enumerate(answers)
    ]
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(answer_judge.script)) as evaluator:
        results = evaluator.score_many(samples, "faithfulness", None)
    row = {
        "nodeid": "tests/test_rag.py::test_faithfulness", "metric": "faithfulness", "method": None,
        "stat": "mean", "score": None, "op": ">=", "threshold": 0.0, "passed": True,
        "judges": sorted({j for r in results for j in r.judges}), "samples": [r.to_json() for r in results],
    }  # fmt: skip
    return {"version": 1, "results": [row], "summary": {}}


def test_answers_that_make_no_claim_are_compared_with_a_baseline_whose_answers_made_claims() -> None:
    """A run whose answers made no claim asked for no verdicts: it contradicts no prompt version."""
    baseline = answer_run(["The tower opened in 1889."] * 2)
    current = answer_run(["I don't know."] * 2)
    assert run_scores(current)["faithfulness", None].prompt_versions < (
        run_scores(baseline)["faithfulness", None].prompt_versions
    )
    comparison = compare_reports(baseline, current)
    entry = find_metric(comparison, "faithfulness", None)
    assert entry is not None
    assert entry["comparable"], entry["reason"]
    assert entry["no_claims"] == ["a0", "a1"]
    assert comparison["refused"] is None and comparison["differences"] == []


def another_verdicts_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Claims are judged against the contexts with version 99 of the verdicts prompt from now on."""
    kind = claim_judgments.ANSWER_KINDS[claim_judgments.VERDICTS]
    monkeypatch.setitem(
        claim_judgments.ANSWER_KINDS,
        claim_judgments.VERDICTS,
        dataclasses.replace(kind, prompt=judgments.Prompt("claim-verdicts-contexts-99", kind.prompt.system)),
    )


def test_another_version_of_a_prompt_both_runs_sent_is_not_comparable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    baseline = answer_run(["The tower opened in 1889.", "I don't know."])
    another_verdicts_prompt(monkeypatch)
    current = answer_run(["The tower opened in 1889."])
    entry = find_metric(compare_reports(baseline, current), "faithfulness", None)
    assert entry is not None and not entry["comparable"]
    assert entry["reason"] == (
        "prompt versions claim-verdicts-contexts-1 in the baseline, claim-verdicts-contexts-99 now"
    )


def test_shards_one_of_whose_answers_made_no_claim_merge() -> None:
    from pytest_ragmetrics.report.merge import shard_problems

    claims, none = answer_run(["The tower opened in 1889."]), answer_run(["I don't know."])
    for shard in (claims, none):
        for sample in shard["results"][0]["samples"]:
            sample["id"] += "-" + str(id(shard))  # shards hold different samples
    assert shard_problems([claims, none], ["s1.json", "s2.json"], allow_partial=True) == []


def test_shards_that_sent_two_versions_of_one_prompt_do_not_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compared prompt by prompt, a prompt both shards sent in other versions still refuses them."""
    from pytest_ragmetrics.report.merge import shard_problems

    one = answer_run(["The tower opened in 1889."])
    another_verdicts_prompt(monkeypatch)
    other = answer_run(["The tower opened in 1889."])
    for shard in (one, other):
        for sample in shard["results"][0]["samples"]:
            sample["id"] += "-" + str(id(shard))  # shards hold different samples
    problems = shard_problems([one, other], ["s1.json", "s2.json"], allow_partial=True)
    assert len(problems) == 1
    assert "claim-verdicts-contexts-1" in problems[0] and "claim-verdicts-contexts-99" in problems[0]


def test_another_sentence_splitter_is_not_comparable() -> None:
    baseline = run(BASE, metrics=[("context_recall", None)])
    current = json.loads(json.dumps(baseline))
    for s in current["results"][0]["samples"]:
        s["splitter"] = "conftest.one_sentence_per_line"
    entry = find_metric(compare_reports(baseline, current), "context_recall", None)
    assert entry is not None and not entry["comparable"]
    assert "sentence splitter punkt-" in entry["reason"]
    assert entry["reason"].endswith("conftest.one_sentence_per_line now")


def test_each_relevance_method_is_compared_on_its_own() -> None:
    metrics = [("context_relevance", "graded"), ("context_relevance", "binary")]
    comparison = compare_reports(run(BASE, metrics), run(golden([SECOND] * 15), metrics))
    labels = [m["label"] for m in comparison["metrics"]]
    assert labels == ["context_relevance[binary]", "context_relevance[graded]"]
    graded = find_metric(comparison, "context_relevance", "graded")
    binary = find_metric(comparison, "context_relevance", "binary")
    assert graded is not None and binary is not None
    assert graded["delta"] == pytest.approx(0.0) and binary["delta"] == pytest.approx(0.0)


def test_a_metric_the_run_did_not_ask_for_is_not_measured_never_removed() -> None:
    comparison = compare_reports(run(BASE), run(BASE, [("context_recall", None)]))
    assert precision(comparison)["verdict"] == "not measured"
    assert precision(comparison)["not_measured"] == [s.id for s in BASE]
    assert precision(comparison)["removed"] == []
    recall = find_metric(comparison, "context_recall", None)
    assert recall is not None and len(recall["new"]) == 15


def stopped_at_first_failure(report: dict[str, Any], failing: Collection[str | None]) -> dict[str, Any]:
    """``report`` as per-sample tests leave it when the samples in ``failing`` fail their first
    (precision) check: the metrics after it are never scored for them."""
    out: dict[str, Any] = json.loads(json.dumps(report))
    for row in out["results"]:
        if row["metric"] != "context_precision":
            row["samples"] = [s for s in row["samples"] if s["id"] not in failing]
    return out


def test_samples_whose_tests_stopped_before_a_check_are_not_measured_not_removed() -> None:
    metrics = [("context_precision", None), ("context_recall", None)]
    failing = {f"q{i:02d}" for i in range(1, 13)}  # 12 of 15 fail precision and stop there
    current = stopped_at_first_failure(run(golden([NONE] * 12 + [SECOND] * 3), metrics), failing)
    for row in current["results"]:  # q15 left the golden set
        row["samples"] = [s for s in row["samples"] if s["id"] != "q15"]
    recall = find_metric(compare_reports(run(BASE, metrics), current), "context_recall", None)
    assert recall is not None
    assert recall["not_measured"] == sorted(failing)
    assert recall["removed"] == ["q15"]
    assert recall["n"] == 2
    (gate,) = evaluate_regression_gates(
        parse_regression_gates("context_recall mean drop <= 0.1"),
        compare_reports(run(BASE, metrics), current),
    )
    assert gate["n"] == 2 and gate["not_measured"] == 12 and gate["passed"]
    assert regression_gate_detail(gate).endswith(
        ", p 1.0000 one-sided, n=2, 12 not measured; can see: 0 of 2 matched samples changed"
    )


def test_a_gate_over_a_metric_no_sample_reached_says_so() -> None:
    metrics = [("context_precision", None), ("context_recall", None)]
    every = {s.id for s in BASE}
    current = stopped_at_first_failure(run(golden([NONE] * 15), metrics), every)
    comparison = compare_reports(run(BASE, metrics), current)
    (gate,) = evaluate_regression_gates(parse_regression_gates("context_recall any drop <= 0.5"), comparison)
    assert not gate["passed"] and gate["n"] == 0 and gate["not_measured"] == 15
    assert gate["reason"] == (
        "context_recall not measured: this run has no score for 15 of the baseline's samples (their tests "
        "stopped at an earlier failing check, or do not ask for it)"
    )
    assert "matched" not in gate["reason"]
    recall = find_metric(comparison, "context_recall", None)
    assert recall is not None
    assert sample_changes(recall) == "15 not measured in this run (q01, q02, q03, q04, q05, ...)"


def test_the_samples_listed_under_a_comparison_are_said_to_be_others_than_those_it_compared() -> None:
    """Two tests scoring one golden set under two ids: one stopped early, the other was compared."""
    metrics = [("context_precision", None), ("context_recall", None)]
    renamed = [dataclasses.replace(s, id=f"weak-{s.id}") for s in BASE]
    current = stopped_at_first_failure(run([*BASE, *renamed], metrics), {s.id for s in BASE})
    recall = find_metric(compare_reports(run([*BASE, *renamed], metrics), current), "context_recall", None)
    assert recall is not None and recall["n"] == 15 and len(recall["not_measured"]) == 15
    assert sample_changes(recall) == (
        "besides the 15 compared: 15 not measured in this run (q01, q02, q03, q04, q05, ...)"
    )


def test_in_a_partial_run_a_sample_it_lacks_is_not_measured() -> None:
    comparison = compare_reports(run(BASE), run(BASE[:5]), partial=True)
    assert precision(comparison)["not_measured"] == [s.id for s in BASE[5:]]
    assert precision(comparison)["removed"] == []
    full = compare_reports(run(BASE), run(BASE[:5]))
    assert precision(full)["removed"] == [s.id for s in BASE[5:]]
    changes = sample_changes(precision(full))
    assert changes is not None and changes.startswith(
        "besides the 5 compared: 10 removed from the golden set (q06, "
    )


def test_comparison_is_reproducible_byte_for_byte() -> None:
    rng_like = [TOP, SECOND, NONE]
    current = golden([rng_like[(i * 7) % 3] for i in range(40)])
    baseline = golden([rng_like[(i * 5) % 3] for i in range(40)])
    first = json.dumps(compare_reports(run(baseline), run(current)), sort_keys=True)
    second = json.dumps(compare_reports(run(baseline), run(current)), sort_keys=True)
    assert first == second
    entry = precision(json.loads(first))
    assert entry["test"]["method"] == "monte carlo"


def test_baseline_form_is_the_same_bytes_for_the_same_judgments() -> None:
    report = run(BASE)
    report["summary"] = {"judge": {"model": "scripted-model", "calls": 3, "cache_hits": 0}, "baseline": {}}
    again = json.loads(json.dumps(report))
    again["summary"]["judge"].update(calls=0, cache_hits=3)
    assert to_json(baseline_form(report)) == to_json(baseline_form(again))
    assert "baseline" not in baseline_form(report)["summary"]


def test_run_scores_reads_every_metric_and_sample() -> None:
    scores = run_scores(run(BASE, [("context_precision", None), ("context_recall", None)]))
    assert set(scores) == {("context_precision", None), ("context_recall", None)}
    assert scores["context_precision", None].samples["q11"][0] == 0.5
    assert scores["context_recall", None].splitters and scores["context_recall", None].prompt_versions


def test_load_report_names_the_file_and_the_problem(tmp_path: Any) -> None:
    path = tmp_path / "base.json"
    with pytest.raises(ConfigError, match=r"baseline file '.*base.json' does not exist"):
        load_report(path)
    path.write_text("{not json", encoding="utf-8")
    with pytest.raises(ConfigError, match="is not JSON"):
        load_report(path)
    path.write_text('{"version": 7, "results": []}', encoding="utf-8")
    with pytest.raises(ConfigError, match="unsupported ragmetrics report version 7"):
        load_report(path)
    path.write_text('{"version": 1}', encoding="utf-8")
    with pytest.raises(ConfigError, match="no 'results' list"):
        load_report(path)
    path.write_text(to_json(run(BASE)), encoding="utf-8")
    assert load_report(path)["results"]


def written(path: Any, report: dict[str, Any], edit: Any) -> Any:
    """``report`` written to ``path`` as Python's json module writes it, after ``edit(report)``."""
    data = json.loads(to_json(report))
    edit(data)
    path.write_text(json.dumps(data), encoding="utf-8")  # allow_nan: NaN is written as a bare NaN
    return path


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (
            lambda d: d["results"][0]["samples"][2].update(score=float("nan")),
            "results[0].samples[2].score is nan, expected a finite number",
        ),
        (
            lambda d: d["results"][0].update(score=float("inf")),
            "results[0].score is inf, expected a finite number",
        ),
        (
            lambda d: d["results"][0]["samples"][3].update(score=10**400),
            "results[0].samples[3].score is a whole number of 401 digits, expected a finite number",
        ),
        (
            lambda d: d["results"][0]["samples"][2].update(id=float("nan")),
            "results[0].samples[2].id is NaN, expected a string or null",
        ),
        (
            lambda d: d["results"][0].update(metric=float("-inf")),
            "results[0].metric is -Infinity, expected a string",
        ),
        (
            lambda d: d["results"][0].update(samples="q01 q02"),
            'results[0].samples is "q01 q02", expected a list',
        ),
        (
            lambda d: d["results"][0]["samples"][4].update(score=5.0),
            "results[0].samples[4].score is 5.0, outside [0, 1] (context_precision)",
        ),
        (
            lambda d: d["results"][0]["samples"][1].update(score="high"),
            'results[0].samples[1].score is "high", expected a number or null',
        ),
        (
            lambda d: d["results"][0]["samples"][5].update(labelled=2.0),
            "results[0].samples[5].labelled is 2.0, outside [0, 1] (context_precision)",
        ),
        (lambda d: d["results"][0]["samples"].append(7), "results[0].samples[15] is 7, expected an object"),
        (lambda d: d["results"][0].pop("metric"), "results[0].metric is missing"),
        (
            lambda d: d["results"][0].update(judges="gpt"),
            'results[0].judges is "gpt", expected a list',
        ),
        (
            lambda d: d["summary"].update(
                suite={"collected": 17, "collected_digest": "zz", "ran": "3", "ran_digest": "0a"}
            ),
            'summary.suite.ran is "3", expected a whole number\n'
            'summary.suite.collected_digest is "zz", expected hex digits',
        ),
    ],
    ids=[
        "nan",
        "inf",
        "huge-whole-number",
        "nan-id",
        "infinite-metric",
        "samples-string",
        "out-of-range",
        "score-string",
        "labelled-out-of-range",
        "sample-int",
        "no-metric",
        "judges",
        "suite",
    ],
)
def test_a_bad_baseline_is_refused_naming_the_file_and_the_field(
    tmp_path: Any, edit: Any, problem: str
) -> None:
    path = written(tmp_path / "base.json", run(BASE), edit)
    with pytest.raises(ConfigError) as error:
        load_report(path)
    message = str(error.value)
    assert message.startswith(f"baseline file {str(path)!r} is not a valid ragmetrics report:\n  ")
    assert message.splitlines()[1:] == [f"  {line}" for line in problem.splitlines()]


def test_every_problem_of_a_baseline_is_named_up_to_ten(tmp_path: Any) -> None:
    def every_score_out_of_range(data: dict[str, Any]) -> None:
        for sample in data["results"][0]["samples"]:
            sample["score"] = 2.0

    path = written(tmp_path / "base.json", run(BASE), every_score_out_of_range)
    with pytest.raises(ConfigError) as error:
        load_report(path)
    lines = str(error.value).splitlines()
    assert len(lines) == 12 and lines[-1] == "  ... and 5 more"
    assert lines[1] == "  results[0].samples[0].score is 2.0, outside [0, 1] (context_precision)"


def test_a_metric_this_package_does_not_know_is_only_required_finite(tmp_path: Any) -> None:
    def renamed(data: dict[str, Any]) -> None:
        data["results"][0]["metric"] = "faithfulness_votes"
        data["results"][0]["samples"][0]["score"] = 3.0

    assert load_report(written(tmp_path / "base.json", run(BASE), renamed))["results"]


# --- regression gates ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "stat", "op", "threshold", "significance"),
    [
        ("context_precision mean drop <= 0.02", "mean drop", "<=", 0.02, None),
        ("context_precision mean drop <= 0.02 at p < 0.05", "mean drop", "<=", 0.02, ("<", 0.05)),
        ("context_recall any drop <= 0.3", "any drop", "<=", 0.3, None),
        ("  context_recall   Mean  Drop < .1  at p<=0.01 ", "mean drop", "<", 0.1, ("<=", 0.01)),
    ],
)
def test_regression_gates_parse(
    line: str, stat: str, op: str, threshold: float, significance: tuple[str, float] | None
) -> None:
    gate = parse_regression_gate(line)
    assert (gate.stat, gate.op, gate.threshold, gate.significance) == (stat, op, threshold, significance)


def test_a_regression_gate_names_the_relevance_method() -> None:
    gate = parse_regression_gate("context_relevance[graded] mean drop <= 0.05")
    assert (gate.metric, gate.method, gate.label) == (
        "context_relevance",
        "graded",
        "context_relevance[graded]",
    )


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("context_precision mean fall <= 0.02", "unknown statistic 'mean fall'"),
        ("context_precision any rise <= 0.3 at p < 0.05", "applies to 'mean rise' only"),
        ("context_precision mean drop >= 0.02", "use <= or <, not >="),
        ("context_precision mean drop <= -0.1", "is negative"),
        ("context_precision any drop <= 0.3 at p < 0.05", "applies to 'mean drop' only"),
        ("context_precision mean drop <= 0.1 at q < 0.05", "must bound the p-value"),
        ("context_precision mean drop <= 0.1 at p > 0.05", "must bound the p-value"),
        ("context_precision mean drop <= 0.1 at p < 2", "must be in (0, 1]"),
        ("context_relevance mean drop <= 0.1", "needs a method"),
        ("no_such_metric mean drop <= 0.1", "unknown metric 'no_such_metric'"),
        ("context_precision mean drop", "cannot parse it"),
    ],
)
def test_malformed_regression_gates_say_why(line: str, why: str) -> None:
    with pytest.raises(ConfigError, match="invalid ragmetrics regression gate") as info:
        parse_regression_gate(line)
    assert why in str(info.value)
    assert "expected '<metric>[<method>] mean drop <= <x>" in str(info.value)


def gate_rows(baseline: list[RagSample], current: list[RagSample], *lines: str) -> list[dict[str, Any]]:
    comparison = compare_reports(run(baseline), run(current))
    return evaluate_regression_gates(parse_regression_gates(list(lines)), comparison)


def test_regression_gates_over_a_broad_drop_a_single_collapse_and_a_small_drop() -> None:
    mean_sig = "context_precision mean drop <= 0.02 at p < 0.05"
    any_drop = "context_precision any drop <= 0.3"
    within = "context_precision mean drop <= 0.1"
    broad = gate_rows(BASE, golden([SECOND] * 10 + [NONE] * 5), mean_sig, any_drop)
    assert [g["passed"] for g in broad] == [False, False]
    assert broad[0]["value"] == pytest.approx(0.5) and broad[0]["p_value"] < 0.05
    assert [s["id"] for s in broad[0]["worst"]] == ["q01", "q02", "q03"]
    single = gate_rows(BASE, golden([NONE] + [TOP] * 9 + [SECOND] * 5), mean_sig, any_drop, within)
    # One collapsed sample: beyond the tolerance, and no test of one changed sample can be significant.
    assert [g["passed"] for g in single] == [False, False, True]
    assert single[0]["inconclusive"] and single[0]["changed_n"] == 1 and single[0]["min_p"] == 0.5
    assert single[0]["note"] == (
        "inconclusive: a drop beyond the tolerance, but with 1 changed sample the one-sided test cannot "
        "go below p 0.5000, so it can never show p < 0.05"
    )
    comparison = compare_reports(run(BASE), run(golden([NONE] + [TOP] * 9 + [SECOND] * 5)))
    (accepted,) = evaluate_regression_gates(
        parse_regression_gates(mean_sig), comparison, allow_inconclusive=True
    )
    assert accepted["passed"] and accepted["inconclusive"]
    assert accepted["note"].endswith("; accepted: inconclusive drops are allowed")
    assert single[1]["worst"] == [{"id": "q01", "baseline": 1.0, "current": 0.0, "delta": -1.0}]
    same = gate_rows(BASE, BASE, mean_sig, any_drop)
    assert [g["passed"] for g in same] == [True, True] and same[0]["value"] == 0.0


def test_a_rise_gate_is_the_drop_gate_of_the_mirrored_comparison() -> None:
    """For a metric where lower is better: the rise of A -> B is the drop of B -> A, with the same
    one-sided p, worst samples and verdicts; a drop gate passes an improvement and the other way round."""
    worse = golden([SECOND] * 10 + [NONE] * 5)
    drops = gate_rows(
        BASE, worse, "context_precision mean drop <= 0.02 at p < 0.05", "context_precision any drop <= 0.3"
    )
    rises = gate_rows(
        worse, BASE, "context_precision mean rise <= 0.02 at p < 0.05", "context_precision any rise <= 0.3"
    )
    assert [g["passed"] for g in rises] == [False, False]
    for rise, drop in zip(rises, drops, strict=True):
        assert (rise["value"], rise["p_value"], rise["changed_n"], rise["min_p"]) == (
            drop["value"],
            drop["p_value"],
            drop["changed_n"],
            drop["min_p"],
        )
        assert [w["id"] for w in rise["worst"]] == [w["id"] for w in drop["worst"]]
    assert rises[0]["value"] == pytest.approx(0.5) and rises[0]["test"] == "sign-flip, one-sided (rise)"
    assert regression_gate_detail(rises[0]).startswith("rise 0.500, delta +0.500")
    # Each direction passes the other's change.
    assert [g["passed"] for g in gate_rows(worse, BASE, "context_precision mean drop <= 0.02")] == [True]
    assert [g["passed"] for g in gate_rows(BASE, worse, "context_precision any rise <= 0.0")] == [True]
    (single,) = gate_rows(
        golden([NONE] + [TOP] * 9 + [SECOND] * 5), BASE, "context_precision mean rise <= 0.02 at p < 0.05"
    )
    assert single["inconclusive"] and single["note"].startswith("inconclusive: a rise beyond the tolerance")


def test_a_regression_gate_over_an_incomparable_or_unmatched_metric_fails_with_the_reason() -> None:
    comparison = compare_reports(run(BASE), run(BASE, judge_model="other-model"))
    (row,) = evaluate_regression_gates(
        parse_regression_gates("context_precision mean drop <= 0.5"), comparison
    )
    assert not row["passed"] and row["value"] is None
    assert row["reason"] == (
        "context_precision is not comparable with the baseline: judged by scripted-model in the baseline, "
        "other-model now"
    )
    (row,) = evaluate_regression_gates(parse_regression_gates("context_recall any drop <= 0.5"), comparison)
    assert not row["passed"] and row["reason"] == "no samples of context_recall matched the baseline"
    (row,) = evaluate_regression_gates(
        parse_regression_gates("context_recall any drop <= 0.5"), comparison, partial=True
    )
    assert row["passed"] and row["skipped"]


def test_relabelled_samples_are_changed_not_compared() -> None:
    """The labels are the reference of the label metrics: new labels make another test case."""
    labelled = [
        RagSample(
            f"Which article answers {i}?",
            [GOOD, BAD],
            ground_truth="It is good.",
            id=f"q{i}",
            context_ids=["a", "b"],
            reference_context_ids=["a"],
        )
        for i in range(3)
    ]
    relabelled = [
        labelled[0],
        *(dataclasses.replace(s, reference_context_ids={"b": 1}) for s in labelled[1:]),
    ]
    metrics = [("mrr", None)]
    entry = find_metric(compare_reports(run(labelled, metrics), run(relabelled, metrics)), "mrr", None)
    assert entry is not None
    assert entry["changed"] == ["q1", "q2"] and entry["n"] == 1
    # An unlabelled sample's key is that of its question and reference alone, as in earlier baselines.
    unlabelled = sample("q9", TOP)
    material = json.dumps([unlabelled.question, unlabelled.ground_truth], ensure_ascii=False)
    key = run([unlabelled])["results"][0]["samples"][0]["reference_key"]
    assert key == hashlib.sha256(material.encode("utf-8")).hexdigest()[:16]
