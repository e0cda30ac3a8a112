"""Score records: a warm rerun serves each finished score with one read, exactly as its judgments
would serve it (results, hit counts, used keys, answers), and never where they would now differ:
other content, settings, code, a changed judgment store or a replaced judgment."""

import concurrent.futures
import dataclasses
import gc
import json
import re
import shutil
import threading
import time
import warnings

import diskcache
import pytest

from pytest_ragmetrics import Evaluator, RagSample, ScriptedJudge, Settings, score_records
from pytest_ragmetrics import judgments as J
from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.errors import JudgmentNotRecorded
from pytest_ragmetrics.judge.cache import CachedJudge, cache_summary
from pytest_ragmetrics.score_records import EPOCH_KEY, SCORE_PREFIX
from tests.test_warm_path import FIVE, SAMPLES, CountingSplitter, comparable, never, verdicts

SPECS = [(spec.split("[")[0], spec[:-1].split("[")[1] if "[" in spec else None) for spec in FIVE]


def other_verdicts(request):
    """Answers that differ from :func:`verdicts` wherever a score could show it."""
    answer = verdicts(request)
    if request.kind == J.PRECISION:
        return {**answer, "useful": not answer["useful"]}
    if request.kind == J.SENTENCES:
        return {"reason": "none needed", "relevant_sentences": []}
    if request.kind == J.GRADED:
        return {"reason": "rated", "rating": 2 - answer["rating"]}
    return {k: {**v, "attributed": not v["attributed"]} for k, v in answer.items()}


def refuse_judgments(monkeypatch):
    """From now on, a score made from its judgments fails: only score records can serve one."""

    def refuse(*args, **kwargs):
        raise AssertionError("a score was made from its judgments")

    monkeypatch.setattr(CachedJudge, "judge", refuse)
    monkeypatch.setattr(CachedJudge, "judge_many", refuse)


def keys(cache_dir, *, records):
    with diskcache.Cache(cache_dir) as cache:
        return [k for k in cache.iterkeys() if k.startswith(SCORE_PREFIX) == records and k != EPOCH_KEY]


def drop(cache_dir, *, records):
    """Delete the score records (``records=True``) or the judgments (``False``) of a cache."""
    with diskcache.Cache(cache_dir) as cache:
        for key in keys(cache_dir, records=records):
            del cache[key]


def run(settings, judge=never, samples=SAMPLES, **kwargs):
    with Evaluator(settings, judge=ScriptedJudge(judge), **kwargs) as ev:
        result = ev.evaluate(samples, FIVE)
        seen = (ev.stats.cache_hits, ev.stats.store_hits, ev.stats.tokens_saved, ev.stats.calls)
        return result, seen, dict(ev.answers), set(ev.judge.used_keys)


def test_a_warm_evaluation_from_records_is_what_the_judgments_give(tmp_path, monkeypatch):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    cold, *_ = run(settings, verdicts)
    assert len(keys(settings.cache_dir, records=True)) == len(SAMPLES) * len(FIVE)
    with monkeypatch.context() as patch:
        refuse_judgments(patch)
        from_records = run(settings)
    drop(settings.cache_dir, records=True)
    from_judgments = run(settings)
    assert comparable(from_records[0]) == comparable(from_judgments[0]) == comparable(cold)
    assert from_records[0].to_json() == from_judgments[0].to_json()  # "cached" too
    assert from_records[1:] == from_judgments[1:]  # hits, tokens saved, answers, used keys
    assert from_records[1][0] > 0 and from_records[1][3] == 0
    # The run from judgments wrote the records again: they alone serve the next run.
    with monkeypatch.context() as patch:
        refuse_judgments(patch)
        assert run(dataclasses.replace(settings, cache="replay"))[0].to_json() == from_judgments[0].to_json()


