"""Negative controls: a question paired with a chunk retrieved for another sample, judged like any other."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pytest_ragmetrics import RagSample
from pytest_ragmetrics.calibration.check import parse_floor
from pytest_ragmetrics.calibration.controls import ControlPair, control_pairs
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value

TOPICS = ["Paris", "Rome", "Berlin", "Madrid", "Lisbon", "Vienna", "Oslo", "Dublin"]


def golden() -> list[dict[str, Any]]:
    """One sample per city: its question, two chunks about it, and its reference."""
    return [
        {
            "id": city.lower(),
            "question": f"What is {city} known for?",
            "contexts": [f"{city} is known for its old town.", f"{city} has a famous river front."],
            "ground_truth": f"{city} is known for its old town.",
        }
        for city in TOPICS
    ]


def samples() -> list[RagSample]:
    return [RagSample(**row) for row in golden()]


def test_pairs_are_seeded_and_never_from_the_same_sample_or_reference():
    pairs = control_pairs(samples(), 10, seed=3)
    assert len(pairs) == 10 and len(set(pairs)) == 10
    assert pairs == control_pairs(list(reversed(samples())), 10, seed=3)  # order of the run does not matter
    assert pairs != control_pairs(samples(), 10, seed=4)
    by_id = {s.id: s for s in samples()}
    for pair in pairs:
        assert pair.question_sample != pair.chunk_sample
        assert pair.chunk not in by_id[pair.question_sample].contexts
        assert pair.reference == by_id[pair.question_sample].ground_truth


def test_a_pair_sharing_a_reference_a_chunk_or_a_context_id_is_never_drawn():
    a = RagSample(
        "Question a?", ["shared chunk", "chunk a"], "Same reference.", id="a", context_ids=["1", "2"]
    )
    b = RagSample(
        "Question b?", ["shared chunk", "chunk b"], "Same reference.", id="b", context_ids=["1", "3"]
    )
    assert control_pairs([a, b], 5) == []  # one reference: nothing is a control
    c = RagSample("Question c?", ["shared chunk", "chunk c"], "Reference c.", id="c", context_ids=["1", "4"])
    d = RagSample("Question d?", ["other", "chunk d"], "Reference d.", id="d", context_ids=["9", "4"])
    pairs = control_pairs([c, d], 10)
    # c's chunk with id 4 and d's with id 4 are the same article: only the other chunks pair up.
    assert {(p.question_sample, p.chunk) for p in pairs} == {("c", "other"), ("d", "shared chunk")}
    assert control_pairs([c], 5) == [] and control_pairs([c, d], 0) == []


def test_a_chunk_two_samples_share_is_one_control_per_question():
    shared = "A chunk both samples retrieved."
    a = RagSample("Question a?", ["chunk a"], "Reference a.", id="a")
    b = RagSample("Question b?", [shared, "chunk b"], "Reference b.", id="b")
    c = RagSample("Question c?", [shared, "chunk c"], "Reference c.", id="c")
    pairs = control_pairs([a, b, c], 20)
    assert len({(p.question, p.chunk) for p in pairs}) == len(pairs)
    assert [p.chunk for p in pairs if p.question == "Question a?"].count(shared) == 1


def test_a_pair_round_trips_through_json():
    [pair] = control_pairs(samples()[:2], 1)
    assert ControlPair.from_json(json.loads(json.dumps(pair.to_json()))) == pair


def test_a_controls_floor_parses_like_an_agreement_floor():
    floor = parse_floor("context_relevance[graded] controls <= 0.2")
    assert (floor.kind, floor.stat, floor.op, floor.threshold) == (
        "context_relevance_graded",
        "controls",
        "<=",
        0.2,
    )
    with pytest.raises(ConfigError, match="no negative controls for context_recall"):
        parse_floor("context_recall controls <= 0.2")


def discriminating(body: dict[str, Any]) -> dict[str, Any] | str:
    """A judge that finds a chunk useful / relevant only when it names the question's city."""
    payload = json.loads(body["messages"][1]["content"])
    schema = body["response_format"]["json_schema"]["schema"]
    city = next(c for c in TOPICS if c in payload["question"])
    if "chunk" in payload and "useful" in schema["properties"]:
        return {
            "reason": "names the city" if city in payload["chunk"] else "other city",
            "useful": city in payload["chunk"],
        }
    if "chunk" in payload and "rating" in schema["properties"]:
        return {"reason": "r", "rating": 2 if city in payload["chunk"] else 0}
    return conforming_value(schema)


