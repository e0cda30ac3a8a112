"""A judge that answers (nearly) everything alike is noticed without labels."""

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
    result = pytester.runpytest_subprocess(*extra)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "ragmetrics warning: the judge answered 'useful yes' to 25 of 25 context_precision verdicts "
            "(100%): it may not be discriminating; check it against labelled verdicts (--rag-judge-check) "
            "or with controls (--rag-judge-controls)"
        ]
    )
    md = pytester.runpytest_subprocess(*extra, "--rag-report", "--rag-report-md=r.md")
    md.stdout.fnmatch_lines(["warning: the judge answered 'useful yes' to 25 of 25*"])
    assert "> **Warning:** the judge answered" in (pytester.path / "r.md").read_text()
