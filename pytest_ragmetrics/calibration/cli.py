"""``python -m pytest_ragmetrics judge check|drift``: the judge check outside a test run, and drift.

``judge check PATH --model A --model B`` judges a labelled set with each model (through the cache and
the store, as configured where pytest runs) and prints their agreement side by side with what judging
cost: fresh judge calls, the tokens they spent and their mean latency. A team picks the cheapest judge
that agrees enough. Exit 1 when a model is below a floor.

``judge drift --model NEW`` re-judges a seeded random sample of the recorded judgments (the judgment
store, else the local cache) with ``NEW`` and the current prompt versions, and reports how many
verdicts flip and how each metric's mean verdict would move. ``--max-flip-rate R`` (over all kinds)
or ``--max-flip-rate KIND=R`` (repeatable) makes it exit 1 when more verdicts flip than that.

``store rejudge`` re-judges every judgment the store records (or those of one ``--from-model`` and
``--kind``) with the configured judge model and the current prompt versions, through the same cached
judge a test run uses, so the store then holds them for replay. Exit 1 when any request failed.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from .. import judgments as J, kinds as K
from ..errors import EXIT_USAGE, ConfigError, JudgeCallCapReached, RagMetricsError

if TYPE_CHECKING:
    from ..engine import Evaluator
    from ..judge.base import JudgeRequest
    from ..settings import Settings

EXIT_OK, EXIT_FAILED = 0, 1


def add_parser(commands: Any, common: Any) -> None:
    """Register ``judge check`` and ``judge drift`` on the top-level sub-command parser."""
    judge = commands.add_parser("judge", help="check the judge against labels, or measure its drift")
    actions = judge.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    check = actions.add_parser("check", help="agreement of one or more judge models with a labelled set")
    common(check)
    check.add_argument(
        "path",
        nargs="?",
        type=Path,
        help="labelled set (.jsonl; default: rag_judge_check of the configuration)",
    )
    check.add_argument(
        "--model", action="append", help="judge model to check (repeatable; default: the configured one)"
    )
    check.add_argument(
        "--floor",
        action="append",
        help="agreement floor, e.g. 'context_precision kappa >= 0.6' (repeatable; "
        "default: rag_judge_agreement of the configuration)",
    )
    check.add_argument(
        "--cache",
        choices=("readwrite", "replay", "refresh", "off"),
        help="cache mode (default: rag_cache of the configuration)",
    )
    check.add_argument("--json", action="store_true", help="print the figures as JSON")
    drift = actions.add_parser("drift", help="re-judge a sample of recorded judgments with another model")
    common(drift)
    drift.add_argument("--model", required=True, help="the judge model to compare with the recorded one")
    drift.add_argument(
        "--from-model",
        help="only recorded judgments of this model (default: the configured judge model, if it has any)",
    )
    drift.add_argument("--sample", type=int, default=100, help="judgments to re-judge (default 100)")
    drift.add_argument("--seed", type=int, default=0, help="seed of the random sample (default 0)")
    drift.add_argument(
        "--cache",
        choices=("readwrite", "replay", "refresh", "off"),
        help="cache mode (default: rag_cache of the configuration)",
    )
    drift.add_argument(
        "--max-flip-rate",
        action="append",
        metavar="[KIND=]RATE",
        help="exit 1 when the share of verdicts that flip exceeds RATE (0 to 1): over all kinds, or for "
        "one kind with KIND=RATE, e.g. context_precision=0.1 (repeatable)",
    )
    drift.add_argument("--json", action="store_true", help="print the figures (and every flip) as JSON")


def _settings(args: argparse.Namespace, ini: Mapping[str, Any], base: Path) -> Settings:
    from ..settings import configured

    cli: dict[str, Any] = {
        "cache_dir": str(args.cache_dir),
        "store_dir": args.store_dir and str(args.store_dir),
    }
    if args.cache:
        cli["cache"] = args.cache
    settings = configured(ini, cli)
    if settings.judge_check and not Path(settings.judge_check).is_absolute():
        settings = settings.replace(judge_check=str(base / settings.judge_check))
    return settings


def _model(given: str) -> str:
    """A ``--model`` value, checked as the judge model setting is and named as it was given here."""
    from ..settings import OPTIONS_BY_NAME

    model: str = OPTIONS_BY_NAME["judge_model"].convert(given, "--model")
    return model


def _evaluator(settings: Settings) -> Evaluator:
    from ..engine import Evaluator

    evaluator = Evaluator(settings)
    configured = evaluator.how_to_set

    def how_to_set(name: str, value: Any) -> str:
        # These commands take the cache mode as an option of their own: a message that tells a
        # person to change it (a judgment a replay lacks) names that, not the configuration's key.
        return f"--cache {value}" if name == "cache" else configured(name, value)

    evaluator.how_to_set = how_to_set
    return evaluator


def _fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}"


def _table(rows: Sequence[Sequence[str]], right_from: int, right_to: int | None = None) -> list[str]:
    """Aligned columns: the figures, columns ``right_from`` to ``right_to`` (excluded; default: the
    last), to the right, and text to the left."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    right = range(right_from, len(widths) if right_to is None else right_to)
    return [
        "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)).rstrip()
        for r in rows
    ]


