"""CachedJudge: cache modes, disk cache shared by processes, degraded caches, secrets never on disk.

The judge is the real OpenAIJudge over HTTP against FakeJudgeServer; the disk cache is real diskcache.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import sys
import textwrap
import threading
import warnings
from pathlib import Path
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.errors import InvalidJudgeAnswer, JudgmentNotRecorded, RagMetricsWarning
from pytest_ragmetrics.judge.base import Judge, JudgeAnswer, JudgeRequest, ScriptedJudge, Usage
from pytest_ragmetrics.judge.cache import CachedJudge, CacheMode
from pytest_ragmetrics.judge.last_run import LastRun, read_last_run, write_last_run
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.testing import FakeJudgeServer

SECRET_KEY = "sk-test-NEVER-ON-DISK-8c1f"


class Dirs:
    def __init__(self, tmp_path: Path) -> None:
        self.cache = tmp_path / "cache"
        self.store = tmp_path / "judgments"


@pytest.fixture
def dirs(tmp_path: Path) -> Dirs:
    return Dirs(tmp_path)


def cached_judge(
    server: FakeJudgeServer | None,
    dirs: Dirs,
    mode: CacheMode = "readwrite",
    *,
    with_store: bool = True,
    **judge_kwargs: Any,
) -> CachedJudge:

    stats = JudgeStats()

    def make_inner() -> Judge:
        if server is None:
            raise AssertionError("the judge must not be created in this test")
        options: dict[str, Any] = {
            "api_key": SECRET_KEY,
            "base_url": server.base_url,
            "timeout": 5.0,
            "max_retries": 1,
            "retry_backoff": 0.01,
            "stats": stats,
        }
        options.update(judge_kwargs)
        return OpenAIJudge(**options)

    return CachedJudge(
        make_inner,
        mode=mode,
        cache_dir=dirs.cache,
        store=JudgmentStore(dirs.store) if with_store else None,
        stats=stats,
    )


def run(judge: CachedJudge, *requests: JudgeRequest) -> list[JudgeAnswer]:
    async def go() -> list[JudgeAnswer]:
        try:
            return list(await asyncio.gather(*(judge.judge(r) for r in requests)))
        finally:
            await judge.aclose()

    return asyncio.run(go())


def test_second_run_makes_no_requests(fake_judge_server, dirs):
    requests = [make_request(i) for i in range(5)]
    first = run(cached_judge(fake_judge_server, dirs), *requests)
    assert fake_judge_server.request_count == 5
    assert {a.source for a in first} == {"judge"}

    again = cached_judge(fake_judge_server, dirs)
    second = run(again, *requests)
    assert fake_judge_server.request_count == 5
    assert {a.source for a in second} == {"store"}  # the committed record is read first
    assert [a.choices for a in second] == [a.choices for a in first]
    assert again.stats.store_hits == 5
    assert again.stats.calls == 0
    assert again.stats.tokens_saved == sum(a.usage.total_tokens for a in first)
    assert again.used_keys == {r.cache_key() for r in requests}

    cache_only = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)
    third = run(cache_only, *requests)
    assert {a.source for a in third} == {"cache"}
    assert cache_only.stats.cache_hits == 5
    assert [a.choices for a in third] == [a.choices for a in first]


def test_store_serves_when_the_cache_is_gone_without_copying_itself_into_it(
    fake_judge_server, dirs, tmp_path
):
    request = make_request()
    run(cached_judge(fake_judge_server, dirs), request)
    dirs.cache = tmp_path / "fresh-cache"

    judge = cached_judge(fake_judge_server, dirs)
    [answer] = run(judge, request)
    assert answer.source == "store"
    assert judge.stats.store_hits == 1
    assert fake_judge_server.request_count == 1

    # The store is the record: a fresh clone replaying it does not also fill a cache.
    no_store = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)
    with pytest.raises(JudgmentNotRecorded):
        run(no_store, request)


def test_replay_never_creates_the_judge_and_serves_recorded_answers(fake_judge_server, dirs):
    requests = [make_request(i) for i in range(3)]
    run(cached_judge(fake_judge_server, dirs), *requests)
    replay = cached_judge(None, dirs, mode="replay")
    answers = run(replay, *requests)
    assert len(answers) == 3
    assert fake_judge_server.request_count == 3


def test_replay_miss_names_the_label_and_how_to_record(dirs):
    replay = cached_judge(None, dirs, mode="replay")
    with pytest.raises(JudgmentNotRecorded) as info:
        run(replay, make_request(7))
    message = str(info.value)
    assert "test_rag[sample-7] chunk 1" in message
    assert "RAGMETRICS_CACHE=readwrite" in message  # built by hand: the wording that works everywhere
    assert str(dirs.store) in message
    assert "cut short" not in message
    assert replay.stats.errors == 1


def test_replay_miss_names_the_line_its_shard_ends_in_cut_short(fake_judge_server, dirs):
    """A shard's last line cut short (a killed write, a truncated copy or merge) is not read: the
    miss says where the judgment went, and whether the line cut short is this judgment's."""
    recorded, other = make_request(7), make_request(8)
    run(cached_judge(fake_judge_server, dirs), recorded, other)
    path = JudgmentStore(dirs.store).path_for(recorded.cache_key())
    whole = path.read_bytes()
    path.write_bytes(whole[:-41])  # the newline and 40 bytes of the answer gone
    shutil.rmtree(dirs.cache)  # a fresh checkout: the store alone
    with pytest.raises(JudgmentNotRecorded) as info:
        run(cached_judge(None, dirs, mode="replay"), recorded)
    number = whole.count(b"\n")  # the last line's
    start = whole.rfind(b"\n", 0, len(whole) - 1) + 1
    assert (
        f"The shard {path} ends in this judgment's line cut short (line {number}, "
        f"{len(whole) - 41 - start:,} bytes with no end: "
        f"'{{\"key\":\"{recorded.cache_key()[:52]}'…), which is not read: restore the whole line "
        "(from version control, say) or record the judgment again."
    ) in str(info.value)
    # Not recorded either, in the shard of a judgment that ends in its whole line: nothing to say.
    shard = other.cache_key()[:2]
    missing = next(r for r in map(make_request, range(9, 3000)) if r.cache_key()[:2] == shard)
    assert shard != recorded.cache_key()[:2]
    with pytest.raises(JudgmentNotRecorded) as info:
        run(cached_judge(None, dirs, mode="replay"), missing)
    assert "cut short" not in str(info.value)


@pytest.mark.parametrize("change", [{"model": "other-model"}, {"prompt_version": "2"}])
def test_a_changed_model_or_prompt_version_misses(fake_judge_server, dirs, change):
    run(cached_judge(fake_judge_server, dirs), make_request())
    run(cached_judge(fake_judge_server, dirs), make_request(**change))
    assert fake_judge_server.request_count == 2
    with pytest.raises(JudgmentNotRecorded):
        run(cached_judge(None, dirs, mode="replay"), make_request(**change, seed=1))


def test_refresh_judges_again_and_overwrites_both(fake_judge_server, dirs):
    reasons = iter(["first", "second"])
    fake_judge_server.responder = lambda body: {"reason": next(reasons), "useful": True}
    request = make_request()
    run(cached_judge(fake_judge_server, dirs), request)
    answers = run(cached_judge(fake_judge_server, dirs, mode="refresh"), request, request)
    assert [a.choices[0]["reason"] for a in answers] == ["second", "second"]
    assert fake_judge_server.request_count == 2  # the duplicate in the refresh run was judged once
    [replayed] = run(cached_judge(None, dirs, mode="replay"), request)
    assert replayed.choices[0]["reason"] == "second"
    stored = JudgmentStore(dirs.store).get(request)
    assert stored is not None and stored.choices[0]["reason"] == "second"


def test_off_reads_and_writes_nothing(fake_judge_server, dirs):
    request = make_request()
    run(cached_judge(fake_judge_server, dirs), request)
    run(cached_judge(fake_judge_server, dirs, mode="off"), request)
    assert fake_judge_server.request_count == 2
    dirs.cache, dirs.store = dirs.cache.parent / "c2", dirs.store.parent / "s2"
    run(cached_judge(fake_judge_server, dirs, mode="off"), request)
    assert not dirs.cache.exists()
    assert not dirs.store.exists()


def test_invalid_answers_are_never_recorded(fake_judge_server, dirs):
    fake_judge_server.responder = lambda body: {"reason": "r", "useful": "perhaps"}
    judge = cached_judge(fake_judge_server, dirs, max_reasks=1)
    with pytest.raises(InvalidJudgeAnswer, match=r"test_rag\[sample-0\] chunk 1"):
        run(judge, make_request())
    assert fake_judge_server.request_count == 2
    assert judge.stats.reasks == 1
    assert JudgmentStore(dirs.store).keys() == set()
    with pytest.raises(JudgmentNotRecorded):
        run(cached_judge(None, dirs, mode="replay"), make_request())


