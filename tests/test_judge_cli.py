"""`python -m pytest_ragmetrics judge check|drift`, judged over HTTP by the fake judge server."""

import json
import os
import re
import signal
from pathlib import Path
from typing import Any

import pytest
from test_judge_check import LABELS, PARIS, WINE, labelled_judge

from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.testing import FakeJudgeServer, conforming_value

#: The chunks whose usefulness the "flipper" model judges the other way round: 2 of the 4 labelled.
FLIPPED = {PARIS, WINE}


def by_model(body: dict[str, Any]) -> dict[str, Any] | str:
    """'labelled' and 'base' answer as labelled; 'always-yes' says yes to everything; 'flipper' answers
    as labelled except the usefulness of the chunks in FLIPPED, and every second reference sentence."""
    model = body["model"]
    if model == "garbled" and PARIS in body["messages"][1]["content"]:
        return "I would say the passage is useful."  # prose, never JSON: the answer cannot be parsed
    if model in ("always-yes", "garbled"):
        anything: dict[str, Any] = conforming_value(body["response_format"]["json_schema"]["schema"])
        return anything
    answer = labelled_judge(body)
    if model == "flipper":
        payload = json.loads(body["messages"][-1]["content"])
        if "useful" in answer and payload["chunk"] in FLIPPED:
            answer = {**answer, "useful": not answer["useful"]}
        if "sentence_2" in answer:
            answer = {
                **answer,
                "sentence_2": {"reason": "flipped", "attributed": not answer["sentence_2"]["attributed"]},
            }
    return answer


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    with FakeJudgeServer(by_model) as server:
        monkeypatch.chdir(tmp_path)
        for name in list(os.environ):
            if name.startswith("RAGMETRICS_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        (tmp_path / "labels.jsonl").write_text("".join(json.dumps(i) + "\n" for i in LABELS))
        yield tmp_path, server


def test_check_compares_models_side_by_side_and_fails_below_a_floor(workdir, capsys):
    _, server = workdir
    floor = "context_precision kappa >= 0.6"
    rc = main(
        ["judge", "check", "labels.jsonl", "--model", "labelled", "--model", "always-yes", "--floor", floor]
    )
    out = capsys.readouterr().out
    assert rc == 1, out
    lines = [" ".join(line.split()) for line in out.splitlines()]
    assert "judge check labels.jsonl: 11 labelled items" in lines
    assert "labelled context_precision chunk 4 1.000 1.000 - 1.000 0" in lines
    assert "always-yes context_precision chunk 4 0.500 0.000 - 0.667 0" in lines
    summary = {line.split()[0]: line for line in lines if line.endswith("PASS") or "FAIL:" in line}
    assert summary["labelled"].endswith("PASS")
    assert summary["always-yes"].endswith(f"FAIL: {floor}")
    assert "11 " in summary["labelled"]  # 11 fresh judge calls per model
    raw = out.splitlines()
    header = next(line for line in raw if line.startswith("model") and "floors" in line)
    failed = next(line for line in raw if line.startswith("always-yes") and "FAIL:" in line)
    assert header.index("floors") == failed.index("FAIL:")  # the verdicts are text, aligned left
    assert server.request_count == 22


def test_an_unparseable_answer_is_an_error_of_its_item_not_the_end_of_the_check(workdir, capsys):
    floor = "context_precision kappa >= 0.6"
    rc = main(
        [
            "judge",
            "check",
            "labels.jsonl",
            "--model",
            "garbled",
            "--model",
            "labelled",
            "--floor",
            floor,
            "--json",
        ]
    )
    assert rc == 1
    report = json.loads(capsys.readouterr().out)
    garbled, labelled = report["models"]
    kinds = {k["kind"]: k for k in garbled["kinds"]}
    # Every item showing PARIS to the judge failed (precision p1, graded g1, ...); the rest counted.
    assert garbled["errors"] == sum(k["errors"] for k in kinds.values()) >= 2
    precision = kinds["context_precision"]
    assert (precision["errors"], precision["n"]) == (1, 3)
    [error] = precision["error_items"]
    assert error["id"] == "p1" and error["where"] == "labels.jsonl, line 1"
    assert "invalid after 3 attempt(s)" in error["reason"] and "no JSON object found" in error["reason"]
    assert not garbled["passed"]
    assert labelled["passed"] and labelled["errors"] == 0  # the next model was still checked
    assert main(["judge", "check", "labels.jsonl", "--model", "garbled", "--floor", floor]) == 1
    out = capsys.readouterr().out
    assert "error: garbled context_precision item 'p1' (labels.jsonl, line 1): judge answer for" in out
    assert "item(s) not judged" in out


def test_check_reads_the_configuration_and_replays_the_store(workdir, capsys):
    tmp_path, server = workdir
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nrag_judge_check = labels.jsonl\nrag_judge_model = labelled\nrag_store_dir = judgments\n"
        "rag_judge_agreement =\n    context_recall kappa >= 0.6\n"
    )
    assert main(["judge", "check", "--json"]) == 0
    first = server.request_count
    (judged,) = json.loads(capsys.readouterr().out)["models"]
    assert judged["judge_calls"] == first and judged["tokens"] > 0
    assert main(["judge", "check", "--cache", "replay", "--json"]) == 0
    assert server.request_count == first  # replayed: no judge call
    report = json.loads(capsys.readouterr().out)
    (model,) = report["models"]
    assert model["judge_calls"] == 0 and model["latency"] is None
    assert model["tokens"] == judged["tokens"]  # the tokens recorded with the answers, cached or not
    assert model["floors"][0]["value"] == 1.0


