"""The run report's schema is written once, as the TypedDicts of ``report_schema``: every field the
writers write is declared there, and the validator that reads baselines and shards walks them."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any

import pytest

# pytester drops modules first imported in a run: imported here once.
from pytest_ragmetrics.baseline import (
    compare_reports,
    evaluate_regression_gates,
    parse_regression_gates,
)
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.gates import evaluate_gates, parse_gates
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.report.load import load_report, report_problems
from pytest_ragmetrics.report_schema import (
    BaselineMetric,
    GateRow,
    JudgeSummary,
    RegressionGateRow,
    RunReport,
    SampleResult,
    Verdict,
    schema_problems,
)
from pytest_ragmetrics.results import MetricResult, Verdict as VerdictResult

pytest_plugins = ["pytester"]


def undeclared(value: Any, hint: Any = RunReport, where: str = "") -> Iterator[str]:
    """The path of every field of ``value`` that the schema ``hint`` does not declare."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(hint):
            if arg is not type(None) and value is not None:
                yield from undeclared(value, arg, where)
                return
        return
    if typing.is_typeddict(hint) and isinstance(value, dict):
        fields = typing.get_type_hints(hint)
        for name, item in value.items():
            path = f"{where}.{name}" if where else name
            if name not in fields:
                yield f"{path} (not in {hint.__name__})"
            else:
                yield from undeclared(item, fields[name], path)
    elif origin is list and isinstance(value, list):
        for index, item in enumerate(value):
            yield from undeclared(item, typing.get_args(hint)[0], f"{where}[{index}]")
    elif origin is dict and isinstance(value, dict):
        for key, item in value.items():
            yield from undeclared(item, typing.get_args(hint)[1], f"{where}.{key}")


def test_every_field_of_a_sample_and_its_verdicts_is_declared() -> None:
    verdict = VerdictResult(
        item="chunk", index=0, rank=1, text="t", label="useful", value=1.0, reason="r",
        extracted=("a",), models={"m": 1.0},
    )  # fmt: skip
    sample = MetricResult(score=0.5, metric="context_precision", verdicts=(verdict,), models={"m": 0.5})
    written = sample.to_json() | {"labels_found": True}
    assert not set(written) - set(typing.get_type_hints(SampleResult))
    assert not set(verdict.to_json()) - set(typing.get_type_hints(Verdict))
    assert not list(undeclared(written, SampleResult))


def test_every_judge_figure_is_declared() -> None:
    stats = JudgeStats()
    stats.max_judge_calls, stats.response_format = 3, "json_object"
    assert not set(stats.to_json()) - set(typing.get_type_hints(JudgeSummary))


def _scored(scores: dict[str, float], judge: str = "m") -> dict[str, Any]:
    samples = [
        {"id": sid, "score": score, "key": sid, "reference_key": f"r{sid}", "judges": [judge]}
        for sid, score in scores.items()
    ]
    row = {"nodeid": "t", "metric": "context_recall", "method": None, "judges": [judge], "samples": samples}
    return {"version": 1, "results": [row], "summary": {}}


def test_every_field_of_a_gate_a_comparison_and_a_regression_gate_is_declared() -> None:
    gates = evaluate_gates(parse_gates("context_recall mean >= 0.5\ncontext_precision mean >= 0.5"),
                           {("context_recall", None): [0.5, 1.0]})  # fmt: skip
    for row in gates:
        assert not set(row) - set(typing.get_type_hints(GateRow))
    before = _scored({f"q{i}": 1.0 for i in range(6)})
    after = _scored({f"q{i}": 0.0 if i < 3 else 1.0 for i in range(6)})
    comparison = compare_reports(before, after)
    for entry in comparison["metrics"]:
        assert not set(entry) - set(typing.get_type_hints(BaselineMetric))
    regression = parse_regression_gates(
        "context_recall mean drop <= 0.02 at p < 0.05\ncontext_recall any drop <= 0.3\ncontext_precision "
        "mean drop <= 0.1"
    )
    for row in evaluate_regression_gates(regression, comparison):
        assert not set(row) - set(typing.get_type_hints(RegressionGateRow))


CONFTEST = """
from pytest_ragmetrics import ScriptedJudge, hookimpl


def script(request):
    return {"reason": "r", "useful": "good" in request.messages[-1]["content"]}


@hookimpl
def pytest_ragmetrics_make_judge(settings):
    return ScriptedJudge(script, model=settings.judge_model)
"""

TESTS = """
import pytest

from pytest_ragmetrics import RagSample, assert_context_precision

SAMPLES = [RagSample(f"q{i}?", ["good one.", "bad one."] if i % 2 else ["bad one.", "good one."],
                     ground_truth="x.", id=f"q{i}") for i in range(6)]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_precision(sample):
    assert_context_precision(sample) >= 0.0


def test_dataset():
    assert_context_precision(SAMPLES).mean() >= 0.0


@pytest.mark.xfail(reason="broken on purpose")
def test_broken():
    assert_context_precision(SAMPLES[0]) >= 0.9
"""


