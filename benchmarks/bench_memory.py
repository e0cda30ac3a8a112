"""Peak memory (RSS) of judging a large golden set through ``evaluate()``, cold and warm.

10,000 samples (three chunks of four sentences each) on the three default metrics (precision, recall,
graded relevance), each phase in a fresh child process: ``cold`` judges everything with a judge that
answers instantly and keeps nothing, writing a real diskcache; ``warm`` answers everything from that
cache, as a rerun does. With ``--store`` the cold phase
records into a judgment store too, and a ``store`` phase replays from the store alone (an empty
cache), as a fresh CI checkout does. Bound: at most 150 MB peak RSS at 10,000 samples (250 MB with
``--methods five``). The figure for an empty evaluation (imports only) is printed beside it.
The cold phase also runs at ``--versus`` samples (default 1,000): its CPU per sample at both sizes
and their ratio (bound: at most 1.1, a cold run costs the same per sample however large). The two
sizes run in turn, ``--rounds`` times (default 3), each in a fresh child process with fresh
directories; the ratio printed is the median of the rounds' ratios, as a neighbour's burst of CPU
on a shared machine moves one round. ``--instructions`` also counts the instructions each size
executes under valgrind (callgrind), beyond those of the imports alone: a figure that the machine's
load does not move (slow: pick small sizes, e.g. ``--samples 2000 --versus 200``).

    python benchmarks/bench_memory.py [--samples 10000] [--methods default|five] [--store] [--versus 1000]
        [--rounds 3] [--instructions]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
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


def run(
    phase: str, count: int, methods: str, cache_dir: str, store_dir: str = "", grind: bool = False
) -> dict[str, float]:
    """One phase in a child process: its figures (with ``grind``, ``instructions`` too, counted by
    callgrind with the hash seed fixed, as dict order is work)."""
    bench_dir = os.path.dirname(os.path.abspath(__file__))
    code = CHILD.format(bench_dir=bench_dir)
    prefix = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"] if grind else []
    done = subprocess.run(
        [*prefix, sys.executable, "-c", code, phase, str(count), methods, cache_dir, store_dir],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONHASHSEED": "0"} if grind else None,
    )
    if done.returncode != 0:
        sys.exit(f"{phase} run failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    if grind:
        match = re.search(r"refs:\s+([\d,]+)", done.stderr)
        if match is None:
            sys.exit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
        figures["instructions"] = int(match.group(1).replace(",", ""))
    return figures


def cold_per_sample(
    args: argparse.Namespace, cache_dir: str, store_dir: str
) -> tuple[dict[str, float], list[float], list[float]]:
    """The cold phase at ``--versus`` and at ``--samples`` samples, in turn, ``--rounds`` times: the
    first large run's figures (it fills ``cache_dir`` and ``store_dir`` for the warm phases), and
    each size's CPU per sample, round by round."""
    small: list[float] = []
    large: list[float] = []
    first: dict[str, float] = {}
    for round_ in range(args.rounds):
        for count, into in ((args.versus, small), (args.samples, large)):
            if count == args.samples and not first:
                first = figures = run("cold", count, args.methods, cache_dir, store_dir)
            else:
                where = f"{cache_dir}-{round_}-{count}"
                figures = run(
                    "cold", count, args.methods, where, store_dir and f"{store_dir}-{round_}-{count}"
                )
            into.append(figures["cpu"] / count)
    return first, small, large


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--methods", choices=("default", "five"), default="default")
    parser.add_argument(
        "--store", action="store_true", help="record into a judgment store too, then replay from it alone"
    )
    parser.add_argument("--versus", type=int, default=1_000, help="the smaller cold run (0: none)")
    parser.add_argument("--rounds", type=int, default=3, help="cold runs of each size, in turn")
    parser.add_argument(
        "--instructions", action="store_true", help="also count the cold runs' instructions (valgrind)"
    )
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH")
    # Per 10,000 samples: 150 MB on the three default metrics, 250 MB on the five metric methods.
    bound = (250.0 if args.methods == "five" else 150.0) * args.samples / 10_000
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = os.path.join(tmp, "cache")
        store_dir = os.path.join(tmp, "judgments") if args.store else ""
        base = run("cold", 0, args.methods, cache_dir)
        print(f"imports only:  peak RSS {base['peak_mb']:.0f} MB")
        cold: dict[str, float] = {}
        if args.versus:
            load = os.getloadavg()[0]
            cold, small, large = cold_per_sample(args, cache_dir, store_dir)
            for round_, (one, other) in enumerate(zip(small, large, strict=True), start=1):
                print(
                    f"  round {round_}: cold CPU per sample {other * 1000:.2f} ms at {args.samples:,}, "
                    f"{one * 1000:.2f} ms at {args.versus:,}: {other / one:.2f}"
                )
            ratio = statistics.median(other / one for one, other in zip(small, large, strict=True))
            print(
                f"cold CPU per sample: {statistics.median(large) * 1000:.2f} ms at {args.samples:,} "
                f"samples, {statistics.median(small) * 1000:.2f} ms at {args.versus:,} (medians of "
                f"{args.rounds} rounds): ratio {ratio:.2f}, the median of the rounds' ratios (bound <= "
                f"1.1: {'met' if ratio <= 1.1 else 'NOT met'}; load {load:.1f} to {os.getloadavg()[0]:.1f})"
            )
        if args.versus and args.instructions:
            # Beyond a run of a few samples: the imports, the evaluator's start and what it loads on
            # first use are not per sample.
            few = 10
            counts = {}
            for count in (few, args.versus, args.samples):
                where = os.path.join(tmp, f"grind-{count}")
                figures = run(
                    "cold", count, args.methods, where + "-cache", store_dir and where + "-store", True
                )
                counts[count] = int(figures["instructions"])
            per = {n: (counts[n] - counts[few]) / (n - few) for n in (args.versus, args.samples)}
            print(
                f"cold instructions per sample (beyond a run of {few} samples, {counts[few]:,}): "
                f"{per[args.samples]:,.0f} at {args.samples:,}, {per[args.versus]:,.0f} at "
                f"{args.versus:,}: ratio {per[args.samples] / per[args.versus]:.3f}"
            )
        for phase in ("cold", "warm", "store") if args.store else ("cold", "warm"):
            figures = cold or run(phase, args.samples, args.methods, cache_dir, store_dir)
            cold = {}
            print(
                f"{phase}:{' ' * (13 - len(phase))}peak RSS {figures['peak_mb']:.0f} MB for {args.samples:,} "
                f"samples ({args.methods} metrics; {figures['calls']:,} judge calls, {figures['hits']:,} "
                f"recorded, {figures['seconds']:.1f} s)  bound {bound:.0f} MB: ratio "
                f"{figures['peak_mb'] / bound:.2f}"
            )


if __name__ == "__main__":
    main()