TESTS = """
    import pytest
    from pytest_ragmetrics import assert_context_precision, assert_context_relevance

    @pytest.mark.ragmetrics(samples="golden.jsonl")
    def test_golden(rag_sample):
        assert_context_precision(rag_sample) >= 0.5
        assert_context_relevance(rag_sample, method="graded") >= 0.5
"""


@pytest.fixture
def golden_project(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in golden()))
    pytester.makepyfile(test_golden=TESTS)
    return pytester


def run(pytester, server: FakeJudgeServer, *args: str) -> Any:
    return pytester.runpytest_subprocess(
        f"--rag-judge-base-url={server.base_url}",
        "--rag-judge-controls=12",
        "--rag-judge-agreement=context_precision controls <= 0.2",
        "--rag-judge-agreement=context_relevance[graded] controls <= 0.2",
        "--rag-report-json=report.json",
        "-p",
        "no:randomly",
        *args,
    )


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "-n 2"])
def test_a_discriminating_judge_passes_its_controls_and_they_are_judged_once(golden_project, xdist):
    with FakeJudgeServer(discriminating) as server:
        result = run(golden_project, server, *xdist)
        result.assert_outcomes(passed=8)
        assert result.ret == 0
        tests_and_controls = server.request_count
        assert tests_and_controls == 8 * 2 * 2 + 12 * 2  # 2 chunks x 2 kinds per sample, 12 controls x 2
        result.stdout.fnmatch_lines(
            [
                "*ragmetrics negative controls: context_precision: 0 of 12 judged useful (0%)*",
                "*ragmetrics negative controls: context_relevance_graded: 0 of 12 judged relevant (0%)*",
            ]
        )
        report = json.loads((golden_project.path / "report.json").read_text())
        section = report["summary"]["judge_controls"]
        assert section["passed"] and [f["value"] for f in section["floors"]] == [0.0, 0.0]
        again = run(golden_project, server, *xdist)
        assert again.ret == 0
        assert server.request_count == tests_and_controls  # the controls came from the cache too


def test_a_judge_that_says_yes_to_everything_fails_the_controls_floor(golden_project):
    with FakeJudgeServer() as server:  # conforming answers: every chunk useful, rated 2
        result = run(golden_project, server)
    result.assert_outcomes(passed=8)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics negative controls: context_precision: 12 of 12 judged useful (100%)*",
            "*ragmetrics warning: 12 of 12 negative controls (100%) were judged useful for context_precision*",
            "*ragmetrics controls floor failed: context_precision controls <= 0.2 (12 of 12 controls judged useful)*",
        ]
    )


def test_a_controls_floor_without_controls_is_a_usage_error(golden_project):
    result = golden_project.runpytest("--rag-judge-agreement=context_precision controls <= 0.2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs negative controls: set --rag-judge-controls=N*"])


def test_a_run_without_golden_sets_says_no_control_could_be_drawn(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        """
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_one():
            assert_context_precision(RagSample("Q?", ["A chunk."], "A.", id="q")) >= 0.5
        """
    )
    with FakeJudgeServer() as server:
        result = pytester.runpytest_subprocess(
            f"--rag-judge-base-url={server.base_url}",
            "--rag-judge-controls=5",
            "--rag-judge-agreement=context_precision controls <= 0.2",
        )
        assert server.request_count == 1  # the test's own judgment: no control
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics warning: only 0 of the 5 negative controls asked for could be drawn*",
            "*ragmetrics controls floor failed: context_precision controls <= 0.2 (no context_precision control "
            "was judged*",
        ]
    )


@pytest.mark.parametrize(("needed", "share"), [(True, 1.0), (False, 0.0)])
def test_sentence_selection_controls_count_a_chunk_with_any_sentence_needed(
    monkeypatch, tmp_path, needed, share
):
    from pytest_ragmetrics import Evaluator, Settings
    from pytest_ragmetrics.calibration.controls import run_controls

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        numbers = body["response_format"]["json_schema"]["schema"]["properties"]["relevant_sentences"]
        return {"reason": "r", "relevant_sentences": numbers["items"]["enum"][:1] if needed else []}

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pairs = control_pairs(samples(), 4)
    with FakeJudgeServer(answer) as server:
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            section = run_controls(ev, pairs, ["context_relevance_sentences", "context_recall"], [])
        assert server.request_count == 4  # recall has no controls
    [kind] = section["kinds"]
    assert (kind["kind"], kind["judged"], kind["share"], kind["verdict"]) == (
        "context_relevance_sentences",
        4,
        share,
        "needed",
    )
