"""A score whose answers are all recorded is served on the calling thread, without the judging loop:
the same result and the same counts as the loop gives, and anything else (a miss, a damaged entry, a
write, another kind of metric) is left to the loop, counted once."""

import functools
import json
import threading
import warnings

import diskcache
import pytest

from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings
from pytest_ragmetrics.builtin_hooks import plugin_manager
from pytest_ragmetrics.hookspecs import hookimpl
from pytest_ragmetrics.judge.cache import RagMetricsWarning
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.results import MetricResult
from tests.test_warm_path import FIVE, SAMPLES, never, verdicts

# What is tested here is serving judgments: no finished scores kept in the cache.
FromJudgments = functools.partial(Evaluator, score_records=False)

pytest_plugins = ["pytester"]

SPECS = [(spec.split("[")[0], spec[:-1].split("[")[1] if "[" in spec else None) for spec in FIVE]


def judging_threads():
    return [t for t in threading.enumerate() if t.name == "ragmetrics-judge"]


def score_all(ev):
    return {(s.id, name, method): ev.score(s, name, method) for s in SAMPLES for name, method in SPECS}


def as_json(results):
    return {key: {k: v for k, v in r.to_json().items() if k != "cached"} for key, r in results.items()}


def record(tmp_path, **settings):
    settings = Settings(cache_dir=str(tmp_path / "cache"), **settings)
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        cold = score_all(ev)
    return settings, cold


@pytest.mark.parametrize("where", ["cache", "store"])
def test_recorded_scores_are_served_without_the_judging_loop(tmp_path, where):
    settings, cold = record(tmp_path, store_dir=str(tmp_path / "store"))
    if where == "store":
        settings = Settings(cache="replay", cache_dir=str(tmp_path / "empty"), store_dir=settings.store_dir)
    else:
        settings = Settings(cache_dir=settings.cache_dir)
    before = judging_threads()
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        warm = score_all(ev)
        assert ev.runner._thread is None and judging_threads() == before  # no loop was started
        assert not ev.judging
        hits = (ev.stats.cache_hits, ev.stats.store_hits)
    # The loop, asked for the same scores by a fresh evaluator, gives the same results and counts.
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        looped = ev.evaluate(SAMPLES, FIVE)
        assert (ev.stats.cache_hits, ev.stats.store_hits) == hits
    assert as_json(warm) == as_json(cold)
    for (sid, _, _), result in warm.items():
        assert comparable_one(looped.results[sid][result.name]) == comparable_one(result)
    # Memory hits (sentence and binary relevance share a judgment) count as cache hits.
    assert hits[1] > 0 if where == "store" else hits[1] == 0 < hits[0], hits


def comparable_one(result: MetricResult):
    data = result.to_json()
    data.pop("cached")
    return data


