"""The JSON report: byte-identical across runs, rounded, sorted, written atomically."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from report_example import example_report

from pytest_ragmetrics.report.json_report import sort_results, to_json


def _reversed_keys(value: Any) -> Any:
    """The same data with every dict's insertion order reversed."""
    if isinstance(value, dict):
        return {key: _reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reversed_keys(item) for item in value]
    return value


def test_same_report_gives_identical_text():
    assert to_json(example_report()) == to_json(example_report())


def test_output_does_not_depend_on_dict_insertion_order():
    assert to_json(_reversed_keys(example_report())) == to_json(example_report())


def test_floats_are_written_in_full_precision_and_read_back_exactly():
    """Rounding is for display: a gate over the report must see the scores the run saw."""
    report = example_report()
    report["results"][0]["samples"][0]["score"] = 1 / 3
    report["summary"]["metrics"][0]["mean"] = 0.49999999999999994
    data = json.loads(to_json(report))
    assert data["results"][0]["samples"][0]["score"] == 1 / 3
    assert data["summary"]["metrics"][0]["mean"] == 0.49999999999999994
    noisy = example_report()
    noisy["results"][0]["score"] += 1e-12
    assert to_json(noisy) != to_json(example_report())


def test_a_real_score_change_does_change_the_file():
    changed = example_report()
    changed["results"][0]["score"] = 0.5
    assert to_json(changed) != to_json(example_report())


def test_version_and_shape():
    data = json.loads(to_json(example_report()))
    assert data["version"] == 1
    assert set(data) == {"version", "results", "summary"}
    assert [row["nodeid"] for row in data["results"]] == [
        "tests/test_rag.py::test_precision[q2]",
        "tests/test_rag.py::test_recall[q1]",
        "tests/test_rag.py::test_relevance_golden_set",
    ]


def test_unsupported_version_is_refused():
    report = example_report()
    report["version"] = 2
    with pytest.raises(ValueError, match="unsupported ragmetrics report version 2"):
        to_json(report)


def test_floats_are_rounded_only_when_asked_for_display():
    data = json.loads(to_json(example_report()))
    assert data["results"][0]["score"] == 0.8333333333333334
    assert json.loads(to_json(example_report(), ndigits=2))["results"][0]["score"] == 0.83


def test_negative_zero_is_written_as_zero():
    report = example_report()
    report["summary"]["gates"][0]["margin"] = -0.0
    text = to_json(report)
    assert '"margin": 0.0' in text
    assert "-0.0" not in text


def test_ints_and_bools_are_kept_as_they_are():
    data = json.loads(to_json(example_report()))
    assert data["summary"]["judge"]["calls"] == 3
    assert data["results"][1]["passed"] is False
    assert data["results"][0]["samples"][0]["verdicts"][0]["value"] == 1
    assert isinstance(data["results"][0]["samples"][0]["verdicts"][0]["value"], int)


def test_wall_clock_seconds_left_out_unless_asked_for():
    assert '"seconds"' not in to_json(example_report())
    data = json.loads(to_json(example_report(), include_timing=True))
    assert data["summary"]["judge"]["seconds"] == 1.2345678


def test_formatting_sorted_keys_indent_two_trailing_newline():
    text = to_json(example_report())
    assert text.endswith("}\n")
    assert not text.endswith("\n\n")
    lines = text.splitlines()
    assert lines[0] == "{"
    assert lines[1] == '  "results": ['
    assert lines[-2].startswith('  "version"')  # "version" sorts after "summary"
    assert text.index('"cached"') < text.index('"explanation"') < text.index('"metric"')


def test_non_ascii_text_is_written_as_is():
    report = example_report()
    report["results"][0]["explanation"] = "Genève — «ok»"
    assert "Genève — «ok»" in to_json(report)


def test_rows_stay_in_the_order_given():
    report = example_report()
    report["results"].reverse()
    nodeids = [row["nodeid"] for row in json.loads(to_json(report))["results"]]
    assert nodeids[0] == "tests/test_rag.py::test_relevance_golden_set"


