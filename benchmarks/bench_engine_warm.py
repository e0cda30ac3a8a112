"""A warm rerun through the whole engine: samples -> requests -> cache -> verdicts -> scores.

``bench_cache_lookup.py`` measures the cache alone; this adds what a real rerun pays on top (splitting,
building requests, hashing keys, scoring). 1,000 samples (three chunks of four sentences each) on the
five metric methods, all answered from a real diskcache filled by one cold pass with a scripted judge.
Every warm round uses a fresh evaluator, as a second ``pytest`` run would (nothing in memory).

The cold pass records into a disk cache and a judgment store; the warm rounds read from the local
cache alone, then from the store alone with an empty cache (a fresh CI checkout). The floor, measured
in the same run: a bare loop of ``diskcache.Cache.get`` + ``json.loads`` over the same keys (a fresh
cache object each round). Bound: at most 2.5 x the floor's CPU time from either. With ``--pytest``
the same work also runs as 1,000 marker-parametrized pytest tests (five assertions each, in a child
process); bound: at most 2 x the CPU of the same 1,000 tests with empty bodies (``-p no:ragmetrics``).

CPU time on a busy machine wanders by tens of percent; ``--instructions N`` also counts, under
valgrind (callgrind), the instructions of a warm ``evaluate()`` of N samples (beyond a first one,
which opens the cache and builds the metrics) from either source, against the floor's loop over as
many entries: a ratio that barely moves with the machine's load; with ``--pytest`` too, it also
counts the whole pytest runs of both suites (every test, a few minutes under valgrind). From the
store alone it counts twice when N is below ``--samples``: against the whole store (whose every
shard the N samples' reads index whole, lines of the other samples included) and against a store
of the N samples' judgments alone, which, as in the timed rounds, it reads whole.

    python benchmarks/bench_engine_warm.py [--samples 1000] [--rounds 5] [--pytest] [--instructions 200]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _workload import FIVE_ASSERTIONS, FIVE_METHODS, IMPORTS, answer, make_samples, write_golden

from pytest_ragmetrics import Evaluator, ScriptedJudge, Settings
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.text import default_splitter

CONFTEST_NEVER = """
import pytest

class NeverJudge:
    async def judge(self, request):
        raise AssertionError("a warm run must not call the judge")

@pytest.hookimpl(tryfirst=True)
def pytest_ragmetrics_make_judge(settings):
    return NeverJudge()
"""


def never(request: JudgeRequest) -> object:
    raise AssertionError("a warm run must not call the judge")


def forget_splits() -> None:
    # A fresh process has split nothing yet; keep the splitter's own small cache out of the figure.
    cached = getattr(default_splitter(), "_cached_spans", None)
    if cached is not None:
        cached.cache_clear()


def timed_pytest(args: list[str], cwd: Path, runs: int, *, warm_up: bool = False) -> tuple[float, float]:
    """Median wall and CPU seconds (user + system) of ``pytest args`` in a child process.

    ``warm_up``: a run that also writes the ``.pyc`` files of what it imports (as an installed
    package has them), even where ``PYTHONDONTWRITEBYTECODE`` is set: else every timed run would
    compile the plugin's modules again, a cost no installed copy pays.
    """
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    if warm_up:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=cwd, env=env,
                              capture_output=True, text=True)  # fmt: skip
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            sys.exit(f"pytest failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return statistics.median(walls), statistics.median(cpus)


def warm_rounds(samples: list, settings_for: Any, rounds: int) -> tuple[list[float], list[float], int]:
    """Time ``rounds`` warm evaluations, each with a fresh evaluator (``settings_for(round)``)."""
    walls, cpus, served = [], [], 0
    for i in range(rounds):
        forget_splits()
        # As a fresh process starts: nothing of an earlier round (a closed evaluator and what it
        # held, a cycle) left for this round's garbage collections to walk and free.
        gc.collect()
        with Evaluator(settings_for(i), judge=ScriptedJudge(never)) as evaluator:
            start, start_cpu = time.perf_counter(), time.process_time()
            evaluator.evaluate(samples, FIVE_METHODS)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - start_cpu)
            stats = evaluator.stats
            served = stats.cache_hits + stats.store_hits + stats.reused
    return walls, cpus, served


def floor_rounds(cache_dir: str, rounds: int) -> tuple[list[float], int]:
    """CPU seconds of a bare ``diskcache.Cache.get`` + ``json.loads`` of every entry, per round."""
    import diskcache

    with diskcache.Cache(cache_dir) as cache:
        keys = [k for k in cache.iterkeys() if not str(k).startswith("claim:")]
    cpus = []
    for _ in range(rounds):
        gc.collect()  # as before each warm round
        # As the engine opens it: no memory map, SQLite's page cache of 2 MiB.
        with diskcache.Cache(cache_dir, sqlite_mmap_size=0, sqlite_cache_size=512) as cache:
            start_cpu = time.process_time()
            for key in keys:
                json.loads(cache.get(key))
            cpus.append(time.process_time() - start_cpu)
    return cpus, len(keys)


GRIND_EVALUATE = """
import sys
sys.path.insert(0, {bench_dir!r})
from _workload import FIVE_METHODS, make_samples
from pytest_ragmetrics import Evaluator, ScriptedJudge, Settings
from pytest_ragmetrics.text import default_splitter

