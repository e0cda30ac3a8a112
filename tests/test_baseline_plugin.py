"""Baselines through real pytest runs: save, compare, regression gates, reports, xdist.

The judge is scripted (a conftest hook returns a ScriptedJudge): a chunk is useful when it says
"good", so the RETRIEVER environment variable decides every score exactly.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from pytest_env import GOOD_CHUNK_JUDGE

# In-process pytester runs drop modules first imported inside them; import them here once.
import pytest_ragmetrics.baseline
import pytest_ragmetrics.engine
import pytest_ragmetrics.report.build
import pytest_ragmetrics.report.html
import pytest_ragmetrics.report.markdown
import pytest_ragmetrics.report.terminal
import pytest_ragmetrics.stats  # noqa: F401

pytest_plugins = ["pytester"]

TESTS = """
import os

import pytest

from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall

GOOD, BAD = "This chunk is good.", "This chunk is off topic."
TOP, SECOND, NONE = [GOOD, BAD], [BAD, GOOD], [BAD, BAD]


def contexts(i):
    mode = os.environ.get("RETRIEVER", "base")
    base = TOP if i < 10 else SECOND
    if mode == "broad":  # every sample loses half a point
        return SECOND if i < 10 else NONE
    if mode == "single":  # one sample collapses
        return NONE if i == 0 else base
    if mode == "slight":  # one sample loses half a point
        return SECOND if i == 0 else base
    return base


SAMPLES = [
    RagSample(f"What does chunk {i + 1} say?", contexts(i), ground_truth=f"Chunk {i + 1} is good.",
              id=f"q{i + 1:02d}")
    for i in range(15)
]


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_precision(sample):
    assert_context_precision(sample) >= 0.0


def test_recall():
    assert_context_recall(SAMPLES) >= 0.0
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for name in ("RETRIEVER", "RAGMETRICS_BASELINE", "RAGMETRICS_REGRESSION_GATES", "RAGMETRICS_GATES"):
        monkeypatch.delenv(name, raising=False)
    pytester.makeconftest(GOOD_CHUNK_JUDGE)
    pytester.makepyfile(test_rag=TESTS)
    pytester.makeini("[pytest]\nrag_cache = off\n")
    return pytester


def lit(pattern: str) -> str:
    """``pattern`` for fnmatch_lines with its square brackets taken literally."""
    return pattern.replace("[", "[[]")


def save_baseline(project: pytest.Pytester, *args: str) -> None:
    project.runpytest("--rag-save-baseline=base.json", *args).assert_outcomes(passed=16)
    assert (project.path / "base.json").exists()


def without_judging_facts(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    drop = {"cached", "judge_calls"}
    return [
        {k: v for k, v in row.items() if k not in drop}
        | {"samples": [{k: v for k, v in s.items() if k not in drop} for s in row["samples"]]}
        for row in rows
    ]


def report_of(project: pytest.Pytester, path: str = "r.json") -> dict[str, Any]:
    report: dict[str, Any] = json.loads((project.path / path).read_text(encoding="utf-8"))
    return report


def test_an_identical_run_shows_no_change_and_passes_its_gates(project: pytest.Pytester) -> None:
    save_baseline(project)
    result = project.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_precision mean drop <= 0.02",
        "--rag-regression-gate=context_recall any drop <= 0.3",
        "--rag-report",
        "--rag-report-json=r.json",
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*- vs baseline base.json -*",
            lit("metric*n*baseline*current*delta [95% CI]*p*verdict"),
            lit("context_precision*15*0.833*0.833*+0.000 [+0.000, +0.000]*1.0000*unchanged"),
            "context_recall*15*1.000*1.000*+0.000*unchanged",
            "*- regression gates -*",
            lit(
                "PASS  context_precision mean drop <= 0.02  drop 0.000, delta +0.000 [+0.000, +0.000], p 1.0000 "
                "one-sided, n=15; can see: 0 of 15 matched samples changed"
            ),
        ]
    )
    summary = report_of(project)["summary"]
    assert [g["passed"] for g in summary["regression_gates"]] == [True, True]
    assert summary["baseline"]["source"] == "base.json"


def test_a_broad_drop_fails_the_significance_gated_gate_naming_delta_p_and_worst_samples(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "broad")
    result = project.runpytest(
        "--rag-baseline=base.json", "--rag-regression-gate=context_precision mean drop <= 0.02 at p < 0.05"
    )
    assert result.ret == 1
    result.assert_outcomes(passed=16)
    result.stdout.fnmatch_lines(
        [
            lit(
                "ragmetrics regression gate failed: context_precision mean drop <= 0.02 at p < 0.05 (drop 0.500, "
                "delta -0.500 [-0.500, -0.500], p <0.0001 one-sided, n=15; worst q01 1.000 -> 0.500 (-0.500), "
                "q02 1.000 -> 0.500 (-0.500), q03 1.000 -> 0.500 (-0.500); can see: 15 of 15 matched samples "
                "changed; smallest one-sided p with 15: <0.0001)"
            )
        ]
    )


def test_a_single_collapse_trips_any_drop_and_leaves_the_significance_gated_mean_inconclusive(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "single")
    result = project.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_precision mean drop <= 0.02 at p < 0.05",
        "--rag-regression-gate=context_precision any drop <= 0.3",
        "--rag-report-json=r.json",
    )
    assert result.ret == 1
    mean_gate, any_gate = report_of(project)["summary"]["regression_gates"]
    assert not mean_gate["passed"] and mean_gate["value"] == pytest.approx(1 / 15, abs=1e-6)
    assert mean_gate["inconclusive"] and (mean_gate["changed_n"], mean_gate["min_p"]) == (1, 0.5)
    assert not any_gate["passed"] and any_gate["value"] == 1.0
    assert [s["id"] for s in any_gate["worst"]] == ["q01"]
    result.stdout.fnmatch_lines(
        ["ragmetrics regression gate failed: context_precision any drop <= 0.3 *q01*"]
    )
    result.stdout.fnmatch_lines(["ragmetrics regression gate inconclusive: context_precision mean drop*"])


