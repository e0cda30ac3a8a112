"""The committed judgment store: JSON Lines shards, stable, atomic, mergeable, tolerant, prunable."""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.judge.base import JudgeAnswer, Usage
from pytest_ragmetrics.judge.store import (
    FORMAT_DEFAULTS,
    GITATTRIBUTES,
    JudgmentStore,
    dump_line,
    record_of,
)


def make_answer(useful: bool = True, judged_at: str = "2025-01-02T03:04:05Z") -> JudgeAnswer:
    return JudgeAnswer(
        choices=({"reason": "mentions Paris — the capital", "useful": useful},),
        usage=Usage(120, 15),
        model="judge-model-2025",
        judged_at=judged_at,
    )


def put(store: JudgmentStore, request: Any, answer: JudgeAnswer) -> Path:
    """Record one answer; the shard it went to."""
    store.put_many([(request, answer)])
    return store.path_for(request.cache_key())


def stored(store: JudgmentStore, request: Any) -> JudgeAnswer:
    """The answer the store holds for ``request``; it must hold one."""
    answer = store.get(request)
    assert answer is not None, f"no stored answer to {request.cache_key()}"
    return answer


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def replace_entry(store_dir: Path, key: str, text: str) -> Path:
    """Replace the line of ``key`` in its shard by ``text`` (a hand edit), as a new run would see it."""
    path = store_dir / f"{key[:2]}.jsonl"
    lines = [text if line.startswith(f'{{"key":"{key}"') else line for line in lines_of(path)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def test_put_then_get_round_trips_with_source_store(tmp_path):
    store = JudgmentStore(tmp_path / "judgments")
    request = make_request()
    path = put(store, request, make_answer())
    key = request.cache_key()
    assert path == tmp_path / "judgments" / f"{key[:2]}.jsonl"
    for reader in (store, JudgmentStore(tmp_path / "judgments")):  # this run, and the next one
        answer = reader.get(request)
        assert answer is not None
        assert answer.source == "store"
        assert answer.choices == make_answer().choices
        assert answer.usage == Usage(120, 15)
        assert answer.model == "judge-model-2025"
        assert len(reader) == 1
        assert reader.keys() == {key}
        assert key in reader


def test_an_entry_is_one_readable_line_with_its_key_first(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    text = path.read_text(encoding="utf-8")
    assert text.count("\n") == 1 and text.endswith("}\n")
    assert "Où est Paris ?" in text  # not \u-escaped: reviews read the real text
    assert text.startswith(f'{{"key":"{request.cache_key()}",')
    data = json.loads(text)
    assert list(data)[1:] == sorted(set(data) - {"key"})
    assert data["kind"] == "context_precision"
    assert data["prompt_version"] == "1"
    assert data["model"] == "judge-model"
    assert not {"temperature", "seed", "n"} & set(data)  # their usual values (0.0, 0, 1) are left out
    assert data["inputs"] == dict(request.inputs)  # every text written out: a diff shows what was asked
    assert data["schema_name"] == "chunk_verdict"
    assert data["answer"]["choices"][0]["reason"] == "mentions Paris — the capital"
    assert data["answer"]["judged_at"] == "2025-01-02T03:04:05Z"
    assert store.read_json(request.cache_key()) == {**FORMAT_DEFAULTS, **record_of(request, make_answer())}


def test_a_newline_in_a_text_stays_inside_its_line(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request(inputs={"question": "two\nlines\u2028and a separator", "chunk": "c\r\n"})
    path = put(store, request, make_answer())
    assert path.read_bytes().count(b"\n") == 1
    assert JudgmentStore(tmp_path).get(request) is not None


def test_re_recording_an_unchanged_judgment_writes_nothing(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    store.flush()
    first, mtime = path.read_bytes(), path.stat().st_mtime_ns
    put(JudgmentStore(tmp_path), request, make_answer())
    assert path.read_bytes() == first
    assert path.stat().st_mtime_ns == mtime


def test_replacing_a_judgment_keeps_one_line_for_its_key(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer(True))
    put(store, request, make_answer(False))  # a refresh within the same second
    answer = store.get(request)
    assert answer is not None and answer.choices[0]["useful"] is False
    store.flush()
    assert len(lines_of(path)) == 1
    answer = JudgmentStore(tmp_path).get(request)
    assert answer is not None and answer.choices[0]["useful"] is False


def test_a_replaced_judgment_not_yet_sorted_in_is_read_as_the_later_one(tmp_path):
    """A run killed before the end leaves both lines: the later judgment counts."""
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer(True))
    put(store, request, make_answer(False, judged_at="2025-02-01T00:00:00Z"))
    assert len(lines_of(path)) == 2
    with pytest.warns(RagMetricsWarning, match="the later line counts"):
        answer = JudgmentStore(tmp_path).get(request)
    assert answer is not None and answer.choices[0]["useful"] is False


def test_new_judgments_are_appended_then_sorted_when_flushed(tmp_path):
    store = JudgmentStore(tmp_path)
    requests = [make_request(i) for i in range(400)]
    for request in reversed(requests):
        put(store, request, make_answer())
    shard = max(store.shard_paths(), key=lambda p: len(lines_of(p)))
    keys = [json.loads(line)["key"] for line in lines_of(shard)]
    assert len(keys) >= 3
    reader = JudgmentStore(tmp_path)  # an unsorted shard (a run that was killed) reads fine
    assert all(reader.get(r) is not None for r in requests)
    store.flush()
    for path in store.shard_paths():
        keys = [json.loads(line)["key"] for line in lines_of(path)]
        assert keys == sorted(keys)
        assert all(key.startswith(path.name[:2]) for key in keys)
    assert JudgmentStore(tmp_path).keys() == {r.cache_key() for r in requests}


def test_lookups_find_exactly_the_recorded_keys(tmp_path):
    """Keys that differ only in their last digit, or that spell a recorded key in upper case."""
    request = make_request()
    record = record_of(request, make_answer())
    near = [record["key"][:-1] + digit for digit in "0123456789abcdef"]
    lines = [dump_line({**record, "key": key}) for key in near[::3]]
    path = tmp_path / f"{near[0][:2]}.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in [lines[-1], *lines[:-1]]))
    store = JudgmentStore(tmp_path)
    for key in near:
        assert (key in store) is (key in near[::3])
        assert (store.read_json(key) is not None) is (key in near[::3])
    assert store.keys() == set(near[::3])
    assert near[3].upper() not in store and store.read_json(near[3].upper()) is None
    assert ("g" + near[3][1:]) not in store and "é" * 64 not in store
    put(store, request, make_answer())  # appended among them: found, and the others still are
    recorded = store.keys()
    assert recorded == {*near[::3], request.cache_key()}
    assert all(key in store for key in recorded)


def test_writes_a_gitattributes_that_merges_shards_by_union_and_keeps_a_users_own(tmp_path):
    put(JudgmentStore(tmp_path / "a"), make_request(), make_answer())
    assert (tmp_path / "a" / ".gitattributes").read_text(encoding="utf-8") == GITATTRIBUTES
    assert "*.jsonl merge=union" in GITATTRIBUTES
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / ".gitattributes").write_text("*.jsonl -diff\n", encoding="utf-8")
    put(JudgmentStore(tmp_path / "b"), make_request(), make_answer())
    assert (tmp_path / "b" / ".gitattributes").read_text(encoding="utf-8") == "*.jsonl -diff\n"


@pytest.mark.parametrize("order", [(0, 1), (1, 0)])
def test_a_key_recorded_twice_with_different_answers_warns_and_the_later_line_counts(tmp_path, order):
    """Two reviews that each re-recorded one judgment leave both lines after a union merge: the rule
    is the line order, not the judgment time (a hand-set judged_at in 2099 decides nothing)."""
    request = make_request()
    records = [
        record_of(request, make_answer(True, judged_at="2099-01-01T00:00:00Z")),
        record_of(request, make_answer(False, judged_at="2025-03-01T00:00:00Z")),
    ]
    path = tmp_path / f"{request.cache_key()[:2]}.jsonl"
    path.write_bytes(b"".join(dump_line(records[i]) + b"\n" for i in order))
    store = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning) as caught:
        answer = store.get(request)
    later = records[order[1]]["answer"]["choices"][0]["useful"]
    assert answer is not None and answer.choices[0]["useful"] is later
    (message,) = [str(w.message) for w in caught]
    assert str(path) in message and request.cache_key() in message and "the later line counts" in message
    assert '"useful": true' in message and '"useful": false' in message  # both answers, for a person
    put(store, make_request(1), make_answer())  # a write to another shard keeps this one as it is
    store.flush()
    assert len(lines_of(path)) == 2
    put(store, request, make_answer(later))  # recording it again: one line, sorted into place
    store.flush()
    assert stored(JudgmentStore(tmp_path), request).choices[0]["useful"] is later


def test_the_same_judgment_recorded_twice_is_no_conflict(tmp_path):
    request = make_request()
    path = tmp_path / f"{request.cache_key()[:2]}.jsonl"
    lines = [
        dump_line(record_of(request, make_answer(judged_at=t)))
        for t in ("2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z")
    ]
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert JudgmentStore(tmp_path).get(request) is not None


def test_missing_entry_is_none(tmp_path):
    assert JudgmentStore(tmp_path / "nowhere").get(make_request()) is None
    assert JudgmentStore(tmp_path / "nowhere").keys() == set()


def test_failed_rewrite_leaves_the_old_shard_and_no_temp_file(tmp_path, monkeypatch):
    store = JudgmentStore(tmp_path)
    requests = [make_request(i) for i in range(40)]
    for request in reversed(requests):
        put(store, request, make_answer(True))
    before = {path.name: path.read_bytes() for path in store.shard_paths()}

    def broken_replace(src: Any, dst: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        store.flush()
    assert {path.name: path.read_bytes() for path in store.shard_paths()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]
    monkeypatch.undo()
    assert all(JudgmentStore(tmp_path).get(r) is not None for r in requests)


def test_a_line_that_is_not_a_judgment_is_ignored_with_a_warning_and_kept(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    with path.open("a", encoding="utf-8") as handle:
        handle.write("# reviewed\n")
    reader = JudgmentStore(tmp_path)
    with pytest.warns(
        RagMetricsWarning,
        match=r"shard .*\.jsonl has a line that is not a judgment \(line 2: '# reviewed'\)",
    ):
        assert reader.get(request) is not None
    put(reader, make_request(2), make_answer())
    reader.flush()
    assert "# reviewed" in lines_of(path)  # never deleted: a person decides


@pytest.mark.parametrize("bad", ["A" * 64, "g" * 64, "0" * 63 + "-"], ids=["upper", "not hex", "sign"])
def test_a_line_whose_key_is_not_a_key_is_not_a_judgment(tmp_path, bad):
    """Where the store writes a key, only 64 lowercase hex digits are one."""
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    line = lines_of(path)[0].replace(request.cache_key(), bad)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
    reader = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning, match=r"has a line that is not a judgment \(line 2"):
        assert reader.keys() == {request.cache_key()}
    assert reader.get(request) is not None


def test_corrupt_entry_is_a_miss_with_one_warning(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    key = request.cache_key()
    path = put(store, request, make_answer())
    replace_entry(tmp_path, key, f'{{"key":"{key}","answer":{{"trunc')
    reader = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning, match="not valid JSON") as record:
        assert reader.get(request) is None
        assert reader.get(request) is None
    assert len(record) == 1
    assert str(path) in str(record[0].message)


@pytest.mark.parametrize(
    ("edit", "name"),
    [
        (lambda line: line.replace('"useful":true', '"useful":true,"useful":false'), "useful"),
        (lambda line: line[:-1] + ',"answer":{"choices":[]}}', "answer"),
    ],
    ids=["a verdict added beside the old one", "a second answer"],
)
def test_a_line_that_gives_a_field_twice_is_a_miss_naming_shard_line_key_and_field(tmp_path, edit, name):
    """JSON readers keep the last of two same-named fields in silence: which one a hand edit meant
    is a person's call, so the line is refused, as a line that is not valid JSON is."""
    store = JudgmentStore(tmp_path)
    request = make_request()
    key = request.cache_key()
    put(store, request, make_answer())
    other = make_request(79)  # its key falls in the same shard as request 0's
    assert other.cache_key()[:2] == key[:2]
    put(store, other, make_answer())
    store.flush()
    line = next(line for line in lines_of(store.path_for(key)) if key in line)
    path = replace_entry(tmp_path, key, edit(line))
    number = lines_of(path).index(edit(line)) + 1
    reader = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning, match="twice") as record:
        assert reader.get(request) is None
        assert reader.get(request) is None
    assert len(record) == 1
    message = str(record[0].message)
    assert str(path) in message and key[:12] in message
    assert f"line {number}" in message and f"'{name}'" in message
    assert reader.get(other) is not None  # the shard's other lines read as before


def test_stored_answer_that_no_longer_fits_the_schema_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    data = json.loads(path.read_text(encoding="utf-8"))
    data["answer"]["choices"][0]["useful"] = "maybe"
    replace_entry(tmp_path, request.cache_key(), json.dumps(data))
    with pytest.warns(RagMetricsWarning, match="does not conform"):
        assert JudgmentStore(tmp_path).get(request) is None


def test_stored_answer_without_answer_field_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    key = request.cache_key()
    put(store, request, make_answer())
    replace_entry(tmp_path, key, json.dumps({"key": key}))
    with pytest.warns(RagMetricsWarning, match="malformed"):
        assert JudgmentStore(tmp_path).get(request) is None


def test_prune_removes_unused_entries_and_empty_shards(tmp_path):
    store = JudgmentStore(tmp_path)
    requests = [make_request(i) for i in range(6)]
    for request in requests:
        put(store, request, make_answer())
    keep = {requests[0].cache_key(), requests[1].cache_key()}
    expected = sorted({r.cache_key() for r in requests} - keep)

    assert store.prune(keep, dry_run=True) == expected
    assert len(store) == 6

    assert store.prune(keep) == expected
    assert store.keys() == keep
    assert JudgmentStore(tmp_path).keys() == keep
    shards = {p.name for p in tmp_path.iterdir()} - {".gitattributes", ".gitignore"}
    assert shards == {f"{k[:2]}.jsonl" for k in keep}
    assert store.prune(keep) == []


def test_pruning_keeps_a_last_line_cut_short_as_it_is_and_names_it(tmp_path):
    """prune wrote a shard again from the lines it had read whole, so a last line cut short (a
    killed write, a truncated copy) vanished without a word: a judgment a person could mend."""
    by_shard: dict[str, list[Any]] = {}
    for request in (make_request(i) for i in range(100, 3000)):
        by_shard.setdefault(request.cache_key()[:2], []).append(request)
    used, unused, damaged = next(group for group in by_shard.values() if len(group) >= 3)[:3]
    store = JudgmentStore(tmp_path)
    store.put_many([(used, make_answer()), (unused, make_answer())])
    store.flush()
    path = store.path_for(used.cache_key())
    cut = dump_line(record_of(damaged, make_answer()))[:100]
    path.write_bytes(path.read_bytes() + cut)

    reader = JudgmentStore(tmp_path)
    assert reader.keys() == {used.cache_key(), unused.cache_key()}
    with pytest.warns(RagMetricsWarning) as record:
        assert reader.prune({used.cache_key()}) == [unused.cache_key()]
    assert [str(w.message) for w in record] == [
        f"the judgment store shard {path} ends in a line cut short (line 3: {cut[:80].decode()!r}); "
        "it is not read, and kept as it is"
    ]
    assert path.read_bytes() == dump_line(record_of(used, make_answer())) + b"\n" + cut
    assert stored(JudgmentStore(tmp_path), used).choices[0]["useful"] is True
    assert reader.prune(set()) == [used.cache_key()]  # the last judgment gone: the cut line stays
    assert path.read_bytes() == cut


def test_keys_ignore_stray_files(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request()
    put(store, request, make_answer())
    (tmp_path / "README.md").write_text("judgments\n")
    (tmp_path / "zz.jsonl").write_text("{}\n")
    (tmp_path / "ab").mkdir(exist_ok=True)
    (tmp_path / "ab" / "notes.json").write_text("{}")
    assert JudgmentStore(tmp_path).keys() == {request.cache_key()}


def test_n_mismatch_is_a_miss(tmp_path):
    store = JudgmentStore(tmp_path)
    request = make_request(n=2)
    put(store, request, make_answer())
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
        # Past what a live answer records: a report counting it could be neither merged nor compared.
        (
            {"choices": GOOD_CHOICES, "usage": {"prompt_tokens": 10**400}},
            "'usage.prompt_tokens' is a whole number of 401 digits, past 2**53",
        ),
        (
            {"choices": GOOD_CHOICES, "usage": {"completion_tokens": 2**53 + 1}},
            "'usage.completion_tokens' is a whole number of 16 digits",
        ),
        ({"choices": GOOD_CHOICES, "model": 5}, "'model' is a number, not a string"),
        ({"choices": GOOD_CHOICES, "judged_at": 5}, "'judged_at' is a number, not a string"),
    ],
)
def test_hand_edited_answer_of_the_wrong_json_type_is_a_miss_with_one_warning(tmp_path, answer, why):
    store = JudgmentStore(tmp_path)
    request = make_request()
    path = put(store, request, make_answer())
    data = json.loads(path.read_text(encoding="utf-8"))
    data["answer"] = answer
    replace_entry(tmp_path, request.cache_key(), json.dumps(data))
    reader = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning) as record:
        assert reader.get(request) is None
        assert reader.get(request) is None
    [warning] = [str(w.message) for w in record]
    assert str(path) in warning
    assert "malformed" in warning
    assert why in warning
    with pytest.raises(ValueError, match=re.escape(why)):
        JudgeAnswer.from_json(answer, source="store")


