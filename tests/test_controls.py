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
    with pytest.raises(ConfigError, match="no controls for context_recall"):
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
    anything: dict[str, Any] = conforming_value(schema)  # a JSON object, built from the schema
    return anything


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


def run(pytester: pytest.Pytester, server: FakeJudgeServer, *args: str) -> Any:
    return pytester.runpytest(
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
            "*ragmetrics controls floor failed: context_precision controls <= 0.2 (12 of 12 negative controls "
            "judged useful; false alarm 2.0%, miss 1.9% at 12 controls)*",
        ]
    )


def test_a_controls_floor_without_controls_is_a_usage_error(golden_project):
    result = golden_project.runpytest("--rag-judge-agreement=context_precision controls <= 0.2")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*needs controls: set --rag-judge-controls=N*"])


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


# -- positive controls, drawn from the samples the run scored --------------------------------------

RETRIEVING_TESTS = """
    import pytest
    from pytest_ragmetrics import assert_context_precision

    CITIES = {cities!r}

    def retrieve(question):
        city = next(c for c in CITIES if c in question)
        return [f"{{city}} is known for its old town.", f"{{city}} has a famous river front."]

    @pytest.mark.ragmetrics(samples="golden.jsonl")
    def test_golden(rag_sample):
        assert_context_precision(rag_sample.with_contexts(retrieve(rag_sample.question))) >= 0.0
"""


def says_no(body: dict[str, Any]) -> dict[str, Any]:
    """A judge that finds nothing useful: every run's score is low, and no negative control is fooled."""
    return {"reason": "not useful", "useful": False}