def test_a_drop_within_tolerance_passes(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "slight")
    result = project.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_precision mean drop <= 0.05",
        "--rag-regression-gate=context_precision any drop <= 0.5",
    )
    assert result.ret == 0


def test_another_judge_model_fails_its_regression_gate_as_not_comparable(
    project: pytest.Pytester,
) -> None:
    save_baseline(project, "--rag-judge-model=model-a")
    result = project.runpytest(
        "--rag-judge-model=model-b",
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_recall mean drop <= 0.02",
        "--rag-report",
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "context_recall*not comparable",
            "    judged by model-a in the baseline, model-b now",
            "FAIL  context_recall mean drop <= 0.02  context_recall is not comparable with the baseline: "
            "judged by model-a in the baseline, model-b now",
        ]
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rag-baseline=base.json", "--rag-regression-gate=context_precision mean fall <= 0.1"],
            "*invalid ragmetrics regression gate 'context_precision mean fall <= 0.1': unknown statistic*",
        ),
        (
            ["--rag-baseline=base.json", "--rag-regression-gate=context_recall any drop <= 0.3 at p < 0.05"],
            "*'at p ...' applies to 'mean drop' only*",
        ),
        (
            ["--rag-baseline=base.json", "--rag-regression-gate=context_relevance mean drop <= 0.1"],
            "*context_relevance needs a method*",
        ),
        (
            ["--rag-regression-gate=context_recall mean drop <= 0.1"],
            "*regression gates need a baseline to compare with: set --rag-baseline=PATH*",
        ),
        (["--rag-baseline=missing.json"], "*baseline file '*missing.json' does not exist*"),
        (["--rag-baseline=nan.json"], "*baseline file '*nan.json' is not a valid ragmetrics report:*"),
    ],
)
def test_bad_regression_configuration_is_a_usage_error(
    project: pytest.Pytester, args: list[str], message: str
) -> None:
    (project.path / "base.json").write_text('{"version": 1, "results": []}', encoding="utf-8")
    nan = '{"version": 1, "results": [{"metric": "context_recall", "score": NaN, "samples": []}]}'
    (project.path / "nan.json").write_text(nan, encoding="utf-8")
    result = project.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    if "nan.json" in message:
        result.stderr.fnmatch_lines(["*results[[]0].score is nan, expected a finite number*"])
    assert "Traceback" not in result.stderr.str()


def test_regression_gates_from_the_ini_file_and_the_environment(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "broad")
    project.makeini(
        "[pytest]\nrag_cache = off\nrag_baseline = base.json\n"
        "rag_regression_gates =\n    context_precision mean drop <= 0.6\n"
    )
    assert project.runpytest().ret == 0
    monkeypatch.setenv(
        "RAGMETRICS_REGRESSION_GATES", "context_recall any drop <= 1; context_precision any drop <= 0.1"
    )
    assert project.runpytest().ret == 1