def test_an_inner_judge_that_skips_validation_cannot_poison_the_cache(dirs):
    class Careless:
        async def judge(self, request: JudgeRequest) -> JudgeAnswer:
            return JudgeAnswer(choices=({"useful": 1},))

    judge = CachedJudge(Careless, cache_dir=dirs.cache, store=JudgmentStore(dirs.store))
    with pytest.raises(InvalidJudgeAnswer):
        run(judge, make_request())
    assert JudgmentStore(dirs.store).keys() == set()


def test_concurrent_duplicates_are_judged_once(fake_judge_server, dirs):
    fake_judge_server.delay(0.2)
    judge = cached_judge(fake_judge_server, dirs)
    answers = run(judge, *([make_request()] * 10))
    assert fake_judge_server.request_count == 1
    assert len({a.choices[0]["reason"] for a in answers}) == 1


def test_a_failure_reaches_every_waiter_of_a_duplicate(fake_judge_server, dirs):
    fake_judge_server.delay(0.1)
    fake_judge_server.responder = lambda body: "no verdict"
    judge = cached_judge(fake_judge_server, dirs, max_reasks=0)

    async def go() -> list[Any]:
        try:
            return await asyncio.gather(
                *(judge.judge(make_request()) for _ in range(3)), return_exceptions=True
            )
        finally:
            await judge.aclose()

    results = asyncio.run(go())
    assert all(isinstance(r, InvalidJudgeAnswer) for r in results)
    assert fake_judge_server.request_count == 1


def test_two_processes_writing_one_cache_lose_nothing(tmp_path):
    script = textwrap.dedent(
        """
        import asyncio, sys
        from pytest_ragmetrics.judge.base import JudgeRequest, ScriptedJudge
        from pytest_ragmetrics.judge.cache import CachedJudge

        SCHEMA = {"type": "object", "properties": {"useful": {"type": "boolean"}},
                  "required": ["useful"], "additionalProperties": False}
        proc, cache_dir = sys.argv[1], sys.argv[2]

        async def main():
            judge = CachedJudge(lambda: ScriptedJudge(lambda r: {"useful": True}), cache_dir=cache_dir)
            for i in range(200):
                request = JudgeRequest(kind="context_precision", prompt_version="1", model="m",
                    messages=({"role": "user", "content": "x"},), schema_name="v", schema=SCHEMA,
                    inputs={"proc": proc, "i": i})
                await judge.judge(request)
            await judge.aclose()

        asyncio.run(main())
        """
    )
    cache_dir = tmp_path / "shared-cache"
    procs = [
        subprocess.Popen([sys.executable, "-W", "error", "-c", script, str(p), str(cache_dir)])
        for p in range(2)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]

    import diskcache

    with diskcache.Cache(str(cache_dir)) as cache:
        entries = [json.loads(cache[key]) for key in cache.iterkeys()]
    assert len(entries) == 400
    assert all(e["answer"]["choices"] == [{"useful": True}] for e in entries)


def test_a_cache_that_is_not_a_database_is_moved_aside_once_and_a_fresh_one_started(fake_judge_server, dirs):
    dirs.cache.mkdir()
    (dirs.cache / "cache.db").write_bytes(b"this is not a sqlite database" * 100)
    judge = cached_judge(fake_judge_server, dirs)
    with pytest.warns(RagMetricsWarning, match="was not a database") as record:
        answers = run(judge, make_request(1), make_request(2))
    assert len(answers) == 2
    assert len(record) == 1 and "cache.db.unusable" in str(record[0].message)
    assert (dirs.cache / "cache.db.unusable").read_bytes().startswith(b"this is not")
    assert len(JudgmentStore(dirs.store)) == 2
    fresh = CachedJudge(lambda: pytest.fail("no judge"), mode="replay", cache_dir=dirs.cache)  # no store
    assert [a.source for a in run(fresh, make_request(1), make_request(2))] == ["cache", "cache"]


def test_a_cache_damaged_past_its_first_page_is_moved_aside_and_a_fresh_one_started(fake_judge_server, dirs):
    """A cache.db whose header is sound but whose tables are garbled: the next run starts afresh by
    itself instead of judging everything again without a cache, run after run."""
    import diskcache

    with diskcache.Cache(str(dirs.cache)) as old:
        for i in range(100):
            old.set(f"old-{i}", "x" * 500)
    database = dirs.cache / "cache.db"
    size = database.stat().st_size
    with database.open("r+b") as handle:
        handle.seek(4096)  # the first page (the header, the schema) stays; every later one is garbled
        handle.write(b"\x5a" * (size - 4096))
    judge = cached_judge(fake_judge_server, dirs)
    with pytest.warns(RagMetricsWarning, match="was not a database") as record:
        answers = run(judge, make_request(1), make_request(2))
    assert [a.source for a in answers] == ["judge", "judge"]
    assert len(record) == 1 and "cache.db.unusable" in str(record[0].message)
    assert (dirs.cache / "cache.db.unusable").stat().st_size == size
    fresh = CachedJudge(lambda: pytest.fail("no judge"), mode="replay", cache_dir=dirs.cache)  # no store
    assert [a.source for a in run(fresh, make_request(1), make_request(2))] == ["cache", "cache"]


def test_processes_that_find_the_cache_not_a_database_at_once_all_end_on_one_fresh_cache(dirs, monkeypatch):
    """Two processes find cache.db not a database as they start (xdist workers): one moves it aside
    and starts a fresh cache, and the other opens that one, however their steps interleave. Here the
    second process comes in just before the first moves the damaged file: it moved the damaged file
    and started a fresh cache, and the first then moved that fresh cache aside in turn and started
    another, the second writing its answers where no other process looked."""
    import os

    dirs.cache.mkdir()
    (dirs.cache / "cache.db").write_bytes(b"this is not a sqlite database" * 100)
    first = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache)
    second = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache)
    replace = os.replace
    opened: list[Any] = []

    def second_comes_in(source: Any, target: Any) -> None:
        if not opened:
            opened.append(None)
            meanwhile = threading.Thread(target=lambda: opened.append(second._disk()))
            meanwhile.start()
            meanwhile.join(1.0)  # (it waits for the first to be done, with the fix)
        replace(source, target)

    monkeypatch.setattr(os, "replace", second_comes_in)
    with pytest.warns(RagMetricsWarning, match="was not a database"):
        cache = first._disk()
        while len(opened) < 2:
            threading.Event().wait(0.01)
    monkeypatch.undo()
    other = opened[1]
    assert cache is not None and other is not None
    assert (dirs.cache / "cache.db.unusable").read_bytes().startswith(b"this is not")
    cache.set("written by one", "seen by the other")
    assert other.get("written by one") == "seen by the other"
    first.close_cache()
    second.close_cache()


def test_judgments_lost_with_a_store_deleted_during_the_run_fail_it_saying_so(fake_judge_server, dirs):
    """The store's directory deleted between two recordings (a checkout, a clean-up): the first
    judgment is gone from it, and the run is told so, instead of ending as if all were recorded."""
    import shutil

    judge = cached_judge(fake_judge_server, dirs)
    first = make_request(1)
    second = next(r for r in (make_request(i) for i in range(2, 2000)) if r.cache_key()[:2] != first.cache_key()[:2])

    async def go() -> None:
        try:
            await judge.judge(first)  # recorded in the store when it returns
            shutil.rmtree(dirs.store)
            await judge.judge(second)
        finally:
            await judge.aclose()

    asyncio.run(go())
    assert JudgmentStore(dirs.store).keys() == {second.cache_key()}
    assert judge.stats.unrecorded == 1
    assert judge.stats.unrecorded_reason is not None and "are gone from it" in judge.stats.unrecorded_reason
    # The cache has it: a run that follows records it in the store again, without asking the judge.
    again = cached_judge(None, dirs)
    assert [a.source for a in run(again, first)] == ["cache"]
    assert first.cache_key() in JudgmentStore(dirs.store)


def test_unwritable_cache_dir_warns_and_the_run_goes_on(fake_judge_server, dirs):
    dirs.cache.parent.mkdir(parents=True, exist_ok=True)
    dirs.cache.write_text("a file where the cache directory should be")
    judge = cached_judge(fake_judge_server, dirs)
    with pytest.warns(RagMetricsWarning, match="cannot be used") as record:
        [answer] = run(judge, make_request())
    assert answer.source == "judge"
    # Deleting "the directory" or clearing it, the advice for a damaged cache, is no remedy for a file.
    message = str(record[0].message)
    assert message.endswith("It is not a directory: set the cache directory to one (rag_cache_dir).")
    assert "cache clear" not in message


