"""The answer kinds in the calibration tools: labelled claim verdicts in the judge check, negative
controls for faithfulness, and drift and store rejudge over claim verdicts, all through the table."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest
from answer_judge import responder as answer_judge
from sklearn.metrics import cohen_kappa_score, confusion_matrix, f1_score

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.calibration.check import judge_labels, parse_floor
from pytest_ragmetrics.calibration.controls import control_pairs, positive_controls, run_controls
from pytest_ragmetrics.calibration.labels import LabelLoadError, load_labels
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.testing import FakeJudgeServer

CLASSES = ["contradicted", "not_found", "supported"]

#: Two hand-labelled faithfulness items: the judge of ``answer_judge`` gives "not_found" to the last
#: claim, which the person labelled "supported" (general knowledge, not in the context).
ITEMS: list[dict[str, Any]] = [
    {
        "kind": "faithfulness",
        "id": "rome",
        "question": "What is Rome?",
        "contexts": ["Rome is the capital of Italy.", "The Tiber flows through Rome."],
        "claims": ["Rome is the capital of Italy.", "Rome has 9 hills.", "The Tiber flows through Rome."],
        "verdicts": ["supported", "not_found", "supported"],
    },
    {
        "kind": "claim_verdicts",
        "id": "paris",
        "question": "How many people live in Paris?",
        "contexts": ["Paris has 2 million people."],
        "claims": ["Paris has 3 million people.", "Paris is in France."],
        "verdicts": ["contradicted", "supported"],
        "reasons": ["2, not 3", "everybody knows"],
    },
]


def _write(path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def judge_env(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")


def test_labelled_claim_verdicts_load_and_bad_ones_name_the_field(tmp_path):
    items = load_labels(_write(tmp_path / "labels.jsonl", ITEMS))
    assert [(i.kind, i.claims, i.label) for i in items] == [
        ("claim_verdicts", tuple(ITEMS[0]["claims"]), tuple(ITEMS[0]["verdicts"])),
        ("claim_verdicts", tuple(ITEMS[1]["claims"]), tuple(ITEMS[1]["verdicts"])),
    ]
    bad_fields: list[tuple[dict[str, Any], str]] = [
        ({"verdicts": ["supported", "maybe", "supported"]}, "field 'verdicts': expected a non-empty list of"),
        ({"verdicts": ["supported"]}, "field 'verdicts': 1 entries for 3 claims"),
        ({"claims": "Rome is old."}, "field 'claims': expected a non-empty list of strings"),
        ({"contexts": None}, "missing field 'contexts'"),
    ]
    for bad, message in bad_fields:
        row = {**ITEMS[0], **bad}
        with pytest.raises(LabelLoadError, match=message):
            load_labels(_write(tmp_path / "bad.jsonl", [{k: v for k, v in row.items() if v is not None}]))


def test_faithfulness_floors_take_kappa_accuracy_f1_and_controls():
    assert parse_floor("faithfulness kappa >= 0.6").kind == "claim_verdicts"
    assert parse_floor("faithfulness f1 >= 0.8").stat == "f1"
    assert parse_floor("faithfulness controls <= 0.2").kind == "claim_verdicts"
    with pytest.raises(ConfigError, match="weighted_kappa is for graded ratings"):
        parse_floor("faithfulness weighted_kappa >= 0.6")
    with pytest.raises(ConfigError, match="no positive controls for claim_verdicts"):
        parse_floor("faithfulness positive_controls >= 0.8")


def test_the_judge_check_measures_claim_verdicts_against_the_labels(tmp_path, judge_env):
    items = load_labels(_write(tmp_path / "labels.jsonl", ITEMS))
    with FakeJudgeServer(answer_judge) as server:
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            [agreement] = ev.runner.run(judge_labels(items, ev))
        assert server.request_count == 2  # one verdict request per item: its claims against its contexts
    labels = [v for item in ITEMS for v in item["verdicts"]]
    verdicts = ["supported", "not_found", "supported", "contradicted", "not_found"]
    assert (agreement.kind, agreement.unit, agreement.labels, agreement.verdicts) == (
        "claim_verdicts",
        "claim",
        labels,
        verdicts,
    )
    figures = agreement.to_json()
    assert figures["classes"] == CLASSES
    assert figures["accuracy"] == pytest.approx(0.8)
    assert figures["kappa"] == pytest.approx(cohen_kappa_score(labels, verdicts, labels=CLASSES))
    truth, said = [x == "supported" for x in labels], [x == "supported" for x in verdicts]
    assert figures["f1"] == pytest.approx(f1_score(truth, said))
    assert figures["weighted_kappa"] is None
    assert figures["confusion"] == confusion_matrix(labels, verdicts, labels=CLASSES).tolist()
    [d] = agreement.disagreements
    assert (d.id, d.text, d.label, d.verdict, d.labelled_reason) == (
        "paris claim 2",
        "Paris is in France.",
        "supported",
        "not_found",
        "everybody knows",
    )


def always_supported(body: dict[str, Any]) -> dict[str, Any]:
    """Decomposes like ``answer_judge`` but finds every claim supported."""
    answer = answer_judge(body)
    return {
        key: ({**value, "verdict": "supported"} if key.startswith("claim_") else value)
        for key, value in answer.items()
    }


CITIES = ["Rome", "Oslo", "Lima", "Cairo", "Hanoi", "Quito"]


def golden() -> list[RagSample]:
    return [
        RagSample(
            f"What is {city} famous for?",
            [f"{city} is famous for its old town.", f"{city} has a busy port."],
            ground_truth=f"{city} is famous for its old town.",
            answer=f"{city} is famous for its old town and {city} has a busy port.",
            id=city.lower(),
        )
        for city in CITIES
    ]


@pytest.mark.parametrize(
    ("judge", "share", "passed"), [(answer_judge, 0.0, True), (always_supported, 1.0, False)]
)
def test_an_answer_checked_against_another_samples_contexts_must_come_out_unsupported(
    tmp_path, judge_env, judge, share, passed
):
    samples = golden()
    pairs = control_pairs(samples, 6, seed=0)
    assert len(pairs) == 6 and all(p.answer and p.contexts for p in pairs)
    # Positive controls (a sample's own reference as the chunk) are not faithfulness controls.
    positives = positive_controls(samples, 2, seed=0)
    floor = parse_floor("faithfulness controls <= 0.2")
    with FakeJudgeServer(judge) as server:
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            for sample in samples:  # the run judged the faithfulness of every sample
                assert ev.score(sample, "faithfulness").score == 1.0  # its own contexts support it
            asked = server.request_count
            section = run_controls(ev, [*pairs, *positives], ["claim_verdicts"], [floor])
        # The answers' claims were decomposed by the run already: a control costs its verdicts only.
        decompositions = [
            r for r in server.requests[asked:] if "sentences" in json.loads(r.body["messages"][1]["content"])
        ]
        assert decompositions == []
    [kind] = section["kinds"]
    assert (kind["kind"], kind["expected"], kind["verdict"], kind["share"]) == (
        "claim_verdicts",
        "negative",
        "supported",
        share,
    )
    assert kind["judged"] == len({(p.question_sample, p.chunk_sample) for p in pairs})
    [row] = section["floors"]
    assert row["passed"] is passed


def by_model(body: dict[str, Any]) -> dict[str, Any]:
    """'base' judges as ``answer_judge``; 'flipper' finds every claim supported."""
    return always_supported(body) if body["model"] == "flipper" else answer_judge(body)


@pytest.fixture
def workdir(tmp_path, monkeypatch, serve):
    monkeypatch.chdir(tmp_path)
    for name in list(os.environ):
        if name.startswith("RAGMETRICS_"):
            monkeypatch.delenv(name)
    server = serve(by_model)  # after the clean-up: it sets the judge's URL and key
    _write(tmp_path / "labels.jsonl", ITEMS)
    return tmp_path, server


def test_drift_and_rejudge_rebuild_and_compare_claim_verdicts(workdir, capsys):
    _, server = workdir
    store = ["--store-dir", "judgments"]
    assert main(["judge", "check", "labels.jsonl", "--model", "base", *store]) == 0  # no floor: a report
    capsys.readouterr()
    drift = ["judge", "drift", "--model", "flipper", "--from-model", "base", *store, "--json"]
    assert main([*drift, "--max-flip-rate", "faithfulness=0.5"]) == 1
    figures = json.loads(capsys.readouterr().out)["kinds"]["claim_verdicts"]
    # Of 5 claims the base judge found 2 supported, 1 contradicted, 2 not found: 3 flip to supported.
    assert (figures["units"], figures["flipped"]) == (5, 3)
    assert figures["mean_before"] == pytest.approx((1 + 0.5 + 1 + 0 + 0.5) / 5)
    assert figures["mean_after"] == 1.0
    before = server.request_count
    assert main(["store", "rejudge", "--model", "again", "--kind", "faithfulness", *store]) == 0
    assert "2 re-judged by again, 0 already recorded, 0 failed" in capsys.readouterr().out
    assert server.request_count == before + 2
    # The labelled set replayed with the model rejudge recorded: every claim verdict from the store.
    check = ["judge", "check", "labels.jsonl", "--model", "again", *store, "--cache", "replay", "--json"]
    assert main(check) == 0
    [judged] = json.loads(capsys.readouterr().out)["models"]
    assert judged["errors"] == 0 and judged["judge_calls"] == 0
    assert server.request_count == before + 2
