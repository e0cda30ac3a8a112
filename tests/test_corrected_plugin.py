"""Judge-corrected means through real runs: the labelled set of the judge check gives each labelled
sample the score its labels make, the report puts the corrected mean beside the judge's, and a
``corrected_mean`` gate decides on the interval's bound. Judged over HTTP by the fake judge server."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.calibration.labelled import LabelAnswers
from pytest_ragmetrics.calibration.labels import load_labels
from pytest_ragmetrics.stats import corrected_mean
from pytest_ragmetrics.testing import FakeJudgeServer

pytest_plugins = ["pytester"]

SIZE = 20


def fact(i: int) -> str:
    return f"Fact {i} is that the sky is blue."


def noise(i: int) -> str:
    return f"Noise {i} is about something else."


def golden() -> list[dict[str, Any]]:
    """Even samples rank the useful chunk first (precision 1.0), odd ones second (0.5)."""
    return [
        {
            "id": f"s{i:02d}",
            "question": f"What is fact {i}?",
            "contexts": [fact(i), noise(i)] if i % 2 == 0 else [noise(i), fact(i)],
            "ground_truth": fact(i),
        }
        for i in range(SIZE)
    ]


def truth(i: int) -> float:
    return 1.0 if i % 2 == 0 else 0.5


def judged(i: int) -> float:
    # The judge also calls the noise useful for every third sample: an odd one then scores 1.0.
    return 1.0 if i % 2 == 0 or i % 3 == 0 else 0.5


def biased(body: dict[str, Any]) -> dict[str, Any]:
    payload = json.loads(body["messages"][1]["content"])
    i = int(payload["question"].split()[-1].rstrip("?"))
    useful = payload["chunk"].startswith("Fact") or i % 3 == 0
    return {"reason": "biased", "useful": useful}


def labels_for(ids: list[int]) -> str:
    items = [
        {
            "kind": "context_precision",
            "question": f"What is fact {i}?",
            "reference": fact(i),
            "chunk": chunk,
            "useful": chunk == fact(i),
        }
        for i in ids
        for chunk in (fact(i), noise(i))
    ]
    return "".join(json.dumps(item) + "\n" for item in items)


TESTS = """
    import pytest
    from pytest_ragmetrics import assert_context_precision

    @pytest.mark.ragmetrics(samples="golden.jsonl")
    def test_golden(rag_sample):
        assert_context_precision(rag_sample) >= 0.0
