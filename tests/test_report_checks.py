"""The run's checks beyond comparisons and gates in every report file: the negative controls, the judge
check's items without a usable answer, and a run stopped by the judge spending cap."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from report_example import example_report
from test_controls import TESTS as GOLDEN_TESTS, golden

from pytest_ragmetrics.report.display import outcome
from pytest_ragmetrics.report.html import to_html
from pytest_ragmetrics.report.markdown import to_markdown
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


def controls(**changes: Any) -> dict[str, Any]:
    """A negative-controls section as the run writes it: a judge that found every control useful."""
    section = {
        "pairs": 12,
        "model": "gpt-4o-mini",
        "kinds": [
            {
                "kind": "context_precision",
                "verdict": "useful",
                "judged": 12,
                "positive": 12,
                "share": 1.0,
                "errors": 0,
                "error_reasons": [],
                "examples": [],
            },
            {
                "kind": "context_relevance_graded",
                "verdict": "relevant",
                "judged": 11,
                "positive": 1,
                "share": 1 / 11,
                "errors": 1,
                "error_reasons": ["the judge gave no usable answer <b>twice</b>"],
                "examples": [],
            },
        ],
        "floors": [
            {
                "spec": "context_precision controls <= 0.2",
                "kind": "context_precision",
                "value": 1.0,
                "passed": False,
                "reason": "12 of 12 controls judged useful",
            },
            {
                "spec": "context_relevance[graded] controls <= 0.2",
                "kind": "context_relevance_graded",
                "value": 1 / 11,
                "passed": True,
                "reason": "",
            },
        ],
        "warnings": ["12 of 12 negative controls (100%) were judged useful for context_precision"],
        "passed": False,
        "error": None,
    }
    return {**section, **changes}


def with_summary(**fields: Any) -> dict[str, Any]:
    report = example_report()
    report["summary"].update(fields)
    return report


def passing(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with nothing else failing: no failing comparison, gate or error."""
    report["results"] = [r for r in report["results"] if r.get("passed")]
    report["summary"]["gates"] = [g for g in report["summary"]["gates"] if g.get("passed")]
    report["summary"]["errors"] = []
    return report


def html_section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match, f"no section {section_id!r}"
    return match.group(1)


def md_section(text: str, title: str) -> str:
    match = re.search(rf"^### {re.escape(title)}\n(.*?)(?=^### |\Z)", text, re.S | re.M)
    assert match, f"no section {title!r} in:\n{text}"
    return match.group(1)


# -- negative controls --------------------------------------------------------------------------------


def test_failing_negative_controls_fail_the_report_and_are_shown_in_markdown_and_html():
    report = passing(with_summary(judge_controls=controls()))
    assert not outcome(report)["passed"]
    assert outcome(passing(example_report()))["passed"]

    text = to_markdown(report)
    assert text.startswith("## ❌ ragmetrics:") and "the controls failed" in text.splitlines()[0]
    section = md_section(text, "Controls")
    assert (
        "12 controls, judge gpt-4o-mini: negative ones pair a question with a chunk retrieved for an "
        "unrelated sample" in section
    )
    assert "| context\\_precision | 12 of 12 judged useful (100%) | 0 |" in section
    assert "| context\\_relevance\\_graded | 1 of 11 judged relevant (9%) | 1 |" in section
    assert (
        "- context\\_relevance\\_graded not judged: the judge gave no usable answer &lt;b&gt;twice&lt;/b&gt;"
        in section
    )
    assert (
        "> **Warning:** 12 of 12 negative controls (100%) were judged useful for context\\_precision"
        in section
    )
    assert (
        "- **FAIL** context\\_precision controls &lt;= 0.2: 1.000 (12 of 12 controls judged useful)"
        in section
    )
    assert "- PASS context\\_relevance\\[graded\\] controls &lt;= 0.2: 0.091" in section

    page = to_html(report)
    assert "the controls failed" in page
    html = html_section(page, "judge-controls")
    assert "<td>context_precision</td><td>12 of 12 judged useful (100%)</td>" in html
    assert "the judge gave no usable answer &lt;b&gt;twice&lt;/b&gt;" in html
    assert "Warning: 12 of 12 negative controls (100%) were judged useful for context_precision" in html
    assert '<td class="bad">FAIL</td><td><code>context_precision controls &lt;= 0.2</code>' in html