def run(args: argparse.Namespace, ini: Mapping[str, Any], base: Path, out: TextIO, err: TextIO) -> int:
    """Run ``judge check`` or ``judge drift``; returns the exit code."""
    try:
        settings = _settings(args, ini, base)
        if args.action == "check":
            return _check(args, settings, out, err)
        return _drift(args, settings, out, err)
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE


# --- judge check --------------------------------------------------------------------------------------


def _check(args: argparse.Namespace, settings: Settings, out: TextIO, err: TextIO) -> int:
    from ..gates import compare
    from .check import check_floors, judge_labels, parse_floors
    from .labels import load_labels

    path = args.path or (Path(settings.judge_check) if settings.judge_check else None)
    if path is None:
        print(
            "error: no labelled set: pass PATH, or set rag_judge_check in the pytest configuration", file=err
        )
        return EXIT_USAGE
    try:
        items = load_labels(path)
    except (ValueError, OSError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    floors = parse_floors(args.floor if args.floor is not None else settings.judge_agreement)
    models = list(dict.fromkeys([_model(m) for m in args.model] if args.model else [settings.judge_model]))
    report: dict[str, Any] = {"labelled_set": str(path), "items": len(items), "models": []}
    for model in models:
        # Each model rates graded relevance itself: a side-by-side comparison, not an ensemble.
        evaluator = _evaluator(settings.replace(judge_model=model, relevance_models=()))
        started = time.perf_counter()
        try:
            results = evaluator.runner.run(judge_labels(items, evaluator))
        except RagMetricsError as exc:
            print(f"error: judge {model}: {exc}", file=err)
            return EXIT_FAILED
        finally:
            evaluator.close()
        rows = check_floors(floors, results, compare, path.name)
        calls = sum(r.judge_calls for r in results)
        errors = sum(len(r.errors) for r in results)
        report["models"].append(
            {
                "model": model,
                "kinds": [r.to_json() for r in results],
                "floors": rows,
                "passed": all(r["passed"] for r in rows) and not errors,
                "errors": errors,
                "judge_calls": calls,
                # As recorded with every answer, judged now or read from the cache or store: what
                # judging the set costs with this model, even when this check replayed it.
                "tokens": evaluator.stats.total_tokens + evaluator.stats.tokens_saved,
                # Each call's own time, from a free slot to its answer: not its wait behind others.
                "latency": evaluator.stats.call_seconds / calls if calls else None,
                "wall_seconds": round(time.perf_counter() - started, 3),
            }
        )
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True), file=out)
    else:
        _print_check(report, floors != [], out)
    return EXIT_OK if all(m["passed"] for m in report["models"]) else EXIT_FAILED