def test_saved_baselines_are_identical_bytes_from_a_cold_and_a_warm_cache(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\n")  # readwrite cache: the second run answers from it
    project.runpytest("--rag-save-baseline=cold.json").assert_outcomes(passed=16)
    project.runpytest("--rag-save-baseline=warm.json").assert_outcomes(passed=16)
    cold = (project.path / "cold.json").read_bytes()
    assert cold == (project.path / "warm.json").read_bytes()
    data = json.loads(cold)
    assert data["version"] == 1 and data["plugin_version"]
    assert data["summary"]["judge"] == {"model": "gpt-4o-mini"}
    sample = data["results"][0]["samples"][0]
    assert {"reference_key", "prompt_versions", "splitter", "judges"} <= set(sample)


def test_a_run_that_ran_no_test_leaves_the_baseline_file_as_it_was(project: pytest.Pytester) -> None:
    # rag_save_baseline in the ini and `pytest --co` to list the tests: the accepted baseline stays.
    project.makeini("[pytest]\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    saved = (project.path / "base.json").read_bytes()
    assert json.loads(saved)["results"]
    listed = project.runpytest("--co")
    assert listed.ret == pytest.ExitCode.OK
    listed.stdout.fnmatch_lines(
        [
            "ragmetrics: the baseline was not saved to base.json: no test ran (--collect-only); the file there is unchanged"
        ]
    )
    for mode in ("--setup-only", "--setup-plan"):
        set_up = project.runpytest(mode)
        assert set_up.ret == pytest.ExitCode.OK
        set_up.stdout.fnmatch_lines(
            [f"ragmetrics: the baseline was not saved to base.json: no test ran ({mode}); *"]
        )
    none = project.runpytest("-k", "no_such_test")
    assert none.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    none.stdout.fnmatch_lines(
        ["ragmetrics: the baseline was not saved to base.json: no test ran (none selected); *"]
    )
    # Every test it ran skipped: it said it kept the others' entries, of a file it did not write.
    project.makepyfile(test_other="import pytest\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n")
    skipped = project.runpytest("test_other.py")
    skipped.assert_outcomes(skipped=1)
    skipped.stdout.fnmatch_lines(
        [
            "ragmetrics: the baseline was not saved to base.json: no test ran (every test skipped); the file "
            "there is unchanged"
        ]
    )
    assert "keeps the entries" not in skipped.stdout.str()
    assert (project.path / "base.json").read_bytes() == saved


def test_a_run_that_runs_no_test_leaves_the_report_files_as_they_were(project: pytest.Pytester) -> None:
    """``pytest --co`` with rag_report_json in the ini wrote an empty report over the last run's."""
    project.makeini("[pytest]\nrag_cache = off\nrag_report_json = r.json\nrag_report_md = r.md\n")
    project.runpytest().assert_outcomes(passed=16)
    written = {name: (project.path / name).read_bytes() for name in ("r.json", "r.md")}
    assert json.loads(written["r.json"])["results"]
    for mode, named in (
        ("--co", "--collect-only"),
        ("--setup-only", "--setup-only"),
        ("--fixtures", "--fixtures"),
    ):
        listed = project.runpytest(mode)
        assert listed.ret == pytest.ExitCode.OK
        assert {name: (project.path / name).read_bytes() for name in written} == written, mode
        listed.stdout.fnmatch_lines([f"ragmetrics: no test ran ({named}); r.json, r.md left as they were"])


def test_a_run_whose_tests_are_all_deselected_or_skipped_leaves_the_report_files_as_they_were(
    project: pytest.Pytester,
) -> None:
    """``pytest -k nomatch`` with rag_report_json in the ini wrote an empty report over the last run's."""
    project.makeini("[pytest]\nrag_cache = off\nrag_report_json = r.json\nrag_report_md = r.md\n")
    project.makepyfile(test_other="import pytest\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n")
    project.runpytest().assert_outcomes(passed=16, skipped=1)
    written = {name: (project.path / name).read_bytes() for name in ("r.json", "r.md")}
    assert json.loads(written["r.json"])["results"]
    runs = ((("-k", "nomatch"), "none selected"), (("-m", "nomatch"), "none selected"),
            (("test_other.py",), "every test skipped"))  # fmt: skip
    for options, why in runs:
        result = project.runpytest(*options)
        assert {name: (project.path / name).read_bytes() for name in written} == written, options
        result.stdout.fnmatch_lines([f"ragmetrics: no test ran ({why}); r.json, r.md left as they were"])


def test_a_run_stopped_at_a_failure_leaves_the_baseline_file_as_it_was(project: pytest.Pytester) -> None:
    """``pytest -x`` with rag_save_baseline in the ini: the tests after the stop have no scores, and
    the accepted baseline was replaced by the few before it."""
    project.makeini("[pytest]\nrag_cache = off\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    saved = (project.path / "base.json").read_bytes()
    project.makepyfile(test_a_first="def test_broken():\n    assert False\n")
    stopped = project.runpytest("-x", "-p", "no:randomly")
    stopped.assert_outcomes(failed=1)
    stopped.stdout.fnmatch_lines(
        ["ragmetrics: the baseline was not saved to base.json: the run stopped before its end (-x, *"]
    )
    assert (project.path / "base.json").read_bytes() == saved


def test_a_run_whose_xdist_worker_crashed_leaves_the_baseline_file_as_it_was(
    project: pytest.Pytester,
) -> None:
    """A worker killed mid-test (the OOM killer, a segfault): xdist starts another and the run goes
    on, but the test it was running has no scores, and a full save dropped its samples."""
    project.makeini("[pytest]\nrag_cache = off\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    saved = (project.path / "base.json").read_bytes()
    project.makepyfile(
        test_rag=TESTS
        + "\n\ndef test_killed():\n    import signal\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    crashed = project.runpytest("-n", "2", "-p", "xdist")
    crashed.assert_outcomes(passed=16, failed=1)
    crashed.stdout.fnmatch_lines(
        ["ragmetrics: the baseline was not saved to base.json: an xdist worker crashed (its test has *"]
    )
    assert (project.path / "base.json").read_bytes() == saved


def test_markdown_and_html_reports_show_the_comparison(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "broad")
    project.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_precision mean drop <= 0.02 at p < 0.05",
        "--rag-report-md=r.md",
        "--rag-report-html=r.html",
    )
    markdown = (project.path / "r.md").read_text(encoding="utf-8")
    assert "### vs baseline `base.json`" in markdown
    assert (
        "| context\\_precision | 15 | 0.833 | 0.333 | -0.500 [-0.500, -0.500] | &lt;0.0001 | **worse** |"
        in markdown
    )
    assert "### Regression gates" in markdown
    assert "1 of 1 gates failed" in markdown
    html = (project.path / "r.html").read_text(encoding="utf-8")
    assert '<section id="baseline"><h2>vs baseline</h2>' in html
    assert '<section id="baseline-context-precision"><h3>context_precision</h3>' in html
    assert "-0.500 (was 1.000)" in html  # the delta beside a single-sample comparison
    assert '<section id="regression-gates">' in html


def test_samples_whose_tests_stopped_at_a_failing_check_are_not_measured_not_removed(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per-sample tests stop at their first failing assertion: the metrics after it are not measured
    in this run, and the reports and gates say so rather than calling the samples removed."""
    project.makepyfile(
        test_rag=TESTS.split("@pytest.mark.parametrize")[0]
        + """
@pytest.mark.parametrize("sample", SAMPLES, ids=[s.id for s in SAMPLES])
def test_sample(sample):
    assert_context_precision(sample) >= float(os.environ.get("FLOOR", "0"))
    assert_context_recall(sample) >= 0.0
"""
    )
    project.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=15)
    monkeypatch.setenv("FLOOR", "0.9")  # q11..q15 (precision 0.5) stop before their recall
    result = project.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=context_recall mean drop <= 0.1",
        "--rag-report",
        "--rag-report-md=r.md",
        "--rag-report-html=r.html",
        "--rag-report-json=r.json",
    )
    result.assert_outcomes(passed=10, failed=5)
    result.stdout.fnmatch_lines(
        [
            "context_recall*10*1.000*1.000*+0.000*unchanged",
            "*5 not measured in this run (q11, q12, q13, q14, q15)",
            lit(
                "PASS  context_recall mean drop <= 0.1  drop 0.000, delta +0.000*, n=10, 5 not measured; can*"
            ),
        ]
    )
    assert " removed" not in result.stdout.str()
    for path in ("r.md", "r.html"):
        text = (project.path / path).read_text(encoding="utf-8")
        assert "5 not measured in this run (q11, q12, q13, q14, q15)" in text, path
        assert " removed" not in text, path
    # The gate's own row says over how many samples it was evaluated and how many were not measured.
    markdown = (project.path / "r.md").read_text(encoding="utf-8")
    header = (
        "| Regression gate | Drop | Δ [95% CI] | p (one-sided) | n | Changed | Smallest p | Not measured |"
    )
    assert header in markdown
    gate_row = next(line for line in markdown.splitlines() if line.startswith("| ✅ | context\\_recall mean"))
    cells = gate_row.split(" | ")
    assert (cells[5], cells[6], cells[8]) == ("10", "0", "5"), gate_row
    assert "n=10, 5 not measured" in (project.path / "r.html").read_text(encoding="utf-8")
    recall = report_of(project)["summary"]["baseline"]["metrics"][1]
    assert recall["metric"] == "context_recall"
    assert recall["not_measured"] == ["q11", "q12", "q13", "q14", "q15"] and recall["removed"] == []
    assert report_of(project)["summary"]["regression_gates"][0]["not_measured"] == 5


def test_under_xdist_the_comparison_is_made_once_on_the_merged_results(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "broad")
    gate = "--rag-regression-gate=context_precision mean drop <= 0.02 at p < 0.05"
    single = project.runpytest("--rag-baseline=base.json", gate, "--rag-report-json=one.json")
    assert single.ret == 1
    xdist = project.runpytest(
        "-n",
        "2",
        "-p",
        "xdist",
        "--rag-baseline=base.json",
        gate,
        "--rag-report-json=two.json",
        "--rag-report",
    )
    assert xdist.ret == 1
    assert (
        report_of(project, "two.json")["summary"]["baseline"]
        == report_of(project, "one.json")["summary"]["baseline"]
    )
    assert (
        report_of(project, "two.json")["summary"]["regression_gates"]
        == report_of(project, "one.json")["summary"]["regression_gates"]
    )
    assert xdist.stdout.str().count("vs baseline base.json") == 1


def cli(project: pytest.Pytester, *args: str) -> pytest.RunResult:
    return project.run(sys.executable, "-m", "pytest_ragmetrics", *args)


SHARD_A = "q01 or q02 or q03 or q04 or q05 or q06 or q07"
REGRESSION_GATES = ("context_precision mean drop <= 0.02 at p < 0.05", "context_precision any drop <= 0.3")
AGGREGATE_GATE = "context_precision mean >= 0.8"


def test_two_shard_reports_merged_give_the_whole_runs_comparisons_and_gate_outcomes(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "single")
    regression_args = [f"--rag-regression-gate={g}" for g in REGRESSION_GATES]
    whole = project.runpytest(
        "--rag-baseline=base.json",
        *regression_args,
        f"--rag-gate={AGGREGATE_GATE}",
        "--rag-report-json=whole.json",
    )
    assert whole.ret == 1
    project.runpytest("-k", SHARD_A, "--rag-report-json=a.json").assert_outcomes(passed=7)
    project.runpytest("-k", f"not ({SHARD_A})", "--rag-report-json=b.json").assert_outcomes(passed=9)
    merged = cli(
        project,
        "report",
        "merge",
        "--output",
        "merged.json",
        "a.json",
        "b.json",
        "--baseline",
        "base.json",
        *[f"--regression-gate={g}" for g in REGRESSION_GATES],
        f"--gate={AGGREGATE_GATE}",
    )
    assert merged.ret == whole.ret == 1
    merged.stdout.fnmatch_lines(
        ["merged 2 reports (16 comparisons, 0 failed) into merged.json", "*vs baseline*"]
    )
    one, two = report_of(project, "whole.json"), report_of(project, "merged.json")
    # Whether a score's judgments were paid in its own test or started ahead (prefetch), or came
    # from another test's identical chunk, depends on the order the tests ran in: not a comparison.
    assert without_judging_facts(two["results"]) == without_judging_facts(one["results"])
    for key in ("metrics", "gates", "baseline", "regression_gates"):
        assert two["summary"][key] == one["summary"][key], key
    assert [g["passed"] for g in two["summary"]["regression_gates"]] == [False, False]
    assert two["summary"]["regression_gates"][0]["inconclusive"]


def merge(project: pytest.Pytester, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``report merge ARGS`` in this process (quicker than a subprocess): exit code and stderr."""
    from pytest_ragmetrics.__main__ import main

    capsys.readouterr()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.path)
        code = main(["report", "merge", *args])
    return code, capsys.readouterr().err


def test_report_merge_refuses_reports_that_are_not_the_shards_of_one_run(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    project.runpytest("-k", SHARD_A, "--rag-report-json=a.json").assert_outcomes(passed=7)
    project.runpytest("-k", f"not ({SHARD_A})", "--rag-report-json=b.json").assert_outcomes(passed=9)
    # Another judge model, the same tests as b.json.
    project.runpytest(
        "-k", f"not ({SHARD_A})", "--rag-report-json=other.json", "--rag-judge-model=other-model"
    ).assert_outcomes(passed=9)
    # Another commit: the retriever changed, so q01 is another sample under the same id.
    monkeypatch.setenv("RETRIEVER", "single")
    project.runpytest("-k", SHARD_A, "--rag-report-json=a2.json").assert_outcomes(passed=7)

    def refused(*inputs: str) -> str:
        code, err = merge(project, capsys, "--output", "m.json", *inputs)
        assert code == 4, err
        assert not (project.path / "m.json").exists()
        return err

    assert "9 of the 16 tests collected ran in no shard: a shard is missing" in refused("a.json")
    assert "'a.json' is given twice" in refused("a.json", "b.json", "./a.json")
    mixed = refused("a.json", "other.json")
    assert 'setting judge_model differs: a.json "gpt-4o-mini", other.json "other-model"' in mixed
    assert "context_precision: judge models differ: a.json gpt-4o-mini, other.json other-model" in mixed
    conflict = refused("a.json", "a2.json", "b.json")
    assert "sample id 'q01' names different samples in a.json, a2.json" in conflict
    # Told otherwise, the merge goes ahead.
    assert merge(project, capsys, "-o", "m.json", "a.json", "--allow-partial")[0] == 0
    assert merge(project, capsys, "-o", "m.json", "a.json", "other.json", "--allow-mixed")[0] == 0
    assert report_of(project, "m.json")["summary"]["suite"]["ran"] == 16


def test_shards_run_under_xdist_record_the_whole_suite_they_were_cut_from(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    project.makepyfile(test_plain="def test_plain():\n    pass\n")
    # A shard of plain tests: its workers judge nothing and still say what they collected.
    for name, selection in (("a", SHARD_A), ("c", "plain")):
        result = project.runpytest(
            "-n", "2", "-p", "xdist", "-k", selection, f"--rag-report-json={name}.json"
        )
        assert result.ret == 0
    suites = [report_of(project, f"{name}.json")["summary"]["suite"] for name in "ac"]
    assert [(s["collected"], s["ran"]) for s in suites] == [(17, 7), (17, 1)]
    assert suites[0]["collected_digest"] == suites[1]["collected_digest"]
    code, err = merge(project, capsys, "-o", "m.json", "a.json", "c.json")
    assert code == 4 and "9 of the 17 tests collected ran in no shard" in err


def test_baseline_compare_of_a_shard_calls_the_other_shards_samples_not_measured(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    from pytest_ragmetrics.__main__ import main

    save_baseline(project)
    project.runpytest("-k", SHARD_A, "--rag-report-json=a.json").assert_outcomes(passed=7)
    capsys.readouterr()
    gate = "--regression-gate=context_precision any drop <= 0.1"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.path)
        assert main(["baseline", "compare", "base.json", "a.json", gate]) == 0
    out = capsys.readouterr().out
    assert "8 not measured in this run (q08, q09, q10, q11, q12, ...)" in out
    assert " removed" not in out
    assert "n=7, 8 not measured" in out


def test_baseline_compare_prints_the_comparison_and_exits_1_when_a_regression_gate_fails(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "broad")
    project.runpytest("--rag-report-json=current.json").assert_outcomes(passed=16)
    result = cli(project, "baseline", "compare", "base.json", "current.json")
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*- vs baseline base.json -*",
            lit("context_precision  15     0.833    0.333  -0.500 [-0.500, -0.500]  <0.0001  worse"),
        ]
    )
    gate = "--regression-gate=context_precision mean drop <= 0.02 at p < 0.05"
    result = cli(project, "baseline", "compare", "base.json", "current.json", gate)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["FAIL  context_precision mean drop <= 0.02 at p < 0.05  drop 0.500*worst q01*"]
    )
    # --gates reads the regression gates of the pytest configuration here.
    project.makeini("[pytest]\nrag_cache = off\nrag_regression_gates = context_recall any drop <= 0.5\n")
    result = cli(project, "baseline", "compare", "base.json", "current.json", "--gates")
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAIL  context_recall any drop <= 0.5  drop 1.000*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["baseline", "compare", "base.json", "nope.json"], "error: report file 'nope.json' does not exist"),
        (
            ["baseline", "compare", "base.json", "base.json", "--regression-gate=x y <= 1"],
            "*unknown metric 'x'*",
        ),
        (
            [
                "report",
                "merge",
                "--output",
                "m.json",
                "base.json",
                "--regression-gate=context_recall any drop <= 1",
            ],
            "*regression gates need a baseline to compare with: pass --baseline PATH*",
        ),
        (["report", "merge", "base.json"], "*the following arguments are required: --output*"),
    ],
)
def test_report_commands_exit_4_on_usage_errors(
    project: pytest.Pytester, args: list[str], message: str
) -> None:
    (project.path / "base.json").write_text('{"version": 1, "results": []}', encoding="utf-8")
    result = cli(project, *args)
    assert result.ret == 4
    result.stderr.fnmatch_lines([message])
    assert not (project.path / "m.json").exists()