@pytest.mark.parametrize("with_store", [True, False])
def test_a_cache_on_a_full_disk_warns_that_the_disk_is_full_not_to_clear_the_cache(
    fake_judge_server, dirs, with_store
):
    """SQLite's own "database or disk is full": the disk may be full of anything but the cache."""
    dirs.cache.mkdir(parents=True)
    (dirs.cache / "cache.db").symlink_to("/dev/full")  # every write fails with ENOSPC
    judge = cached_judge(fake_judge_server, dirs, with_store=with_store)
    with pytest.warns(RagMetricsWarning, match="cannot be used") as record:
        [answer] = run(judge, make_request())
    assert answer.source == "judge"
    [message] = [str(w.message) for w in record]
    assert message.startswith(
        f"the judgment cache at {dirs.cache} cannot be used (cannot open it for writing: OperationalError: "
        "database or disk is full): the disk it is on is full. Continuing without it; "
    )
    kept = (
        f"this run's new judgments are recorded in the judgment store at {dirs.store} only, not cached"
        if with_store
        else "this run's new judgments are not cached: the next run asks the judge for them again"
    )
    assert message.endswith(f"{kept}. Free space on that disk.")
    assert "cache clear" not in message and "Delete" not in message


def test_replay_with_an_unusable_cache_and_no_store_explains_both(dirs):
    dirs.cache.mkdir()
    (dirs.cache / "cache.db").write_bytes(b"garbage" * 100)
    judge = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)
    with pytest.warns(RagMetricsWarning), pytest.raises(JudgmentNotRecorded) as info:
        run(judge, make_request())
    message = str(info.value)
    assert "the cache was unusable" in message
    assert "RAGMETRICS_CACHE=readwrite" in message


def test_api_key_never_reaches_the_disk(fake_judge_server, dirs):
    run(cached_judge(fake_judge_server, dirs), *(make_request(i) for i in range(3)))
    assert fake_judge_server.requests[0].authorization == f"Bearer {SECRET_KEY}"
    files = [p for d in (dirs.cache, dirs.store) for p in d.rglob("*") if p.is_file()]
    assert len(files) >= 4
    for path in files:
        content = path.read_bytes()
        assert SECRET_KEY.encode() not in content, path
        assert b"NEVER-ON-DISK" not in content, path


def test_scripted_inner_judge_works_too(dirs):
    judge = CachedJudge(
        lambda: ScriptedJudge(lambda r: {"reason": "s", "useful": False}), cache_dir=dirs.cache
    )
    [answer] = run(judge, make_request())
    assert answer.choices == ({"reason": "s", "useful": False},)


def test_a_cache_past_its_size_is_trimmed_as_the_judge_closes_not_at_each_write(dirs):
    """diskcache's eviction (the least recently stored first, down to the cache's size limit) runs
    once, as the judge closes: the answers a run writes stay while it runs, each written without a
    look at the cache's size, and a cache past its size is trimmed all the same."""
    import diskcache

    diskcache.Cache(str(dirs.cache), size_limit=1).close()  # a limit any entry takes it past
    requests = [make_request(i) for i in range(12)]
    answer = {"reason": "s", "useful": True}
    judge = CachedJudge(lambda: ScriptedJudge(lambda r: answer), cache_dir=dirs.cache)

    def on_disk() -> int:
        with diskcache.Cache(str(dirs.cache)) as cache:
            return sum(1 for key in cache if isinstance(key, str) and not key.startswith("claim"))

    async def go() -> tuple[int, int]:
        await asyncio.gather(*(judge.judge(r) for r in requests))
        written = await asyncio.to_thread(on_disk)
        await judge.aclose()
        return written, await asyncio.to_thread(on_disk)

    written, kept = asyncio.run(go())
    assert (written, kept) == (12, 0)


@pytest.mark.parametrize("reason", ["a lone \ud800 surrogate", "a lone \udfff surrogate, and é"])
def test_an_answer_holding_a_lone_surrogate_is_cached_and_served_as_it_was(dirs, reason):
    """SQLite stores text as UTF-8, which a lone surrogate is not: writing such an answer (a custom
    judge's, a "\\ud800" escape it read) failed and turned the cache off for the rest of the run."""
    answer = {"reason": reason, "useful": True}
    requests = [make_request(i) for i in range(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the cache is not given up, with or without a word
        run(CachedJudge(lambda: ScriptedJudge(lambda r: answer), cache_dir=dirs.cache), *requests)
    replay = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)
    assert [a.choices for a in run(replay, *requests)] == [(answer,)] * 3
    assert replay.stats.cache_hits == 3


def test_last_run_record_round_trip(tmp_path):
    assert read_last_run(tmp_path) is None
    write_last_run(tmp_path, unused=["b" * 64, "a" * 64, "a" * 64], reason=None)
    assert read_last_run(tmp_path) == LastRun(frozenset({"a" * 64, "b" * 64}), None)
    data = json.loads((tmp_path / "last_run.json").read_text())
    assert data["unused"] == ["a" * 64, "b" * 64]
    assert data["finished_at"].endswith("Z")
    write_last_run(tmp_path, unused=None, reason="tests failed or errored")
    assert read_last_run(tmp_path) == LastRun(None, "tests failed or errored")
    (tmp_path / "last_run.json").write_text("{oops")
    damaged = read_last_run(tmp_path)
    assert damaged is not None and damaged.damaged and damaged.unused is None
    assert str(tmp_path / "last_run.json") in str(damaged.reason) and "not JSON" in str(damaged.reason)
    # The older record of used keys cannot be read as a list of unused entries.
    (tmp_path / "last_run.json").write_text('{"keys": []}')
    damaged = read_last_run(tmp_path)
    assert damaged is not None and damaged.unused is None and "older version" in str(damaged.reason)


def test_unknown_mode_is_a_config_error(dirs):
    from pytest_ragmetrics.errors import ConfigError

    with pytest.raises(ConfigError, match="replay"):
        CachedJudge(lambda: pytest.fail("judge created"), mode="sometimes")  # type: ignore[arg-type]


# --- JudgeStats (the run's counters, fed by the judge and the cache) -------------------------------


def test_stats_cost_uses_prices_per_million_tokens():
    from pytest_ragmetrics.judge.base import Usage

    stats = JudgeStats()
    stats.record_call(Usage(2_000_000, 500_000))
    assert stats.cost(0.15, 0.60) == pytest.approx(0.3 + 0.3)
    assert stats.cost(None, 0.60) is None


def test_stats_merge_adds_another_processes_figures():
    from pytest_ragmetrics.judge.base import Usage

    worker = JudgeStats()
    worker.record_call(Usage(10, 2))
    worker.record_cache_hit(Usage(5, 1))
    worker.record_store_hit(Usage(3, 1))
    worker.record_reuse()
    worker.record_retry()
    worker.record_reask()
    worker.record_error()
    worker.record_seconds(1.5)
    controller = JudgeStats()
    controller.record_call(Usage(1, 1))
    controller.merge_json(json.loads(json.dumps(worker.to_json())))
    assert controller.to_json() == {
        "calls": 2,
        "cache_hits": 1,
        "store_hits": 1,
        "reused": 1,
        "prompt_tokens": 11,
        "completion_tokens": 3,
        "tokens_saved": 10,
        "retries": 1,
        "reasks": 1,
        "errors": 1,
        "seconds": 1.5,
    }
    controller.merge_json({"calls": True, "bogus": 3})  # a bool is not a count; unknown keys ignored
    assert controller.calls == 2


def test_stats_timer_counts_overlapping_waits_once():
    """Ten overlapping waits of 1 s (on a clock of the test's own) and a later lone one of 2 s: the
    judge was busy 3 s, the calls took 12 s."""
    now = [0.0]
    stats = JudgeStats(clock=lambda: now[0])

    async def wait(start: float, seconds: float, gate: asyncio.Event) -> None:
        now[0] = max(now[0], start)
        with stats.timer():
            await gate.wait()
            now[0] = max(now[0], start + seconds)

    async def go() -> None:
        gate = asyncio.Event()
        waits = [asyncio.create_task(wait(0.0, 1.0, gate)) for _ in range(10)]
        await asyncio.sleep(0)  # every wait has started its timer
        gate.set()
        await asyncio.gather(*waits)
        lone = asyncio.Event()
        lone.set()
        await wait(5.0, 2.0, lone)

    asyncio.run(go())
    assert stats.seconds == 3.0
    assert stats.call_seconds == 12.0


def test_stats_counting_is_thread_safe():
    import threading

    stats = JudgeStats()

    def work() -> None:
        for _ in range(5000):
            stats.record_retry()

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert stats.retries == 20_000


# --- the store is filled from cache hits too ----------------------------------------------------------


def test_adding_a_store_later_records_what_the_cache_serves(fake_judge_server, dirs):
    requests = [make_request(i) for i in range(4)]
    no_store = CachedJudge(
        lambda: OpenAIJudge(api_key="sk-dummy", base_url=fake_judge_server.base_url),
        cache_dir=dirs.cache,
    )
    run(no_store, *requests)
    assert fake_judge_server.request_count == 4
    assert not dirs.store.exists()

    # The same run again, now with --rag-store-dir: every answer comes from the cache...
    with_store = cached_judge(None, dirs)
    answers = run(with_store, *requests, *requests)
    assert {a.source for a in answers} == {"cache"}
    assert fake_judge_server.request_count == 4
    # ...and is recorded in the store, so CI can replay from the store alone.
    store = JudgmentStore(dirs.store)
    assert store.keys() == {r.cache_key() for r in requests}
    for request, answer in zip(requests, answers[:4], strict=True):
        stored = store.get(request)
        assert stored is not None and stored.choices == answer.choices
    dirs.cache = dirs.cache.parent / "ci-has-no-cache"
    replayed = run(cached_judge(None, dirs, mode="replay"), *requests)
    assert [a.source for a in replayed] == ["store"] * 4


def test_replay_never_writes_the_store_from_the_cache(dirs):
    request = make_request()
    fill = CachedJudge(lambda: ScriptedJudge(lambda r: {"reason": "r", "useful": True}), cache_dir=dirs.cache)
    run(fill, request)
    [answer] = run(cached_judge(None, dirs, mode="replay"), request)
    assert answer.source == "cache"
    assert not dirs.store.exists()


# --- damaged cache entries -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "answer",
    [
        "oops",
        {"choices": "abc"},
        {"choices": [{"reason": "r", "useful": True}], "usage": [1]},
        {"choices": [{"reason": "r", "useful": True}], "usage": {"prompt_tokens": "many"}},
        {"choices": [{"reason": "r", "useful": True}], "model": 5},
        {"choices": [{"reason": "r", "useful": "maybe"}]},  # off its schema
        {"choices": [{"reason": "r", "useful": True}] * 2},  # two answers for one
    ],
)
def test_a_cache_entry_of_the_wrong_json_type_is_a_miss_with_one_warning(fake_judge_server, dirs, answer):
    import diskcache

    requests = [make_request(1), make_request(2)]
    with diskcache.Cache(str(dirs.cache)) as cache:
        for request in requests:
            key = request.cache_key()
            cache.set(key, json.dumps({"key": key, "model": "judge-model", "answer": answer}))

    with pytest.raises(JudgmentNotRecorded), pytest.warns(RagMetricsWarning) as record:
        run(cached_judge(None, dirs, mode="replay"), requests[0])
    assert len(record) == 1
    assert "damaged entry" in str(record[0].message)
    assert "replay treats it as not recorded" in str(record[0].message)

    judge = cached_judge(fake_judge_server, dirs)
    with pytest.warns(RagMetricsWarning, match="damaged entry") as record:
        answers = run(judge, *requests)
    assert len(record) == 1
    assert [a.source for a in answers] == ["judge", "judge"]
    # The damaged entries were replaced by good ones.
    cache_only = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)
    assert [a.source for a in run(cache_only, *requests)] == ["cache"] * 2


