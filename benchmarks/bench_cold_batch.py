"""A cold batch: N distinct judgments through CachedJudge(readwrite) + OpenAIJudge over real HTTP.

The FakeJudgeServer answers every request after a fixed latency (default 200 ms). With concurrency C
the ideal wall time is N x latency / C; the printed ratio (wall / ideal) should be at most 1.2.
Side by side, the same requests through a bare ``openai.AsyncOpenAI`` loop (an asyncio semaphore of
C, ``chat.completions.create``, ``json.loads`` of the answer): the client CPU per call of ours
against it, bound 1.5 x. ``--rounds`` pairs (ours, then the bare loop, each on keys of its own)
are run in turn; the figures printed are the medians, the ratio the median of the rounds' ratios,
so a neighbour's burst of CPU on a shared machine moves one round, not the figure.

By default the server runs in a child process, as a real judge would (its handler threads then do not
compete with the client for this interpreter's GIL); ``--in-process`` runs it in a thread instead.

    python benchmarks/bench_cold_batch.py [--requests 320] [--latency 0.2] [--concurrency 32]
                                          [--response-format auto|json_schema|json_object|text]
                                          [--rounds 5]

With ``auto`` (the default) the first request goes alone, to find out the server's response format:
one latency more than ``json_schema``, which the ideal below includes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.openai_judge import OpenAIJudge
from pytest_ragmetrics.judge.stats import JudgeStats
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.testing import FakeJudgeServer

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "useful": {"type": "boolean"}},
    "required": ["reason", "useful"],
    "additionalProperties": False,
}

SERVER_SCRIPT = """
import sys, time
from pytest_ragmetrics.testing import FakeJudgeServer
with FakeJudgeServer(latency=float(sys.argv[1])) as server:
    print(server.base_url, flush=True)
    sys.stdin.read()  # serve until the parent closes our stdin