def test_report_merge_gates_come_from_pyproject_lists(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_baseline(project)
    monkeypatch.setenv("RETRIEVER", "slight")
    project.runpytest("--rag-report-json=current.json").assert_outcomes(passed=16)
    (project.path / "tox.ini").unlink()
    project.makepyprojecttoml(
        """
        [tool.pytest.ini_options]
        rag_cache = "off"
        rag_baseline = "base.json"
        rag_gates = ["context_precision mean >= 0.5"]
        rag_regression_gates = [
            "context_precision mean drop <= 0.05",
            "context_precision any drop <= 0.25",
        ]
        """
    )
    result = cli(project, "report", "merge", "--output", "merged.json", "current.json", "--gates")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "PASS  context_precision mean >= 0.5*",
            "*- vs baseline base.json -*",
            "PASS  context_precision mean drop <= 0.05  drop 0.033*",
            "FAIL  context_precision any drop <= 0.25  drop 0.500*worst q01 1.000 -> 0.500 (-0.500)*",
        ]
    )
    merged = report_of(project, "merged.json")["summary"]
    assert [g["passed"] for g in merged["regression_gates"]] == [True, False]


def test_report_merge_refuses_shards_cut_from_another_version_of_the_golden_set(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """The changed sample keeps its id and runs in one shard only: the samples file's digest tells."""
    project.makepyfile(
        test_rag="""
        import pytest
        from pytest_ragmetrics import assert_context_precision

        @pytest.mark.ragmetrics(samples="golden.jsonl")
        def test_golden(rag_sample):
            assert_context_precision(rag_sample) >= 0.0
        """
    )
    line = '{{"id": "{}", "question": "q?", "ground_truth": "g.", "contexts": ["This chunk is {}."]}}\n'
    golden = project.path / "golden.jsonl"
    golden.write_text(line.format("s1", "good") + line.format("s2", "good"), encoding="utf-8")
    project.runpytest("-k", "s1", "--rag-report-json=a.json").assert_outcomes(passed=1)
    golden.write_text(line.format("s1", "good") + line.format("s2", "off topic"), encoding="utf-8")
    project.runpytest("-k", "s2", "--rag-report-json=b.json").assert_outcomes(passed=1)
    code, err = merge(project, capsys, "-o", "m.json", "a.json", "b.json")
    assert code == 4
    assert "  the shards were collected from different versions of golden.jsonl: shards of different" in err
    assert merge(project, capsys, "-o", "m.json", "a.json", "b.json", "--allow-mixed")[0] == 0


def test_a_baseline_or_json_report_is_never_written_over_a_file_that_is_neither(
    project: pytest.Pytester,
) -> None:
    """``--rag-save-baseline=golden.jsonl`` (a slip of the tab key) replaced the golden set with a
    baseline at the end of the run. Such a file is left alone, and the run stops before any test; a
    baseline (or report) already there is replaced as before."""
    golden = project.path / "golden.jsonl"
    golden.write_text('{"id": "q1", "question": "q?", "contexts": ["c"]}\n', encoding="utf-8")
    result = project.runpytest("--rag-save-baseline=golden.jsonl", "--rag-report-json=r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            f"*ragmetrics: --rag-save-baseline: {golden} exists and is not a ragmetrics JSON report or baseline;*"
        ]
    )
    assert (
        golden.read_text(encoding="utf-8").startswith('{"id": "q1"')
        and not (project.path / "r.json").exists()
    )
    save_baseline(project, "--rag-report-md=r.md", "--rag-report-html=r.html")
    save_baseline(project, "--rag-report-md=r.md", "--rag-report-html=r.html")  # replaced, as before
    refused = project.runpytest("--rag-report-html=golden.jsonl")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*--rag-report-html: * exists and is not a ragmetrics HTML report;*"])
    refused = project.runpytest("-o", "rag_report_md=golden.jsonl")  # named as it was given
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        ["*: rag_report_md: * exists and is not a ragmetrics Markdown report;*(given with -o)"]
    )
    assert golden.read_text(encoding="utf-8").startswith('{"id": "q1"')


