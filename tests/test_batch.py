"""The batch path into the judgment store: ``pytest --rag-batch=PATH`` writes what no store or cache
holds, ``store batch submit|status|fetch|import`` judge it through a provider's batch API (the fake
server's, over HTTP with the real ``openai`` client) and record it, and replay then needs no judge."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.testing import FakeJudgeServer, default_responder

pytest_plugins = ["pytester"]

GOLDEN_TESTS = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_precision, assert_context_recall
from pytest_ragmetrics import assert_context_relevance

@pytest.mark.parametrize("i", range(4))
def test_retrieval(i):
    sample = RagSample(
        f"What is the limit of plan {i}?",
        [f"Plan {i} has a limit of {i} GB.", f"Plan {i} costs {i} dollars."],
        ground_truth=f"Plan {i} has a limit of {i} GB.",
        id=f"s{i}",
    )
    assert_context_precision(sample) >= 0.5
    assert_context_recall(sample) >= 0.5
    assert_context_relevance(sample, "graded") >= 0.5
"""
#: Judge requests of GOLDEN_TESTS: per test, precision 2 (a chunk each), recall 1, graded relevance 2.
REQUESTS = 4 * 5


@pytest.fixture
def server(monkeypatch):
    with FakeJudgeServer() as fake:
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", fake.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
        yield fake


@pytest.fixture
def project(pytester, monkeypatch):
    pytester.makeini("[pytest]\nrag_store_dir = judgments\n")
    pytester.makepyfile(test_golden=GOLDEN_TESTS)
    monkeypatch.chdir(pytester.path)
    return pytester


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run ``python -m pytest_ragmetrics`` in-process: (exit code, stdout, stderr)."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def store_lines(root: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for shard in sorted((root / "judgments").glob("??.jsonl")) for line in
            shard.read_text(encoding="utf-8").splitlines()]  # fmt: skip


def test_an_export_run_calls_no_judge_and_skips_each_test_with_all_its_requests_written(project, server):
    prices = ("--rag-price-input=2.5", "--rag-price-output=10")
    gate = "rag_gates=context_recall mean >= 0.8"
    result = project.runpytest("--rag-batch=batch/round1.jsonl", "-rs", *prices, "-o", gate, "--rag-report")
    result.assert_outcomes(skipped=4)
    assert result.ret == 0  # a gate over scores still to be judged is not decided by the export run
    assert server.request_count == 0
    state = json.loads((project.path / "batch" / "round1.jsonl.state.json").read_text())
    assert state["requests"] == REQUESTS and state["prompt_tokens"] > 0 and state["completion_tokens"] > 0
    cost = (state["prompt_tokens"] * 2.5 + state["completion_tokens"] * 10) / 1_000_000
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics: {REQUESTS} judge request(s) written to batch/round1.jsonl instead of calling the "
            f"judge: about {state['prompt_tokens']:,} prompt tokens and at most "
            f"{state['completion_tokens']:,} completion tokens, at most ${cost:,.4f} at the configured "
            "prices (batch APIs usually bill half of that)",
            "ragmetrics: next: python -m pytest_ragmetrics store batch submit batch/round1.jsonl, *",
            "ragmetrics: multi-step metrics (claims, then their verdicts) take one round per step*",
            "SKIPPED [[]4[]] test_golden.py:*: ragmetrics --rag-batch: 5 judgment(s) this test needs are not "
            "recorded; their requests were written to batch/round1.jsonl",
        ]
    )
    result.stdout.fnmatch_lines(["SKIP  context_recall mean >= 0.8  not evaluated: * (partial run)"])
    lines = lines_of(project.path / "batch" / "round1.jsonl")
    assert len(lines) == REQUESTS == len({line["custom_id"] for line in lines})
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
        assert len(line["custom_id"]) == 64