"""


def make_requests(count: int, offset: int = 0) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            kind="context_precision",
            prompt_version="1",
            model="judge-model",
            messages=(
                {"role": "system", "content": "You judge whether a retrieved chunk is useful."},
                {"role": "user", "content": f"Question: capital of France?\nChunk {i}: Paris is ..."},
            ),
            schema_name="chunk_verdict",
            schema=SCHEMA,
            inputs={"question": "capital of France?", "chunk": f"Chunk {i}: Paris is ..."},
            label=f"bench[{i}]",
        )
        for i in range(offset, offset + count)
    ]


async def batch(
    base_url: str, requests: list[JudgeRequest], concurrency: int, tmp: Path, response_format: str
) -> JudgeStats:
    stats = JudgeStats()
    judge = CachedJudge(
        lambda: OpenAIJudge(
            api_key="sk-bench",
            base_url=base_url,
            stats=stats,
            response_format=response_format,  # type: ignore[arg-type]
        ),
        mode="readwrite",
        cache_dir=tmp / "cache",
        store=JudgmentStore(tmp / "judgments"),
        stats=stats,
        concurrency=concurrency,
    )
    try:
        await asyncio.gather(*(judge.judge(r) for r in requests))
    finally:
        await judge.aclose()
    return stats


async def bare(base_url: str, requests: list[JudgeRequest], concurrency: int) -> None:
    """The floor: the same requests through the SDK alone, as little around it as a client needs."""
    import json

    import openai

    client = openai.AsyncOpenAI(api_key="sk-bench", base_url=base_url, max_retries=0)
    semaphore = asyncio.Semaphore(concurrency)

    async def one(request: JudgeRequest) -> None:
        async with semaphore:
            response = await client.chat.completions.create(
                model=request.model,
                messages=list(request.messages),  # type: ignore[arg-type]
                response_format={
                    "type": "json_schema",
                    "json_schema": {
                        "name": request.schema_name,
                        "schema": dict(request.schema),
                        "strict": True,
                    },
                },  # type: ignore[typeddict-item]
            )
            json.loads(response.choices[0].message.content or "{}")

    try:
        await asyncio.gather(*(one(r) for r in requests))
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=320)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--in-process", action="store_true", help="run the fake server in a thread")
    parser.add_argument(
        "--response-format", default="auto", choices=("auto", "json_schema", "json_object", "text")
    )
    parser.add_argument("--rounds", type=int, default=5, help="pairs of runs, ours then the bare loop")
    args = parser.parse_args()

    child: subprocess.Popen[str] | None = None
    server: FakeJudgeServer | None = None
    if args.in_process:
        server = FakeJudgeServer(latency=args.latency).start()
        base_url = server.base_url
    else:
        child = subprocess.Popen(
            [sys.executable, "-c", SERVER_SCRIPT, str(args.latency)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdout is not None
        base_url = child.stdout.readline().strip()
    try:
        # Warm up imports (openai is imported on first use) so they are not timed.
        import openai  # noqa: F401

        walls: list[float] = []
        ours_ms: list[float] = []
        bare_ms: list[float] = []
        for round_ in range(args.rounds):
            # Keys of their own in every run, so the server answers them afresh; the same count,
            # concurrency and latency.
            offset = 2 * round_ * args.requests
            with tempfile.TemporaryDirectory() as tmp:
                start, start_cpu = time.perf_counter(), time.process_time()
                stats = asyncio.run(
                    batch(
                        base_url,
                        make_requests(args.requests, offset),
                        args.concurrency,
                        Path(tmp),
                        args.response_format,
                    )
                )
                walls.append(time.perf_counter() - start)
                ours_ms.append((time.process_time() - start_cpu) / max(stats.calls, 1) * 1000)
                stored = len(JudgmentStore(Path(tmp) / "judgments"))
            start_cpu = time.process_time()
            asyncio.run(
                bare(base_url, make_requests(args.requests, offset + args.requests), args.concurrency)
            )
            bare_ms.append((time.process_time() - start_cpu) / args.requests * 1000)
            print(
                f"round {round_ + 1}:      {walls[-1]:.2f} s; client CPU {ours_ms[-1]:.2f} ms per call, "
                f"bare {bare_ms[-1]:.2f} ms: {ours_ms[-1] / bare_ms[-1]:.2f} x"
            )
    finally:
        if server is not None:
            server.stop()
        if child is not None:
            assert child.stdin is not None
            child.stdin.close()
            child.wait(timeout=10)

    # auto sends its first request alone (finding out the server's format), then the rest.
    probe = 1 if args.response_format == "auto" else 0
    ideal = (probe + (stats.calls - probe) / args.concurrency) * args.latency
    print(f"server:       {'thread in this process' if args.in_process else 'child process'}")
    print(
        f"requests:     {args.requests}  judge calls: {stats.calls}  "
        f"retries: {stats.retries}  stored: {stored}"
    )
    print(
        f"latency:      {args.latency * 1000:.0f} ms  concurrency: {args.concurrency}  "
        f"response format: {args.response_format}"
    )
    wall = statistics.median(walls)
    print(f"wall time:    {wall:.2f} s (median of {args.rounds} rounds; load {os.getloadavg()[0]:.1f})")
    print(f"ideal:        {ideal:.2f} s  (calls x latency / concurrency, plus one latency for auto)")
    print(f"ratio:        {wall / ideal:.2f}  (target <= 1.2)")
    ours, floor = statistics.median(ours_ms), statistics.median(bare_ms)
    ratio = statistics.median(o / b for o, b in zip(ours_ms, bare_ms, strict=True))
    verdict = "met" if ratio <= 1.5 else "NOT met"
    print(
        f"client CPU:   {ours:.2f} ms per call; a bare openai.AsyncOpenAI loop {floor:.2f} ms (medians): "
        f"{ratio:.2f} x, the median of the rounds' ratios (bound <= 1.5 x: {verdict})"
    )


if __name__ == "__main__":
    main()