def test_passing_negative_controls_are_shown_and_pass():
    section = controls(passed=True, warnings=[], floors=controls()["floors"][1:])
    report = passing(with_summary(judge_controls=section))
    assert outcome(report)["passed"]
    assert "controls failed" not in to_markdown(report)
    assert "| context\\_precision | 12 of 12 judged useful (100%) | 0 |" in to_markdown(report)
    assert "<td>context_precision</td>" in html_section(to_html(report), "judge-controls")


def test_controls_that_could_not_be_judged_say_why():
    section = controls(kinds=[], floors=[], warnings=[], passed=False, error="judgment not recorded: 'q1'")
    report = with_summary(judge_controls=section)
    assert "**FAIL**: the controls could not be judged: judgment not recorded: 'q1'" in to_markdown(
        report
    )
    assert "could not be judged: judgment not recorded: &#x27;q1&#x27;" in to_html(report)


def test_a_report_without_controls_has_no_controls_section():
    report = example_report()
    assert "### Controls" not in to_markdown(report)
    assert "judge-controls" not in to_html(report)


# -- the judge check's items without a usable answer --------------------------------------------------


def judge_check() -> dict[str, Any]:
    kind = {
        "kind": "context_precision",
        "model": "gpt-4o-mini",
        "unit": "chunk",
        "items": 3,
        "n": 2,
        "accuracy": 1.0,
        "kappa": 1.0,
        "weighted_kappa": None,
        "f1": 1.0,
        "classes": ["no", "yes"],
        "confusion": [[1, 0], [0, 1]],
        "disagreements": [],
        "errors": 1,
        "error_items": [{"id": "q3", "where": "labels.jsonl:3", "reason": "unparseable answer: '{\"use'"}],
        "judge_calls": 3,
    }
    return {
        "source": "labels.jsonl",
        "model": "gpt-4o-mini",
        "kinds": [kind],
        "floors": [],
        "passed": False,
        "error": None,
        "item_errors": "labels.jsonl: the judge gave no usable answer for 1 labelled item(s); first: 'q3' "
        "(labels.jsonl:3): unparseable answer",
    }


def test_judge_check_items_without_a_usable_answer_are_counted_and_listed():
    report = passing(with_summary(judge_check=judge_check()))
    assert not outcome(report)["passed"]
    section = md_section(to_markdown(report), "Judge check")
    header = next(line for line in section.splitlines() if line.startswith("| Kind"))
    row = next(line for line in section.splitlines() if line.startswith("| context\\_precision"))
    assert header.endswith("| Disagreements | No usable answer |") and row.endswith("| 0 | 1 |")
    assert "**FAIL**: labels.jsonl: the judge gave no usable answer for 1 labelled item(s)" in section
    assert (
        "- context\\_precision item 'q3' (labels.jsonl:3): no usable answer: unparseable answer: '{\"use'"
        in section
    )

    html = html_section(to_html(report), "judge-check")
    assert '<th class="num">No usable answer</th>' in html
    assert "the judge gave no usable answer for 1 labelled item(s)" in html
    assert "context_precision item &#x27;q3&#x27; (labels.jsonl:3): no usable answer" in html


def test_a_judge_check_without_item_errors_lists_none():
    check = judge_check()
    check["kinds"][0].update(errors=0, error_items=[])
    check.update(item_errors=None, passed=True)
    text = to_markdown(with_summary(judge_check=check))
    assert "no usable answer:" not in text and "**FAIL**" not in md_section(text, "Judge check")


def test_a_warning_about_nearly_alike_answers_without_a_judge_check_shows_no_empty_check():
    warning = {"kind": "context_precision", "message": "the judge answered useful to 20 of 20 chunks"}
    page = to_html(with_summary(judge_warnings=[warning]))
    section = html_section(page, "judge-check")
    assert "Warning: the judge answered useful to 20 of 20 chunks" in section
    assert "Labelled set" not in section and "<table>" not in section


# -- the judge spending cap ---------------------------------------------------------------------------


def capped(refused: int, calls: int | None = 4, tokens: int | None = None) -> dict[str, Any]:
    report = passing(example_report())
    report["summary"]["judge"].update(max_judge_calls=calls, max_judge_tokens=tokens, refused_calls=refused)
    return report