def test_a_batch_line_is_the_live_request_and_its_answer_the_live_store_line(project, server, capsys):
    """The body of each batch line is exactly what the live judge sends; the answer imported for it
    is the store line the live path records (when and how it was judged aside)."""
    project.runpytest("--rag-batch=b.jsonl").assert_outcomes(skipped=4)
    exported = {line["custom_id"]: line["body"] for line in lines_of(project.path / "b.jsonl")}
    project.runpytest().assert_outcomes(passed=4)  # live, recording into judgments/
    sent = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(sent) == REQUESTS
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, exported.values()))
    assert {record["key"] for record in store_lines(project.path)} == set(exported)
    write_answered_results(project)
    other = ("--store-dir", "batched", "--cache-dir", "batched-cache")  # recorded by no live run
    code, _, err = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "b.jsonl", *other)
    assert code == 0, err

    def lines_without_answer_meta(directory: str) -> list[str]:
        found = []
        for shard in sorted((project.path / directory).glob("??.jsonl")):
            for line in shard.read_text(encoding="utf-8").splitlines():
                record = json.loads(line)
                for name in ("judged_at", "usage", "model"):
                    record["answer"].pop(name)
                found.append(json.dumps(record))
        return found

    assert lines_without_answer_meta("batched") == lines_without_answer_meta("judgments")
    # A judgment the cache holds (the live run's) and a store lacks is recorded already, and copied in.
    code, out, _ = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "b.jsonl", "--store-dir", "copied")
    assert code == 0 and "0 judgment(s) recorded into the judgment store" in out
    assert f"{REQUESTS} recorded already" in out
    assert len(list((project.path / "copied").glob("??.jsonl"))) > 0
    assert sorted(lines_without_answer_meta("copied")) == sorted(lines_without_answer_meta("judgments"))


def test_a_golden_set_filled_through_the_batch_api_replays_with_no_key_and_no_call(
    project, server, capsys, monkeypatch
):
    """Export, submit, status, fetch (not finished; then a partial failure and an expired batch),
    a second round for what is left, and a replay without a key that calls nothing."""
    project.runpytest("--rag-batch=batch/round1.jsonl").assert_outcomes(skipped=4)

    code, out, _ = cli(capsys, "store", "batch", "submit", "batch/round1.jsonl")
    assert code == 0, out
    assert f"round1.jsonl: {REQUESTS} request(s) submitted as batch batch_" in out
    code, out, _ = cli(capsys, "store", "batch", "status", "batch/round1.jsonl")
    assert code == 0 and f"in_progress, 0 of {REQUESTS} done, 0 failed" in out
    code, out, _ = cli(capsys, "store", "batch", "fetch", "batch/round1.jsonl")
    assert code == 1 and "not finished yet" in out and "fetch again later" in out

    server.fail_next(400, times=1)  # the batch's first line fails inside its response body
    server.run_batches(expire_after=15)  # and the batch expires with 15 of its 20 lines done
    code, out, err = cli(capsys, "store", "batch", "fetch", "batch/round1.jsonl")
    assert code == 1
    assert "imported: 14 judgment(s) recorded into the judgment store" in out
    assert "0 recorded already, 6 failed, 0 refused" in out
    assert err.count("batch/round1.batch_") == 6 and err.count(".error.jsonl line ") == 6
    assert "(context_precision of sample 's0', chunk 1): HTTP 400: fake_error: fake judge error 400" in err
    assert err.count("batch_expired: This request could not be executed") == 5
    assert "expired, 14 of 20 done, 6 failed, imported" in out
    assert len(store_lines(project.path)) == 14
    # Fetching again records nothing twice and still says what failed, where it said "0 failed".
    code, out, err = cli(capsys, "store", "batch", "fetch", "batch/round1.jsonl")
    assert code == 1
    assert "imported: 0 judgment(s) recorded into the judgment store" in out
    assert "14 recorded already, 6 failed, 0 refused" in out and err.count(".error.jsonl line ") == 6
    assert len(store_lines(project.path)) == 14

    # The second round writes exactly what is still missing.
    result = project.runpytest("--rag-batch=batch/round2.jsonl")
    assert len(lines_of(project.path / "batch" / "round2.jsonl")) == 6
    outcomes = result.parseoutcomes()
    assert outcomes.get("skipped", 0) >= 1 and outcomes.get("skipped", 0) + outcomes.get("passed", 0) == 4
    assert cli(capsys, "store", "batch", "submit", "batch/round2.jsonl")[0] == 0
    server.run_batches()
    code, out, err = cli(capsys, "store", "batch", "fetch", "batch/round2.jsonl")
    assert code == 0, err
    assert "imported: 6 judgment(s) recorded" in out
    # Fetching again imports nothing twice.
    code, out, _ = cli(capsys, "store", "batch", "fetch", "batch/round2.jsonl")
    assert code == 0 and "imported: 0 judgment(s) recorded" in out and "6 recorded already, 0 failed" in out

    assert server.request_count == sum(1 for r in server.requests if "/chat/completions" not in r.path)
    records = store_lines(project.path)
    assert len(records) == REQUESTS == len({r["key"] for r in records})
    monkeypatch.delenv("OPENAI_API_KEY")
    result = project.runpytest("--rag-cache=replay", "--rag-cache-dir=fresh", "--rag-report-json=r.json")
    result.assert_outcomes(passed=4)
    judge = json.loads((project.path / "r.json").read_text())["summary"]["judge"]
    assert judge["calls"] == 0 and judge["store_hits"] == REQUESTS