def test_check_usage_errors_name_the_problem(workdir, capsys):
    assert main(["judge", "check"]) == 4
    assert "no labelled set" in capsys.readouterr().err
    (workdir[0] / "bad.jsonl").write_text('{"kind": "context_precision", "question": "q"}\n')
    assert main(["judge", "check", "bad.jsonl"]) == 4
    assert "bad.jsonl, line 1: missing field 'useful'" in capsys.readouterr().err
    assert main(["judge", "check", "labels.jsonl", "--floor", "context_precision kapa >= 1"]) == 4
    assert "unknown statistic 'kapa'" in capsys.readouterr().err


def test_drift_exits_1_above_a_max_flip_rate_per_kind_or_overall(workdir, capsys):
    _record(["--store-dir", "judgments"])
    drift = ["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    capsys.readouterr()
    # Half the precision verdicts flip: within 0.5, over 0.4.
    assert main([*drift, "--max-flip-rate", "context_precision=0.5"]) == 0
    assert "max flip rate context_precision 50.0%: 50.0% PASS" in capsys.readouterr().out
    assert main([*drift, "--max-flip-rate", "context_precision=0.4"]) == 1
    out = capsys.readouterr().out
    assert "context_precision 40.0%: 50.0% FAIL (50.0% of 4 verdicts flipped, more than 40.0%)" in out
    # Graded ratings never flip: a per-kind limit of 0 holds while the overall one fails.
    assert main([*drift, "--max-flip-rate", "context_relevance[graded]=0", "--json"]) == 0
    kinds = json.loads(capsys.readouterr().out)["kinds"]
    overall = sum(k["flipped"] for k in kinds.values()) / sum(k["units"] for k in kinds.values())
    assert 0 < overall < 0.5
    assert main([*drift, "--max-flip-rate", repr(overall)]) == 0
    capsys.readouterr()
    assert main([*drift, "--max-flip-rate", f"{overall - 0.01:.6f}", "--json"]) == 1
    [row] = json.loads(capsys.readouterr().out)["max_flip_rates"]
    assert row["kind"] is None and row["value"] == pytest.approx(overall) and not row["passed"]


@pytest.mark.parametrize(
    ("limit", "message"),
    [
        ("context_precison=0.1", "'context_precison' is not a judgment kind"),
        ("context_precision=lots", "'lots' is not a number"),
        ("1.5", "the rate must be between 0 and 1, got 1.5"),
    ],
)
def test_a_bad_max_flip_rate_is_a_usage_error(workdir, capsys, limit, message):
    assert main(["judge", "drift", "--model", "flipper", "--max-flip-rate", limit]) == 4
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "command",
    [["judge", "check", "labels.jsonl"], ["judge", "drift"], ["store", "rejudge", "--store-dir", "."]],
)
def test_an_empty_model_is_a_usage_error_naming_the_option(workdir, capsys, command):
    """``--model "$NEW_MODEL"`` with the variable unset: the error names ``--model``, as given, not
    the setting behind it."""
    assert main([*command, "--model", " "]) == 4
    assert capsys.readouterr().err == "error: --model must not be empty\n"


