"""What a pytest run covered, and which of its reports count.

Three questions the plugin asks at the end of a run, answered here so that ``plugin.py`` stays a thin
layer of hooks:

* Did the run cover the whole suite? Only such a run knows every judgment the suite needs, so only
  it may teach ``python -m pytest_ragmetrics cache prune`` which store entries are unused. Named paths
  or node ids, ``-k``, ``-m``, ``--deselect``, ``--ignore``, ``--ignore-glob``, ``--lf``, ``--sw``,
  ``--co``, ``--setup-only``, ``--setup-plan`` (the tests are set up, never run), ``--fixtures``
  (collected, never run), a stop after ``-x`` / ``--maxfail``, collection errors, failed tests (a
  failing test never reaches its later comparisons) and a crashed xdist worker (its judgments never
  reach the controller) all make a run partial. Skipped tests never reach their comparisons
  either: the entries they may need are kept (:func:`kept_for_skipped`), the rest of what the run
  did not use can go. An ``--ignore`` or ``--ignore-glob`` of the ini file's ``addopts`` is part
  of the suite's definition, not a selection: only one given for the run makes it partial.
* Which tests did the run collect and run, from which files? :class:`~pytest_ragmetrics._suite.SuiteRecord`
  keeps them; the digests here let ``report merge`` tell when the reports of a run's shards do not
  add up to the whole suite, and when shards were cut from different versions of it.
* Which comparisons count? An attempt that pytest-rerunfailures discarded (its report's outcome is
  ``"rerun"``) does not: only the final attempt of a test counts in aggregates, gates and reports.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
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
    ("setuponly", False),  # --setup-only, and --setup-plan, which sets it: no test body runs
)


#: Options under which a run runs no test body: (option dest, the option as it is written).
_NO_TEST_OPTIONS: tuple[tuple[str, str], ...] = (
    ("collectonly", "--collect-only"),
    ("setupplan", "--setup-plan"),  # sets setuponly too: named first
    ("setuponly", "--setup-only"),
    ("showfixtures", "--fixtures"),
    ("show_fixtures_per_test", "--fixtures-per-test"),
    ("markers", "--markers"),
    ("help", "--help"),
)


def runs_no_test(
    config: pytest.Config, ran: Iterable[str] | None = None, skipped: Iterable[str] = ()
) -> str | None:
    """Why this run runs no test, as its closing lines say it, or None when it runs one.

    Known when the run is configured, before it collects: the option by which it lists or sets up
    its tests but runs none (``--co``, ``--setup-only``, ``--setup-plan``, ``--fixtures``,
    ``--fixtures-per-test``, ``--markers``, ``--help``), as it is written. Known once it has run,
    from the tests it ``ran`` and those ``skipped`` (node ids, as the run's suite record keeps
    them): no test selected (``-k``, ``-m`` deselected them all, or none was collected), or every
    test it started skipped.
    """
    for dest, written in _NO_TEST_OPTIONS:
        if config.getoption(dest, False):
            return written
    if ran is None:
        return None
    started = set(ran)
    if not started:
        return "none selected"
    if started <= set(skipped):
        return "every test skipped"
    return None


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
    return _ignored_on_command_line(config)


def _ignored_on_command_line(config: pytest.Config) -> bool:
    """Whether ``--ignore`` or ``--ignore-glob`` left paths out that the project's configuration
    does not: given on the command line (or in ``PYTEST_ADDOPTS``), as opposed to the ``addopts`` of
    the ini file. The configuration's ignores define the suite (a directory of drafts, a vendored
    package), so a run with only those is whole; one given for this run leaves part of it out."""
    given = {dest: list(config.getoption(dest, None) or ()) for dest in ("ignore", "ignore_glob")}
    if not any(given.values()):
        return False
    # The ini's addopts, read for these two options alone, as pytest's parser reads them.
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--ignore", action="append", default=[])
    parser.add_argument("--ignore-glob", action="append", default=[], dest="ignore_glob")
    configured, _ = parser.parse_known_args([str(arg) for arg in config.getini("addopts")])
    return any(Counter(values) - Counter(getattr(configured, dest)) for dest, values in given.items())


def incomplete_reason(
    session: pytest.Session,
    *,
    deselected: bool = False,
    worker_crashed: bool = False,
    not_run: bool = False,
) -> str | None:
    """Why ``session`` did not run every test of the suite to its end with every test passing, or
    ``None`` when it did (skipped tests aside: see :func:`kept_for_skipped`). ``not_run``: a test
    it collected never started (``--fixtures`` collects and lists, and ends as a passing run)."""
    if worker_crashed:
        return "an xdist worker crashed"
    if session.shouldstop or session.shouldfail or session.exitstatus == pytest.ExitCode.INTERRUPTED:
        return "the run stopped before its end"
    if session.exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        return "the run collected no tests"
    if session.exitstatus != pytest.ExitCode.OK:
        return "tests failed or errored"  # a failing test never reaches its later comparisons
    config = session.config
    if config.getoption("collectonly", False) or config.getoption("setuponly", False):
        return "its tests were not run (--collect-only, --setup-only, --setup-plan)"
    if selected_part(config, deselected=deselected):
        return "tests were deselected or named (paths, node ids, -k, -m, --deselect, --ignore, --lf, --sw)"
    if not_run:
        return "tests it collected were not run (--fixtures, --fixtures-per-test)"
    return None


def sample_questions(item: pytest.Item | None) -> tuple[str, ...] | None:
    """The questions (normalized) of the samples test ``item`` is parametrized with (a golden set's
    ``rag_sample``, any :class:`~pytest_ragmetrics.RagSample` parameter), or ``None`` when it has
    none: then the run does not know what the test scores."""
    from .sample import RagSample
    from .text import normalize_text

    params = getattr(getattr(item, "callspec", None), "params", None) or {}
    questions = tuple(normalize_text(v.question) for v in params.values() if isinstance(v, RagSample))
    return questions or None


def kept_for_skipped(
    candidates: Iterable[str],
    skipped: Mapping[str, Sequence[str] | None],
    inputs_of: Callable[[str], Any],
) -> tuple[set[str], str | None]:
    """Of the store entries ``candidates`` (the run did not use them), those its ``skipped`` tests may
    need, and why they are kept (``None`` when none are).

    ``skipped`` maps each skipped test (or module) to the questions of the samples it scores
    (:func:`sample_questions`), ``None`` where the run does not know them: then nothing can be ruled
    out and every candidate is kept. Otherwise an entry is kept when its inputs (``inputs_of(key)``)
    ask about one of those questions, or about none (an answer's claims and their verdicts name no
    question, so they cannot be told apart from a skipped test's), or cannot be read.
    """
    candidates = list(candidates)
    if not skipped or not candidates:
        return set(), None
    tests = f"{len(skipped)} skipped test{'' if len(skipped) == 1 else 's'}"
    unknown = sorted(nodeid for nodeid, questions in skipped.items() if questions is None)
    if unknown:
        return set(candidates), f"{tests} with samples the run does not know ({_few(unknown)})"
    from .text import normalize_text

    questions = {question for found in skipped.values() for question in found or ()}
    kept = set()
    for key in candidates:
        inputs = inputs_of(key)
        question = inputs.get("question") if isinstance(inputs, Mapping) else None
        if not isinstance(question, str) or normalize_text(question) in questions:
            kept.add(key)
    return kept, (f"{tests} may need them ({_few(sorted(skipped))})" if kept else None)


def _few(names: Sequence[str], most: int = 3) -> str:
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def record_for_prune(
    session: pytest.Session,
    cache_dir: str | Path,
    *,
    used: set[str],
    store: set[str] | None,
    deselected: bool,
    worker_crashed: bool,
    not_run: bool,
    skipped: Mapping[str, Sequence[str] | None],
    inputs_of: Callable[[str], Any],
) -> list[str] | None:
    """Record for ``cache prune`` what this run says about the judgment store, replacing the last
    run's record: the entries it did not use when it covered the whole suite, but those its skipped
    tests may need, else why it cannot tell. A partial run replaces a full run's record too: the
    judgments it stored are not in that record, which therefore no longer describes what the suite
    needs.

    ``used`` are the judgments the run used, ``store`` the keys its judgment store holds (``None``:
    no store); ``deselected``, ``worker_crashed`` and ``not_run`` as for :func:`incomplete_reason`;
    ``skipped`` and ``inputs_of`` as for :func:`kept_for_skipped`. Returns the unused entries, as recorded, or
    ``None`` when nothing usable was recorded (the run used no judge, or could not tell).
    """
    from .judge.last_run import LAST_RUN_FILE, write_last_run

    if not used and store is None:
        return None  # the run judged nothing, so stored nothing: the last record still holds
    reason = incomplete_reason(session, deselected=deselected, worker_crashed=worker_crashed, not_run=not_run)
    if reason is None and store is None:
        reason = "the run used no judgment store"
    unused: list[str] | None = None
    kept: set[str] = set()
    kept_for = None
    if reason is None:
        candidates = sorted((store or set()) - used)
        kept, kept_for = kept_for_skipped(candidates, skipped, inputs_of)
        unused = [key for key in candidates if key not in kept]
    try:
        write_last_run(cache_dir, unused=unused, reason=reason, kept=len(kept), kept_for=kept_for)
    except OSError:
        # Only `cache prune` reads the record: never fail a run over it; but an older record must
        # not outlive this run.
        with contextlib.suppress(OSError):
            (Path(cache_dir) / LAST_RUN_FILE).unlink(missing_ok=True)
        return None
    return unused


def counts(report: pytest.TestReport) -> bool:
    """False for an attempt that a rerun plugin discarded (pytest-rerunfailures: outcome "rerun")."""
    return report.outcome != "rerun"  # type: ignore[comparison-overlap]  # plugins add outcomes


#: A set digest is the sum of its members' SHA-256 values modulo 2**256: the digest of the union of
#: disjoint sets is the sum of theirs, so shards' digests add up to the suite's.
_DIGEST_MODULUS = 2**256


def set_digest(nodeids: Iterable[str]) -> int:
    """The digest of a set of test ids (each counted once)."""
    total = 0
    for nodeid in set(nodeids):
        total += int.from_bytes(hashlib.sha256(nodeid.encode("utf-8")).digest(), "big")
    return total % _DIGEST_MODULUS


def add_digests(digests: Iterable[str]) -> str:
    """The digest of the union of disjoint sets, from theirs (hex, as reports hold them)."""
    return f"{sum(int(d, 16) for d in digests) % _DIGEST_MODULUS:064x}"


def file_digests(paths: Iterable[Path], shown: Callable[[str], str]) -> dict[str, str]:
    """The SHA-256 of each file's content, by its ``shown`` path (relative to the rootdir), sorted;
    a file gone since it was collected is left out. Line endings count as ``\\n``: a checkout on
    Windows is the same commit."""
    digests: dict[str, str] = {}
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError:
            continue
        digests[shown(str(path))] = hashlib.sha256(data.replace(b"\r\n", b"\n")).hexdigest()
    return dict(sorted(digests.items()))
