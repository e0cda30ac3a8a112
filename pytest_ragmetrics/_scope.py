"""The pytest test currently running, as seen by the assertion helpers.

Its own tiny module (stdlib only) because the plugin sets it around every test, including in suites
that never use ragmetrics: importing the assertion machinery there would cost every such run.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Protocol

    class Check(Protocol):
        """What the running test keeps of a score it took (an assertion helper's check): whether it
        was compared with a threshold, and where it was taken, to warn of one that never was. For
        type checkers only: every run loads this module."""

        compared: bool
        where: tuple[str, int] | None

        @property
        def name(self) -> str: ...


class TestScope:
    """One running test: its evaluator (built on first use, with the test's marker and
    ``ragmetrics_config`` settings), where comparisons are recorded, and the checks made.

    ``make_evaluator(test)`` and ``record(test, row, number)`` are given the test (and the row's
    number among the test's comparisons, from 1): the plugin passes the same functions for every
    test (the recorder bound to the run's session once there is one), so a test that never scores
    costs a small object or two.
    """

    __test__ = False  # not a test class, whatever pytest's collection rules say
    __slots__ = ("_evaluator", "_make_evaluator", "_nodeid", "_record", "checks", "recorded", "test")

    def __init__(
        self,
        test: Any,
        make_evaluator: Callable[[Any], Any],
        record: Callable[[Any, dict[str, Any], int], None],
    ) -> None:
        self.test = test
        self._make_evaluator = make_evaluator
        self._record = record
        self.checks: list[Check] = []
        #: Comparisons recorded so far, in all the test's phases.
        self.recorded = 0
        self._evaluator: Any = None
        self._nodeid: str | None = None

    @property
    def nodeid(self) -> str:
        """The test's node id (asked at each of its scores and comparisons: pytest builds it each time)."""
        if self._nodeid is None:
            self._nodeid = str(self.test.nodeid)
        return self._nodeid

    @property
    def evaluator(self) -> Any:
        if self._evaluator is None:
            self._evaluator = self._make_evaluator(self.test)
        return self._evaluator

    def record(self, row: dict[str, Any]) -> None:
        """Keep a comparison made in this test (for its report and JUnit properties)."""
        self.recorded += 1
        self._record(self.test, row, self.recorded)

    def unused_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.compared]


#: The pytest run this code runs in, as a function returning the run's evaluator for judging done
#: outside a test (a session fixture, a conftest hook), so that it follows the run's settings. Set by
#: the plugin from configure to cleanup. A context variable rather than a module global: a pytester run
#: inside a run sees its own and puts the outer one back, and a script never sees one.
current_run: contextvars.ContextVar[Callable[[], Any] | None] = contextvars.ContextVar(
    "ragmetrics_run", default=None
)


#: True while a ``python -m pytest_ragmetrics`` command runs: it reads the pytest configuration of
#: its directory and the environment, so its messages name those rather than ``Settings``.
command_line: contextvars.ContextVar[bool] = contextvars.ContextVar("ragmetrics_command_line", default=False)


def in_pytest() -> bool:
    """This code runs inside a pytest run with the plugin: messages name pytest options, not ``Settings``."""
    return current_run.get() is not None


current_test: contextvars.ContextVar[TestScope | None] = contextvars.ContextVar(
    "ragmetrics_test", default=None
)
