"""What the last test run that used the judge says about the judgment store: the entries it did not
use, or why it cannot tell, in a file of the cache directory that ``cache prune`` reads.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, NamedTuple

from .._files import write_text_atomic
from .base import utc_now

#: File in the cache directory: the store entries the last run did not use, or why it cannot tell
#: (for ``prune``). Named apart from the older record of used keys, which ``prune`` must not read.
LAST_RUN_FILE = "last_run.json"


class LastRun(NamedTuple):
    """What the last test run that used the judge says about the judgment store (see
    :func:`write_last_run`)."""

    #: Store entries the run did not use, when it covered the whole suite; else None.
    unused: frozenset[str] | None
    #: Why the run cannot tell which entries are unused (None when it can).
    reason: str | None
    #: Entries the run did not use and kept all the same, and why (skipped tests may need them).
    kept: int = 0
    kept_for: str | None = None
    #: Whether the record could not be read (``reason`` says why).
    damaged: bool = False


def write_last_run(
    cache_dir: str | os.PathLike[str],
    *,
    unused: Iterable[str] | None,
    reason: str | None,
    kept: int = 0,
    kept_for: str | None = None,
) -> Path:
    """Record, for ``python -m pytest_ragmetrics cache prune``, the store entries a run that covered
    the whole suite did not use (``unused``), or why the run cannot tell (``reason``); with ``kept``,
    how many more it did not use but keeps for its skipped tests, and why (``kept_for``)."""
    path = Path(cache_dir) / LAST_RUN_FILE
    record: dict[str, Any] = {"finished_at": utc_now()}
    if reason is not None or unused is None:
        record["reason"] = reason or "unknown"
    else:
        record["unused"] = sorted(set(unused))
        if kept:
            record["kept"] = {"entries": kept, "for": kept_for or "skipped tests"}
    write_text_atomic(path, json.dumps(record, indent=1) + "\n")
    return path


def read_last_run(cache_dir: str | os.PathLike[str]) -> LastRun | None:
    """The record written by :func:`write_last_run`; ``None`` when there is none. A record that
    cannot be used (not JSON, a field of the wrong type) is a :class:`LastRun` that cannot tell which
    entries are unused, ``damaged``, its ``reason`` naming the file and the field."""
    path = Path(cache_dir) / LAST_RUN_FILE
    if not path.exists():
        return None

    def damaged(why: str) -> LastRun:
        return LastRun(None, f"{path} is damaged: {why}", damaged=True)

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        return damaged(exc.strerror or type(exc).__name__)
    except RecursionError:
        return damaged("it is nested too deeply to read")
    except ValueError as exc:
        return damaged(f"it is not JSON ({exc})")
    if not isinstance(data, dict):
        return damaged("it is not a JSON object")
    reason, unused = data.get("reason"), data.get("unused")
    if isinstance(reason, str):
        return LastRun(None, reason)
    if unused is None:
        return damaged("it records neither the unused entries nor a reason (written by an older version?)")
    if not isinstance(unused, list) or not all(isinstance(k, str) for k in unused):
        return damaged("unused is not a list of store keys")
    kept = data.get("kept")
    if kept is None:
        return LastRun(frozenset(unused), None)
    entries = kept.get("entries") if isinstance(kept, dict) else None
    if (
        not isinstance(entries, int)
        or isinstance(entries, bool)
        or entries < 0
        or not isinstance(kept.get("for"), str)
    ):
        return damaged('kept is not {"entries": <a count>, "for": <why>}')
    return LastRun(frozenset(unused), None, entries, kept["for"])