def sentences_request() -> JudgeRequest:
    """A chunk's sentence judgment: its sentences are derived inputs, recorded with its answer."""
    from pytest_ragmetrics import judgments as J

    return J.chunk_sentences_request("Q?", "A. B.", "punkt-1", lambda text: ["A.", "B."], J.JudgeParams("m"))


def cache_only(dirs: Dirs) -> CachedJudge:
    return CachedJudge(lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache)


def test_a_cache_entry_holds_what_serves_its_answer_ahead_of_what_was_asked(dirs):
    """The key, the run, the answer and the derived inputs come first in an entry, the request's
    inputs and parameters after them; each value as sorted JSON writes it. The entry is served."""
    import diskcache

    requests = [make_request(1), sentences_request()]
    script = ScriptedJudge(
        lambda r: {"reason": "r", "relevant_sentences": [2]} if r.derived else {"reason": "r", "useful": True}
    )
    judge = CachedJudge(lambda: script, cache_dir=dirs.cache)
    run(judge, *requests)
    with diskcache.Cache(str(dirs.cache)) as cache:
        entries = [cache.get(request.cache_key()) for request in requests]
    asked = ["inputs", "kind", "model", "n", "prompt_version", "seed", "temperature"]
    assert [list(json.loads(entry)) for entry in entries] == [
        ["key", "run", "answer", *asked],
        ["key", "run", "answer", "derived", *asked],
    ]
    derived = json.loads(entries[1])["derived"]
    assert derived == {"sentence_count": 2, "sentences": ["A.", "B."]}
    assert f'"derived": {json.dumps(derived, sort_keys=True)}, "inputs": ' in entries[1]

    fresh = [make_request(1), sentences_request()]
    served = run(cache_only(dirs), *fresh)
    assert [a.source for a in served] == ["cache", "cache"]
    assert [a.choices for a in served] == [
        ({"reason": "r", "useful": True},),
        ({"reason": "r", "relevant_sentences": [2]},),
    ]
    assert fresh[1].inputs["sentences"] == ["A.", "B."]  # from the entry, not split again


def test_a_cache_entry_with_its_members_sorted_as_written_before_is_served(dirs):
    import diskcache

    requests = [make_request(1), sentences_request()]
    answers = [{"reason": "r", "useful": False}, {"reason": "r", "relevant_sentences": [1, 2]}]
    with diskcache.Cache(str(dirs.cache)) as cache:
        for request, answer in zip(requests, answers, strict=True):
            key = request.cache_key()
            record = {"key": key, "run": "r1", "model": "m", "inputs": {}, "answer": {"choices": [answer]}}
            if request.derived:
                record["derived"] = {"sentences": ["A.", "B."], "sentence_count": 2}
            cache.set(key, json.dumps(record, sort_keys=True, ensure_ascii=False))
    fresh = [make_request(1), sentences_request()]
    served = run(cache_only(dirs), *fresh)
    assert [(a.source, a.choices) for a in served] == [("cache", (answers[0],)), ("cache", (answers[1],))]
    assert fresh[1].inputs["sentences"] == ["A.", "B."]


@pytest.mark.parametrize(
    "head_then",
    [
        '"oops", "inputs": {}}',
        '{"choices": "abc"}, "inputs": {}}',
        '{"choices": [{"reason": "r", "useful": "maybe"}]}, "inputs": {}}',
        '{"choices": [{"reason": "r", "useful": true}], "usage": {"prompt_tokens": "many"}}, "inputs": {}}',
        '{"choices": [{"reason": "r", "useful": tr',  # cut short within the answer
        '{"choices": [{"reason": "r", "useful": true}]}',  # cut short after it
        '{"choices": [{"reason": "r", "useful": true}]}, "inputs": {"broken',  # cut short in what was asked
    ],
)
def test_a_damaged_answer_in_the_head_of_a_cache_entry_is_a_miss_with_one_warning(dirs, head_then):
    import diskcache

    request = make_request(1)
    key = request.cache_key()
    with diskcache.Cache(str(dirs.cache)) as cache:
        cache.set(key, f'{{"key": "{key}", "run": "r1", "answer": {head_then}')
    with pytest.raises(JudgmentNotRecorded), pytest.warns(RagMetricsWarning) as record:
        run(cache_only(dirs), request)
    assert len(record) == 1
    assert "damaged entry" in str(record[0].message)


def test_a_recorded_answer_written_without_its_optional_fields_is_served(dirs):
    """An entry with no usage (null), model or time, as a hand or another tool may write it, is served
    from the cache and from the store like one written by this package."""
    import diskcache

    answer = {"choices": [{"reason": "r", "useful": False}], "usage": None}
    requests = [make_request(1), make_request(2)]
    with diskcache.Cache(str(dirs.cache)) as cache:
        key = requests[0].cache_key()
        cache.set(key, json.dumps({"key": key, "answer": answer}))
    store = JudgmentStore(dirs.store)
    key = requests[1].cache_key()
    store.write_records(
        [{"key": key, "kind": "k", "prompt_version": "v", "model": "m", "inputs": {}, "answer": answer}]
    )
    judge = CachedJudge(
        lambda: pytest.fail("judge created"), mode="replay", cache_dir=dirs.cache, store=store
    )
    served = run(judge, *requests)
    assert [(a.source, a.choices, a.usage, a.model) for a in served] == [
        ("cache", ({"reason": "r", "useful": False},), Usage(), ""),
        ("store", ({"reason": "r", "useful": False},), Usage(), ""),
    ]
    assert (judge.stats.cache_hits, judge.stats.store_hits, judge.stats.calls) == (1, 1, 0)


def test_store_warnings_say_what_happens_next_in_each_mode(fake_judge_server, dirs):
    request = make_request()
    run(cached_judge(fake_judge_server, dirs), request)
    key = request.cache_key()
    path = JudgmentStore(dirs.store).path_for(key)
    path.write_text(f'{{"key":"{key}","answer":"oops"}}\n', encoding="utf-8")
    dirs.cache = dirs.cache.parent / "no-cache"

    with pytest.raises(JudgmentNotRecorded), pytest.warns(RagMetricsWarning) as record:
        run(cached_judge(None, dirs, mode="replay"), request)
    [warning] = [str(w.message) for w in record]
    assert str(path) in warning
    assert "replay treats the judgment as not recorded" in warning
    assert "judged again" not in warning

    with pytest.warns(RagMetricsWarning) as record:
        [answer] = run(cached_judge(fake_judge_server, dirs), request)
    [warning] = [str(w.message) for w in record]
    assert "it will be judged again" in warning
    assert answer.source == "judge"
    assert JudgmentStore(dirs.store).get(request) is not None  # rewritten