def _print_check(report: Mapping[str, Any], with_floors: bool, out: TextIO) -> None:
    print(f"judge check {report['labelled_set']}: {report['items']} labelled items", file=out)
    rows = [["model", "kind", "unit", "n", "accuracy", "kappa", "weighted_kappa", "f1", "errors"]]
    for m in report["models"]:
        for k in m["kinds"]:
            rows.append(
                [m["model"], k["kind"], k["unit"], str(k["n"]), _fmt(k["accuracy"]), _fmt(k["kappa"]),
                 _fmt(k["weighted_kappa"]), _fmt(k["f1"]), str(k["errors"])]
            )  # fmt: skip
    for line in _table(rows, 3):
        print(line, file=out)
    print(
        "kappa: Cohen's; weighted_kappa: quadratic weights (graded ratings); f1 of yes / needed / supported",
        file=out,
    )
    print("errors: labelled items the judge gave no usable answer for (not in the figures)", file=out)
    for m in report["models"]:
        for k in m["kinds"]:
            for e in k["error_items"]:
                item = f"item {e['id']!r} ({e['where']})"
                print(f"error: {m['model']} {k['kind']} {item}: {e['reason']}", file=out)
    with_verdict = with_floors or any(m["errors"] for m in report["models"])
    rows = [["model", "judge calls", "tokens", "latency/call", *(["floors"] if with_verdict else [])]]
    for m in report["models"]:
        failed = [f["spec"] for f in m["floors"] if not f["passed"]]
        if m["errors"]:
            failed.append(f"{m['errors']} item(s) not judged")
        undecided = [f["spec"] for f in m["floors"] if f.get("skipped")]  # too few labelled units
        verdict = "PASS" if not failed else "FAIL: " + "; ".join(failed)
        if undecided:
            verdict += "; not decided: " + "; ".join(undecided)
        latency = "-" if m["latency"] is None else f"{m['latency']:.2f}s"
        rows.append(
            [
                m["model"],
                str(m["judge_calls"]),
                f"{m['tokens']:,}",
                latency,
                *([verdict] if with_verdict else []),
            ]
        )
    print(file=out)
    for line in _table(rows, 1, 4):  # the floors' verdict is text
        print(line, file=out)
    print(
        "judge calls: fresh calls only (a recorded answer costs nothing); tokens: as recorded with every "
        "answer, cached or not; latency/call: the mean time of a fresh call itself, not its wait for a "
        "free slot",
        file=out,
    )


# --- judge drift ---------------------------------------------------------------------------------------


class UnreadableCache(RagMetricsError):
    """The local cache :func:`recorded_judgments` reads from is damaged; the message says where and why."""


def recorded_judgments(settings: Settings) -> tuple[str, list[dict[str, Any]]]:
    """Every recorded judgment that carries its inputs: from the judgment store when one is
    configured, else from the local cache. Returns (where they came from, records sorted by key);
    raises :class:`UnreadableCache` when the cache cannot be read."""
    records: list[dict[str, Any]] = []
    if settings.store_dir:
        from ..judge.store import JudgmentStore

        store = JudgmentStore(settings.store_dir)
        for key in sorted(store.keys()):
            data = store.read_json(key)
            if data is not None and isinstance(data.get("inputs"), dict):
                records.append(data)
        return f"judgment store {settings.store_dir}", records
    from ..judge.claims import CLAIM_PREFIX
    from ..judge.disk_cache import cache_errors, open_disk_cache, unreadable
    from ..settings import default_cache_dir

    directory = Path(settings.cache_dir or default_cache_dir())
    if (directory / "cache.db").exists():  # one that is not a file is a damaged cache, not an empty one
        try:
            cache = open_disk_cache(directory)
            try:
                for key in sorted(cache.iterkeys()):
                    if isinstance(key, str) and key.startswith(CLAIM_PREFIX):
                        continue  # a judgment being asked for right now, not an entry
                    try:
                        data = json.loads(cache.get(key))
                    except (TypeError, ValueError):
                        continue
                    if isinstance(data, dict) and isinstance(data.get("inputs"), dict):
                        records.append(data)
            finally:
                cache.close()
        except cache_errors() as exc:
            raise UnreadableCache(unreadable(directory, exc)) from None
    return f"cache {directory}", records


