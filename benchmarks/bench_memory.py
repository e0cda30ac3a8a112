"""Peak memory (RSS) of judging a large golden set through ``evaluate()``, cold and warm.

10,000 samples (three chunks of four sentences each) on the three default metrics (precision, recall,
graded relevance), each phase in a fresh child process: ``cold`` judges everything with a judge that
answers instantly and keeps nothing, writing a real diskcache; ``warm`` answers everything from that
cache, as a rerun does. With ``--store`` the cold phase
records into a judgment store too, and a ``store`` phase replays from the store alone (an empty
cache), as a fresh CI checkout does. Bound: at most 150 MB peak RSS at 10,000 samples (250 MB with
``--methods five``). The figure for an empty evaluation (imports only) is printed beside it.
The cold phase also runs at ``--versus`` samples (default 1,000): its CPU per sample at both sizes
and their ratio (bound: at most 1.1, a cold run costs the same per sample however large).

    python benchmarks/bench_memory.py [--samples 10000] [--methods default|five] [--store] [--versus 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = """
import json, resource, sys, time
sys.path.insert(0, {bench_dir!r})
from _workload import FIVE_METHODS, answer, make_samples
from pytest_ragmetrics import Evaluator, Settings
from pytest_ragmetrics.judge.base import JudgeAnswer, utc_now

class Instant:
    # Answers at once and keeps nothing (a ScriptedJudge keeps every request it saw).
    async def judge(self, request):
        return JudgeAnswer(choices=(answer(request),), model="instant", judged_at=utc_now())

class Never:
    async def judge(self, request):
        raise AssertionError("a warm run must not call the judge")

phase, count, methods, cache_dir, store_dir = sys.argv[1], int(sys.argv[2]), *sys.argv[3:6]
metrics = list(FIVE_METHODS) if methods == "five" else None
samples = make_samples(count)
start, start_cpu = time.perf_counter(), time.process_time()
if count:
    if phase == "store":  # a fresh checkout: the store alone, an empty cache
        settings = Settings(cache_dir=cache_dir + "-empty", store_dir=store_dir, cache="replay")
    else:
        settings = Settings(cache_dir=cache_dir, store_dir=store_dir or None)
    with Evaluator(settings, judge=Instant() if phase == "cold" else Never()) as ev:
        result = ev.evaluate(samples, metrics)
        calls = ev.stats.calls
        hits = ev.stats.cache_hits + ev.stats.store_hits
else:
    import pytest_ragmetrics.engine, pytest_ragmetrics.judge.cache  # noqa: F401  the imports alone
    calls = hits = 0
peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({{"peak_mb": peak_kb / 1024, "seconds": time.perf_counter() - start,
                  "cpu": time.process_time() - start_cpu, "calls": calls, "hits": hits}}))
"""


def run(phase: str, count: int, methods: str, cache_dir: str, store_dir: str = "") -> dict[str, float]:
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench_dir=bench_dir)
    done = subprocess.run(
        [sys.executable, "-c", code, phase, str(count), methods, cache_dir, store_dir],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        sys.exit(f"{phase} run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--methods", choices=("default", "five"), default="default")
    parser.add_argument(
        "--store", action="store_true", help="record into a judgment store too, then replay from it alone"
    )
    parser.add_argument("--versus", type=int, default=1_000, help="the smaller cold run (0: none)")
    args = parser.parse_args()
    # Per 10,000 samples: 150 MB on the three default metrics, 250 MB on the five metric methods.
    bound = (250.0 if args.methods == "five" else 150.0) * args.samples / 10_000
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = os.path.join(tmp, "cache")
        store_dir = os.path.join(tmp, "judgments") if args.store else ""
        base = run("cold", 0, args.methods, cache_dir)
        print(f"imports only:  peak RSS {base['peak_mb']:.0f} MB")
        per_sample: list[float] = []
        if args.versus:
            small_store = store_dir and store_dir + "-small"
            small = run("cold", args.versus, args.methods, cache_dir + "-small", small_store)
            per_sample.append(small["cpu"] / args.versus)
        for phase in ("cold", "warm", "store") if args.store else ("cold", "warm"):
            figures = run(phase, args.samples, args.methods, cache_dir, store_dir)
            if phase == "cold" and per_sample:
                per_sample.append(figures["cpu"] / args.samples)
                ratio = per_sample[1] / per_sample[0]
                print(
                    f"cold CPU per sample: {per_sample[1] * 1000:.2f} ms at {args.samples:,} samples, "
                    f"{per_sample[0] * 1000:.2f} ms at {args.versus:,}: ratio {ratio:.2f} (bound <= 1.1: "
                    f"{'met' if ratio <= 1.1 else 'NOT met'}; load {os.getloadavg()[0]:.1f})"
                )
            print(
                f"{phase}:{' ' * (13 - len(phase))}peak RSS {figures['peak_mb']:.0f} MB for {args.samples:,} "
                f"samples ({args.methods} metrics; {figures['calls']:,} judge calls, {figures['hits']:,} "
                f"recorded, {figures['seconds']:.1f} s)  bound {bound:.0f} MB: ratio "
                f"{figures['peak_mb'] / bound:.2f}"
            )


if __name__ == "__main__":
    main()