def test_two_report_files_given_one_path_are_refused_before_the_run(project: pytest.Pytester) -> None:
    """``--rag-report-json=r.out --rag-report-md=r.out`` wrote the JSON report, then the Markdown one
    over it: the JSON report asked for was lost without a word. Each file needs its own path; a pipe
    (/dev/stdout, say) may take several, as it is written to, not replaced."""
    refused = project.runpytest("--rag-report-json=r.out", "--rag-report-md=./r.out")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(
        [
            "*ragmetrics: --rag-report-md: ./r.out is the file --rag-report-json writes too; * give each its own path"
        ]
    )
    assert not (project.path / "r.out").exists()
    refused = project.runpytest(
        "-o", f"rag_save_baseline={project.path / 'r.json'}", "--rag-report-json=r.json"
    )
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*: rag_save_baseline: * is the file --rag-report-json writes too;*"])
    project.runpytest("--rag-report-json=r.json", "--rag-report-md=r.md").assert_outcomes(passed=16)
    assert (project.path / "r.json").read_text(encoding="utf-8").startswith("{")


def test_report_merge_never_writes_over_a_file_that_is_no_report(
    project: pytest.Pytester, capsys: pytest.CaptureFixture[str]
) -> None:
    """``report merge -o test_rag.py`` replaced the test file with the merged report, where a pytest
    run refuses such a path. The merge refuses it too, before reading anything; a report is replaced."""
    project.runpytest("--rag-report-json=run.json").assert_outcomes(passed=16)
    tests = (project.path / "test_rag.py").read_text(encoding="utf-8")
    code, err = merge(project, capsys, "-o", "test_rag.py", "run.json")
    assert code == 4
    assert err.startswith(
        "error: report merge --output: test_rag.py exists and is not a ragmetrics JSON report"
    )
    assert (project.path / "test_rag.py").read_text(encoding="utf-8") == tests
    code, err = merge(project, capsys, "-o", "run.json", "run.json")
    assert code == 0, err


