"""The README's main command, `pytest --rag-report` in example_project/, on a copy as fresh as a clone."""

import hashlib
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytest_env import SPARE_PLUGINS

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "example_project"


@pytest.fixture
def fresh_example(tmp_path):
    target = tmp_path / "example_project"
    shutil.copytree(
        EXAMPLE, target, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__", ".ragmetrics_cache")
    )
    return target


@pytest.fixture(scope="module")
def default_copy(tmp_path_factory):
    target = tmp_path_factory.mktemp("default") / "example_project"
    shutil.copytree(
        EXAMPLE, target, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__", ".ragmetrics_cache")
    )
    return target


@pytest.fixture(scope="module")
def default_run(default_copy):
    """The README's command on a fresh copy, run once for the tests that read its output and report."""
    target = default_copy
    out = run_example(
        target,
        "--rag-report",
        "--rag-report-json=report.json",
        "--rag-save-baseline=saved-baseline.json",
        "-p",
        "no:randomly",
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    return out, json.loads((target / "report.json").read_text())


def run_example(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {
        k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI", "RAGMETRICS_"))
    }
    environ.update(env)
    environ["PYTEST_ADDOPTS"] = SPARE_PLUGINS
    return subprocess.run(
        [sys.executable, "-m", "pytest", *args],
        cwd=cwd,
        env=environ,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_example_project_passes_offline_from_the_committed_judgments(default_run):
    """No API key, no cache: every judgment is replayed from example_project/judgments."""
    out, _ = default_run
    text = out.stdout
    assert re.search(r"\d+ passed, 9 xfailed", text)
    # Passing comparisons are behind -v; the expected failures of the weakened retriever are listed.
    assert re.search(r"\(\d+ passing comparisons not shown; -v lists them\)", text)
    assert re.search(r"XFAIL +0\.360 +>= 0\.85 +ndcg@3 mean +no judge +test_weak_ndcg_mean", text)
    assert "PASS  ndcg@3 mean >= 0.85" in text
    assert "ragmetrics report" in text
    assert "PASS  context_recall mean >= 0.8" in text
    assert "judge hand-labelled: 0 calls" in text
    assert re.search(r"[1-9]\d* store hits", text)


def test_example_project_catches_the_weakened_retriever(fresh_example):
    """Without xfail, the regression tests fail with messages that name the worst samples."""
    out = run_example(fresh_example, "tests/test_regression.py", "--runxfail")
    assert out.returncode == 1
    assert "context_recall mean over 15 samples = 0.467, expected >= 0.8" in out.stdout
    assert "worst samples:" in out.stdout


def test_example_project_store_has_no_unused_entries(default_run):
    _, report = default_run
    assert report["summary"]["unused_store_entries"] == 0
    assert report["summary"]["judge"]["calls"] == 0


def test_example_project_compares_every_run_with_its_committed_baseline(default_run):
    out, _ = default_run
    assert "vs baseline baseline.json" in out.stdout
    assert re.search(
        r"context_precision\s+15\s+0\.922\s+0\.922\s+\+0\.000 \[\+0\.000, \+0\.000\]\s+1\.0000\s+unchanged",
        out.stdout,
    )
    assert "PASS  context_recall mean drop <= 0.02 at p < 0.05" in out.stdout


def test_example_project_committed_baseline_is_what_saving_it_writes_today(default_run, default_copy):
    """The README's `pytest --rag-save-baseline=baseline.json` on a fresh clone changes nothing (but
    the package version it records)."""
    saved = json.loads((default_copy / "saved-baseline.json").read_text())
    committed = json.loads((EXAMPLE / "baseline.json").read_text())
    saved.pop("plugin_version"), committed.pop("plugin_version")
    assert saved == committed, "re-save example_project/baseline.json: pytest --rag-save-baseline=baseline.json"


def test_example_project_baseline_flags_the_weakened_retriever_as_a_significant_regression(fresh_example):
    """The README's commands: the weak retriever's report compared with the committed baseline."""
    out = run_example(fresh_example, "-q", "--rag-report-json=weak.json", EXAMPLE_RETRIEVER="weak")
    assert out.returncode == 1
    assert "ragmetrics regression gate failed: context_precision mean drop <= 0.02 at p < 0.05" in out.stdout
    compare = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_ragmetrics",
            "baseline",
            "compare",
            "baseline.json",
            "weak.json",
            "--gates",
        ],
        cwd=fresh_example,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert compare.returncode == 1, compare.stdout + compare.stderr
    text = compare.stdout
    for metric, p in (("context_precision", "0.0015"), ("context_recall", "0.0078")):
        assert re.search(rf"^{metric}\s+15\s+.*\s{p}\s+worse$", text, re.M), text
    assert "FAIL  context_precision mean drop <= 0.02 at p < 0.05  drop 0.600" in text
    assert "FAIL  context_recall any drop <= 0.5  drop 1.000" in text
    assert "FAIL  ndcg@3 mean drop <= 0.02 at p < 0.05  drop 0.560" in text
    # Answer relevancy is compared over the weak generator's answers (weak-answer-q01...), whose test
    # needs no retriever; the BM25 answers' test (q01...) stopped at its replay miss. The line under
    # the row says those are others than the 15 its n counts.
    assert re.search(r"^answer_relevancy\s+15\s+.*unchanged$", text, re.M), text
    assert "    besides the 15 compared: 15 not measured in this run (q01, q02, q03, q04, q05, ...)" in text
    # The run holds 30 samples (q01... and weak-answer-q01...), none of them scored for correctness.
    assert (
        "answer_correctness[recall] not measured: none of the run's 30 samples has a score (their tests "
        "stopped at an earlier failing check, or do not ask for it)"
    ) in text


def test_example_project_checks_its_recorded_judge_against_the_hand_labels(default_run):
    out, _ = default_run
    lines = {" ".join(line.split()) for line in out.stdout.splitlines()}
    for floor in (
        "PASS context_precision kappa >= 0.6 kappa 1.000 over 71 chunks, judge hand-labelled",
        "PASS context_recall kappa >= 0.6 kappa 1.000 over 51 reference sentences, judge hand-labelled",
        "PASS context_relevance[graded] weighted_kappa >= 0.6 weighted_kappa 1.000 over 71 chunks, judge hand-labelled",
        "PASS context_relevance[sentence] kappa >= 0.6 kappa 1.000 over 301 chunk sentences, judge hand-labelled",
        "PASS faithfulness kappa >= 0.6 kappa 1.000 over 103 claims, judge hand-labelled",
    ):
        assert floor in lines, out.stdout[-3000:]


def _load_module(name: str, path: Path) -> types.ModuleType:
    """The example project's script at ``path``, imported as module ``name``."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _hand_label_judge() -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The example's hand-label judge, answering HTTP requests as the fake server's responder."""
    module = _load_module("example_hand_labels", EXAMPLE / "hand_labels.py")

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        kind = body["response_format"]["json_schema"]["name"]
        payload = json.loads(body["messages"][-1]["content"])
        inputs = dict(payload)
        for name in ("contexts", "reference_sentences", "sentences", "claims"):
            if isinstance(inputs.get(name), dict):
                first = min(map(int, inputs[name]))
                inputs[name] = list(inputs[name].values())
                if first != 1 and name in ("sentences", "claims"):  # a window of a longer text
                    inputs[f"first_{name[:-1]}"] = first
        answer: dict[str, Any] = module.answer(types.SimpleNamespace(kind=kind, inputs=inputs))
        return answer

    return respond


def _always_no(body):
    def value(schema: dict[str, Any]) -> Any:  # a JSON value of the schema's shape
        if "enum" in schema:
            return min(schema["enum"])
        if schema.get("type") == "object":
            return {name: value(sub) for name, sub in schema["properties"].items()}
        return {"array": [], "boolean": False, "string": "no"}[schema["type"]]

    return value(body["response_format"]["json_schema"]["schema"])


def _coin(body):
    rng = random.Random(hashlib.sha256(json.dumps(body["messages"]).encode()).digest())

    def value(schema: dict[str, Any]) -> Any:  # a JSON value of the schema's shape
        if "enum" in schema:
            return rng.choice(schema["enum"])
        if schema.get("type") == "object":
            return {name: value(sub) for name, sub in schema["properties"].items()}
        if schema["type"] == "array":
            if "enum" in schema["items"]:
                return [n for n in schema["items"]["enum"] if rng.random() < 0.5]
            if schema["items"]["type"] == "integer":  # chunk numbers
                return [n for n in (1, 2, 3) if rng.random() < 0.5]
            return ["coin"] * rng.randint(0, 2)  # claims
        return {"boolean": rng.random() < 0.5, "string": "coin"}[schema["type"]]

    return value(body["response_format"]["json_schema"]["schema"])


@pytest.mark.parametrize("judge", ["always-yes", "always-no", "random", "hand-labels-over-http"])
def test_example_project_fails_a_judge_that_disagrees_with_the_hand_labels(fresh_example, judge):
    """The example suite, judged over HTTP through the openai client by the fake server. The judge check
    judges every labelled item whichever tests run: a judge that says always the same is caught on the
    retriever's tests alone; the random judge and the hand labels go through the whole suite."""
    from pytest_ragmetrics.testing import FakeJudgeServer

    responder = {"always-no": _always_no, "random": _coin, "hand-labels-over-http": _hand_label_judge()}
    tests = ["tests/test_retriever.py"] if judge.startswith("always-") else []
    with FakeJudgeServer(responder.get(judge)) as server:
        out = run_example(
            fresh_example,
            *tests,
            "-p",
            "no:cacheprovider",
            # The committed baseline was judged by the hand-labelled judge: not comparable with this one.
            "-o",
            "rag_baseline=",
            "-o",
            "rag_regression_gates=",
            RAGMETRICS_JUDGE_BASE_URL=server.base_url,
            RAGMETRICS_JUDGE_MODEL=judge,
            RAGMETRICS_CACHE="off",
            OPENAI_API_KEY="unused",
        )
        assert server.request_count >= 240  # every labelled item, once
    failures = [line for line in out.stdout.splitlines() if line.startswith("ragmetrics judge check failed")]
    if judge == "hand-labels-over-http":
        assert out.returncode == 0, out.stdout[-3000:]
        assert failures == []
        return
    assert out.returncode == 1
    assert failures, out.stdout[-3000:]
    assert failures[0].startswith("ragmetrics judge check failed: context_precision kappa >= 0.6 (kappa "), (
        failures
    )
    assert (
        f"over 71 chunks, judge {judge}); resting on this judge: gate 'context_precision mean >= 0.7'"
        in failures[0]
    )


def _answer_scores(report_path: Path) -> tuple[dict[str, Any], dict[tuple[str, str, str, str | None], str]]:
    """(test, sample, metric, method) -> the score's JSON text, for every answer metric in a report."""
    report: dict[str, Any] = json.loads(report_path.read_text())
    scores = {}
    for result in report["results"]:
        if result["metric"] not in ("faithfulness", "answer_relevancy", "answer_correctness"):
            continue
        for sample in result["samples"]:
            key = (result["nodeid"], sample["id"], result["metric"], result["method"])
            scores[key] = json.dumps(sample["score"])
    return report, scores


def _expected_answer_scores() -> dict[str, dict[str, dict[str, float]]]:
    """The answer scores the hand labels imply, computed by example_project/expected_scores.py."""
    module = _load_module("example_expected_scores", EXAMPLE / "expected_scores.py")
    golden = [json.loads(line) for line in (EXAMPLE / "golden.jsonl").read_text().splitlines() if line]
    from pytest_ragmetrics import split_sentences

    scores: dict[str, dict[str, dict[str, float]]] = module.answer_scores(golden, split_sentences)
    return scores


def test_example_project_replays_its_answer_scores_byte_identical_with_no_key(fresh_example):
    """Recorded from the hand labels, then replayed with no key and no cache: 0 calls, every answer
    score byte-identical to the recording run's, and equal to what the labels imply."""
    recorded = run_example(
        fresh_example,
        "tests/test_answers.py",
        "-p",
        "hand_labels",
        "--rag-cache=refresh",
        "--rag-report-json=recorded.json",
        "-p",
        "no:cacheprovider",
    )
    assert recorded.returncode == 0, recorded.stdout[-3000:]
    shutil.rmtree(fresh_example / ".ragmetrics_cache", ignore_errors=True)
    replayed = run_example(
        fresh_example, "tests/test_answers.py", "--rag-report-json=replayed.json", "-p", "no:cacheprovider"
    )
    assert replayed.returncode == 0, replayed.stdout[-3000:]
    first, before = _answer_scores(fresh_example / "recorded.json")
    second, after = _answer_scores(fresh_example / "replayed.json")
    assert first["summary"]["judge"]["calls"] > 0  # the recording run asked the hand-label judge
    assert second["summary"]["judge"]["calls"] == 0
    assert second["summary"]["judge"]["store_hits"] > 0
    # test_faithfulness[q..], five golden-set tests of the generator and one of the weakened generator
    assert len(after) == 15 + 5 * 15 + 15
    assert after == before
    expected = _expected_answer_scores()
    names = {
        ("faithfulness", None): "faithfulness",
        ("faithfulness", "not_contradicted"): "not_contradicted",
        ("answer_relevancy", None): "relevancy",
        ("answer_correctness", None): "f1",
        ("answer_correctness", "recall"): "recall",
    }
    for (_, sample_id, metric, method), score in after.items():
        generator, _, question = sample_id.rpartition("-")
        want = expected["generate_weak" if generator else "generate"][question][names[metric, method]]
        assert json.loads(score) == pytest.approx(want, abs=1e-12)


def test_example_project_catches_the_invented_claim_of_the_weakened_generator(fresh_example):
    """The README's demo: faithfulness fails on every answer of the weak generator, naming the claim."""
    out = run_example(fresh_example, "tests/test_answers.py", EXAMPLE_GENERATOR="weak")
    assert out.returncode == 1
    text = out.stdout
    for sample in ("q01", "q05", "q15"):
        assert f"FAILED tests/test_answers.py::test_faithfulness[{sample}]" in text
    assert (
        "faithfulness of sample 'q05' = 0.500, expected >= 0.9\n"
        "E         why: 1 of 2 answer claims are supported by the contexts; claim 2 'Every plan comes with "
        "a 60-day money-back guarantee.' is not found in the contexts: No retrieved article mentions a "
        "money-back guarantee."
    ) in text
    assert (
        "claim 3 'Every plan comes with a 60-day money-back guarantee.' is contradicted (chunk 2): The "
        "cancelling article says refunds are given only within 14 days of the first payment."
    ) in text
    assert "faithfulness mean over 15 samples = 0.732, expected >= 0.9" in text
    assert "ragmetrics gate failed: faithfulness mean >= 0.9" in text
    # Faithfulness per sample and over the set, nothing contradicted, and correctness F1 (its precision
    # falls) fail; relevancy and correctness recall still pass.
    assert "18 failed, 3 passed" in text


def test_a_judge_reason_holding_a_lone_surrogate_is_written_to_every_report_and_shown(fresh_example):
    """A stored answer's reason with a "\\ud800" escape (half an emoji a judge wrote, kept by the
    store as it was) ended the run in a UnicodeEncodeError at its end, no report written, and
    ``store show`` in one too. Each file now holds the escape, which the JSON report reads back as
    the text the judge gave."""
    for shard in (fresh_example / "judgments").glob("*.jsonl"):
        text = shard.read_text(encoding="utf-8")
        shard.write_text(text.replace('"reason":"', '"reason":"\\ud800', 1), encoding="utf-8")
    summary = fresh_example / "summary.md"
    out = run_example(
        fresh_example,
        "tests/test_retrieval.py",
        "-k",
        "relevance",
        "--rag-report-json=r.json",
        "--rag-report-md=r.md",
        "--rag-report-html=r.html",
        "--rag-github-summary",
        GITHUB_STEP_SUMMARY=str(summary),
    )
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
    assert "Traceback" not in out.stdout + out.stderr
    report = json.loads((fresh_example / "r.json").read_text(encoding="utf-8"))
    explanations = [s["explanation"] for r in report["results"] for s in r.get("samples") or ()]
    assert any("\ud800" in text for text in explanations)
    assert "\\ud800" in (fresh_example / "r.html").read_text(encoding="utf-8")
    for name in ("r.md", "summary.md"):  # written, though they show no passing sample's reasons
        assert (fresh_example / name).read_text(encoding="utf-8").startswith("## "), name
    shard = next((fresh_example / "judgments").glob("*.jsonl"))
    key = json.loads(shard.read_text(encoding="utf-8").splitlines()[0])["key"]
    shown = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "store", "show", key],
        cwd=fresh_example,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["answer"]["choices"][0]["reason"].startswith("\ud800")