@pytest.mark.parametrize("name", ["judged_at", "model"])
def test_a_null_judged_at_or_model_is_read_as_unknown_as_a_missing_one(tmp_path, name):
    """null (a hand edit's or another tool's "unknown") reads as the field left out: no warning."""
    store = JudgmentStore(tmp_path)
    request = make_request()
    put(store, request, make_answer())
    data = json.loads(lines_of(store.path_for(request.cache_key()))[0])
    data["answer"] = {"choices": GOOD_CHOICES, name: None}
    replace_entry(tmp_path, request.cache_key(), json.dumps(data))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        answer = stored(JudgmentStore(tmp_path), request)
    missing = JudgeAnswer.from_json({"choices": GOOD_CHOICES}, source="store")
    assert getattr(answer, name) == getattr(missing, name) == ""
    assert answer.choices == tuple(GOOD_CHOICES)


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
    key = request.cache_key()
    put(store, request, make_answer())
    replace_entry(tmp_path, key, f'{{"key":"{key}",')
    with pytest.warns(RagMetricsWarning, match=then):
        assert JudgmentStore(tmp_path).get(request, replay=replay) is None


@pytest.mark.skipif(os.name != "posix", reason="POSIX permissions")
@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o002, 0o664), (0o077, 0o600)])
def test_store_files_get_normal_permissions_for_committed_files(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        store = JudgmentStore(tmp_path)
        path = put(store, make_request(), make_answer())
        put(store, make_request(), make_answer(False, judged_at="2026-01-01T00:00:00Z"))
        store.flush()  # a rewrite
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == mode
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".gitattributes",
        ".gitignore",
        path.name,
    ]  # no temp file