def test_a_run_the_spending_cap_stopped_fails_and_says_so_in_markdown_and_html():
    report = capped(refused=2, tokens=50_000)
    assert not outcome(report)["passed"]
    stopped = (
        "the judge spending cap stopped the run: 2 judge calls refused past the cap of 4 calls and "
        "50,000 tokens; what was judged is kept"
    )
    text = to_markdown(report)
    assert "the judge spending cap stopped the run" in text.splitlines()[0]
    assert f"> **T{stopped[1:]}.**" in text
    judge = md_section(text, "Judge")
    for row in (
        "| call cap | 4 calls |",
        "| token cap | 50,000 tokens |",
        "| calls refused by the cap | 2 |",
    ):
        assert row in judge

    page = to_html(report)
    headline = re.search(r'id="headline">(.*?)<', page)
    assert headline and "the judge spending cap stopped the run" in headline.group(1)
    assert f'<p class="note bad" id="spending-cap">T{stopped[1:]}.</p>' in page
    assert (
        "<dt>call cap</dt><dd>4 calls</dd>" in page and "<dt>calls refused by the cap</dt><dd>2</dd>" in page
    )


def test_a_cap_that_refused_nothing_is_a_figure_not_a_failure():
    report = capped(refused=0)
    assert outcome(report)["passed"]
    text = to_markdown(report)
    assert "spending cap" not in text and "| call cap | 4 calls |" in text
    assert "| calls refused by the cap | 0 |" in text and "token cap" not in text
    assert "spending-cap" not in to_html(report)


def test_a_run_without_a_cap_shows_no_cap_figures():
    text = to_markdown(example_report())
    assert "call cap" not in text and "refused" not in text


# -- through pytest -----------------------------------------------------------------------------------


def test_a_replay_writes_the_controls_into_identical_markdown_and_html(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\nrag_store_dir = judgments\nrag_judge_controls = 6\n")
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in golden()))
    pytester.makepyfile(test_golden=GOLDEN_TESTS)
    floor = "--rag-judge-agreement=context_precision controls <= 0.2"
    with FakeJudgeServer() as server:  # every chunk useful, every rating 2: controls too
        recorded = pytester.runpytest(f"--rag-judge-base-url={server.base_url}", floor)
    assert recorded.ret == 1
    files = []
    for i in range(2):
        replay = pytester.runpytest(
            "--rag-cache=replay",
            "--rag-cache-dir=empty",
            floor,
            f"--rag-report-md=r{i}.md",
            f"--rag-report-html=r{i}.html",
            f"--rag-report-json=r{i}.json",
        )
        replay.assert_outcomes(passed=8)
        assert replay.ret == 1
        files.append([pytester.path.joinpath(f"r{i}.{ext}").read_bytes() for ext in ("md", "html", "json")])
    assert files[0] == files[1]
    text, page = files[0][0].decode(), files[0][1].decode()
    assert "the controls failed" in text.splitlines()[0]
    assert "| context\\_precision | 6 of 6 judged useful (100%) | 0 |" in md_section(
        text, "Controls"
    )
    assert "<td>context_precision</td><td>6 of 6 judged useful (100%)</td>" in page
    section = json.loads(files[0][2])["summary"]["judge_controls"]
    assert section["kinds"][0]["positive"] == 6 and not section["passed"]


CAPPED_TESTS = """
    import pytest
    from pytest_ragmetrics import RagSample, assert_context_precision

    @pytest.mark.parametrize("i", range(6))
    def test_precision(i):
        sample = RagSample("Question {}?".format(i), ["Chunk of test {}.".format(i)], "Answer.", id=str(i))
        assert_context_precision(sample) >= 0.5
"""


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "-n 2"])
def test_a_capped_run_says_so_in_its_markdown_and_html(pytester, monkeypatch, xdist):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makepyfile(test_capped=CAPPED_TESTS)
    with FakeJudgeServer() as server:
        result = pytester.runpytest(
            f"--rag-judge-base-url={server.base_url}",
            "--rag-max-judge-calls=4",
            "--rag-report-md=report.md",
            "--rag-report-html=report.html",
            "-p",
            "no:randomly",
            *xdist,
        )
    result.assert_outcomes(passed=4, failed=2)
    stopped = "he judge spending cap stopped the run: 2 judge calls refused past the cap of 4 calls"
    text = pytester.path.joinpath("report.md").read_text()
    assert "the judge spending cap stopped the run" in text.splitlines()[0] and stopped in text
    assert "| calls refused by the cap | 2 |" in text
    assert stopped in pytester.path.joinpath("report.html").read_text()