def rebuild_request(record: Mapping[str, Any], model: str) -> JudgeRequest:
    """The request a recorded judgment answered, for ``model`` and the current prompt version.

    Raises ``ValueError`` saying what is wrong when the record cannot make one (a hand edit: an
    unknown kind, an input missing or of the wrong type).
    """
    kind = K.KINDS.get(str(record.get("kind")))
    if kind is None:
        raise ValueError(f"unknown judgment kind {record.get('kind')!r}")
    # Messages about it read "... for the recorded context_precision judgment 0bf20ca9".
    label = f"the recorded {record.get('kind')} judgment {str(record.get('key') or '')[:8]}".rstrip()
    temperature, seed, n = record.get("temperature", 0.0), record.get("seed"), record.get("n", 1)
    if not _number(temperature) or not 0 <= temperature < math.inf:  # NaN too: not JSON to send
        raise ValueError(f"its temperature {temperature!r} is not a number from 0 up")
    if not (seed is None or (_number(seed) and isinstance(seed, int))):
        raise ValueError(f"its seed {seed!r} is not an integer")
    if not (_number(n) and isinstance(n, int) and n >= 1):
        raise ValueError(f"its n {n!r} is not a count of answers")
    try:
        return kind.rebuild(record["inputs"], J.JudgeParams(model, float(temperature), seed, n), label)
    except KeyError as exc:
        raise ValueError(f"it has no {exc.args[0]!r}") from None
    except (TypeError, ValueError, AttributeError) as exc:  # an input of the wrong type
        raise ValueError(f"{type(exc).__name__}: {exc}") from None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _requests(
    records: Sequence[dict[str, Any]], model: str, where: str, err: TextIO, *, read_answers: bool = False
) -> list[tuple[dict[str, Any], JudgeRequest, list[float]]]:
    """Each record with the request it answered, for ``model``, and with ``read_answers`` the
    verdict values of its answer; a record that cannot give them (a hand edit) is named on ``err``
    and left out."""
    from ..judge.base import JudgeAnswer
    from ..redact import redact

    rows = []
    for record in records:
        try:
            request = rebuild_request(record, model)
        except ValueError as exc:
            why = f"cannot be asked again ({exc})"
        else:
            try:
                answer = JudgeAnswer.from_json(record["answer"], source="store") if read_answers else None
                old = units(request, answer.choices) if answer is not None else []
            except (KeyError, TypeError, ValueError) as exc:
                why = f"has an answer that cannot be read ({type(exc).__name__}: {exc})"
            else:
                rows.append((record, request, old))
                continue
        # What a hand edit left there is quoted: masked like any message that may hold a secret.
        message = f"the recorded judgment {record.get('key')} in the {where} {why}; mend or delete its line"
        print(f"error: {redact(message)}", file=err)
    return rows


def units(request: JudgeRequest, choices: Sequence[Mapping[str, Any]]) -> list[float]:
    """The verdict values of one answer, one per unit, in [0, 1]: useful, attributed per reference
    sentence, rating / 2, needed per chunk sentence (see
    :attr:`~pytest_ragmetrics.judgments.JudgmentKind.verdicts`)."""
    return [value for value, _ in K.KINDS[request.kind].verdicts(request, choices)]


def kind_names() -> str:
    """Every kind of judgment, as messages list them."""
    return ", ".join(K.KINDS)


