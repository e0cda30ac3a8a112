"""Memory stays flat on large runs: bounded fan-out, a bounded answer map, shared decisions, small
SQLite page caches (splitting loads Punkt without the rest of nltk: see test_text.py)."""

import asyncio
import json
import os

import diskcache
import pytest
from judge_requests import make_request
from test_warm_path import FIVE

from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings
from pytest_ragmetrics._aio import each_bounded, map_bounded
from pytest_ragmetrics.engine import EVALUATION_BLOCK
from pytest_ragmetrics.judge.cache import MEMORY_ENTRIES, CachedJudge
from pytest_ragmetrics.judge.disk_cache import SQLITE_CACHE_PAGES
from pytest_ragmetrics.metrics.builtin import ASKED_ENTRIES
from pytest_ragmetrics.testing import conforming_value


def golden(count: int) -> list[RagSample]:
    return [
        RagSample(
            f"Which plan covers case {i}?",
            [f"Plan {c} covers case {i}. It costs {c} euros." for c in range(3)],
            ground_truth=f"Plan 1 covers case {i}. It costs 1 euro.",
            id=str(i),
        )
        for i in range(count)
    ]


def positive(request):
    return conforming_value(request.schema)


def test_map_bounded_runs_at_most_limit_jobs_and_keeps_the_order():
    running = peak = 0

    async def job(i):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0.001 * (i % 3))
        running -= 1
        return i * i

    assert asyncio.run(map_bounded(job, 50, 7)) == [i * i for i in range(50)]
    assert peak == 7


def test_map_bounded_stops_the_other_jobs_at_the_first_failure():
    started = []

    async def job(i):
        started.append(i)
        if i == 3:
            raise ValueError("bad sample")
        await asyncio.sleep(10)

    with pytest.raises(ValueError, match="bad sample"):
        asyncio.run(asyncio.wait_for(map_bounded(job, 1000, 4), timeout=5))
    assert len(started) < 10  # the jobs after the failure never start


def test_each_bounded_takes_every_item_once_with_at_most_limit_at_a_time():
    running = peak = 0
    done = []

    async def job(item):
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await asyncio.sleep(0)
        running -= 1
        done.append(item)

    asyncio.run(each_bounded(job, (f"s{i}" for i in range(50)), 50, 7))
    assert sorted(done) == sorted(f"s{i}" for i in range(50)) and peak == 7
    asyncio.run(each_bounded(job, ["only"], 1, 7))  # no more workers than items
    assert done[-1] == "only" and peak == 7


def test_each_bounded_stops_the_other_jobs_at_the_first_failure():
    started = []

    async def job(item):
        started.append(item)
        if item == 3:
            raise ValueError("bad sample")
        await asyncio.sleep(10)

    with pytest.raises(ValueError, match="bad sample"):
        asyncio.run(asyncio.wait_for(each_bounded(job, range(1000), 1000, 4), timeout=5))
    assert len(started) < 10  # the jobs after the failure never start


def test_an_evaluation_keeps_a_bounded_number_of_samples_in_flight(monkeypatch):
    in_flight = peak = 0
    score = Evaluator._score

    async def counting(self, *args, **kwargs):
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            return await score(self, *args, **kwargs)
        finally:
            in_flight -= 1

    class Slow:
        async def judge(self, request):
            await asyncio.sleep(0.001)
            return await ScriptedJudge(lambda r: {"reason": "r", "rating": 1}).judge(request)

    monkeypatch.setattr(Evaluator, "_score", counting)
    samples = [RagSample(f"Question {i}?", [f"Chunk {i}."], id=str(i)) for i in range(400)]
    with Evaluator(Settings(cache="off", concurrency=4), judge=Slow()) as ev:
        result = ev.evaluate(samples, ["context_relevance[graded]"])
    assert len(result.results) == 400
    assert peak == ev._jobs == 64  # not one coroutine per sample at once, yet more than the judge's 4


def test_the_answer_map_in_memory_is_bounded():
    async def run(judge: CachedJudge) -> None:
        for i in range(40):
            await judge.judge(make_request(i))

    judge = CachedJudge(
        lambda: ScriptedJudge(lambda r: {"reason": "r", "useful": True}), mode="off", memory_entries=8
    )
    asyncio.run(run(judge))
    assert len(judge._memory) == 8
    assert MEMORY_ENTRIES <= 4_096


def test_answers_written_to_the_disk_cache_are_not_kept_in_memory(tmp_path):
    """No memoised function of the cache module keeps what each answer written was (a long-lived
    process writes answers without end); the requests' inputs are not ASCII, as in many suites."""
    from pytest_ragmetrics.judge import cache as module

    async def run(judge: CachedJudge) -> None:
        for i in range(40):
            await judge.judge(make_request(i))
        await judge.aclose()

    judge = CachedJudge(lambda: ScriptedJudge(lambda r: {"reason": "é", "useful": True}), cache_dir=tmp_path)
    asyncio.run(run(judge))
    with diskcache.Cache(str(tmp_path)) as cache:
        assert sum(1 for key in cache if not key.startswith("claim")) == 40
    memoised = {name: f.cache_info().currsize for name, f in vars(module).items() if hasattr(f, "cache_info")}
    assert memoised and max(memoised.values()) < 40, memoised