"""


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\nrag_judge_check = labels.jsonl\n")
    pytester.makefile(".jsonl", golden="\n".join(json.dumps(row) for row in golden()))
    pytester.makepyfile(test_golden=TESTS)
    return pytester


def draw(pytester: pytest.Pytester, n: int, seed: int) -> list[int]:
    """Draw the samples to label with the command, as a user would; their numbers."""
    from pytest_ragmetrics.__main__ import main

    golden_path, out = pytester.path / "golden.jsonl", pytester.path / "labels.sample.json"
    assert (
        main(["labels", "sample", "--n", str(n), "--seed", str(seed), str(golden_path), "--out", str(out)])
        == 0
    )
    record = json.loads((pytester.path / "labels.sample.json").read_text())
    assert (record["population"], record["n"], record["seed"]) == (SIZE, n, seed)
    return [int(sample_id[1:]) for sample_id in record["ids"]]


def run(pytester: pytest.Pytester, server: FakeJudgeServer, *args: str) -> Any:
    return pytester.runpytest(
        f"--rag-judge-base-url={server.base_url}", "--rag-report-json=report.json", "-p", "no:randomly", *args
    )


def summary_of(pytester: pytest.Pytester, metric: str = "context_precision") -> dict[str, Any]:
    report = json.loads((pytester.path / "report.json").read_text())
    return next(m for m in report["summary"]["metrics"] if m["metric"] == metric)


@pytest.mark.parametrize("xdist", [[], ["-n", "2", "-p", "xdist"]], ids=["one process", "-n 2"])
def test_the_corrected_mean_stands_beside_the_judges_and_gates_decide_on_its_bound(project, xdist):
    labelled = draw(project, 8, seed=3)
    project.path.joinpath("labels.jsonl").write_text(labels_for(labelled))
    gates = [
        "context_precision mean >= 0.8",
        "context_precision corrected_mean >= 0.3",
        "context_precision corrected_mean <= 1",
        "context_precision corrected_mean >= 0.8",
    ]
    with FakeJudgeServer(biased) as server:
        result = run(project, server, "--rag-report", *xdist, *(f"--rag-gate={g}" for g in gates))
    result.assert_outcomes(passed=SIZE)
    others = [i for i in range(SIZE) if i not in labelled]
    expected = corrected_mean(
        [truth(i) for i in labelled], [judged(i) for i in labelled], [judged(i) for i in others]
    )
    metric = summary_of(project)
    assert metric["mean"] == pytest.approx(sum(judged(i) for i in range(SIZE)) / SIZE, abs=1e-6)
    corrected = metric["corrected"]
    assert (corrected["labelled"], corrected["unlabelled"]) == (8, SIZE - 8)
    assert corrected["labels_mean"] == pytest.approx(sum(truth(i) for i in labelled) / 8, abs=1e-6)
    assert corrected["mean"] == pytest.approx(expected.mean, abs=1e-6)
    assert (corrected["low"], corrected["high"]) == pytest.approx(
        (expected.low, min(1.0, expected.high)), abs=1e-6
    )
    assert corrected["weight"] == pytest.approx(expected.weight, abs=1e-6)
    result.stdout.fnmatch_lines(
        [
            "*metric * n * mean * min * max * corrected [[]95% CI[]]*",
            f"*context_precision * 20 * {metric['mean']:.3f} * {expected.mean:.3f} [[]{expected.low:.3f}, *",
            "*corrected context_precision: 8 labelled + 12 judged only, weight *",
        ]
    )
    assert "were not drawn" not in result.stdout.str()
    # The judge's own mean (0.825) passes >= 0.8; the corrected one (0.746, the labels' truth is 0.75)
    # does not, and its interval's lower bound decides.
    assert expected.low < expected.mean < 0.8 < metric["mean"]
    report = json.loads((project.path / "report.json").read_text())
    outcomes = [(g["spec"], g["passed"], g.get("bound")) for g in report["summary"]["gates"]]
    assert outcomes == [
        (gates[0], True, None),
        (gates[1], True, "lower"),
        (gates[2], True, "upper"),
        (gates[3], False, "lower"),
    ]
    assert report["summary"]["gates"][3]["value"] == pytest.approx(expected.low, abs=1e-6)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["FAIL  context_precision corrected_mean >= 0.8  value*"])
    # The run's own report merged decides the corrected_mean gates on the same bounds.
    from pytest_ragmetrics.__main__ import main

    merged = project.path / "merged.json"
    args = ["report", "merge", "--allow-partial", "--output", str(merged), str(project.path / "report.json")]
    assert main([*args, *(f"--gate={g}" for g in gates)]) == 1
    again = json.loads(merged.read_text())["summary"]["gates"]
    assert [(g["spec"], g["passed"], g.get("bound")) for g in again] == outcomes
    assert again[3]["value"] == pytest.approx(report["summary"]["gates"][3]["value"], abs=1e-6)


def test_a_corrected_mean_gate_without_labelled_samples_fails_saying_why(project):
    project.path.joinpath("labels.jsonl").write_text(labels_for([99]))  # a question the run never asks
    with FakeJudgeServer(biased) as server:
        result = run(project, server, "--rag-gate=context_precision corrected_mean >= 0.5")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*gate failed: context_precision corrected_mean >= 0.5*no labelled samples*"]
    )


def test_labels_that_do_not_vary_draw_no_interval_and_a_gate_on_them_fails_saying_why(project):
    # Samples 2 and 4: labelled 1.0 and judged 1.0. Their normal interval has no width, [1, 1]; a gate
    # on its bound passed on two labels, whatever the judge said of the other 18 samples.
    project.path.joinpath("labels.jsonl").write_text(labels_for([2, 4]))
    with FakeJudgeServer(biased) as server:
        result = run(project, server, "--rag-gate=context_precision corrected_mean >= 0.9")
    assert result.ret == 1
    result.stdout.fnmatch_lines(
        ["*gate failed: context_precision corrected_mean >= 0.9*2 labelled samples draw an interval of no width*"]
    )
    corrected = summary_of(project)["corrected"]
    assert (corrected["labelled"], corrected["unlabelled"], corrected["labels_mean"]) == (2, 18, 1.0)
    assert corrected["mean"] is corrected["low"] is corrected["high"] is None
    assert "label more samples" in corrected["reason"]
    assert corrected_mean([1.0, 1.0], [1.0, 1.0], [judged(i) for i in range(SIZE) if i not in (2, 4)])[1:3] == (
        1.0,
        1.0,
    )


def test_labelled_samples_not_drawn_by_the_command_are_warned_about(project):
    with FakeJudgeServer(biased) as server:
        project.path.joinpath("labels.jsonl").write_text(labels_for([1, 3, 5]))
        undrawn = run(project, server)
        labelled = draw(project, 4, seed=7)
        hand_picked = next(i for i in range(SIZE) if i not in labelled)
        project.path.joinpath("labels.jsonl").write_text(labels_for([*labelled[:-1], hand_picked]))
        mixed = run(project, server)
    undrawn.stdout.fnmatch_lines(
        [
            "*ragmetrics warning: the 3 labelled samples of labels.jsonl were not drawn by python -m "
            "pytest_ragmetrics labels sample (no labels.sample.json)*"
        ]
    )
    mixed.stdout.fnmatch_lines(
        [
            f"*ragmetrics warning: 1 labelled samples were not drawn (s{hand_picked:02d}; *",
            f"*ragmetrics warning: 1 drawn samples the run scored have no labelled score * (s{labelled[-1]:02d})*",
        ]
    )


def test_the_labels_sample_command_is_seeded_and_refuses_what_it_cannot_draw(tmp_path, capsys):
    from pytest_ragmetrics.__main__ import main

    golden_path = tmp_path / "golden.jsonl"
    golden_path.write_text("\n".join(json.dumps(row) for row in golden()))
    outs = []
    for name in ("a", "b"):
        assert (
            main(
                [
                    "labels",
                    "sample",
                    "--n",
                    "5",
                    "--seed",
                    "3",
                    str(golden_path),
                    "--out",
                    str(tmp_path / name),
                ]
            )
            == 0
        )
        outs.append(json.loads((tmp_path / name).read_text()))
    assert outs[0]["ids"] == outs[1]["ids"] and len(set(outs[0]["ids"])) == 5
    other = tmp_path / "c"
    assert main(["labels", "sample", "--n", "5", "--seed", "4", str(golden_path), "--out", str(other)]) == 0
    assert json.loads(other.read_text())["ids"] != outs[0]["ids"]
    # A record not named <labelled set>.sample.json is one no run reads: the advice says so.
    assert "a run never reads c; for labels.jsonl it reads labels.sample.json" in capsys.readouterr().out
    assert main(["labels", "sample", "--n", "21", "--seed", "3", str(golden_path)]) == 4
    assert "--n 21 is more than the 20 samples of the golden set" in capsys.readouterr().err
    assert main(["labels", "sample", "--n", "2", "--seed", "3", str(tmp_path / "missing.jsonl")]) == 4
    assert "missing.jsonl" in capsys.readouterr().err


QUESTION = "Where is France and what is its capital?"
REFERENCE = "France is in Western Europe. Its capital is Paris."
PARIS = "Paris is the capital of France."
EUROPE = "France is in Western Europe."


def test_each_judged_metric_gets_the_score_its_labels_make(tmp_path, monkeypatch):
    """Precision, recall, graded, sentence and binary relevance, scored from the labels by the
    metrics' own formulas; the judge says yes to everything."""
    items = [
        {"kind": "context_precision", "question": QUESTION, "reference": REFERENCE, "chunk": EUROPE, "useful": False},
        {"kind": "context_precision", "question": QUESTION, "reference": REFERENCE, "chunk": PARIS, "useful": True},
        {"kind": "context_recall", "question": QUESTION, "contexts": [PARIS, EUROPE], "reference": REFERENCE,
         "attributed": [True, False]},
        {"kind": "context_relevance_graded", "question": QUESTION, "chunk": EUROPE, "rating": 1},
        {"kind": "context_relevance_graded", "question": QUESTION, "chunk": PARIS, "rating": 2},
        {"kind": "context_relevance_sentences", "question": QUESTION, "chunk": EUROPE, "relevant_sentences": []},
        {"kind": "context_relevance_sentences", "question": QUESTION, "chunk": PARIS, "relevant_sentences": [1]},
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(i) + "\n" for i in items))
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    sample = RagSample(QUESTION, [EUROPE, PARIS], REFERENCE, id="q")
    unlabelled = RagSample(QUESTION, [EUROPE, "Lyon is a city in France."], REFERENCE, id="u")
    with FakeJudgeServer() as server:  # conforming answers: every chunk useful, rated 2, all attributed
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            ev.labelled = LabelAnswers(load_labels(path))
            scored = {
                name: ev.score(sample, metric, method)
                for name, metric, method in [
                    ("precision", "context_precision", None),
                    ("recall", "context_recall", None),
                    ("graded", "context_relevance", "graded"),
                    ("sentence", "context_relevance", "sentence"),
                    ("binary", "context_relevance", "binary"),
                    ("claims", "context_recall", "claims"),
                ]
            }
            other = ev.score(unlabelled, "context_precision")
    assert {name: r.labelled for name, r in scored.items()} == {
        "precision": 0.5,  # useful only at rank 2
        "recall": 0.5,
        "graded": pytest.approx(0.75),
        "sentence": 0.5,  # one of the two sentences
        "binary": 0.5,
        "claims": None,  # claims are never labelled
    }
    assert scored["precision"].score == 1.0 and scored["graded"].score == 1.0  # the judge's own
    assert other.labelled is None  # a chunk nobody labelled
    assert scored["precision"].score_json()["labelled"] == 0.5
    assert "labelled" not in other.score_json()


