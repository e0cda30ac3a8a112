"""RagSample: validation messages, immutability, and from_dict with every accepted field name."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from pytest_ragmetrics import RagSample
from pytest_ragmetrics.loaders import FIELD_ALIASES, sample_kwargs

LONG = "Paris is the capital of France and by far its largest city, on the river Seine. " * 3


# ------------------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("kwargs", "error", "pattern"),
    [
        ({"question": 42, "contexts": []}, TypeError, r"RagSample\.question must be a str, got int: 42"),
        ({"question": None, "contexts": []}, TypeError, r"RagSample\.question must be a str, got NoneType"),
        (
            {"question": "", "contexts": []},
            ValueError,
            r"RagSample\.question must be a non-empty str, got ''",
        ),
        ({"question": " \n\t", "contexts": []}, ValueError, r"RagSample\.question must be a non-empty str"),
        (
            {"question": "q", "contexts": "one chunk"},
            TypeError,
            r"RagSample\.contexts must be a list or tuple",
        ),
        ({"question": "q", "contexts": {"a": 1}}, TypeError, r"RagSample\.contexts .*got dict"),
        (
            {"question": "q", "contexts": ["ok", 3]},
            TypeError,
            r"RagSample\.contexts\[1\] must be a str, got int: 3",
        ),
        (
            {"question": "q", "contexts": [], "ground_truth": 1},
            TypeError,
            r"RagSample\.ground_truth must be a str",
        ),
        (
            {"question": "q", "contexts": [], "answer": ["a"]},
            TypeError,
            r"RagSample\.answer must be a str or None",
        ),
        ({"question": "q", "contexts": [], "id": 1.5}, TypeError, r"RagSample\.id must be a str or None"),
        (
            {"question": "q", "contexts": [], "metadata": [1]},
            TypeError,
            r"RagSample\.metadata must be a mapping",
        ),
    ],
)
def test_invalid_values_raise_naming_the_field(kwargs, error, pattern):
    with pytest.raises(error, match=pattern):
        RagSample(**kwargs)


@pytest.mark.parametrize("field", ["question", "contexts", "ground_truth"])
def test_long_invalid_values_are_shown_truncated(field):
    kwargs: dict[str, Any] = {
        "question": "q",
        "contexts": [],
        field: LONG.encode() if field != "contexts" else LONG,
    }
    with pytest.raises(TypeError) as info:
        RagSample(**kwargs)
    message = str(info.value)
    assert f"RagSample.{field}" in message
    assert "Paris is the capital" in message  # the value is shown ...
    assert LONG not in message and len(message) < len(LONG)  # ... but shortened
    assert "..." in message


def test_valid_sample_normalizes_contexts_and_int_ids():
    sample = RagSample("q", ["a", "b"], id=3)  # type: ignore[arg-type]  # typed str; an int is converted
    assert sample.contexts == ("a", "b") and isinstance(sample.contexts, tuple)
    assert sample.id == "3"
    assert sample.ground_truth is None and sample.answer is None and sample.metadata == {}


def test_empty_contexts_are_allowed():
    """A retriever that found nothing is a valid (and interesting) sample."""
    assert RagSample("q", []).contexts == ()


def test_bool_id_is_rejected():
    with pytest.raises(TypeError, match=r"RagSample\.id"):
        RagSample("q", [], id=True)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------ immutability


@pytest.mark.parametrize("field", ["question", "contexts", "ground_truth", "answer", "id", "metadata"])
def test_fields_cannot_be_reassigned(field):
    sample = RagSample("q", ["c"])
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(sample, field, "x")


def test_contexts_cannot_be_changed_through_the_input_list():
    chunks = ["a"]
    sample = RagSample("q", chunks)
    chunks.append("b")
    assert sample.contexts == ("a",)


def test_samples_are_hashable_and_metadata_does_not_affect_equality():
    a = RagSample("q", ["c"], "gt", metadata={"x": 1})
    b = RagSample("q", ("c",), "gt", metadata={"x": 2})
    assert a == b and hash(a) == hash(b)
    assert a != RagSample("q", ["c"], "other")


def test_reference_prefers_ground_truth_then_answer():
    assert RagSample("q", [], ground_truth="gt", answer="ans").reference == "gt"
    assert RagSample("q", [], ground_truth="  ", answer="ans").reference == "ans"
    assert RagSample("q", []).reference is None


# --------------------------------------------------------------------------------------- from_dict


@pytest.mark.parametrize("question_key", FIELD_ALIASES["question"])
@pytest.mark.parametrize("contexts_key", FIELD_ALIASES["contexts"])
def test_from_dict_accepts_every_question_and_contexts_alias(question_key, contexts_key):
    sample = RagSample.from_dict({question_key: "What?", contexts_key: ["chunk"]})
    assert sample == RagSample("What?", ("chunk",))
    assert sample.metadata == {}


@pytest.mark.parametrize(
    ("data", "ground_truth", "answer"),
    [
        ({"ground_truth": "gt", "answer": "ans"}, "gt", "ans"),
        ({"reference": "gt", "response": "ans"}, "gt", "ans"),  # RAGAS >= 0.2, NVIDIA-style
        ({"ground_truths": ["gt"]}, "gt", None),  # RAGAS 0.0.x
        ({"ground_truths": []}, None, None),
        ({"ground_truth": "gt", "reference": "gt", "ground_truths": ["gt"]}, "gt", None),  # agreeing aliases
        ({"answer": None, "response": "ans"}, None, "ans"),  # None counts as absent
    ],
)
def test_from_dict_ground_truth_and_answer_aliases(data, ground_truth, answer):
    sample = RagSample.from_dict({"question": "q", "contexts": [], **data})
    assert (sample.ground_truth, sample.answer) == (ground_truth, answer)


def test_from_dict_nvidia_style_record():
    sample = RagSample.from_dict(
        {"userInput": "q", "retrievedContexts": ["a", "b"], "reference": "gt", "response": "ans", "id": "n1"}
    )
    assert sample == RagSample("q", ("a", "b"), "gt", "ans", id="n1")


def test_from_dict_keeps_extra_ground_truths_in_metadata():
    sample = RagSample.from_dict({"question": "q", "contexts": [], "ground_truths": ["first", "second"]})
    assert sample.ground_truth == "first"
    assert sample.metadata == {"ground_truths": ["first", "second"]}


def test_from_dict_unknown_keys_merge_with_explicit_metadata():
    sample = RagSample.from_dict(
        {
            "question": "q",
            "contexts": [],
            "source": "wiki",
            "multi_responses": ["r"],
            "metadata": {"lang": "en"},
        }
    )
    assert sample.metadata == {"source": "wiki", "multi_responses": ["r"], "lang": "en"}


def test_from_dict_metadata_conflict_is_an_error():
    with pytest.raises(ValueError, match=r"field 'source' is given both as a key and in 'metadata'"):
        RagSample.from_dict({"question": "q", "contexts": [], "source": "a", "metadata": {"source": "b"}})


def test_from_dict_default_id_is_used_only_without_an_id():
    assert RagSample.from_dict({"question": "q", "contexts": []}, default_id="d").id == "d"
    assert RagSample.from_dict({"question": "q", "contexts": [], "id": "own"}, default_id="d").id == "own"
    assert RagSample.from_dict({"question": "q", "contexts": [], "id": 5}).id == "5"


def test_from_dict_does_not_modify_its_input():
    data = {"user_input": "q", "retrieved_contexts": ["c"], "extra": 1}
    before = dict(data)
    RagSample.from_dict(data)
    assert data == before


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        (
            {"question": "a", "user_input": "b", "contexts": []},
            r"fields 'question' and 'user_input' .* differ: str 'a' vs str 'b'",
        ),
        (
            {"question": "q", "contexts": ["a"], "retrievedContexts": ["b"]},
            r"fields 'contexts' and 'retrievedContexts'",
        ),
        (
            {"question": "q", "contexts": [], "ground_truth": "a", "ground_truths": ["b"]},
            r"fields 'ground_truth' and 'ground_truths'",
        ),
        (
            {"question": "q", "contexts": [], "answer": "a", "response": "b"},
            r"fields 'answer' and 'response'",
        ),
    ],
)
def test_from_dict_conflicting_aliases_name_both(data, pattern):
    with pytest.raises(ValueError, match=pattern):
        RagSample.from_dict(data)


def test_from_dict_same_contexts_as_list_and_tuple_do_not_conflict():
    assert RagSample.from_dict(
        {"question": "q", "contexts": ["a"], "retrieved_contexts": ("a",)}
    ).contexts == ("a",)


@pytest.mark.parametrize(
    ("data", "field", "names"),
    [
        ({"contexts": []}, "question", "'question', 'user_input', 'userInput'"),
        ({"question": None, "contexts": []}, "question", "'question', 'user_input', 'userInput'"),
    ],
)
def test_from_dict_missing_required_field_lists_accepted_names(data, field, names):
    with pytest.raises(ValueError) as info:
        RagSample.from_dict(data)
    assert str(info.value) == f"missing field {field!r} (accepted names: {names})"


@pytest.mark.parametrize(
    ("data", "pattern"),
    [
        ({"user_input": 1, "contexts": []}, r"^field 'user_input': expected a str, got int 1$"),
        (
            {"question": "q", "retrieved_contexts": LONG},
            r"^field 'retrieved_contexts': expected a list of str, got str 'Paris",
        ),
        (
            {"question": "q", "contexts": ["a", b"b"]},
            r"^field 'contexts': item 1 must be a str, got bytes b'b'$",
        ),
        (
            {"question": "q", "contexts": [], "ground_truths": "gt"},
            r"^field 'ground_truths': expected a list of str",
        ),
        (
            {"question": "q", "contexts": [], "ground_truths": [1]},
            r"^field 'ground_truths': item 0 must be a str",
        ),
        ({"question": "q", "contexts": [], "response": 2}, r"^field 'response': expected a str, got int 2$"),
    ],
)
def test_from_dict_type_errors_name_the_key_used(data, pattern):
    with pytest.raises(TypeError, match=pattern) as info:
        RagSample.from_dict(data)
    assert len(str(info.value)) < 150  # long values are truncated


@pytest.mark.parametrize("data", [["q", ["c"]], "question", None, 3])
def test_from_dict_rejects_non_mappings(data):
    with pytest.raises(TypeError, match="expected a mapping"):
        RagSample.from_dict(data)


def test_sample_kwargs_returns_ragsample_keyword_arguments():
    kwargs = sample_kwargs(
        {"user_input": "q", "retrieved_contexts": ["c"], "response": "a", "x": 1}, default_id="i"
    )
    assert kwargs == {"question": "q", "contexts": ("c",), "answer": "a", "id": "i", "metadata": {"x": 1}}
    assert RagSample(**kwargs).id == "i"


def test_metadata_is_a_read_only_copy():
    given = {"source": "wiki"}
    sample = RagSample("q?", ["c"], metadata=given)
    given["source"] = "changed"
    assert sample.metadata["source"] == "wiki"
    with pytest.raises(TypeError):
        sample.metadata["source"] = "x"  # type: ignore[index]


def test_samples_without_metadata_share_one_read_only_empty_mapping():
    """A golden set's samples seldom carry metadata: they keep no mapping of their own for it."""
    first, second = RagSample("q?", ["c"]), RagSample("r?", ["d"], metadata={})
    assert first.metadata == {} and first.metadata is second.metadata
    with pytest.raises(TypeError):
        first.metadata["source"] = "x"  # type: ignore[index]
    assert RagSample("s?", ["e"], metadata={"k": 1}).metadata == {"k": 1}


