"""A warm rerun through the whole engine: samples -> requests -> cache -> verdicts -> scores.

``bench_cache_lookup.py`` measures the cache alone; this adds what a real rerun pays on top (splitting,
building requests, hashing keys, scoring). 1,000 samples (three chunks of four sentences each) on the
five metric methods, all answered from a real diskcache filled by one cold pass with a scripted judge.
Every warm round uses a fresh evaluator, as a second ``pytest`` run would (nothing in memory).

The cold pass records into a disk cache and a judgment store; the warm rounds read from the local
cache alone, then from the store alone with an empty cache (a fresh CI checkout). Bound: at least
10,000 judgments per CPU-second from either. With ``--pytest`` the same work also runs as 1,000 marker-parametrized pytest
tests (five assertions each, in a child process); bound: 1.3 x the 1 s target plus what pytest itself
costs for 1,000 parametrized tests that do nothing (measured with ``-p no:ragmetrics``). The ratio to
1.3 x the measured warm ``evaluate()`` time instead is printed too.

    python benchmarks/bench_engine_warm.py [--samples 1000] [--rounds 5] [--pytest]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
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
        with Evaluator(settings_for(i), judge=ScriptedJudge(never)) as evaluator:
            start, start_cpu = time.perf_counter(), time.process_time()
            evaluator.evaluate(samples, FIVE_METHODS)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - start_cpu)
            stats = evaluator.stats
            served = stats.cache_hits + stats.store_hits + stats.reused
    return walls, cpus, served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pytest", action="store_true", help="also time the work as pytest tests")
    args = parser.parse_args()
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
        print(f"samples x methods:   {args.samples:,} x {len(FIVE_METHODS)}  "
              f"({judge.calls:,} distinct judgments; cpus {os.cpu_count()}; load {os.getloadavg()[0]:.1f})")  # fmt: skip
        print(f"cold run (scripted): {cold:.2f} s")
        sources = {
            "local cache": lambda i: Settings(cache_dir=cache_dir),
            # A fresh CI checkout: the committed store and an empty cache.
            "store alone": lambda i: Settings(cache_dir=str(Path(tmp) / f"empty-{i}"), store_dir=store_dir),
        }
        for name, settings_for in sources.items():
            walls, cpus, served = warm_rounds(samples, settings_for, args.rounds)
            wall, cpu = statistics.median(walls), statistics.median(cpus)
            print(f"warm evaluate(), {name}: median {wall:.3f} s wall, {cpu:.3f} s CPU over {args.rounds} "
                  f"fresh evaluators ({served:,} judgments each; min {min(walls):.3f}, max {max(walls):.3f})")  # fmt: skip
            print(f"  throughput:        {served / cpu:,.0f} judgments per CPU-second  "
                  f"(bound >= 10,000: ratio {10_000 / (served / cpu):.2f}); {served / wall:,.0f} per second")  # fmt: skip
        walls, cpus, _ = warm_rounds(samples, sources["local cache"], args.rounds)
        wall, cpu = statistics.median(walls), statistics.median(cpus)
        bound_s = args.samples / 1000
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
        for what, measured, alone, engine in (("wall", suite, base, wall), ("CPU", suite_cpu, base_cpu, cpu)):
            bound = 1.3 * bound_s + alone
            relative = 1.3 * engine + alone
            print(f"  bound ({what}):{' ' * (7 - len(what))}1.3 x {bound_s:g} s + {alone:.2f} = "
                  f"{bound:.2f} s: ratio {measured / bound:.2f}  (to 1.3 x the measured {engine:.3f} s "
                  f"+ {alone:.2f} = {relative:.2f} s: ratio {measured / relative:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