def completion_of(body: dict[str, Any], content: object = None) -> dict[str, Any]:
    """The chat completion a server would answer ``body`` with (the fake server's responder)."""
    answer = default_responder(body) if content is None else content
    return {
        "id": "cmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": answer if isinstance(answer, str) else json.dumps(answer),
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


def write_answered_results(project: Any) -> None:
    """``out.jsonl``: a provider's results file answering every request of the export ``b.jsonl``."""
    results = [
        {"id": "x", "custom_id": line["custom_id"], "error": None,
         "response": {"status_code": 200, "request_id": "r", "body": completion_of(line["body"])}}
        for line in lines_of(project.path / "b.jsonl")
    ]  # fmt: skip
    (project.path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))


def test_an_import_into_a_store_it_cannot_write_fails_and_says_they_are_in_the_cache_only(
    project, server, capsys
):
    """The command that exists to fill the store said it recorded them there, and exited 0."""
    project.runpytest("--rag-batch=b.jsonl").assert_outcomes(skipped=4)
    write_answered_results(project)
    store = project.path / "judgments"
    store.mkdir()
    shards = [store / f"{i:02x}.jsonl" for i in range(256)]
    for shard in shards:
        shard.symlink_to("/dev/full")  # a full disk (as root, chmod stops nothing)
    code, out, err = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "b.jsonl")
    assert code == 1, err
    assert f"recording failed: cannot write to the judgment store at {store}" in err
    assert "No space left on device" in err
    assert f"{REQUESTS} judgment(s) were not recorded for replay" in err
    assert f"recorded into the cache but not the judgment store {store} (see above)" in out
    # Once the store can be written, importing again records them there from the cache.
    for shard in shards:
        shard.unlink(missing_ok=True)  # a write that failed removed the shard it created
    code, out, err = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "b.jsonl")
    assert code == 0, err
    assert f"{REQUESTS} recorded already" in out
    assert len(store_lines(project.path)) == REQUESTS


