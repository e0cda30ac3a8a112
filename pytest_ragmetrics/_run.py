"""What a pytest run covered, and which of its reports count.

Two questions the plugin asks at the end of a run, answered here so that ``plugin.py`` stays a thin
layer of hooks:

* Did the run cover the whole suite? Only such a run knows every judgment the suite needs, so only
  it may teach ``python -m pytest_ragmetrics cache prune`` which store entries are unused. Named paths
  or node ids, ``-k``, ``-m``, ``--deselect``, ``--lf``, ``--sw``, ``--co``, a stop after ``-x`` /
  ``--maxfail``, collection errors, failed tests (a failing test never reaches its later
  comparisons) and a crashed xdist worker (its judgments never reach the controller) all make a
  run partial.
* Which comparisons count? An attempt that pytest-rerunfailures discarded (its report's outcome is
  ``"rerun"``) does not: only the final attempt of a test counts in aggregates, gates and reports.
"""

from __future__ import annotations

from typing import Any

import pytest

#: Options that select part of the suite: (option dest, value meaning "not given").
_SELECTING_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("keyword", ""),  # -k
    ("markexpr", ""),  # -m
    ("deselect", None),  # --deselect
    ("lf", False),  # --lf
    ("stepwise", False),  # --sw
    ("collectonly", False),  # --co
)


def selected_part(config: pytest.Config, *, deselected: bool = False) -> bool:
    """True when the run was asked for part of the suite rather than all of it.

    ``deselected`` says that some process of the run (this one, or an xdist worker) saw tests
    deselected; the options are checked here as well, because the xdist controller collects nothing.
    """
    if deselected:
        return True
    args_source = getattr(config, "args_source", None)
    if args_source is not None and args_source == pytest.Config.ArgsSource.ARGS:
        return True  # paths or node ids named on the command line
    for dest, unset in _SELECTING_OPTIONS:
        value = config.getoption(dest, unset)
        if value not in (unset, None, "", [], ()):
            return True
    return False


def covered_whole_suite(
    session: pytest.Session, *, deselected: bool = False, worker_crashed: bool = False
) -> bool:
    """True when ``session`` ran every test of the suite to its end, and every test passed."""
    if worker_crashed or session.shouldstop or session.shouldfail:
        return False
    if session.exitstatus != pytest.ExitCode.OK:
        return False  # failures, collection errors, interruptions, no tests at all
    return not selected_part(session.config, deselected=deselected)


def counts(report: pytest.TestReport) -> bool:
    """False for an attempt that a rerun plugin discarded (pytest-rerunfailures: outcome "rerun")."""
    return report.outcome != "rerun"  # type: ignore[comparison-overlap]  # plugins add outcomes
