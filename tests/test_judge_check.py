"""The judge check (--rag-judge-check, rag_judge_agreement) through real pytest runs, judged over HTTP
by the fake judge server through the real openai client."""

import hashlib
import json
import random
from collections.abc import Iterable, Mapping
from typing import Any

import pytest

# Keep one copy of the package's classes for the outer and the in-process inner runs.
import pytest_ragmetrics.calibration.check
import pytest_ragmetrics.engine
import pytest_ragmetrics.judge.openai_judge
import pytest_ragmetrics.report.terminal  # noqa: F401
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value

pytest_plugins = ["pytester"]

QUESTION = "Where is France and what is its capital?"
REFERENCE = "France is in Western Europe. Its capital is Paris."
PARIS = "Paris is the capital of France."
EUROPE = "France is in Western Europe."
CUISINE = "The cuisine is famous."
WINE = "Wine is made in Bordeaux."

LABELS: list[dict[str, Any]] = [
    {
        "id": "p1",
        "kind": "context_precision",
        "question": QUESTION,
        "reference": REFERENCE,
        "chunk": PARIS,
        "useful": True,
    },
    {
        "id": "p2",
        "kind": "context_precision",
        "question": QUESTION,
        "reference": REFERENCE,
        "chunk": CUISINE,
        "useful": False,
        "reason": "food",
    },
    {
        "id": "p3",
        "kind": "context_precision",
        "question": QUESTION,
        "reference": REFERENCE,
        "chunk": EUROPE,
        "useful": True,
    },
    {
        "id": "p4",
        "kind": "context_precision",
        "question": QUESTION,
        "reference": REFERENCE,
        "chunk": WINE,
        "useful": False,
    },
    {"id": "g1", "kind": "context_relevance_graded", "question": QUESTION, "chunk": PARIS, "rating": 2},
    {"id": "g2", "kind": "context_relevance_graded", "question": QUESTION, "chunk": EUROPE, "rating": 1},
    {"id": "g3", "kind": "context_relevance_graded", "question": QUESTION, "chunk": CUISINE, "rating": 0},
    {
        "id": "s1",
        "kind": "context_relevance_sentences",
        "question": QUESTION,
        "chunk": f"{CUISINE} {PARIS}",
        "relevant_sentences": [2],
    },
    {
        "id": "s2",
        "kind": "context_relevance_sentences",
        "question": QUESTION,
        "chunk": f"{CUISINE} {WINE}",
        "relevant_sentences": [],
    },
    {
        "id": "r1",
        "kind": "context_recall",
        "question": QUESTION,
        "contexts": [EUROPE, PARIS],
        "reference": REFERENCE,
        "attributed": [True, True],
    },
    {
        "id": "r2",
        "kind": "context_recall",
        "question": QUESTION,
        "contexts": [CUISINE, EUROPE],
        "reference": REFERENCE,
        "attributed": [True, False],
    },
]

FLOORS = """
rag_judge_check = labels.jsonl
rag_judge_agreement =
    context_precision kappa >= 0.6
    context_recall kappa >= 0.6
    context_relevance[graded] weighted_kappa >= 0.6
    context_relevance[sentence] kappa >= 0.6
"""