def test_a_vllm_run_batch_results_file_is_imported_and_its_failures_listed(project, server, capsys):
    """``vllm run-batch`` output: answers in any order, a failed line with its error at the top level
    and no body; an invalid answer is validated as a live one is; an answer nobody asked for is
    refused with its line named; importing again records nothing twice."""
    project.runpytest("--rag-batch=batch/round1.jsonl").assert_outcomes(skipped=4)
    asked = lines_of(project.path / "batch" / "round1.jsonl")
    results = []
    for i, line in enumerate(reversed(asked)):
        result = {"id": f"vllm-{i}", "custom_id": line["custom_id"], "error": None}
        if i == 0:
            result["response"] = {"status_code": 400, "request_id": "vllm-batch-0"}
            result["error"] = "This model's maximum context length is 8192 tokens."
        elif i == 1:
            body = completion_of(line["body"], content={"verdict": "maybe"})
            result["response"] = {"status_code": 200, "request_id": "vllm-batch-1", "body": body}
        else:
            body = completion_of(line["body"])
            result["response"] = {"status_code": 200, "request_id": f"vllm-batch-{i}", "body": body}
        results.append(result)
    stranger = {"id": "vllm-x", "custom_id": "0" * 64, "response": results[2]["response"], "error": None}
    results.insert(3, stranger)
    (project.path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))

    code, out, err = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "batch/round1.jsonl")
    assert code == 1
    assert f"imported: {REQUESTS - 2} judgment(s) recorded into the judgment store" in out
    assert "2 failed, 1 refused" in out
    assert "failed: out.jsonl line 1: " in err and "maximum context length is 8192 tokens" in err
    assert "failed: out.jsonl line 2: " in err and "is invalid" in err
    assert f"refused: out.jsonl line 4: an answer for {'0' * 64!r}, which the batch file" in err
    assert len(store_lines(project.path)) == REQUESTS - 2

    code, out, _ = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "batch/round1.jsonl")
    assert "imported: 0 judgment(s) recorded" in out
    assert f"{REQUESTS - 2} recorded already, 2 failed, 1 refused" in out
    assert len(store_lines(project.path)) == REQUESTS - 2
    recorded = {r["key"]: r for r in store_lines(project.path)}
    one = recorded[asked[0]["custom_id"]]
    assert (
        one["answer"]["judged_at"] == "2023-11-14T22:13:20Z" and one["answer"]["usage"]["prompt_tokens"] == 10
    )

    # Lines answering one key twice: the same answer again is a duplicate, recorded once; a
    # different one is a conflict named by its line (the first is kept), and the import fails.
    failed_first, invalid_first, recorded_first = asked[-1], asked[-2], asked[0]
    other = default_responder(invalid_first["body"])
    assert isinstance(other, dict) and "reason" in other
    again = [
        (recorded_first, completion_of(recorded_first["body"])),
        (failed_first, completion_of(failed_first["body"])),
        (invalid_first, completion_of(invalid_first["body"])),
        (failed_first, completion_of(failed_first["body"])),
        (invalid_first, completion_of(invalid_first["body"], content={**other, "reason": "another"})),
        (recorded_first, completion_of(recorded_first["body"])),
    ]
    (project.path / "again.jsonl").write_text(
        "".join(
            json.dumps({"custom_id": line["custom_id"], "response": {"status_code": 200, "body": body}}) + "\n"
            for line, body in again
        )
    )
    code, out, err = cli(capsys, "store", "batch", "import", "again.jsonl", "--batch", "batch/round1.jsonl")
    assert code == 1
    assert "imported: 2 judgment(s) recorded into the judgment store" in out
    assert "1 recorded already, 0 failed, 0 refused, 2 duplicate line(s), 1 conflicting" in out
    assert (
        f"conflict: again.jsonl line 5: {invalid_first['custom_id'][:12]}" in err
        and "answered again, differently from line 3, whose answer is recorded" in err
    )
    assert len(store_lines(project.path)) == REQUESTS
    kept = {r["key"]: r for r in store_lines(project.path)}[invalid_first["custom_id"]]
    assert kept["answer"]["choices"][0]["reason"] != "another"


def test_a_body_whose_error_is_null_is_read_as_the_live_judge_reads_it(project, server, capsys):
    """A completion that says ``"error": null`` beside its choices (a runner writing every field of
    its response object) is an answer, as the live judge takes it; a body with an error is a failed
    request, as OpenAI writes one. The first was refused as "HTTP 200: None"."""
    project.runpytest("--rag-batch=batch/round1.jsonl").assert_outcomes(skipped=4)
    asked = lines_of(project.path / "batch" / "round1.jsonl")
    results = [
        {"custom_id": line["custom_id"], "response": {"status_code": 200, "body": {**completion_of(line["body"]), "error": None}}}
        for line in asked[1:]
    ]  # fmt: skip
    failed = {"message": "The server had an error processing your request.", "type": "server_error"}
    results.append(
        {"custom_id": asked[0]["custom_id"], "response": {"status_code": 500, "body": {"error": failed}}}
    )
    (project.path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in results))
    code, out, err = cli(capsys, "store", "batch", "import", "out.jsonl", "--batch", "batch/round1.jsonl")
    assert f"imported: {REQUESTS - 1} judgment(s) recorded into the judgment store" in out
    assert "1 failed, 0 refused" in out and code == 1
    assert f"failed: out.jsonl line {REQUESTS}: " in err and "HTTP 500: server_error: The server had" in err
    assert len(store_lines(project.path)) == REQUESTS - 1


LONG_CHUNK_TEST = """
from pytest_ragmetrics import RagSample, assert_context_relevance

def test_long_chunk():
    chunk = " ".join(f"Fact number {n} is here." for n in range(1, 261))
    assert_context_relevance(RagSample("Which facts are there?", [chunk], id="long"), "sentence") >= 0.5
"""