def _record(store_args: list[str]) -> None:
    assert main(["judge", "check", "labels.jsonl", "--model", "base", *store_args]) == 0


def test_drift_writes_nothing_into_the_committed_store(workdir, capsys):
    _record(["--store-dir", "judgments"])
    before = {path.name: path.read_bytes() for path in Path("judgments").iterdir()}
    drift = ["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    assert main(drift) == 0
    assert {path.name: path.read_bytes() for path in Path("judgments").iterdir()} == before
    capsys.readouterr()


def test_drift_reports_the_share_of_verdicts_a_new_model_flips(workdir, capsys):
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    rc = main(
        ["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments", "--json"]
    )
    assert rc == 0
    drift = json.loads(capsys.readouterr().out)
    assert drift["recorded"] == drift["sampled"] == 11
    kinds = drift["kinds"]
    assert (kinds["context_precision"]["flipped"], kinds["context_precision"]["units"]) == (2, 4)
    assert kinds["context_precision"]["flip_share"] == 0.5
    assert (kinds["context_recall"]["flipped"], kinds["context_recall"]["units"]) == (2, 4)
    assert kinds["context_recall"]["mean_before"] == 0.75 and kinds["context_recall"]["mean_after"] == 0.75
    assert kinds["context_relevance_graded"]["flipped"] == 0
    assert kinds["context_relevance_sentences"]["flipped"] == 0
    main(["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"])
    lines = [" ".join(line.split()) for line in capsys.readouterr().out.splitlines()]
    assert "context_precision 4 4 2 50.0% 0.500 0.500 +0.000" in lines
    assert "context_recall 2 4 2 50.0% 0.750 0.750 +0.000" in lines


def test_a_drift_sample_is_deterministic_given_its_seed(workdir, capsys):
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    args = [
        "judge",
        "drift",
        "--model",
        "flipper",
        "--from-model",
        "base",
        "--store-dir",
        "judgments",
        "--json",
    ]
    runs = []
    for seed in ("7", "7", "8"):
        assert main([*args, "--sample", "5", "--seed", seed]) == 0
        runs.append(json.loads(capsys.readouterr().out))
    assert runs[0] == runs[1]
    assert runs[0]["sampled_keys"] != runs[2]["sampled_keys"]
    for run in runs:
        # Exactly the sampled judgments the flipper flips: precision of FLIPPED chunks, and recall.
        expected = set()
        for key in run["sampled_keys"]:
            record = JudgmentStore(workdir[0] / "judgments").read_json(key)
            assert record is not None
            precision = record["kind"] == "context_precision" and record["inputs"]["chunk"] in FLIPPED
            if precision or record["kind"] == "context_recall":
                expected.add(key)
        assert {f["key"] for f in run["flips"]} == expected


def test_drift_reads_the_local_cache_when_there_is_no_store(workdir, capsys):
    _record(["--cache-dir", "cache"])
    capsys.readouterr()
    assert (
        main(
            ["judge", "drift", "--model", "flipper", "--from-model", "base", "--cache-dir", "cache", "--json"]
        )
        == 0
    )
    drift = json.loads(capsys.readouterr().out)
    assert drift["source"] == "cache cache" and drift["recorded"] == 11
    assert drift["kinds"]["context_precision"]["flipped"] == 2


def test_drift_without_recorded_judgments_says_so(workdir, capsys):
    assert main(["judge", "drift", "--model", "x", "--store-dir", "judgments"]) == 1
    assert "no recorded judgments" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["not a database", "a directory"])