def parse_flip_rate(text: str) -> tuple[str | None, float]:
    """``RATE`` or ``KIND=RATE`` of ``--max-flip-rate``: (the kind or None for all kinds, the rate).

    Raises :class:`ConfigError` naming the option and what was wrong.
    """
    name, _, value = text.rpartition("=")
    kind = None
    if name.strip():
        entry = K.kind_of(name.strip())
        if entry is None:
            raise ConfigError(
                f"--max-flip-rate {text!r}: {name.strip()!r} is not a judgment kind (use "
                f"{kind_names()}, or context_relevance[graded], [sentence] or [binary])"
            )
        kind = entry.name
    try:
        rate = float(value)
    except ValueError:
        raise ConfigError(f"--max-flip-rate {text!r}: {value.strip()!r} is not a number") from None
    if not 0.0 <= rate <= 1.0:
        raise ConfigError(f"--max-flip-rate {text!r}: the rate must be between 0 and 1, got {rate:g}")
    return kind, rate


def check_flip_rates(
    limits: Sequence[tuple[str, tuple[str | None, float]]], kinds: Mapping[str, Mapping[str, Any]]
) -> list[dict[str, Any]]:
    """One row per ``--max-flip-rate``: the share of verdicts that flipped, and whether it is within."""
    rows = []
    for spec, (kind, rate) in limits:
        chosen = [k for name, k in kinds.items() if kind is None or name == kind]
        units = sum(k["units"] for k in chosen)
        if not units:
            value, passed = None, False
            reason = f"no {kind or 'judgment'} verdicts were re-judged"
        else:
            value = sum(k["flipped"] for k in chosen) / units
            passed = value <= rate
            reason = "" if passed else f"{value:.1%} of {units} verdicts flipped, more than {rate:.1%}"
        rows.append(
            {"spec": spec, "kind": kind, "max": rate, "value": value, "passed": passed, "reason": reason}
        )
    return rows


def _drift(args: argparse.Namespace, settings: Settings, out: TextIO, err: TextIO) -> int:
    from ..judge.base import JudgeAnswer

    if args.sample < 1:
        print("error: --sample must be at least 1", file=err)
        return EXIT_USAGE
    limits = [(spec, parse_flip_rate(spec)) for spec in args.max_flip_rate or ()]
    model = _model(args.model)
    try:
        where, records = recorded_judgments(settings)
    except UnreadableCache as exc:
        print(f"error: {exc}", file=err)
        return EXIT_FAILED
    source_model = args.from_model
    if source_model is None and any(r.get("model") == settings.judge_model for r in records):
        source_model = settings.judge_model
    if source_model is not None:
        records = [r for r in records if r.get("model") == source_model]
    if not records:
        print(f"error: no recorded judgments with inputs in the {where}", file=err)
        return EXIT_FAILED
    sample = random.Random(args.seed).sample(records, min(args.sample, len(records)))
    # The other model's answers go to the local cache only (a rerun does not pay again), never into the
    # committed store: it records the judge the suite runs with.
    evaluator = _evaluator(dataclasses.replace(settings.replace(judge_model=model), store_dir=None))
    judged = _requests(sample, model, where, err, read_answers=True)

    async def judge_all() -> list[JudgeAnswer]:
        from .._aio import gather_or_cancel

        return list(await gather_or_cancel(*(evaluator.judge.judge(req) for _, req, _ in judged)))

    try:
        answers = evaluator.runner.run(judge_all())
    except RagMetricsError as exc:
        print(f"error: judge {model}: {exc}", file=err)
        return EXIT_FAILED
    finally:
        evaluator.close()
    kinds: dict[str, dict[str, Any]] = {}
    flips: list[dict[str, Any]] = []
    for (record, request, old), answer in zip(judged, answers, strict=True):
        kind = request.kind
        new = units(request, answer.choices)
        figures = kinds.setdefault(kind, {"judgments": 0, "units": 0, "flipped": 0, "old": 0.0, "new": 0.0})
        figures["judgments"] += 1
        figures["units"] += len(old)
        figures["old"] += sum(old)
        figures["new"] += sum(new)
        changed = sum(1 for a, b in zip(old, new, strict=True) if a != b)
        figures["flipped"] += changed
        if changed:
            flips.append({"key": record.get("key"), "kind": kind, "old": old, "new": new})
    summary = {
        "source": where,
        "from_model": source_model,
        "model": model,
        "recorded": len(records),
        "sampled": len(sample),
        "seed": args.seed,
        "kinds": {
            kind: {
                "judgments": f["judgments"],
                "units": f["units"],
                "flipped": f["flipped"],
                "flip_share": f["flipped"] / f["units"],
                "mean_before": f["old"] / f["units"],
                "mean_after": f["new"] / f["units"],
                "meaning": K.KINDS[kind].meaning,
            }
            for kind, f in sorted(kinds.items())
        },
        "flips": flips,
        "sampled_keys": [r.get("key") for r in sample],
    }
    summary["max_flip_rates"] = check_flip_rates(limits, summary["kinds"])
    passed = all(row["passed"] for row in summary["max_flip_rates"]) and len(judged) == len(sample)
    exit_code = EXIT_OK if passed else EXIT_FAILED
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True), file=out)
        return exit_code
    print(
        f"judge drift: {len(sample)} of {len(records)} recorded judgments"
        + (f" of {source_model}" if source_model else "")
        + f" ({where}, seed {args.seed}) re-judged by {model}",
        file=out,
    )
    rows = [["kind", "judgments", "verdicts", "flipped", "share", "mean before", "mean after", "change"]]
    for kind, k in summary["kinds"].items():
        rows.append(
            [kind, str(k["judgments"]), str(k["units"]), str(k["flipped"]), f"{k['flip_share']:.1%}",
             _fmt(k["mean_before"]), _fmt(k["mean_after"]), f"{k['mean_after'] - k['mean_before']:+.3f}"]
        )  # fmt: skip
    for line in _table(rows, 1):
        print(line, file=out)
    for kind in summary["kinds"]:
        print(f"  {K.KINDS[kind].meaning}", file=out)
    for row in summary["max_flip_rates"]:
        shown = "-" if row["value"] is None else f"{row['value']:.1%}"
        where = row["kind"] or "all kinds"
        verdict = "PASS" if row["passed"] else f"FAIL ({row['reason']})"
        print(f"max flip rate {where} {row['max']:.1%}: {shown} {verdict}", file=out)
    return exit_code