def test_single_scores_are_served_from_records_on_the_calling_thread(tmp_path, monkeypatch):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with Evaluator(settings, judge=ScriptedJudge(verdicts)) as ev:
        cold = {(s.id, *spec): ev.score(s, *spec).to_json() for s in SAMPLES for spec in SPECS}
    refuse_judgments(monkeypatch)  # only the records can serve
    with Evaluator(dataclasses.replace(settings, cache="replay"), judge=ScriptedJudge(never)) as ev:
        warm = {(s.id, *spec): ev.score(s, *spec).to_json() for s in SAMPLES for spec in SPECS}
        assert ev.runner._thread is None  # no judging loop was needed
    assert warm == {key: {**value, "cached": True} for key, value in cold.items()}


def recorded(tmp_path, **settings):
    """Replay settings of a cache holding the judgments and score records of SAMPLES on FIVE."""
    base = Settings(cache_dir=str(tmp_path / "cache"), **settings)
    run(base, verdicts)
    return dataclasses.replace(base, cache="replay")


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(
            lambda s: {"settings": dataclasses.replace(s, judge_model="gpt-other")}, id="judge-model"
        ),
        pytest.param(lambda s: {"settings": dataclasses.replace(s, seed=7)}, id="seed"),
        pytest.param(lambda s: {"settings": dataclasses.replace(s, relevance_models=("m2",))}, id="models"),
        pytest.param(
            lambda s: {
                "samples": [dataclasses.replace(SAMPLES[0], contexts=(*SAMPLES[0].contexts[:2], "New."))]
            },
            id="contexts",
        ),
        pytest.param(lambda s: {"samples": [dataclasses.replace(SAMPLES[0], id="renamed")]}, id="sample-id"),
        pytest.param(
            lambda s: {"samples": [dataclasses.replace(SAMPLES[1], ground_truth="The limit is 6 GB.")]},
            id="reference",
        ),
    ],
)
def test_a_record_serves_only_the_same_content_and_settings(tmp_path, monkeypatch, change):
    settings = recorded(tmp_path)
    with monkeypatch.context() as patch:
        refuse_judgments(patch)
        assert run(settings)[0].ok  # the records serve the unchanged evaluation
    changed = {"settings": dataclasses.replace(settings, cache="readwrite"), "samples": SAMPLES}
    changed.update(change(changed["settings"]))
    refuse_judgments(monkeypatch)
    with pytest.raises(AssertionError, match="from its judgments"):
        run(changed["settings"], samples=changed["samples"])


def test_changed_code_nltk_or_a_splitter_without_fingerprint_serves_no_record(tmp_path, monkeypatch):
    settings = recorded(tmp_path)
    refuse_judgments(monkeypatch)
    assert run(settings)[0].ok
    for changed in ("code_digest", "environment"):  # another version: of the package, of nltk
        with monkeypatch.context() as patch:
            patch.setattr(score_records, changed, lambda: "another version")
            with pytest.raises(AssertionError, match="from its judgments"):
                run(settings)
    with pytest.raises(AssertionError, match="from its judgments"):
        run(settings, splitter=CountingSplitter(fingerprint=False))


def test_a_plugin_metric_keeps_no_records(tmp_path):
    from pytest_ragmetrics.metrics.builtin import ContextPrecision

    class Mine(ContextPrecision):  # the same code, but not the package's: it may change unseen
        name = "my_precision"

    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with Evaluator(settings, judge=ScriptedJudge(verdicts)) as ev:
        ev._metrics = {**ev.metrics, "my_precision": Mine()}
        ev.evaluate(SAMPLES, ["my_precision"])
    assert keys(settings.cache_dir, records=True) == []


def test_the_store_stays_the_source_of_truth(tmp_path):
    """A checkout bringing other judgments into the store turns the records made before into misses."""
    ours = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))
    theirs = Settings(cache_dir=str(tmp_path / "theirs-cache"), store_dir=str(tmp_path / "theirs"))
    run(ours, verdicts)
    run(ours)  # the store changed when the first run recorded into it: this run keeps new records
    served, seen, *_ = run(ours)
    assert seen[1] > 0  # store hits, as the judgments count them
    expected, *_ = run(theirs, other_verdicts)
    assert comparable(expected) != comparable(served)
    shutil.rmtree(ours.store_dir)
    shutil.copytree(theirs.store_dir, ours.store_dir)  # "git checkout" of another branch
    after, *_ = run(ours)
    assert comparable(after) == comparable(expected)


