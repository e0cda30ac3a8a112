"""A cold pytest suite against a slow judge: how close one test per sample gets to the concurrency bound.

A golden set of N samples (three chunks of four sentences each), one test per sample checking the five
metric methods (ten distinct judge requests per sample; ``--methods`` picks fewer), run by ``pytest``
in a child process against a FakeJudgeServer (another child process) that answers every request
after a fixed latency. The bound is calls x latency / concurrency; the target (at most 1.25) is for
the judging span: the wall time during which judge calls were in flight, as the run itself measures
it (the ``judging`` figure of its terminal summary, read here through a ``pytest_ragmetrics_report``
hook in the suite's conftest), printed under the whole process's wall time, which adds the
interpreter's start, the imports, collection and the report (one process; not under xdist, where
each worker measures its own). A retriever run in one process also prints how long its tests took,
in judge latencies, as the run's JUnit XML gives each test's time (setup, call and teardown): the
median (target: about one: a test declaring its scores waits for them together) and the first test
alone, which also loads the judge's client and the sentence splitter; beside them the whole wall
time per test, which adds the process's start and end, and the floor: a bare ``openai.AsyncOpenAI``
sending the same requests of one sample at once (``chat.completions.create``, ``asyncio.gather``)
to the same judge, the median over the samples, in judge latencies. On a slow machine the SDK's own
time to send each request (a few ms) keeps that floor above 1; ours over it is what the plugin adds.
Each line also gives the CPU time the run used (xdist workers included), so a figure taken on a busy
machine can be told from one the plugin is responsible for. Scenarios (``--scenario``, repeatable;
default all):

``golden``         ``@pytest.mark.ragmetrics(samples="golden.jsonl")``: the contexts are in the file;
                   a first run with an empty cache.
``model-change``   the same suite rerun with another judge model: every judgment is new.
``retriever``      the test body calls the retriever (a function building the contexts); a first run
                   with an empty cache, with ``-n 0`` and with each ``--workers`` count (pytest-xdist).
                   Each worker gets its share of the concurrency (``-n 4 --rag-concurrency=8`` for 32),
                   so the judge never has more calls in flight than the bound assumes; with
                   ``--undivided`` each worker gets all of it (more in flight than the bound).
                   ``--warm`` reruns each from the cache: what the run costs besides judging.
``retriever-rerun`` that suite rerun with another judge model (one process).

    python benchmarks/bench_cold_suite.py [--samples 100] [--latency 0.2] [--concurrency 32]
        [--scenario retriever] [--workers 4 --workers 8] [--undivided] [--warm]
        [--methods context_precision --methods context_recall]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import http.client
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from _workload import FIVE_METHODS, IMPORTS, answer, assertions, make_samples, write_golden

from pytest_ragmetrics.judge.base import JudgeRequest

SERVER_SCRIPT = """
import json, sys
from pytest_ragmetrics.testing import FakeJudgeServer
with FakeJudgeServer(latency=float(sys.argv[1])) as server:
    print(server.base_url, flush=True)
    for _ in sys.stdin:  # serve until the parent closes our stdin; a line asks when requests came
        print(json.dumps([request.received_at for request in server.requests]), flush=True)
"""

# The run's own measure of its judging span (summary.judge.seconds, left out of the report files),
# and when each test started and ended (to tell, with the judge's times, where a test's time goes).
CONFTEST = """import json
import time

import pytest

TIMES = []


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_protocol(item):
    start = time.time()
    try:
        return (yield)
    finally:
        TIMES.append((start, time.time()))


def pytest_ragmetrics_report(report):
    with open("judging.json", "w", encoding="utf-8") as handle:
        json.dump(report["summary"].get("judge", {}).get("seconds"), handle)


def pytest_unconfigure(config):
    with open("tests.json", "w", encoding="utf-8") as handle:
        json.dump(TIMES, handle)
"""

GOLDEN_TEST = """import pytest
{imports}

@pytest.mark.ragmetrics(samples="golden.jsonl")
def test_golden(rag_sample):
{assertions}"""

RETRIEVER_TEST = """import json
import pytest
from pytest_ragmetrics import RagSample
{imports}
GOLDEN = [json.loads(line) for line in open("golden.jsonl", encoding="utf-8")]


