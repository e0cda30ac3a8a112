"""Progress while a cold run waits on the judge: judged / total, rate and time left.

Shown only once a test has waited on the judge for a while, so a warm run (answers from the cache in
milliseconds) and a quick cold test print nothing. On a terminal the figures sit at the end of the
current line (after the dots, or after the test id under ``-v``) and are updated in place, then erased
before pytest writes anything else. Elsewhere (CI logs) nothing can be erased, and a line written
while tests run would break pytest's line of dots: one line at the end of the run says what was
judged and how fast, and ``-q`` leaves it out.

"Total" is every judge call this run has asked for so far (including any asked for ahead of the test
that needs it), "judged" the calls answered or failed; cache and store hits are not calls.

Under pytest-xdist the workers have no terminal: each writes its figures to a small JSON file in a
directory the controller hands out, and a thread on the controller adds them up and shows them. The
workers do not judge ahead, so their totals grow as their tests start: the time left is reckoned
from the tests instead, whose number the controller knows from the start.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "ControllerProgress",
    "LocalProgress",
    "ProgressLine",
    "WorkerProgress",
    "format_done",
    "format_progress",
    "format_xdist_progress",
]

#: xdist ``workerinput`` key naming the directory workers write their figures to.
WORKER_INPUT_KEY = "ragmetrics_progress_dir"


def format_progress(judged: int, total: int, rate: float | None) -> str:
    """``ragmetrics: judged 12/40 judge calls, 3.2/s, about 9s left``."""
    text = f"ragmetrics: judged {judged}/{total} judge call{'s' if total != 1 else ''}"
    if rate:
        text += f", {rate:.1f}/s"
        left = max(total - judged, 0)
        if left:
            text += f", about {_duration(left / rate)} left"
    return text


def format_xdist_progress(
    judged: int, rate: float | None, tests_done: int, tests: int, left: float | None
) -> str:
    """``ragmetrics: judged 40 judge calls, 3.2/s; 50/126 tests, about 12s left``."""
    text = f"ragmetrics: judged {judged} judge call{'s' if judged != 1 else ''}"
    if rate:
        text += f", {rate:.1f}/s"
    text += f"; {tests_done}/{tests} tests"
    if left:
        text += f", about {_duration(left)} left"
    return text


def format_done(judged: int, seconds: float) -> str:
    """``ragmetrics: judged 126 judge calls in 17s, 7.4/s``: the line a log gets at the end."""
    text = f"ragmetrics: judged {judged} judge call{'s' if judged != 1 else ''} in {_duration(seconds)}"
    return text + (f", {judged / seconds:.1f}/s" if judged and seconds > 0 else "")


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


class ProgressLine:
    """Draws progress on pytest's terminal reporter: in place on a terminal, plain lines elsewhere.

    Thread-safe: the xdist controller draws from a thread, and clears (holding :attr:`lock`) before
    pytest writes.
    """

    #: Seconds of waiting before anything is shown, and between updates, on a terminal.
    tty_after, tty_every = 1.0, 0.5
    #: Seconds of waiting, in a log (not a terminal), that earn the run its line at the end.
    plain_after = 3.0

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.lock = threading.RLock()
        self._drawn = False  # text of ours is on the terminal's current line
        self._last = 0.0
        #: Off a terminal, a wait long enough to be shown happened: the run ends with one line.
        self.waited_in_log = False

    def _reporter(self) -> Any:
        # -qq: nothing but the summary (read as an option: Config.get_verbosity is pytest 8+)
        if int(self.config.getoption("verbose")) < -1:
            return None
        return self.config.pluginmanager.get_plugin("terminalreporter")

    @staticmethod
    def _on_terminal(reporter: Any) -> bool:
        """Whether pytest writes to a terminal (in-place updates), as the reporter found when the run
        started: while a test runs, pytest's output capture has the file descriptor pointing elsewhere."""
        isatty = getattr(reporter, "isatty", False)  # a bool before pytest 9, a callable bool since
        return bool(isatty() if callable(isatty) else isatty)

    @contextlib.contextmanager
    def _uncaptured(self) -> Generator[None, None, None]:
        capture = self.config.pluginmanager.get_plugin("capturemanager")
        if capture is None:
            yield
        else:
            with capture.global_and_fixture_disabled():
                yield

    def show(self, waited: float, text: Callable[[], str]) -> None:
        """Show ``text()`` if the judge has been waited on for ``waited`` seconds and it is time to."""
        with self.lock:
            reporter = self._reporter()
            if reporter is None:
                return
            if not self._on_terminal(reporter):
                # Off a terminal nothing is written while tests run: the run ends with a line.
                self.waited_in_log = self.waited_in_log or waited >= self.plain_after
                return
            now = time.monotonic()
            if waited < self.tty_after or now - self._last < self.tty_every:
                return
            self._last = now
            with self._uncaptured():
                # Capture suspended, sys.stdout is the stream pytest's terminal writer writes to; the
                # writer (public through the config) knows how much of the line pytest has used.
                file = sys.stdout
                tw = self.config.get_terminal_writer()
                room = tw.fullwidth - tw.width_of_current_line - 2
                if room < 12:
                    return
                line = text()
                if len(line) > room:
                    line = line[: room - 1] + "…" if _encodes(file, "…") else line[:room]
                # Save the cursor, write after it; the next update or clear() goes back there.
                prefix = "\x1b8\x1b[K" if self._drawn else "\x1b7"
                file.write(prefix + " " + line)
                file.flush()
                self._drawn = True

    def clear(self) -> None:
        """Erase what :meth:`show` drew on the terminal's line (before pytest writes to it)."""
        with self.lock:
            if not self._drawn:
                return
            self._drawn = False
            self._last = 0.0
            reporter = self._reporter()
            if reporter is not None and self._on_terminal(reporter):
                with self._uncaptured():
                    sys.stdout.write("\x1b8\x1b[K")
                    sys.stdout.flush()

    def rest(self) -> None:
        """The wait is over: erase the figures and show the next ones only after a new wait."""
        self.clear()
        self._last = 0.0

    def summary(self, reporter: Any, text: Callable[[], str]) -> None:
        """At the end of a run logged off a terminal that waited on the judge: ``text()`` on a line
        of its own, unless ``-q`` asked for less."""
        if self.waited_in_log and int(self.config.getoption("verbose")) >= 0:
            reporter.write_line(text())