def test_a_refresh_turns_every_earlier_record_into_a_miss(tmp_path):
    """Sentence and binary relevance share judgments: refreshing binary relevance alone changes what
    sentence relevance's judgments say, so its record must not be served any more."""
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    before, *_ = run(settings, verdicts)
    with Evaluator(dataclasses.replace(settings, cache="refresh"), judge=ScriptedJudge(other_verdicts)) as ev:
        ev.evaluate(SAMPLES, ["context_relevance[binary]"])
    after, *_ = run(settings)
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(other_verdicts)) as ev:
        expected = ev.evaluate(SAMPLES, ["context_relevance[sentence]"])
    label = "context_relevance[sentence]"
    assert after.scores(label) == expected.scores(label) != before.scores(label)
    assert after.scores("context_precision") == before.scores("context_precision")


def test_a_damaged_record_is_a_miss_and_is_replaced(tmp_path, monkeypatch):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    cold, *_ = run(settings, verdicts)
    recorded = sorted(keys(settings.cache_dir, records=True))
    with diskcache.Cache(settings.cache_dir) as cache:
        values = {key: cache[key] for key in recorded}
        damaged = [
            lambda key: "{not json",
            lambda key: '"a string"',
            lambda key: values[key].replace('"format":1', '"format":2'),
            lambda key: values[recorded[0] if key != recorded[0] else recorded[1]],  # another key's
            lambda key: re.sub(r'"score":([0-9.e-]+)', r'"score":"\1"', values[key], count=1),
            lambda key: values[key].replace('"verdicts":[[', '"verdicts":[[null,', 1),
            lambda key: values[key][: len(values[key]) // 2],  # cut short
            lambda key: values[key].encode("utf-8"),  # bytes: read, checked like text
            lambda key: values[key].replace('"judgments":[[', '"judgments":[[7,', 1),
        ]
        for i, key in enumerate(recorded):
            cache[key] = damaged[i % len(damaged)](key)
    warm, seen, *_ = run(settings)
    assert comparable(warm) == comparable(cold) and seen[3] == 0
    with diskcache.Cache(settings.cache_dir) as cache:
        assert all(json.loads(cache[key][64:])["key"] == key for key in recorded)  # replaced by good ones
    with monkeypatch.context() as patch:
        refuse_judgments(patch)
        assert comparable(run(settings)[0]) == comparable(cold)


def test_replay_writes_no_records_and_stats_counts_them_apart(tmp_path, capsys):
    recorded = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))
    run(recorded, verdicts)
    replay = Settings(cache="replay", cache_dir=str(tmp_path / "ci-cache"), store_dir=recorded.store_dir)
    (tmp_path / "ci-cache").mkdir()
    run(replay)
    assert not (tmp_path / "ci-cache" / "cache.db").exists() or keys(replay.cache_dir, records=True) == []
    summary = cache_summary(recorded.cache_dir)
    assert summary["score_records"] == len(SAMPLES) * len(FIVE)
    assert summary["entries"] == len(keys(recorded.cache_dir, records=False))
    assert main(["cache", "stats", "--cache-dir", recorded.cache_dir]) == 0
    out = capsys.readouterr().out
    assert f"  entries: {summary['entries']}\n  score records: {len(SAMPLES) * len(FIVE)}\n" in out


def test_records_keep_their_judgments_in_use_so_prune_keeps_them(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))
    for judge in (verdicts, never, never):  # the third run is served from records
        *_, used = run(settings, judge)
        with Evaluator(settings) as ev:
            stored = ev.judge.store.keys()
    assert used == stored and stored


def test_a_sample_that_cannot_be_hashed_has_the_same_digest():
    sample = dataclasses.replace(SAMPLES[1], context_ids=("a", "b"))
    unhashable = dataclasses.replace(sample)
    object.__setattr__(unhashable, "context_ids", ["a", "b"])  # a list: lru_cache cannot take it
    with pytest.raises(TypeError):
        hash(unhashable)
    assert score_records.sample_digest(unhashable) == score_records.sample_digest(sample)


