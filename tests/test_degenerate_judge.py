"""A judge that answers (nearly) everything alike is noticed without labels."""

import json

import pytest

import pytest_ragmetrics.engine
import pytest_ragmetrics.report.terminal  # noqa: F401
from pytest_ragmetrics.calibration.degenerate import degenerate_kinds
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]


def test_nineteen_of_twenty_alike_warns_and_eighteen_does_not():
    yes19 = [("context_precision", ["yes"])] * 19 + [("context_precision", ["no"])]
    (warning,) = degenerate_kinds(yes19)
    assert (warning["answer"], warning["count"], warning["total"], warning["share"]) == ("yes", 19, 20, 0.95)
    assert "answered 'useful yes' to 19 of 20 context_precision verdicts (95%)" in warning["message"]
    yes18 = [("context_precision", ["yes"])] * 18 + [("context_precision", ["no"])] * 2
    assert degenerate_kinds(yes18) == []


def test_too_few_answers_and_selecting_some_sentences_never_warn():
    assert degenerate_kinds([("context_relevance_graded", ["2"])] * 19) == []
    assert degenerate_kinds([("context_relevance_sentences", ["some"])] * 50) == []
    (warning,) = degenerate_kinds([("context_relevance_sentences", ["all"])] * 50)
    assert warning["answer"] == "all"


def test_recall_counts_every_reference_sentence():
    answers = [("context_recall", ["yes", "yes"])] * 10
    assert degenerate_kinds(answers)[0]["total"] == 20


@pytest.fixture
def always_yes(monkeypatch):
    with FakeJudgeServer() as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server


TESTS = """
from pytest_ragmetrics import RagSample, assert_context_precision

def sample(first, last):
    chunks = [f"Fact number {i} about Paris." for i in range(first, last)]
    return RagSample("Where is Paris?", chunks, ground_truth="Paris is in France.", id=f"s{first}")

def test_first_half():
    assert_context_precision(sample(0, 12)) >= 0.0

def test_second_half():
    assert_context_precision(sample(12, 25)) >= 0.0
"""


@pytest.mark.parametrize("extra", [[], ["-n", "2", "-p", "xdist"]], ids=["serial", "xdist"])
def test_a_judge_that_says_yes_to_everything_is_warned_about(pytester, always_yes, extra):
    pytester.makepyfile(test_rag=TESTS)
    pytester.makeini("[pytest]\n")
    result = pytester.runpytest(*extra)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "ragmetrics warning: the judge answered 'useful yes' to 25 of 25 context_precision verdicts "
            "(100%): it may not be discriminating; check it against labelled verdicts (--rag-judge-check) "
            "or with controls (--rag-judge-controls)"
        ]
    )
    md = pytester.runpytest(*extra, "--rag-report", "--rag-report-md=r.md")
    md.stdout.fnmatch_lines(["warning: the judge answered 'useful yes' to 25 of 25*"])
    assert "> **Warning:** the judge answered" in (pytester.path / "r.md").read_text()


def test_report_merge_warns_over_the_whole_runs_answers_where_no_shard_had_enough(
    pytester, always_yes, capsys
):
    """Two shards of 12 and 13 verdicts: too few each to tell (20), 25 of 25 'yes' over the run. The
    merged report tallied nothing and so warned about nothing, however alike the answers."""
    from pytest_ragmetrics.__main__ import main

    pytester.makepyfile(test_rag=TESTS)
    pytester.makeini("[pytest]\n")
    for name, half in (("a", "first_half"), ("b", "second_half")):
        result = pytester.runpytest("-k", half, f"--rag-report-json={name}.json")
        assert result.ret == 0
        summary = json.loads((pytester.path / f"{name}.json").read_text())["summary"]
        assert "judge_warnings" not in summary
        assert summary["judge_answers"] == {"context_precision": {"yes": 12 if name == "a" else 13}}
    shards = [str(pytester.path / "a.json"), str(pytester.path / "b.json")]
    capsys.readouterr()
    assert main(["report", "merge", *shards, "--output", str(pytester.path / "m.json")]) == 0
    summary = json.loads((pytester.path / "m.json").read_text())["summary"]
    assert summary["judge_answers"] == {"context_precision": {"yes": 25}}
    [warning] = summary["judge_warnings"]
    assert warning["message"].startswith(
        "the judge answered 'useful yes' to 25 of 25 context_precision verdicts (100%): it may not be"
    )
    assert (warning["count"], warning["total"], warning["share"]) == (25, 25, 1.0)

    # A tally edited into a negative count is refused, naming the field.
    report = json.loads((pytester.path / "a.json").read_text())
    report["summary"]["judge_answers"]["context_precision"] = {"yes": 30, "no": -20}
    (pytester.path / "a.json").write_text(json.dumps(report))
    capsys.readouterr()
    assert main(["report", "merge", *shards, "--output", str(pytester.path / "m2.json")]) == 4
    expected = "  summary.judge_answers.context_precision.no is -20, expected a count of verdicts"
    assert expected in capsys.readouterr().err.splitlines()
