"""``python -m pytest_ragmetrics store batch submit|status|fetch|import``: the batch path's commands.

``submit PATH`` uploads the batch files ``pytest --rag-batch=PATH`` wrote and creates their batches
through the ``openai`` client, with the judge's settings of the pytest configuration here (base URL,
API key, Azure endpoint and version), after checking them against the spending caps; the batch ids
go to the state file beside ``PATH``. ``status`` shows each batch's state and counts; ``fetch``
downloads the results of the batches that finished (also an expired or cancelled batch's part of
the work, and the error files) and imports them; ``import RESULTS.jsonl`` imports a results file
produced anywhere (``vllm run-batch``, another provider). ``PATH`` defaults to ``rag_batch`` of the
pytest configuration here (or ``RAGMETRICS_BATCH``).

Exit codes, like pytest's: 0 everything asked is recorded (or submitted), 1 something is left (a
batch not finished, failed or refused answers: the message lists them), 4 usage errors.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .errors import EXIT_USAGE, ConfigError, RagMetricsError

if TYPE_CHECKING:
    from .engine import Evaluator
    from .judge.batch import ImportOutcome
    from .settings import Settings

EXIT_OK, EXIT_FAILED = 0, 1
#: Failed and refused lines listed by name; the rest are counted.
SHOWN_LINES = 50
STEPS = ("submit", "status", "fetch", "import")


def add_parser(store_actions: Any, common: Callable[[argparse.ArgumentParser], None]) -> None:
    """Register ``store batch`` on the ``store`` command's actions."""
    batch = store_actions.add_parser(
        "batch",
        help="judge in a provider's batch: submit the file pytest --rag-batch=PATH wrote, follow it, "
        "fetch and import its results (or import a results file produced elsewhere)",
    )
    batch.add_argument("step", choices=STEPS, help="submit, status, fetch or import")
    batch.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="submit, status, fetch: the batch file pytest --rag-batch=PATH wrote (default: rag_batch of "
        "the pytest configuration here, or RAGMETRICS_BATCH); import: the results file (JSONL)",
    )
    batch.add_argument(
        "--batch",
        type=Path,
        dest="batch_file",
        help="import: the batch file whose requests the results answer (default: rag_batch of the "
        "pytest configuration here, or RAGMETRICS_BATCH)",
    )
    common(batch)


def _settings(args: argparse.Namespace, ini: Mapping[str, Any], base: Path) -> Settings:
    from .settings import configured, with_paths_under

    cli: dict[str, Any] = {
        "cache_dir": str(args.cache_dir),
        "store_dir": args.store_dir and str(args.store_dir),
    }
    # These commands record what they import: the cache mode of the configuration is for test runs.
    settings = configured(ini, cli).replace(cache="readwrite")
    return with_paths_under(settings, base)


def _batch_path(args: argparse.Namespace, settings: Settings) -> Path:
    given = args.batch_file if args.step == "import" else args.path
    if given is not None:
        return Path(given)
    if settings.batch:
        return Path(settings.batch)
    what = "--batch PATH" if args.step == "import" else "PATH"
    raise ConfigError(
        f"which batch file? give {what}, or set rag_batch in the pytest configuration of this directory "
        "(or RAGMETRICS_BATCH)"
    )