def test_a_judgment_that_needs_another_s_answer_is_written_in_the_next_round(
    pytester, server, capsys, monkeypatch
):
    """A chunk longer than one window: its first window tells how many windows follow."""
    pytester.makeini("[pytest]\nrag_store_dir = judgments\n")
    pytester.makepyfile(test_long=LONG_CHUNK_TEST)
    monkeypatch.chdir(pytester.path)
    for round in (1, 2):
        pytester.runpytest(f"--rag-batch=r{round}.jsonl").assert_outcomes(skipped=1)
        assert len(lines_of(pytester.path / f"r{round}.jsonl")) == 1
        assert cli(capsys, "store", "batch", "submit", f"r{round}.jsonl")[0] == 0
        server.run_batches()
        assert cli(capsys, "store", "batch", "fetch", f"r{round}.jsonl")[0] == 0
    result = pytester.runpytest("--rag-batch=r3.jsonl")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["ragmetrics: --rag-batch: every judgment the tests need is recorded; nothing to write*"]
    )
    assert not list(pytester.path.glob("r3.*"))
    assert server.request_count == sum(1 for r in server.requests if "/chat/completions" not in r.path)


PENDING_TESTS = """
import pytest
from pytest_ragmetrics import RagSample, assert_context_precision

SAMPLE = RagSample("What is the limit?", ["The limit is 5 GB."], ground_truth="The limit is 5 GB.", id="s")

def test_reads_the_score():
    assert assert_context_precision(SAMPLE).score >= 0.5

def test_compares_a_list():
    check = assert_context_precision([SAMPLE, RagSample("Q?", ["A chunk."], ground_truth="A.", id="t")])
    assert check.min() >= 0.5
    assert check >= 0.5

def test_a_bad_threshold_is_still_an_error():
    assert_context_precision(SAMPLE) >= 1.5

def test_recorded_and_failing():
    assert_context_precision(RagSample("Recorded?", ["Yes."], ground_truth="Yes.", id="r")) >= 1.0
"""


def test_pending_checks_hold_and_skip_while_a_failing_recorded_check_still_fails(pytester, monkeypatch):
    from pytest_ragmetrics.testing import FakeJudgeServer

    pytester.makeini("[pytest]\nrag_store_dir = judgments\n")
    pytester.makepyfile(test_pending=PENDING_TESTS)
    monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-secret")
    with FakeJudgeServer(lambda body: {"reason": "no", "useful": False}) as fake:  # record one "not useful"
        monkeypatch.setenv("RAGMETRICS_JUDGE_BASE_URL", fake.base_url)
        pytester.runpytest("-k", "recorded").assert_outcomes(failed=1)
        result = pytester.runpytest("--rag-batch=b.jsonl", "-rs")
        assert fake.request_count == 1
    result.assert_outcomes(skipped=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*test_a_bad_threshold_is_still_an_error*",
            "*ConfigError*1.5*",
            "*test_recorded_and_failing*",
            "*expected >= 1*",
            "SKIPPED [[]1[]] test_pending.py:*: ragmetrics --rag-batch: 1 judgment(s) this test needs*",
            "SKIPPED [[]1[]] test_pending.py:*: ragmetrics --rag-batch: 2 judgment(s) this test needs*",
        ],
    )
    assert len(lines_of(pytester.path / "b.jsonl")) == 2  # SAMPLE's (asked by three tests) and t's


def test_a_run_that_writes_no_request_leaves_no_file_and_keeps_what_was_there(project, server):
    project.makepyfile(test_golden="def test_judges_nothing():\n    pass\n")
    project.path.joinpath("batch").mkdir()
    project.path.joinpath("batch", "notes.md").write_text("mine\n")
    result = project.runpytest("--rag-batch=batch/b.jsonl")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["ragmetrics: --rag-batch: *nothing to write to batch/b.jsonl"])
    assert [path.name for path in project.path.joinpath("batch").iterdir()] == ["notes.md"]
    assert project.path.joinpath("batch", "notes.md").read_text() == "mine\n"
    assert server.request_count == 0