WRITER = """
import sys
sys.path.insert(0, sys.argv[3])
from judge_requests import make_request
from pytest_ragmetrics.judge.base import JudgeAnswer
from pytest_ragmetrics.judge.store import JudgmentStore
store = JudgmentStore(sys.argv[1])
first = int(sys.argv[2])
answer = JudgeAnswer(choices=({"reason": "r", "useful": True},), judged_at="2025-01-01T00:00:00Z")
for i in range(first, first + 300):
    store.put_many([(make_request(i), answer)])
store.flush()
"""


def test_processes_recording_into_the_same_shards_at_once_lose_nothing(tmp_path):
    """What pytest-xdist workers do: append to shared shards, each sorting its own at the end."""
    tests_dir = str(Path(__file__).parent)
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), str(first), tests_dir])
        for first in (0, 300, 600)
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    store = JudgmentStore(tmp_path)
    assert store.keys() == {make_request(i).cache_key() for i in range(900)}
    for path in store.shard_paths():
        keys = [line[8:72] for line in lines_of(path)]
        assert keys == sorted(set(keys))


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com", GIT_CONFIG_NOSYSTEM="1")
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_branches_that_each_record_judgments_merge_without_conflicts(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    store_dir = repo / "judgments"
    base = JudgmentStore(store_dir)
    for i in range(50):
        put(base, make_request(i), make_answer())
    base.flush()
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "other")
    other = JudgmentStore(store_dir)
    for i in range(50, 400):
        put(other, make_request(i), make_answer())
    other.flush()
    _git(repo, "commit", "-q", "-am", "other")
    _git(repo, "checkout", "-q", "main")
    mine = JudgmentStore(store_dir)
    for i in range(400, 750):
        put(mine, make_request(i), make_answer())
    mine.flush()
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "mine")
    _git(repo, "merge", "-q", "--no-edit", "other")  # a conflict would fail here
    merged = JudgmentStore(store_dir)
    assert merged.keys() == {make_request(i).cache_key() for i in range(750)}
    # Readable as merged (a base line both sides kept may come twice: the same judgment, no conflict);
    # sorted again by the next run that writes there.


