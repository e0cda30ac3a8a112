"""The answer metrics through pytest: helpers, declared scores, gates, the JSON report's per-claim
verdicts (every score recomputed from them), and a replay with no call, also under xdist."""

from __future__ import annotations

import json
from fractions import Fraction
from typing import Any

import answer_judge
import pytest

from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

ANSWER_TESTS = """
import pytest
from pytest_ragmetrics import (
    RagSample, assert_answer_correctness, assert_answer_relevancy, assert_faithfulness,
)

TOWER = "The Eiffel Tower was completed in 1889."
HEIGHT = "The Eiffel Tower is 330 metres tall."
PARIS = "Paris is in France."
PAINT = "The Eiffel Tower is painted often, every seven years."
QUESTION = "When was the Eiffel Tower completed, and how tall is it?"
REFERENCE = TOWER + " " + HEIGHT
ANSWERS = [
    "The Eiffel Tower was completed in 1889 and the Eiffel Tower is 300 metres tall. The Eiffel Tower is painted often.",
    REFERENCE,
    "The Eiffel Tower was completed in 1889.",
    "The Eiffel Tower is 330 metres tall and Paris is in France.",
]
SAMPLES = [
    RagSample(QUESTION, [PARIS, HEIGHT, TOWER, PAINT][i:], ground_truth=REFERENCE, answer=a, id=f"a{i}")
    for i, a in enumerate(ANSWERS)
]
METRICS = [
    "faithfulness", "faithfulness[not_contradicted]", "answer_relevancy",
    "answer_correctness", "answer_correctness[precision]", "answer_correctness[recall]",
]

@pytest.mark.ragmetrics(metrics=METRICS)
@pytest.mark.parametrize("i", range(len(SAMPLES)))
def test_answer(i):
    sample = SAMPLES[i]
    assert_faithfulness(sample) >= 0
    assert_faithfulness(sample, "not_contradicted") >= 0
    assert_answer_relevancy(sample) >= 0
    assert_answer_correctness(sample) >= 0
    assert_answer_correctness(sample, "precision") >= 0
    assert_answer_correctness(sample, "recall") >= 0

def test_an_evasive_answer():
    sample = RagSample(QUESTION, [TOWER], ground_truth=REFERENCE, answer="I don't know.", id="idk")
    assert_answer_relevancy(sample) <= 0
    assert_faithfulness(sample) >= 0.5

def test_the_golden_set():
    assert_faithfulness(SAMPLES).min() >= 0
    assert_answer_correctness(SAMPLES, "recall").quantile(0.5) >= 0
"""

GATES = "rag_gates =\n    faithfulness mean >= 0.1\n    answer_correctness[recall] mean >= 0.7\n"


@pytest.fixture
def server(monkeypatch):
    with FakeJudgeServer(answer_judge.responder) as server:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield server


def _recomputed(row: dict[str, Any], sample: dict[str, Any]) -> float:
    """A sample's score from the verdicts the report lists, by the published definitions."""
    verdicts = sample["verdicts"]
    labels = [v["verdict"] for v in verdicts]
    metric, method = row["metric"], row["method"]
    if metric == "faithfulness":
        n = len(labels)
        kept = labels.count("supported") if method is None else n - labels.count("contradicted")
        return float(Fraction(kept, n))
    if metric == "answer_relevancy":
        (label,) = labels
        return 0.0 if label == "non-committal" else float(label.split("/")[0]) / 2
    assert metric == "answer_correctness"
    answer = [v["verdict"] for v in verdicts if v["item"] == "answer claim"]
    reference = [v["verdict"] for v in verdicts if v["item"] == "reference claim"]
    tp = answer.count("supported")
    fp = len(answer) - tp
    fn = len(reference) - reference.count("supported")
    precision = Fraction(tp, tp + fp)
    if method == "precision":
        return float(precision)
    recall = Fraction(tp, tp + fn)
    if method == "recall":
        return float(recall)
    return float(2 * precision * recall / (precision + recall)) if tp else 0.0


def _scores(report: dict[str, Any]) -> list[tuple[str, str, Any, Any, Any]]:
    return [
        (row["nodeid"], row["metric"], row["method"], sample["id"], sample["score"])
        for row in report["results"]
        for sample in row["samples"]
    ]


