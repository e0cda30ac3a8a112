"""The warm path: recorded answers are found from cheap keys, without splitting or rendering again,
and give exactly the results the judge's own answers gave."""

import dataclasses
import json
import warnings
from typing import Any

import diskcache
import pytest
from judge_requests import make_request

from pytest_ragmetrics import EvaluationResult, Evaluator, RagSample, ScriptedJudge, Settings, judgments as J
from pytest_ragmetrics.engine import EVALUATION_BLOCK
from pytest_ragmetrics.errors import RagMetricsWarning
from pytest_ragmetrics.judge.base import JudgeRequest, canonical_json, conforms, schema_errors, text_json
from pytest_ragmetrics.text import default_splitter

# What is tested here is serving judgments: no finished scores kept in the cache.
FromJudgments = Evaluator

FIVE = [
    "context_precision",
    "context_recall",
    "context_relevance[graded]",
    "context_relevance[sentence]",
    "context_relevance[binary]",
]

SAMPLES = [
    RagSample(
        "Where is France and what is its capital?",
        [
            "The country is renowned for its wines. It has a rich cuisine.",
            "France is in Western Europe. Its capital is Paris.",
            "Cafe\u0301s line the boulevards.\r\nParis is the capital.  ",  # not in normalized form
        ],
        ground_truth="France is in Western Europe. Its capital is Paris.",
        id="france",
    ),
    RagSample(
        "What is the storage limit?",
        ["The limit is 5 GB. It applies to every plan. Older plans keep 2 GB.", "- * -"],
        ground_truth="The limit is 5 GB.",
        id="storage",
    ),
]


def verdicts(request):
    """Answers that depend on the inputs, so a wrong pairing of answer and request shows."""
    inputs = request.inputs
    first = inputs.get("first_sentence", 1)
    if request.kind == J.PRECISION:
        return {"reason": "names it", "useful": "capital" in inputs["chunk"] or "limit" in inputs["chunk"]}
    if request.kind == J.RECALL:
        joined = " ".join(inputs["contexts"])
        return {
            f"sentence_{i}": {"reason": f"sentence {i}", "attributed": sentence.split()[1] in joined}
            for i, sentence in enumerate(inputs["reference_sentences"], start=first)
        }
    if request.kind == J.SENTENCES:
        chosen = [i for i, s in enumerate(inputs["sentences"], start=first) if "capital" in s or "GB" in s]
        return {"reason": f"{len(chosen)} needed", "relevant_sentences": chosen}
    return {"reason": "rated", "rating": 2 if "capital" in inputs["chunk"] else 0}


def never(request):
    raise AssertionError(f"a warm run must not call the judge ({request.label})")


class CountingSplitter:
    """The default splitter, counting the texts it splits."""

    def __init__(self, fingerprint: bool = True) -> None:
        self.texts: list[str] = []
        if fingerprint:
            self.fingerprint = default_splitter().fingerprint

    def __call__(self, text: str) -> list[str]:
        self.texts.append(text)
        return default_splitter()(text)


def comparable(result: EvaluationResult) -> dict[str, Any]:
    """Everything in the results except whether each came from the judge or a recording."""
    data = result.to_json()
    for scores in data["samples"].values():
        for score in scores.values():
            score.pop("cached")
    return data


