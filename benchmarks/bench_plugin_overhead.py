"""What the installed plugin costs a pytest run that never uses it.

Prints the import time of the plugin module (pytest already imported) and the median CPU time of a
trivial 200-test suite with the plugin enabled and with ``-p no:ragmetrics``. Target: at most 20 ms.

    python benchmarks/bench_plugin_overhead.py [--runs 21]
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    args = parser.parse_args()

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
    diffs = [a - b for a, b in zip(with_plugin, without, strict=True)]
    print(f"200 plain tests, plugin enabled  : median CPU {statistics.median(with_plugin) * 1000:.1f} ms")
    print(f"200 plain tests, -p no:ragmetrics: median CPU {statistics.median(without) * 1000:.1f} ms")
    print(
        f"overhead of the unused plugin    : median of paired differences "
        f"{statistics.median(diffs) * 1000:+.1f} ms over {args.runs} pairs (target <= 20 ms)"
    )


if __name__ == "__main__":
    main()
