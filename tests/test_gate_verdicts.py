"""Gate verdicts that agree with their run: full precision on every path, one-sided regression tests
that say what they can see, not-measured metrics alike in every gate, and baselines that record what
made their scores.

The judge is scripted (a conftest hook returns a ScriptedJudge): a chunk is useful, and a reference
sentence attributed, when the chunk says "good", so the RETRIEVER environment variable decides every
score exactly.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from pytest_env import GOOD_CHUNK_JUDGE

# In-process pytester runs drop modules first imported inside them; import them here once.
import pytest_ragmetrics.baseline
import pytest_ragmetrics.report.build
import pytest_ragmetrics.report.cli
import pytest_ragmetrics.report.terminal  # noqa: F401
from pytest_ragmetrics.gates import evaluate_gates, parse_gates

pytest_plugins = ["pytester"]

TESTS = """
import os

import pytest

from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall

GOOD, BAD = "This chunk is good.", "This chunk is off topic."
# Context precision 1/3, 1/3, 1/3, 1, 1, 0: a mean of exactly 0.5.
PRECISION = [[BAD, BAD, GOOD]] * 3 + [[GOOD, BAD, BAD]] * 2 + [[BAD, BAD, BAD]]
BROKEN = {"none": 0, "one": 1, "five": 5}[os.environ.get("RETRIEVER", "none")]

PRECISION_SAMPLES = [
    RagSample(f"What does precision chunk {i} say?", PRECISION[i], ground_truth=f"Chunk {i} is good.",
              id=f"p{i}")
    for i in range(6)
]
RECALL_SAMPLES = [
    RagSample(f"What does recall chunk {i} say?", [BAD, BAD] if i < BROKEN else [GOOD, BAD],
              ground_truth=f"Chunk {i} is good.", id=f"r{i:02d}")
    for i in range(12)
]


@pytest.mark.parametrize("sample", PRECISION_SAMPLES, ids=[s.id for s in PRECISION_SAMPLES])
def test_precision(sample):
    assert_context_precision(sample) >= 0.0


@pytest.mark.parametrize("sample", RECALL_SAMPLES, ids=[s.id for s in RECALL_SAMPLES])
def test_recall(sample):
    if os.environ.get("STOP"):  # a first failing check stops the test before its recall
        assert_context_precision(sample) <= 0.5
    assert_context_recall(sample) >= 0.0
"""

GATE = "context_precision mean >= 0.5"
REGRESSION = "context_recall mean drop <= 0.02 at p < 0.05"
SHARD_A = "p0 or p1 or p2 or r00 or r01"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in (
        "RETRIEVER",
        "STOP",
        "RAGMETRICS_BASELINE",
        "RAGMETRICS_REGRESSION_GATES",
        "RAGMETRICS_GATES",
    ):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(GOOD_CHUNK_JUDGE)
    pytester.makepyfile(test_rag=TESTS)
    pytester.makeini("[pytest]\nrag_cache = off\n")
    return pytester


def command(project: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``python -m pytest_ragmetrics ARGS`` in this process: exit code, stdout and stderr."""
    from pytest_ragmetrics.__main__ import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.path)
        code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def report_of(project: pytest.Pytester, name: str) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((project.path / name).read_text(encoding="utf-8"))
    return report


# --- full precision on every path -------------------------------------------------------------------


