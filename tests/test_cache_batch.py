"""Reading the disk cache for many requests at once (``judge_many``): the warm run's read path.

Every evaluation asking in one turn of the event loop is served from one SQLite query; what it
serves must be exactly what one read per key serves: the same answers, the same counters, damaged
entries dropped with a warning, the committed store still winning over the cache.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import diskcache
import pytest
from judge_requests import make_request

from pytest_ragmetrics.errors import JudgmentNotRecorded
from pytest_ragmetrics.judge import cache as cache_module
from pytest_ragmetrics.judge.base import JudgeAnswer, JudgeRequest, ScriptedJudge
from pytest_ragmetrics.judge.cache import CachedJudge, RagMetricsWarning, ReadOnlyDiskCache
from pytest_ragmetrics.judge.store import JudgmentStore

LONG_REASON = "x" * 40_000  # diskcache keeps values this long in a file beside its database


def verdict(request: JudgeRequest) -> dict[str, Any]:
    text = request.inputs["chunk"]
    reason = LONG_REASON if text == "chunk 3" else f"about {text}"
    return {"reason": reason, "useful": text.endswith(("0", "2", "4", "6", "8"))}


def never(request: JudgeRequest) -> dict[str, Any]:
    raise AssertionError(f"the judge was asked for {request.label}")


def judge_for(
    tmp_path: Path,
    script: Callable[[JudgeRequest], Any] = never,
    mode: str = "readwrite",
    store: bool = False,
) -> CachedJudge:
    return CachedJudge(
        lambda: ScriptedJudge(script),
        mode=mode,  # type: ignore[arg-type]
        cache_dir=tmp_path / "cache",
        store=JudgmentStore(tmp_path / "judgments") if store else None,
    )


def in_groups(
    judge: CachedJudge, requests: Sequence[JudgeRequest], size: int = 3
) -> list[JudgeAnswer | None]:
    """``judge_many`` for groups of ``size`` requests at once, as concurrent evaluations ask."""

    async def go() -> list[JudgeAnswer | None]:
        try:
            groups = [requests[i : i + size] for i in range(0, len(requests), size)]
            answered = await asyncio.gather(*(judge.judge_many(group) for group in groups))
            return [answer for group in answered for answer in group]
        finally:
            await judge.aclose()

    return asyncio.run(go())


def one_by_one(judge: CachedJudge, requests: Sequence[JudgeRequest]) -> list[JudgeAnswer]:
    async def go() -> list[JudgeAnswer]:
        try:
            return [await judge.judge(r) for r in requests]
        finally:
            await judge.aclose()

    return asyncio.run(go())


@pytest.fixture
def count_reads(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The keys of every batch read (``read_many`` call)."""
    reads: list[list[str]] = []
    original = cache_module.read_many

    def counting(cache: Any, keys: Sequence[str]) -> dict[str, Any] | None:
        reads.append(list(keys))
        return original(cache, keys)

    monkeypatch.setattr(cache_module, "read_many", counting)
    return reads


def test_concurrent_evaluations_are_served_from_one_read_with_what_single_reads_serve(tmp_path, count_reads):
    requests = [make_request(i) for i in range(12)]
    in_groups(judge_for(tmp_path, verdict), requests)  # record them (the cache was empty)

    single = judge_for(tmp_path)
    expected = one_by_one(single, requests)
    count_reads.clear()
    warm = judge_for(tmp_path)
    answers = in_groups(warm, requests)
    assert len(count_reads) == 1 and sorted(count_reads[0]) == sorted(r.cache_key() for r in requests)
    assert [a.choices for a in answers if a] == [a.choices for a in expected]
    assert [a.usage for a in answers if a] == [a.usage for a in expected]
    assert answers[3] is not None and answers[3].choices[0]["reason"] == LONG_REASON  # read from its file
    assert {a.source for a in answers if a} == {"cache"}
    assert (
        (warm.stats.cache_hits, warm.stats.store_hits)
        == (12, 0)
        == (
            single.stats.cache_hits,
            single.stats.store_hits,
        )
    )
    assert warm.stats.tokens_saved == single.stats.tokens_saved
    assert warm.used_keys == single.used_keys == {r.cache_key() for r in requests}