def test_input_is_not_modified():
    report = example_report()
    before = copy.deepcopy(report)
    to_json(report)
    assert report == before
    assert report["summary"]["judge"]["seconds"] == 1.2345678


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_non_finite_numbers_are_refused(bad):
    report = example_report()
    report["results"][0]["score"] = bad
    with pytest.raises(ValueError, match="non-finite"):
        to_json(report)


def test_non_json_types_are_refused():
    report = example_report()
    report["results"][0]["score"] = {1.0}
    with pytest.raises(TypeError, match="plain JSON types"):
        to_json(report)


def test_sort_results_by_nodeid_metric_method_stat():
    rows: list[dict[str, Any]] = [
        {"nodeid": "b", "metric": "context_recall", "method": None, "stat": "score", "tag": 1},
        {"nodeid": "a", "metric": "context_relevance", "method": "sentence", "stat": "score", "tag": 2},
        {"nodeid": "a", "metric": "context_relevance", "method": "graded", "stat": "score", "tag": 3},
        {"nodeid": "a", "metric": "context_relevance", "method": None, "stat": "score", "tag": 4},
        {"nodeid": "a", "metric": "context_precision", "method": None, "stat": "score", "tag": 5},
        {"nodeid": "a", "metric": "context_precision", "method": None, "stat": "mean", "tag": 6},
    ]
    assert [row["tag"] for row in sort_results(rows)] == [6, 5, 4, 3, 2, 1]


def test_sort_results_is_stable_for_ties():
    rows = [{"nodeid": "a", "metric": "m", "method": None, "stat": "score", "tag": i} for i in range(5)]
    assert [row["tag"] for row in sort_results(reversed(rows))] == [4, 3, 2, 1, 0]


def test_sort_results_of_a_report_in_random_order_matches_the_plugin_order():
    report = example_report()
    shuffled = [report["results"][2], report["results"][0], report["results"][1]]
    assert sort_results(shuffled) == report["results"]


def test_merged_shard_reports_keep_every_shards_errors():
    from pytest_ragmetrics.report.display import outcome
    from pytest_ragmetrics.report.merge import merge_reports

    first, second = example_report(), example_report()
    error = {"nodeid": "tests/test_b.py::test_x", "when": "call", "error": "JudgmentNotRecorded",
             "message": "no recorded judgment for ...", "xfail": False}  # fmt: skip
    second["summary"]["errors"] = [error]
    merged = merge_reports([first, second])
    assert merged["summary"]["errors"] == [error]
    assert outcome(merged)["errors"] == 1 and not outcome(merged)["passed"]


def test_a_shard_the_spending_cap_stopped_stops_the_merged_report():
    from pytest_ragmetrics.report.display import cap_stop, outcome
    from pytest_ragmetrics.report.merge import merge_reports

    first, second, third = example_report(), example_report(), example_report()
    for report in (first, second, third):
        report["results"] = [r for r in report["results"] if r.get("passed")]
        report["summary"]["gates"] = []
    first["summary"]["judge"].update(max_judge_calls=4, max_judge_tokens=None, refused_calls=2)
    second["summary"]["judge"].update(max_judge_calls=4, max_judge_tokens=None, refused_calls=0)
    assert outcome(merge_reports([second, third]))["passed"]
    merged = merge_reports([first, second, third])
    judge = merged["summary"]["judge"]
    assert (judge["refused_calls"], judge["max_judge_calls"], judge["max_judge_tokens"]) == (2, 4, None)
    assert not outcome(merged)["passed"]
    assert cap_stop(merged) == (
        "the judge spending cap stopped the run: 2 judge calls refused past the cap of 4 calls; "
        "what was judged is kept"
    )
    second["summary"]["judge"]["max_judge_calls"] = 8  # shards capped differently: no one cap to name
    stop = cap_stop(merge_reports([first, second]))
    assert stop and "refused past the cap; what" in stop