def test_answer_metrics_beside_a_labelled_set_are_scored_without_a_labelled_score(tmp_path, monkeypatch):
    """A labelled set of retrieval judgments does not stop the answer metrics: their judgments (claims,
    claim verdicts, relevancy) have no label, so they get the judge's score and no labelled one."""
    item = {
        "kind": "context_precision",
        "question": QUESTION,
        "reference": REFERENCE,
        "chunk": PARIS,
        "useful": True,
    }
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(item) + "\n")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    sample = RagSample(QUESTION, [EUROPE, PARIS], REFERENCE, answer="Paris is the capital of France.", id="q")
    with FakeJudgeServer() as server:  # conforming answers: every claim supported, the answer committal
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            ev.labelled = LabelAnswers(load_labels(path))
            scored = [
                ev.score(sample, metric)
                for metric in ("faithfulness", "answer_relevancy", "answer_correctness")
            ]
    assert [r.score for r in scored] == [1.0, 1.0, 1.0]
    assert [r.labelled for r in scored] == [None, None, None]


def test_a_sample_nothing_was_retrieved_for_has_no_labelled_score(tmp_path):
    items = [
        {
            "kind": "context_precision",
            "question": QUESTION,
            "reference": REFERENCE,
            "chunk": PARIS,
            "useful": True,
        }
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps(items[0]) + "\n")
    with Evaluator(Settings(cache="off"), judge=_Never()) as ev:
        ev.labelled = LabelAnswers(load_labels(path))
        result = ev.score(RagSample(QUESTION, [], REFERENCE), "context_precision")
    assert result.score == 0.0 and result.labelled is None


