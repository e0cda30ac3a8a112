"""Labelled sets: the JSONL format, and errors that name the file, the line and the field."""

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.calibration.labels import LabelLoadError, kind_of, load_labels
from pytest_ragmetrics.loaders import SampleLoadError

GOOD: list[dict[str, Any]] = [
    {"kind": "context_precision", "question": "Q?", "reference": "R.", "chunk": "C.", "useful": True},
    {
        "kind": "context_recall",
        "id": 7,
        "question": "Q?",
        "contexts": ["C one.", "C two."],
        "reference": "A. B.",
        "attributed": [True, False],
        "reasons": ["in C one", "nowhere"],
    },
    {"kind": "context_relevance_graded", "question": "Q?", "chunk": "C.", "rating": 1, "reason": "half"},
    {"kind": "context_relevance[sentence]", "question": "Q?", "chunk": "C. D.", "relevant_sentences": [2, 1]},
]


def write(path: Path, rows: Iterable[str | Mapping[str, Any]]) -> Path:
    path.write_text(
        "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8"
    )
    return path


def test_every_kind_loads_with_its_label_and_a_stable_id(tmp_path):
    items = load_labels(write(tmp_path / "labels.jsonl", [GOOD[0], "", *GOOD[1:]]))
    assert [i.kind for i in items] == [
        "context_precision",
        "context_recall",
        "context_relevance_graded",
        "context_relevance_sentences",
    ]
    assert [i.id for i in items] == ["labels.jsonl:1", "7", "labels.jsonl:4", "labels.jsonl:5"]
    assert items[0].label is True and items[1].label == (True, False) and items[2].label == 1
    assert items[3].label == (1, 2)  # sorted
    assert items[1].reasons == ("in C one", "nowhere") and items[2].reason == "half"
    assert items[1].where == "labels.jsonl, line 3"


def test_kind_names_and_metric_names_with_their_method():
    assert kind_of("context_precision") == "context_precision"
    assert kind_of("context_relevance[graded]") == "context_relevance_graded"
    assert kind_of("context_relevance[binary]") == "context_relevance_sentences"
    assert kind_of("context_relevance") is None


@pytest.mark.parametrize(
    ("row", "field", "message"),
    [
        ({"question": "Q?"}, "kind", "missing field 'kind'"),
        ({**GOOD[0], "kind": "precision"}, "kind", "field 'kind': expected one of context_precision"),
        ({**GOOD[0], "usefull": True}, "usefull", "unknown field(s) 'usefull' for a context_precision item"),
        ({k: v for k, v in GOOD[0].items() if k != "useful"}, "useful", "missing field 'useful'"),
        ({**GOOD[0], "useful": "yes"}, "useful", "field 'useful': expected true or false, got a string"),
        ({**GOOD[0], "chunk": ""}, "chunk", "field 'chunk': must not be empty"),
        # Zero-width characters show nothing: a sample's question of them is refused, its chunk empty.
        ({**GOOD[0], "question": "\u200b"}, "question", "field 'question': must not be empty"),
        (
            {**GOOD[1], "contexts": ["C.", " \u200b\ufeff"]},
            "contexts",
            "field 'contexts': item 1 must be a non",
        ),
        ({**GOOD[2], "rating": 3}, "rating", "field 'rating': expected 0, 1 or 2, got the number 3"),
        ({**GOOD[2], "rating": True}, "rating", "expected 0, 1 or 2, got a boolean"),
        ({**GOOD[3], "relevant_sentences": [0]}, "relevant_sentences", "sentence numbers start at 1"),
        ({**GOOD[3], "relevant_sentences": [1, 1]}, "relevant_sentences", "listed twice"),
        ({**GOOD[1], "attributed": []}, "attributed", "expected a non-empty list of true / false"),
        ({**GOOD[1], "contexts": "C."}, "contexts", "field 'contexts': expected a non-empty list of strings"),
        ({**GOOD[1], "reasons": ["one"]}, "reasons", "1 reasons for 2 attributed entries"),
        (
            {**GOOD[1], "reference_sentences": ["A."]},
            "reference_sentences",
            "either 'reference' or 'reference_sentences'",
        ),
        ({**GOOD[0], "id": ["x"]}, "id", "field 'id': expected a non-empty string or an integer"),
        # A "\ud800" escape: the HTTP client's UnicodeEncodeError once the judge was asked, before.
        ({**GOOD[0], "chunk": "C \ud800"}, "chunk", "field 'chunk': contains a lone surrogate '\\ud800'"),
        ({**GOOD[1], "contexts": ["C.", "\udfff"]}, "contexts", "field 'contexts': item 1 contains a lone"),
    ],
)
def test_bad_items_name_the_file_line_and_field(tmp_path, row, field, message):
    path = write(tmp_path / "labels.jsonl", [GOOD[0], row])
    with pytest.raises(LabelLoadError) as info:
        load_labels(path)
    assert str(info.value).startswith("labels.jsonl, line 2: ")
    assert message in str(info.value)
    assert (info.value.file, info.value.line, info.value.field) == ("labels.jsonl", 2, field)
    assert isinstance(info.value, (ValueError, SampleLoadError))