def test_a_mean_exactly_at_the_threshold_passes_in_the_run_its_shards_its_report_and_a_comparison(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    whole = project.runpytest(f"--rag-gate={GATE}", "--rag-report-json=whole.json", "--rag-report")
    assert whole.ret == 0
    whole.stdout.fnmatch_lines([f"PASS  {GATE}  value 0.500  n=6  margin +0.000"])
    # The JSON report keeps every score as the run had it: 1/3, not 0.333333.
    scores = sorted(
        s["score"]
        for row in report_of(project, "whole.json")["results"]
        for s in row["samples"]
        if row["metric"] == "context_precision"
    )
    assert scores == [0.0, 1 / 3, 1 / 3, 1 / 3, 1.0, 1.0]
    # Rounded as this package's JSON used to round them, the same scores miss the threshold.
    (rounded,) = evaluate_gates(
        parse_gates(GATE), {("context_precision", None): [round(s, 6) for s in scores]}
    )
    assert not rounded["passed"]

    project.runpytest("-k", SHARD_A, "--rag-report-json=a.json").assert_outcomes(passed=5)
    project.runpytest("-k", f"not ({SHARD_A})", "--rag-report-json=b.json").assert_outcomes(passed=13)
    code, out, _ = command(
        project, capsys, "report", "merge", "-o", "m.json", "a.json", "b.json", f"--gate={GATE}"
    )
    assert (code, report_of(project, "m.json")["summary"]["gates"][0]["value"]) == (0, 0.5)
    assert f"PASS  {GATE}  value 0.500  n=6  margin +0.000" in out
    code, out, _ = command(
        project, capsys, "report", "merge", "-o", "own.json", "whole.json", f"--gate={GATE}"
    )
    assert code == 0 and f"PASS  {GATE}  value 0.500  n=6  margin +0.000" in out
    code, out, _ = command(
        project, capsys, "baseline", "compare", "whole.json", "whole.json", f"--gate={GATE}"
    )
    assert code == 0 and f"PASS  {GATE}  value 0.500  n=6  margin +0.000" in out


TWO_JUDGES = """
import pytest

from pytest_ragmetrics import RagSample, assert_context_precision

SAMPLE = RagSample("What does the chunk say?", ["This chunk is good."], ground_truth="It is good.", id="s")


@pytest.mark.ragmetrics(judge_model="model-b")
def test_{first}():
    assert_context_precision(SAMPLE) >= 0.0


@pytest.mark.ragmetrics(judge_model="model-a")
def test_{second}():
    assert_context_precision(SAMPLE) >= 0.0
"""


@pytest.mark.filterwarnings("default")  # report merge's warning of the two scores, checked below
@pytest.mark.parametrize(("first", "second"), [("b", "a"), ("a", "b")])
def test_one_sample_scored_by_two_judge_models_is_decided_alike_by_the_run_and_its_report(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str], first: str, second: str
) -> None:
    """One sample scored in two tests counts once; which test's score counts does not depend on the
    order the tests ran (or the workers finished) in. The run took the first to finish, its report
    (sorted by test) the other: a gate the run failed passed in `report merge` of its own report."""
    project.makeconftest(
        "from pytest_ragmetrics import ScriptedJudge, hookimpl\n\n\n"
        "@hookimpl\n"
        "def pytest_ragmetrics_make_judge(settings):\n"
        "    return ScriptedJudge(lambda r: {'reason': 'r', 'useful': r.model == 'model-a'}, model=settings.judge_model)\n"
    )
    (project.path / "test_rag.py").unlink()
    project.makepyfile(test_two=TWO_JUDGES.format(first=first, second=second))
    run = project.runpytest(f"--rag-gate={GATE}", "--rag-report-json=run.json")
    run.assert_outcomes(passed=2)
    (gate,) = report_of(project, "run.json")["summary"]["gates"]
    code, _, err = command(project, capsys, "report", "merge", "-o", "m.json", "run.json", f"--gate={GATE}")
    # The two scores of the one sample are named, the one that counts (the first by test) first.
    listed = r"sample 's', evaluation \w+: [01] in run.json \(test_two.py::test_a\), [01] in run.json \(test_two"
    assert re.search(listed, err), err
    (merged,) = report_of(project, "m.json")["summary"]["gates"]
    assert (gate["value"], gate["n"], gate["passed"]) == (merged["value"], merged["n"], merged["passed"])
    assert (run.ret, code) == ((0, 0) if merged["passed"] else (1, 1))


def test_a_gate_gives_the_same_value_whatever_order_the_scores_come_in() -> None:
    scores = [1 / 3, 0.1, 0.2, 0.7, 1 / 7, 2 / 3, 0.3] * 5
    gates = parse_gates(["context_recall mean >= 0.35", "context_recall p10 >= 0.1"])
    first = evaluate_gates(gates, {("context_recall", None): scores})
    for shift in range(1, len(scores)):
        turned = scores[shift:] + scores[:shift]
        assert evaluate_gates(gates, {("context_recall", None): turned[::-1]}) == first


# --- one-sided regression gates that say what they can see ------------------------------------------


def test_five_of_twelve_collapses_fail_the_gate_with_one_sided_p_and_what_it_can_see(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=18)
    monkeypatch.setenv("RETRIEVER", "five")
    result = project.runpytest(
        "--rag-baseline=base.json", f"--rag-regression-gate={REGRESSION}", "--rag-report",
        "--rag-report-json=current.json",
    )  # fmt: skip
    assert result.ret == 1
    line = (
        f"FAIL  {REGRESSION}  drop 0.417, delta -0.417 [*], p 0.0312 one-sided, n=12; worst r00 1.000 -> "
        "0.000 (-1.000), r01 1.000 -> 0.000 (-1.000), r02 1.000 -> 0.000 (-1.000); can see: 5 of 12 "
        "matched samples changed; smallest one-sided p with 5: 0.0312"
    )
    result.stdout.fnmatch_lines([line.replace("[", "[[]")])
    (gate,) = report_of(project, "current.json")["summary"]["regression_gates"]
    assert (gate["p_value"], gate["min_p"], gate["changed_n"], gate["inconclusive"]) == (
        1 / 32,
        1 / 32,
        5,
        False,
    )
    code, out, _ = command(
        project, capsys, "baseline", "compare", "base.json", "current.json", f"--regression-gate={REGRESSION}"
    )
    assert code == 1 and "p 0.0312 one-sided, n=12" in out and "smallest one-sided p with 5: 0.0312" in out


