"""What the installed plugin costs a pytest run that never uses it.

Prints the import time of the plugin module (pytest already imported), then for a trivial suite of
200 and of 2,000 tests the median CPU time with the plugin enabled and with ``-p no:ragmetrics``, run
in turn, and the median of the paired ratios. Bound: at most 1.02 x the CPU of ``-p no:ragmetrics``.
It also runs the suite with ``--setup-show`` and prints the ragmetrics fixtures set up (bound: none).

CPU time on a busy machine wanders from run to run; ``--instructions`` also counts the instructions
both runs execute under valgrind (callgrind), which barely vary.

By default the runs write bytecode, as on most machines: pytest caches its assertion-rewritten copy
of the plugin's modules after the first run and reads it back. ``--dont-write-bytecode`` sets
``PYTHONDONTWRITEBYTECODE=1`` (many CI images do): then pytest parses and compiles every module of
the plugin it imports in every process. Both sides then read the compiled modules from a folder of
their own (``PYTHONPYCACHEPREFIX``), filled beforehand as ``pip install`` leaves one: plain compiled
modules, none rewritten by pytest.

    python benchmarks/bench_plugin_overhead.py [--runs 21] [--tests 200 2000] [--instructions]
        [--dont-write-bytecode]
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
import sysconfig
import tempfile
from pathlib import Path

# As on a user's machine: bytecode (and pytest's assertion-rewritten bytecode of plugin modules)
# is cached after the first run, even where this shell sets PYTHONDONTWRITEBYTECODE.
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

IMPORT = (
    "import time, pytest; t = time.perf_counter(); import pytest_ragmetrics.plugin; "
    "print(time.perf_counter() - t)"
)
BOUND = 1.02


def dont_write_bytecode(folder: Path) -> None:
    """``PYTHONDONTWRITEBYTECODE=1`` from here on, with the compiled modules of the standard library,
    of site-packages and of this package in ``folder``, as ``pip install`` leaves them."""
    import pytest_ragmetrics

    ENV["PYTHONPYCACHEPREFIX"] = str(folder)
    paths = sysconfig.get_paths()
    package = str(Path(pytest_ragmetrics.__file__).parent)
    for path in (paths["stdlib"], paths["purelib"], package):
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", "-j", "0", path],
            env=ENV,
            capture_output=True,
            check=False,
        )
    ENV["PYTHONDONTWRITEBYTECODE"] = "1"


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


def ragmetrics_fixtures(cmd: list[str], cwd: Path) -> list[str]:
    """The ragmetrics fixtures ``--setup-show`` lists (the plugin's fixture names)."""
    out = subprocess.run([*cmd, "--setup-show"], cwd=cwd, capture_output=True, text=True, env=ENV)
    names = re.findall(r"(?:SETUP|TEARDOWN)\s+[SPMCF]\s+(\S+)", out.stdout)
    return sorted({n for n in names if "rag" in n})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--tests", type=int, nargs="+", default=[200, 2000])
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions under valgrind (slow, steady)"
    )
    parser.add_argument(
        "--dont-write-bytecode",
        action="store_true",
        help="run with PYTHONDONTWRITEBYTECODE=1: pytest rewrites the plugin's modules in every process",
    )
    args = parser.parse_args()
    if args.instructions and shutil.which("valgrind") is None:
        parser.error("--instructions needs valgrind on PATH")

    pycache = tempfile.TemporaryDirectory()
    if args.dont_write_bytecode:
        dont_write_bytecode(Path(pycache.name))
    else:
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
    bytecode = "PYTHONDONTWRITEBYTECODE=1" if args.dont_write_bytecode else "bytecode written and cached"
    print(f"load {os.getloadavg()[0]:.1f}; cpus {os.cpu_count()}; {bytecode}")
    print(
        f"import pytest_ragmetrics.plugin: median {statistics.median(imports) * 1000:.2f} ms "
        f"over {args.runs} fresh interpreters"
    )

    for count in args.tests:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            (root / "pytest.ini").write_text("[pytest]\n")
            body = "\n".join(f"def test_{i}():\n    assert {i} == {i}\n" for i in range(count))
            (root / "test_plain.py").write_text(body)
            base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
            commands = [base, [*base, "-p", "no:ragmetrics"]]
            paired_runs(commands, root, 2)  # warm the file system cache and the .pyc files
            with_plugin, without = paired_runs(commands, root, args.runs)
            fixtures = ragmetrics_fixtures(base, root)
            counts = [instructions(cmd, root) for cmd in commands] if args.instructions else None
        ratios = [a / b for a, b in zip(with_plugin, without, strict=True)]
        ratio = statistics.median(ratios)
        for label, cpus in (("plugin enabled  ", with_plugin), ("-p no:ragmetrics", without)):
            print(f"{count:,} plain tests, {label}: median CPU {statistics.median(cpus) * 1000:.1f} ms")
        print(
            f"  ratio (median of {args.runs} paired runs): {ratio:.3f} x (bound <= {BOUND} x: "
            f"{'met' if ratio <= BOUND else 'NOT met'}); ragmetrics fixtures in --setup-show: "
            f"{', '.join(fixtures) or 'none'}"
        )
        if counts is not None:
            share = counts[0] / counts[1]
            print(f"  instructions (callgrind): {counts[0]:,} enabled, {counts[1]:,} disabled: {share:.3f} x")
    pycache.cleanup()


if __name__ == "__main__":
    main()