def test_the_cache_disabled_warning_names_the_cache_dir_to_clear(fake_judge_server, tmp_path):
    dirs = Dirs(tmp_path / "dir with space")
    dirs.cache.mkdir(parents=True)
    (dirs.cache / "cache.db").mkdir()  # cannot be opened (nor moved aside as not a database)
    with pytest.warns(RagMetricsWarning, match="cannot be used") as record:
        run(cached_judge(fake_judge_server, dirs), make_request())
    message = str(record[0].message)
    assert f"python -m pytest_ragmetrics cache clear --cache-dir '{dirs.cache}'" in message


# --- bounded concurrency for any inner judge -----------------------------------------------------------


class SlowJudge:
    """A custom judge (as a plugin hook could return) that does not limit its own concurrency."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.max_in_flight = 0
        self.calls = 0

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        self.calls += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.02)
        finally:
            self.in_flight -= 1
        return JudgeAnswer(choices=({"reason": "slow", "useful": True},))


@pytest.mark.parametrize("mode", ["readwrite", "refresh", "off"])
def test_concurrency_bounds_a_custom_judge(dirs, mode):
    inner = SlowJudge()
    judge = CachedJudge(lambda: inner, mode=mode, cache_dir=dirs.cache, concurrency=4)
    answers = run(judge, *(make_request(i) for i in range(40)))
    assert len(answers) == 40
    assert inner.calls == 40
    assert inner.max_in_flight == 4


class GatheringJudge(SlowJudge):
    """Answers only once ``expected`` requests are in flight together (or 10 s have passed)."""

    def __init__(self, expected: int) -> None:
        super().__init__()
        self.expected = expected

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            for _ in range(1000):
                if self.max_in_flight >= self.expected:
                    break
                await asyncio.sleep(0.01)
        finally:
            self.in_flight -= 1
        return JudgeAnswer(choices=({"reason": "slow", "useful": True},))


def test_without_a_bound_a_custom_judge_gets_everything_at_once(dirs):
    inner = GatheringJudge(40)
    run(CachedJudge(lambda: inner, cache_dir=dirs.cache), *(make_request(i) for i in range(40)))
    assert inner.max_in_flight == 40


def test_concurrency_works_on_two_event_loops_in_turn(dirs):
    inner = SlowJudge()
    judge = CachedJudge(lambda: inner, mode="off", concurrency=2)
    for start in (0, 10):

        async def go(start: int = start) -> None:
            await asyncio.gather(*(judge.judge(make_request(start + i)) for i in range(10)))

        asyncio.run(go())
    assert inner.calls == 20
    assert inner.max_in_flight == 2
    assert len(judge._semaphores) <= 1  # the first loop's semaphore was dropped with its loop


@pytest.mark.parametrize("bad", [0, -1])
def test_bad_concurrency_is_a_config_error(bad):
    from pytest_ragmetrics.errors import ConfigError

    with pytest.raises(ConfigError, match="concurrency"):
        CachedJudge(lambda: pytest.fail("judge created"), concurrency=bad)


# --- mode off: nothing on disk, but one judgment per request and run ---------------------------------


def test_off_judges_a_repeated_request_once_per_run(fake_judge_server, dirs):
    request = make_request()
    judge = cached_judge(fake_judge_server, dirs, mode="off")

    async def go() -> list[JudgeAnswer]:
        try:
            # One after the other, as sentence and binary relevance ask for the same chunk.
            return [await judge.judge(request), await judge.judge(request)]
        finally:
            await judge.aclose()

    first, second = asyncio.run(go())
    assert fake_judge_server.request_count == 1
    assert second.choices == first.choices
    assert judge.stats.calls == 1
    assert (judge.stats.cache_hits, judge.stats.reused) == (0, 1)  # reused within the run, not read
    assert not dirs.cache.exists()
    assert not dirs.store.exists()
    # A new run judges again: the memory is the run's only.
    run(cached_judge(fake_judge_server, dirs, mode="off"), request)
    assert fake_judge_server.request_count == 2


def _edit_store_answer(dirs: Dirs, request: JudgeRequest, **changes: Any) -> None:
    """A reviewed edit of a store entry: the verdict is corrected by hand."""
    key = request.cache_key()
    path = JudgmentStore(dirs.store).path_for(key)
    lines = path.read_text(encoding="utf-8").splitlines()
    [data] = [json.loads(line) for line in lines if json.loads(line)["key"] == key]
    data["answer"]["choices"][0].update(changes)
    kept = [line for line in lines if json.loads(line)["key"] != key]
    path.write_text("\n".join([*kept, json.dumps(data, ensure_ascii=False)]) + "\n", encoding="utf-8")


@pytest.mark.parametrize("mode", ["readwrite", "replay"])
def test_an_edited_store_entry_wins_over_the_warm_cache(fake_judge_server, dirs, mode):
    """Local (warm cache) and CI (store only) must not disagree after a reviewed edit of the store."""
    fake_judge_server.responder = lambda body: {"reason": "judge said so", "useful": True}
    request = make_request()
    [first] = run(cached_judge(fake_judge_server, dirs), request)
    assert first.choices[0]["useful"] is True
    _edit_store_answer(dirs, request, useful=False, reason="corrected in review")

    local = cached_judge(None, dirs, mode=mode)
    [answer] = run(local, request)
    assert answer.choices[0] == {"useful": False, "reason": "corrected in review"}
    assert local.stats.store_hits == 1 and local.stats.cache_hits == 0
    assert fake_judge_server.request_count == 1


def test_a_judgment_removed_from_the_store_is_served_by_the_cache_and_recorded_again(fake_judge_server, dirs):
    requests = [make_request(i) for i in range(3)]
    run(cached_judge(fake_judge_server, dirs), *requests)
    JudgmentStore(dirs.store).delete(requests[1].cache_key())

    warm = cached_judge(None, dirs)
    answers = run(warm, *requests)
    assert [a.source for a in answers] == ["store", "cache", "store"]
    assert JudgmentStore(dirs.store).keys() == {r.cache_key() for r in requests}


READ_ONLY_SCRIPT = """
import asyncio, sys, warnings
sys.path.insert(0, {tests!r})
from judge_requests import make_request
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.store import JudgmentStore

judge = CachedJudge(
    lambda: OpenAIJudge(api_key="sk-dummy", base_url={base_url!r}, max_retries=0, timeout=30),
    cache_dir={cache!r},
    store=JudgmentStore({store!r}),
)

async def main():
    try:
        return await asyncio.gather(*(judge.judge(make_request(i)) for i in (0, 1, 0, 2, 2)))
    finally:
        await judge.aclose()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    answers = asyncio.run(main())
print([a.source for a in answers], judge.stats.store_hits, judge.stats.cache_hits, judge.stats.reused)
print(len(caught), " | ".join(str(w.message) for w in caught))
"""


def _can_mount_read_only(tmp_path: Path) -> bool:
    probe = subprocess.run(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount --bind {tmp_path} {tmp_path} && mount -o remount,bind,ro {tmp_path}",
        ],
        capture_output=True,
    )
    return probe.returncode == 0


def test_a_cache_on_a_read_only_filesystem_is_skipped_with_one_warning_and_the_store_serves(
    fake_judge_server, dirs, tmp_path
):
    """diskcache cannot open a database it cannot write: the cache is skipped, said once, the
    committed store still answers what it holds, and what it lacks is judged once."""
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs `unshare -m` and bind mounts to make a read-only filesystem")
    run(cached_judge(fake_judge_server, dirs), make_request(0), make_request(1))
    script = tmp_path / "read_only.py"
    script.write_text(
        READ_ONLY_SCRIPT.format(
            tests=str(Path(__file__).parent),
            cache=str(dirs.cache),
            store=str(dirs.store),
            base_url=fake_judge_server.base_url,
        )
    )
    command = (
        f"mount --bind {dirs.cache} {dirs.cache} && mount -o remount,bind,ro {dirs.cache} && "
        f"{sys.executable} {script}"
    )
    out = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    sources, warning = out.stdout.strip().splitlines()
    assert sources == "['store', 'store', 'store', 'judge', 'judge'] 2 0 1"
    assert warning.startswith("1 ") and "cannot be written" in warning and "read from a copy" in warning
    assert fake_judge_server.request_count == 3  # the two recorded, then the one the store lacked


def test_a_warm_cache_on_a_read_only_filesystem_is_still_read(fake_judge_server, dirs, tmp_path):
    """No store: every judgment the cache holds is served from it, none is asked for again."""
    if not _can_mount_read_only(tmp_path):
        pytest.skip("needs `unshare -m` and bind mounts to make a read-only filesystem")
    run(cached_judge(fake_judge_server, dirs), make_request(0), make_request(1), make_request(2))
    script = tmp_path / "read_only.py"
    script.write_text(
        READ_ONLY_SCRIPT.format(
            tests=str(Path(__file__).parent), cache=str(dirs.cache), store=str(tmp_path / "no-store"),
            base_url=fake_judge_server.base_url,
        ).replace("store=JudgmentStore(", "store=None and JudgmentStore(")
    )
    command = (
        f"mount --bind {dirs.cache} {dirs.cache} && mount -o remount,bind,ro {dirs.cache} && "
        f"{sys.executable} {script}"
    )
    out = subprocess.run(["unshare", "-m", "sh", "-c", command], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    sources, warning = out.stdout.strip().splitlines()
    assert sources == "['cache', 'cache', 'cache', 'cache', 'cache'] 0 3 2"
    assert warning.startswith("1 ") and "cannot be written" in warning
    assert fake_judge_server.request_count == 3  # the first run's, none since


SHARED_SCRIPT = """
import asyncio, sys, time
sys.path.insert(0, {tests!r})
from judge_requests import make_request
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge

start_at = float(sys.argv[1])
judge = CachedJudge(
    lambda: OpenAIJudge(api_key="sk-dummy", base_url={base_url!r}, max_retries=0, timeout=30),
    cache_dir={cache!r},
)

async def main():
    try:
        answers = await asyncio.gather(*(judge.judge(make_request(i)) for i in range(12)))
    finally:
        await judge.aclose()
    print(sorted(a.source for a in answers).count("judge"))

time.sleep(max(0.0, start_at - time.time()))  # both processes ask at the same moment
asyncio.run(main())
"""


def test_processes_sharing_a_cache_pay_once_per_judgment(fake_judge_server, tmp_path):
    """Two processes (xdist workers, or two pytest runs) needing the same judgments at the same time:
    each is asked for once."""
    import time

    fake_judge_server.delay(0.3)
    script = tmp_path / "worker.py"
    script.write_text(
        SHARED_SCRIPT.format(
            tests=str(Path(__file__).parent), base_url=fake_judge_server.base_url, cache=str(tmp_path / "c")
        )
    )
    # Warm the cache database up (creation is not what is measured), then start both together.
    warm_up = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=tmp_path / "c")
    warm_up._disk()
    warm_up.close_cache()
    start_at = str(time.time() + 2.0)
    procs = [
        subprocess.Popen([sys.executable, str(script), start_at], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert fake_judge_server.request_count == 12
    assert sum(int(out.strip()) for out in outputs) == 12  # the other process served the rest


def test_the_judge_is_made_before_a_judgment_is_claimed(fake_judge_server, dirs, monkeypatch):
    """Making the judge loads the SDK, which a loaded machine can take seconds over: done before any
    claim is taken, so a claim never waits on it (its renewals run on the same loop)."""
    events: list[str] = []
    judge = cached_judge(fake_judge_server, dirs)
    make_inner, try_claims = judge._make_inner, judge._try_claims  # claims are taken in the I/O thread

    def made() -> Judge:
        events.append("judge made")
        return make_inner()

    def claimed(items: list[Any]) -> list[Any]:
        events.append("claim taken")
        return try_claims(items)

    monkeypatch.setattr(judge, "_make_inner", made)
    monkeypatch.setattr(judge._claiming, "_run_many", claimed)
    [answer] = run(judge, make_request())
    assert answer.source == "judge"
    assert events == ["judge made", "claim taken"]


def test_a_claim_is_given_up_after_its_answer_is_in_the_cache_and_found_there_meanwhile(
    fake_judge_server, dirs, monkeypatch
):
    """A score gets its answer once the answer is in the cache; the claim on the judgment is given
    up later (here, as the cache closes), and meanwhile a process wanting the same judgment finds
    the answer in the cache rather than waiting or paying for it again. The claim on an answer the
    cache could not take is given up at once, for another process to judge it."""
    import pytest_ragmetrics.judge.claims as claims_module

    monkeypatch.setattr(claims_module, "CLAIM_RENEW_SECONDS", 3600.0)  # no renewing turn meanwhile
    recorded, unrecorded = make_request(1), make_request(2)
    judge = cached_judge(fake_judge_server, dirs)
    other = CachedJudge(lambda: pytest.fail("the judgment was paid for twice"), cache_dir=dirs.cache)
    write_disk = judge._write_disk

    def written(request: JudgeRequest, key: str, answer: JudgeAnswer) -> bool:
        return key != unrecorded.cache_key() and write_disk(request, key, answer)

    monkeypatch.setattr(judge, "_write_disk", written)
    names = [claims_module.CLAIM_PREFIX + r.cache_key() for r in (recorded, unrecorded)]

    async def go() -> tuple[list[bool], Any, JudgeAnswer | None, JudgeAnswer]:
        answer = await judge.judge(recorded)
        await judge.judge(unrecorded)
        claims = judge._claims.database()
        assert claims is not None
        held = [name in claims for name in names]
        token, found = await other._claim(recorded, recorded.cache_key())
        await judge.aclose()
        await other.aclose()
        return held, token, found, answer

    held, token, found, answer = asyncio.run(go())
    assert held == [True, False]
    assert token is None and found is not None and found.choices == answer.choices
    claims = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache)._claims.database()
    assert claims is not None
    assert not any(name in claims for name in names)
    claims.close()


def test_a_process_reading_a_copy_of_the_cache_finds_the_answer_another_recorded_in_the_cache_itself(
    fake_judge_server, dirs, monkeypatch
):
    """A process that read the cache from a copy (it could not open the cache for writing as it
    started) waits for another process's claim on a judgment, and finds the answer where that one
    recorded it, in the cache itself, rather than paying for it again once the claim is given up:
    the copy never receives it."""
    import pytest_ragmetrics.judge.cache as cache_module
    import pytest_ragmetrics.judge.claims as claims_module

    monkeypatch.setattr(claims_module, "CLAIM_RENEW_SECONDS", 3600.0)  # given up as the holder closes
    request = make_request(1)
    holder = cached_judge(fake_judge_server, dirs, with_store=False)
    waiter = cached_judge(fake_judge_server, dirs, with_store=False)
    assert holder._disk() is not None

    def cannot(cache_dir: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(cache_dir))

    with monkeypatch.context() as patched:
        patched.setattr(cache_module, "open_disk_cache", cannot)
        with pytest.warns(RagMetricsWarning, match="read from a copy"):
            assert waiter._disk() is not None
    assert waiter._read_only

    async def go() -> tuple[JudgeAnswer, JudgeAnswer]:
        fake_judge_server.close_gate()  # the holder's request waits at the server, its claim taken
        held = asyncio.ensure_future(holder.judge(request))
        assert await asyncio.to_thread(fake_judge_server.wait_for_requests, 1)
        waited = asyncio.ensure_future(waiter.judge(request))
        fake_judge_server.open_gate()
        try:
            answer = await held
        finally:
            await holder.aclose()  # gives the claim up: the waiter takes it
        try:
            return answer, await waited
        finally:
            await waiter.aclose()

    with pytest.warns(RagMetricsWarning, match="can be written now"):  # the waiter's claim opened it
        answer, found = asyncio.run(go())
    assert fake_judge_server.request_count == 1
    assert found.choices == answer.choices and found.source == "cache"


def test_a_claim_left_by_a_killed_process_expires(fake_judge_server, dirs, monkeypatch):
    """A process killed while judging leaves its claim behind: others wait for it to expire, no longer."""
    import time

    import pytest_ragmetrics.judge.claims as claims_module

    monkeypatch.setattr(claims_module, "CLAIM_SECONDS", 1.0)
    request = make_request()
    judge = cached_judge(fake_judge_server, dirs)
    claims = judge._claims.database()
    assert claims is not None
    claims.add(claims_module.CLAIM_PREFIX + request.cache_key(), "dead-process", expire=1.0)
    start = time.perf_counter()
    [answer] = run(judge, request)
    assert answer.source == "judge"
    assert time.perf_counter() - start > 0.8  # it waited for the claim to expire (a load only adds)
    assert fake_judge_server.request_count == 1


@pytest.mark.parametrize("busy", [False, True], ids=["quiet", "the database busy at the first renewal"])
def test_the_claims_held_are_renewed_together_while_their_judgments_wait(
    fake_judge_server, dirs, monkeypatch, busy
):
    """A judgment waiting for the judge keeps its claim alive past its first expiry, renewed with the
    other claims held by one renewer; once answered, no claim is left, and the renewer goes with the
    closed cache. A renewal the claims database refuses (busy with other processes) is tried again
    at the next turn: it stopped the renewing for good, and the claims lapsed while still held."""
    import sqlite3

    import pytest_ragmetrics.judge.claims as claims_module

    monkeypatch.setattr(claims_module, "CLAIM_RENEW_SECONDS", 0.05)  # each renewal: CLAIM_SECONDS more
    if busy:
        touch = claims_module._touch
        refused: list[list[str]] = []

        def busy_once(claims: Any, held: list[str]) -> None:
            if not refused:
                refused.append(held)
                raise sqlite3.OperationalError("database is locked")
            touch(claims, held)

        monkeypatch.setattr(claims_module, "_touch", busy_once)
    requests = [make_request(i) for i in range(3)]
    judge = cached_judge(fake_judge_server, dirs, response_format="json_schema")  # all three at once
    names = [claims_module.CLAIM_PREFIX + r.cache_key() for r in requests]
    fake_judge_server.close_gate()

    async def renewed(claims: Any, first: list[float]) -> None:
        while not all(claims.get(n, expire_time=True)[1] > f for n, f in zip(names, first, strict=True)):
            await asyncio.sleep(0.05)

    async def go() -> list[JudgeAnswer]:
        tasks = [asyncio.ensure_future(judge.judge(r)) for r in requests]
        try:
            assert await asyncio.to_thread(fake_judge_server.wait_for_requests, 3)
            claims = judge._claims.database()
            assert claims is not None
            first = [claims.get(n, expire_time=True)[1] for n in names]
            assert all(first)  # each held, with an expiry
            held = judge._claims
            assert len(held._held) == 3 and held._renewer is not None  # one renewer for them all
            await asyncio.wait_for(renewed(claims, first), timeout=30)
            assert not busy or refused  # renewed after the refusal
        finally:
            fake_judge_server.open_gate()
        answers = list(await asyncio.gather(*tasks))
        assert not judge._claims._held
        renewer = judge._claims._renewer
        assert renewer is not None  # kept for the next claims, renewing none meanwhile
        await judge.aclose()
        assert judge._claims._renewer is None and not renewer[0].is_alive()
        return answers

    answers = asyncio.run(go())
    assert [a.source for a in answers] == ["judge"] * 3
    claims = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache)._claims.database()
    assert claims is not None
    assert not any(name in claims for name in names)
    claims.close()


def test_claims_taken_after_the_last_ones_were_given_up_reuse_the_renewing_thread(fake_judge_server, dirs):
    """A test taking the claims of its judgments after the previous test gave its own up starts no
    thread (and waits for none to run) before its first request leaves: the one renewing thread
    stays, renewing nothing meanwhile, until the cache is closed."""
    judge = cached_judge(fake_judge_server, dirs)

    async def go() -> tuple[Any, Any]:
        await judge.judge(make_request(0))
        first = judge._claims._renewer
        assert not judge._claims._held
        await judge.judge(make_request(1))
        second = judge._claims._renewer
        await judge.aclose()
        return first, second

    first, second = asyncio.run(go())
    assert first is not None and second is first
    assert judge._claims._renewer is None and not first[0].is_alive()
    assert fake_judge_server.request_count == 2


def test_claims_are_renewed_while_the_judging_loop_is_held_up(fake_judge_server, dirs, monkeypatch):
    """A custom metric that blocks the judging loop (synchronous work in its score) past a claim's
    life must not let the claims of the requests on their way lapse: another process would take them
    and pay for those judgments again. The renewals go on while the loop is held; seen, not timed."""
    import pytest_ragmetrics.judge.claims as claims_module

    monkeypatch.setattr(claims_module, "CLAIM_RENEW_SECONDS", 0.01)
    touch, touched = claims_module._touch, threading.Event()

    def renewing(claims: Any, held: list[str]) -> None:
        touch(claims, held)
        touched.set()

    monkeypatch.setattr(claims_module, "_touch", renewing)
    request = make_request()
    judge = cached_judge(fake_judge_server, dirs)
    name = claims_module.CLAIM_PREFIX + request.cache_key()
    fake_judge_server.close_gate()

    async def go() -> JudgeAnswer:
        task = asyncio.ensure_future(judge.judge(request))
        try:
            assert await asyncio.to_thread(fake_judge_server.wait_for_requests, 1)
            claims = judge._claims.database()
            assert claims is not None
            first = claims.get(name, expire_time=True)[1]
            assert first
            touched.clear()
            renewed = touched.wait(timeout=30)  # blocks this loop, as a blocking custom metric does
            assert renewed and claims.get(name, expire_time=True)[1] > first
        finally:
            fake_judge_server.open_gate()
        answer = await task
        await judge.aclose()
        return answer

    assert asyncio.run(go()).source == "judge"
    assert fake_judge_server.request_count == 1


def test_each_judge_is_a_run_of_its_own_unless_told_which(dirs):
    runs = {CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache).run for _ in range(2)}
    assert len(runs) == 2
    assert CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache, run="r").run == "r"


@pytest.mark.parametrize("steps", range(8))
def test_a_claim_is_given_up_when_its_judgment_is_cancelled_while_claiming(fake_judge_server, dirs, steps):
    """A judgment cancelled (a stopped worker, a test that stopped waiting) just after its claim was
    taken leaves no claim behind for the other processes to wait out."""
    import pytest_ragmetrics.judge.claims as claims_module

    request = make_request()
    judge = cached_judge(fake_judge_server, dirs)

    async def go() -> None:
        task = asyncio.ensure_future(judge.judge(request))
        for _ in range(steps):  # somewhere into the claim (its add runs in the I/O thread)
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await judge.aclose()

    asyncio.run(go())
    claims = CachedJudge(lambda: pytest.fail("no judge"), cache_dir=dirs.cache)._claims.database()
    assert claims is not None
    assert claims_module.CLAIM_PREFIX + request.cache_key() not in claims
    claims.close()


# --- an answer that arrives is kept -----------------------------------------------------------------


def _cancel_after_arrival(judge: CachedJudge, server: FakeJudgeServer, requests: list[JudgeRequest], arrived: int) -> None:
    """Ask for ``requests`` with the server holding every request; once ``arrived`` have reached it,
    cancel every waiter, then let the server answer and close the judge."""

    async def go() -> None:
        waiters = [asyncio.ensure_future(judge.judge(r)) for r in requests]
        assert await asyncio.get_running_loop().run_in_executor(None, server.wait_for_requests, arrived)
        for waiter in waiters:
            waiter.cancel()
        results = await asyncio.gather(*waiters, return_exceptions=True)
        assert all(isinstance(r, asyncio.CancelledError) for r in results)
        server.open_gate()
        await judge.aclose()  # lets what was sent finish

    server.close_gate()
    asyncio.run(go())


def test_an_answer_that_arrives_after_its_waiter_was_cancelled_is_recorded(fake_judge_server, dirs):
    judge = cached_judge(fake_judge_server, dirs)
    _cancel_after_arrival(judge, fake_judge_server, [make_request(0)], arrived=1)
    assert fake_judge_server.request_count == 1
    replayed = run(cached_judge(None, dirs, mode="replay"), make_request(0))
    assert replayed[0].source == "store"


def test_a_cancelled_request_not_yet_sent_is_never_sent(fake_judge_server, dirs):
    """Within a bound of one call, the second request waits for the first: cancelled then, it is
    dropped without reaching the server, while the first one's answer is recorded."""
    judge = cached_judge(fake_judge_server, dirs)
    judge.concurrency = 1
    _cancel_after_arrival(judge, fake_judge_server, [make_request(0), make_request(1)], arrived=1)
    assert fake_judge_server.request_count == 1
    replay = cached_judge(None, dirs, mode="replay")
    assert run(replay, make_request(0))[0].source == "store"
    with pytest.raises(JudgmentNotRecorded):
        run(cached_judge(None, dirs, mode="replay"), make_request(1))