def test_a_shard_checked_out_with_crlf_line_ends_reads_the_same(tmp_path):
    store = JudgmentStore(tmp_path)
    requests = [make_request(i) for i in range(30)]
    for request in requests:
        put(store, request, make_answer())
    store.flush()
    for path in store.shard_paths():
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))
    reader = JudgmentStore(tmp_path)
    for request in requests:
        answer = reader.get(request)
        assert answer is not None and answer.choices == make_answer().choices
    assert reader.keys() == {r.cache_key() for r in requests}


def test_lookups_keep_few_shard_files_open_where_descriptors_are_scarce(tmp_path, monkeypatch):
    """macOS allows 256 open files by default: a store must not hold one per shard there."""
    import pytest_ragmetrics.judge.store as store_module

    monkeypatch.setattr(store_module, "MAX_OPEN_SHARDS", 3)  # read when a shard is opened
    monkeypatch.setattr(store_module, "ALL_SHARDS_OPEN", False)  # read at each lookup
    requests = [make_request(i) for i in range(60)]
    writer = JudgmentStore(tmp_path)
    for request in requests:
        put(writer, request, make_answer())
    writer.flush()
    writer.close()
    reader = JudgmentStore(tmp_path)
    fd_dir = Path("/proc/self/fd")
    before = len(list(fd_dir.iterdir())) if fd_dir.is_dir() else None
    for request in [*requests, *reversed(requests)]:  # every shard, evicted and reopened
        answer = reader.get(request)
        assert answer is not None and answer.choices == make_answer().choices
        assert len(reader._open) <= 3
        if before is not None:
            assert len(list(fd_dir.iterdir())) <= before + 3
    # A shard replaced while its file was closed is indexed again, not misread.
    replaced = requests[0]
    path = reader.path_for(replaced.cache_key())
    path.write_bytes(path.read_bytes() + b"\n")
    for request in requests:
        assert reader.get(request) is not None
    reader.close()