def test_every_answer_score_in_the_json_report_is_recomputed_from_its_claim_verdicts(pytester, server):
    pytester.makeini(f"[pytest]\nrag_store_dir = judgments\n{GATES}")
    pytester.makepyfile(test_answers=ANSWER_TESTS)
    result = pytester.runpytest(
        "--rag-report-json=report.json",
        "--rag-report-md=report.md",
        "--rag-report-html=report.html",
        "--rag-report",
    )
    result.assert_outcomes(passed=5, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*faithfulness of sample 'idk' has no score, expected >= 0.5*",
            "*why: no claims: *I don't know*",
            "*FAIL*answer_correctness?recall? mean >= 0.7*value*n=4*",
        ]
    )
    report = json.loads(pytester.path.joinpath("report.json").read_text())
    checked = 0
    verdicts_by_method: dict[tuple[str, str], list[tuple[str, str, list[int] | None]]] = {}
    for row in report["results"]:
        if row["stat"] != "score":
            continue
        (sample,) = row["samples"]
        if sample["id"] == "idk" and row["metric"] == "faithfulness":
            assert (sample["score"], sample["outcome"], sample["verdicts"]) == (None, "no_claims", [])
            assert (row["score"], row["outcome"], row["passed"]) == (None, "no_claims", False)
            continue
        assert sample["score"] == pytest.approx(_recomputed(row, sample), abs=1e-6), (row["metric"], sample)
        if row["metric"] == "faithfulness":
            labels = [(v["text"], v["verdict"], v.get("chunks")) for v in sample["verdicts"]]
            verdicts_by_method[(sample["id"], str(row["method"]))] = labels
        checked += 1
    assert checked == 4 * 6 + 1
    for sid in ("a0", "a1", "a2", "a3"):  # both faithfulness methods read one set of verdicts
        assert verdicts_by_method[(sid, "None")] == verdicts_by_method[(sid, "not_contradicted")]
    # A claim contradicted by a chunk names it by its rank in that sample.
    a0 = verdicts_by_method[("a0", "None")]
    assert a0[1] == ("the Eiffel Tower is 300 metres tall.", "contradicted", [2])
    # The chunk that misled the answer: grounded in chunk 4, not in the reference.
    ((misled_claim),) = report["summary"]["misled"]
    assert {k: v for k, v in misled_claim.items() if k not in ("key", "reason", "reference_reason")} == {
        "id": "a0",
        "index": 3,
        "claim": "The Eiffel Tower is painted often.",
        "chunks": [4],
        "reference_verdict": "not found",
    }
    result.stdout.fnmatch_lines(
        [
            "*answers misled by retrieval*",
            "sample a0: answer claim 3 'The Eiffel Tower is painted often.' is not in the reference but "
            "supported by chunk 4: judged supported",
        ]
    )
    # Every report names the outcome, the chunk that misled the answer, and n beside no claims.
    markdown = pytester.path.joinpath("report.md").read_text()
    html = pytester.path.joinpath("report.html").read_text()
    for text in (markdown, html):
        assert "no claims" in text and "4 (+1 no claims)" in text
        assert "Answers misled by retrieval" in text
        assert "is not in the reference but supported by chunk 4" in text
    assert "contradicted (chunk 2)" in html  # a claim's verdict names its chunk
    summary = {(m["metric"], m["method"]): m for m in report["summary"]["metrics"]}
    assert summary[("faithfulness", None)]["n"] == 4 and summary[("faithfulness", None)]["no_claims"] == 1
    gates = {g["spec"]: g for g in report["summary"]["gates"]}
    assert gates["faithfulness mean >= 0.1"]["no_claims"] == 1 and gates["faithfulness mean >= 0.1"]["passed"]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_replay_makes_no_call_and_writes_identical_answer_scores(pytester, server, workers):
    pytester.makeini(f"[pytest]\nrag_store_dir = judgments\n{GATES}")
    pytester.makepyfile(test_answers=ANSWER_TESTS)
    pytester.runpytest("--rag-cache-dir=recording", "--rag-report-json=recorded.json").assert_outcomes(
        passed=5, failed=1
    )
    calls = server.request_count
    assert calls > 0
    replay = pytester.runpytest(
        *workers, "--rag-cache=replay", "--rag-cache-dir=fresh", "--rag-report-json=replayed.json"
    )
    replay.assert_outcomes(passed=5, failed=1)
    assert server.request_count == calls
    recorded = json.loads(pytester.path.joinpath("recorded.json").read_text())
    replayed = json.loads(pytester.path.joinpath("replayed.json").read_text())
    assert json.dumps(_scores(replayed)) == json.dumps(_scores(recorded))
    assert replayed["summary"]["metrics"] == recorded["summary"]["metrics"]
    assert replayed["summary"]["judge"]["calls"] == 0
