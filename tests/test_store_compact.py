"""The judgment store's compact line form: shared texts written once, defaults left out, old lines still read."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings
from pytest_ragmetrics.errors import JudgmentNotRecorded
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.judge.cache import RagMetricsWarning
from pytest_ragmetrics.judge.store import FORMAT_DEFAULTS, JudgmentStore, dump_line, text_id
from pytest_ragmetrics.testing import conforming_value
from tests.test_store import _git

METHODS = ("context_precision", "context_recall", "context_relevance[graded]", "context_relevance[sentence]")


def chunk(c: int) -> str:
    return (
        f"Article {c} covers storage plan {c} of region {c % 5}. The limit for this plan is {c * 7} GB "
        f"per workspace. Older workspaces keep their previous limit of {c * 3} GB."
    )


def samples(questions: range, chunks: tuple[int, ...] = (0, 1, 2)) -> list[RagSample]:
    return [
        RagSample(
            f"What storage limit applies to plan {q} in region {q % 5}, case {q}?",
            [chunk(c + q % 2) for c in chunks],
            ground_truth=f"The limit is {q * 7} GB per workspace. Older workspaces keep their limit.",
            id=f"s{q}",
        )
        for q in questions
    ]


class Counting:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, request: JudgeRequest) -> Any:
        self.calls.append(request.cache_key())
        return conforming_value(request.schema)


def record(tmp_path: Path, store_dir: Path, batch: list[RagSample], judge: Any = None) -> Any:
    settings = Settings(cache_dir=str(tmp_path / "cache" / os.urandom(4).hex()), store_dir=str(store_dir))
    with Evaluator(settings, judge=ScriptedJudge(judge or Counting())) as evaluator:
        return evaluator.evaluate(batch, METHODS)


def replay(tmp_path: Path, store_dir: Path, batch: list[RagSample]) -> Any:
    def never(request: JudgeRequest) -> Any:
        raise AssertionError("replay must not judge")

    cache = tmp_path / "empty-cache" / os.urandom(4).hex()
    settings = Settings(cache_dir=str(cache), store_dir=str(store_dir), cache="replay")
    with Evaluator(settings, judge=ScriptedJudge(never)) as evaluator:
        return evaluator.evaluate(batch, METHODS)


def scores(result: Any) -> dict[str, dict[str, float]]:
    return {sid: {name: r.score for name, r in rs.items()} for sid, rs in result.results.items()}


def lines(store_dir: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for p in sorted(store_dir.glob("*.jsonl")) for line in p.read_text().splitlines()
    ]


def full_form_copy(source: Path, target: Path) -> dict[str, dict[str, Any]]:
    """The store at ``source`` written in the full line form (all fields, inline inputs) at ``target``."""
    records = {record["key"]: record for record in JudgmentStore(source).records()}
    by_shard: dict[str, list[bytes]] = {}
    for key, data in records.items():
        by_shard.setdefault(key[:2], []).append(dump_line(data))
    target.mkdir(parents=True)
    for name, shard in by_shard.items():
        (target / f"{name}.jsonl").write_bytes(b"".join(line + b"\n" for line in sorted(shard)))
    return records


def test_shared_texts_are_written_once_and_defaults_left_out(tmp_path):
    store_dir = tmp_path / "judgments"
    record(tmp_path, store_dir, samples(range(4)))
    found = lines(store_dir)
    texts = {line["text"]: line for line in found if "text" in line}
    judgments = [line for line in found if "key" in line]
    assert len(texts) == len({t["text"] for t in texts.values()})  # each text once
    # Each chunk (3 per sample, 4 distinct here), question and reference is a text line of its own.
    values = {t.get("value") for t in texts.values()}
    assert "What storage limit applies to plan 0 in region 0, case 0?" in values
    for line in judgments:
        # temperature 0.0, seed 0, n 1 are left out (graded relevance samples at 0.1: kept)
        assert all(line[name] != FORMAT_DEFAULTS[name] for name in set(FORMAT_DEFAULTS) & set(line))
        assert "n" not in line and "seed" not in line
        assert "schema_name" not in line
        assert "$text" in json.dumps(line["inputs"])
        if line["kind"] == "context_relevance_sentences":
            # The chunk is its sentences joined: only the sentences, readable and numbered, remain.
            assert "chunk" not in line["inputs"] and "sentence_count" not in line["inputs"]
            assert all(isinstance(s, str) for s in line["inputs"]["sentences"])
    # A chunk whose sentence judgment is recorded names that judgment instead of repeating the text.
    sources = [t for t in texts.values() if "chunk_of" in t]
    assert len(sources) == 4
    store = JudgmentStore(store_dir)
    for line in sources:
        assert store.text(line["text"]) in {chunk(c) for c in range(4)}
    for text in texts.values():  # every text matches its id
        assert text_id(store.text(text["text"])) == text["text"]


def test_compact_lines_read_exactly_as_the_full_form_does_and_replay(tmp_path):
    store_dir = tmp_path / "judgments"
    first = record(tmp_path, store_dir, samples(range(6)))
    records = full_form_copy(store_dir, tmp_path / "full")
    compact, full = JudgmentStore(store_dir), JudgmentStore(tmp_path / "full")
    assert compact.keys() == full.keys() == set(records)
    for key in records:
        assert compact.read_json(key) == full.read_json(key) == records[key]
    sentence = next(r for r in records.values() if r["kind"] == "context_relevance_sentences")
    assert sentence["inputs"]["chunk"] == " ".join(sentence["inputs"]["sentences"])
    assert sentence["schema_name"] == sentence["kind"] and sentence["n"] == 1
    assert sum(p.stat().st_size for p in compact.shard_paths()) < 0.8 * sum(
        p.stat().st_size for p in full.shard_paths()
    )
    assert scores(replay(tmp_path, store_dir, samples(range(6)))) == scores(first)
    assert scores(replay(tmp_path, tmp_path / "full", samples(range(6)))) == scores(first)


def test_a_shard_mixing_both_forms_reads_identically(tmp_path):
    store_dir = tmp_path / "judgments"
    record(tmp_path, store_dir, samples(range(6)))
    records = full_form_copy(store_dir, tmp_path / "full")
    for i, path in enumerate(sorted(store_dir.glob("*.jsonl"))):
        full = tmp_path / "full" / path.name
        if i % 2 and full.exists():  # every other shard's judgments back in the full form
            texts = [line for line in path.read_text().splitlines() if line.startswith('{"text"')]
            path.write_text("".join(line + "\n" for line in texts) + full.read_text())
    with_old = (store_dir / sorted(records)[0][:2]).with_suffix(".jsonl")
    with_old.write_bytes(with_old.read_bytes() + (tmp_path / "full" / with_old.name).read_bytes())
    mixed = JudgmentStore(store_dir)
    assert mixed.keys() == set(records)
    for key, data in records.items():
        assert mixed.read_json(key) == data
    assert scores(replay(tmp_path, store_dir, samples(range(6)))) == scores(
        replay(tmp_path, tmp_path / "full", samples(range(6)))
    )


def test_re_recording_changes_no_byte_and_a_hand_edited_answer_wins(tmp_path):
    store_dir = tmp_path / "judgments"
    record(tmp_path, store_dir, samples(range(3)))
    before = {p.name: p.read_bytes() for p in store_dir.glob("*.jsonl")}
    store = JudgmentStore(store_dir)
    store.write_records(list(store.records()))
    store.flush()
    assert {p.name: p.read_bytes() for p in store_dir.glob("*.jsonl")} == before
    graded = next(line for line in lines(store_dir) if line.get("kind") == "context_relevance_graded")
    path = store_dir / f"{graded['key'][:2]}.jsonl"
    edited = path.read_text().replace('"rating":2', '"rating":0', 1)
    assert edited != path.read_text()
    path.write_text(edited)
    result = replay(tmp_path, store_dir, samples(range(3)))
    assert min(result.scores("context_relevance[graded]")) < 1.0


def test_a_missing_text_is_a_miss_with_a_warning_judged_again_or_a_replay_error(tmp_path):
    store_dir = tmp_path / "judgments"
    record(tmp_path, store_dir, samples(range(2)))
    question = "What storage limit applies to plan 1 in region 1, case 1?"
    tid = text_id(question)
    path = store_dir / f"{tid[:2]}.jsonl"
    path.write_text("".join(line + "\n" for line in path.read_text().splitlines() if tid not in line))
    users = [line["key"] for line in lines(store_dir) if tid in json.dumps(line.get("inputs"))]
    assert users
    with pytest.warns(RagMetricsWarning, match=f"input text '{tid}'"):
        assert JudgmentStore(store_dir).read_json(users[0]) is None
    replaying = pytest.warns(RagMetricsWarning, match="replay treats the judgment as not recorded")
    with replaying, pytest.raises(JudgmentNotRecorded):
        replay(tmp_path, store_dir, samples(range(1, 2)))
    judge = Counting()
    with pytest.warns(RagMetricsWarning, match="judged again"):
        record(tmp_path, store_dir, samples(range(2)), judge)
    assert sorted(judge.calls) == sorted(users)  # only the judgments that lost their text
    assert JudgmentStore(store_dir).text(tid) == question  # written again
    replay(tmp_path, store_dir, samples(range(2)))


def test_migrate_rewrites_a_full_form_store_compactly_losing_nothing_and_again_changes_nothing(tmp_path):
    store_dir = tmp_path / "judgments"
    first = record(tmp_path, store_dir, samples(range(8)))
    records = full_form_copy(store_dir, tmp_path / "full")
    old = tmp_path / "full"
    size = sum(p.stat().st_size for p in old.glob("*.jsonl"))
    result = JudgmentStore(old).migrate()
    assert result.converted == len(records) and not result.kept
    assert sum(p.stat().st_size for p in old.glob("*.jsonl")) < 0.8 * size
    migrated = JudgmentStore(old)
    assert {key: migrated.read_json(key) for key in records} == records
    assert not [line for line in lines(old) if "key" in line and line.get("temperature") == 0.0]
    before = {p.name: p.read_bytes() for p in old.glob("*.jsonl")}
    again = JudgmentStore(old).migrate()
    assert (again.converted, again.moved, again.compacted) == (0, 0, 0)
    assert {p.name: p.read_bytes() for p in old.glob("*.jsonl")} == before
    assert scores(replay(tmp_path, old, samples(range(8)))) == scores(first)


def test_prune_leaves_no_judgment_without_its_texts(tmp_path):
    store_dir = tmp_path / "judgments"
    record(tmp_path, store_dir, samples(range(6)))
    store = JudgmentStore(store_dir)
    everything = {r["key"]: r for r in store.records()}
    # Remove every sentence judgment: the chunk texts that named them are written out in full.
    sentences = {k for k, r in everything.items() if r["kind"] == "context_relevance_sentences"}
    assert any("chunk_of" in line for line in lines(store_dir))
    store.prune(set(everything) - sentences)
    assert not any("chunk_of" in line for line in lines(store_dir))
    reader = JudgmentStore(store_dir)
    for key in set(everything) - sentences:
        assert reader.read_json(key) == everything[key]
    texts_before = [line["text"] for line in lines(store_dir) if "text" in line]
    # Texts stay unless asked (a branch may refer to them); asked, only unused texts go.
    graded = sorted(k for k, r in everything.items() if r["kind"] == "context_relevance_graded")[:1]
    reader.prune(set(graded))
    assert [line["text"] for line in lines(store_dir) if "text" in line] == texts_before
    assert len(JudgmentStore(store_dir).drop_unused_texts(dry_run=True)) == len(texts_before) - 2
    assert [line["text"] for line in lines(store_dir) if "text" in line] == texts_before
    JudgmentStore(store_dir).drop_unused_texts()
    left = lines(store_dir)
    assert len([line for line in left if "text" in line]) == 2  # its question and its chunk
    assert JudgmentStore(store_dir).read_json(graded[0]) == everything[graded[0]]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_branches_recording_judgments_that_share_texts_merge_without_conflicts_and_replay(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    store_dir = repo / "judgments"
    base = samples(range(2))
    record(tmp_path, store_dir, base)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "checkout", "-q", "-b", "other")
    # Both branches judge new questions about the same chunks (and base's): the same texts.
    theirs = samples(range(10, 14))
    record(tmp_path, store_dir, theirs)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "other")
    _git(repo, "checkout", "-q", "main")
    ours = samples(range(20, 24), chunks=(0, 1, 2, 3))
    record(tmp_path, store_dir, ours)
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "mine")
    _git(repo, "merge", "-q", "--no-edit", "other")  # a conflict would fail here
    everything = base + theirs + ours
    replay(tmp_path, store_dir, everything)
    merged = JudgmentStore(store_dir)
    merged.compact()
    ids = [line["text"] for line in lines(store_dir) if "text" in line and "value" in line]
    assert len(ids) == len(set(ids))
    replay(tmp_path, store_dir, everything)