def _payload(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return body["response_format"]["json_schema"]["name"], json.loads(body["messages"][-1]["content"])


def labelled_judge(body: dict[str, Any]) -> dict[str, Any]:
    """Answers exactly as the labels say (looked up by the texts the request carries)."""
    kind, payload = _payload(body)
    for item in LABELS:
        if item["kind"] != kind or item["question"] != payload["question"]:
            continue
        if kind == "context_precision" and item["chunk"] == payload["chunk"]:
            return {"reason": "as labelled", "useful": item["useful"]}
        if kind == "context_relevance_graded" and item["chunk"] == payload["chunk"]:
            return {"reason": "as labelled", "rating": item["rating"]}
        if kind == "context_relevance_sentences" and item["chunk"] == " ".join(payload["sentences"].values()):
            return {"reason": "as labelled", "relevant_sentences": item["relevant_sentences"]}
        if kind == "context_recall" and sorted(item["contexts"]) == sorted(payload["contexts"].values()):
            return {
                f"sentence_{i}": {"reason": "as labelled", "attributed": a}
                for i, a in enumerate(item["attributed"], 1)
            }
    # Not labelled (a test's own sample): anything conforming.
    anything: dict[str, Any] = conforming_value(body["response_format"]["json_schema"]["schema"])
    return anything


def _negative(schema: dict[str, Any]) -> Any:  # a JSON value of the schema's shape
    if "enum" in schema:
        return min(schema["enum"])
    kind: str = schema.get("type", "")
    if kind == "object":
        return {name: _negative(sub) for name, sub in schema["properties"].items()}
    return {"array": [], "boolean": False, "string": "no", "integer": 0}[kind]


def always_no(body):
    return _negative(body["response_format"]["json_schema"]["schema"])


def random_judge(body):
    """A coin-flipping judge, deterministic per request content (seeded by its hash)."""
    seed = int(hashlib.sha256(json.dumps(body["messages"]).encode()).hexdigest()[:16], 16)
    rng = random.Random(seed)

    def draw(schema: dict[str, Any]) -> Any:  # a JSON value of the schema's shape
        if "enum" in schema:
            return rng.choice(schema["enum"])
        kind: str = schema.get("type", "")
        if kind == "object":
            return {name: draw(sub) for name, sub in schema["properties"].items()}
        if kind == "array":
            return [v for v in schema["items"]["enum"] if rng.random() < 0.5]
        return {"boolean": rng.random() < 0.5, "string": "coin"}.get(kind)

    return draw(body["response_format"]["json_schema"]["schema"])


def garbled(body):
    """Answers as labelled, except prose (never JSON, also when asked again) for the items with cuisine."""
    if CUISINE in body["messages"][1]["content"]:
        return "The passage is about food, so I would say no."
    return labelled_judge(body)


JUDGES = {
    "labelled": labelled_judge,
    "always-yes": None,
    "always-no": always_no,
    "random": random_judge,
    "garbled": garbled,
}


@pytest.fixture
def serve(monkeypatch):
    servers = []

    def start(name, model=None):
        server = FakeJudgeServer(JUDGES[name]).start()
        servers.append(server)
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("RAGMETRICS_JUDGE_MODEL", model or name)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        return server

    yield start
    for server in servers:
        server.stop()


def write_labels(pytester: pytest.Pytester, items: Iterable[Mapping[str, Any]] = LABELS) -> None:
    (pytester.path / "labels.jsonl").write_text("".join(json.dumps(i) + "\n" for i in items))


@pytest.fixture
def project(pytester):
    write_labels(pytester)
    pytester.makeini("[pytest]\nrag_gates = context_precision mean >= 0.1\n" + FLOORS)
    pytester.makepyfile(
        test_rag=f"""
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_precision():
            sample = RagSample({QUESTION!r}, [{PARIS!r}], ground_truth={REFERENCE!r}, id="s")
            assert_context_precision(sample) >= 0.0
        """
    )
    return pytester


def test_a_judge_that_answers_like_the_labels_passes_with_perfect_agreement(project, serve):
    server = serve("labelled")
    result = project.runpytest("--rag-report", "--rag-report-json=report.json")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(
        [
            "*- judge check -*",
            "labelled set labels.jsonl, judge labelled",
            "kind * unit * n * accuracy * kappa * weighted_kappa * f1",
            "context_precision * chunk * 4 * 1.000 * 1.000 * - * 1.000",
            "context_recall * reference sentence * 4 * 1.000 * 1.000 * - * 1.000",
            "context_relevance_graded * chunk * 3 * 1.000 * 1.000 * 1.000 * -",
            "context_relevance_sentences * chunk sentence * 4 * 1.000 * 1.000 * - * 1.000",
            "*quadratic*",
            "PASS  context_precision kappa >= 0.6 * kappa 1.000 over 4 chunks, judge labelled",
        ]
    )
    # 11 labelled items, one already judged by the test: each judgment is paid for once.
    assert server.request_count == 11
    check = json.loads((project.path / "report.json").read_text())["summary"]["judge_check"]
    assert check["passed"] is True
    assert [k["confusion"] for k in check["kinds"]] == [
        [[2, 0], [0, 2]],
        [[1, 0], [0, 3]],
        [[1, 0, 0], [0, 1, 0], [0, 0, 1]],
        [[3, 0], [0, 1]],
    ]


@pytest.mark.parametrize("judge", ["always-yes", "always-no", "random"])
def test_a_judge_that_does_not_discriminate_fails_the_run_naming_the_floor(project, serve, judge):
    serve(judge)
    result = project.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "ragmetrics judge check failed: context_precision kappa >= 0.6 (kappa " in out
    assert (
        f"over 4 chunks, judge {judge}); resting on this judge: gate 'context_precision mean >= 0.1', 1 comparison in 1 test"
        in out
    )


def test_always_yes_has_zero_kappa_and_its_disagreements_carry_the_judges_reason(project, serve):
    serve("always-yes")
    result = project.runpytest(
        "--rag-report",
        "--rag-report-json=report.json",
        "--rag-report-md=report.md",
        "--rag-report-html=r.html",
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    html = (project.path / "r.html").read_text()
    assert "the judge check failed" in html and '<section id="judge-check">' in html
    assert "<td><code>context_precision kappa &gt;= 0.6</code>" in html
    md = (project.path / "report.md").read_text()
    assert "the judge check failed" in md.splitlines()[0]
    assert "### Judge check" in md
    assert "- **FAIL** context\\_precision kappa &gt;= 0.6: 0.000" in md
    assert "resting on this judge: gate context\\_precision mean &gt;= 0.1, 1 comparisons" in md
    result.stdout.fnmatch_lines(
        [
            "FAIL  context_precision kappa >= 0.6 * kappa 0.000 over 4 chunks, judge always-yes",
            "      the always-yes judge agrees with the labels less than required",
            "      resting on this judge: gate 'context_precision mean >= 0.1', 1 comparison in 1 test",
            "confusion context_precision (judge answered no / yes): label no: 0 2; label yes: 0 2",
            "context_precision: 2 disagreements with the labels",
            "  p2 (labels.jsonl, line 2): label no, judge yes - 'The cuisine is famous.'",
            "      judge: fake judge",
        ]
    )
    check = json.loads((project.path / "report.json").read_text())["summary"]["judge_check"]
    graded = next(k for k in check["kinds"] if k["kind"] == "context_relevance_graded")
    assert graded["weighted_kappa"] == 0.0 and graded["accuracy"] == pytest.approx(1 / 3)
    failed = {f["spec"] for f in check["floors"] if not f["passed"]}
    assert failed == {
        "context_precision kappa >= 0.6",
        "context_recall kappa >= 0.6",
        "context_relevance[graded] weighted_kappa >= 0.6",
        "context_relevance[sentence] kappa >= 0.6",
    }


@pytest.mark.parametrize("mode", ["--setup-only", "--setup-plan", "--fixtures"])
def test_a_run_of_no_test_body_does_not_teach_prune_what_the_tests_need(
    project, serve, capsys, mode
):
    """The judge check at its end uses judgments of the store: the run must not pass for a complete
    one that needed only those, or `cache prune` deletes the tests' own."""
    from pytest_ragmetrics.__main__ import main

    serve("labelled")
    project.runpytest("--rag-store-dir=judgments").assert_outcomes(passed=1)
    listed = project.runpytest("--rag-store-dir=judgments", mode)
    assert listed.ret == pytest.ExitCode.OK
    cache = project.path / ".pytest_cache" / "d" / "ragmetrics"
    prune = ["cache", "prune", "--dry-run", "--cache-dir", str(cache), "--store-dir", "judgments"]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(project.path)
        main(prune)  # 0, or 1 when it cannot tell: either way it deletes nothing
    out = capsys.readouterr().out
    assert "would delete" not in out and "nothing to prune" in out


@pytest.mark.parametrize("mode", ["--setup-only", "--setup-plan", "--fixtures", "--co"])
def test_a_run_that_runs_no_test_checks_no_judge(project, serve, mode):
    """Listing the fixtures (or setting the tests up) judged the whole labelled set, paying for it."""
    server = serve("labelled")
    listed = project.runpytest(mode)
    assert listed.ret == pytest.ExitCode.OK
    assert server.request_count == 0
    assert "judge check" not in listed.stdout.str()


def test_a_replay_run_checks_the_recorded_judge_without_calling_it(project, serve):
    serve("labelled")
    assert project.runpytest("--rag-store-dir=judgments").ret == 0
    server = serve("always-yes", model="labelled")  # would fail the check, if it were asked
    result = project.runpytest(
        "--rag-store-dir=judgments", "--rag-cache=replay", "--cache-clear", "--rag-report"
    )
    assert result.ret == 0, result.stdout.str()
    assert server.request_count == 0
    result.stdout.fnmatch_lines(
        ["PASS  context_recall kappa >= 0.6 * kappa 1.000 over 4 reference sentences*"]
    )


def test_a_judgment_missing_from_replay_fails_the_check_with_the_reason(project, serve):
    serve("labelled")
    result = project.runpytest("--rag-cache=replay", "--rag-store-dir=judgments", "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*ragmetrics judge check failed: labels.jsonl: the judge gave no usable answer for 11 labelled "
            "item(s); first: 'p1' (labels.jsonl, line 1): no recorded judgment for*"
        ]
    )


def test_an_unparseable_answer_is_an_error_of_its_item_and_the_check_goes_on(project, serve):
    serve("garbled")
    result = project.runpytest("--rag-report", "--rag-report-json=report.json")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*FAIL  context_precision item 'p2' (labels.jsonl, line 2): no usable answer: judge answer for*"]
    )
    check = json.loads((project.path / "report.json").read_text())["summary"]["judge_check"]
    kinds = {k["kind"]: k for k in check["kinds"]}
    # Five items show the judge the cuisine chunk; the six others are still judged and counted.
    assert (kinds["context_precision"]["n"], kinds["context_precision"]["errors"]) == (3, 1)
    assert (kinds["context_recall"]["n"], kinds["context_recall"]["errors"]) == (2, 1)
    assert (kinds["context_relevance_graded"]["n"], kinds["context_relevance_graded"]["errors"]) == (2, 1)
    assert not check["passed"] and "no usable answer for 5 labelled item(s)" in check["item_errors"]