REFUSE_JUDGMENTS = """
from pytest_ragmetrics.judge.cache import CachedJudge

def refuse(*args, **kwargs):
    raise AssertionError("a score was made from its judgments")

CachedJudge.judge = CachedJudge.judge_many = refuse
"""

PYTEST_SUITE = """
import pytest
from pytest_ragmetrics import assert_context_precision, assert_context_recall, assert_context_relevance

@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_golden(rag_sample):
    assert_context_precision(rag_sample) >= 0.0
    assert_context_recall(rag_sample) >= 0.0
    assert_context_relevance(rag_sample, "sentence") >= 0.0
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_warm_pytest_run_is_served_from_records(pytester, workers):
    from tests.test_served_here import SCRIPTED_JUDGE, scripted_project

    scripted_project(pytester, 10, PYTEST_SUITE)
    pytester.runpytest_subprocess("-p", "no:randomly", "--rag-report-json=cold.json").assert_outcomes(
        passed=10
    )
    cache_dir = str(pytester.path / "cache")
    assert len(keys(cache_dir, records=True)) == 30
    pytester.makeconftest(SCRIPTED_JUDGE + REFUSE_JUDGMENTS)  # only the records can serve the run now
    result = pytester.runpytest_subprocess(
        "-p", "no:randomly", "--rag-cache=replay", "--rag-report-json=warm.json", *workers
    )
    result.assert_outcomes(passed=10)
    cold, warm = (json.loads(pytester.path.joinpath(f"{name}.json").read_text()) for name in ("cold", "warm"))
    assert warm["summary"]["judge"]["calls"] == 0
    assert (
        warm["summary"]["judge"]["recorded"]
        == cold["summary"]["judge"]["calls"] + cold["summary"]["judge"]["recorded"]
    )
    assert warm["summary"]["metrics"] == cold["summary"]["metrics"]


COUNT_READS = """
import json, pathlib
from pytest_ragmetrics.judge.cache import CachedJudge

reads = []
read_entries = CachedJudge.read_entries

def counted(self, keys):
    reads.append(len(keys))
    return read_entries(self, keys)

CachedJudge.read_entries = counted

def pytest_sessionfinish():
    pathlib.Path("reads.json").write_text(json.dumps(reads))