def test_a_drop_the_test_cannot_call_significant_is_inconclusive_and_fails_unless_allowed(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=18)
    monkeypatch.setenv("RETRIEVER", "one")
    args = ["--rag-baseline=base.json", f"--rag-regression-gate={REGRESSION}"]
    result = project.runpytest(*args, "--rag-report-md=r.md", "--junitxml=j.xml")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics regression gate inconclusive: {REGRESSION} (drop 0.083, *(inconclusive: a drop beyond "
            "the tolerance, but with 1 changed sample the one-sided test cannot go below p 0.5000, so it can "
            "never show p < 0.05)*can see: 1 of 12 matched samples changed; smallest one-sided p with 1: 0.5000)"
        ]
    )
    markdown = (project.path / "r.md").read_text(encoding="utf-8")
    assert "| ❌ inconclusive | context\\_recall mean drop &lt;= 0.02 at p &lt; 0.05 | 0.083 |" in markdown
    assert "smallest one-sided p with 1: 0.5000" in markdown
    junit = (project.path / "j.xml").read_text(encoding="utf-8")
    for name, value in [("passed", "inconclusive"), ("changed_n", "1"), ("min_p", "0.5"), ("p_value", "0.5")]:
        assert f'name="ragmetrics.regression_gate.1.{name}" value="{value}"' in junit
    allowed = project.runpytest(*args, "--rag-allow-inconclusive", "--rag-report")
    assert allowed.ret == 0
    allowed.stdout.fnmatch_lines(
        [f"INCONCLUSIVE  {REGRESSION}  drop 0.083*accepted: inconclusive drops are allowed*"]
    )


# --- a metric no sample reached reads the same in every gate ----------------------------------------


def test_an_unreached_metric_reads_not_measured_in_aggregate_and_regression_gates(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    project.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=18)
    monkeypatch.setenv("STOP", "1")
    result = project.runpytest(
        "--rag-baseline=base.json", "--rag-gate=context_recall mean >= 0.5",
        "--rag-regression-gate=context_recall mean drop <= 0.1",
    )  # fmt: skip
    assert result.ret == 1
    why = "(their tests stopped at an earlier failing check, or do not ask for it)"
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics gate failed: context_recall mean >= 0.5 (context_recall not measured: none of the run's 18 samples has a score {why})",
            "ragmetrics regression gate failed: context_recall mean drop <= 0.1 (context_recall not measured: "
            f"this run has no score for 12 of the baseline's samples {why})",
        ]
    )


def test_report_merge_allow_partial_skips_aggregate_and_regression_gates_alike(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    project.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=18)
    project.runpytest("-k", "precision", "--rag-report-json=a.json").assert_outcomes(passed=6)
    code, out, err = command(
        project, capsys, "report", "merge", "-o", "m.json", "a.json", "--allow-partial", "--baseline", "base.json",
        "--gate=context_recall mean >= 0.5", "--regression-gate=context_recall mean drop <= 0.1",
    )  # fmt: skip
    assert code == 0, err
    summary = report_of(project, "m.json")["summary"]
    assert [g.get("skipped") for g in summary["gates"] + summary["regression_gates"]] == [True, True]
    assert "SKIP  context_recall mean >= 0.5  not evaluated: context_recall not measured" in out
    assert "SKIP  context_recall mean drop <= 0.1  not evaluated: context_recall not measured" in out


# --- a baseline records what made its scores --------------------------------------------------------