def test_workers_under_xdist_write_one_file_with_each_request_once(project, server):
    project.makepyfile(test_again=GOLDEN_TESTS)  # the same judgments asked by other tests
    result = project.runpytest("-n", "2", "--rag-batch=batch/round1.jsonl")
    result.assert_outcomes(skipped=8)
    result.stdout.fnmatch_lines([f"ragmetrics: {REQUESTS} judge request(s) written to batch/round1.jsonl *"])
    lines = lines_of(project.path / "batch" / "round1.jsonl")
    assert len(lines) == REQUESTS == len({line["custom_id"] for line in lines})
    assert server.request_count == 0


def test_the_spending_caps_hold_for_what_a_batch_would_send(project, server, capsys, monkeypatch):
    result = project.runpytest("--rag-batch=batch/round1.jsonl", "--rag-max-judge-calls=7")
    assert len(lines_of(project.path / "batch" / "round1.jsonl")) == 7
    result.stdout.fnmatch_lines(["*the judge spending cap stopped the run*"])
    assert result.ret == 1
    result = project.runpytest("--rag-batch=batch/round2.jsonl", "--rag-max-judge-tokens=1000")
    state = json.loads((project.path / "batch" / "round2.jsonl.state.json").read_text())
    per_request = (state["prompt_tokens"] + state["completion_tokens"]) / state["requests"]
    assert state["requests"] == 2 and 500 < per_request < 1000  # the second passed the cap by its size
    result.stdout.fnmatch_lines(["*the judge spending cap stopped the run*"])
    monkeypatch.setenv("RAGMETRICS_MAX_JUDGE_CALLS", "5")
    code, _, err = cli(capsys, "store", "batch", "submit", "batch/round1.jsonl")
    assert code == 1 and "holds 7 request(s), more than the judge call cap of 5" in err
    assert "nothing was uploaded" in err and server.request_count == 0


def test_an_export_refuses_replay_a_file_of_its_own_and_a_submitted_batch_s_record(project, server, capsys):
    result = project.runpytest("--rag-batch=b.jsonl", "--rag-cache=replay")
    assert result.ret == 4
    result.stderr.fnmatch_lines(["*--rag-batch writes the judgments that are not recorded*"])
    project.path.joinpath("golden.jsonl").write_text("{}\n")
    result = project.runpytest("--rag-batch=golden.jsonl")
    assert result.ret == 4 and project.path.joinpath("golden.jsonl").read_text() == "{}\n"
    result.stderr.fnmatch_lines(["*golden.jsonl exists and is not a batch file written by an export*"])
    project.runpytest("--rag-batch=b.jsonl").assert_outcomes(skipped=4)
    assert cli(capsys, "store", "batch", "submit", "b.jsonl")[0] == 0
    result = project.runpytest("--rag-batch=b.jsonl")
    assert result.ret == 4
    result.stderr.fnmatch_lines(
        ["*b.jsonl was submitted (batch batch_*) and its results are not imported yet*"]
    )


def test_export_files_are_split_by_model_and_at_the_limits(tmp_path):
    from pytest_ragmetrics.judge.base import JudgeRequest
    from pytest_ragmetrics.judge.batch import BatchExport, read_state

    export = BatchExport.create(tmp_path / "b.jsonl")
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    for i in range(7):
        model = "small" if i < 5 else "large"
        request = JudgeRequest(
            "k", "v1", model, ({"role": "user", "content": f"q{i}"},), "k", schema, {"i": i}
        )
        body = {"model": model, "messages": [{"role": "user", "content": f"q{i}" * 40}], "max_tokens": 30}
        assert export.add(request, body) == (len(f"q{i}" * 40) // 4 + 4) + 30
        assert export.add(request, body) is None  # written once
    summary = export.finish(max_requests=2, max_bytes=10_000)
    assert summary.requests == 7
    assert summary.files == ("b.jsonl", "b.2.jsonl", "b.3.jsonl", "b.4.jsonl")
    state = read_state(tmp_path / "b.jsonl")
    assert state is not None
    assert [(p["model"], p["requests"]) for p in state["parts"]] == [
        ("large", 2),
        ("small", 2),
        ("small", 2),
        ("small", 1),
    ]
    line = 0
    for max_bytes in (10_000, None):  # then one line fits in a file, not two
        export = BatchExport.create(tmp_path / "b.jsonl")
        for i in range(3):
            request = JudgeRequest("k", "v1", "m", (), "k", schema, {"i": i})
            body = {"model": "m", "messages": [{"role": "user", "content": "x" * 40}], "max_tokens": 30}
            export.add(request, body)
        summary = export.finish(max_bytes=max_bytes or line + line // 2)
        line = len((tmp_path / "b.jsonl").read_bytes()) // 3  # the three lines are as long as one another
    assert len(summary.files) == 3 and not (tmp_path / "b.4.jsonl").exists()


def test_the_fake_server_cancels_a_batch_and_serves_its_files_through_the_openai_client(server):
    import openai

    client = openai.OpenAI(base_url=server.base_url, api_key="test-key-not-secret")
    line = {"custom_id": "a", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "hi"}]}}  # fmt: skip
    uploaded = client.files.create(file=("in.jsonl", json.dumps(line).encode() + b"\n"), purpose="batch")
    assert client.files.retrieve(uploaded.id).bytes == uploaded.bytes
    assert client.files.content(uploaded.id).read() == json.dumps(line).encode() + b"\n"
    batch = client.batches.create(
        input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
    )
    assert batch.status == "validating"
    assert batch.request_counts is not None and batch.request_counts.total == 1
    assert client.batches.cancel(batch.id).status == "cancelling"
    batch = client.batches.retrieve(batch.id)
    assert batch.status == "cancelled" and batch.output_file_id is None
    assert batch.error_file_id is not None
    errors = client.files.content(batch.error_file_id).read().decode().splitlines()
    assert json.loads(errors[0])["error"]["code"] == "batch_cancelled"
    assert server.batch_lines == 0