"""


def test_a_warm_pytest_run_reads_the_next_tests_records_with_the_running_ones(pytester):
    """The first test asks for each of its three scores in turn; every later test's records were read
    with them, so the run reads three times, not once per test."""
    from tests.test_served_here import SCRIPTED_JUDGE, scripted_project

    scripted_project(pytester, 10, PYTEST_SUITE)
    pytester.runpytest_subprocess("-p", "no:randomly").assert_outcomes(passed=10)
    pytester.makeconftest(SCRIPTED_JUDGE + REFUSE_JUDGMENTS + COUNT_READS)
    result = pytester.runpytest_subprocess("-p", "no:randomly", "--rag-report-json=warm.json")
    result.assert_outcomes(passed=10)
    assert json.loads(pytester.path.joinpath("reads.json").read_text()) == [1 + 9, 2 + 2 * 9, 3 + 3 * 9]
    judge = json.loads(pytester.path.joinpath("warm.json").read_text())["summary"]["judge"]
    assert judge["calls"] == 0 and judge["recorded"] > 0


def useful(flag):
    return lambda request: {"reason": "r", "useful": flag}


LIMIT = RagSample("What is the limit?", ["The limit is 5 GB."], ground_truth="The limit is 5 GB.", id="s2")
SAME = dataclasses.replace(LIMIT, id="s3")  # the same judgment, another record


def precision(settings, flag, sample=LIMIT, **kwargs):
    with Evaluator(settings, judge=ScriptedJudge(useful(flag)), **kwargs) as ev:
        return ev.score(sample, "context_precision").score


def test_every_refresh_outdates_the_records_made_before_it(tmp_path):
    """A session mixing refresh-marked and plain tests: a plain score made between two refreshes
    rests on a judgment the second refresh replaces."""
    other = RagSample("Where is Paris?", ["Paris is in France."], ground_truth="Paris is in France.", id="s1")
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    assert precision(settings, True) == precision(settings, True, other) == 1.0
    refresh = Evaluator(dataclasses.replace(settings, cache="refresh"), judge=ScriptedJudge(useful(False)))
    plain = Evaluator(settings, judge=ScriptedJudge(useful(False)))
    with refresh, plain:
        assert refresh.score(other, "context_precision").score == 0.0
        assert plain.score(LIMIT, "context_precision").score == 1.0  # not refreshed yet
        assert refresh.score(LIMIT, "context_precision").score == 0.0
    assert precision(settings, False) == precision(settings, False, score_records=False) == 0.0


def test_a_record_is_not_served_once_a_judgment_it_rests_on_is_gone_or_written_again(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    assert precision(settings, True) == 1.0
    drop(settings.cache_dir, records=False)  # the cache evicted the judgment, not the record
    with pytest.raises(JudgmentNotRecorded):
        precision(dataclasses.replace(settings, cache="replay"), True)
    assert precision(settings, False, SAME) == 0.0  # judged again: now it says otherwise
    assert precision(settings, False) == 0.0  # the record made from the old judgment is not served


def test_a_judgment_dropped_as_damaged_outdates_records_within_the_run(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    assert precision(settings, True) == 1.0
    with diskcache.Cache(settings.cache_dir) as cache:
        for key in keys(settings.cache_dir, records=False):
            cache[key] = "{damaged"
    with (
        Evaluator(settings, judge=ScriptedJudge(useful(False))) as ev,
        pytest.warns(Warning, match="damaged"),
    ):
        assert ev.score(SAME, "context_precision").score == 0.0
        assert ev.score(LIMIT, "context_precision").score == 0.0


def test_a_score_a_record_cannot_hold_is_still_served(tmp_path):
    judge = {"reason": "quote \ud800 here", "useful": True}  # a lone surrogate, as JSON can carry
    with (
        Evaluator(Settings(cache_dir=str(tmp_path / "cache")), judge=ScriptedJudge(lambda r: judge)) as ev,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # the cache cannot hold the judgment either, and says so
        assert ev.score(LIMIT, "context_precision").score == 1.0
    assert keys(str(tmp_path / "cache"), records=True) == []
    # The cache given up on closed its connections in every thread (Python 3.13 warns of any left).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gc.collect()
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_hits_are_counted_by_where_judgments_are_recorded(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))

    def hits(specs, judge=never, **kwargs):
        with Evaluator(settings, judge=ScriptedJudge(judge), **kwargs) as ev:
            for spec in specs:
                ev.evaluate(SAMPLES, [spec])
            return ev.stats.cache_hits, ev.stats.store_hits

    both = ["context_relevance[sentence]", "context_relevance[binary]"]
    hits(both, verdicts)
    hits(both)  # the store changed when the first run recorded: this one keeps the records
    assert hits(["context_relevance[binary]"]) == hits(["context_relevance[binary]"], score_records=False)
    assert hits(["context_relevance[binary]"])[1] > 0


def test_record_batches_waiting_for_the_io_thread_are_bounded(tmp_path, monkeypatch):
    """Records made faster than the I/O thread writes them (a first warm run) do not pile up."""
    futures = []

    def write_entries(self, pairs):
        futures.append(concurrent.futures.Future())
        return futures[-1]

    monkeypatch.setattr(CachedJudge, "write_entries", write_entries)
    with Evaluator(Settings(cache_dir=str(tmp_path / "cache"))) as ev:
        records = score_records.ScoreRecords(ev)
        for _ in range(score_records.WRITES_WAITING):
            records._pending = [("score:k", "v")]
            records.flush()
        assert len(futures) == score_records.WRITES_WAITING  # none waited
        threading.Timer(0.3, futures[0].set_result, [None]).start()
        start = time.monotonic()
        records._pending = [("score:k", "v")]
        records.flush()  # waits for the first batch to be written
        assert time.monotonic() - start >= 0.25 and futures[0].done()
        assert len(futures) == score_records.WRITES_WAITING + 1