def test_a_temporary_file_left_by_a_killed_write_is_removed_and_ignored_by_git(tmp_path):
    store = JudgmentStore(tmp_path)
    put(store, make_request(0), make_answer())
    stale = tmp_path / ".00.jsonl.0123456789ab.tmp"
    stale.write_bytes(b"")  # what a process killed between creating and renaming leaves
    theirs = tmp_path / ".notes.tmp"  # another tool's, in a directory the store shares
    theirs.write_bytes(b"keep")
    assert "*.tmp" in (tmp_path / ".gitignore").read_text(encoding="utf-8")
    put(JudgmentStore(tmp_path), make_request(1), make_answer())  # the next writer holds the lock
    assert not stale.exists()
    assert theirs.read_bytes() == b"keep"


def test_a_store_looks_for_temporary_files_and_its_repo_files_at_its_first_write_only(tmp_path, monkeypatch):
    """A cold run writes answers a few at a time: only the first write scans the directory."""
    store = JudgmentStore(tmp_path)
    scans: list[str] = []
    glob = Path.glob

    def counted(self: Path, pattern: str) -> Any:
        scans.append(pattern)
        return glob(self, pattern)

    monkeypatch.setattr(Path, "glob", counted)
    for i in range(3):
        put(store, make_request(i), make_answer())
    assert scans == [".*.tmp"]
    assert (tmp_path / ".gitattributes").read_text(encoding="utf-8") == GITATTRIBUTES
    assert "*.tmp" in (tmp_path / ".gitignore").read_text(encoding="utf-8")
    assert len(JudgmentStore(tmp_path)) == 3