# --- store rejudge -------------------------------------------------------------------------------------


def add_rejudge_parser(store_actions: Any, common: Any) -> None:
    """Register ``store rejudge`` on the ``store`` command's parser."""
    rejudge = store_actions.add_parser(
        "rejudge",
        help="re-judge every judgment the store records with the judge model and prompts of now, "
        "recording the answers in the store",
    )
    common(rejudge)
    rejudge.add_argument("--model", help="the judge model (default: the configured one)")
    rejudge.add_argument("--from-model", help="only recorded judgments of this model")
    rejudge.add_argument(
        "--kind",
        help="only recorded judgments of this kind, e.g. context_precision or context_relevance[graded]",
    )
    rejudge.add_argument(
        "--concurrency", type=int, help="judge requests in flight (default: the configured concurrency)"
    )
    rejudge.add_argument(
        "--max-judge-calls",
        metavar="N",
        help="send at most N requests to the judge, or none for no cap (default: the configured cap)",
    )
    rejudge.add_argument(
        "--max-judge-tokens",
        metavar="N",
        help="send no more requests once the judge's answers used N tokens, or none for no cap "
        "(default: the configured cap)",
    )
    # Only the modes that record: a project that replays in CI still rejudges where the judge is.
    rejudge.add_argument(
        "--cache",
        choices=("readwrite", "refresh"),
        help="cache mode (default: rag_cache of the configuration, or RAGMETRICS_CACHE)",
    )


#: The spending caps ``store rejudge`` takes as options, by setting name.
_CAP_OPTIONS = {"max_judge_calls": "--max-judge-calls", "max_judge_tokens": "--max-judge-tokens"}


def _cap_option(name: str, value: Any) -> str:
    """How to set spending cap ``name`` to ``value`` on the command line (for messages)."""
    return f"{_CAP_OPTIONS[name]} {value}"