def test_the_controls_section_is_redacted_like_the_rest_of_the_report(monkeypatch):
    """A reason quoting what a server said reaches no report file with the key in it."""
    from pytest_ragmetrics import Settings
    from pytest_ragmetrics.judge.stats import JudgeStats
    from pytest_ragmetrics.report.build import build_report

    key = "sk-test-0123456789abcdefghij"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    section = controls(error=f"HTTP 401: Incorrect API key provided: {key}")
    report = build_report(
        [],
        settings=Settings(),
        stats=JudgeStats(),
        gate_results=[],
        unused_store_entries=None,
        shown=str,
        default_cache_dir="cache",
        judge_controls=section,
    )
    assert report["summary"]["judge_controls"]["error"].startswith("HTTP 401: Incorrect API key provided: ")
    assert key not in json.dumps(report) and key not in to_markdown(report) and key not in to_html(report)


def test_report_merge_and_baseline_compare_say_why_a_report_fails(tmp_path, capsys):
    """A shard the spending cap stopped, or a run whose controls failed, exits 1 with its reason."""
    from pytest_ragmetrics.__main__ import main

    capped = passing(example_report())
    capped["summary"]["judge"].update(max_judge_calls=4, max_judge_tokens=None, refused_calls=2)
    plain = passing(example_report())
    for name, report in (
        ("a.json", capped),
        ("b.json", plain),
        ("c.json", with_summary(judge_controls=controls())),
    ):
        (tmp_path / name).write_text(json.dumps(report))
    a, b, c = (str(tmp_path / n) for n in ("a.json", "b.json", "c.json"))
    capsys.readouterr()
    merged = str(tmp_path / "m.json")
    assert main(["report", "merge", "--allow-partial", "--allow-mixed", "--output", merged, a, b]) == 1
    assert (
        "ragmetrics: the judge spending cap stopped the run: 2 judge calls refused past the cap of 4 calls"
        in capsys.readouterr().out
    )
    assert main(["baseline", "compare", b, c]) == 1
    assert (
        "ragmetrics controls floor failed: context_precision controls <= 0.2 (12 of 12 controls judged useful)"
        in capsys.readouterr().out
    )
    assert main(["baseline", "compare", b, b]) == 0


def test_report_merge_keeps_the_judge_check_the_shards_ran_and_fails_when_it_failed(tmp_path, capsys):
    """Every shard checks the judge on the whole labelled set: the merged report holds that check, and a
    failed one fails the merge with its reason, resting on the merged run's comparisons."""
    from pytest_ragmetrics.__main__ import main

    check = judge_check()
    check["floors"] = [
        {
            "spec": "context_precision kappa >= 0.6",
            "kind": "context_precision",
            "model": "gpt-4o-mini",
            "stat": "kappa",
            "value": 0.2,
            "passed": False,
            "reason": "",
            "resting_on": {"gates": [], "comparisons": 99, "tests": ["a shard's own test"]},
        }
    ]
    good = {**judge_check(), "passed": True, "item_errors": None}
    shards = {
        "a.json": passing(with_summary(judge_check=good)),
        "b.json": passing(with_summary(judge_check=check)),
        "c.json": passing(with_summary(judge_check=good)),
    }
    for name, report in shards.items():
        (tmp_path / name).write_text(json.dumps(report))
    paths = [str(tmp_path / name) for name in shards]
    merged = tmp_path / "m.json"
    capsys.readouterr()
    args = ["report", "merge", "--allow-partial", "--allow-mixed", "--output", str(merged)]
    assert main([*args, paths[0], paths[2]]) == 0
    assert json.loads(merged.read_text())["summary"]["judge_check"]["source"] == "labels.jsonl"
    capsys.readouterr()
    assert main([*args, *paths]) == 1
    out = capsys.readouterr().out
    assert "ragmetrics judge check failed: context_precision kappa >= 0.6" in out
    floor = json.loads(merged.read_text())["summary"]["judge_check"]["floors"][0]
    precision_tests = {
        r["nodeid"] for s in shards.values() for r in s["results"] if r["metric"] == "context_precision"
    }
    assert floor["resting_on"]["tests"] == sorted(precision_tests)