@pytest.mark.parametrize("special", ["directory", "pipe"])
def test_a_shard_that_is_not_a_file_is_skipped_with_a_warning_and_never_waited_on(tmp_path, special):
    """A directory where a shard should be ended the lookup in a bare IsADirectoryError (a test's
    failure, or a traceback); a named pipe made every run that looked in it wait forever."""
    store = JudgmentStore(tmp_path)
    request, other = make_request(1), make_request(2)
    assert request.cache_key()[:2] != other.cache_key()[:2]
    put(store, other, make_answer())
    path = store.path_for(request.cache_key())
    if special == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)
    reader = JudgmentStore(tmp_path)
    with pytest.warns(RagMetricsWarning) as record:
        assert reader.get(request, replay=True) is None
        assert reader.get(request, replay=True) is None
    what = "a directory" if special == "directory" else "a named pipe"
    assert [str(w.message) for w in record] == [
        f"the judgment store shard {path} is {what}, not a file; its judgments are skipped"
    ]
    assert reader.keys() == {other.cache_key()}
    with pytest.raises(OSError):  # recording into it fails (the run says so), it does not wait
        put(reader, request, make_answer())
    assert stored(reader, other).choices[0]["useful"] is True


def test_a_last_line_without_its_newline_is_read(tmp_path):
    """A hand edit or an editor that drops the file's final newline hides no judgment."""
    store = JudgmentStore(tmp_path / "judgments")
    request = make_request()
    path = put(store, request, make_answer(useful=False))
    store.close()
    path.write_bytes(path.read_bytes().rstrip(b"\n"))

    again = JudgmentStore(tmp_path / "judgments")
    answer = again.get(request, replay=True)
    assert answer is not None and answer.choices[0]["useful"] is False
    again.put_many([(request, make_answer(useful=True))])  # appended on a line of its own
    assert [json.loads(line)["answer"]["choices"][0]["useful"] for line in lines_of(path)] == [False, True]
    again.flush()
    again.close()
    assert len(lines_of(path)) == 1
    assert stored(JudgmentStore(tmp_path / "judgments"), request).choices[0]["useful"] is True


@pytest.mark.parametrize(
    "reformat",
    [
        lambda record: json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
        lambda record: json.dumps(record, sort_keys=True),
        lambda record: json.dumps(dict(reversed(list(record.items())))),
    ],
    ids=["jq -S -c", "sorted, spaced, ascii", "key last"],
)
def test_a_shard_reads_the_same_whatever_the_order_and_spacing_of_its_fields(tmp_path, reformat):
    """A tool that rewrote the store one object per line (``jq -S -c``) changes nothing a run reads,
    and a conflict written that way is still found."""
    first, second = make_request(0), make_request(1)
    records = [record_of(first, make_answer(True)), record_of(second, make_answer(False))]
    for record in records:
        path = tmp_path / f"{record['key'][:2]}.jsonl"
        with path.open("a", encoding="utf-8") as handle:
            handle.write(reformat(record) + "\n")
    store = JudgmentStore(tmp_path)
    assert store.keys() == {first.cache_key(), second.cache_key()}
    assert stored(store, first).choices[0]["useful"] is True
    assert stored(store, second).choices[0]["useful"] is False

    conflicting = record_of(first, make_answer(False))
    with store.path_for(first.cache_key()).open("a", encoding="utf-8") as handle:
        handle.write(reformat(conflicting) + "\n")
    with pytest.warns(RagMetricsWarning, match="twice with different answers"):
        assert stored(JudgmentStore(tmp_path), first).choices[0]["useful"] is False


def test_a_byte_order_mark_does_not_cost_the_first_line(tmp_path):
    import warnings

    request = make_request()
    path = tmp_path / f"{request.cache_key()[:2]}.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + dump_line(record_of(request, make_answer())) + b"\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        store = JudgmentStore(tmp_path)
        assert store.get(request) is not None
        put(store, make_request(1), make_answer())
        store.flush()
    assert JudgmentStore(tmp_path).keys() == store.keys() and len(store) == 2


@pytest.mark.parametrize(
    "text",
    [
        "lone \ud800 surrogate",
        "line\u2028separator\x85next",
        "\ufeffmark first",
        "nul \x00 and \r return",
        "é" * 3,
    ],
    ids=["surrogate", "unicode line ends", "bom in text", "control characters", "accents"],
)
def test_whatever_the_store_writes_it_reads_back(tmp_path, text):
    request = make_request(inputs={"question": text, "chunk": text})
    answer = JudgeAnswer(
        choices=({"reason": text, "useful": True},), usage=Usage(1, 1), model="m", judged_at="t"
    )
    store = JudgmentStore(tmp_path)
    put(store, request, answer)
    store.flush()
    again = JudgmentStore(tmp_path)
    assert stored(again, request).choices == answer.choices
    record = again.read_json(request.cache_key())
    assert record is not None and record["inputs"] == request.inputs