class _Never:
    async def judge(self, request):  # pragma: no cover - nothing is judged
        raise AssertionError("judged")


def test_markdown_and_html_reports_put_the_corrected_mean_beside_the_judges():
    from pytest_ragmetrics.report.html import to_html
    from pytest_ragmetrics.report.markdown import to_markdown

    corrected = {
        "mean": 0.746, "low": 0.616, "high": 0.876, "confidence": 0.95, "labelled": 8, "unlabelled": 12,
        "labels_mean": 0.75, "judge_mean_labelled": 0.8125, "weight": 0.47, "effective_labels": 13.3,
    }  # fmt: skip
    metric = {"metric": "context_precision", "method": None, "n": 20, "mean": 0.825, "min": 0.5, "max": 1.0}
    report = {"version": 1, "results": [], "summary": {"metrics": [{**metric, "corrected": corrected}]}}
    text = to_markdown(report)
    assert "| Metric | n | Mean | Min | Max | Corrected mean [95% CI] |" in text
    assert (
        "| context\\_precision | 20 | 0.825 | 0.500 | 1.000 | 0.746 \\[0.616, 0.876\\] (8 labelled + 12 "
        "judged only, weight 0.47, worth 13.3 labels) |" in text
    )
    page = to_html(report)
    assert '<th class="num">Corrected mean [95% CI]</th>' in page and ">0.746 [0.616, 0.876]<br>" in page
    plain = {"version": 1, "results": [], "summary": {"metrics": [metric]}}
    assert "Corrected" not in to_markdown(plain) and "Corrected" not in to_html(plain)