def test_the_check_runs_once_on_the_xdist_controller(project, serve):
    """Without a cache, each process that checked the judge would ask for every labelled judgment
    itself: a worker that checked it too would show in the count, which a shared cache hides."""
    project.makepyfile(
        test_more=f"""
        from pytest_ragmetrics import RagSample, assert_context_precision

        def test_precision_too():
            sample = RagSample({QUESTION!r}, [{PARIS!r}], ground_truth={REFERENCE!r}, id="s")
            assert_context_precision(sample) >= 0.0
        """
    )
    server = serve("labelled")
    alone = project.runpytest("--rag-cache=off", "-p", "no:xdist")
    assert alone.ret == 0, alone.stdout.str()
    # The labelled set's judgments, each asked once (the tests' judgment is one of them: label p1).
    labelled = server.request_count
    result = project.runpytest("-n", "2", "-p", "xdist", "--rag-report", "--rag-cache=off")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["PASS  context_precision kappa >= 0.6*", "*2 passed*"])
    asked = server.request_count - labelled
    # The labelled set once, by the controller; the tests' judgment once by each worker that ran a
    # test. A worker that checked the judge too would ask for the whole labelled set again.
    assert labelled + 1 <= asked <= labelled + 2, (labelled, asked)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--rag-judge-agreement", "context_precision kappa >= 0.6"],
            "*rag_judge_agreement floors need a labelled set*",
        ),
        (
            ["--rag-judge-check=labels.jsonl", "--rag-judge-agreement", "context_precision kapa >= 0.6"],
            "*invalid ragmetrics judge agreement floor 'context_precision kapa >= 0.6': unknown statistic 'kapa'; expected*",
        ),
        (
            ["--rag-judge-check=labels.jsonl", "--rag-judge-agreement", "context_relevance mean >= 0.6"],
            "*'context_relevance' is not a judgment kind*",
        ),
        (
            [
                "--rag-judge-check=labels.jsonl",
                "--rag-judge-agreement",
                "context_recall weighted_kappa >= 0.6",
            ],
            "*weighted_kappa is for graded ratings*",
        ),
        (["--rag-judge-check=missing.jsonl"], "*cannot read the labelled set*missing.jsonl*"),
        (
            ["--rag-judge-check=bad.jsonl"],
            "*judge check: bad.jsonl, line 1: field 'useful': expected true or false, got a string*",
        ),
    ],
)
def test_bad_check_settings_are_usage_errors(pytester, args, message):
    write_labels(pytester)
    (pytester.path / "bad.jsonl").write_text(json.dumps({**LABELS[0], "useful": "yes"}) + "\n")
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])
    assert "Traceback" not in result.stderr.str()