def test_a_write_that_fails_part_way_leaves_no_torn_line(tmp_path, monkeypatch):
    """A full disk mid-append: the shard is cut back to its lines before, and reads as before."""
    import errno

    store = JudgmentStore(tmp_path)
    first = make_request(0)
    put(store, first, make_answer())
    path = store.path_for(first.cache_key())
    before = path.read_bytes()
    real_write = os.write
    calls = []

    def full_disk(fd: int, data: Any) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[: len(data) // 2]))  # half a line reaches the disk
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)  # the store writes through os.write
    same_shard = next(
        r for r in (make_request(i) for i in range(1, 2000)) if r.cache_key()[:2] == first.cache_key()[:2]
    )
    with pytest.raises(OSError, match="No space"):
        put(store, same_shard, make_answer(False))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert JudgmentStore(tmp_path).keys() == {first.cache_key()}


def test_a_write_to_a_new_shard_that_fails_leaves_no_empty_file(tmp_path, monkeypatch):
    """A full disk on the first line of a shard: no empty shard file is left behind to be committed."""
    import errno

    store = JudgmentStore(tmp_path)
    first = make_request(0)
    put(store, first, make_answer())

    def full_disk(fd: int, data: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full_disk)  # the store writes through os.write
    other = next(
        r for r in (make_request(i) for i in range(1, 2000)) if r.cache_key()[:2] != first.cache_key()[:2]
    )
    with pytest.raises(OSError, match="No space"):
        put(store, other, make_answer(False))
    monkeypatch.undo()
    assert not store.path_for(other.cache_key()).exists()
    assert store.path_for(first.cache_key()).exists()
    assert JudgmentStore(tmp_path).keys() == {first.cache_key()}


RECORDED_TEST = """
    from pytest_ragmetrics import RagSample, assert_context_precision

    def test_precision():
        sample = RagSample("Where is Paris?", ["Paris is in France.", "Lyon is a city."], "Paris.", id="p")
        assert_context_precision(sample) >= 0.0
"""