def test_a_score_with_an_answer_missing_is_judged_on_the_loop_and_counted_once(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    first = RagSample("What is the limit?", ["The limit is 5 GB.", "It costs 3 dollars."], id="a")
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        ev.score(first, "context_relevance", "graded")
    # One chunk's judgment is recorded, the other's is not.
    second = RagSample("What is the limit?", ["The limit is 5 GB.", "Paris is the capital."], id="b")
    judge = ScriptedJudge(verdicts)
    with FromJudgments(settings, judge=judge) as ev:
        result = ev.score(second, "context_relevance", "graded")
        assert ev.judging  # from now on the plugin may judge ahead
        assert (judge.calls, ev.stats.calls, ev.stats.cache_hits) == (1, 1, 1)
        again = ev.score(second, "context_relevance", "graded")  # now all recorded: served here
        assert (judge.calls, ev.stats.cache_hits) == (1, 3)
    assert again.to_json()["score"] == result.score


def test_a_damaged_cache_entry_is_dropped_by_the_loop(tmp_path):
    settings, cold = record(tmp_path)
    with diskcache.Cache(settings.cache_dir) as cache:
        for key in list(cache.iterkeys()):
            record_ = json.loads(cache[key])
            if record_.get("kind") == "context_relevance_graded":
                cache[key] = "{not json"
    judge = ScriptedJudge(verdicts)
    with warnings.catch_warnings(record=True) as caught, FromJudgments(settings, judge=judge) as ev:
        warnings.simplefilter("always")
        result = ev.score(SAMPLES[0], "context_relevance", "graded")
    assert judge.calls == 3 and result.score == cold["france", "context_relevance", "graded"].score
    assert any(issubclass(w.category, RagMetricsWarning) and "damaged" in str(w.message) for w in caught)


def test_a_cache_hit_the_store_lacks_is_copied_into_it_by_the_loop(tmp_path):
    settings, _ = record(tmp_path)
    store_dir = tmp_path / "store"
    with FromJudgments(
        Settings(cache_dir=settings.cache_dir, store_dir=str(store_dir)), judge=ScriptedJudge(never)
    ) as ev:
        ev.score(SAMPLES[0], "context_precision")
        assert ev.stats.cache_hits == 3
    assert len(JudgmentStore(store_dir)) == 3


class TwoRounds:
    """A metric asking the judge twice: what the first round found is counted once, whatever the second."""

    name = "two_rounds"
    methods = ()
    default_method = None
    serves_recorded = True

    async def score(self, sample, method, ctx):
        from pytest_ragmetrics import judgments as J

        s = ctx.settings
        params = J.JudgeParams(s.judge_model, s.graded_temperature, s.seed, s.judge_n)
        question = ctx.normalize(sample.question)
        first = await ctx.judge_many([J.graded_request(question, sample.contexts[0], params)])
        second = await ctx.judge_many([J.graded_request(question, sample.contexts[1], params)])
        score = (first[0].choices[0]["rating"] + second[0].choices[0]["rating"]) / 4
        return MetricResult(score, self.name, None, (), "two rounds", sample.id)


class Plugin:
    def __init__(self, metric):
        self.metric = metric

    @hookimpl
    def pytest_ragmetrics_metrics(self):
        return [self.metric]


def test_a_miss_in_a_later_round_counts_the_first_round_once(tmp_path):
    manager = plugin_manager()
    manager.register(Plugin(TwoRounds()))
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    sample = RagSample("What is the capital?", ["Paris is the capital.", "It rains."], id="x")
    with FromJudgments(settings, judge=ScriptedJudge(verdicts), hook=manager.hook) as ev:
        ev.score(RagSample("What is the capital?", ["Paris is the capital."], id="y"), "context_relevance")
    judge = ScriptedJudge(verdicts)
    with FromJudgments(settings, judge=judge, hook=manager.hook) as ev:
        assert ev.score(sample, "two_rounds").score == 0.5
        assert (judge.calls, ev.stats.cache_hits) == (1, 1)


def test_a_metric_that_does_not_declare_it_is_scored_on_the_loop(tmp_path):
    class OnTheLoop(TwoRounds):
        name = "on_the_loop"
        serves_recorded = False

    manager = plugin_manager()
    manager.register(Plugin(OnTheLoop()))
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    sample = RagSample("What is the capital?", ["Paris is the capital.", "It rains."], id="x")
    with FromJudgments(settings, judge=ScriptedJudge(verdicts), hook=manager.hook) as ev:
        ev.score(sample, "on_the_loop")
    with FromJudgments(settings, judge=ScriptedJudge(never), hook=manager.hook) as ev:
        assert ev.score(sample, "on_the_loop").score == 0.5
        assert ev.runner._thread is not None and not ev.judging and ev.stats.cache_hits == 2


def test_a_bad_sample_raises_the_loops_error(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        with pytest.raises(Exception, match="needs a ground_truth"):
            ev.score(RagSample("Q?", ["chunk"], id="x"), "context_recall")
        assert not ev.judging  # not a reason to judge ahead


WARM_SUITE = """
import json, pathlib, threading
import pytest
from pytest_ragmetrics import assert_context_precision, assert_context_relevance

@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_golden(rag_sample):
    assert_context_precision(rag_sample) >= 0.0
    assert_context_relevance(rag_sample, "graded") >= 0.0
    names = sorted(t.name for t in threading.enumerate())
    pathlib.Path("threads-" + rag_sample.id).write_text(json.dumps(names))
"""


SCRIPTED_JUDGE = """
import pytest
from pytest_ragmetrics import ScriptedJudge
from pytest_ragmetrics.testing import conforming_value

@pytest.hookimpl(tryfirst=True)
def pytest_ragmetrics_make_judge(settings):
    return ScriptedJudge(lambda request: conforming_value(request.schema))
"""


def scripted_project(pytester, count, test, conftest=""):
    """A golden set of ``count`` one-chunk samples, the test file ``test``, a scripted judge and a
    disk cache in the project (``conftest`` adds to the conftest.py)."""
    pytester.makeini("[pytest]\nrag_cache_dir = cache\n")
    golden = [
        {"id": f"s{i}", "question": f"Limit of plan {i}?", "contexts": [f"Plan {i} has {i} GB."],
         "ground_truth": f"{i} GB."}
        for i in range(count)
    ]  # fmt: skip
    pytester.path.joinpath("golden.jsonl").write_text("\n".join(map(json.dumps, golden)))
    pytester.makepyfile(test_golden=test)
    pytester.makeconftest(SCRIPTED_JUDGE + conftest)
    return pytester


def test_a_warm_pytest_run_starts_no_judging_thread(pytester):
    scripted_project(pytester, 12, WARM_SUITE)
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=12)
    cold = json.loads(pytester.path.joinpath("threads-s11").read_text())
    assert "ragmetrics-judge" in cold
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--rag-report-json=report.json")
    result.assert_outcomes(passed=12)
    for i in range(12):
        assert "ragmetrics-judge" not in json.loads(pytester.path.joinpath(f"threads-s{i}").read_text())
    summary = json.loads(pytester.path.joinpath("report.json").read_text())["summary"]
    assert summary["judge"]["calls"] == 0 and summary["judge"]["recorded"] == 12 * 2


def test_serving_here_never_opens_diskcache_in_the_calling_thread(tmp_path, monkeypatch):
    """diskcache opens a connection per thread and closes only the closing thread's: the calling
    thread reads through a connection of its own, closed with the cache (Python 3.13 warns of any
    connection left open)."""
    import pytest_ragmetrics.judge.cache as cache_module

    settings, _ = record(tmp_path)
    opened, original = [], cache_module.open_disk_cache

    def recording(directory):
        opened.append(threading.current_thread().name)
        return original(directory)

    monkeypatch.setattr(cache_module, "open_disk_cache", recording)
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        score_all(ev)
        assert opened == [] and ev.stats.cache_hits > 0
        here = ev.judge._here
        assert here is not None
    with pytest.raises(Exception, match="closed"):
        here._db.execute("SELECT 1")
