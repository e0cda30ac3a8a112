"""Scores in pytest-html's report: a column with each test's comparisons and, under the test, every
sample's verdicts and the judge's reasons.

Registered by the plugin only when pytest-html is active and writing a report (``--html``), so a run
without it never imports this module or pytest-html's hook names.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest


class PytestHtmlScores:
    """pytest-html hooks, on the process that writes the HTML report (the xdist controller)."""

    def __init__(self) -> None:
        # Comparisons of each test so far, from any phase (a fixture's go with setup or teardown).
        self._rows: dict[str, list[dict[str, Any]]] = {}

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        rows = getattr(report, "ragmetrics", None)
        if rows:
            self._rows.setdefault(report.nodeid, []).extend(rows)
        if report.when == "teardown" and self._rows.get(report.nodeid):
            # pytest-html collects every phase's extras, and builds the test's row, at teardown.
            from pytest_html import extras

            from .report.html import test_fragment

            fragment = extras.html(test_fragment(self._rows[report.nodeid]))
            report.extras = [*getattr(report, "extras", []), fragment]  # type: ignore[attr-defined]
        try:
            return (yield)
        finally:
            if report.when == "teardown":
                self._rows.pop(report.nodeid, None)

    def pytest_html_results_table_header(self, cells: list[str]) -> None:
        cells.append('<th class="col-ragmetrics">ragmetrics</th>')

    def pytest_html_results_table_row(
        self, report: pytest.TestReport | pytest.CollectReport, cells: list[str]
    ) -> None:
        from .report.html import comparison_cell

        rows = self._rows.get(report.nodeid, []) if isinstance(report, pytest.TestReport) else []
        cells.append(f'<td class="col-ragmetrics">{comparison_cell(rows)}</td>')