def test_what_is_kept_between_uses_holds_a_block_of_samples_and_no_more():
    """Sentence and binary relevance share one judgment per chunk: the answers kept in memory and the
    sentence requests kept built hold those of the block of samples an evaluation has in flight, for
    samples of up to 32 chunks, and not many more (every object kept is walked by each full
    garbage collection)."""
    for kept in (MEMORY_ENTRIES, ASKED_ENTRIES):
        assert EVALUATION_BLOCK * 32 <= kept <= EVALUATION_BLOCK * 64


def test_judgments_that_decide_alike_share_one_noted_decision(tmp_path):
    """A run notes what each judgment decided (for its judge checks): one shared pair per decision,
    whether the judge answered now or the cache did."""
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    for judge in (positive, None):  # judged, then served from the cache
        with Evaluator(settings, judge=ScriptedJudge(judge or (lambda r: pytest.fail("judged")))) as ev:
            ev.answers = {}  # as the pytest plugin's run asks for them
            ev.evaluate(golden(30), FIVE)
            noted = list(ev.answers.values())
        assert len(noted) == 30 * 10
        assert len({id(decision) for decision in noted}) == len(set(noted)) <= 5


def test_an_evaluation_nobody_asked_to_note_decisions_notes_none(tmp_path):
    """What each judgment decided is kept for a run that checks its judge (the pytest plugin's):
    a script's evaluation, which reads none of it, keeps none."""
    with Evaluator(Settings(cache_dir=str(tmp_path / "cache")), judge=ScriptedJudge(positive)) as ev:
        ev.evaluate(golden(3), FIVE)
        assert ev.answers is None


def test_only_refresh_remembers_which_judgments_this_run_made(tmp_path):
    """Refresh judges a key once per run and serves it after that; other modes keep no such list."""
    for mode, kept in (("readwrite", 0), ("refresh", 30 * 7)):
        judge = ScriptedJudge(positive)
        settings = Settings(cache_dir=str(tmp_path / "cache"), cache=mode)
        with Evaluator(settings, judge=judge) as ev:
            ev.evaluate(golden(30))
            ev.evaluate(golden(30))
            assert len(ev.judge._judged_this_run) == kept
        assert judge.calls == 30 * 7  # the second evaluation is served what the first recorded


def test_every_connection_to_the_disk_cache_keeps_a_small_page_cache(tmp_path):
    """diskcache opens a SQLite connection per thread (the judging loop's, the I/O thread's), each
    with the page cache of the cache's ``sqlite_cache_size`` setting; a cache created with a larger
    one gets the small one too (read through diskcache's public settings attribute)."""
    directory = tmp_path / "cache"
    diskcache.Cache(str(directory), sqlite_cache_size=2**14).close()
    with Evaluator(Settings(cache_dir=str(directory)), judge=ScriptedJudge(positive)) as ev:
        ev.evaluate(golden(3))
        cache = ev.judge._disk()
        assert cache is not None
        assert cache.sqlite_cache_size == SQLITE_CACHE_PAGES
    with diskcache.Cache(str(directory)) as reopened:  # the setting is kept in the database
        assert reopened.sqlite_cache_size == SQLITE_CACHE_PAGES == 512


def test_a_run_records_what_its_judgments_decided_and_their_keys_once(pytester, monkeypatch):
    """What each judgment decided and the keys of the judgments used are recorded once, in the
    run's own map and set, however many evaluators its tests use (two settings here): not by each
    evaluator and its judge, to be copied into the run's at its end."""
    for name in [k for k in os.environ if k.startswith("RAGMETRICS_")]:
        monkeypatch.delenv(name)
    pytester.makeconftest("""
        from pytest_ragmetrics import ScriptedJudge
        from pytest_ragmetrics.testing import conforming_value

        def pytest_ragmetrics_make_judge(settings):
            return ScriptedJudge(lambda request: conforming_value(request.schema), model=settings.judge_model)
    """)
    pytester.makepyfile(
        """
        import json, pathlib
        import pytest
        from pytest_ragmetrics import RagSample, assert_context_precision
        from pytest_ragmetrics.plugin import session_key

        SAMPLE = RagSample("Who wrote it?", ["Ann wrote it.", "Bob read it."], ground_truth="Ann.")

        def test_default():
            assert_context_precision(SAMPLE) >= 0.0

        @pytest.mark.ragmetrics(judge_model="another-model")
        def test_other_model():
            assert_context_precision(SAMPLE) >= 0.0

        def test_records(request):
            state = request.config.stash[session_key]
            evaluators = list(state.evaluators.values())
            shared = [
                [e.answers is state.answer_classes, e.built_judge.used_keys is state.used_keys]
                for e in evaluators
            ]
            recorded = [shared, len(state.answer_classes), len(state.used_keys)]
            pathlib.Path("recorded.json").write_text(json.dumps(recorded))
        """
    )
    pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=3)
    assert json.loads((pytester.path / "recorded.json").read_text()) == [[[True, True], [True, True]], 4, 4]
