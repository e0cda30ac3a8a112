"""What the installed plugin costs a pytest run that never uses it.

Prints the import time of the plugin module (pytest already imported) and the median CPU time of a
trivial 200-test suite with the plugin enabled and with ``-p no:ragmetrics``. Target: at most 20 ms.

CPU time on a busy machine wanders by more than the target from run to run; ``--instructions`` also
counts the instructions both runs execute under valgrind (callgrind), which barely vary, and converts
the difference to milliseconds at the plain run's median CPU time.

    python benchmarks/bench_plugin_overhead.py [--runs 21] [--instructions]
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

# As on a user's machine: bytecode (and pytest's assertion-rewritten bytecode of plugin modules)
# is cached after the first run, even where this shell sets PYTHONDONTWRITEBYTECODE.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

IMPORT = (
    "import time, pytest; t = time.perf_counter(); import pytest_ragmetrics.plugin; "
    "print(time.perf_counter() - t)"
)


def paired_runs(commands: list[list[str]], cwd: Path, runs: int) -> list[list[float]]:
    """CPU seconds of each command, interleaved run by run so that machine drift hits both alike."""
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for i, cmd in enumerate(commands):
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=ENV)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            # CPU time (user + system) of the run: steadier than wall time on a shared machine.
            times[i].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return times


def instructions(cmd: list[str], cwd: Path) -> int:
    """Instructions the command executes, counted by callgrind (hash seed fixed: dict order is work)."""
    env = {**ENV, "PYTHONHASHSEED": "0"}
    grind = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    out = subprocess.run([*grind, *cmd], cwd=cwd, check=True, capture_output=True, text=True, env=env)
    match = re.search(r"refs:\s+([\d,]+)", out.stderr)
    if match is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{out.stderr[-2000:]}")
    return int(match.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions under valgrind (slow, steady)"
    )
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH")

    # Users' interpreters import from cached bytecode; measure that, even where
    # PYTHONDONTWRITEBYTECODE is set (it stops writing .pyc files, not reading them).
    import pytest_ragmetrics

    compileall.compile_dir(Path(pytest_ragmetrics.__file__).parent, quiet=1)
    imports = [
        float(
            subprocess.run(
                [sys.executable, "-c", IMPORT], capture_output=True, text=True, check=True, env=ENV
            ).stdout
        )
        for _ in range(args.runs)
    ]
    print(
        f"import pytest_ragmetrics.plugin: median {statistics.median(imports) * 1000:.2f} ms "
        f"over {args.runs} fresh interpreters"
    )

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        body = "\n".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(200))
        (root / "test_plain.py").write_text(body)
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        commands = [base, [*base, "-p", "no:ragmetrics"]]
        paired_runs(commands, root, 2)  # warm the file system cache and the .pyc files
        with_plugin, without = paired_runs(commands, root, args.runs)
        counts = [instructions(cmd, root) for cmd in commands] if args.instructions else None
    diffs = [a - b for a, b in zip(with_plugin, without, strict=True)]
    print(f"200 plain tests, plugin enabled  : median CPU {statistics.median(with_plugin) * 1000:.1f} ms")
    print(f"200 plain tests, -p no:ragmetrics: median CPU {statistics.median(without) * 1000:.1f} ms")
    print(
        f"overhead of the unused plugin    : median of paired differences "
        f"{statistics.median(diffs) * 1000:+.1f} ms over {args.runs} pairs (target <= 20 ms)"
    )
    if counts is not None:
        share = (counts[0] - counts[1]) / counts[1]
        extra = share * statistics.median(without) * 1000
        print(
            f"instructions (callgrind)         : {counts[0]:,} enabled, {counts[1]:,} disabled: "
            f"{share * 100:+.2f}%, about {extra:+.1f} ms at the plain run's median CPU "
            f"(target <= 20 ms, ratio {extra / 20:.2f})"
        )


if __name__ == "__main__":
    main()