def test_a_shard_whose_judge_figures_are_partial_makes_the_merged_ones_partial():
    """A shard whose xdist worker crashed counted only part of its judging: so does the sum."""
    from pytest_ragmetrics.report.merge import merge_reports

    first, second = example_report(), example_report()
    assert "partial" not in merge_reports([first, second])["summary"]["judge"]
    second["summary"]["judge"]["partial"] = "an xdist worker crashed before it reported"
    assert merge_reports([first, second])["summary"]["judge"]["partial"] == second["summary"]["judge"]["partial"]


def _shard(collected: list[str], ran: list[str]) -> dict[str, Any]:
    from pytest_ragmetrics._run import set_digest

    report = example_report()
    report["summary"]["suite"] = {
        "collected": len(collected),
        "collected_digest": f"{set_digest(collected):064x}",
        "ran": len(ran),
        "ran_digest": f"{set_digest(ran):064x}",
    }
    return report


def test_the_digests_of_disjoint_shards_add_up_to_the_suites():
    from pytest_ragmetrics._run import add_digests, set_digest

    suite = [f"tests/test_rag.py::test_{i}" for i in range(50)]
    parts = [f"{set_digest(suite[:20]):064x}", f"{set_digest(suite[20:]):064x}"]
    assert add_digests(parts) == f"{set_digest(suite):064x}"
    overlapping = [f"{set_digest(suite[:21]):064x}", f"{set_digest(suite[20:]):064x}"]
    assert add_digests(overlapping) != f"{set_digest(suite):064x}"


@pytest.mark.parametrize(
    ("shards", "problem"),
    [
        ([(["a", "b", "c"], ["a", "b"]), (["a", "b", "c"], ["b", "c"])], "some ran in more than one shard"),
        ([(["a", "b", "c"], ["a"]), (["a", "b", "c"], ["c"])], "1 of the 3 tests collected ran in no shard"),
        (
            [(["a", "b", "c"], ["a"]), (["a", "b", "x"], ["b", "x"])],
            "the shards collected different test suites",
        ),
        ([(["a", "b"], ["a", "b"]), None], "s2.json record(s) no test list"),
    ],
    ids=["overlap", "missing", "different-suites", "no-record"],
)
def test_shards_that_do_not_make_the_whole_suite_are_named(shards, problem):
    from pytest_ragmetrics.report.merge import shard_problems

    reports = [example_report() if shard is None else _shard(*shard) for shard in shards]
    problems = shard_problems(reports, ["s1.json", "s2.json"])
    assert len(problems) == 1 and problem in problems[0]
    assert shard_problems(reports, ["s1.json", "s2.json"], allow_partial=True) == []


def test_shards_cut_from_different_versions_of_a_file_are_named():
    from pytest_ragmetrics.report.merge import merge_reports, shard_problems

    tests = ["tests/test_rag.py::test_a", "tests/test_rag.py::test_b"]
    first, second, third = _shard(tests, tests[:1]), _shard(tests, tests[1:]), _shard(tests, tests[1:])
    first["summary"]["suite"]["files"] = {"tests/golden.jsonl": "1" * 64, "tests/test_rag.py": "2" * 64}
    second["summary"]["suite"]["files"] = {"tests/golden.jsonl": "3" * 64, "tests/test_rag.py": "2" * 64}
    third["summary"]["suite"]["files"] = dict(first["summary"]["suite"]["files"])
    names = ["s1.json", "s2.json"]
    assert shard_problems([first, second], names) == [
        "the shards were collected from different versions of tests/golden.jsonl: shards of different commits?"
    ]
    assert shard_problems([first, second], names, allow_mixed=True) == []
    assert shard_problems([first, third], names) == []
    assert merge_reports([first, third])["summary"]["suite"]["files"] == first["summary"]["suite"]["files"]