def test_floors_are_repeatable_on_the_command_line_and_replace_the_ini(project, serve):
    serve("always-yes")
    result = project.runpytest(
        "--rag-judge-agreement",
        "context_precision accuracy >= 0.5",
        "--rag-judge-agreement",
        "context_recall f1 >= 0.8",
    )
    assert result.ret == 0, result.stdout.str()


def test_a_check_without_floors_reports_and_never_fails(project, serve):
    serve("always-no")
    result = project.runpytest("-o", "rag_judge_agreement=", "-o", "rag_gates=", "--rag-report")
    assert result.ret == 0, result.stdout.str()
    result.stdout.fnmatch_lines(["context_precision * chunk * 4 * 0.500 * 0.000 * - * 0.000"])


@pytest.mark.parametrize("verdict", [True, False], ids=["agrees", "disagrees"])
def test_an_agreement_floor_over_too_few_labelled_units_is_not_decided_as_a_controls_floor(verdict):
    """One labelled chunk tells a good judge from a coin toss no better than one control: the floor
    passes, not decided, saying at how many units and with what error rates, whatever the judge said."""
    from pytest_ragmetrics.calibration.check import KindAgreement, check_floors, parse_floor
    from pytest_ragmetrics.gates import compare

    floor = parse_floor("context_precision accuracy >= 0.8")
    one = KindAgreement("context_precision", "m", items=1, labels=[True], verdicts=[verdict])
    (row,) = check_floors([floor], [one], compare, "labels.jsonl")
    assert row["passed"] and row["skipped"] and row["judged"] == 1
    assert row["reason"] == (
        "not decided: too few labelled chunks (1) to tell a good judge from a bad one (false alarm 5.0%, "
        "miss 50.0% at 1 chunk); label more items in labels.jsonl"
    )
    many = KindAgreement("context_precision", "m", items=10, labels=[True] * 10, verdicts=[verdict] * 10)
    (row,) = check_floors([floor], [many], compare, "labels.jsonl")
    assert row["passed"] is verdict and "skipped" not in row and row["judged"] == 10
    assert row["miss"] == pytest.approx(56 / 1024) and row["false_alarm"] < 0.25  # 8 of 10 by chance


