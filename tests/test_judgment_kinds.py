"""One table of judgment kinds: the judge check, the negative controls, drift and rejudge, the labelled
set format, the reports and the metrics all know a kind through its entry in ``kinds.KINDS``."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics import Evaluator, Settings, claim_judgments as C, judgments as J, kinds as K
from pytest_ragmetrics.calibration.check import judge_labels, metrics_of_kind, parse_floor
from pytest_ragmetrics.calibration.cli import rebuild_request, units
from pytest_ragmetrics.calibration.controls import ControlPair, run_controls
from pytest_ragmetrics.calibration.degenerate import degenerate_kinds
from pytest_ragmetrics.calibration.labels import kind_names, kind_of, load_labels
from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.testing import FakeJudgeServer

PARAMS = J.JudgeParams("m", 0.0, 7, 1)

#: One request of every kind, built as the metrics build them.
BUILT = {
    J.PRECISION: J.precision_request("Q?", "Ref.", "answer", "Chunk.", PARAMS),
    J.RECALL: J.recall_request("Q?", ["C2.", "C1."], ["S1.", "S2."], PARAMS, first=31),
    J.CLAIMS: J.claims_request("Q?", ["C1."], ["S1."], PARAMS),
    J.GRADED: J.graded_request("Q?", "Chunk.", PARAMS),
    J.SENTENCES: J.chunk_sentences_request("Q?", "A. B.", "split-1", lambda c: c.split(" "), PARAMS),
    C.DECOMPOSITION: C.decomposition_request(["S1.", "S2."], PARAMS, first=21),
    C.VERDICTS: C.verdict_request(["A.", "B."], PARAMS, first=26, contexts=["C2.", "C1."]),
    C.RELEVANCY: C.relevancy_request("Q?", "Answer.", PARAMS),
}


def record(request: JudgeRequest) -> dict[str, Any]:
    """What the store records of a judgment: its kind, inputs and parameters."""
    return {"kind": request.kind, "inputs": dict(request.inputs), "seed": 7, "temperature": 0.0, "n": 1}


def test_every_kind_has_an_entry_and_every_entry_is_a_kind_of_request():
    assert sorted(BUILT) == sorted(K.KINDS)
    for name, kind in K.KINDS.items():
        assert kind.name == name == BUILT[name].kind


@pytest.mark.parametrize("name", sorted(BUILT))
def test_drift_and_rejudge_rebuild_every_kind_to_the_same_request(name):
    request = BUILT[name]
    rebuilt = rebuild_request(record(request), "m")
    assert rebuilt.cache_key() == request.cache_key()
    assert rebuilt.messages == request.messages


def test_the_calibration_tools_know_exactly_the_kinds_the_table_gives_them():
    labelled = [k.name for k in K.KINDS.values() if k.labels is not None]
    controlled = [k.name for k in K.KINDS.values() if k.control is not None]
    assert kind_names() == ", ".join(labelled)
    for name, kind in K.KINDS.items():
        assert metrics_of_kind(name) == kind.metrics
        for alias in kind.aliases:
            assert K.kind_of(alias) is kind
        if name in labelled:
            assert kind_of(name) == name
            assert parse_floor(f"{name} kappa >= 0.5").kind == name
        else:
            assert kind_of(name) is None
            with pytest.raises(ConfigError, match="is not a judgment kind"):
                parse_floor(f"{name} kappa >= 0.5")
        if name in controlled:
            assert parse_floor(f"{name} controls <= 0.2").kind == name
        elif name in labelled:
            with pytest.raises(ConfigError, match=f"no controls for {name}"):
                parse_floor(f"{name} controls <= 0.2")


# --- a new kind is one entry ------------------------------------------------------------------------

TOY = "chunk_mentions_subject"


def _toy_verdicts(request: JudgeRequest, choices: J.Choices) -> list[tuple[float, str]]:
    mentions, reason = J.combine_boolean(choices, "mentions")
    return [(1.0 if mentions else 0.0, reason)]


async def _toy_units(material: J.Material, texts: J.Texts) -> list[str]:
    return [texts.normalize(material.chunk or "")]


def _toy_ask(material, units, params, label, texts):
    inputs = {"question": texts.normalize(material.question), "chunk": units[0]}
    return [K.KINDS[TOY].request(inputs, params, label)]


TOY_KIND = J.JudgmentKind(
    name=TOY,
    prompt=J.Prompt("mentions-1", "Does the chunk mention the subject of the question?"),
    unit="chunk passage",
    schema=lambda inputs: {
        "type": "object",
        "properties": {"reason": {"type": "string"}, "mentions": {"type": "boolean"}},
        "required": ["reason", "mentions"],
        "additionalProperties": False,
    },
    payload=lambda inputs: dict(inputs),
    rebuild=lambda inputs, params, label: K.KINDS[TOY].request(inputs, params, label),
    verdicts=_toy_verdicts,
    decision=lambda request, choices: ("said so" if _toy_verdicts(request, choices)[0][0] else "did not",),
    params=lambda s: [J.JudgeParams(s.judge_model, s.temperature, s.seed, s.judge_n)],
    units_of=_toy_units,
    ask=_toy_ask,
    meaning="mentions: share of chunks that mention the subject",
    decides="mentions",
    metrics=(("subject_mentions", None),),
    aliases=("subject_mentions",),
    labels=J.LabelForm("mentions", "one", ("chunk",)),
    labelled_answer=lambda request, labels: {"reason": "labelled", "mentions": labels[0]},
    control=J.ControlForm("mentioning"),
)


@pytest.fixture
def toy_kind(monkeypatch):
    monkeypatch.setitem(K.KINDS, TOY, TOY_KIND)
    return TOY_KIND


def test_a_new_entry_is_known_to_the_labels_the_floors_the_reports_and_drift(toy_kind, tmp_path):
    assert TOY in kind_names()
    assert kind_of("subject_mentions") == TOY
    assert parse_floor("subject_mentions kappa >= 0.6").kind == TOY
    assert parse_floor(f"{TOY} controls <= 0.2").kind == TOY
    assert metrics_of_kind(TOY) == (("subject_mentions", None),)
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"kind": TOY, "question": "Q?", "chunk": "C.", "mentions": False}) + "\n")
    [item] = load_labels(path)
    assert (item.kind, item.label, item.chunk) == (TOY, False, "C.")
    request = toy_kind.request({"question": "Q?", "chunk": "C."}, PARAMS)
    assert rebuild_request(record(request), "m").cache_key() == request.cache_key()
    choices = [{"reason": "it does", "mentions": True}]
    assert units(request, choices) == [1.0]
    assert K.answer_classes(request, choices) == ("said so",)
    [warning] = degenerate_kinds([(TOY, ("said so",))] * 20)
    assert f"answered 'mentions said so' to 20 of 20 {TOY} verdicts" in warning["message"]


def test_a_new_entry_is_judged_by_the_judge_check_and_the_negative_controls(toy_kind, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    path = tmp_path / "labels.jsonl"
    rows = [
        {
            "kind": TOY,
            "id": "a",
            "question": "Where is Rome?",
            "chunk": "Rome is in Italy.",
            "mentions": True,
        },
        {"kind": TOY, "id": "b", "question": "Where is Rome?", "chunk": "Oslo is cold.", "mentions": False},
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    pair = ControlPair("Where is Rome?", None, "ground_truth", "Oslo is cold.", "rome", "oslo")
    floor = parse_floor(f"{TOY} controls <= 0.2")
    with FakeJudgeServer() as server:  # its answers conform to the schema: "mentions" is always true
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"))
        with Evaluator(settings) as ev:
            [agreement] = ev.runner.run(judge_labels(load_labels(path), ev))
            section = run_controls(ev, [pair], [TOY], [floor])
        sent = [json.loads(r.body["messages"][1]["content"]) for r in server.requests]
        prompts = {r.body["messages"][0]["content"] for r in server.requests}
    assert (agreement.kind, agreement.unit, agreement.labels, agreement.verdicts) == (
        TOY,
        "chunk passage",
        [True, False],
        [True, True],
    )
    [disagreement] = agreement.disagreements
    assert (disagreement.id, disagreement.label, disagreement.verdict) == ("b", "no", "yes")
    # The control is judged as the labelled item with the same texts: that judgment is not asked again.
    assert len(sent) == 2 and {"question": "Where is Rome?", "chunk": "Oslo is cold."} in sent
    assert prompts == {toy_kind.prompt.system}
    [kind] = section["kinds"]
    assert (kind["kind"], kind["verdict"], kind["judged"], kind["positive"]) == (TOY, "mentioning", 1, 1)
    [row] = section["floors"]
    # One control is too few to tell a good judge from a bad one: the floor says so, undecided.
    assert row["passed"] and row["skipped"] and row["judged"] == 1
    assert row["reason"].startswith("not decided: too few controls (1) to tell a good judge from a bad one")


def test_a_kind_without_labels_or_controls_is_refused_by_the_floors_and_the_labelled_set(
    monkeypatch, tmp_path
):
    monkeypatch.setitem(K.KINDS, TOY, dataclasses.replace(TOY_KIND, labels=None, control=None))
    assert TOY not in kind_names()
    with pytest.raises(ConfigError, match="is not a judgment kind"):
        parse_floor(f"{TOY} kappa >= 0.6")
    path = tmp_path / "labels.jsonl"
    path.write_text(json.dumps({"kind": TOY, "question": "Q?", "chunk": "C.", "mentions": False}) + "\n")
    with pytest.raises(ValueError, match="field 'kind'"):
        load_labels(path)


def test_labelled_items_and_controls_ask_exactly_what_the_metrics_asked(tmp_path, monkeypatch):
    """Scored once by the metrics, the same texts as labelled items and controls cost no call."""
    from pytest_ragmetrics import RagSample
    from pytest_ragmetrics.calibration.controls import judge_controls

    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    chunk = "Rome is the capital of Italy.  It lies on the Tiber.\r\nIt is old."
    reference = "Rome is in Italy. It is on the Tiber."
    sample = RagSample("Where is Rome?", [chunk, "Oslo is cold."], ground_truth=reference)
    q = sample.question
    rows = [
        {"kind": "context_precision", "question": q, "reference": reference, "chunk": chunk, "useful": True},
        {"kind": "context_relevance_graded", "question": q, "chunk": chunk, "rating": 2},
        {"kind": "context_relevance_sentences", "question": q, "chunk": chunk, "relevant_sentences": [1]},
        {
            "kind": "context_recall",
            "question": q,
            "contexts": list(sample.contexts),
            "reference": reference,
            "attributed": [True, True],
        },
    ]
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    pair = ControlPair(sample.question, reference, "ground_truth", chunk, "rome", "elsewhere")
    with FakeJudgeServer() as server:
        settings = Settings(
            judge_base_url=server.base_url, cache_dir=str(tmp_path / "cache"), relevance_models=("a", "b")
        )
        with Evaluator(settings) as ev:
            for metric, method in [
                ("context_precision", None),
                ("context_recall", None),
                ("context_relevance", "graded"),
                ("context_relevance", "sentence"),
            ]:
                ev.score(sample, metric, method)
            asked = server.request_count
            agreements = ev.runner.run(judge_labels(load_labels(path), ev))
            shares = ev.runner.run(judge_controls([pair], list(J.RETRIEVAL_KINDS), ev))
        assert server.request_count == asked
    assert sorted((a.kind, a.model, a.judge_calls) for a in agreements) == [
        ("context_precision", "gpt-4o-mini", 0),
        ("context_recall", "gpt-4o-mini", 0),
        ("context_relevance_graded", "a", 0),
        ("context_relevance_graded", "b", 0),
        ("context_relevance_sentences", "gpt-4o-mini", 0),
    ]
    assert [(s.kind, s.judged, s.positive) for s in shares] == [
        ("context_precision", 1, 1),
        ("context_relevance_graded", 1, 1),
        ("context_relevance_sentences", 1, 1),
    ]


def test_a_control_pair_carries_the_answer_and_the_other_samples_contexts_only_when_none_is_related():
    from pytest_ragmetrics import RagSample
    from pytest_ragmetrics.calibration.controls import control_pairs

    def sample(city: str, extra: str) -> RagSample:
        return RagSample(
            f"What is {city} known for?",
            [f"{city} is known for its old town.", extra],
            ground_truth=f"{city} is known for its old town.",
            answer=f"{city} is known for its old town.",
            id=city,
        )

    shared = "Europe has many old towns."
    samples = [sample("Rome", shared), sample("Oslo", shared), sample("Lima", "Lima lies on the coast.")]
    pairs = control_pairs(samples, 20, seed=3)
    assert pairs
    for pair in pairs:
        assert pair.answer == f"{pair.question_sample} is known for its old town."
        other = next(s for s in samples if s.id == pair.chunk_sample)
        related = {pair.question_sample, pair.chunk_sample} == {"Rome", "Oslo"}
        assert pair.contexts == (() if related else other.contexts)
        assert ControlPair.from_json(json.loads(json.dumps(pair.to_json()))) == pair
    assert any(p.contexts for p in pairs) and any(not p.contexts for p in pairs)


def test_a_new_entry_answers_its_requests_from_the_labels_for_judge_corrected_means(toy_kind, tmp_path):
    """The labelled set answers exactly the requests the kind's entry asks, whatever the model."""
    from pytest_ragmetrics.calibration.labelled import _Index, _Unlabelled

    path = _write_labels(tmp_path, [{"kind": TOY, "question": " Q? ", "chunk": "C.\r\n", "mentions": False}])
    with Evaluator(Settings(cache_dir=str(tmp_path / "cache"))) as ev:
        index = ev.runner.run(_Index.build(load_labels(path), ev.scoring_context()))
    for model in ("m", "another-model"):
        request = toy_kind.request({"question": "Q?", "chunk": "C."}, J.JudgeParams(model))
        assert index.answer(request) == {"reason": "labelled", "mentions": False}
    with pytest.raises(_Unlabelled):
        index.answer(toy_kind.request({"question": "Q?", "chunk": "Other."}, PARAMS))