def test_a_repeated_key_is_read_once_and_counted_per_request(tmp_path, count_reads):
    requests = [make_request(i) for i in range(3)]
    in_groups(judge_for(tmp_path, verdict), requests)
    count_reads.clear()
    warm = judge_for(tmp_path)
    answers = in_groups(warm, [*requests, *requests])  # sentence and binary relevance share keys
    assert [sorted(keys) for keys in count_reads] == [sorted(r.cache_key() for r in requests)]
    assert len(answers) == 6 and all(a is not None and a.source == "cache" for a in answers)
    assert warm.stats.cache_hits == 6


def _damage(tmp_path: Path, request: JudgeRequest, value: Any) -> None:
    with diskcache.Cache(str(tmp_path / "cache")) as cache:
        cache.set(request.cache_key(), value)


@pytest.mark.parametrize(
    "damage",
    [
        "not json {",
        json.dumps({"key": "another key", "answer": {"choices": [{"reason": "r", "useful": True}]}}),
        {"a pickled": "object"},  # diskcache pickles what is not text: never unpickled here
    ],
    ids=["not-json", "wrong-key", "pickled"],
)
def test_a_damaged_entry_in_a_read_is_dropped_with_one_warning_and_the_rest_served(
    tmp_path, count_reads, damage
):
    requests = [make_request(i) for i in range(6)]
    in_groups(judge_for(tmp_path, verdict), requests)
    _damage(tmp_path, requests[1], damage)
    _damage(tmp_path, requests[4], damage)
    count_reads.clear()
    replay = judge_for(tmp_path, mode="replay")
    with (
        pytest.warns(RagMetricsWarning, match="dropped a damaged entry") as caught,
        pytest.raises(JudgmentNotRecorded),
    ):
        in_groups(replay, requests)
    assert len([w for w in caught if "damaged" in str(w.message)]) == 1
    assert len(count_reads) == 1  # one read for all six, the damaged ones included

    # Dropped from the cache: a run that can judge pays for those two only, and records them again.
    judge = judge_for(tmp_path, verdict)
    answers = in_groups(judge, requests)
    assert [a.source if a else None for a in answers] == [
        "cache",
        "judge",
        "cache",
        "cache",
        "judge",
        "cache",
    ]
    assert judge.stats.cache_hits == 4
    again = judge_for(tmp_path)
    assert {a.source for a in in_groups(again, requests) if a} == {"cache"}
    assert again.stats.cache_hits == 6


def test_the_store_still_wins_over_a_cache_entry_read_in_a_batch(tmp_path):
    requests = [make_request(i) for i in range(4)]
    in_groups(judge_for(tmp_path, verdict, store=True), requests)
    # A reviewed edit of the store: the verdict of request 2 is corrected.
    corrected = JudgeAnswer(
        choices=({"reason": "corrected in review", "useful": False},), model="judge-model"
    )
    reviewed = JudgmentStore(tmp_path / "judgments")
    reviewed.put(requests[2], corrected)
    reviewed.flush()  # the replaced line goes (unflushed, the later-judged line would count)

    warm = judge_for(tmp_path, store=True, mode="replay")
    answers = in_groups(warm, requests, size=2)
    assert answers[2] is not None and answers[2].choices == corrected.choices
    assert (warm.stats.cache_hits, warm.stats.store_hits) == (0, 4)  # the store is read first


def test_a_cancelled_evaluation_does_not_cancel_the_read_others_wait_for(tmp_path):
    requests = [make_request(i) for i in range(4)]
    in_groups(judge_for(tmp_path, verdict), requests)
    warm = judge_for(tmp_path)

    async def go() -> list[JudgeAnswer | None]:
        first = asyncio.ensure_future(warm.judge_many(requests[:2]))
        second = asyncio.ensure_future(warm.judge_many(requests[2:]))
        await asyncio.sleep(0)  # both are waiting for the read now
        first.cancel()
        try:
            return await second
        finally:
            await warm.aclose()

    answers = asyncio.run(go())
    assert [a.source if a else None for a in answers] == ["cache", "cache"]


def test_the_read_only_reader_reads_many_as_it_reads_one(tmp_path):
    requests = [make_request(i) for i in range(5)]
    in_groups(judge_for(tmp_path, verdict), requests)
    keys = [r.cache_key() for r in requests] + ["no such key"]
    reader = ReadOnlyDiskCache(tmp_path / "cache")
    try:
        many = reader.get_many(keys)
        assert many == {key: reader.get(key) for key in keys if reader.get(key) is not None}
        assert len(many) == 5 and LONG_REASON in str(many[requests[3].cache_key()])
    finally:
        reader.close()