def retrieve(question):
    # Stands in for a real retriever: the contexts are only known once the test body runs.
    entry = next(e for e in GOLDEN if e["question"] == question)
    return entry["contexts"]


# The scores each test takes, declared: at its first one, the others start on the same sample.
@pytest.mark.ragmetrics(metrics={methods!r})
@pytest.mark.parametrize("entry", GOLDEN, ids=[e["id"] for e in GOLDEN])
def test_retrieval(entry):
    rag_sample = RagSample(entry["question"], retrieve(entry["question"]),
                           ground_truth=entry["ground_truth"], id=entry["id"])
{assertions}"""


#: CPU seconds of each pytest run (the judge server, a process of its own, is not counted). On a
#: machine with few cores the client's CPU per judge call can make the bound unreachable: compare
#: it with the wall time.
CPU_SECONDS: list[float] = []


def run_pytest(root: Path, args: list[str], env: dict[str, str]) -> tuple[float, dict[str, object]]:
    """Wall time and judge figures of one run (with ``judging``, its judging span in seconds, and
    ``tests``, each test's seconds in the order they ran); its CPU time (with xdist workers') goes to
    CPU_SECONDS."""
    report = root / "report.json"
    report.unlink(missing_ok=True)
    judging = root / "judging.json"
    judging.unlink(missing_ok=True)
    junit = root / "junit.xml"
    junit.unlink(missing_ok=True)
    spans = root / "tests.json"
    spans.unlink(missing_ok=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", f"--rag-report-json={report}",
         f"--junitxml={junit}", *args],
        cwd=root, env=env, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_SECONDS.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        sys.exit(f"pytest failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    judge = dict(json.loads(report.read_text())["summary"]["judge"])
    judge["judging"] = json.loads(judging.read_text()) if judging.exists() else None
    judge["tests"] = [float(case.get("time", "nan")) for case in ET.parse(junit).getroot().iter("testcase")]
    judge["spans"] = json.loads(spans.read_text()) if spans.exists() else []
    return wall, judge


def served_latency(base_url: str) -> float:
    """Seconds the judge takes to answer a lone request sent with the standard library (the median
    of three): the latency it was given, and its own time to read the request and write the answer."""
    url = urllib.parse.urlsplit(base_url)
    body = json.dumps({
        "model": "judge-a",
        "messages": [{"role": "user", "content": "Is this chunk useful?"}],
        "response_format": {"type": "json_object"},
    })  # fmt: skip
    times = []
    connection = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port)
    try:
        for _ in range(3):
            start = time.perf_counter()
            connection.request("POST", url.path.rstrip("/") + "/chat/completions", body,
                               {"Content-Type": "application/json"})  # fmt: skip
            connection.getresponse().read()
            times.append(time.perf_counter() - start)
    finally:
        connection.close()
    return statistics.median(times)


def sample_requests(samples: int, methods: tuple[str, ...]) -> list[list[JudgeRequest]]:
    """The judge requests a test of each of the first ``samples`` samples sends (the distinct ones)."""
    from pytest_ragmetrics import Evaluator, ScriptedJudge, Settings

    def record(asked: dict[str, JudgeRequest], request: JudgeRequest) -> Any:
        asked.setdefault(request.cache_key(), request)
        return answer(request)

    per_sample: list[list[JudgeRequest]] = []
    for sample in make_samples(samples):
        asked: dict[str, JudgeRequest] = {}
        with Evaluator(
            Settings(cache="off"), judge=ScriptedJudge(functools.partial(record, asked))
        ) as evaluator:
            evaluator.evaluate([sample], methods)
        per_sample.append(list(asked.values()))
    return per_sample


async def bare_tests(base_url: str, per_sample: list[list[JudgeRequest]]) -> list[float]:
    """Seconds a bare ``openai.AsyncOpenAI`` takes to send each sample's requests at once and read
    every answer (one client for all, as a run keeps one)."""
    import openai

    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, max_retries=0)

    async def one(request: JudgeRequest) -> None:
        response = await client.chat.completions.create(  # type: ignore[call-overload]
            model=request.model,
            messages=list(request.messages),
            response_format={
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": dict(request.schema), "strict": True},
            },
        )
        json.loads(response.choices[0].message.content or "{}")

    times = []
    try:
        await one(per_sample[0][0])  # the connection opened, as ours has it after its first test
        for requests in per_sample:
            start = time.perf_counter()
            await asyncio.gather(*(one(r) for r in requests))
            times.append(time.perf_counter() - start)
    finally:
        await client.close()
    return times


def where_time_goes(spans: list[list[float]], received: list[float], latency: float) -> str:
    """Where a test's time goes, the median of each part over the tests after the first, in ms:
    from its start until the judge received its first request, from the first to the last request
    the judge received, and from the last answer's due time (that request's arrival plus the
    latency) to the test's end."""
    before, spread, after = [], [], []
    for start, end in spans[1:]:
        arrived = [t for t in received if start <= t <= end]
        if arrived:
            before.append(arrived[0] - start)
            spread.append(arrived[-1] - arrived[0])
            after.append(end - arrived[-1] - latency)
    if not before:
        return "no request reached the judge during a test"
    ms = [statistics.median(part) * 1000 for part in (before, spread, after)]
    return (f"{ms[0]:.1f} ms until the judge has the first request, {ms[1]:.1f} ms until it has the "
            f"last, {ms[2]:.1f} ms from the last answer's due time to the test's end")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--workers", type=int, action="append", help="xdist worker counts (default 2, 4, 8)")
    parser.add_argument("--warm", action="store_true",
                        help="rerun each cold retriever run warm (what is not judging)")  # fmt: skip
    parser.add_argument("--undivided", action="store_true",
                        help="give each xdist worker the whole --concurrency, not its share")  # fmt: skip
    parser.add_argument("--methods", action="append", choices=FIVE_METHODS,
                        help="the metric methods each test checks (default all five)")  # fmt: skip
    parser.add_argument("--scenario", action="append",
                        choices=("golden", "model-change", "retriever",
                                 "retriever-rerun"))  # fmt: skip
    args = parser.parse_args()
    scenarios = args.scenario or ["golden", "model-change", "retriever", "retriever-rerun"]
    workers = args.workers or [2, 4, 8]
    methods = tuple(args.methods or FIVE_METHODS)
    body = {"imports": IMPORTS, "assertions": assertions(methods), "methods": list(methods)}
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER_SCRIPT, str(args.latency)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None and server.stdin is not None
    base_url = server.stdout.readline().strip()
    server_in, server_out = server.stdin, server.stdout

    def received() -> list[float]:
        """When each request so far reached the judge (its clock: time.time())."""
        server_in.write("\n")
        server_in.flush()
        return sorted(json.loads(server_out.readline()))

    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "OPENAI_API_KEY": "sk-bench",
        "RAGMETRICS_JUDGE_BASE_URL": base_url,
        "RAGMETRICS_CONCURRENCY": str(args.concurrency),
    }
    print(f"{args.samples} samples x {len(methods)} methods, judge latency {args.latency * 1000:.0f} ms "
          f"(a lone request answered in {served_latency(base_url) * 1000:.1f} ms), "
          f"concurrency {args.concurrency}, cpus {os.cpu_count()}, "
          f"PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE') or 'unset'}")  # fmt: skip

    def show(name: str, wall: float, judge: dict[str, object], per_test: bool = False) -> None:
        calls = int(judge["calls"])  # type: ignore[call-overload]
        bound = calls * args.latency / args.concurrency
        ratio = f"{wall / bound:.2f}" if bound else "n/a"
        print(
            f"{name:<28} {wall:7.2f} s  {calls:5d} calls  bound {bound:6.2f} s  ratio {ratio}  "
            f"cpu {CPU_SECONDS[-1]:6.2f} s"
        )
        span = judge.get("judging")
        if bound and isinstance(span, (int, float)) and "-n " not in name:
            verdict = "met" if span / bound <= 1.25 else "NOT met"
            print(f"{'  judging span':<28} {span:7.2f} s  ratio {span / bound:.2f}  "
                  f"(bound <= 1.25: {verdict}; load {os.getloadavg()[0]:.1f})")  # fmt: skip
        if per_test:  # one process, one test at a time: how long each waits for its judge calls
            tests = judge["tests"]
            assert isinstance(tests, list) and tests
            # The first test apart: it also loads the judge's client and the sentence splitter.
            median = statistics.median(tests[1:] or tests) / args.latency
            # The floor, in the same run: what the SDK alone takes for the same requests at once.
            per_sample = sample_requests(args.samples, methods)
            bare = asyncio.run(bare_tests(base_url, per_sample))
            floor = statistics.median(bare[1:] or bare) / args.latency  # the first apart, as ours
            verdict = "met" if median <= 1.1 else "NOT met"
            print(f"{'  per test, median':<28} {median:7.2f} judge latencies (about 1, at most 1.1: "
                  f"{verdict}); the first test {tests[0] / args.latency:.2f} (it loads the judge's "
                  f"client); whole wall per test {wall / args.samples / args.latency:.2f}")  # fmt: skip
            print(f"{'  bare openai, same requests':<28} {floor:7.2f} judge latencies ({len(per_sample[0])} "
                  f"requests at once, median); ours {median / floor:.3f} x that")  # fmt: skip
            spans = judge["spans"]
            assert isinstance(spans, list)
            print(f"{'  where it goes, median':<28} {where_time_goes(spans, received(), args.latency)}")

    def warm_run(root: Path, run_args: list[str], cold: float, judge: dict[str, object]) -> None:
        # The same suite answered from the cache: what the run costs besides judging (interpreters,
        # imports, pytest, scoring). On a loaded machine it is most of it.
        warm, _ = run_pytest(root, run_args, env)
        bound = int(judge["calls"]) * args.latency / args.concurrency  # type: ignore[call-overload]
        print(f"{'  same suite, warm':<28} {warm:7.2f} s  judging took {cold - warm:.2f} s: "
              f"{(cold - warm) / bound:.2f} x the bound")  # fmt: skip

    try:
        with tempfile.TemporaryDirectory() as tmp:
            for kind in ("golden", "retriever"):
                wanted = [s for s in scenarios if s.startswith(kind)] + (
                    ["model-change"] if kind == "golden" and "model-change" in scenarios else []
                )
                if not wanted:
                    continue
                root = Path(tmp) / kind
                root.mkdir()
                write_golden(root / "golden.jsonl", args.samples)
                (root / "pytest.ini").write_text("[pytest]\n")
                (root / "conftest.py").write_text(CONFTEST)
                test = GOLDEN_TEST if kind == "golden" else RETRIEVER_TEST
                (root / f"test_{kind}.py").write_text(test.format(**body))
                first = ["--rag-judge-model=judge-a", "--rag-cache-dir=cache-a"]
                if kind == "golden":
                    cold, judge = run_pytest(root, first, env)
                    show("golden set, cold", cold, judge)
                    # The same suite answered from the cache: what the run costs besides judging
                    # (interpreter, imports, pytest, scoring). On a loaded machine it is most of it.
                    warm_run(root, first, cold, judge)
                    if "model-change" in scenarios:
                        rerun = ["--rag-judge-model=judge-b", "--rag-cache-dir=cache-a"]
                        show("golden set, model changed", *run_pytest(root, rerun, env))
                    continue
                if "retriever" in scenarios:
                    for n in dict.fromkeys([0, *workers]):
                        cache = f"--rag-cache-dir=cache-n{n}"
                        extra = []
                        name = f"retriever in body, -n {n}"
                        if n:
                            share = args.concurrency if args.undivided else max(1, args.concurrency // n)
                            extra = ["-n", str(n), f"--rag-concurrency={share}"]
                            name += f" x {share}"
                        wall, judge = run_pytest(root, ["--rag-judge-model=judge-a", cache, *extra], env)
                        show(name, wall, judge, per_test=not n)
                        if args.warm:
                            warm_run(root, ["--rag-judge-model=judge-a", cache, *extra], wall, judge)
                if "retriever-rerun" in scenarios:
                    if "retriever" not in scenarios:
                        run_pytest(root, [*first[:1], "--rag-cache-dir=cache-n0"], env)
                    rerun = ["--rag-judge-model=judge-b", "--rag-cache-dir=cache-n0"]
                    show("retriever, model changed", *run_pytest(root, rerun, env))
    finally:
        server.stdin.close()
        server.wait(timeout=10)


if __name__ == "__main__":
    main()