def test_report_merge_pools_the_controls_the_shards_drew_and_decides_their_floors_over_all_of_them(
    tmp_path, capsys
):
    """Each shard draws controls from the samples it scored: the merged run's controls are all of them."""
    from pytest_ragmetrics.__main__ import main

    discriminating = controls(passed=True, warnings=[])
    discriminating["kinds"][0].update(positive=0, share=0.0)
    discriminating["floors"][0].update(value=0.0, passed=True, reason="")
    shards = {
        "a.json": passing(with_summary(judge_controls=discriminating)),
        "b.json": passing(with_summary(judge_controls=controls())),
        "c.json": passing(with_summary(judge_controls=discriminating)),
    }
    for name, report in shards.items():
        (tmp_path / name).write_text(json.dumps(report))
    a, b, c = (str(tmp_path / name) for name in shards)
    merged = tmp_path / "m.json"
    args = ["report", "merge", "--allow-partial", "--allow-mixed", "--output", str(merged)]
    capsys.readouterr()
    assert main([*args, a, c]) == 0
    section = json.loads(merged.read_text())["summary"]["judge_controls"]
    assert section["pairs"] == 24 and section["passed"]
    precision = section["kinds"][0]
    assert (precision["judged"], precision["positive"], precision["errors"]) == (24, 0, 0)
    assert section["kinds"][1]["errors"] == 2  # one per shard, the reasons kept
    capsys.readouterr()
    assert main([*args, a, b, c]) == 1
    out = capsys.readouterr().out
    assert "ragmetrics controls floor failed: context_precision controls <= 0.2 (12 of 36 negative controls" in out
    floor = json.loads(merged.read_text())["summary"]["judge_controls"]["floors"][0]
    assert floor["judged"] == 36 and floor["value"] == pytest.approx(1 / 3) and not floor["passed"]


def test_report_merge_refuses_a_shard_whose_controls_were_edited_naming_each_field(tmp_path, capsys):
    """Controls without their kind, counts that are not whole numbers or more positive than judged, a
    floor without its spec: each named, exit 4, never a traceback or a floor decided over them."""
    from pytest_ragmetrics.__main__ import main

    section = controls()
    section["kinds"][0].pop("kind")
    section["kinds"][1].update(judged="11", error_reasons=5)
    section["kinds"].append({"kind": "context_precision", "judged": 3, "positive": 4})
    section["floors"][0].pop("spec")
    section["floors"].append({"spec": "context_precision controls <= 1.5"})
    section["kinds"].append(
        {"kind": "context_precision", "judged": 2, "positive": 1, "decided": [{"id": "ab", "positive": True}] * 2}
    )
    shard = tmp_path / "a.json"
    shard.write_text(json.dumps(passing(with_summary(judge_controls=section))))
    capsys.readouterr()
    assert main(["report", "merge", "--allow-partial", "--output", str(tmp_path / "m.json"), str(shard)]) == 4
    err = capsys.readouterr().err
    assert err.splitlines() == [
        f"error: report file {str(shard)!r} is not a valid ragmetrics report:",
        "  summary.judge_controls.kinds[0].kind is missing",
        '  summary.judge_controls.kinds[1].judged is "11", expected a whole number',
        "  summary.judge_controls.kinds[1].error_reasons is 5, expected a list",
        "  summary.judge_controls.floors[0].spec is missing",
        "  summary.judge_controls.kinds[2].positive is 4, expected a count of the 3 judged",
        "  summary.judge_controls.kinds[3].decided lists 2 controls (1 distinct, 2 positive), expected the 2 "
        "judged, 1 positive",
        "  summary.judge_controls.floors[2].spec: invalid ragmetrics judge agreement floor 'context_precision "
        "controls <= 1.5': controls lies between 0 and 1, so a threshold of 1.5 is out of range (a floor "
        "against it could never tell a good judge from a bad one); expected '<judgment kind> <statistic> "
        "<op> <number>', e.g. 'context_precision kappa >= 0.6', 'context_relevance[graded] weighted_kappa "
        ">= 0.5', 'context_precision controls <= 0.2' or 'context_precision positive_controls >= 0.8'; "
        "statistic is one of accuracy, kappa, weighted_kappa, f1, controls, positive_controls",
    ]


