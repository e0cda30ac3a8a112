"""The committed judgment store: stable, atomic, tolerant of damaged files, prunable."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.judge.base import JudgeAnswer, Usage
from pytest_ragmetrics.judge.cache import RagMetricsWarning
from pytest_ragmetrics.judge.store import JudgmentStore


def make_answer(useful: bool = True) -> JudgeAnswer:
    return JudgeAnswer(
        choices=({"reason": "mentions Paris — the capital", "useful": useful},),
        usage=Usage(120, 15),
        model="judge-model-2025",
        judged_at="2025-01-02T03:04:05Z",
    )


def test_put_then_get_round_trips_with_source_store(tmp_path):
    store = JudgmentStore(tmp_path / "judgments")
    request = make_request()
    path = store.put(request, make_answer())
    key = request.cache_key()
    assert path == tmp_path / "judgments" / key[:2] / f"{key}.json"
    answer = store.get(request)
    assert answer is not None
    assert answer.source == "store"
    assert answer.choices == make_answer().choices
    assert answer.usage == Usage(120, 15)
    assert answer.model == "judge-model-2025"
    assert len(store) == 1
    assert store.keys() == {key}
    assert key in store


def test_store_file_is_readable_and_byte_stable(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = store.put(request, make_answer())
    first = path.read_bytes()
    store.put(request, make_answer())
    assert path.read_bytes() == first
    text = first.decode("utf-8")
    assert text.endswith("}\n")
    assert "Où est Paris ?" in text  # not \u-escaped: reviews read the real text
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["key"] == request.cache_key()
    assert data["kind"] == "context_precision"
    assert data["prompt_version"] == "1"
    assert data["model"] == "judge-model"
    assert (data["temperature"], data["seed"], data["n"]) == (0.0, 0, 1)
    assert data["inputs"] == dict(request.inputs)
    assert data["schema_name"] == "chunk_verdict"
    assert data["answer"]["choices"][0]["reason"] == "mentions Paris — the capital"
    assert data["answer"]["judged_at"] == "2025-01-02T03:04:05Z"
    assert text == json.dumps(data, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def test_missing_entry_is_none(tmp_path):
    assert JudgmentStore(tmp_path / "nowhere").get(make_request()) is None
    assert JudgmentStore(tmp_path / "nowhere").keys() == set()


def test_failed_write_leaves_the_old_file_and_no_temp_file(tmp_path, monkeypatch):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = store.put(request, make_answer(True))
    before = path.read_bytes()

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.put(request, make_answer(False))
    assert path.read_bytes() == before
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]


def test_corrupt_file_is_a_miss_with_one_warning(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = store.put(request, make_answer())
    path.write_text('{"key": "trunc', encoding="utf-8")
    with pytest.warns(RagMetricsWarning, match="not valid JSON") as record:
        assert store.get(request) is None
        assert store.get(request) is None
    assert len(record) == 1
    assert str(path) in str(record[0].message)


def test_stored_answer_that_no_longer_fits_the_schema_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = store.put(request, make_answer())
    data = json.loads(path.read_text(encoding="utf-8"))
    data["answer"]["choices"][0]["useful"] = "maybe"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(RagMetricsWarning, match="does not conform"):
        assert store.get(request) is None


def test_stored_answer_without_answer_field_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    store.put(request, make_answer()).write_text('{"key": "x"}\n', encoding="utf-8")
    with pytest.warns(RagMetricsWarning, match="malformed"):
        assert store.get(request) is None


def test_prune_removes_unused_entries_and_empty_shards(tmp_path):
    store = JudgmentStore(tmp_path)
    requests = [make_request(i) for i in range(6)]
    for request in requests:
        store.put(request, make_answer())
    keep = {requests[0].cache_key(), requests[1].cache_key()}
    expected = sorted({r.cache_key() for r in requests} - keep)

    assert store.prune(keep, dry_run=True) == expected
    assert len(store) == 6

    assert store.prune(keep) == expected
    assert store.keys() == keep
    shards = {p.name for p in Path(tmp_path).iterdir()}
    assert shards == {k[:2] for k in keep}
    assert store.prune(keep) == []


def test_keys_ignore_stray_files(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    store.put(request, make_answer())
    (tmp_path / "README.md").write_text("judgments\n")
    (tmp_path / "ab").mkdir(exist_ok=True)
    (tmp_path / "ab" / "notes.json").write_text("{}")
    assert store.keys() == {request.cache_key()}


def test_n_mismatch_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request(n=2)
    store.put(request, make_answer())
    with pytest.warns(RagMetricsWarning, match="expected 2"):
        assert store.get(request) is None


GOOD_CHOICES = [{"reason": "r", "useful": True}]


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ("oops", "the answer is a string, not an object"),
        ([1], "the answer is an array, not an object"),
        ({"usage": {}}, "the answer has no 'choices'"),
        ({"choices": "abc"}, "'choices' is a string, not an array"),
        ({"choices": [1]}, "choice 0 is a number, not an object"),
        (
            {"choices": GOOD_CHOICES, "usage": [1]},
            "'usage' is an array, not an object",
        ),
        ({"choices": GOOD_CHOICES, "usage": 5}, "'usage' is a number, not an object"),
        ({"choices": GOOD_CHOICES, "usage": {"prompt_tokens": "abc"}}, "'usage.prompt_tokens' is 'abc'"),
        (
            {"choices": GOOD_CHOICES, "usage": {"completion_tokens": True}},
            "'usage.completion_tokens' is True",
        ),
        ({"choices": GOOD_CHOICES, "usage": {"prompt_tokens": -3}}, "'usage.prompt_tokens' is -3"),
        ({"choices": GOOD_CHOICES, "model": 5}, "'model' is a number, not a string"),
        ({"choices": GOOD_CHOICES, "judged_at": None}, "'judged_at' is null, not a string"),
    ],
)
def test_hand_edited_answer_of_the_wrong_json_type_is_a_miss_with_one_warning(tmp_path, answer, why):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = store.put(request, make_answer())
    data = json.loads(path.read_text(encoding="utf-8"))
    data["answer"] = answer
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.warns(RagMetricsWarning) as record:
        assert store.get(request) is None
        assert store.get(request) is None
    [warning] = [str(w.message) for w in record]
    assert str(path) in warning
    assert "malformed" in warning
    assert why in warning
    with pytest.raises(ValueError, match=re.escape(why)):
        JudgeAnswer.from_json(answer, source="store")


def test_from_json_accepts_what_to_json_writes_and_missing_optional_fields():
    answer = make_answer()
    assert JudgeAnswer.from_json(answer.to_json(), source="cache") == JudgeAnswer(
        choices=answer.choices,
        usage=answer.usage,
        model=answer.model,
        judged_at=answer.judged_at,
        source="cache",
    )
    minimal = JudgeAnswer.from_json({"choices": GOOD_CHOICES, "usage": None}, source="store")
    assert minimal.usage == Usage() and minimal.model == "" and minimal.judged_at == ""


@pytest.mark.parametrize(
    ("replay", "then"), [(True, "replay treats"), (False, "judged again"), (None, "missing")]
)
def test_store_warning_says_what_happens_next(tmp_path, replay, then):
    store = JudgmentStore(tmp_path)
    request = make_request()
    store.put(request, make_answer()).write_text("{", encoding="utf-8")
    with pytest.warns(RagMetricsWarning, match=then):
        assert store.get(request, replay=replay) is None


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_store_files_get_normal_permissions_for_committed_files(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = JudgmentStore(tmp_path).put(make_request(), make_answer())
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no temp file left