def run(args: argparse.Namespace, ini: Mapping[str, Any], base: Path, out: TextIO, err: TextIO) -> int:
    """Run ``store batch STEP``; returns the exit code."""
    from .engine import Evaluator

    try:
        settings = _settings(args, ini, base)
        path = _batch_path(args, settings)
        if args.step == "import" and args.path is None:
            raise ConfigError("store batch import needs the results file: store batch import RESULTS.jsonl")
        if args.step == "import":
            _results_file(Path(args.path))
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    # rag_batch (or RAGMETRICS_BATCH) names the export to work on, not one for this command to write;
    # unset here, not with Settings.replace, to which None is a value not given.
    evaluator = Evaluator(dataclasses.replace(settings, batch=None))
    try:
        if args.step == "submit":
            return _submit(evaluator, path, out, err)
        if args.step == "status":
            return _status(evaluator, path, out, err)
        if args.step == "fetch":
            return _fetch(evaluator, path, out, err)
        return _import(evaluator, path, Path(args.path), out, err)
    except (ValueError, OSError, RagMetricsError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_FAILED
    except Exception as exc:  # the provider's API errors, without the SDK's traceback
        if type(exc).__module__.split(".")[0] != "openai":
            raise
        from .judge.server_errors import server_message

        print(f"error: the batch API answered {type(exc).__name__}: {server_message(exc)}", file=err)
        return EXIT_FAILED
    finally:
        evaluator.close()


def _judge(evaluator: Evaluator) -> Any:
    """The run's judge as the hooks build it: it must be the OpenAI-compatible one."""
    judge = evaluator.hook.pytest_ragmetrics_make_judge(settings=evaluator.settings)
    if not hasattr(judge, "answer_from_body"):
        raise ConfigError(
            f"the batch commands work with the OpenAI-compatible judge; the configured judge is "
            f"{type(judge).__name__}"
        )
    return judge


def _exported(path: Path) -> dict[str, Any]:
    """The export's state; a wrong path is said before anything asks for the judge's key."""
    from .judge.batch import read_state

    state = read_state(path)
    if state is None:
        raise ValueError(f"no batch export at {path}: write one with pytest --rag-batch={path}")
    return state


def _submit(evaluator: Evaluator, path: Path, out: TextIO, err: TextIO) -> int:
    from .judge.batch import submit

    state = _exported(path)
    s = evaluator.settings
    # The spending caps hold for what a batch would send, before anything is uploaded.
    asked = sum(int(p.get("requests", 0)) for p in state["parts"] if not p.get("batch_id"))
    tokens = int(state.get("prompt_tokens", 0)) + int(state.get("completion_tokens", 0))
    if s.max_judge_calls is not None and asked > s.max_judge_calls:
        raise ConfigError(
            f"{path} holds {asked} request(s), more than the judge call cap of {s.max_judge_calls} "
            "(RAGMETRICS_MAX_JUDGE_CALLS, rag_max_judge_calls): nothing was uploaded"
        )
    if s.max_judge_tokens is not None and tokens > s.max_judge_tokens:
        raise ConfigError(
            f"{path} may cost up to {tokens} tokens, more than the judge token cap of {s.max_judge_tokens} "
            "(RAGMETRICS_MAX_JUDGE_TOKENS, rag_max_judge_tokens): nothing was uploaded"
        )
    judge = _judge(evaluator)
    endpoint = "/chat/completions" if getattr(judge, "azure", False) else "/v1/chat/completions"
    for line in submit(path, judge.sync_client(), endpoint=endpoint):
        print(line, file=out)
    print(f"follow it with: python -m pytest_ragmetrics store batch status {path}", file=out)
    return EXIT_OK


def _status(evaluator: Evaluator, path: Path, out: TextIO, err: TextIO) -> int:
    from .judge.batch import status

    state = _exported(path)
    if not any(p.get("batch_id") for p in state["parts"]):
        lines = status(path, None)  # nothing submitted: no client needed
    else:
        lines = status(path, _judge(evaluator).sync_client())
    for line in lines:
        print(line, file=out)
    return EXIT_OK


def _importer(evaluator: Evaluator, batch_file: Path) -> tuple[Callable[[Path], ImportOutcome], Any]:
    from .judge.batch import AskedRequests, import_results

    judge = _judge(evaluator)
    cached = evaluator.judge
    asked = AskedRequests(batch_file)

    def run_import(results: Path) -> ImportOutcome:
        return import_results(
            results,
            asked,
            read=judge.answer_from_body,
            recorded=cached.recorded,
            record=cached.record_answers,
        )

    return run_import, asked


def _listed(kind: str, lines: list[str], count: int, err: TextIO) -> None:
    """Print ``lines`` (the first :data:`SHOWN_LINES` of ``count``) as ``kind: line``, then how many
    more there are."""
    for line in lines:
        print(f"{kind}: {line}", file=err)
    if count > SHOWN_LINES:
        print(f"{kind}: ... and {count - SHOWN_LINES} more", file=err)


def _report(outcome: ImportOutcome, batch_file: Path, evaluator: Evaluator, out: TextIO, err: TextIO) -> int:
    failed, refused, conflicts = outcome.failed, outcome.refused, outcome.conflicts
    _listed(
        "failed",
        [
            f"{source} line {number}: {f'{custom_id[:12]}… ({label})' if custom_id else '?'}: {why}"
            for source, number, custom_id, label, why in failed[:SHOWN_LINES]
        ],
        len(failed),
        err,
    )
    _listed(
        "refused",
        [
            f"{source} line {number}: an answer for {custom_id!r}, which the batch file {batch_file} did "
            "not ask for"
            for source, number, custom_id in refused[:SHOWN_LINES]
        ],
        len(refused),
        err,
    )
    _listed(
        "conflict",
        [
            f"{source} line {number}: {custom_id[:12]}… ({label}) answered again, differently from line "
            f"{first}, whose answer is recorded"
            for source, number, custom_id, label, first in conflicts[:SHOWN_LINES]
        ],
        len(conflicts),
        err,
    )
    where = evaluator.settings.store_dir
    # The answers the store could not take (a read-only checkout, a full disk) are in the cache only:
    # the store this command fills for CI replay lacks them, so they are not said to be in it.
    unrecorded, why = evaluator.stats.unrecorded_untold()
    if unrecorded:
        print(
            f"recording failed: {why}; {unrecorded} judgment(s) were not recorded for replay (they are in "
            "the cache: import again, or run the tests, once the store can be written)",
            file=err,
        )
        into = f"the cache but not the judgment store {where} (see above)"
    elif where:
        into = f"the judgment store {where} and the cache"
    else:
        into = "the local cache (no judgment store is set)"
    print(
        f"imported: {outcome.recorded} judgment(s) recorded into {into}, {outcome.already} recorded already, "
        f"{len(outcome.failed)} failed, {len(outcome.refused)} refused{outcome.repeated()}",
        file=out,
    )
    if outcome.failed:
        print(
            "the failed ones are left to the next export run (pytest --rag-batch=PATH writes them again) "
            "or to the live judge",
            file=out,
        )
    unsettled = bool(outcome.failed or outcome.refused or outcome.conflicts or unrecorded)
    return EXIT_FAILED if unsettled else EXIT_OK


def _results_file(results: Path) -> None:
    """Refuse a results file that is not there or not a file (a directory, a FIFO) at once."""
    if not results.exists():
        raise ConfigError(f"the results file {results} does not exist")
    if not results.is_file():
        raise ConfigError(f"the results file {results} is not a regular file")


def _import(evaluator: Evaluator, batch_file: Path, results: Path, out: TextIO, err: TextIO) -> int:
    run_import, asked = _importer(evaluator, batch_file)
    try:
        return _report(run_import(results), batch_file, evaluator, out, err)
    finally:
        asked.close()


def _fetch(evaluator: Evaluator, path: Path, out: TextIO, err: TextIO) -> int:
    from .judge.batch import fetch

    _exported(path)
    client = _judge(evaluator).sync_client()
    run_import, asked = _importer(evaluator, path)
    try:
        lines, outcome, waiting = fetch(path, client, run_import)
    finally:
        asked.close()
    for line in lines:
        print(line, file=out)
    status = _report(outcome, path, evaluator, out, err)
    if waiting:
        print(f"{waiting} batch(es) not finished yet: fetch again later", file=out)
        return EXIT_FAILED
    return status