def test_drift_from_a_damaged_cache_fails_naming_it_and_why(workdir, capsys, damage):
    """It ended in an sqlite3 traceback, or read a directory in the database's place as no judgments."""
    database = workdir[0] / "cache" / "cache.db"
    if damage == "a directory":
        database.mkdir(parents=True)
    else:
        database.parent.mkdir()
        database.write_bytes(b"garbage" * 200)
    assert main(["judge", "drift", "--model", "x", "--cache-dir", "cache"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the judgment cache at cache: ")
    assert ("(cache/cache.db is a directory)" in err) == (damage == "a directory")
    assert "cache clear --cache-dir cache" in err and "Traceback" not in err


# --- store rejudge -----------------------------------------------------------------------------------


def _store_lines(directory: Path) -> list[str]:
    return sorted(
        line for path in sorted(directory.rglob("*.jsonl")) for line in path.read_text().splitlines()
    )


def test_a_rejudge_stopped_by_ctrl_c_says_so_in_one_line_and_keeps_the_answers_that_came(workdir, capsys):
    """It ended in a traceback through the judging loop."""
    tmp_path, server = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    answer = server.responder

    def interrupt(body: dict[str, Any]) -> dict[str, Any] | str:
        signal.raise_signal(signal.SIGINT)  # Ctrl-C, while the command waits for this answer
        server.responder = answer
        given: dict[str, Any] | str = answer(body)
        return given

    server.responder = interrupt
    rejudge = ["store", "rejudge", "--model", "flipper", "--store-dir", "judgments", "--concurrency", "1"]
    # Ctrl-C raises KeyboardInterrupt, as in a terminal, even where the suite runs with it ignored (a
    # background job of a shell without job control, as some CI runners start it).
    ignored = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        code = main(rejudge)
    except KeyboardInterrupt:
        pytest.fail("store rejudge let the KeyboardInterrupt through")
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert code == 2
    err = capsys.readouterr().err
    assert err.splitlines()[-1] == "interrupted (Ctrl-C)"
    assert "Traceback" not in err
    models = [json.loads(line)["model"] for line in _store_lines(tmp_path / "judgments")]
    assert models.count("flipper") >= 1  # the answer on its way when Ctrl-C came


def test_rejudge_records_the_store_for_a_new_model_and_a_replay_run_then_calls_nothing(workdir, capsys):
    tmp_path, server = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    before = server.request_count
    rejudge = ["store", "rejudge", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    assert main([*rejudge, "--concurrency", "4"]) == 0
    assert capsys.readouterr().out.startswith(
        "store rejudge: 11 re-judged by flipper, 0 already recorded, 0 failed"
    )
    assert server.request_count == before + 11
    models = [json.loads(line)["model"] for line in _store_lines(tmp_path / "judgments")]
    assert sorted(models) == ["base"] * 11 + ["flipper"] * 11
    # Run again: everything is recorded now, nothing is asked.
    assert main(rejudge) == 0
    assert "0 re-judged by flipper, 11 already recorded, 0 failed" in capsys.readouterr().out
    assert server.request_count == before + 11
    # The labelled set replayed with the new model: every judgment served by the store.
    check = ["judge", "check", "labels.jsonl", "--model", "flipper", "--store-dir", "judgments"]
    assert main([*check, "--cache", "replay", "--json"]) == 0
    (judged,) = json.loads(capsys.readouterr().out)["models"]
    assert judged["errors"] == 0 and judged["judge_calls"] == 0
    assert server.request_count == before + 11


def test_rejudge_in_a_project_that_replays_names_the_option_that_lets_it_record(workdir, capsys):
    """CI replays, so a project's configuration may say replay; rejudge is run where the judge is."""
    tmp_path, server = workdir
    _record(["--store-dir", "judgments"])
    (tmp_path / "pytest.ini").write_text("[pytest]\nrag_cache = replay\nrag_store_dir = judgments\n")
    capsys.readouterr()
    before = server.request_count
    rejudge = ["store", "rejudge", "--model", "flipper", "--from-model", "base"]
    assert main(rejudge) == 4
    err = capsys.readouterr().err
    assert "cache mode 'replay' does not; give --cache readwrite (or --cache refresh)" in err
    assert server.request_count == before
    assert main([*rejudge, "--cache", "readwrite"]) == 0
    assert "11 re-judged by flipper, 0 already recorded, 0 failed" in capsys.readouterr().out
    models = [json.loads(line)["model"] for line in _store_lines(tmp_path / "judgments")]
    assert sorted(models) == ["base"] * 11 + ["flipper"] * 11


def test_rejudge_records_in_the_store_what_the_local_cache_already_held_for_the_new_model(workdir, capsys):
    """`judge drift` first leaves the new model's answers in the local cache: rejudge asks nothing
    again, and still records them in the store, which is what CI replays."""
    tmp_path, server = workdir
    _record(["--store-dir", "judgments"])
    drift = ["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    assert main(drift) == 0
    before = server.request_count
    rejudge = ["store", "rejudge", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    capsys.readouterr()
    assert main(rejudge) == 0
    assert "0 re-judged by flipper, 11 already recorded, 0 failed" in capsys.readouterr().out
    assert server.request_count == before
    models = [json.loads(line)["model"] for line in _store_lines(tmp_path / "judgments")]
    assert sorted(models) == ["base"] * 11 + ["flipper"] * 11
    # A fresh clone: the store alone, no local cache.
    check = ["judge", "check", "labels.jsonl", "--model", "flipper", "--store-dir", "judgments"]
    assert main([*check, "--cache-dir", "fresh", "--cache", "replay", "--json"]) == 0
    (judged,) = json.loads(capsys.readouterr().out)["models"]
    assert judged["errors"] == 0 and judged["judge_calls"] == 0


def test_a_pytest_run_replays_what_rejudge_recorded_without_calling_the_judge(pytester, monkeypatch):
    with FakeJudgeServer(by_model) as server:
        for name in list(os.environ):
            if name.startswith("RAGMETRICS_"):
                monkeypatch.delenv(name)
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", server.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        monkeypatch.chdir(pytester.path)
        pytester.makeini("[pytest]\nrag_store_dir = judgments\nrag_judge_model = base\n")
        pytester.makepyfile(
            """
            from pytest_ragmetrics import RagSample, assert_context_precision

            def test_precision():
                sample = RagSample(
                    question="What is the capital of France?",
                    contexts=["Paris is the capital of France.", "Wine is made from grapes."],
                    ground_truth="Paris is the capital of France.",
                )
                assert_context_precision(sample) >= 0.0
            """
        )
        pytester.runpytest("-p", "no:randomly").assert_outcomes(passed=1)
        recorded = server.request_count
        assert recorded > 0
        assert main(["store", "rejudge", "--model", "flipper"]) == 0
        assert server.request_count == 2 * recorded
        result = pytester.runpytest(
            "-p", "no:randomly", "--rag-cache", "replay", "--rag-judge-model", "flipper"
        )
        result.assert_outcomes(passed=1)
        assert server.request_count == 2 * recorded


def test_a_failed_request_is_counted_nothing_malformed_is_stored_and_the_exit_code_is_1(workdir, capsys):
    tmp_path, _ = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    rc = main(["store", "rejudge", "--model", "garbled", "--from-model", "base", "--store-dir", "judgments"])
    captured = capsys.readouterr()
    assert rc == 1
    failed = int(captured.out.split(" failed")[0].rsplit(" ", 1)[1])
    assert failed >= 2
    assert f"{11 - failed} re-judged by garbled, 0 already recorded, {failed} failed" in captured.out
    assert captured.err.count("error: ") == failed and "no JSON object found" in captured.err
    assert re.search(r"the recorded [a-z_]+ judgment [0-9a-f]{8}\b", captured.err), captured.err  # names it
    for line in _store_lines(tmp_path / "judgments"):
        record = json.loads(line)
        assert PARIS not in json.dumps(record) or record["model"] != "garbled"
    # The failed ones are asked again next time, the others are recorded.
    assert (
        main(["store", "rejudge", "--model", "garbled", "--from-model", "base", "--store-dir", "judgments"])
        == 1
    )
    assert (
        f"0 re-judged by garbled, {11 - failed} already recorded, {failed} failed" in capsys.readouterr().out
    )


def test_rejudge_takes_only_one_kind_and_respects_the_spending_cap(workdir, capsys, monkeypatch):
    _, server = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    before = server.request_count
    rejudge = ["store", "rejudge", "--model", "flipper", "--store-dir", "judgments"]
    assert main([*rejudge, "--kind", "context_precision"]) == 0
    assert "4 re-judged by flipper, 0 already recorded, 0 failed" in capsys.readouterr().out
    monkeypatch.setenv("RAGMETRICS_MAX_JUDGE_CALLS", "100")  # the option replaces the configured cap
    assert main([*rejudge, "--max-judge-calls", "2"]) == 1
    out, err = capsys.readouterr()
    assert "2 re-judged by flipper, 4 already recorded, 0 failed, 5 refused by the spending cap" in out
    assert err == (
        "error: the judge spending cap stopped store rejudge: 5 judgment(s) not re-judged past 2 judge "
        "call(s) (--max-judge-calls 4 to allow more); what was judged is kept\n"
    )
    assert server.request_count == before + 4 + 2
    assert main([*rejudge, "--max-judge-tokens", "-1"]) == 4
    assert "error: --max-judge-tokens must be at least 0; got '-1'" in capsys.readouterr().err
    assert main([*rejudge, "--kind", "context_precison"]) == 4
    assert "--kind 'context_precison' is not a judgment kind" in capsys.readouterr().err


def test_rejudge_keeps_the_concurrency_bound_full(workdir, capsys):
    """Four requests meet at a barrier in the server (so four were in flight at once), never more."""
    import itertools
    import threading

    _, server = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    before = server.request_count
    barrier, calls = threading.Barrier(4, timeout=10), itertools.count(1)

    def held(body):
        # The first request may go alone (the client learns the server's response format from it).
        if 2 <= next(calls) <= 5:
            barrier.wait()
        return by_model(body)

    server.responder = held
    server.max_in_flight = 0
    rejudge = ["store", "rejudge", "--model", "flipper", "--store-dir", "judgments", "--concurrency", "4"]
    assert main(rejudge) == 0
    assert "11 re-judged by flipper, 0 already recorded, 0 failed" in capsys.readouterr().out
    assert not barrier.broken
    assert server.request_count == before + 11 and server.max_in_flight == 4


def test_records_a_hand_edit_broke_are_named_and_left_out_the_others_rejudged_and_compared(workdir, capsys):
    """A recorded judgment whose kind, temperature or inputs a hand edit broke ended `store rejudge`
    and `judge drift` in a traceback (ValueError, KeyError, or the SDK's for a NaN temperature)
    before anything was asked; drift also fell over an answer it could not read."""
    tmp_path, server = workdir
    _record(["--store-dir", "judgments"])
    capsys.readouterr()
    store = JudgmentStore(tmp_path / "judgments")
    keys = sorted(store.keys())
    edits: dict[str, tuple[dict[str, Any], str]] = {
        # A key pasted where it does not belong is masked in the message, as everywhere.
        keys[0]: (
            {"kind": "context_precission sk-proj-AbCdEfGhIjKlMnOpQrStUvWx"},
            "cannot be asked again (unknown judgment kind 'context_precission sk-***')",
        ),
        keys[1]: ({"temperature": float("nan")}, "cannot be asked again (its temperature nan is not a number from 0 up)"),
        keys[2]: ({"inputs": {}}, "cannot be asked again (it has no 'question')"),
        keys[3]: ({"answer": {"choices": "yes"}}, "has an answer that cannot be read (ValueError: "),
    }
    for key, (change, _) in edits.items():
        recorded = store.read_json(key)
        assert recorded is not None
        record = {**recorded, **change}
        path = store.path_for(key)
        lines = [json.dumps(record) if line.startswith(f'{{"key":"{key}"') else line for line in path.read_text().splitlines()]
        path.write_text("".join(line + "\n" for line in lines))
    before = server.request_count

    rejudge = ["store", "rejudge", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments"]
    assert main(rejudge) == 1
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err
    assert captured.out.startswith(
        "store rejudge: 8 re-judged by flipper, 0 already recorded, 0 failed, 3 that cannot be asked again"
    )
    assert server.request_count == before + 8
    assert captured.err.splitlines() == [
        f"error: the recorded judgment {key} in the judgment store judgments {why}; mend or delete its line"
        for key, (_, why) in list(edits.items())[:3]
    ]

    drift = ["judge", "drift", "--model", "flipper", "--from-model", "base", "--store-dir", "judgments", "--json"]
    assert main(drift) == 1
    captured = capsys.readouterr()
    errors = sorted(captured.err.splitlines())  # in the order of the sample drawn
    assert len(errors) == 4 and all(line.endswith("; mend or delete its line") for line in errors)
    for line, (key, (_, why)) in zip(errors, sorted(edits.items()), strict=True):
        assert line.startswith(f"error: the recorded judgment {key} in the judgment store judgments {why}")
    report = json.loads(captured.out)
    assert report["sampled"] == 11 and sum(k["judgments"] for k in report["kinds"].values()) == 7


def test_a_judgment_a_replaying_check_lacks_names_the_option_of_the_command(workdir, capsys):
    """The commands take the cache mode as --cache: the message names it, not the configuration's key."""
    tmp_path, server = workdir
    (tmp_path / "pytest.ini").write_text("[pytest]\nrag_judge_check = labels.jsonl\nrag_judge_model = labelled\n")
    main(["judge", "check", "--cache", "replay"])
    printed = "".join(capsys.readouterr())
    assert server.request_count == 0
    assert "Replay (--cache replay) never calls the judge" in printed
    assert "in --cache readwrite (or refresh)" in printed and "rag_cache" not in printed
