"""The judgment store at scale: size on disk, git add and git status, and replay from the store alone.

Records a golden set of synthetic samples (10,000 by default: 100,000 distinct judgments of the five
metric methods, answered by a scripted judge) into a judgment store and a disk cache, then measures:

- the store's size on disk (allocated blocks, as ``du`` counts them). Bound: at most 60 MiB at
  100,000 judgments.
- ``git add`` of the store in a fresh repository (bound 3 s) and ``git status`` afterwards (median of
  5, bound 0.1 s).
- a replay run from the store alone (fresh, empty cache) against a replay run from the warm cache
  alone (no store), both through ``evaluate()`` with fresh evaluators.
  Bound: within 1.2x.

    python benchmarks/bench_store_scale.py [--samples 10000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from _workload import FIVE_METHODS, answer, make_samples

from pytest_ragmetrics import Evaluator, ScriptedJudge, Settings
from pytest_ragmetrics.judge.base import JudgeRequest
from pytest_ragmetrics.judge.store import JudgmentStore

MIB = 1024 * 1024
GIT_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@example.com",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@example.com",
}


def never(request: JudgeRequest) -> object:
    raise AssertionError("a replay run must not call the judge")


def disk_usage(path: Path) -> tuple[int, int, int]:
    """(allocated bytes, apparent bytes, files) under ``path``, as ``du`` and ``du -b`` count them."""
    allocated = apparent = files = 0
    for root, dirs, names in os.walk(path):
        for name in [*dirs, *names]:
            info = os.lstat(os.path.join(root, name))
            allocated += info.st_blocks * 512
            apparent += info.st_size
            files += name in names
    return allocated, apparent, files


def git(repo: Path, *args: str) -> float:
    start = time.perf_counter()
    subprocess.run(["git", *args], cwd=repo, env=GIT_ENV, check=True, capture_output=True)
    return time.perf_counter() - start


def git_figures(repo: Path) -> tuple[float, float, int]:
    """Seconds of ``git add`` of everything in ``repo``, the median ``git status`` after a commit, and
    the bytes of the repository's objects (git compresses each)."""
    git(repo, "init", "-q")
    added = git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "store")
    git(repo, "status", "--porcelain")  # the index is refreshed once; what a user sees after is measured
    status = statistics.median(git(repo, "status", "--porcelain") for _ in range(5))
    objects = disk_usage(repo / ".git" / "objects")[1]
    return added, status, objects


def replay_seconds(samples: list, settings: Settings, rounds: int) -> tuple[float, float, int]:
    walls, cpus, served = [], [], 0
    for _ in range(rounds):
        with Evaluator(settings, judge=ScriptedJudge(never)) as evaluator:
            start, start_cpu = time.perf_counter(), time.process_time()
            evaluator.evaluate(samples, FIVE_METHODS)
            walls.append(time.perf_counter() - start)
            cpus.append(time.process_time() - start_cpu)
            served = evaluator.stats.cache_hits + evaluator.stats.store_hits + evaluator.stats.reused
    return statistics.median(walls), statistics.median(cpus), served


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("git is needed")
    samples = make_samples(args.samples)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        store_dir = repo / "judgments"
        cache_dir = Path(tmp) / "cache"
        judge = ScriptedJudge(answer)
        start = time.perf_counter()
        settings = Settings(cache_dir=str(cache_dir), store_dir=str(store_dir))
        with Evaluator(settings, judge=judge) as evaluator:
            evaluator.evaluate(samples, FIVE_METHODS)
        print(f"recorded {judge.calls:,} judgments of {args.samples:,} samples in "
              f"{time.perf_counter() - start:.1f} s")  # fmt: skip
        count = len(JudgmentStore(store_dir))
        allocated, apparent, files = disk_usage(store_dir)
        bound = 60 * MIB * count / 100_000
        print(f"store on disk:       {allocated / MIB:.1f} MiB in {files} files "
              f"({apparent / count:.0f} bytes per judgment; bound {bound / MIB:.1f} MiB: "
              f"ratio {allocated / bound:.2f})")  # fmt: skip
        added, status, objects = git_figures(repo)
        print(f"git add:             {added:.2f} s (bound 3 s: ratio {added / 3:.2f})")
        print(f"git status:          {status * 1000:.0f} ms (bound 100 ms: ratio {status / 0.1:.2f})")
        print(f"in git's objects:    {objects / MIB:.1f} MiB (compressed by git)")

        warm, warm_cpu, served = replay_seconds(
            samples, Settings(cache_dir=str(cache_dir), cache="replay"), args.rounds
        )
        alone, alone_cpu = [], []
        for i in range(args.rounds):
            fresh = Path(tmp) / f"empty-cache-{i}"
            wall, cpu, served_store = replay_seconds(
                samples, Settings(cache_dir=str(fresh), store_dir=str(store_dir), cache="replay"), 1
            )
            alone.append(wall)
            alone_cpu.append(cpu)
        store_wall, store_cpu = statistics.median(alone), statistics.median(alone_cpu)
        print(f"replay, warm cache:  {warm:.2f} s wall, {warm_cpu:.2f} s CPU ({served:,} judgments, "
              f"median of {args.rounds})")  # fmt: skip
        print(f"replay, store alone: {store_wall:.2f} s wall, {store_cpu:.2f} s CPU "
              f"({served_store:,} judgments): ratio to the warm cache {store_wall / warm:.2f} "
              f"(bound 1.2: ratio {store_wall / warm / 1.2:.2f})")  # fmt: skip


if __name__ == "__main__":
    main()
