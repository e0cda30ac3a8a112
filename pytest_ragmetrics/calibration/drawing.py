"""Which samples to label: a seeded uniform sample of a golden set, and the record of how it was drawn.

A judge-corrected mean (:func:`pytest_ragmetrics.stats.corrected_mean`) is honest only when the
labelled samples are a uniform random sample of the samples the judge scored: labelling the samples
the judge got wrong, or the easy ones, moves the estimate by exactly that choice.
``python -m pytest_ragmetrics labels sample --n 50 --seed 1 golden.jsonl`` draws the ids to label and
writes how they were drawn to ``labels.sample.json``; kept beside the labelled set and named after it
(``labels.jsonl`` -> ``labels.sample.json``), the run reads it and warns when the samples with labels
are not the drawn ones.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from .._files import json_type, replaceable, starts_json_object, write_text_atomic

__all__ = [
    "COMMAND",
    "draw_ids",
    "draw_record",
    "draw_warnings",
    "golden_changed",
    "read_draw",
    "record_path",
]

#: The command that draws a labelling sample, as messages name it.
COMMAND = "python -m pytest_ragmetrics labels sample"

#: How the ids are drawn, recorded with them.
METHOD = "uniform without replacement: random.Random(seed).sample of the golden set's ids in file order"


def draw_ids(ids: Sequence[str], n: int, seed: int) -> list[str]:
    """``n`` of ``ids`` drawn uniformly without replacement with ``random.Random(seed)``, in file order."""
    if n < 1:
        raise ValueError(f"--n must be at least 1, got {n}")
    if n > len(ids):
        raise ValueError(f"--n {n} is more than the {len(ids)} samples of the golden set")
    chosen = set(random.Random(seed).sample(range(len(ids)), n))
    return [sample_id for i, sample_id in enumerate(ids) if i in chosen]


def draw_record(golden: Path, shown: str, ids: Sequence[str], n: int, seed: int) -> dict[str, Any]:
    """The record of a draw: the golden set (name and sha256), its size, n, the seed, the method, the ids."""
    return {
        "drawn_by": f"{COMMAND} --n {n} --seed {seed} {shown}",
        "golden": shown,
        "golden_sha256": hashlib.sha256(golden.read_bytes()).hexdigest(),
        "population": len(ids),
        "n": n,
        "seed": seed,
        "method": METHOD,
        "ids": draw_ids(ids, n, seed),
    }


def record_path(labels: str | Path) -> Path:
    """Where the record of the labelled set ``labels`` is kept: ``labels.jsonl`` -> ``labels.sample.json``."""
    path = Path(labels)
    return path.with_name(f"{path.stem}.sample.json")


def _not_a_record(data: Any) -> str:
    """What keeps ``data`` from being a draw record (its list of sample ids), or ""."""
    if not isinstance(data, dict):
        return f"it is {json_type(data, array='a list')}, not an object"
    if "ids" not in data:
        return "it has no 'ids'"
    ids = data["ids"]
    if not isinstance(ids, list):
        return f"'ids' is {json_type(ids, array='a list')}, not a list of sample ids"
    for n, item in enumerate(ids, start=1):
        if not isinstance(item, str):
            return f"'ids' item {n} is {json_type(item, array='a list', show_number=True)}, not a sample id"
    return ""


def read_draw(path: Path) -> Mapping[str, Any]:
    """A draw record; ``ValueError`` naming the file when it is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as exc:  # RecursionError: JSON nested too deeply
        raise ValueError(f"{path.name}: cannot read the labelling sample's record: {exc}") from None
    why = _not_a_record(data)
    if why:
        raise ValueError(f"{path.name}: not a record written by {COMMAND} ({why})")
    return data  # type: ignore[no-any-return]


