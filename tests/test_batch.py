"""The batch path into the judgment store: ``pytest --rag-batch=PATH`` writes what no store or cache
holds, ``store batch submit|status|fetch|import`` judge it through a provider's batch API (the fake
server's, over HTTP with the real ``openai`` client) and record it, and replay then needs no judge."""

from __future__ import annotations

import json
from pathlib import Path

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


def cli(capsys, *args):
    """Run ``python -m pytest_ragmetrics`` in-process: (exit code, stdout, stderr)."""
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def store_lines(root: Path) -> list[dict]:
    return [json.loads(line) for shard in sorted((root / "judgments").glob("??.jsonl")) for line in
            shard.read_text(encoding="utf-8").splitlines()]  # fmt: skip


def test_an_export_run_calls_no_judge_and_skips_each_test_with_all_its_requests_written(project, server):
    result = project.runpytest("--rag-batch=batch/round1.jsonl", "-rs")
    result.assert_outcomes(skipped=4)
    assert server.request_count == 0
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics: {REQUESTS} judge request(s) written to batch/round1.jsonl instead of calling the "
            "judge: about * prompt tokens and at most * completion tokens, set --rag-price-input and "
            "--rag-price-output for what that costs",
            "ragmetrics: next: python -m pytest_ragmetrics store batch submit batch/round1.jsonl, *",
            "ragmetrics: multi-step metrics (claims, then their verdicts) take one round per step*",
            "SKIPPED [[]4[]] test_golden.py:*: ragmetrics --rag-batch: 5 judgment(s) this test needs are not "
            "recorded; their requests were written to batch/round1.jsonl",
        ]
    )
    lines = lines_of(project.path / "batch" / "round1.jsonl")
    assert len(lines) == REQUESTS == len({line["custom_id"] for line in lines})
    for line in lines:
        assert set(line) == {"custom_id", "method", "url", "body"}
        assert (line["method"], line["url"]) == ("POST", "/v1/chat/completions")
        assert len(line["custom_id"]) == 64


def test_the_cost_line_prices_the_estimated_tokens(project, server):
    result = project.runpytest("--rag-batch=batch/r.jsonl", "--rag-price-input=2.5", "--rag-price-output=10")
    state = json.loads((project.path / "batch" / "r.jsonl.state.json").read_text())
    cost = (state["prompt_tokens"] * 2.5 + state["completion_tokens"] * 10) / 1_000_000
    assert state["requests"] == REQUESTS and state["prompt_tokens"] > 0 and state["completion_tokens"] > 0
    result.stdout.fnmatch_lines(
        [
            f"ragmetrics: {REQUESTS} judge request(s) written to batch/r.jsonl instead of calling the judge: "
            f"about {state['prompt_tokens']:,} prompt tokens and at most {state['completion_tokens']:,} "
            f"completion tokens, at most ${cost:,.4f} at the configured prices (batch APIs usually bill half "
            "of that)"
        ]
    )


def test_batch_lines_hold_exactly_the_bodies_the_live_judge_sends(project, server):
    project.runpytest("--rag-batch=batch/round1.jsonl").assert_outcomes(skipped=4)
    exported = {line["custom_id"]: line["body"] for line in lines_of(project.path / "batch" / "round1.jsonl")}
    project.runpytest().assert_outcomes(passed=4)  # live, recording into the store
    sent = [r.body for r in server.requests if r.path.endswith("/chat/completions")]
    assert len(sent) == REQUESTS
    assert sorted(map(json.dumps, sent)) == sorted(map(json.dumps, exported.values()))
    assert {record["key"] for record in store_lines(project.path)} == set(exported)


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
    assert code == 0 and "imported: 0 judgment(s)" in out

    assert server.request_count == sum(1 for r in server.requests if "/chat/completions" not in r.path)
    records = store_lines(project.path)
    assert len(records) == REQUESTS == len({r["key"] for r in records})
    monkeypatch.delenv("OPENAI_API_KEY")
    result = project.runpytest("--rag-cache=replay", "--rag-cache-dir=fresh", "--rag-report-json=r.json")
    result.assert_outcomes(passed=4)
    judge = json.loads((project.path / "r.json").read_text())["summary"]["judge"]
    assert judge["calls"] == 0 and judge["store_hits"] == REQUESTS
