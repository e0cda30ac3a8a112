"""Command line: ``python -m pytest_ragmetrics cache stats|clear|prune`` (also ``pytest-ragmetrics``),
``store show|rejudge|batch`` (``store batch``: see :mod:`pytest_ragmetrics.batch_cli`), ``labels sample``
(see :mod:`pytest_ragmetrics.calibration.drawing`),
``baseline compare`` and ``report merge`` (see :mod:`pytest_ragmetrics.report.cli`), and ``judge
check|drift`` (see :mod:`pytest_ragmetrics.calibration.cli`).

``stats`` shows what the local judgment cache and the committed judgment store hold; ``clear`` empties
the local cache (never the store); ``prune`` deletes store entries the last full test run did not use,
so the committed store does not keep judgments of samples that no longer exist. A full run is one
that covered the whole suite and passed (no named paths or node ids, no ``-k``/``-m``/``--lf``, no
failure or ``-x`` stop); the entries its skipped tests may need are kept, and ``prune`` says so.
After any other run that used the judge, ``prune`` deletes nothing and says why; an entry stored
after the last full run is never deleted.
``prune`` lists what it will delete and asks before deleting; ``--yes``
skips the question, and without a terminal to ask in it deletes nothing unless ``--yes`` is given.

Exit codes, like pytest's: 0 success, 1 the operation could not be done or a gate failed (the message
says why), 2 stopped by Ctrl-C (one line), 4 usage errors (a message, no traceback).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .errors import EXIT_USAGE, ConfigError, RagMetricsWarning

# Commands over saved reports (``baseline compare``, ``report merge``); they exit like pytest.
from .report.cli import COMMANDS as REPORT_COMMANDS

EXIT_OK = 0
EXIT_FAILED = 1
#: A command stopped by Ctrl-C exits as an interrupted pytest run does.
EXIT_INTERRUPTED = 2


def configured_dirs(
    cwd: Path | None = None, environ: Mapping[str, str] | None = None, ini: Mapping[str, str] | None = None
) -> dict[str, Path]:
    """``cache_dir`` and ``store_dir`` as the plugin would see them when pytest runs in ``cwd``.

    Read from the pytest configuration file in ``cwd`` (pytest.ini, .pytest.ini, pyproject.toml,
    tox.ini, setup.cfg: the first that configures pytest, as pytest picks it), or from ``ini``, its
    values when they were read already, and then from ``RAGMETRICS_CACHE_DIR`` /
    ``RAGMETRICS_STORE_DIR``, as a pytest run reads them (one set but empty is a
    :class:`~pytest_ragmetrics.errors.ConfigError`). Relative paths in the file are relative to it.
    """
    from .settings import env_values

    base = cwd or Path.cwd()
    env = os.environ if environ is None else environ
    found: dict[str, Path] = {}
    ini = _pytest_ini_values(base) if ini is None else ini
    given = env_values(
        {k: v for k, v in env.items() if k in ("RAGMETRICS_CACHE_DIR", "RAGMETRICS_STORE_DIR")}
    )
    for name in ("cache_dir", "store_dir"):
        value = given.get(name) or ini.get(f"rag_{name}")
        if value:
            found[name] = Path(value) if Path(value).is_absolute() else base / value
    return found


def _pytest_ini_values(base: Path) -> dict[str, str]:
    """The pytest configuration's values in ``base``, as text. A text setting that pyproject.toml
    gives as a TOML boolean or number (``rag_cache_dir = true``) is a
    :class:`~pytest_ragmetrics.errors.ConfigError`, as in a pytest run, not the path ``True``."""
    from .options import OPTIONS_BY_NAME
    from .settings import check_toml_text, ini_file_values

    for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
        values = ini_file_values(base / name)
        if values is not None:
            ours = {k[4:]: v for k, v in values.items() if k.startswith("rag_") and k[4:] in OPTIONS_BY_NAME}
            check_toml_text(base / name, ours)
            return values
    return {}


def _human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


class _Parser(argparse.ArgumentParser):
    """A parser that takes a long option only whole, as pytest's does. argparse takes a prefix for
    the option it starts (``store rejudge --cache refresh`` was ``--cache-dir refresh``: a cache
    directory named ``refresh``); the commands' parsers are made of this class too."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)