def test_callers_asking_for_one_key_at_once_share_one_request(fake_judge_server, dirs):
    """A waiter cancelled while another still waits for the same judgment cancels nothing."""
    judge = cached_judge(fake_judge_server, dirs)

    async def go() -> list[JudgeAnswer]:
        fake_judge_server.close_gate()
        first = asyncio.ensure_future(judge.judge(make_request(0)))
        second = asyncio.ensure_future(judge.judge(make_request(0)))
        assert await asyncio.get_running_loop().run_in_executor(None, fake_judge_server.wait_for_requests, 1)
        first.cancel()
        fake_judge_server.open_gate()
        try:
            return [await second]
        finally:
            await judge.aclose()

    (answer,) = asyncio.run(go())
    assert answer.source == "judge"
    assert fake_judge_server.request_count == 1


def test_an_unreadable_cache_is_skipped_with_one_warning_and_nothing_is_paid_twice(fake_judge_server, dirs):
    """Every request asked twice at once, while the cache is found unusable: each judged once."""
    dirs.cache.mkdir()
    (dirs.cache / "cache.db").write_bytes(b"not a database" * 100)
    judge = cached_judge(fake_judge_server, dirs)
    requests = [make_request(i) for i in range(20)]
    with pytest.warns(RagMetricsWarning, match="not a database") as caught:
        answers = run(judge, *requests, *requests)
    assert len([w for w in caught if issubclass(w.category, RagMetricsWarning)]) == 1
    assert fake_judge_server.request_count == 20
    assert len(answers) == 40
    replayed = run(cached_judge(None, dirs, mode="replay"), *requests)  # the store kept every answer
    assert {a.source for a in replayed} == {"store"}