@pytest.mark.parametrize("fingerprint", [True, False], ids=["splitter-with-fingerprint", "plain-splitter"])
def test_cache_and_store_replays_give_the_judges_results_exactly(tmp_path, fingerprint):
    settings = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))
    with FromJudgments(settings, judge=ScriptedJudge(verdicts), splitter=CountingSplitter(fingerprint)) as ev:
        cold = ev.evaluate(SAMPLES, FIVE)
        again = ev.evaluate(SAMPLES, FIVE)  # from memory
    with FromJudgments(settings, judge=ScriptedJudge(never), splitter=CountingSplitter(fingerprint)) as ev:
        from_cache = ev.evaluate(SAMPLES, FIVE)
    replay = Settings(cache="replay", cache_dir=str(tmp_path / "empty"), store_dir=str(tmp_path / "store"))
    with FromJudgments(replay, judge=ScriptedJudge(never), splitter=CountingSplitter(fingerprint)) as ev:
        from_store = ev.evaluate(SAMPLES, FIVE)
    expected = comparable(cold)
    assert comparable(again) == comparable(from_cache) == comparable(from_store) == expected
    # The verdicts quote the chunks' own text, not their normalized form.
    quoted = expected["samples"]["france"]["context_relevance[binary]"]["verdicts"][2]["extracted"]
    assert quoted == ["Paris is the capital."]
    chunk = expected["samples"]["france"]["context_relevance[sentence]"]["verdicts"][2]
    assert chunk["verdict"] == "1/2 sentences needed"
    assert expected["samples"]["storage"]["context_relevance[sentence]"]["verdicts"][1]["reason"] == (
        "empty chunk"
    )