def _write_labels(tmp_path: Path, rows: Iterable[Mapping[str, Any]]) -> Path:
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.mark.parametrize("n", [1, 2, 3])
def test_a_judgments_decision_is_what_its_verdicts_decide(n):
    """The classes noted for a judgment (read directly from a single answer) are those its verdicts
    give, for every built-in kind that decides, with one answer and with several."""
    import types

    def decided(kind: str, inputs: dict[str, Any], choices: list[dict[str, Any]]) -> tuple[tuple[str, ...], list[float]]:
        request = types.SimpleNamespace(kind=kind, inputs=inputs)
        verdicts = K.KINDS[kind].verdicts(request, choices)  # type: ignore[arg-type]
        return K.answer_classes(request, choices), [value for value, _ in verdicts]  # type: ignore[arg-type]

    for useful in (True, False):
        classes, values = decided(J.PRECISION, {}, [{"reason": "r", "useful": useful}] * n)
        assert classes == tuple("yes" if v >= 1.0 else "no" for v in values) == (("yes",) if useful else ("no",))
    inputs = {"reference_sentences": ["a", "b", "c"], "first_sentence": 4}
    answer = {f"sentence_{i}": {"reason": "r", "attributed": i != 5} for i in (4, 5, 6)}
    classes, values = decided(J.RECALL, inputs, [answer] * n)
    assert classes == tuple("yes" if v >= 1.0 else "no" for v in values) == ("yes", "no", "yes")
    for rating in (0, 1, 2):
        classes, values = decided(J.GRADED, {}, [{"reason": "r", "rating": rating}] * n)
        assert classes == (str(int(values[0] * 2 + 0.5)),) == (str(rating),)
    classes, _ = decided(J.GRADED, {}, [{"reason": "r", "rating": r} for r in (0, 1, 2, 2)[:n]])
    assert classes == ({1: "0", 2: "1", 3: "1"}[n],)
    for chosen, expected in (([], "none"), ([2, 2], "some"), ([3, 1, 2], "all")):
        choice = {"reason": "r", "relevant_sentences": chosen}
        classes, _ = decided(J.SENTENCES, {"sentences": ["x", "y", "z"]}, [choice] * n)
        assert classes == (expected,)