def test_a_damaged_sample_record_is_named_and_the_draw_checks_say_what_is_off(tmp_path):
    from pytest_ragmetrics.calibration.drawing import draw_ids, draw_warnings, read_draw, record_path

    assert record_path("tests/labels.jsonl").as_posix() == "tests/labels.sample.json"
    bad = tmp_path / "labels.sample.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match=r"labels\.sample\.json: cannot read the labelling sample's record"):
        read_draw(bad)
    bad.write_text("[" * 100_000)  # nested past Python's recursion limit: damaged like any other
    with pytest.raises(ValueError, match=r"labels\.sample\.json: cannot read the labelling sample's record"):
        read_draw(bad)
    for text, what in [
        ('{"ids": ["q1", 2]}', "'ids' item 2 is the number 2, not a sample id"),
        ('{"ids": "q1"}', "'ids' is a string, not a list of sample ids"),
        ('{"n": 2}', "it has no 'ids'"),
        ("[1, 2]", "it is a list, not an object"),
    ]:
        bad.write_text(text)
        with pytest.raises(ValueError) as info:
            read_draw(bad)
        assert str(info.value) == (
            f"labels.sample.json: not a record written by python -m pytest_ragmetrics labels sample ({what})"
        )
    with pytest.raises(ValueError, match="--n must be at least 1"):
        draw_ids(["a", "b"], 0, 1)
    labelled = {("context_precision", None): ["a", "b"]}
    scored = {("context_precision", None): ["a", "b", "c", "d"]}
    assert draw_warnings(labelled, scored, {"ids": ["a", "b"]}, "labels.jsonl") == []
    assert draw_warnings({}, scored, None, "labels.jsonl") == []  # nothing labelled: nothing to say
    [problem] = draw_warnings(labelled, scored, None, "labels.jsonl", "labels.sample.json: damaged")
    assert problem.startswith("labels.sample.json: damaged; the corrected means assume")
    [outside, missing] = draw_warnings(labelled, scored, {"ids": ["b", "c"]}, "labels.jsonl")
    assert outside.startswith(
        "1 labelled samples were not drawn (a; labels.sample.json lists the drawn ones)"
    )
    assert missing.startswith(
        "1 drawn samples the run scored have no labelled score for every judged metric (c)"
    )