def _directory(text: str) -> Path:
    """A directory option's value: an empty one (``--store-dir "$STORE"`` with the variable unset) is
    refused, as ``--rag-store-dir=`` is in a run; as a path it is the current directory."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            "is empty: give a directory, or leave the option out (the pytest configuration's applies)"
        )
    return Path(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="pytest-ragmetrics",
        description="Manage the pytest-ragmetrics judgment cache and judgment store; compare and merge "
        "JSON run reports; check and compare judges.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    cache = commands.add_parser("cache", help="inspect or clean the judgment cache and store")
    actions = cache.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True

    def common(sub: argparse.ArgumentParser, store_required: bool = False) -> None:
        sub.add_argument(
            "--cache-dir",
            type=_directory,
            default=None,
            help="local judgment cache (default: rag_cache_dir of the pytest configuration here, "
            "RAGMETRICS_CACHE_DIR, else .pytest_cache/d/ragmetrics if .pytest_cache exists here, "
            "else .ragmetrics_cache)",
        )
        sub.add_argument(
            "--store-dir",
            type=_directory,
            default=None,
            required=store_required,
            help="committed judgment store directory (default: rag_store_dir of the pytest "
            "configuration here, or RAGMETRICS_STORE_DIR)",
        )

    stats = actions.add_parser("stats", help="entries, size and models in the cache; unused store entries")
    common(stats)
    stats.add_argument("--json", action="store_true", help="print the figures as JSON")
    clear = actions.add_parser("clear", help="empty the local cache (the judgment store is not touched)")
    common(clear)
    from .calibration.cli import add_parser as add_judge_parser
    from .calibration.drawing import add_parser as add_labels_parser

    add_labels_parser(commands)

    add_judge_parser(commands, common)
    prune = actions.add_parser("prune", help="delete store entries the last full run did not use")
    common(prune)
    prune.add_argument("--dry-run", action="store_true", help="list what would be deleted, delete nothing")
    prune.add_argument(
        "--yes", "-y", action="store_true", help="delete without asking (needed when not in a terminal)"
    )
    store = commands.add_parser("store", help="maintain the committed judgment store")
    store_actions = store.add_subparsers(dest="action", metavar="ACTION")
    store_actions.required = True
    show = store_actions.add_parser(
        "show",
        help="print stored judgments whole, indented (a key, or its first "
        "characters as a report or a shard line shows them; several may be given)",
    )
    show.add_argument("keys", nargs="+", metavar="KEY", help="a judgment's key or a prefix of it")
    common(show)
    from .calibration.cli import add_rejudge_parser

    add_rejudge_parser(store_actions, common)
    from .batch_cli import add_parser as add_batch_parser

    add_batch_parser(store_actions, common)
    from .report.cli import add_commands

    add_commands(commands)
    return parser


def _stats(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .judge.cache import cache_summary
    from .judge.disk_cache import unreadable
    from .judge.last_run import read_last_run
    from .judge.store import JudgmentStore

    cache_dir: Path = args.cache_dir
    report: dict[str, Any] = {"cache_dir": str(cache_dir)}
    try:
        report["cache"] = cache_summary(cache_dir)
    except Exception as exc:  # a corrupt cache must produce a message, not a SQLite traceback
        print(f"error: {unreadable(cache_dir, exc)}", file=err)
        return EXIT_FAILED
    last_run = read_last_run(cache_dir)
    if args.store_dir is not None:
        store = JudgmentStore(args.store_dir)
        store_keys = store.keys()
        report["store_dir"] = str(args.store_dir)
        report["store_entries"] = len(store_keys)
        report["store_bytes"] = sum(p.stat().st_size for p in store.shard_paths())
        unused = None if last_run is None or last_run.unused is None else last_run.unused & store_keys
        report["store_unused_by_last_run"] = None if unused is None else len(unused)
        report["last_run_partial"] = None if last_run is None else last_run.reason
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True), file=out)
        return EXIT_OK
    cache = report["cache"]
    print(f"cache: {cache_dir}" + ("" if cache_dir.is_dir() else " (does not exist)"), file=out)
    print(f"  entries: {cache['entries']}", file=out)
    print(f"  size on disk: {_human_size(cache['bytes'])}", file=out)
    for model, count in cache["models"].items():
        print(f"  model {model}: {count}", file=out)
    if args.store_dir is not None:
        print(f"store: {args.store_dir}", file=out)
        print(f"  entries: {report['store_entries']}", file=out)
        print(f"  size on disk: {_human_size(report['store_bytes'])}", file=out)
        unused = report["store_unused_by_last_run"]
        if last_run is None:
            print("  not used by the last full run: unknown (no record of a full run yet)", file=out)
        elif unused is None:
            partial = last_run.reason if last_run.damaged else f"the last run was partial: {last_run.reason}"
            partial = f"unknown ({partial})"
            print(f"  not used by the last run: {partial}", file=out)
        else:
            print(f"  not used by the last full run: {unused}", file=out)
    return EXIT_OK


def _clear(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    from .judge.last_run import LAST_RUN_FILE

    cache_dir: Path = args.cache_dir
    if not cache_dir.is_dir():
        print(f"nothing to clear: {cache_dir} does not exist", file=out)
        return EXIT_OK
    entries = [p for p in cache_dir.iterdir() if p.name != LAST_RUN_FILE]
    if entries and not (cache_dir / "cache.db").exists():
        # Refuse to empty a directory that is not ours (a mistyped --cache-dir, the store...).
        print(
            f"error: {cache_dir} does not look like a pytest-ragmetrics cache (no cache.db); not touching it",
            file=err,
        )
        return EXIT_FAILED
    # Removing the files rather than calling Cache.clear() also recovers a corrupt database. Only the
    # cache's own: a cache directory set to one other tools share (~/.cache) keeps theirs.
    ours = [path for path in entries if _cache_file(path)]
    for path in ours:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
    others = sorted(path.name for path in entries if path not in ours)
    left = f"; left {len(others)} that are not the cache's: {', '.join(others[:5])}" if others else ""
    left += ", ..." if len(others) > 5 else ""
    print(f"cleared the judgment cache at {cache_dir} ({len(ours)} file(s) removed{left})", file=out)
    return EXIT_OK


def _cache_file(path: Path) -> bool:
    """Whether ``path``, in a cache directory, is the cache's: its database and SQLite's files beside
    it, the claims' database, or a directory of large values (named by two hex digits, as diskcache
    names them)."""
    from .judge.claims import CLAIMS_DIR

    name = path.name
    hex_digits = len(name) == 2 and set(name) <= set("0123456789abcdef") and path.is_dir()
    return name.startswith("cache.db") or name == CLAIMS_DIR or hex_digits


def _prune(args: argparse.Namespace, out: TextIO, err: TextIO, stdin: TextIO | None = None) -> int:
    from .judge.last_run import read_last_run
    from .judge.store import JudgmentStore

    last_run = read_last_run(args.cache_dir)
    if last_run is None or last_run.unused is None:
        if last_run is None:
            why = f"no record of a full test run in {args.cache_dir}"
        elif last_run.damaged:
            why = str(last_run.reason)
        else:
            why = f"the last test run (recorded in {args.cache_dir}) was partial: {last_run.reason}"
        print(
            f"error: {why}; it cannot tell which store entries the suite needs, so nothing is pruned. "
            "Run the whole test suite (no named paths or node ids, no -k, -m or --lf) until it "
            "passes, then prune",
            file=err,
        )
        return EXIT_FAILED
    store = JudgmentStore(args.store_dir)
    if not store.directory.is_dir():
        print(f"error: the judgment store {store.directory} does not exist", file=err)
        return EXIT_FAILED
    # Only what the last full run saw in the store and did not use: an entry stored since (by a
    # partial run, a merge) is kept.
    keys = store.keys()
    keep = keys - last_run.unused
    removed = store.prune(keep, dry_run=True)
    total = len(keys)
    if last_run.kept:
        print(
            f"kept {last_run.kept} store entr{'y' if last_run.kept == 1 else 'ies'} the last full run did "
            f"not use: {last_run.kept_for}",
            file=out,
        )
    if not removed:
        print(f"nothing to prune: the last full run used all {total} store entries", file=out)
        return EXIT_OK
    for key in removed:
        print(f"{'would delete' if args.dry_run else 'to delete:'} {key} ({store.path_for(key)})", file=out)
    if args.dry_run:
        print(f"would delete {len(removed)} of {total} store entries", file=out)
        return EXIT_OK
    if not args.yes:
        stdin = sys.stdin if stdin is None else stdin
        if not (stdin is not None and stdin.isatty()):
            print(
                f"error: not deleting {len(removed)} of {total} store entries without confirmation; "
                "run in a terminal to be asked, or pass --yes",
                file=err,
            )
            return EXIT_USAGE
        print(f"delete these {len(removed)} of {total} store entries? [y/N] ", end="", file=out, flush=True)
        answer = stdin.readline().strip().lower()
        if answer not in ("y", "yes"):
            print("nothing deleted", file=out)
            return EXIT_FAILED
    deleted = store.prune(keep)
    print(f"deleted {len(deleted)} of {total} store entries", file=out)
    return EXIT_OK


def _show(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Print each judgment a key or key prefix names, as one indented JSON object."""
    from .judge.store import JudgmentStore
    from .redact import redact_json

    store = JudgmentStore(args.store_dir)
    keys = sorted(store.keys())
    status = EXIT_OK
    for wanted in args.keys:
        prefix = wanted.strip().lower()
        if not prefix or any(c not in "0123456789abcdef" for c in prefix):
            print(f"error: {wanted!r} is not a judgment key (hexadecimal digits)", file=err)
            return EXIT_USAGE
        found = [key for key in keys if key.startswith(prefix)]
        if not found:
            print(f"error: no judgment in {args.store_dir} has a key starting with {prefix}", file=err)
            status = EXIT_FAILED
            continue
        for key in found:
            record = store.read_json(key)
            if record is None:
                print(f"error: the judgment {key} cannot be read (see the warning above)", file=err)
                status = EXIT_FAILED
                continue
            # Masked as in a run's report: a key pasted into a golden set is not printed into a CI log.
            text = json.dumps(redact_json(record), indent=2, ensure_ascii=False, sort_keys=True)
            # A lone surrogate (a judge's "\ud800" escape, kept as it was) printed as that escape, not
            # as a UnicodeEncodeError.
            print(text.encode("utf-8", "backslashreplace").decode("utf-8"), file=out)
    store.close()
    return status


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (4 for usage errors, as pytest)."""
    from . import _scope

    token = _scope.command_line.set(True)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning(warnings.showwarning)
            return _main(argv)
    except KeyboardInterrupt:
        # Ctrl-C: one line, as pytest says it, where a traceback through the judging loop stood. A
        # command that judges has closed its evaluator on the way here, which records the answers
        # that came back where its cache mode records (not with --cache off: the line says no more).
        print("interrupted (Ctrl-C)", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        _scope.command_line.reset(token)


def _show_warning(show: Callable[..., None]) -> Callable[..., None]:
    """Our warnings as one ``warning: ...`` line each (a damaged store line, say), not Python's form
    naming a line of our source; anyone else's as ``show`` shows them."""

    def shown(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, RagMetricsWarning):
            print(f"warning: {message}", file=sys.stderr)
        else:
            show(message, category, *args, **kwargs)

    return shown