def _encodes(file: Any, text: str) -> bool:
    try:
        text.encode(getattr(file, "encoding", None) or "ascii")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


class _Rate:
    """Judge calls per second since the first call of the run."""

    def __init__(self) -> None:
        self.since: float | None = None

    def __call__(self, judged: int, total: int) -> float | None:
        now = time.monotonic()
        if total and self.since is None:
            self.since = now
        elapsed = self.elapsed()
        return judged / elapsed if judged and elapsed > 0 else None

    def elapsed(self) -> float:
        return time.monotonic() - self.since if self.since is not None else 0.0


class LocalProgress:
    """Progress in a run without xdist: the judge's waits call it on pytest's main thread."""

    def __init__(self, config: pytest.Config, live: Callable[[], tuple[int, int]]) -> None:
        self.line = ProgressLine(config)
        self.live = live
        self.rate = _Rate()
        config.pluginmanager.register(self)  # for its line at the end of the run

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.line.summary(terminalreporter, lambda: format_done(self.live()[0], self.rate.elapsed()))

    def _text(self) -> str:
        judged, total = self.live()
        return format_progress(judged, total, self.rate(judged, total))

    def waiting(self, waited: float) -> None:
        self.rate(*self.live())  # start the clock at the first wait
        self.line.show(waited, self._text)

    def done(self) -> None:
        self.line.rest()