def test_samples_survive_deepcopy_and_pickle():
    import copy
    import pickle

    sample = RagSample("q?", ["c"], ground_truth="g", id="s1", metadata={"k": [1]})
    for clone in (copy.deepcopy(sample), pickle.loads(pickle.dumps(sample))):
        assert clone == sample and clone.metadata == {"k": [1]} and clone.id == "s1"


def test_a_sample_hashes_like_its_equals_and_its_hash_stays_in_its_process():
    import pickle

    sample = RagSample("q?", ["c"], ground_truth="g", id="s1", metadata={"k": [1]})
    twin = RagSample("q?", ["c"], ground_truth="g", id="s1", metadata={"other": 2})
    assert hash(sample) == hash(twin) and {sample: 1}[twin] == 1
    assert hash(RagSample("q?", ["c"], ground_truth="g", id="s2")) != hash(sample)
    # str hashes differ between processes: what is pickled is the values, never the hash taken here
    assert pickle.dumps(sample) == pickle.dumps(RagSample("q?", ["c"], ground_truth="g", id="s1", metadata={"k": [1]}))
    assert hash(pickle.loads(pickle.dumps(sample))) == hash(sample)


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"question": "q \ud800?", "contexts": ["c"]}, "question"),
        ({"question": "q?", "contexts": ["a \ud800 b"], "ground_truth": "g."}, "contexts[0]"),
        ({"question": "q?", "contexts": ["c"], "ground_truth": "g \udfff."}, "ground_truth"),
        ({"question": "q?", "contexts": ["c"], "answer": "\ud83d"}, "answer"),
        ({"question": "q?", "contexts": ["c"], "id": "x\ud800"}, "id"),
    ],
)
def test_a_lone_surrogate_is_an_invalid_sample_naming_the_field(kwargs, field):
    """It used to crash later, in the cache key, with UnicodeEncodeError."""
    from pytest_ragmetrics.errors import InvalidSample

    with pytest.raises(
        InvalidSample, match=rf"^RagSample\.{re.escape(field)} contains a lone surrogate"
    ) as info:
        RagSample(**kwargs)
    assert info.value.field == field


def test_a_lone_surrogate_in_new_contexts_is_caught_too():
    from pytest_ragmetrics.errors import InvalidSample

    sample = RagSample("q?", ["c"], ground_truth="g.")
    with pytest.raises(InvalidSample, match=r"contexts\[1\]"):
        sample.with_contexts(["fine", "bad \ud800"])


def test_a_valid_surrogate_pair_written_as_one_character_is_fine():
    assert RagSample("emoji 😀?", ["😀 chunk"]).contexts == ("😀 chunk",)


@pytest.mark.parametrize("question", ["\u200b", "\u200b\u200c\u200d\ufeff", " \u2060\n", "\u200e"])
def test_a_question_of_only_invisible_characters_is_rejected(question):
    with pytest.raises(ValueError, match=r"RagSample\.question must be a non-empty str"):
        RagSample(question, ["c"])