@pytest.mark.parametrize("failure", ["read-only store", "full disk"])
def test_recording_that_failed_fails_the_run_with_one_line(pytester, fake_judge_server, monkeypatch, failure):
    monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", fake_judge_server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(test_recorded=RECORDED_TEST)
    store = pytester.path / "judgments"
    store.mkdir()
    if failure == "read-only store":
        # What a store a user may not write gives (as root, chmod stops nothing): the run is in-process.
        real_open = os.open

        def read_only(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if flags & os.O_WRONLY and str(path).startswith(str(store)):
                raise PermissionError(errno.EACCES, "Permission denied", str(path))
            return real_open(path, flags, *args, **kwargs)

        monkeypatch.setattr(os, "open", read_only)
    else:
        for name in (f"{i:02x}" for i in range(256)):
            (store / f"{name}.jsonl").symlink_to("/dev/full")
    result = pytester.runpytest(f"--rag-store-dir={store}", "--rag-cache=readwrite")
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    lines = [line for line in result.stdout.lines if "recording failed" in line]
    assert len(lines) == 1, result.stdout.str()
    assert str(store) in lines[0] and "2 judgment(s) were not recorded for replay" in lines[0]
    assert "Traceback" not in result.stdout.str()


def test_a_shard_changed_in_place_after_it_was_indexed_never_serves_another_judgments_answer(tmp_path):
    store = JudgmentStore(tmp_path / "judgments")
    # Two judgments in one shard whose lines have the same length: swapped in place (same file, same
    # size), each indexed offset now holds the other's line.
    by_shard: dict[str, list[Any]] = {}
    for request in (make_request(i) for i in range(100, 1000)):
        by_shard.setdefault(request.cache_key()[:2], []).append(request)
    first, second = next(pair for pair in by_shard.values() if len(pair) >= 2)[:2]
    when = [(first, "2025-01-02T03:04:05Z"), (second, "2026-01-02T03:04:05Z")]
    store.put_many([(request, make_answer(judged_at=at)) for request, at in when])
    store.flush()
    path = store.path_for(first.cache_key())
    reader = JudgmentStore(tmp_path / "judgments")
    assert stored(reader, first).judged_at == when[0][1]  # indexed, and read once
    lines = path.read_bytes().splitlines(keepends=True)
    assert len(lines) == 2 and len(lines[0]) == len(lines[1])
    before = path.stat()
    with open(path, "r+b") as file:  # in place: the reader's open file sees the change
        file.write(lines[1] + lines[0])
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same inode, size and times
    after = path.stat()
    assert (after.st_ino, after.st_size, after.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns)
    # Each is found where it now is, the shard read anew: neither lost (a replay would fail on it)
    for request, at in when:
        answer = reader.get(request)
        assert answer is not None and answer.judged_at == at


def test_a_line_that_grew_in_place_is_read_whole_where_it_now_ends(tmp_path):
    """A shard rewritten in place (an editor saving into the same file), its first line longer and
    the next shorter: the first still starts where it was indexed, and the length indexed cut it
    short, which was read as a damaged line, warned of and lost."""
    store = JudgmentStore(tmp_path / "judgments")
    by_shard: dict[str, list[Any]] = {}
    for request in (make_request(i) for i in range(100, 1000)):
        by_shard.setdefault(request.cache_key()[:2], []).append(request)
    pair = next(pair for pair in by_shard.values() if len(pair) >= 2)[:2]
    first, second = sorted(pair, key=lambda request: request.cache_key())
    store.put_many([(first, make_answer()), (second, make_answer())])
    store.flush()
    path = store.path_for(first.cache_key())
    reader = JudgmentStore(tmp_path / "judgments")
    assert stored(reader, first).choices[0]["reason"] == "mentions Paris — the capital"  # indexed
    one, two = path.read_bytes().splitlines(keepends=True)
    assert one.startswith(b'{"key":"' + first.cache_key().encode())
    one, two = one.replace(b"the capital", b"the capitals"), two.replace(b"the capital", b"the capita")
    with open(path, "r+b") as file:  # in place, to the same size
        file.write(one + two)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no line is damaged
        assert stored(reader, first).choices[0]["reason"] == "mentions Paris — the capitals"
        assert stored(reader, second).choices[0]["reason"] == "mentions Paris — the capita"


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_a_shard_left_in_a_merge_conflict_says_so_once_naming_its_first_marker_and_reads_both_sides(tmp_path):
    """Without the store's union merge (its .gitattributes gone), two branches that each re-recorded one
    judgment conflict: the shard's marker lines are named once as an unresolved merge conflict, not
    read as judgments, and the judgment on both sides counts from the later line, as after a union."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    store_dir = repo / "judgments"
    request = make_request()
    put(JudgmentStore(store_dir), request, make_answer(True, judged_at="2025-01-01T00:00:00Z"))
    (store_dir / ".gitattributes").unlink()
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "other")
    put(JudgmentStore(store_dir), request, make_answer(False, judged_at="2025-02-01T00:00:00Z"))
    (store_dir / ".gitattributes").unlink()  # written again where missing
    _git(repo, "commit", "-q", "-am", "other")
    _git(repo, "checkout", "-q", "main")
    reworded = JudgeAnswer(({"reason": "names the capital", "useful": True},), Usage(120, 15), "judge-model-2025")
    put(JudgmentStore(store_dir), request, reworded)
    (store_dir / ".gitattributes").unlink()
    _git(repo, "commit", "-q", "-am", "mine")
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    merge = subprocess.run(
        ["git", "merge", "-q", "other"], cwd=repo, env=env, capture_output=True, check=False
    )
    assert merge.returncode != 0  # the conflict
    path = store_dir / f"{request.cache_key()[:2]}.jsonl"
    number = lines_of(path).index("<<<<<<< HEAD") + 1
    with pytest.warns(RagMetricsWarning) as caught:
        answer = JudgmentStore(store_dir).get(request)
    messages = [str(w.message) for w in caught if "merge conflict" in str(w.message)]
    assert messages == [
        f"the judgment store shard {path} holds an unresolved merge conflict (line {number}: '<<<<<<< HEAD'): "
        "its marker lines are skipped and the lines on both sides read, the later line of a judgment on "
        "both sides counting. Resolve it: delete the marker lines and the line that is wrong (the "
        ".gitattributes the store writes, '*.jsonl merge=union', keeps both sides' lines with no conflict)"
    ]
    assert answer is not None and answer.choices[0]["useful"] is False  # the later side's line


def test_the_same_answer_judged_again_leaves_a_line_of_unknown_judged_at_byte_identical(tmp_path):
    """A line giving "judged_at": null (unknown, as a line that leaves it out) was rewritten with the
    new judged_at alone, where a line that leaves it out is kept as it is."""
    request = make_request()
    store = JudgmentStore(tmp_path)
    path = put(store, request, make_answer(True))
    data = json.loads(lines_of(path)[0])
    data["answer"]["judged_at"] = None
    replace_entry(tmp_path, request.cache_key(), dump_line(data).decode())
    before = path.read_bytes()
    again = JudgmentStore(tmp_path)
    again.put_many([(request, make_answer(True, judged_at="2026-11-28T00:00:00Z"))])
    again.flush()
    assert path.read_bytes() == before


def test_the_same_answer_judged_again_leaves_its_line_byte_identical_and_a_new_answer_replaces_it(tmp_path):
    """--rag-cache=refresh with a judge that answers as before (hand labels) rewrote every line for its
    new judged_at alone: a diff of every shard for nothing changed."""
    requests = [make_request(i) for i in range(3)]
    store = JudgmentStore(tmp_path)
    store.put_many([(r, make_answer(True, judged_at="2025-01-01T00:00:00Z")) for r in requests])
    store.flush()
    before = {path.name: path.read_bytes() for path in store.shard_paths()}
    again = JudgmentStore(tmp_path)
    again.put_many([(r, make_answer(True, judged_at="2026-11-28T00:00:00Z")) for r in requests])
    again.flush()
    assert {path.name: path.read_bytes() for path in again.shard_paths()} == before
    again.put_many([(requests[0], make_answer(False, judged_at="2026-11-28T00:00:00Z"))])
    again.flush()
    changed = stored(JudgmentStore(tmp_path), requests[0])
    assert changed.choices[0]["useful"] is False and changed.judged_at == "2026-11-28T00:00:00Z"
    assert stored(JudgmentStore(tmp_path), requests[1]).judged_at == "2025-01-01T00:00:00Z"