class WorkerProgress:
    """An xdist worker's figures, written to ``<directory>/<worker id>.json`` while it waits."""

    every = 0.5

    def __init__(self, directory: str, worker_id: str, live: Callable[[], tuple[int, int]]) -> None:
        self.path = Path(directory) / f"{worker_id}.json"
        self.live = live
        self._last = 0.0

    def _write(self, waited: float) -> None:
        judged, total = self.live()
        data = {"judged": judged, "total": total, "waited": round(waited, 3), "at": time.time()}
        tmp = self.path.with_name(self.path.name + ".tmp")
        # Atomic replace: the controller never reads half a file. Progress is never worth a failure.
        with contextlib.suppress(OSError):
            tmp.write_text(json.dumps(data), encoding="utf-8")
            os.replace(tmp, self.path)

    def waiting(self, waited: float) -> None:
        now = time.monotonic()
        if now - self._last >= self.every:
            self._last = now
            self._write(waited)

    def done(self) -> None:
        self._last = 0.0
        self._write(0.0)


class ControllerProgress:
    """The xdist controller's side: hands workers a directory, shows the sum of their figures.

    Registered as a plugin on the controller: its hook wrappers erase the figures, holding the
    drawing lock, whenever pytest is about to write (a test's result, a warning, a worker going down).
    """

    poll = 0.25
    #: A worker's file older than this is stale (the worker is busy elsewhere or gone).
    stale = 3.0

    def __init__(self, config: pytest.Config) -> None:
        self.line = ProgressLine(config)
        self.directory = tempfile.mkdtemp(prefix="ragmetrics-progress-")
        self.rate = _Rate()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: The tests of the run, once a worker has collected them, and how many have finished.
        self.tests: int | None = None
        self.tests_done = 0
        self._tests_since: float | None = None
        #: The judge calls the workers judged, as last read (kept for the line at the end).
        self.judged = 0

    def figures(self) -> tuple[int, int, float]:
        """Judged and total over all workers, and the longest current wait of any worker."""
        judged = total = 0
        waited = 0.0
        now = time.time()
        for path in Path(self.directory).glob("*.json"):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                judged += int(data["judged"])
                total += int(data["total"])
                if now - float(data["at"]) < self.stale:
                    waited = max(waited, float(data["waited"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue
        return judged, total, waited

    def _text(self, judged: int, total: int, rate: float | None) -> str:
        tests = self.tests
        if not tests:
            return format_progress(judged, total, rate)
        done = min(self.tests_done, tests)
        elapsed = time.monotonic() - self._tests_since if self._tests_since is not None else 0.0
        left = (tests - done) * elapsed / done if done and elapsed > 0 else None
        return format_xdist_progress(judged, rate, done, tests, left)

    def _run(self) -> None:
        while not self._stop.wait(self.poll):
            judged, total, waited = self.figures()
            self.judged = max(self.judged, judged)
            rate = self.rate(judged, total)
            if waited > 0:
                self.line.show(waited, functools.partial(self._text, judged, total, rate))
            else:
                self.line.rest()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="ragmetrics-progress", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if os.path.isdir(self.directory):
            self.judged = max(self.judged, self.figures()[0])
        self.line.clear()
        shutil.rmtree(self.directory, ignore_errors=True)

    # -- hooks: erase before pytest writes; the lock keeps the thread from drawing meanwhile -------
    @contextlib.contextmanager
    def _quiet(self) -> Generator[None, None, None]:
        with self.line.lock:
            self.line.clear()
            yield

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> Generator[None, Any, Any]:
        if report.when == "teardown":
            self.tests_done += 1
        with self._quiet():
            return (yield)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: Any) -> None:
        if self.tests is None:
            self.tests = len(ids)  # every worker collects the same tests
            self._tests_since = time.monotonic()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.line.summary(terminalreporter, lambda: format_done(self.judged, self.rate.elapsed()))

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> Generator[None, Any, Any]:
        with self._quiet():
            return (yield)

    @pytest.hookimpl(tryfirst=True)
    def pytest_warning_recorded(self) -> None:
        self.line.clear()  # a historic hook cannot wrap; the figures come back on the next poll at most

    @pytest.hookimpl(wrapper=True, tryfirst=True, optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> Generator[None, Any, Any]:
        with self._quiet():
            return (yield)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        node.workerinput[WORKER_INPUT_KEY] = self.directory
        self.start()

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self) -> None:
        self.stop()

    def pytest_unconfigure(self) -> None:
        self.stop()  # also when the session never finished (a usage error, Ctrl-C)
