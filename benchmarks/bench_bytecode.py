"""What PYTHONDONTWRITEBYTECODE costs a warm run: the example project replayed from its store.

pytest rewrites the asserts of every installed plugin's modules and caches the result as compiled
files; with ``PYTHONDONTWRITEBYTECODE=1`` (set by many CI images) it cannot, and every pytest process
parses and compiles the plugins again. Each side runs with a compiled-files folder of its own
(``PYTHONPYCACHEPREFIX``), filled beforehand as ``pip install`` leaves one (plain compiled modules,
no rewritten ones), so the two differ only in the variable. Prints the median CPU of each side, run
in turn, and the median of the paired ratios.

    python benchmarks/bench_bytecode.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cpu_of(cmd: list[str], cwd: Path, env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(cmd, cwd=cwd, check=True, capture_output=True, env=env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONDONTWRITEBYTECODE", "PYTEST_ADDOPTS")
        and not k.startswith(("OPENAI_", "RAGMETRICS_"))
    }
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "example_project"
        shutil.copytree(
            ROOT / "example_project", project, ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache")
        )
        paths = sysconfig.get_paths()
        folders = [paths["stdlib"], paths["purelib"], str(ROOT / "pytest_ragmetrics")]
        sides = {}
        for name, dont_write in (("PYTHONDONTWRITEBYTECODE=1", True), ("unset", False)):
            prefix = Path(tmp) / f"pyc-{len(sides)}"
            env = {**base, "PYTHONPYCACHEPREFIX": str(prefix)}
            # As pip leaves an installed package: compiled modules, none rewritten by pytest.
            for folder in folders:
                subprocess.run(
                    [sys.executable, "-m", "compileall", "-q", "-j", "0", folder],
                    env=env,
                    capture_output=True,
                    check=False,
                )
            if dont_write:
                env["PYTHONDONTWRITEBYTECODE"] = "1"
            sides[name] = env
        cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        for env in sides.values():  # warm-up: the unset side caches its rewritten modules here
            cpu_of(cmd, project, env)
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.runs):
            for name, env in sides.items():
                times[name].append(cpu_of(cmd, project, env))
    print(f"the example project's warm replay (pytest -q), {args.runs} runs each in turn; CPU seconds")
    for name, values in times.items():
        spread = f"min {min(values):.3f}, max {max(values):.3f}"
        print(f"  {name:<26} median {statistics.median(values):.3f}  ({spread})")
    ratios = [a / b for a, b in zip(*times.values(), strict=True)]
    print(f"ratio, PYTHONDONTWRITEBYTECODE=1 / unset: median {statistics.median(ratios):.2f} x")


if __name__ == "__main__":
    main()