def test_report_merge_and_baseline_compare_refuse_a_gate_a_built_in_metric_cannot_meet(tmp_path, capsys):
    """A threshold outside [0, 1] for a built-in metric is a usage error, as in a pytest run."""
    from pytest_ragmetrics.__main__ import main

    report = tmp_path / "r.json"
    report.write_text(json.dumps(passing(example_report())))
    merge = ["report", "merge", "--allow-partial", "--allow-mixed", "--output", str(tmp_path / "m.json")]
    capsys.readouterr()
    assert main([*merge, "--gate", "context_recall mean >= 2", str(report)]) == 4
    assert "context_recall lies between 0 and 1, so a threshold of 2 is out of range" in capsys.readouterr().err
    gate = "context_precision pass_rate(>=1.5) >= 0.5"
    assert main(["baseline", "compare", str(report), str(report), "--gate", gate]) == 4
    assert "context_precision lies between 0 and 1, so a threshold of 1.5" in capsys.readouterr().err
    assert main([*merge, "--gate", "context_precision mean >= 0.5", str(report)]) == 0


def scored_by(
    score: float, sampling: str, nodeid: str = "tests/test_rag.py::test_precision[q2]"
) -> dict[str, Any]:
    """A passing report whose precision comparison scores sample q2 (one evaluation) ``score``."""
    report = passing(example_report())
    row = next(r for r in report["results"] if r["metric"] == "context_precision")
    row.update(nodeid=nodeid, score=score)
    row["samples"][0].update(
        score=score, key="e" * 64, judges=["gpt-4o-mini"], sampling=sampling, verdicts=[]
    )
    return report


@pytest.mark.filterwarnings("default")
@pytest.mark.parametrize(
    ("sampling", "why"),
    [
        (
            "temperature 0.7, seed none, n 1",
            "judged at temperature 0.7, seed none, n 1, where each live judging",
        ),
        (
            "temperature 0, seed 0, n 1",
            "judged alike: an edited report, or a judge that answered one request",
        ),
    ],
)
def test_report_merge_and_baseline_compare_name_an_evaluation_scored_twice_and_the_score_that_counts(
    tmp_path, capsys, sampling, why
):
    """Two shards scoring one evaluation differently merge (live shards above temperature 0 may), and
    a warning names the evaluation, each file's score and the one counted; one report alike."""
    from pytest_ragmetrics.__main__ import main

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(scored_by(0.5, sampling)))
    b.write_text(json.dumps(scored_by(1.0, sampling, nodeid="tests/test_rag.py::test_precision_again")))
    merged = tmp_path / "m.json"
    capsys.readouterr()
    args = ["report", "merge", "--allow-partial", "--output", str(merged), str(a), str(b)]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert (
        "warning: report merge: 1 evaluation(s) scored differently in two places; each counts once, with "
        "the first score listed:\n"
        f"  context_precision: sample 'q2', evaluation eeeeeeeeeeee: 0.5 in {a} "
        f"(tests/test_rag.py::test_precision[q2]), 1 in {b} (tests/test_rag.py::test_precision_again) ({why}"
    ) in err
    summary = json.loads(merged.read_text())["summary"]["metrics"]
    assert next(m for m in summary if m["metric"] == "context_precision")["mean"] == 0.5
    both = json.loads(merged.read_text())
    merged.write_text(json.dumps(both))
    assert main(["baseline", "compare", str(merged), str(a)]) == 0
    err = capsys.readouterr().err
    assert "warning: baseline compare: 1 evaluation(s)" in err and f": 0.5 in {merged} (" in err
    assert str(a) not in err.replace(f"{merged}", "")


def test_an_evaluation_scored_alike_twice_is_no_warning(tmp_path, capsys):
    from pytest_ragmetrics.__main__ import main

    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(scored_by(0.5, "temperature 0, seed 0, n 1")))
    b.write_text(json.dumps(scored_by(0.5, "temperature 0, seed 0, n 1", nodeid="tests/test_rag.py::t")))
    capsys.readouterr()
    assert (
        main(["report", "merge", "--allow-partial", "--output", str(tmp_path / "m.json"), str(a), str(b)])
        == 0
    )
    assert "warning" not in capsys.readouterr().err