def test_only_a_file_that_starts_as_our_markdown_or_html_report_is_taken_for_one(tmp_path: Any) -> None:
    """A README that mentions ragmetrics, or any other HTML page, is refused as a report's path;
    a report of ours is replaced."""
    from report_example import example_report

    from pytest_ragmetrics import Settings
    from pytest_ragmetrics.errors import ConfigError
    from pytest_ragmetrics.report.build import check_replaced
    from pytest_ragmetrics.report.html import to_html
    from pytest_ragmetrics.report.markdown import to_markdown

    readme, page = tmp_path / "README.md", tmp_path / "index.html"
    readme.write_text(
        "# Shop search\n\nTested with pytest-ragmetrics (see ragmetrics: docs).\n", encoding="utf-8"
    )
    page.write_text("<!DOCTYPE html><html><head><title>Shop docs</title></head></html>\n", encoding="utf-8")
    for settings, what in (
        (Settings(report_md=str(readme)), "Markdown"),
        (Settings(report_html=str(page)), "HTML"),
    ):
        with pytest.raises(ConfigError, match=f"exists and is not a ragmetrics {what} report"):
            check_replaced(settings)
    readme.write_text(to_markdown(example_report()), encoding="utf-8")
    page.write_text(to_html(example_report()), encoding="utf-8")
    check_replaced(Settings(report_md=str(readme), report_html=str(page)))