def test_a_damaged_store_entry_the_cache_serves_is_recorded_again_for_replay(fake_judge_server, dirs):
    """A line that no longer reads (truncated, hand-edited out of its schema) is served by the
    local cache and written back to the store: CI replays it instead of missing it."""
    requests = [make_request(i) for i in range(2)]
    run(cached_judge(fake_judge_server, dirs), *requests)
    key = requests[0].cache_key()
    shard = dirs.store / f"{key[:2]}.jsonl"
    lines = shard.read_text(encoding="utf-8").splitlines()
    damaged = [line[: len(line) // 2] if line.startswith(f'{{"key":"{key}"') else line for line in lines]
    shard.write_text("".join(line + "\n" for line in damaged), encoding="utf-8")

    with pytest.warns(RagMetricsWarning, match="judged again and recorded anew|recorded anew"):
        answers = run(cached_judge(None, dirs), *requests)
    assert [a.source for a in answers] == ["cache", "store"]

    replay = CachedJudge(lambda: pytest.fail("judge created"), mode="replay", store=JudgmentStore(dirs.store))
    assert [a.source for a in run(replay, *requests)] == ["store", "store"]


def test_requests_waiting_for_the_response_format_probe_are_not_sent_once_cancelled(fake_judge_server, dirs):
    """Ctrl-C while the first request finds the server's response format: the others wait for it
    inside the judge and have not gone to the server; cancelled then, they are never sent."""
    judge = cached_judge(fake_judge_server, dirs)  # response_format "auto": the first request probes
    _cancel_after_arrival(judge, fake_judge_server, [make_request(i) for i in range(5)], arrived=1)
    assert fake_judge_server.request_count == 1
    assert run(cached_judge(None, dirs, mode="replay"), make_request(0))[0].source == "store"


def test_a_request_waiting_to_retry_is_not_sent_again_once_the_judge_closes(fake_judge_server, dirs):
    """Ctrl-C while a rate-limited request waits out its Retry-After: no answer is on its way, so
    closing drops it instead of waiting and paying for the retry."""
    judge = cached_judge(fake_judge_server, dirs, response_format="json_schema", max_retries=3)
    fake_judge_server.fail_next(429, headers={"Retry-After": "20"})

    async def go() -> None:
        waiter = asyncio.ensure_future(judge.judge(make_request(0)))
        assert await asyncio.get_running_loop().run_in_executor(None, fake_judge_server.wait_for_requests, 1)
        await asyncio.sleep(0)  # the 429 is being read; cancelling the waiter now or later is the same
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        await judge.aclose()

    asyncio.run(go())
    assert fake_judge_server.request_count == 1


# --- disk work arriving together goes together ------------------------------------------------------


def test_disk_work_arriving_while_the_io_thread_is_busy_is_done_in_one_hand_over():
    """Answers received together are written together (one store write, one transaction), each
    waiter getting its own result; what one item raises reaches its waiter only."""
    import concurrent.futures
    import threading

    from pytest_ragmetrics.judge.cache import _Failed, _IOBatch

    batches: list[list[int]] = []

    def run_many(items: list[int]) -> list[Any]:
        batches.append(items)
        return [_Failed(ValueError(i)) if i == 3 else i * 10 for i in items]

    busy = threading.Event()
    with concurrent.futures.ThreadPoolExecutor(1) as io:
        io.submit(busy.wait)  # the thread is writing something else meanwhile
        batch = _IOBatch(run_many, lambda: io, threading.Lock())

        async def go() -> list[Any]:
            waiters = [asyncio.ensure_future(batch(i)) for i in range(5)]
            await asyncio.sleep(0)  # every item is handed over before the thread is free
            busy.set()
            return list(await asyncio.gather(*waiters, return_exceptions=True))

        results = asyncio.run(go())
    assert batches == [[0, 1, 2, 3, 4]]
    assert results[:3] == [0, 10, 20] and results[4] == 40
    assert isinstance(results[3], ValueError) and results[3].args == (3,)


def test_disk_work_started_in_one_pass_of_the_loop_is_done_in_one_hand_over():
    """The claims of the judgments a test's declared scores start together are taken in one
    hand-over to the idle I/O thread, not the first alone and the others after it."""
    import concurrent.futures
    import threading

    from pytest_ragmetrics.judge.cache import _IOBatch

    batches: list[list[int]] = []

    def run_many(items: list[int]) -> list[Any]:
        batches.append(items)
        return [i * 10 for i in items]

    with concurrent.futures.ThreadPoolExecutor(1) as io:
        batch = _IOBatch(run_many, lambda: io, threading.Lock())

        async def go() -> list[Any]:
            return list(await asyncio.gather(*(batch(i) for i in range(5))))

        assert asyncio.run(go()) == [0, 10, 20, 30, 40]
    assert batches == [[0, 1, 2, 3, 4]]


@pytest.mark.parametrize(
    "text",
    [
        *('{"a":1}', ' {"a":1}', '{"a":1}\n', '{"a":1}x', '{"a":1}{"b":2}', "", "nul", "[1,2]", '"x"'),
        *(b'{"a":2}', b'\xef\xbb\xbf{"a":2}', b'{"a":"\xe2\x82\xac"}', b'{"a":"\xff"}', b'{"a":"\xed\xa0\x80"}'),
        *('{"a":1}'.encode("utf-16-le"), b" [1]", b"", b"1 "),
    ],
)
def test_an_entry_is_read_as_json_loads_reads_it(text):
    """Reading an entry's text (a cache value, a store line) skips json.loads' look for white space
    and other encodings, and nothing else: the same value, or the same error for a damaged entry."""
    from pytest_ragmetrics.judge.store import loads_entry as _loads

    def outcome(read: Any) -> tuple[str, Any]:
        try:
            return "value", read(text)
        except ValueError as exc:
            return type(exc).__name__, str(exc)

    assert outcome(_loads) == outcome(json.loads)


def _reading_a_copy(judge_server: Any, dirs: Any, monkeypatch: Any) -> Any:
    """A cached judge reading a copy of the cache, which it could not open for writing; the
    copy's warnings caught (see the tests below)."""
    import pytest_ragmetrics.judge.cache as cache_module

    opener = cached_judge(None, dirs, with_store=False)
    assert opener._disk() is not None  # the cache there, to be read from a copy
    asyncio.run(opener.aclose())
    reader = cached_judge(judge_server, dirs, with_store=False)

    def cannot(cache_dir: Any) -> Any:
        raise PermissionError(13, "Permission denied", str(cache_dir))

    with monkeypatch.context() as patched:
        patched.setattr(cache_module, "open_disk_cache", cannot)
        with pytest.warns(RagMetricsWarning, match="not cached while it cannot be written") as first:
            assert reader._disk() is not None
    assert len(first) == 1 and reader._read_only
    return reader


def test_two_claims_that_open_the_cache_of_a_process_reading_a_copy_keep_the_copy_to_close(dirs, monkeypatch):
    """Two claims taken at once by a process reading a copy may both open the cache itself: the
    second keeps what the first opened and closes its own, and the copy is still the one closed
    with the judge (it was dropped, open, when the second took the first's place)."""
    reader = _reading_a_copy(None, dirs, monkeypatch)
    copy = reader._cache
    with pytest.warns(RagMetricsWarning, match="can be written now"):
        reader._live_again()
    live = reader._cache
    reader._live_again()  # the second claim, as if it had looked before the first opened the cache
    assert reader._copy is copy and reader._cache is live and not reader._read_only
    asyncio.run(reader.aclose())


def test_a_process_reading_a_copy_of_the_cache_says_when_its_new_judgments_are_cached_again(
    fake_judge_server, dirs, monkeypatch
):
    """The copy's warning says the new judgments are not cached while the cache cannot be written;
    once the process opens the cache itself (as it claims a judgment), a second warning says they
    are cached from there on, and they are: the first warning alone was no longer true."""
    reader = _reading_a_copy(fake_judge_server, dirs, monkeypatch)
    request = make_request(1)
    with pytest.warns(RagMetricsWarning) as caught:
        [answer] = run(reader, request)
    assert [str(w.message) for w in caught] == [
        f"the judgment cache at {dirs.cache} can be written now: this run's new judgments are cached from "
        "here on (those judged while it was read from a copy are not)"
    ]
    later = cached_judge(None, dirs, with_store=False)
    [found] = run(later, request)
    assert found.source == "cache" and found.choices == answer.choices
