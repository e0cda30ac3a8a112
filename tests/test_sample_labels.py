"""Retrieval labels on samples: context_ids, reference_context_ids, reference_contexts, and their loaders."""

from __future__ import annotations

import copy
import json
import pickle
from dataclasses import dataclass, field
from typing import Any

import pytest

from pytest_ragmetrics import RagSample, load_samples
from pytest_ragmetrics.loaders import SampleLoadError, split_retrieved


def test_a_list_of_relevant_ids_means_grade_one_each():
    sample = RagSample("q", ["a", "b"], context_ids=["d1", "d2"], reference_context_ids=["d2", "d9"])
    assert sample.context_ids == ("d1", "d2")
    assert dict(sample.reference_context_ids or {}) == {"d2": 1, "d9": 1}


def test_graded_labels_are_kept_read_only_and_copied():
    grades = {"d1": 2, "d2": 0}
    sample = RagSample("q", [], reference_context_ids=grades)
    grades["d1"] = 5
    assert dict(sample.reference_context_ids or {}) == {"d1": 2, "d2": 0}
    with pytest.raises(TypeError):
        sample.reference_context_ids["d3"] = 1  # type: ignore[index]


def test_labelled_samples_pickle_copy_hash_and_compare():
    sample = RagSample(
        "q",
        ["a", "b"],
        context_ids=["d1", "d2"],
        reference_context_ids={"d1": 2},
        reference_contexts=["a"],
    )
    for twin in (pickle.loads(pickle.dumps(sample)), copy.deepcopy(sample)):
        assert twin == sample
        assert hash(twin) == hash(sample)
        assert dict(twin.reference_context_ids or {}) == {"d1": 2}
    assert sample != RagSample("q", ["a", "b"], context_ids=["d1", "d2"], reference_context_ids={"d1": 1})


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"context_ids": ["d1"]}, ValueError, r"context_ids has 1 id\(s\) but contexts has 2 chunk\(s\)"),
        ({"context_ids": ["d1", "d1"]}, ValueError, r"context_ids: id 'd1' appears twice \(items 0 and 1\)"),
        ({"context_ids": ["d1", 2]}, TypeError, r"context_ids\[1\] must be a str, got int: 2; write ids"),
        ({"context_ids": "d1"}, TypeError, r"context_ids must be a list or tuple of str, got str"),
        ({"context_ids": ["d1", " "]}, ValueError, r"context_ids\[1\] must be a non-empty str"),
        (
            {"reference_context_ids": {"d1": -1}},
            ValueError,
            r"reference_context_ids\['d1'\] must be a grade from 0 to 2\*\*53, got -1",
        ),
        ({"reference_context_ids": {"d1": 1.5}}, TypeError, r"reference_context_ids\['d1'\] must be an int"),
        ({"reference_context_ids": {"d1": True}}, TypeError, r"reference_context_ids\['d1'\] must be an int"),
        ({"reference_context_ids": {3: 1}}, TypeError, r"reference_context_ids keys must be non-empty str"),
        (
            {"reference_context_ids": ["d1", "d1"]},
            ValueError,
            r"id 'd1' appears twice.*each relevant id once",
        ),
        ({"reference_context_ids": [7]}, TypeError, r"reference_context_ids\[0\] must be a str, got int"),
        ({"reference_context_ids": "d1"}, TypeError, r"reference_context_ids must be a list of relevant ids"),
        ({"reference_contexts": ["ok", None]}, TypeError, r"reference_contexts\[1\] must be a str"),
    ],
)
def test_bad_labels_raise_naming_the_field(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        RagSample("q", ["a", "b"], **kwargs)


# ----------------------------------------------------------------------------------- with_contexts


@dataclass
class Document:
    """Shaped like LangChain's Document: text in page_content, the id in metadata."""

    page_content: str
    metadata: dict[str, Any] = field(default_factory=dict)


def test_with_contexts_takes_ids_from_retrieved_objects():
    golden = RagSample("q", [], reference_context_ids=["d2"])
    filled = golden.with_contexts([Document("one", {"id": "d1"}), Document("two", {"id": "d2"})])
    assert filled.contexts == ("one", "two")
    assert filled.context_ids == ("d1", "d2")
    assert dict(filled.reference_context_ids or {}) == {"d2": 1}


def test_with_contexts_plain_texts_drop_old_ids_and_explicit_ids_are_checked():
    sample = RagSample("q", ["a"], context_ids=["d1"])
    assert sample.with_contexts(["x", "y"]).context_ids is None
    assert sample.with_contexts(["x", "y"], ids=["e1", "e2"]).context_ids == ("e1", "e2")
    with pytest.raises(ValueError, match=r"context_ids has 1 id\(s\) but contexts has 2"):
        sample.with_contexts(["x", "y"], ids=["e1"])
    with pytest.raises(ValueError, match=r"ids=\['e9'\] differ from the ids the contexts carry"):
        sample.with_contexts([{"text": "x", "id": "e1"}], ids=["e9"])


@pytest.mark.parametrize(
    "items",
    [
        [
            {"page_content": "one", "metadata": {"id": "d1"}},
            {"page_content": "two", "metadata": {"id": "d2"}},
        ],
        [{"text": "one", "id": "d1"}, {"text": "two", "id": "d2"}],
        [Document("one", {"id": "d1"}), {"text": "two", "id": "d2"}],
    ],
)
def test_split_retrieved_reads_langchain_and_llamaindex_shapes(items):
    assert split_retrieved(items) == (("one", "two"), ("d1", "d2"))


def test_split_retrieved_without_ids_and_mixed_ids():
    assert split_retrieved(["a", {"text": "b"}]) == (("a", "b"), None)
    with pytest.raises(ValueError, match=r"item 0 carries an id but item 1 does not"):
        split_retrieved([{"text": "a", "id": "d1"}, "b"])
    with pytest.raises(TypeError, match=r"the id of item 0 must be a str, got int 5"):
        split_retrieved([{"text": "a", "id": 5}])
    with pytest.raises(TypeError, match=r"item 0 must be a str, or an object with 'page_content' or 'text'"):
        split_retrieved([{"content": "a"}])


# ------------------------------------------------------------------------------------ from_dict


def test_from_dict_reads_ragas_id_fields():
    sample = RagSample.from_dict(
        {
            "user_input": "q",
            "retrieved_contexts": ["a", "b"],
            "retrieved_context_ids": ["d1", "d2"],
            "reference_context_ids": ["d2"],
            "reference_contexts": ["b"],
        }
    )
    assert sample.context_ids == ("d1", "d2")
    assert dict(sample.reference_context_ids or {}) == {"d2": 1}
    assert sample.reference_contexts == ("b",)
    assert dict(sample.metadata) == {}


def test_from_dict_retrieved_objects_agree_with_explicit_ids_or_fail():
    data = {"question": "q", "contexts": [{"text": "a", "id": "d1"}], "context_ids": ["d1"]}
    assert RagSample.from_dict(data).context_ids == ("d1",)
    with pytest.raises(ValueError, match=r"fields 'contexts' and 'context_ids' both give the context ids"):
        RagSample.from_dict({**data, "context_ids": ["d2"]})


@pytest.mark.parametrize(
    ("extra", "error", "pattern"),
    [
        (
            {"reference_context_ids": {"d1": -2}},
            ValueError,
            r"field 'reference_context_ids': the grade of 'd1'",
        ),
        ({"reference_context_ids": {"d1": "2"}}, TypeError, r"the grade of 'd1' must be an int"),
        ({"reference_context_ids": [1, 2]}, TypeError, r"item 0 must be a str, got int 1; write ids"),
        ({"reference_context_ids": ["a", "a"]}, ValueError, r"id 'a' is listed twice"),
        (
            {"retrieved_context_ids": ["d1", 2]},
            TypeError,
            r"field 'retrieved_context_ids': item 1 must be a str",
        ),
    ],
)
def test_from_dict_bad_labels_name_the_key(extra, error, pattern):
    with pytest.raises(error, match=pattern):
        RagSample.from_dict({"question": "q", "contexts": ["a", "b"], **extra})


def test_from_dict_id_count_mismatch_is_an_error():
    with pytest.raises(ValueError, match=r"context_ids has 1 id\(s\) but contexts has 2"):
        RagSample.from_dict({"question": "q", "contexts": ["a", "b"], "retrieved_context_ids": ["d1"]})


# --------------------------------------------------------------------------------------- files


def test_load_samples_jsonl_with_objects_and_graded_labels(tmp_path):
    path = tmp_path / "golden.jsonl"
    rows = [
        {
            "question": "q1",
            "retrieved_contexts": [{"page_content": "a", "metadata": {"id": "d1", "source": "wiki"}}],
            "reference_context_ids": {"d1": 2, "d7": 1},
        },
        {"question": "q2", "reference_context_ids": ["d3"]},
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    first, second = load_samples(path)
    assert first.contexts == ("a",) and first.context_ids == ("d1",)
    assert dict(first.reference_context_ids or {}) == {"d1": 2, "d7": 1}
    assert second.contexts == () and second.context_ids is None
    assert dict(second.reference_context_ids or {}) == {"d3": 1}


def test_load_samples_csv_label_columns_hold_json(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text(
        "question,contexts,context_ids,reference_context_ids\n"
        'q1,"[""a"",""b""]","[""d1"",""d2""]","{""d2"": 2}"\n'
        'q2,"[""c""]","[""d3""]","[""d3""]"\n',
        encoding="utf-8",
    )
    first, second = load_samples(path)
    assert first.context_ids == ("d1", "d2")
    assert dict(first.reference_context_ids or {}) == {"d2": 2}
    assert dict(second.reference_context_ids or {}) == {"d3": 1}


def test_load_samples_reports_the_line_and_field_of_bad_labels(tmp_path):
    path = tmp_path / "golden.jsonl"
    good = {"question": "q1", "reference_context_ids": ["d1"]}
    bad = {"question": "q2", "reference_context_ids": {"d1": -1}}
    path.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    with pytest.raises(
        SampleLoadError, match=r"golden\.jsonl, line 2: field 'reference_context_ids'"
    ) as info:
        load_samples(path)
    assert info.value.line == 2
    assert info.value.field == "reference_context_ids"


def test_load_samples_csv_bad_json_in_a_label_column(tmp_path):
    path = tmp_path / "golden.csv"
    path.write_text("question,reference_context_ids\nq1,{d1: 2}\n", encoding="utf-8")
    with pytest.raises(
        SampleLoadError, match=r"line 2: field 'reference_context_ids': expected a JSON array"
    ):
        load_samples(path)


def test_load_samples_duplicate_ranking_ids_name_the_field(tmp_path):
    path = tmp_path / "golden.json"
    path.write_text(
        json.dumps([{"question": "q", "contexts": ["a", "b"], "retrieved_context_ids": ["d1", "d1"]}]),
        encoding="utf-8",
    )
    with pytest.raises(SampleLoadError, match=r"item #0: RagSample\.context_ids: id 'd1' appears twice"):
        load_samples(path)