def test_reference_sentences_must_pair_with_attributed(tmp_path):
    row = {k: v for k, v in GOOD[1].items() if k not in ("reference", "reasons")}
    load_labels(write(tmp_path / "ok.jsonl", [{**row, "reference_sentences": ["A.", "B."]}]))
    with pytest.raises(
        LabelLoadError, match="line 1: field 'attributed': 2 entries for 3 reference sentences"
    ):
        load_labels(write(tmp_path / "bad.jsonl", [{**row, "reference_sentences": ["A.", "B.", "C."]}]))


def test_duplicate_ids_invalid_json_and_empty_files(tmp_path):
    with pytest.raises(LabelLoadError, match=r"line 2: duplicate id 'x', already used on line 1"):
        load_labels(write(tmp_path / "a.jsonl", [{**GOOD[0], "id": "x"}, {**GOOD[2], "id": "x"}]))
    with pytest.raises(LabelLoadError, match=r"b.jsonl, line 2: invalid JSON") as info:
        load_labels(write(tmp_path / "b.jsonl", [GOOD[0], "{not json"]))
    assert info.value.line == 2
    with pytest.raises(LabelLoadError, match="holds no items"):
        load_labels(write(tmp_path / "c.jsonl", [""]))
    with pytest.raises(LabelLoadError, match=r"a labelled set is a \.jsonl file"):
        load_labels(tmp_path / "labels.json")


VERDICTS = {"kind": "faithfulness", "question": "Q?", "contexts": ["C."], "claims": ["X.", "Y."],
            "verdicts": ["supported", "not_found"]}  # fmt: skip
FLIPPED = {
    "context_precision": ("useful", False, "false", "true"),
    "context_recall": ("attributed", [True, True], "[true, true]", "[true, false]"),
    "context_relevance_graded": ("rating", 2, "2", "1"),
    "context_relevance[sentence]": ("relevant_sentences", [1], "[1]", "[1, 2]"),
    "faithfulness": ("verdicts", ["supported", "contradicted"], '["supported", "contradicted"]',
                     '["supported", "not_found"]'),
}  # fmt: skip


@pytest.mark.parametrize("kind", list(FLIPPED))
def test_two_items_labelling_one_judgment_differently_are_an_error_naming_both(tmp_path, kind):
    """The labelled score of a sample (and the judge-corrected mean) took the label of whichever item
    came last in the file; a judgment labelled twice alike is still read."""
    first = next(row for row in [*GOOD, VERDICTS] if row["kind"] == kind)
    field, value, here, there = FLIPPED[kind]
    # The same texts, spaced otherwise: what the judge is shown is the same.
    spaced = {k: (f" {v}  " if k in ("question", "chunk", "reference") else v) for k, v in first.items()}
    again = {**spaced, "id": "again", field: value}
    assert len(load_labels(write(tmp_path / "alike.jsonl", [first, {**spaced, "id": "same"}]))) == 2
    with pytest.raises(LabelLoadError) as info:
        load_labels(
            write(
                tmp_path / "labels.jsonl", [first, GOOD[0] if kind != "context_precision" else GOOD[2], again]
            )
        )
    message = str(info.value)
    assert message.startswith("labels.jsonl, line 3: item 'again' labels the same ")
    assert (
        f"on line 1 (the same question and texts), differently: {field} {here} here, {there} there" in message
    )
    assert (info.value.line, info.value.field) == (3, field)