def test_a_command_names_the_pytest_configuration_it_reads_not_settings(tmp_path, monkeypatch, capsys):
    """A command reads the pytest configuration here and the environment: its advice names those."""
    for name in list(os.environ):
        if name.startswith(("OPENAI_", "AZURE_OPENAI", "RAGMETRICS_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    for step in ("status", "fetch"):  # a wrong path is said first, before the missing key
        code, _, err = cli(capsys, "store", "batch", step, "b.jsonl")
        assert code == 1 and err == "error: no batch export at b.jsonl: write one with pytest --rag-batch=b.jsonl\n"
    item = {"kind": "context_precision", "question": "Q?", "reference": "R.", "chunk": "C.", "useful": True}
    (tmp_path / "labels.jsonl").write_text(json.dumps(item) + "\n", encoding="utf-8")
    code, out, err = cli(capsys, "judge", "check", "labels.jsonl", "--cache", "readwrite")
    assert code == 1 and "no API key for the LLM judge" in out + err
    assert "set rag_cache = replay in the pytest configuration (RAGMETRICS_CACHE=replay)" in out + err
    assert "Settings(" not in out + err


def test_results_import_with_the_batch_file_configured_rather_than_given(project, server, capsys, monkeypatch):
    """With rag_batch or RAGMETRICS_BATCH set (the documented default of --batch), `store batch
    import` and `fetch` refused: "a batch export is written by a pytest run ...; unset the batch setting"."""
    project.runpytest("--rag-batch=b.jsonl").assert_outcomes(skipped=4)
    write_answered_results(project)
    monkeypatch.setenv("RAGMETRICS_BATCH", "b.jsonl")
    capsys.readouterr()  # the export run's output
    code, out, err = cli(capsys, "store", "batch", "import", "out.jsonl")
    assert (code, err) == (0, "")
    assert out.startswith(f"imported: {REQUESTS} judgment(s) recorded into the judgment store")
    assert len(store_lines(project.path)) == REQUESTS


def test_a_state_file_naming_files_not_of_the_export_is_refused_and_nothing_is_deleted(tmp_path):
    """A new export deletes the files the old one's state file names: one naming `../notes.md`,
    `/etc/hosts` or the golden set beside it (a stale or tampered state file) deleted those, and parts
    that were not objects ended the batch commands in an AttributeError traceback."""
    from judge_requests import make_request

    from pytest_ragmetrics.judge.batch import BatchExport, state_path

    keep = {name: tmp_path / name for name in ("golden.jsonl", "b.2.jsonl.bak")}
    (tmp_path / "sub").mkdir()
    for path in keep.values():
        path.write_text("keep me\n", encoding="utf-8")
    export = tmp_path / "sub" / "b.jsonl"
    states = {
        "../golden.jsonl": "part 1 names the file \"../golden.jsonl\", not one of the export's files",
        "/etc/hosts": "part 1 names the file \"/etc/hosts\", not one of the export's files",
        "b.2.jsonl.bak": "part 1 names the file \"b.2.jsonl.bak\", not one of the export's files",
        5: "part 1 names the file 5, not one of the export's files",
    }
    for file, why in states.items():
        state_path(export).write_text(json.dumps({"parts": [{"file": "b.jsonl"}, {"file": file}]}))
        with pytest.raises(ValueError) as info:
            BatchExport.create(export)
        assert str(info.value).startswith(f"{state_path(export)} is not the state file of a batch export: ")
        assert why.replace("part 1", "part 2") in str(info.value)
    state_path(export).write_text(json.dumps({"parts": [5]}))
    with pytest.raises(ValueError, match="part 1 is not an object"):
        BatchExport.create(export)
    assert all(path.read_text(encoding="utf-8") == "keep me\n" for path in keep.values())
    # The export's own files, as it names them: deleted for the new export.
    own = tmp_path / "sub" / "b.12.jsonl"
    own.write_text("{}\n", encoding="utf-8")
    state_path(export).write_text(json.dumps({"parts": [{"file": "b.jsonl"}, {"file": "b.12.jsonl", "requests": 1}]}))
    BatchExport.create(export).finish()  # no request to write: the earlier export is left as it was
    assert own.exists()
    request = make_request()
    replacing = BatchExport.create(export)
    replacing.add(request, {"model": request.model, "messages": list(request.messages)})
    replacing.finish()
    assert not own.exists()


def test_an_empty_batch_path_is_a_usage_error_not_a_live_run(project, server):
    """``--rag-batch="$BATCH"`` with the variable unset: refused before any test, where it ran the
    suite against the judge at full price."""
    result = project.runpytest("--rag-batch=")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*ragmetrics: --rag-batch is empty: give the path of the batch file to write*"])
    assert server.request_count == 0 and not (project.path / "judgments").exists()


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


#: The runs that list or set up the tests and run none, and the option their closing line names.
NO_TEST_RUNS = [
    (("--co",), "--collect-only"),
    (("--setup-only",), "--setup-only"),
    (("--setup-plan",), "--setup-plan"),
    (("--fixtures",), "--fixtures"),
    (("--fixtures-per-test", "test_golden.py"), "--fixtures-per-test"),
    (("--markers",), None),  # pytest prints the markers and ends: no closing lines
]


def test_a_run_that_runs_no_test_leaves_an_earlier_export_as_it_was(project, server):
    """``--co --rag-batch=PATH`` deleted the export an earlier run wrote there, not yet submitted."""
    project.runpytest("--rag-batch=batch/b.jsonl").assert_outcomes(skipped=4)
    before = _files(project.path / "batch")
    assert {"b.jsonl", "b.jsonl.state.json", "b.jsonl.requests.sqlite"} <= set(before)
    for options, named in NO_TEST_RUNS:
        result = project.runpytest(*options, "--rag-batch=batch/b.jsonl")
        assert result.ret == 0, options
        assert _files(project.path / "batch") == before, options
        if named is not None:
            result.stdout.fnmatch_lines(
                [f"ragmetrics: --rag-batch: no test ran ({named}); batch/b.jsonl is left as it was"]
            )
    assert server.request_count == 0


def test_a_run_that_writes_no_request_leaves_an_earlier_export_as_it_was(project, server):
    """``pytest -k nomatch --rag-batch=PATH`` deleted the export an earlier run wrote there, not yet
    submitted: only a run with a request to write replaces it."""
    project.makepyfile(test_other="import pytest\n\n@pytest.mark.skip\ndef test_skipped():\n    pass\n")
    project.runpytest("--rag-batch=batch/b.jsonl").assert_outcomes(skipped=5)
    before = _files(project.path / "batch")
    assert {"b.jsonl", "b.jsonl.state.json", "b.jsonl.requests.sqlite"} <= set(before)
    for options in (("-k", "nomatch"), ("-m", "nomatch"), ("test_other.py",)):
        result = project.runpytest(*options, "--rag-batch=batch/b.jsonl")
        assert _files(project.path / "batch") == before, options
        result.stdout.fnmatch_lines(
            ["ragmetrics: --rag-batch: *nothing to write to batch/b.jsonl; the export there is left as it was"]
        )
    assert server.request_count == 0