def test_a_warm_rerun_splits_no_chunk(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"), store_dir=str(tmp_path / "store"))
    sentence_methods = ["context_relevance[sentence]", "context_relevance[binary]"]
    splitter = CountingSplitter()
    with FromJudgments(settings, judge=ScriptedJudge(verdicts), splitter=splitter) as ev:
        ev.evaluate(SAMPLES, sentence_methods)
    assert SAMPLES[1].contexts[0] in splitter.texts  # the cold run split it to ask the judge
    for where in (
        settings,
        Settings(cache="replay", cache_dir=str(tmp_path / "none"), store_dir=settings.store_dir),
    ):
        splitter = CountingSplitter()
        with FromJudgments(where, judge=ScriptedJudge(never), splitter=splitter) as ev:
            ev.evaluate(SAMPLES, sentence_methods)
        # Split again: the chunk not in normalized form (to quote its own sentences) and the one
        # without sentences (no judgment records that). No chunk with a recorded judgment.
        assert sorted(set(splitter.texts)) == sorted([SAMPLES[0].contexts[2], "- * -"])


def test_sentence_judgments_are_keyed_on_the_chunk_and_the_splitter(tmp_path):
    params = J.JudgeParams("m")
    request = J.chunk_sentences_request("q?", "A. B.", "punkt-x", lambda t: ["A.", "B."], params)
    other_splitter = J.chunk_sentences_request("q?", "A. B.", "punkt-y", lambda t: ["A.", "B."], params)
    assert request.key_inputs == {"question": "q?", "chunk": "A. B.", "splitter": "punkt-x"}
    assert request.cache_key() != other_splitter.cache_key()
    assert request.inputs["sentences"] == ["A.", "B."]  # what the judge is shown, numbered
    assert request.schema["properties"]["relevant_sentences"]["items"]["enum"] == [1, 2]
    assert json.loads(request.messages[1]["content"])["sentences"] == {"1": "A.", "2": "B."}


def recorded_requests() -> list[JudgeRequest]:
    params = J.JudgeParams("m", temperature=0.1, seed=None, n=3)
    return [
        make_request(1),
        J.precision_request("Q?", "Ref.", "ground_truth", "Chunk \u00e9.", params),
        J.precision_request("Q?", "Answer.", "answer", "Chunk.", params),
        J.recall_request("Q?", ["C2.", "C1."], ["S1.", "S2."], params),
        J.sentences_request("Q?", ["A.", "B."], params),
        J.chunk_sentences_request("Q?", "A. B.", "punkt-1", lambda t: ["A.", "B."], params),
        J.graded_request("Q?", "Chunk.", J.JudgeParams("m")),
    ]


@pytest.mark.parametrize("request_", recorded_requests(), ids=lambda r: f"{r.kind}-{r.prompt_version}")
def test_the_key_text_is_the_canonical_json_of_the_key_material(request_):
    assert request_._canonical_key() == canonical_json(request_.key_material())
    # A complete copy (what dataclasses.replace gives) has the same key.
    copy = dataclasses.replace(request_, label="elsewhere")
    assert type(copy) is JudgeRequest
    assert copy.cache_key() == request_.cache_key()
    assert copy.messages == request_.messages and copy.schema == request_.schema


def test_a_key_text_encodes_every_text_as_canonical_json_does_the_second_time_too():
    """Texts a key holds are encoded once while remembered: escapes, lone surrogates and texts in
    lists read the same whether encoded now or remembered from an earlier key."""
    odd = 'say "hi"\\ \n\t\x00\x1f \u2028 caf\u00e9 \ud800 \U0001f600 /'
    inputs: dict[str, Any] = {
        "question": odd,
        "contexts": [odd, "", "plain"],
        "first_sentence": 2,
        "mixed": [odd, 1, None],
        "nested": {"b": odd, "a": [True, 0.5]},
        'n\u00e4me "quoted"': odd,
    }
    request = JudgeRequest("kind", "v1", "m", (), "kind", {"type": "object"}, inputs)
    expected = canonical_json(request.key_material())
    assert request._canonical_key() == expected
    assert request._canonical_key() == expected  # every text remembered now
    numbered: Any = {1: odd, 2: "b"}  # names that are not text: as json writes them
    request = JudgeRequest("kind", "v1", "m", (), "kind", {}, numbered)
    assert request._canonical_key() == canonical_json(request.key_material())
    # Texts alone, under names a template would misread, and no inputs at all.
    for texts in ({'n%s "q"\u00e9': odd, "%%": "", "a": "plain"}, {"b": odd}, {}):
        for _ in range(2):
            request = JudgeRequest("kind", "v1", "m", (), "kind", {}, texts)
            assert request._canonical_key() == canonical_json(request.key_material())


def test_names_that_once_held_a_list_key_texts_and_lists_as_canonical_json_does_from_then_on():
    """A recall request's names hold lists of texts: its keys are put together value by value from
    the first list on, and a later request of texts alone under the same names keys as before."""
    names = ("question", "reference_sentences", "z_kind")  # a layout of its own in this test
    for values in (
        ("Q?", "S1.", "k"),
        ("Q?", ["S1.", "S\u00e9 2."], "k"),
        ("Q?", "S1.", "k"),
        ("Q?", [], "k"),
    ):
        for _ in range(2):
            inputs = dict(zip(names, values, strict=True))
            request = JudgeRequest("kind", "v1", "m", (), "kind", {}, inputs)
            assert request._canonical_key() == canonical_json(request.key_material())


def test_damaged_recorded_sentences_are_a_cache_miss(tmp_path):
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    sample = SAMPLES[1]
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        first = ev.score(sample, "context_relevance", "sentence")
    with diskcache.Cache(str(tmp_path / "cache")) as cache:
        for key in list(cache.iterkeys()):
            record = json.loads(cache[key])
            record["derived"] = {"sentences": "not a list"}
            cache[key] = json.dumps(record)
    judge = ScriptedJudge(verdicts)
    with FromJudgments(settings, judge=judge) as ev, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again = ev.score(sample, "context_relevance", "sentence")
    assert judge.calls == 1 and again.score == first.score
    assert any(issubclass(w.category, RagMetricsWarning) and "damaged" in str(w.message) for w in caught)


def test_a_warm_evaluation_reads_and_checks_each_recorded_judgment_once(tmp_path, monkeypatch):
    """Sentence and binary relevance share a chunk's judgment: it is read from disk and its recorded
    sentences checked once per run, then reused from memory, however many samples the run holds
    (here several times more judgments than the answers kept in memory)."""
    count = EVALUATION_BLOCK + 6  # two blocks of samples
    samples = [
        RagSample(
            f"What is the limit of plan {i}?", [f"Plan {i} has {i} GB. It is fixed."], ground_truth=f"{i} GB."
        )
        for i in range(count)
    ]
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        ev.evaluate(samples, FIVE)
    checked = []
    check = J._check_sentences

    def counting(values):
        checked.append(values)
        check(values)

    monkeypatch.setattr(J, "_check_sentences", counting)
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        ev.judge._memory_entries = EVALUATION_BLOCK + 2  # a quarter of the run's judgments
        ev.evaluate(samples, FIVE)
        stats = ev.stats
    distinct = count * 4  # precision, recall, graded and the sentences of the one chunk
    assert (stats.cache_hits, stats.reused) == (distinct, count)  # binary reuses sentence's
    assert len(checked) == count  # the recorded sentences: checked as read, not again when reused


def test_a_chunk_without_sentences_is_not_judged_even_in_replay(tmp_path):
    settings = Settings(cache="replay", cache_dir=str(tmp_path / "cache"))
    sample = RagSample("What is it?", ["- * -"], ground_truth="It.", id="empty")
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        result = ev.score(sample, "context_relevance", "binary")
    assert result.score == 0.0 and result.verdicts[0].reason == "empty chunk"


SCHEMAS = [
    J._precision_schema(),
    J._recall_schema(1, 2),
    J._recall_schema(31, 2),
    J._sentences_schema(1, 3),
    J._graded_schema(),
    J._claims_schema(1, 2),
    {"type": "number"},
    {"type": "boolean", "enum": [True]},
    {"type": "integer", "enum": [0, 1]},
    {"type": "string", "enum": ["a"]},
    {"type": "array", "items": {"type": "boolean"}},
    {"type": ["string", "null"]},
    {"type": "array"},
    # An optional property, an object open to others, an enum of objects, a nested array.
    {"type": "object", "properties": {"reason": {"type": "string"}, "rating": {"type": "integer"}}},
    {"type": "object", "properties": {"reason": {"type": "string"}}, "required": ["reason"]},
    {"type": "object", "enum": [{"reason": "r", "rating": 2}]},
    {"type": "array", "items": {"type": "array", "items": {"type": "integer", "enum": [1, 3]}}},
    {"enum": [1, "a", None]},
]
VALUES = [
    {"reason": "r", "useful": True},
    {"reason": "r", "useful": 1},
    {"reason": 1, "useful": True},
    {"reason": "r", "useful": "yes"},
    {
        "sentence_1": {"claims": [{"claim": "c", "reason": "r", "attributed": True}]},
        "sentence_2": {"claims": []},
    },
    {
        "sentence_1": {"claims": [{"claim": 1, "reason": "r", "attributed": True}]},
        "sentence_2": {"claims": []},
    },
    {"reason": "r"},
    {"reason": "r", "useful": False, "extra": 1},
    {"sentence_1": {"reason": "r", "attributed": True}, "sentence_2": {"reason": "r", "attributed": False}},
    {"sentence_1": {"reason": "r", "attributed": True}, "sentence_2": {"reason": 3, "attributed": False}},
    {"reason": "r", "relevant_sentences": [1, 3]},
    {"reason": "r", "relevant_sentences": [4]},
    {"reason": "r", "relevant_sentences": [True]},
    {"reason": "r", "relevant_sentences": (1,)},
    {"reason": "r", "relevant_sentences": [[1]]},  # unhashable: in no enum, and no TypeError
    {"reason": "r", "rating": {"value": 2}},
    {"reason": "r", "rating": 2},
    {"reason": "r", "rating": 2.0},
    {"reason": "r", "rating": True},
    {"reason": "r", "rating": 3},
    1.5,
    float("nan"),
    True,
    False,
    "text",
    None,
    [1, "a"],
    [],
    [True, False],
    0,
    1,
    "a",
    {"reason": "r", "rating": 2},
    {},
    [[1, 3], [3]],
    [[1, 2]],
    [[True]],
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=lambda s: canonical_json(s)[:40])
def test_the_compiled_check_agrees_with_schema_errors(schema):
    for value in VALUES:
        assert conforms(schema, value) == (not schema_errors(schema, value)), value


def test_a_long_chunk_is_judged_in_windows_and_rerun_without_splitting(tmp_path):
    chunk = " ".join(f"Fact number {i} is about GB limits." for i in range(1, 451))
    sample = RagSample("What is the storage limit?", [chunk], ground_truth="It is 5 GB.", id="long")
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    judge = ScriptedJudge(verdicts)
    with FromJudgments(settings, judge=judge) as ev:
        cold = ev.score(sample, "context_relevance", "sentence")
    # Sorted: under xdist the windows are claimed in the shared cache from threads, in any order.
    firsts = sorted(r.inputs.get("first_sentence", 1) for r in judge.requests)
    assert firsts == [1, J.SENTENCE_WINDOW + 1, 2 * J.SENTENCE_WINDOW + 1]
    assert cold.verdicts[0].label == "450/450 sentences needed"
    splitter = CountingSplitter()
    with FromJudgments(settings, judge=ScriptedJudge(never), splitter=splitter) as ev:
        warm = ev.score(sample, "context_relevance", "sentence")
    assert splitter.texts == [] and warm.to_json() == {**cold.to_json(), "cached": True}


def test_an_in_place_edit_of_a_store_line_is_scored_the_same_locally_and_in_ci_replay(tmp_path):
    """A reviewed correction of one answer, the line's size and modification time kept: the local
    run (its cache still holding the old answer) and a CI replay (the store alone) score the edit."""
    import os

    from pytest_ragmetrics import RagSample, ScriptedJudge, Settings

    sample = RagSample(
        "Capital of France?", ["Paris is the capital.", "Bread is tasty."], ground_truth="Paris."
    )
    store_dir, cache_dir = tmp_path / "judgments", tmp_path / "cache"
    with Evaluator(
        Settings(cache_dir=str(cache_dir), store_dir=str(store_dir)),
        judge=ScriptedJudge(lambda r: {"reason": "says so!", "useful": True}),
    ) as ev:
        assert ev.score(sample, "context_precision").score == 1.0
    (path,) = [
        p for p in store_dir.glob("*.jsonl") if "Paris is the capital." in p.read_text(encoding="utf-8")
    ]
    before, stat = path.read_bytes(), path.stat()
    lines = before.split(b"\n")
    i = next(i for i, line in enumerate(lines) if b"Paris is the capital." in line)
    lines[i] = lines[i].replace(b'"reason":"says so!","useful":true', b'"reason":"says no","useful":false')
    path.write_bytes(b"\n".join(lines))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert path.stat().st_size == len(before)

    def never(request):
        raise AssertionError("recorded: the judge is not asked")

    local = Settings(cache_dir=str(cache_dir), store_dir=str(store_dir))
    ci = Settings(cache_dir=str(tmp_path / "fresh"), store_dir=str(store_dir), cache="replay")
    scores = []
    for settings in (local, ci):
        with Evaluator(settings, judge=ScriptedJudge(never)) as ev:
            scores.append(ev.score(sample, "context_precision").score)
    assert scores == [0.5, 0.5]  # the first chunk is no longer useful, in both


def count_sentence_requests(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The chunks each sentence request is built for from now on, in order."""
    built: list[str] = []
    build = J.chunk_sentences_request

    def counting(question, chunk, *args, **kwargs):
        built.append(chunk)
        return build(question, chunk, *args, **kwargs)

    monkeypatch.setattr(J, "chunk_sentences_request", counting)
    return built


def test_sentence_binary_and_any_relevance_build_and_key_each_chunks_request_once(tmp_path, monkeypatch):
    """The three sentence methods of a sample ask the same judgment per chunk: its request is built
    (and its key computed) once, cold and warm, and the scores are those of separate requests."""
    methods = ["context_relevance[sentence]", "context_relevance[binary]", "context_relevance[any]"]
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        cold = ev.evaluate(SAMPLES, methods)
    built = count_sentence_requests(monkeypatch)
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        warm = ev.evaluate(SAMPLES, methods)
        stats = ev.stats
    chunks = [c for s in SAMPLES for c in s.contexts]
    assert len(built) == len(chunks) == len(set(built))  # once per chunk, not once per method
    assert stats.cache_hits == len(chunks) - 1  # "- * -" has no sentences: never judged
    assert comparable(warm) == comparable(cold)


def test_a_chunks_sentence_request_is_kept_for_binary_relevance_however_many_samples_came_before(
    tmp_path, monkeypatch
):
    """The sentence requests kept are the latest: when the table is full the oldest goes, never those
    of the samples in flight, so binary relevance finds every chunk's request sentence relevance built."""
    from pytest_ragmetrics import engine
    from pytest_ragmetrics.metrics import builtin

    samples = [dataclasses.replace(s, id=f"{s.id}-{i}") for i in range(4) for s in SAMPLES[:2]]
    methods = ["context_relevance[sentence]", "context_relevance[binary]"]
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        ev.evaluate(samples, methods)
    built = count_sentence_requests(monkeypatch)
    block = 2  # samples scored together, each method in turn over them
    monkeypatch.setattr(engine, "EVALUATION_BLOCK", block)
    chunks = [len(s.contexts) for s in samples]
    monkeypatch.setattr(builtin, "ASKED_ENTRIES", max(chunks) * block + 1)  # a block's, and one more
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:
        ev.evaluate(samples, methods)
    assert len(built) == sum(chunks)  # once per chunk of every sample: binary relevance built none


def test_the_engine_copies_every_field_of_a_metrics_result():
    """Filling in the engine's fields copies the rest of a result unchanged, whatever the field."""
    from pytest_ragmetrics.engine import _finished
    from pytest_ragmetrics.judge.base import Usage
    from pytest_ragmetrics.results import MetricResult, Verdict

    result = MetricResult(
        0.25, "m", "x", (Verdict("chunk", 1, "t", 1.0, "useful", "r", 1),), "why", "s1", "mode",
        cached=False, judge_calls=2, usage=Usage(3, 4), models={"a": 0.5}, labels_found=True,
        labelled=0.5, outcome=None,
    )  # fmt: skip
    filled = _finished(result, ("j",), "sk", "rk", ("p-1",), "splitter", "temperature 0, seed 0, n 1")
    expected = dataclasses.replace(
        result,
        judges=("j",),
        sample_key="sk",
        reference_key="rk",
        prompt_versions=("p-1",),
        splitter="splitter",
        sampling="temperature 0, seed 0, n 1",
    )
    for f in dataclasses.fields(MetricResult):
        assert getattr(filled, f.name) == getattr(expected, f.name), f.name
    assert type(filled) is MetricResult and filled.name == "m[x]" and float(filled) == 0.25
    with pytest.raises(dataclasses.FrozenInstanceError):
        filled.score = 1.0  # type: ignore[misc]


def test_equal_samples_share_their_content_keys_and_different_ones_do_not():
    from pytest_ragmetrics.engine import _compute_reference_key, _compute_sample_key, _sample_keys

    a = SAMPLES[0]
    same = dataclasses.replace(a)  # equal, another object
    other = dataclasses.replace(a, contexts=a.contexts[:1])
    assert _sample_keys(a) == _sample_keys(same) == (_compute_sample_key(a), _compute_reference_key(a))
    assert _sample_keys(other)[0] != _sample_keys(a)[0] and _sample_keys(other)[1] == _sample_keys(a)[1]


@pytest.mark.parametrize(
    "sample",
    [
        SAMPLES[0],
        RagSample("Qu'est-ce ?", ["\u00c9t\u00e9 \U0001f600 \"x\"\n", ""], answer="Oui."),
        RagSample("q", [], ground_truth=""),
        RagSample(
            "q",
            ["a", "b"],
            ground_truth="g",
            context_ids=["d1", "d2"],
            reference_context_ids={"d2": 2, "d1": 1},
            reference_contexts=["r"],
        ),
    ],
)
def test_content_keys_are_digests_of_the_samples_json_however_its_texts_are_encoded(sample):
    """A sample's content keys stay what runs and baselines recorded: the digest of the JSON of its
    texts (and labels), whether or not the keys of its judgments encoded those texts before."""
    import hashlib

    from pytest_ragmetrics.engine import _compute_reference_key, _compute_sample_key

    def digest(material: list[Any]) -> str:
        return hashlib.sha256(json.dumps(material, ensure_ascii=False).encode("utf-8")).hexdigest()[:16]

    material = [sample.question, list(sample.contexts), sample.ground_truth, sample.answer]
    if sample.context_ids is not None:
        grades = sorted(sample.reference_context_ids.items())
        material += [list(sample.context_ids), grades, list(sample.reference_contexts)]
    reference = sample.ground_truth if sample.ground_truth is not None else sample.answer
    extra = []
    if sample.reference_context_ids is not None:
        extra = [sorted(sample.reference_context_ids.items()), list(sample.reference_contexts)]
    for _ in range(2):  # the texts' JSON not kept yet, then kept
        assert _compute_sample_key(sample) == digest(material)
        assert _compute_reference_key(sample) == digest([sample.question, reference, *extra])
        for text in [sample.question, *sample.contexts]:
            text_json(text)


def test_each_request_is_labelled_with_its_metric_sample_and_chunk():
    """A request's label names what it judges, as messages show it (not part of any key)."""
    judge = ScriptedJudge(verdicts)
    methods = ["context_precision", "context_relevance[graded]", "context_relevance[sentence]"]
    with FromJudgments(Settings(cache="off"), judge=judge) as ev:
        ev.evaluate(SAMPLES[:1], methods)
    expected = {
        f"{metric} of sample 'france', chunk {rank}"
        for metric in ("context_precision", "context_relevance")
        for rank in (1, 2, 3)
    }
    assert {r.label for r in judge.requests} == expected
    assert len(judge.requests) == 9  # precision, graded and sentence relevance of three chunks


def test_verdicts_and_results_are_built_as_their_dataclass_fields_say():
    """Their constructor sets every field, positional or by keyword, with each field's default or
    default factory, keeps them frozen, and still checks a result's score."""
    from pytest_ragmetrics.judge.base import Usage
    from pytest_ragmetrics.results import MetricResult, Verdict

    verdict = Verdict("chunk", 2, "t", 0.0, "not useful", "r", cached=False)
    assert [getattr(verdict, f.name) for f in dataclasses.fields(Verdict)] == [
        "chunk", 2, "t", 0.0, "not useful", "r", None, (), False, None, ()
    ]  # fmt: skip
    assert verdict == Verdict("chunk", 2, "t", 0.0, "not useful", "r", None, (), False)
    result, other = MetricResult(0.5, "m"), MetricResult(0.5, "m")
    assert result.usage == Usage() and result.usage is not other.usage  # a factory's, made per result
    for f in dataclasses.fields(MetricResult):
        if f.name not in ("score", "metric", "usage"):
            assert getattr(result, f.name) == f.default, f.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        verdict.index = 3  # type: ignore[misc]
    with pytest.raises(ValueError, match="score must be in"):
        MetricResult(1.5, "m")

    class Tagged(Verdict):  # a subclass, with an instance dict: another layout
        pass

    tagged = Tagged("chunk", 2, "t", 0.0, "not useful", "r", cached=False)
    assert type(tagged) is Tagged and type(verdict) is Verdict and type(result) is MetricResult
    assert [getattr(tagged, f.name) for f in dataclasses.fields(Verdict)] == [
        getattr(verdict, f.name) for f in dataclasses.fields(Verdict)
    ]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tagged.index = 3  # type: ignore[misc]
    from pytest_ragmetrics.judge.base import JudgeAnswer

    answer = JudgeAnswer(({"a": 1},), Usage(3, 4), "m", "t", "cache", {"s": 1})
    assert [getattr(answer, f.name) for f in dataclasses.fields(JudgeAnswer)] == [
        ({"a": 1},), Usage(3, 4), "m", "t", "cache", {"s": 1}
    ]  # fmt: skip
    assert JudgeAnswer(choices=()).usage is JudgeAnswer(choices=()).usage == Usage()  # its default
    assert Usage(1, 2) + Usage(completion_tokens=5) == Usage(1, 7)
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.model = "other"  # type: ignore[misc]


def test_recorded_sentences_are_taken_once_checked_and_handed_back_as_the_answers_derived_inputs():
    params = J.JudgeParams("m")

    def request() -> JudgeRequest:
        return J.chunk_sentences_request("q?", "A. B.", "punkt-x", lambda t: ["never split"], params)

    taken = request()
    recorded = {"sentences": ["A.", "B."], "sentence_count": 2, "question": "q?", "chunk": "A. B."}
    values = taken.provide(recorded)
    assert values == {"sentences": ["A.", "B."], "sentence_count": 2}  # the derived ones only
    assert taken.derived_inputs() == values and taken.inputs["sentences"] == ["A.", "B."]
    assert taken.provide({"sentences": ["C."], "sentence_count": 1}) is None  # it holds its own
    assert taken.inputs["sentences"] == ["A.", "B."]
    for damaged in (None, ["A."], {"sentences": ["A."]}, {"sentences": [""], "sentence_count": 1},
                    {"sentences": ["A.", 2], "sentence_count": 2}, {"sentences": ["A."], "sentence_count": True},
                    {"sentences": [], "sentence_count": 0}):  # fmt: skip
        with pytest.raises(ValueError):
            request().provide(damaged)
    checked = request()
    assert checked.provide(values, checked=True) is values  # from memory: not checked again
    assert checked.inputs["sentences"] == ["A.", "B."]
    assert J.graded_request("q?", "A.", params).provide(recorded) is None  # nothing derived


def test_a_closed_evaluator_lets_go_of_the_answers_its_judge_kept(tmp_path):
    """They go with the run, not at the garbage collector's next full pass over a dead judge."""
    settings = Settings(cache_dir=str(tmp_path / "cache"))
    with FromJudgments(settings, judge=ScriptedJudge(verdicts)) as ev:
        first = ev.evaluate(SAMPLES, FIVE)
        judge = ev.judge
        assert len(judge._memory) == judge.stats.calls > 0
    assert len(judge._memory) == 0
    with FromJudgments(settings, judge=ScriptedJudge(never)) as ev:  # served from disk again
        assert comparable(ev.evaluate(SAMPLES, FIVE)) == comparable(first)


def test_an_object_made_without_the_class_call_is_the_one_the_class_makes():
    """A verdict, a result, an answer and its usage made by the functions the warm path uses are
    ordinary, frozen objects of their class, equal to ``cls(...)``'s, with its defaults and its check."""
    import pickle

    from pytest_ragmetrics.judge.base import JudgeAnswer, Usage, _new_answer, _new_usage
    from pytest_ragmetrics.results import MetricResult, Verdict, new_result, new_verdict

    made: list[tuple[Any, Any]] = [
        (new_verdict("chunk", 2, "text", 1.0, "useful", "why", 2, cached=False),
         Verdict("chunk", 2, "text", 1.0, "useful", "why", 2, cached=False)),
        (new_result(0.5, "context_relevance", "binary", explanation="half"),
         MetricResult(0.5, "context_relevance", "binary", explanation="half")),
        (_new_answer(({"useful": True},), _new_usage(3, 4), "m", "now", "cache"),
         JudgeAnswer(({"useful": True},), Usage(3, 4), "m", "now", "cache")),
    ]  # fmt: skip
    for fast, plain in made:
        assert type(fast) is type(plain)
        assert dataclasses.astuple(fast) == dataclasses.astuple(plain)
        assert dataclasses.astuple(pickle.loads(pickle.dumps(fast))) == dataclasses.astuple(plain)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(fast, dataclasses.fields(fast)[0].name, "changed")
    result = made[1][0]
    assert isinstance(result, MetricResult) and result.usage == Usage() and result.judges == ()  # defaults
    with pytest.raises(ValueError, match=r"score must be in \[0, 1\]"):
        new_result(1.5, "context_precision")  # the class's own check runs