def _main(argv: Sequence[str] | None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse: --help exits 0; a usage error prints its message and exits 2
        return EXIT_OK if exc.code in (0, None) else EXIT_USAGE
    if args.command == "labels":
        from .calibration.drawing import run as run_labels

        return run_labels(args, sys.stdout, sys.stderr)
    try:
        ini = _pytest_ini_values(Path.cwd())
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.command in REPORT_COMMANDS:
        from .report.cli import run

        return run(args, ini, sys.stdout, sys.stderr)
    try:
        configured = configured_dirs(ini=ini)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.cache_dir is None:
        from .settings import default_cache_dir

        args.cache_dir = configured.get("cache_dir") or default_cache_dir(cwd=Path.cwd())
    if args.store_dir is None:
        args.store_dir = configured.get("store_dir")
    for what, directory in (("judgment store", args.store_dir), ("judgment cache", args.cache_dir)):
        try:
            unusable = directory is not None and Path(directory).exists() and not Path(directory).is_dir()
        except OSError as exc:  # a name the file system refuses (longer than it allows)
            print(f"error: the {what} {directory} cannot be used: {exc.strerror or exc}", file=sys.stderr)
            return EXIT_USAGE
        if unusable:
            print(f"error: the {what} {directory} is not a directory", file=sys.stderr)
            return EXIT_USAGE
    if args.command == "judge":
        from .calibration.cli import run as run_judge

        return run_judge(args, ini, Path.cwd(), sys.stdout, sys.stderr)
    if args.action in ("prune", "show", "rejudge") and args.store_dir is None:
        print(
            f"error: no judgment store to {args.action}: pass --store-dir, or set rag_store_dir in the "
            "pytest configuration of this directory",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.action in ("show", "rejudge") and not Path(args.store_dir).exists():
        # A misspelt path read as an empty store: rejudge re-judged nothing, with success.
        print(f"error: the judgment store {args.store_dir} does not exist", file=sys.stderr)
        return EXIT_USAGE
    if args.command == "store":
        if args.action == "rejudge":
            from .calibration.cli import rejudge

            return rejudge(args, ini, Path.cwd(), sys.stdout, sys.stderr)
        if args.action == "batch":
            from .batch_cli import run as run_batch

            return run_batch(args, ini, Path.cwd(), sys.stdout, sys.stderr)
        store_handlers = {"show": _show}
        return store_handlers[args.action](args, sys.stdout, sys.stderr)
    handlers = {"stats": _stats, "clear": _clear, "prune": _prune}
    return handlers[args.action](args, sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