def never(request):
    raise AssertionError("a warm run must not call the judge")

samples = make_samples({samples})
default_splitter()("Warm up. The tokenizer.")
with Evaluator(Settings(**{settings!r}), judge=ScriptedJudge(never)) as evaluator:
    evaluator.evaluate(samples[:1], FIVE_METHODS)  # opens the cache or store, builds the metrics
    if {whole}:
        evaluator.evaluate(samples[1:], FIVE_METHODS)
    print(evaluator.stats.cache_hits + evaluator.stats.store_hits)
"""

GRIND_FLOOR = """
import json
import diskcache

with diskcache.Cache({cache_dir!r}) as cache:
    keys = [k for k in cache.iterkeys() if not str(k).startswith("claim:")][:{entries} + 1]
with diskcache.Cache({cache_dir!r}, sqlite_mmap_size=0, sqlite_cache_size=512) as cache:
    json.loads(cache.get(keys[0]))
    for key in keys[1:] if {whole} else ():
        json.loads(cache.get(key))
"""


def instructions(code: str, *, args: list[str] | None = None, cwd: Path | None = None) -> tuple[int, str]:
    """Instructions ``python -c code`` (or ``python args``, in ``cwd``) executes under callgrind (hash
    seed fixed: dict order is work), and what it printed."""
    env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    command = [*grind, sys.executable, *(args if args is not None else ["-c", code])]
    out = subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd)
    match = re.search(r"refs:\s+([\d,]+)", out.stderr)
    if out.returncode != 0 or match is None:
        sys.exit(f"the counted run failed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return int(match.group(1).replace(",", "")), out.stdout


def counted(samples: int, cache_dir: str, sources: dict[str, Callable[[], dict[str, Any]]]) -> None:
    """Print the instructions of a warm evaluate() of ``samples`` beyond its first, from each source,
    against the floor's loop over as many entries beyond its first."""
    bench_dir = str(Path(__file__).parent)
    for name, settings in sources.items():
        runs = [
            instructions(
                GRIND_EVALUATE.format(bench_dir=bench_dir, samples=samples, settings=settings(), whole=w)
            )
            for w in (True, False)
        ]
        work = runs[0][0] - runs[1][0]
        entries = int(runs[0][1].split()[-1]) - int(runs[1][1].split()[-1])  # read from disk
        floors = [
            instructions(GRIND_FLOOR.format(cache_dir=cache_dir, entries=entries, whole=w))[0]
            for w in (True, False)
        ]
        floor = floors[0] - floors[1]
        ratio = work / floor
        verdict = "met" if ratio <= 2.5 else "NOT met"
        print(f"instructions (callgrind), warm evaluate() of {samples - 1} samples, {name}: "
              f"{work:,} against {floor:,} for the floor over the same {entries:,} entries: "
              f"{ratio:.2f} x (bound <= 2.5 x: {verdict})")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pytest", action="store_true", help="also time the work as pytest tests")
    parser.add_argument(
        "--instructions",
        type=int,
        metavar="N",
        help="also count instructions of N samples under valgrind (slow, steady)",
    )
    args = parser.parse_args()
    if args.instructions is not None and (shutil.which("valgrind") is None or args.instructions < 2):
        parser.error("--instructions needs valgrind on PATH and at least 2 samples")
    samples = make_samples(args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        cache_dir = str(Path(tmp) / "cache")
        store_dir = str(Path(tmp) / "judgments")
        judge = ScriptedJudge(answer)
        with Evaluator(Settings(cache_dir=cache_dir, store_dir=store_dir), judge=judge) as evaluator:
            start = time.perf_counter()
            evaluator.evaluate(samples, FIVE_METHODS)
            cold = time.perf_counter() - start
        default_splitter()("Warm up. The tokenizer.")  # nltk's import is not what is measured here
        load = os.getloadavg()[0]
        print(f"samples x methods:   {args.samples:,} x {len(FIVE_METHODS)}  "
              f"({judge.calls:,} distinct judgments; cpus {os.cpu_count()}; load {load:.1f})")  # fmt: skip
        print(f"cold run (scripted): {cold:.2f} s")
        sources = {
            "local cache": lambda i: Settings(cache_dir=cache_dir),
            # A fresh CI checkout: the committed store and an empty cache.
            "store alone": lambda i: Settings(cache_dir=str(Path(tmp) / f"empty-{i}"), store_dir=store_dir),
        }
        floors, entries = floor_rounds(cache_dir, args.rounds)
        floor = statistics.median(floors)
        print(f"floor: diskcache.get + json.loads of the {entries:,} entries: median {floor:.3f} s CPU "
              f"over {args.rounds} rounds")  # fmt: skip
        for name, settings_for in sources.items():
            walls, cpus, served = warm_rounds(samples, settings_for, args.rounds)
            wall, cpu = statistics.median(walls), statistics.median(cpus)
            spread = f"min {min(walls):.3f}, max {max(walls):.3f}"
            print(f"warm evaluate(), {name}: median {wall:.3f} s wall, {cpu:.3f} s CPU over {args.rounds} "
                  f"fresh evaluators ({served:,} judgments each; {spread})")  # fmt: skip
            ratio = cpu / floor
            verdict = "met" if ratio <= 2.5 else "NOT met"
            print(f"  {ratio:.2f} x the floor's CPU (bound <= 2.5 x: {verdict}); "
                  f"{served / cpu:,.0f} judgments per CPU-second")  # fmt: skip
        if args.instructions is not None:
            n = min(args.instructions, args.samples)
            counting = {
                "local cache": lambda: {"cache_dir": cache_dir},
                "store alone": lambda: {"cache_dir": tempfile.mkdtemp(dir=tmp), "store_dir": store_dir},
            }
            if n < args.samples:
                # The timed rounds read their store whole. A replay of n of its samples still
                # indexes every shard it touches whole (n samples touch all 256), the other samples'
                # lines included: counted too against a store of these n samples' judgments alone,
                # read whole as in the timed rounds.
                own = str(Path(tmp) / "judgments-counted")
                recording = Settings(cache_dir=tempfile.mkdtemp(dir=tmp), store_dir=own)
                with Evaluator(recording, judge=ScriptedJudge(answer)) as recorder:
                    recorder.evaluate(samples[:n], FIVE_METHODS)
                counting["store alone, a store of only their judgments"] = lambda: {
                    "cache_dir": tempfile.mkdtemp(dir=tmp),
                    "store_dir": own,
                }
            counted(n, cache_dir, counting)
        if not args.pytest:
            return

        root = Path(tmp) / "suite"
        root.mkdir()
        write_golden(root / "golden.jsonl", args.samples)
        (root / "pytest.ini").write_text(f"[pytest]\nrag_cache_dir = {cache_dir}\n")
        (root / "conftest.py").write_text(CONFTEST_NEVER)
        (root / "test_golden.py").write_text(
            f"import pytest\n{IMPORTS}\n\n@pytest.mark.ragmetrics(samples='golden.jsonl')\n"
            f"def test_sample(rag_sample):\n{FIVE_ASSERTIONS}"
        )
        plain = Path(tmp) / "plain"
        plain.mkdir()
        (plain / "pytest.ini").write_text("[pytest]\n")
        (plain / "test_plain.py").write_text(
            f"import pytest\n\n@pytest.mark.parametrize('i', range({args.samples}))\n"
            "def test_sample(i):\n    pass\n"
        )
        runs = max(3, args.rounds // 2)
        timed_pytest(["-p", "no:cacheprovider"], root, 1, warm_up=True)  # the file system, .pyc files
        timed_pytest(["-p", "no:cacheprovider", "-p", "no:ragmetrics"], plain, 1, warm_up=True)
        suite, suite_cpu = timed_pytest(["-p", "no:cacheprovider"], root, runs)
        base, base_cpu = timed_pytest(["-p", "no:cacheprovider", "-p", "no:ragmetrics"], plain, runs)
        print(f"pytest, {args.samples:,} tests:  median {suite:.2f} s wall, {suite_cpu:.2f} s CPU "
              f"over {runs} runs (whole process)")  # fmt: skip
        print(f"  pytest alone:      {base:.2f} s wall, {base_cpu:.2f} s CPU for {args.samples:,} "
              "empty parametrized tests")  # fmt: skip
        ratio = suite_cpu / base_cpu
        verdict = "met" if ratio <= 2 else "NOT met"
        print(f"  {ratio:.2f} x the CPU of the empty tests (bound <= 2 x: {verdict}); "
              f"{(suite_cpu - base_cpu) / args.samples * 1000:.2f} ms of CPU per test more")  # fmt: skip
        if args.instructions is not None:
            # The same two runs, whole processes, counted: a ratio the machine's load does not move.
            suite_count = instructions("", args=["-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=root)[0]
            base_count = instructions(
                "", args=["-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:ragmetrics"], cwd=plain
            )[0]
            ratio = suite_count / base_count
            verdict = "met" if ratio <= 2 else "NOT met"
            print(f"  instructions (callgrind), whole processes: {suite_count:,} against {base_count:,} "
                  f"for the empty tests: {ratio:.2f} x (bound <= 2 x: {verdict})")  # fmt: skip


if __name__ == "__main__":
    main()