def golden_changed(record: Mapping[str, Any], where: Path, root: Path) -> str | None:
    """Why the golden set the draw record at ``where`` names is no longer the file it was drawn
    from (its ``golden_sha256`` differs, or it is not found), or ``None``. A relative name is looked
    for under ``root`` (the run's root directory) and then beside the record; then, as the draw
    records the path as it was typed (absolute, or from another directory, on another machine), its
    file name alone in both. A file only checked out with other line ends (git's ``autocrlf``) is
    the same file."""
    golden, recorded = record.get("golden"), record.get("golden_sha256")
    if not isinstance(golden, str) or not isinstance(recorded, str):
        return None  # nothing recorded to check against
    named = Path(golden)
    candidates = [named] if named.is_absolute() else [root / named, where.parent / named]
    candidates += [path for path in (root / named.name, where.parent / named.name) if path not in candidates]
    found = next((path for path in candidates if _is_file(path)), None)
    if found is None:
        return (
            f"the golden set {golden} that {where.name} was drawn from is not found (looked in "
            f"{', '.join(dict.fromkeys(str(path.parent) for path in candidates))}): the drawn samples cannot "
            f"be checked against it; set its 'golden' in {where.name} to its path from the root directory"
        )
    try:
        data = found.read_bytes()
    except OSError as exc:
        return f"cannot read the golden set {golden} that {where.name} was drawn from: {exc.strerror or exc}"
    lf = data.replace(b"\r\n", b"\n")
    if recorded in {hashlib.sha256(text).hexdigest() for text in (data, lf, lf.replace(b"\n", b"\r\n"))}:
        return None
    return (
        f"the golden set {golden} changed since {where.name} was drawn from it (sha256 "
        f"{hashlib.sha256(data).hexdigest()[:12]}…, {where.name} records {recorded[:12]}…): the labelled "
        f"samples may no longer be a uniform sample of it; draw again with {COMMAND} and label what it draws"
    )


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file; a name the file system refuses (longer than it allows, in a record
    edited by hand) is none, where ``Path.is_file`` raises."""
    try:
        return path.is_file()
    except OSError:
        return False


def _listed(ids: Iterable[str], limit: int = 5) -> str:
    ordered = sorted(ids)
    return ", ".join(ordered[:limit]) + (f" and {len(ordered) - limit} more" if len(ordered) > limit else "")


def draw_warnings(
    labelled: Mapping[Any, Iterable[str]],
    scored: Mapping[Any, Iterable[str]],
    record: Mapping[str, Any] | None,
    source: str,
    problem: str | None = None,
) -> list[str]:
    """Why the labelled samples may not be a uniform sample, one message each (none when they are).

    ``labelled`` maps a metric to the ids of its samples with a labelled score, ``scored`` to the ids
    of every sample it scored; ``record`` is the draw record found beside the labelled set ``source``
    (None: there is none; ``problem``: it could not be read).
    """
    ids = {i for group in labelled.values() for i in group}
    if not ids:
        return []
    where = record_path(source).name
    if problem is not None:
        return [f"{problem}; the corrected means assume the labelled samples are a uniform random sample"]
    if record is None:
        return [
            f"the {len(ids)} labelled samples of {source} were not drawn by {COMMAND} (no {where}): the "
            "corrected means assume they are a uniform random sample of the samples scored; draw the "
            f"samples to label with {COMMAND} --n N --seed S GOLDEN --out {where}"
        ]
    drawn = set(record["ids"])
    messages = []
    outside = ids - drawn
    if outside:
        messages.append(
            f"{len(outside)} labelled samples were not drawn ({_listed(outside)}; {where} lists the "
            "drawn ones): labels chosen by hand can move the corrected means by that choice"
        )
    missing = {
        i for metric, group in labelled.items() for i in (drawn & set(scored.get(metric, ()))) - set(group)
    }
    if missing:
        messages.append(
            f"{len(missing)} drawn samples the run scored have no labelled score for every judged metric "
            f"({_listed(missing)}): label every judgment of them in {source}, or the labelled samples are "
            "no longer the uniform sample drawn"
        )
    return messages


# --- the command ---------------------------------------------------------------------------------


def add_parser(commands: Any) -> None:
    """``labels sample``: draw a seeded uniform sample of a golden set's ids to label."""
    labels = commands.add_parser("labels", help="choose what to label for the judge-corrected means")
    actions = labels.add_subparsers(dest="action", metavar="ACTION", required=True)
    sample = actions.add_parser(
        "sample",
        help="draw a seeded uniform sample of a golden set's sample ids to label",
        description="Draw N sample ids of GOLDEN uniformly at random (seeded), print them and record "
        "how they were drawn. Keep the record beside the labelled set, named after it (labels.jsonl -> "
        "labels.sample.json): the run then warns when the labelled samples are not the drawn ones.",
    )
    sample.add_argument("golden", type=Path, metavar="GOLDEN", help="the golden set (.jsonl, .json or .csv)")
    sample.add_argument("--n", type=int, required=True, help="how many samples to draw")
    sample.add_argument("--seed", type=int, required=True, help="the seed of the draw (any integer)")
    sample.add_argument(
        "--out",
        type=Path,
        default=Path("labels.sample.json"),
        help="where to write the record (default labels.sample.json in the current directory); keep it "
        "beside the labelled set, named after it",
    )


#: The names of a draw record (see :func:`draw_record`): the first one written, whatever the order.
_RECORD_NAMES = frozenset({"drawn_by", "golden", "golden_sha256", "population", "n", "seed", "method", "ids"})


def _record(head: bytes) -> bool:
    return starts_json_object(head, _RECORD_NAMES)


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ``labels sample``; 0 on success, 4 (a usage error) for a golden set or ``--n`` it cannot use."""
    from ..loaders import load_samples

    try:
        samples = load_samples(args.golden)
        ids = [str(s.id) for s in samples]
        record = draw_record(args.golden, str(args.golden), ids, args.n, args.seed)
    except (OSError, ValueError) as exc:
        print(f"error: labels sample: {exc}", file=err)
        return 4  # a usage error, as pytest's exit code 4
    if not replaceable(args.out, _record):
        print(
            f"error: labels sample: {args.out} exists and is not a record written by {COMMAND}; it is left "
            "alone: choose another --out (or delete the file if it should be replaced)",
            file=err,
        )
        return 4
    text = json.dumps(record, indent=2, ensure_ascii=False) + "\n"
    try:
        write_text_atomic(args.out, text)
    except OSError as exc:
        print(f"error: labels sample: cannot write {args.out}: {exc}", file=err)
        return 4
    print(
        f"drew {record['n']} of the {record['population']} samples of {args.golden} (seed {args.seed}); "
        f"wrote {args.out}",
        file=out,
    )
    for sample_id in record["ids"]:
        print(sample_id, file=out)
    if args.out.name.endswith(".sample.json"):
        where = f"kept beside {args.out.name} as {args.out.name.removesuffix('.sample.json')}.jsonl"
    else:  # the run looks for the record of LABELS.jsonl at LABELS.sample.json only
        where = (
            "and keep this record beside it as <labelled set>.sample.json "
            f"(a run never reads {args.out.name}; for labels.jsonl it reads labels.sample.json)"
        )
    print(
        "label every judgment of these samples (each chunk, each reference sentence) in the labelled set, "
        + where,
        file=out,
    )
    return 0