def rejudge(args: argparse.Namespace, ini: Mapping[str, Any], base: Path, out: TextIO, err: TextIO) -> int:
    """Run ``store rejudge``; returns the exit code."""
    import asyncio

    try:
        settings = _settings(args, ini, base)
        changes: dict[str, Any] = {}
        if args.model:
            changes["judge_model"] = _model(args.model)
        if args.concurrency is not None:
            if args.concurrency < 1:
                raise ConfigError(f"--concurrency must be at least 1, got {args.concurrency}")
            changes["concurrency"] = args.concurrency
        from ..settings import OPTIONS_BY_NAME

        for name, flag in _CAP_OPTIONS.items():
            given = getattr(args, name)
            if given is not None:  # empty (an unset shell variable) is refused: no cap is spelt none
                changes[name] = OPTIONS_BY_NAME[name].convert(given, flag)
        settings = settings.replace(**changes)
        kind = None
        if args.kind is not None:
            entry = K.kind_of(args.kind.strip())
            if entry is None:
                raise ConfigError(
                    f"--kind {args.kind!r} is not a judgment kind (use {kind_names()}, or "
                    "context_relevance[graded], [sentence] or [binary])"
                )
            kind = entry.name
        if settings.cache in ("replay", "off"):
            raise ConfigError(
                f"store rejudge records into the store, which cache mode {settings.cache!r} does not; "
                "give --cache readwrite (or --cache refresh)"
            )
    except ConfigError as exc:
        print(f"error: {exc}", file=err)
        return EXIT_USAGE
    model = settings.judge_model
    # One request per judgment asked for now: records of several models may rebuild to the same one.
    requests: dict[str, JudgeRequest] = {}
    where, records = recorded_judgments(settings)
    records = [
        r
        for r in records
        if (args.from_model is None or r.get("model") == args.from_model)
        and (kind is None or r.get("kind") == kind)
    ]
    rebuilt = _requests(records, model, where, err)
    for _, request, _ in rebuilt:
        requests.setdefault(request.cache_key(), request)
    unusable = len(records) - len(rebuilt)
    evaluator = _evaluator(settings)
    judge = evaluator.judge
    asked = [request for request in requests.values() if judge.lookup(request) is None]
    recorded = len(requests) - len(asked)
    failures: list[str] = []
    refused = 0

    async def judge_one(request: JudgeRequest) -> None:
        nonlocal refused
        try:
            await judge.judge(request)
        except JudgeCallCapReached:
            refused += 1  # said once below, with the cap and how to allow more
        except RagMetricsError as exc:
            failures.append(f"{request.kind} {request.cache_key()}: {exc}")

    async def judge_all() -> None:
        # Each request on its own: one that fails is counted, the others are still judged and kept.
        # The recorded ones too: the judge serves them at once and, as in a test run, records in the
        # store what only the local cache held (answers `judge drift` left there, say).
        await asyncio.gather(*(judge_one(request) for request in requests.values()))

    try:
        evaluator.runner.run(judge_all())
    finally:
        evaluator.close()
    for failure in sorted(failures):
        print(f"error: {failure}", file=err)
    if refused:
        from ..judge.budget import stopped_message

        calls, tokens = settings.max_judge_calls, settings.max_judge_tokens
        judgments = f"{refused} judgment(s) not re-judged"
        print(f"error: {stopped_message(calls, tokens, judgments, _cap_option, 'store rejudge')}", file=err)
    capped = f", {refused} refused by the spending cap" if refused else ""
    unread = f", {unusable} that cannot be asked again" if unusable else ""
    print(
        f"store rejudge: {len(asked) - len(failures) - refused} re-judged by {model}, {recorded} already "
        f"recorded, {len(failures)} failed{capped}{unread} ({len(records)} recorded judgments in "
        f"{settings.store_dir})",
        file=out,
    )
    return EXIT_FAILED if failures or refused or unusable else EXIT_OK