def rows_by_test(path: Any) -> dict[str, list[dict[str, Any]]]:
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in json.loads(path.read_text(encoding="utf-8"))["results"]:
        rows.setdefault(row["nodeid"], []).append(row)
    return rows


def test_a_partial_run_updates_the_baseline_entries_of_the_tests_it_ran_and_keeps_the_others(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``pytest -k q01 --rag-save-baseline`` replaced the whole baseline with one test's scores, as
    syrupy's --snapshot-update does not: the other tests' entries are kept, a full run writes it whole."""
    project.makeini("[pytest]\nrag_cache = off\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    whole = (project.path / "base.json").read_bytes()
    before = rows_by_test(project.path / "base.json")
    monkeypatch.setenv("RETRIEVER", "broad")  # every precision score falls to 0.5 or 0
    result = project.runpytest("-k", "q01 or q02", "test_rag.py::test_precision")
    result.assert_outcomes(passed=2)
    after = rows_by_test(project.path / "base.json")
    assert set(after) == set(before)
    result.stdout.fnmatch_lines(
        [
            "ragmetrics: a partial run: the baseline base.json keeps the entries of the 14 test(s) it did not run"
        ]
    )
    ran = {"test_rag.py::test_precision[q01]", "test_rag.py::test_precision[q02]"}
    assert {nodeid: after[nodeid] for nodeid in set(after) - ran} == {
        nodeid: before[nodeid] for nodeid in set(before) - ran
    }
    assert [row["score"] for nodeid in sorted(ran) for row in after[nodeid]] == [0.5, 0.5]
    assert [row["score"] for nodeid in sorted(ran) for row in before[nodeid]] == [1.0, 1.0]
    summary = json.loads((project.path / "base.json").read_text())["summary"]
    precision = next(m for m in summary["metrics"] if m["metric"] == "context_precision")
    assert precision["n"] == 15  # the figures are those of the whole baseline, not of the two tests
    monkeypatch.delenv("RETRIEVER")
    project.runpytest().assert_outcomes(passed=16)  # a full run writes the baseline whole
    assert (project.path / "base.json").read_bytes() == whole


def test_a_partial_run_scored_differently_leaves_the_baseline_file_as_it_was(
    project: pytest.Pytester,
) -> None:
    """``pytest -k q01 -o rag_judge_model=model-b`` merged model-b's entries into a baseline of
    gpt-4o-mini's, without a word, and every later comparison with the mixed file was refused."""
    project.makeini("[pytest]\nrag_cache = off\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    saved = (project.path / "base.json").read_bytes()
    partial = project.runpytest("-k", "q01", "-o", "rag_judge_model=model-b")
    partial.assert_outcomes(passed=1)
    partial.stdout.fnmatch_lines(
        [
            "ragmetrics: the baseline was not saved to base.json: this partial run scored differently "
            "from the entries of the 15 test(s) it did not run (judge model: gpt-4o-mini in the baseline, "
            "model-b now (context_precision)); the file there is unchanged: save the baseline from a "
            "full run"
        ]
    )
    assert "keeps the entries" not in partial.stdout.str()
    assert (project.path / "base.json").read_bytes() == saved
    compared = project.runpytest("--rag-baseline=base.json", "-o", "rag_save_baseline=")
    compared.assert_outcomes(passed=16)
    assert compared.ret == pytest.ExitCode.OK  # the file is still one run's, which a comparison takes
    assert "scored differently" not in compared.stdout.str()


@pytest.mark.parametrize(
    ("args", "before", "now"),
    [
        (["--rag-seed=7"], "temperature 0, seed 0, n 1", "temperature 0, seed 7, n 1"),
        (
            ["--rag-temperature=0.5", "--rag-judge-n=3"],
            "temperature 0, seed 0, n 1",
            "temperature 0.5, seed 0, n 3",
        ),
    ],
)
def test_another_judge_temperature_seed_or_n_is_not_comparable(
    project: pytest.Pytester, args: list[str], before: str, now: str
) -> None:
    """They are part of every judgment's key: scores made at another temperature, seed or n were
    compared with the baseline's as if made alike."""
    save_baseline(project)
    result = project.runpytest(
        *args, "--rag-baseline=base.json", "--rag-regression-gate=context_recall mean drop <= 0.02"
    )
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "ragmetrics regression gate failed: context_recall mean drop <= 0.02 (context_recall is not "
            f"comparable with the baseline: judge sampling {before} in the baseline, {now} now)",
            f"ragmetrics: the baseline base.json was scored differently: judge sampling: {before} in the "
            f"baseline, {now} now (context_precision, context_recall) (--rag-allow-mixed-baseline compares "
            "anyway)",
        ]
    )