def test_a_golden_set_changed_since_its_labelling_sample_was_drawn_is_warned_about(project):
    """The record's golden_sha256 is checked against the golden set it names (relative to the root
    directory): the same file with other line ends passes, an edited one is named, a moved one too."""
    from pytest_ragmetrics.__main__ import main

    assert (
        main(["labels", "sample", "--n", "4", "--seed", "7", "golden.jsonl", "--out", "labels.sample.json"])
        == 0
    )
    record = json.loads(project.path.joinpath("labels.sample.json").read_text())
    project.path.joinpath("labels.jsonl").write_text(labels_for([int(i[1:]) for i in record["ids"]]))
    golden_file = project.path / "golden.jsonl"
    golden_file.write_bytes(golden_file.read_bytes().replace(b"\n", b"\r\n"))  # a Windows checkout
    with FakeJudgeServer(biased) as server:
        same = run(project, server)
        golden_file.write_text("\n".join(json.dumps(row) for row in golden()[:-1]))  # one sample fewer
        edited = run(project, server)
    assert "golden set" not in same.stdout.str()
    edited.stdout.fnmatch_lines(
        [
            "*ragmetrics warning: the golden set golden.jsonl changed since labels.sample.json was drawn from "
            f"it (sha256 *…, labels.sample.json records {record['golden_sha256'][:12]}…): the labelled samples "
            "may no longer be a uniform sample of it; draw again with python -m pytest_ragmetrics labels "
            "sample and label what it draws*"
        ]
    )


def test_a_golden_set_its_labelling_sample_names_and_no_longer_found_is_named(tmp_path):
    from pytest_ragmetrics.calibration.drawing import golden_changed

    record = {"golden": "tests/golden.jsonl", "golden_sha256": "0" * 64, "ids": ["a"]}
    where = tmp_path / "tests" / "labels.sample.json"
    assert golden_changed(record, where, tmp_path) == (
        f"the golden set tests/golden.jsonl that labels.sample.json was drawn from is not found (looked in "
        f"{tmp_path / 'tests'}, {tmp_path / 'tests' / 'tests'}, {tmp_path}): the drawn samples cannot be "
        "checked against it; set its 'golden' in labels.sample.json to its path from the root directory"
    )
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "golden.jsonl").write_bytes(b"{}\n")
    record["golden_sha256"] = hashlib.sha256(b"{}\n").hexdigest()
    assert golden_changed(record, where, tmp_path) is None
    assert golden_changed({"ids": ["a"]}, where, tmp_path) is None  # nothing recorded to check


def test_a_golden_set_named_by_a_path_the_file_system_refuses_is_not_found(tmp_path):
    """A record whose 'golden' names a directory longer than the file system allows ended the run in
    an OSError traceback (File name too long) at its end, as the corrected means were reported."""
    from pytest_ragmetrics.calibration.drawing import golden_changed

    record = {"golden": "g" * 300 + "/golden.jsonl", "golden_sha256": "0" * 64, "ids": ["a"]}
    changed = golden_changed(record, tmp_path / "labels.sample.json", tmp_path)
    assert changed is not None and changed.startswith(f"the golden set {'g' * 300}/golden.jsonl that ")
    assert "is not found (looked in" in changed


@pytest.mark.parametrize("drawn_as", ["/home/someone/project/tests/golden.jsonl", "../tests/golden.jsonl"])
def test_a_golden_set_drawn_by_a_path_from_elsewhere_is_found_by_its_name(tmp_path, drawn_as):
    """The draw records the golden set's path as typed: an absolute path on another machine, or one
    from another directory, is looked for by its file name beside the record (and under the root)."""
    from pytest_ragmetrics.calibration.drawing import golden_changed

    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "golden.jsonl").write_bytes(b"{}\n")
    where = tmp_path / "tests" / "labels.sample.json"
    record = {"golden": drawn_as, "golden_sha256": hashlib.sha256(b"{}\n").hexdigest(), "ids": ["a"]}
    assert golden_changed(record, where, tmp_path) is None
    record["golden_sha256"] = "0" * 64
    assert "changed since labels.sample.json was drawn" in (golden_changed(record, where, tmp_path) or "")