@pytest.fixture
def retrieving_project(pytester, monkeypatch):
    """A golden set of questions and references only: the test body retrieves the chunks."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    rows = [{k: v for k, v in row.items() if k != "contexts"} for row in golden()]
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in rows))
    pytester.makepyfile(test_golden=RETRIEVING_TESTS.format(cities=TOPICS))
    return pytester


def run_both(pytester: pytest.Pytester, server: FakeJudgeServer, *args: str) -> Any:
    return pytester.runpytest(
        f"--rag-judge-base-url={server.base_url}",
        "--rag-judge-controls=8",
        "--rag-judge-agreement=context_precision controls <= 0.25",
        "--rag-judge-agreement=context_precision positive_controls >= 0.75",
        "--rag-report-json=report.json",
        "-p",
        "no:randomly",
        *args,
    )


def floors_of(pytester: pytest.Pytester) -> dict[str, dict[str, Any]]:
    report = json.loads((pytester.path / "report.json").read_text())
    return {f["spec"]: f for f in report["summary"]["judge_controls"]["floors"]}


def test_positive_controls_fail_a_judge_that_says_no_to_everything_in_a_suite_that_retrieves_in_the_test(
    retrieving_project,
):
    scipy_stats = pytest.importorskip("scipy.stats")
    with FakeJudgeServer(says_no) as server:
        result = run_both(retrieving_project, server)
    result.assert_outcomes(passed=8)
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics negative controls: context_precision: 0 of 8 judged useful (0%)*",
            "*ragmetrics positive controls: context_precision: 0 of 8 judged useful (0%)*",
            "*ragmetrics warning: 8 of 8 positive controls (100%) were judged not useful for context_precision*",
            "*ragmetrics controls floor failed: context_precision positive_controls >= 0.75 (8 of 8 positive "
            "controls judged not useful; false alarm *, miss * at 8 controls)*",
        ]
    )
    floors = floors_of(retrieving_project)
    negative = floors["context_precision controls <= 0.25"]
    positive = floors["context_precision positive_controls >= 0.75"]
    assert negative["passed"] and negative["value"] == 0.0  # the negative controls alone miss this judge
    assert not positive["passed"] and positive["value"] == 0.0 and positive["judged"] == 8
    # The floors' error rates at 8 controls, as scipy's binomial gives them (to the report's six
    # decimals): negative controls fail at more than 2 of 8 judged useful, positive ones below 6 of 8.
    assert negative["false_alarm"] == pytest.approx(scipy_stats.binom.sf(2, 8, 0.05), abs=1e-6)
    assert negative["miss"] == pytest.approx(scipy_stats.binom.cdf(2, 8, 0.5), abs=1e-6)
    assert positive["false_alarm"] == pytest.approx(scipy_stats.binom.cdf(5, 8, 0.95), abs=1e-6)
    assert positive["miss"] == pytest.approx(scipy_stats.binom.sf(5, 8, 0.5), abs=1e-6)


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "-n 2"])
def test_a_discriminating_judge_passes_both_controls_drawn_from_samples_retrieved_in_the_test(
    retrieving_project, xdist
):
    with FakeJudgeServer(discriminating) as server:
        result = run_both(retrieving_project, server, *xdist)
        # The run's own judgments (2 chunks x 8 samples) and 8 negative controls; the 8 positive ones
        # (a reference offered as the chunk) ask what the tests asked of the chunk stating it.
        assert server.request_count == 8 * 2 + 8
    result.assert_outcomes(passed=8)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics negative controls: context_precision: 0 of 8 judged useful (0%)*",
            "*ragmetrics positive controls: context_precision: 8 of 8 judged useful (100%)*",
        ]
    )
    floors = floors_of(retrieving_project)
    assert all(f["passed"] and not f.get("skipped") for f in floors.values())


def test_report_merge_counts_once_the_controls_two_shards_judged_on_the_same_samples(
    retrieving_project, capsys
):
    """Two shards that scored the same samples (two jobs over one golden set) draw and judge the same
    controls: their merged floors rest on those controls once, not twice."""
    from pytest_ragmetrics.__main__ import main

    with FakeJudgeServer(says_no) as server:
        for shard in ("a", "b"):
            result = run_both(retrieving_project, server, f"--rag-report-json={shard}.json")
            assert result.ret == 1  # the positive controls' floor fails this judge in each shard
    shards = [str(retrieving_project.path / f"{shard}.json") for shard in ("a", "b")]
    merged = retrieving_project.path / "merged.json"
    capsys.readouterr()
    args = ["report", "merge", "--allow-partial", "--allow-mixed", "--output", str(merged), *shards]
    assert main(args) == 1
    section = json.loads(merged.read_text())["summary"]["judge_controls"]
    one = json.loads((retrieving_project.path / "a.json").read_text())["summary"]["judge_controls"]
    assert [(k["kind"], k["expected"], k["judged"], k["positive"]) for k in section["kinds"]] == [
        ("context_precision", "negative", 8, 0),
        ("context_precision", "positive", 8, 0),
    ]
    assert section["floors"] == one["floors"]  # decided on 8 controls, with their error rates at 8
    assert len({d["id"] for d in section["kinds"][1]["decided"]}) == 8


def test_too_few_samples_for_a_meaningful_control_are_said_plainly_instead_of_failing_a_floor(
    pytester, monkeypatch
):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(
        """
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_one():
            assert_context_precision(RagSample("Q?", ["A chunk."], "A.", id="q")) >= 0.0
        """
    )
    with FakeJudgeServer() as server:
        result = run_both(pytester, server)
    assert result.ret == 0
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics warning: only 0 of the 8 negative controls asked for could be drawn*",
            "*ragmetrics warning: only 1 of the 8 positive controls asked for could be drawn*",
            "*ragmetrics warning: controls floor context_precision controls <= 0.25: not decided: no negative "
            "context_precision control was drawn*",
            "*ragmetrics warning: controls floor context_precision positive_controls >= 0.75: not decided: too "
            "few controls (1) to tell a good judge from a bad one (false alarm 5.0%, miss 50.0% at 1 controls)*",
        ]
    )


def test_a_strict_controls_floor_is_decided_on_its_value_over_many_controls():
    """A floor a good judge fails about half the time (controls <= 0.05, at its 5%) is decided on its
    value however many controls there are, not passed undecided as if 400 controls were too few;
    one control still decides nothing."""
    from pytest_ragmetrics.calibration.controls import ControlShare, check_control_floors
    from pytest_ragmetrics.gates import compare

    strict = parse_floor("context_precision controls <= 0.05")
    many = ControlShare("context_precision")
    for i in range(400):
        many.add(f"c{i}", i < 120)  # 30% judged useful
    (row,) = check_control_floors([strict], [many], compare)
    assert (row["passed"], "skipped" in row, row["judged"]) == (False, False, 400)
    assert row["false_alarm"] > 0.25 and row["miss"] < 1e-9
    one = ControlShare("context_precision")
    one.add("c0", False)
    (row,) = check_control_floors([strict], [one], compare)
    assert row["passed"] and row["skipped"]