def test_a_seed_set_by_a_marker_is_what_decides_the_comparison_not_the_run_s_option(
    project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The seed a test's marker gives is the one its scores were made with: a marker's other seed is
    not comparable, and --rag-seed under a marker that keeps the baseline's seed changes nothing."""
    project.makepyfile(
        test_rag=TESTS + "\npytestmark = pytest.mark.ragmetrics(seed=int(os.environ.get('SEED', '0')))\n"
    )
    monkeypatch.setenv("SEED", "0")
    save_baseline(project)
    gate = "--rag-regression-gate=context_recall mean drop <= 0.02"
    same = project.runpytest("--rag-seed=7", "--rag-baseline=base.json", gate)
    assert same.ret == 0, same.stdout.str()
    assert "scored differently" not in same.stdout.str()
    monkeypatch.setenv("SEED", "7")
    other = project.runpytest("--rag-baseline=base.json", gate)
    assert other.ret == 1
    other.stdout.fnmatch_lines(
        [
            "ragmetrics: the baseline base.json was scored differently: judge sampling: temperature 0, "
            "seed 0, n 1 in the baseline, temperature 0, seed 7, n 1 now (context_precision, context_recall) *"
        ]
    )


def test_a_baseline_without_the_samples_sampling_is_read_from_its_settings(project: pytest.Pytester) -> None:
    """A baseline saved before each sample recorded its sampling still refuses another seed."""
    save_baseline(project)
    saved = json.loads((project.path / "base.json").read_text(encoding="utf-8"))
    for row in saved["results"]:
        for sample in row["samples"]:
            del sample["sampling"]
    (project.path / "base.json").write_text(json.dumps(saved), encoding="utf-8")
    result = project.runpytest("--rag-seed=7", "--rag-baseline=base.json")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*scored differently: judge sampling: temperature 0, seed 0, n 1 in the baseline*"]
    )


def test_a_partial_run_at_another_seed_leaves_the_baseline_file_as_it_was(project: pytest.Pytester) -> None:
    project.makeini("[pytest]\nrag_cache = off\nrag_save_baseline = base.json\n")
    project.runpytest().assert_outcomes(passed=16)
    saved = (project.path / "base.json").read_bytes()
    partial = project.runpytest("-k", "q01", "--rag-seed=7")
    partial.assert_outcomes(passed=1)
    partial.stdout.fnmatch_lines(
        [
            "ragmetrics: the baseline was not saved to base.json: this partial run scored differently "
            "from the entries of the 15 test(s) it did not run (judge sampling: temperature 0, seed 0, n 1 "
            "in the baseline, temperature 0, seed 7, n 1 now (context_precision)); the file there is "
            "unchanged: save the baseline from a full run"
        ]
    )
    assert (project.path / "base.json").read_bytes() == saved


def test_graded_relevance_alone_is_scored_at_the_graded_temperature(project: pytest.Pytester) -> None:
    """Another graded temperature leaves the metrics that never use it comparable."""
    save_baseline(project)
    result = project.runpytest("--rag-graded-temperature=0.7", "--rag-baseline=base.json", "--rag-report")
    assert result.ret == 0
    assert "scored differently" not in result.stdout.str()


def test_a_sample_whose_answer_made_no_claim_is_said_to_have_none_not_to_be_unmeasured(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """It was measured: its answer made no claim, so faithfulness has no score to compare. It was
    listed as "not measured in this run", and left out of the golden set's digest."""
    pytester.makeconftest(
        "import answer_judge\nfrom pytest_ragmetrics import ScriptedJudge, hookimpl\n\n\n@hookimpl\n"
        "def pytest_ragmetrics_make_judge(settings):\n"
        "    return ScriptedJudge(answer_judge.script, model=settings.judge_model)\n"
    )
    pytester.makepyfile(
        test_rag="""
import os
import pytest
from pytest_ragmetrics import RagSample, assert_faithfulness

TOWER = "The Eiffel Tower was completed in 1889."
EVASIVE = os.environ.get("EVASIVE", "").split(",")
SAMPLES = [RagSample("When?", [TOWER], ground_truth=TOWER, answer="I don't know." if f"a{i}" in EVASIVE
           else TOWER, id=f"a{i}") for i in range(4)]

def test_set():
    assert_faithfulness(SAMPLES).mean() >= 0
"""
    )
    pytester.makeini("[pytest]\nrag_cache = off\n")
    monkeypatch.delenv("EVASIVE", raising=False)
    pytester.runpytest("--rag-save-baseline=base.json").assert_outcomes(passed=1)
    monkeypatch.setenv("EVASIVE", "a1")
    result = pytester.runpytest(
        "--rag-baseline=base.json",
        "--rag-regression-gate=faithfulness mean drop <= 0.1",
        "--rag-report",
        "--rag-report-json=r.json",
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            "faithfulness*3*1.000*1.000*+0.000*unchanged",
            "    besides the 3 compared: 1 with no claims in one run, not compared (a1)",
            lit(
                "PASS  faithfulness mean drop <= 0.1  drop 0.000, delta +0.000*, n=3, 1 with no claims; can*"
            ),
        ]
    )
    assert "not measured" not in result.stdout.str()
    assert "golden set" not in result.stdout.str()  # the same four questions
    faithfulness = report_of(pytester)["summary"]["baseline"]["metrics"][0]
    assert (faithfulness["no_claims"], faithfulness["not_measured"], faithfulness["new"]) == (["a1"], [], [])
    assert report_of(pytester)["summary"]["regression_gates"][0]["no_claims"] == 1
    # The other way round: the baseline's answer made no claim, this run's does.
    pytester.runpytest("--rag-save-baseline=base.json", "-o", "rag_cache=off").assert_outcomes(passed=1)
    monkeypatch.delenv("EVASIVE")
    back = pytester.runpytest("--rag-baseline=base.json", "--rag-report")
    back.stdout.fnmatch_lines(["    besides the 3 compared: 1 with no claims in one run, not compared (a1)"])
    assert " new" not in back.stdout.str()