def test_every_field_a_run_writes_is_declared_and_valid(pytester: pytest.Pytester) -> None:
    """A run with gates, a baseline, regression gates and an xfail comparison: its JSON report and its
    saved baseline hold only declared fields, each of the declared type."""
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_rag=TESTS)
    pytester.makeini("[pytest]\nrag_cache = off\n")
    pytester.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=7, xfailed=1)
    result = pytester.runpytest(
        "--rag-baseline=base.json",
        "--rag-report-json=r.json",
        "--rag-save-baseline=next.json",
        "--rag-gate=context_precision mean >= 0.5",
        "--rag-gate=context_recall mean >= 0.5",
        "--rag-regression-gate=context_precision mean drop <= 0.02 at p < 0.05",
        "--rag-regression-gate=context_precision any drop <= 0.02",
    )
    assert result.ret == 1  # the recall gate measured nothing
    for name in ("r.json", "next.json", "base.json"):
        report = json.loads((pytester.path / name).read_text(encoding="utf-8"))
        assert list(undeclared(report)) == [], name
        assert schema_problems(report) == [], name
        assert report["summary"]["gates"] or name != "r.json"


def test_a_tampered_report_is_refused_naming_the_file_and_the_field(tmp_path: Any) -> None:
    report = _scored({"q1": 1.0, "q2": 0.5})
    report["summary"] = {
        "gates": [{"spec": "context_recall mean >= 0.5", "value": "0.75", "n": 2}],
        "judge": {"model": "m", "calls": 1.5},
        "regression_gates": [{"spec": "s", "worst": [{"id": "q1", "delta": "big"}]}],
    }
    report["results"][0]["samples"][1]["prompt_versions"] = "v1"
    path = tmp_path / "shard.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    with pytest.raises(ConfigError) as error:
        load_report(path, "report")
    assert str(error.value).splitlines() == [
        f"report file {str(path)!r} is not a valid ragmetrics report:",
        '  results[0].samples[1].prompt_versions is "v1", expected a list',
        '  summary.gates[0].value is "0.75", expected a number or null',
        "  summary.judge.calls is 1.5, expected a whole number",
        '  summary.regression_gates[0].worst[0].delta is "big", expected a number',
    ]


def _without_the_fields_gates_read() -> dict[str, Any]:
    """A comparison without its method, samples or node id, or a sample without its score (or with a
    null one and no outcome)."""
    report = _scored({"q1": 1.0, "q2": 0.5, "q3": 0.25})
    second = dict(report["results"][0])
    del report["results"][0]["method"]
    del report["results"][0]["samples"][0]["score"]
    report["results"][0]["samples"][1]["score"] = None
    report["results"][0]["samples"][2] |= {"score": None, "outcome": "no_claims"}  # what a run writes
    del second["samples"], second["nodeid"]
    report["results"].append(second)
    return report


def _with_outcomes_a_run_never_writes() -> dict[str, Any]:
    """A run writes one outcome, ``no_claims``, always beside a null score. An outcome it never writes,
    or one beside a score, would have a sample counted apart from the scored ones (or not) by a word
    nobody checked."""
    report = _scored({"q1": 1.0, "q2": 0.5, "q3": 0.25, "q4": 0.0})
    samples = report["results"][0]["samples"]
    samples[0] |= {"score": None, "outcome": "no_claims"}  # what a run writes
    samples[1] |= {"score": None, "outcome": "banana"}
    samples[2] |= {"outcome": "no_claims"}
    samples[3] |= {"outcome": ""}
    report["results"][0] |= {"score": 0.25, "outcome": "no_claims"}
    return report


@pytest.mark.parametrize(
    ("shard_report", "problems"),
    [
        (
            _without_the_fields_gates_read,
            [
                "  results[0].method is missing",
                "  results[0].samples[0].score is missing",
                "  results[1].nodeid is missing",
                "  results[1].samples is missing",
                "  results[0].samples[1].score is null without an outcome saying why",
            ],
        ),
        (
            _with_outcomes_a_run_never_writes,
            [
                '  results[0].outcome is "no_claims" beside the score 0.25; a run writes an outcome only '
                "with a null score",
                '  results[0].samples[1].outcome is "banana", expected "no_claims" (the only outcome a run '
                "writes)",
                '  results[0].samples[2].outcome is "no_claims" beside the score 0.25; a run writes an '
                "outcome only with a null score",
                '  results[0].samples[3].outcome is "", expected "no_claims" (the only outcome a run writes)',
            ],
        ),
    ],
    ids=["fields gates read missing", "outcome a run never writes"],
)
def test_a_report_gates_cannot_be_decided_over_is_refused_by_merge_and_compare_naming_each_field(
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
    shard_report: Callable[[], dict[str, Any]],
    problems: list[str],
) -> None:
    """Each problem is named with its field, and no gate is decided over the report: merge writes no
    merged report."""
    from pytest_ragmetrics.__main__ import main

    shard, baseline = tmp_path / "shard.json", tmp_path / "baseline.json"
    shard.write_text(json.dumps(shard_report()), encoding="utf-8")
    baseline.write_text(json.dumps(_scored({"q1": 1.0})), encoding="utf-8")
    gate = ["--gate", "context_recall mean >= 0.5"]
    assert main(["report", "merge", str(shard), "-o", str(tmp_path / "m.json"), *gate]) == 4
    assert main(["baseline", "compare", str(baseline), str(shard), *gate]) == 4
    err = capsys.readouterr().err
    assert "Traceback" not in err
    for command_output in err.split("error: ")[1:]:
        assert command_output.splitlines()[1:] == problems
    assert err.count("error: ") == 2
    assert not (tmp_path / "m.json").exists()


def test_a_field_of_a_newer_version_is_left_alone() -> None:
    report = _scored({"q1": 1.0})
    report["summary"]["something_new"] = {"any": ["shape"]}
    report["results"][0]["samples"][0]["new_field"] = 3
    assert report_problems(report) == []
