"""The batch path against the live one: exporting requests and importing results, in CPU and memory.

N distinct judge requests (context precision of a chunk, as a golden set asks them), made one at a
time as a run makes them. The CPU time (all threads of the process) of:

- **export**: writing the N requests instead of asking (``pytest --rag-batch``): each one's key, its
  messages and the body a live call would send, its line and its record in the requests file, then
  the batch file(s);
- **import**: importing a results file of their N answers, in another order (``store batch import``):
  each line joined on its ``custom_id``, validated, recorded into a store and a cache;
- **live**: recording the same N answers the way the live path does as each arrives: the judge's
  validation of the chat completion, then the cached judge's recording (checked against the request,
  a store line, a disk-cache entry) inside the judging loop. Building each request and its answer is
  not counted.

Bound: export and import each cost at most the live path's CPU. Memory: the peak resident size after
each phase, which streams (one request, one line at a time): run two sizes (``--requests 20000``
and ``--requests 100000``) to see what grows with N (the store's index of its lines, the keys an
export has written).

    python benchmarks/bench_batch.py [--requests 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from pytest_ragmetrics import judgments as J
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.judge.batch import AskedRequests, BatchExport, import_results
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.testing import default_responder

PARAMS = J.JudgeParams("gpt-4o-mini")


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def requests(count: int) -> Iterator[JudgeRequest]:
    for i in range(count):
        yield J.precision_request(
            f"What is the monthly data limit of plan {i}?",
            f"Plan {i} includes {i % 50} GB of data each month.",
            "ground_truth",
            f"Plan {i} costs {i % 90} dollars and includes {i % 50} GB of data each month. Roaming is extra.",
            PARAMS,
            f"context_precision of sample 's{i}', chunk 1",
        )


def completion(body: dict, number: int) -> dict:
    content = json.dumps(default_responder(body))
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 120, "completion_tokens": 20, "total_tokens": 140},
    }


def cached_judge(root: Path, judge: OpenAIJudge) -> CachedJudge:
    return CachedJudge(lambda: judge, cache_dir=root / "cache", store=JudgmentStore(root / "store"))


def line(text: str, cpu: float, wall: float, extra: str = "") -> None:
    print(f"{text:7} {cpu:7.2f} s CPU {wall:7.2f} s wall  peak RSS {peak_mib():4.0f} MiB  {extra}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    args = parser.parse_args()
    n = args.requests
    judge = OpenAIJudge("gpt-4o-mini", api_key="unused")
    import openai.types.chat  # noqa: F401 - both paths validate with it: imported before either is timed

    print(f"{n:,} requests; load {os.getloadavg()[0]:.1f}; peak RSS {peak_mib():.0f} MiB at the start")

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)

        batch_file = root / "export" / "round1.jsonl"
        exporter = cached_judge(root / "export", judge)
        cpu, wall = time.process_time(), time.perf_counter()
        export = BatchExport.create(batch_file)
        for request in requests(n):
            exporter._to_batch(export, [request])
        summary = export.finish()
        export_cpu = time.process_time() - cpu
        size = sum((batch_file.parent / f).stat().st_size for f in summary.files)
        files = f"{summary.requests:,} lines in {len(summary.files)} file(s), {size / 2**20:.0f} MiB"
        line("export", export_cpu, time.perf_counter() - wall, f"({files})")

        # The results in another order than asked (the even lines, then the odd ones), streamed.
        results = root / "results.jsonl"
        with results.open("w", encoding="utf-8") as target:
            for parity in (0, 1):
                for name in summary.files:
                    with (batch_file.parent / name).open(encoding="utf-8") as source:
                        for i, text in enumerate(source):
                            if i % 2 == parity:
                                asked = json.loads(text)
                                response = {"status_code": 200, "request_id": "r",
                                            "body": completion(asked["body"], i)}  # fmt: skip
                                result = {"id": "b", "custom_id": asked["custom_id"], "response": response}
                                target.write(json.dumps({**result, "error": None}) + "\n")
        importer = cached_judge(root / "import", judge)
        cpu, wall = time.process_time(), time.perf_counter()
        asked_requests = AskedRequests(batch_file)
        outcome = import_results(
            results,
            asked_requests,
            read=judge.answer_from_body,
            recorded=importer.recorded,
            record=importer.record_answers,
        )
        asked_requests.close()
        importer.close_cache()
        import_cpu = time.process_time() - cpu
        line("import", import_cpu, time.perf_counter() - wall, f"({outcome.recorded:,} recorded)")
        assert outcome.recorded == n and not outcome.failed and not outcome.refused

        live = cached_judge(root / "live", judge)

        async def record_live() -> float:
            spent = 0.0
            for i, request in enumerate(requests(n)):
                body = completion(judge.request_body(request), i)  # what the server answered
                started = time.process_time()
                answer = judge.answer_from_body(request, body)
                await live._record(request, request.cache_key(), answer)
                spent += time.process_time() - started
            return spent

        wall = time.perf_counter()
        live_cpu = asyncio.run(record_live())
        cpu = time.process_time()
        live.close_cache()
        live_cpu += time.process_time() - cpu
        line("live", live_cpu, time.perf_counter() - wall, "(recording only; wall time includes building)")

    for name, spent in (("export", export_cpu), ("import", import_cpu)):
        ratio = spent / live_cpu
        print(f"{name}: {ratio:.2f} x the live path's CPU (bound 1.00): {'met' if ratio <= 1 else 'NOT met'}")


if __name__ == "__main__":
    main()