def test_a_floor_over_one_labelled_chunk_passes_the_run_not_decided_and_says_so(pytester, serve):
    """Before, one chunk the judge got wrong failed the run, and one it got right passed it."""
    write_labels(pytester, LABELS[:1])
    pytester.makeini("[pytest]\nrag_judge_check = labels.jsonl\nrag_judge_agreement = context_precision accuracy >= 0.8\n")
    pytester.makepyfile("def test_plain():\n    pass\n")
    serve("always-no")
    result = pytester.runpytest("--rag-report", "--rag-report-md=report.md")
    assert result.ret == 0, result.stdout.str()
    reason = (
        "not decided: too few labelled chunks (1) to tell a good judge from a bad one (false alarm 5.0%, "
        "miss 50.0% at 1 chunk); label more items in labels.jsonl"
    )
    result.stdout.fnmatch_lines(
        ["SKIP  context_precision accuracy >= 0.8  accuracy 0.000 over 1 chunk, judge always-no", f"      {reason}"]
    )
    short = pytester.runpytest()
    assert short.ret == 0
    short.stdout.fnmatch_lines([f"ragmetrics warning: judge check floor context_precision accuracy >= 0.8: {reason}"])
    md = (pytester.path / "report.md").read_text()
    assert "- not decided context\\_precision accuracy &gt;= 0.8: 0.000 (not decided: too few labelled" in md


def test_a_strict_or_a_weak_agreement_floor_is_decided_on_its_value_over_many_labelled_units():
    """A floor at or above a good judge's 95% (accuracy >= 0.95) fails such a judge about half the time
    at any number of units: that is no reason to leave it undecided, as if 2,000 units were too few.
    Nor is one a coin toss passes (accuracy >= 0.3): more units would not tell them apart either."""
    from pytest_ragmetrics.calibration.check import KindAgreement, check_floors, parse_floor
    from pytest_ragmetrics.gates import compare

    judged = KindAgreement(
        "context_precision", "m", items=2000, labels=[True] * 2000, verdicts=[True] * 1600 + [False] * 400
    )
    strict, high = parse_floor("context_precision accuracy >= 0.95"), parse_floor("context_precision accuracy >= 0.9")
    rows = check_floors([strict, high], [judged], compare, "labels.jsonl")
    assert [(r["passed"], "skipped" in r) for r in rows] == [(False, False), (False, False)]
    assert rows[0]["false_alarm"] > 0.25 and rows[0]["miss"] < 1e-9
    coin = KindAgreement("context_precision", "m", items=1, labels=[True], verdicts=[False])
    (row,) = check_floors([parse_floor("context_precision accuracy >= 0.3")], [coin], compare, "labels.jsonl")
    assert not row["passed"] and "skipped" not in row  # a coin toss passes it: decided on its value
