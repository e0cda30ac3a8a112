"""What a run collected and ran: the record every pytest run with the plugin keeps from its start,
since a run may first use the plugin in any test (``summary.suite`` of its report).

Its own small module, apart from :mod:`pytest_ragmetrics._run` (which computes the record's digests,
on demand): a run that never uses the plugin loads this and not that.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    import pytest


def is_worker(config: pytest.Config) -> bool:
    """This process is an xdist worker: the controller writes the report."""
    return hasattr(config, "workerinput")


class SuiteRecord:
    """The tests a run collected before deselection, the tests it ran and skipped, and the files it
    collected them from (``summary.suite``).

    Kept by every run with the plugin, from its start, since a run may first use the plugin in any
    test. The ids, files and digests of the tests collected are worked out when asked for (a report,
    an xdist worker's output): a run that writes no report pays for a list of its tests and two sets.
    """

    def __init__(self) -> None:
        #: The tests collected, before deselection.
        self._items: list[pytest.Item] | None = None
        self._collected: tuple[int, str] | None = None
        self.ran: set[str] = set()
        #: Tests (and modules) skipped, by node id: they never reached their comparisons.
        self.skipped: list[str] = []
        #: Tests were deselected (in this process, or in an xdist worker): a partial run.
        self.deselected = False
        #: The files the suite was collected from besides its test files: the samples files its
        #: ``@pytest.mark.ragmetrics(samples=...)`` markers name (added as they are loaded).
        self.sources: set[Path] = set()
        #: Their digests (:func:`~pytest_ragmetrics._run.file_digests`), once computed or received
        #: from an xdist worker.
        self.files: dict[str, str] | None = None

    def collect(self, items: Sequence[pytest.Item]) -> None:
        # A copy: deselection edits the list in place.
        self._items, self._collected = list(items), None

    def count_skipped(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        """Count a skipped test (in setup or call) or module. An xfail test is not counted: replayed,
        it stops where it stopped now, and needs the judgments it used now."""
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped.append(report.nodeid)

    @property
    def collected(self) -> tuple[int, str] | None:
        """(count, hex digest) of the collected tests, once known (from a worker under xdist)."""
        if self._collected is None and self._items is not None:
            from ._run import set_digest

            ids = {item.nodeid for item in self._items}
            self._collected = (len(ids), f"{set_digest(ids):064x}")
        return self._collected

    @collected.setter
    def collected(self, value: tuple[int, str]) -> None:
        self._collected = value

    @property
    def collected_count(self) -> int | None:
        """How many tests were collected, once known, without their digest (which only a report
        that is read needs)."""
        if self._collected is None and self._items is not None:
            return len({item.nodeid for item in self._items})
        return None if self._collected is None else self._collected[0]

    def file_digests(self, shown: Callable[[str], str]) -> dict[str, str]:
        """The digests of the test files collected and of :attr:`sources`, read once."""
        if self.files is None:
            from ._run import file_digests

            tests = {item.path for item in self._items or ()}
            self.files = file_digests(tests | self.sources, shown)
        return self.files

    def to_json(self, shown: Callable[[str], str]) -> dict[str, Any] | None:
        collected = self.collected
        if collected is None:
            return None
        from ._run import set_digest

        record: dict[str, Any] = {
            "collected": collected[0],
            "collected_digest": collected[1],
            "ran": len(self.ran),
            "ran_digest": f"{set_digest(self.ran):064x}",
        }
        files = self.file_digests(shown)
        if files:
            record["files"] = files
        return record


#: The record of the pytest run this code runs in, for the plugin's hooks that pytest gives a report
#: and no configuration. Set by the plugin from configure to cleanup, like ``_scope.current_run``: a
#: pytester run inside a run sees its own and puts the outer one back.
current_suite: contextvars.ContextVar[SuiteRecord | None] = contextvars.ContextVar(
    "ragmetrics_suite", default=None
)