def test_a_baseline_from_another_judge_model_is_refused_with_the_difference_named(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    project.runpytest("--rag-save-baseline=base.json", "--rag-judge-model=model-a").assert_outcomes(passed=18)
    provenance = report_of(project, "base.json")["summary"]["provenance"]
    assert provenance["judge_models"] == ["model-a"] and provenance["samples"] == 18
    assert provenance["prompt_versions"] and len(provenance["golden_set"]) == 16
    result = project.runpytest(
        "--rag-baseline=base.json", "--rag-judge-model=model-b", "--rag-report-json=b.json"
    )
    assert result.ret == 1
    difference = "judge model: model-a in the baseline, model-b now (context_precision, context_recall)"
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics: the baseline base.json was scored differently: {difference} "
            "(--rag-allow-mixed-baseline compares anyway)"
        ]
    )
    code, _, err = command(project, capsys, "baseline", "compare", "base.json", "b.json")
    assert code == 4
    assert err.splitlines() == [
        f"error: baseline compare: the baseline base.json was scored differently: {difference}",
        "(--allow-mixed compares anyway; the differences stay named)",
    ]
    code, out, _ = command(project, capsys, "baseline", "compare", "base.json", "b.json", "--allow-mixed")
    assert code == 0 and f"differs: {difference}" in out
    allowed = project.runpytest(
        "--rag-baseline=base.json", "--rag-judge-model=model-b", "--rag-allow-mixed-baseline", "--rag-report"
    )
    assert allowed.ret == 0
    allowed.stdout.fnmatch_lines([f"differs: {difference}"])


def test_a_changed_golden_set_is_named_but_not_refused(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    project.runpytest("--rag-report-json=whole.json").assert_outcomes(passed=18)
    project.runpytest("-k", "precision", "--rag-report-json=part.json").assert_outcomes(passed=6)
    code, out, _ = command(project, capsys, "baseline", "compare", "whole.json", "part.json")
    assert code == 0
    assert "differs: golden set: 18 samples (digest " in out and ") in the baseline, 6 (digest " in out


# --- every report format shows the new gate facts ---------------------------------------------------


def _facts_report() -> dict[str, Any]:
    from pytest_ragmetrics.baseline import compare_reports, evaluate_regression_gates, parse_regression_gates

    def run(scores: list[float], judge: str) -> dict[str, Any]:
        samples = [
            {"id": f"r{i:02d}", "score": s, "key": f"k{i}", "reference_key": f"q{i}", "judges": [judge]}
            for i, s in enumerate(scores)
        ]
        return {"version": 1, "results": [{"nodeid": "t", "metric": "context_recall", "method": None,
                                           "stat": "score", "score": 1.0, "op": ">=", "threshold": 0.0,
                                           "passed": True, "judges": [judge], "samples": samples}]}  # fmt: skip

    current = run([0.0] + [1.0] * 11, "model-b")
    comparison = compare_reports(run([1.0] * 12, "model-a"), current, source="base.json", allow_mixed=True)
    comparison["refused"] = "judge model: model-a in the baseline, model-b now (context_recall)"
    gates = evaluate_regression_gates(parse_regression_gates(REGRESSION), comparison)
    not_measured = evaluate_gates(parse_gates("context_precision mean >= 0.5"), {}, run_samples=12)
    current["summary"] = {"gates": not_measured, "baseline": comparison, "regression_gates": gates}
    return current


def test_terminal_markdown_and_html_show_inconclusive_what_a_gate_sees_not_measured_and_a_refusal() -> None:
    from pytest_ragmetrics.report.closing import failure_lines
    from pytest_ragmetrics.report.display import outcome
    from pytest_ragmetrics.report.html import to_html
    from pytest_ragmetrics.report.markdown import to_markdown
    from pytest_ragmetrics.report.terminal import render_sections

    report = _facts_report()
    assert not outcome(report)["passed"]
    lines: list[str] = []

    class Writer:
        fullwidth = 100

        def line(self, s: str = "", **markup: bool) -> None:
            lines.append(s)

        def sep(
            self, sepchar: str, title: str | None = None, fullwidth: int | None = None, **markup: bool
        ) -> None:
            lines.append(f"-- {title} --")

    render_sections(report, Writer())
    text = "\n".join(lines)
    for fact in (
        "FAIL  context_precision mean >= 0.5  context_precision not measured: none of the run's 12 samples",
        "REFUSED  scored differently: judge model: model-a in the baseline, model-b now (context_recall)",
        "differs: judge model: model-a in the baseline, model-b now (context_recall)",
        f"INCONCLUSIVE  {REGRESSION}  drop 0.083",
        "can see: 1 of 12 matched samples changed; smallest one-sided p with 1: 0.5000",
    ):
        assert fact in text, fact
    assert any(
        "ragmetrics: the baseline base.json was scored differently" in line
        for line, _ in failure_lines(report)
    )
    markdown = to_markdown(report)
    assert "the baseline was refused" in markdown.splitlines()[0]
    assert "| ❌ inconclusive |" in markdown and "| p (one-sided) | n | Changed | Smallest p |" in markdown
    assert "**refused, scored differently:** judge model: model-a in the baseline, model-b now" in markdown
    page = to_html(report)
    assert "INCONCLUSIVE" in page and "can see: 1 of 12 matched samples changed" in page
    assert 'id="baseline-refused"' in page and "context_precision not measured: none of the run&#x27;s 12 samples" in page
