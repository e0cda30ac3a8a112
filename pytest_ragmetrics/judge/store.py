"""The judgment store: recorded judge answers, one readable JSON file per request, meant to be committed.

CI replays from it without an API key. Files live at ``<dir>/<key[:2]>/<key>.json`` (sharded so no
directory grows huge), are written atomically and byte-stable (sorted keys, two-space indent, a
trailing newline), so re-recording an unchanged judgment produces no diff and a review shows exactly
what the judge said and why.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import secrets
import threading
import warnings
from pathlib import Path
from typing import Any

from .base import JudgeAnswer, JudgeRequest, schema_errors

_HEX = frozenset("0123456789abcdef")


def _is_key(name: str) -> bool:
    return len(name) == 64 and set(name) <= _HEX


def dump_stable(value: Any) -> str:
    """The one serialization used for store files: stable across runs and platforms."""
    return json.dumps(value, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def _create_temp(directory: Path, name: str) -> tuple[int, str]:
    """Create a new, empty temporary file next to ``name`` in ``directory``; returns (fd, path).

    Not :func:`tempfile.mkstemp`: that creates files readable by their owner only (0600), and store
    files are committed and shared. ``os.open`` with 0666 lets the umask decide (0644 usually), like
    any file a user creates; O_EXCL still guarantees the name is ours.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = str(directory / f".{name}.{secrets.token_hex(6)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:  # pragma: no cover - 48 random bits make a clash vanishingly rare
            continue


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so readers see the old or the new file, never half of one.

    The file gets the permissions of any new file (0666 minus the umask), not a private 0600.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_temp(path.parent, path.name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


class JudgmentStore:
    """Recorded judgments under ``directory`` (created on first write).

    Lookups take the :class:`~pytest_ragmetrics.judge.base.JudgeRequest`, so a stored answer is checked
    against the request's current schema before it is trusted; an unreadable or non-conforming file is
    treated as missing (with one warning per file), never as a crash.
    """

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self.directory = Path(directory)
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"JudgmentStore({str(self.directory)!r})"

    def path_for(self, key: str) -> Path:
        """Where the judgment with cache key ``key`` is stored."""
        return self.directory / key[:2] / f"{key}.json"

    def stamp(self, key: str) -> tuple[int, int] | None:
        """(modification time in ns, size) of the file of ``key``, or ``None`` when there is none.

        The cache keeps the stamp of the store file an answer came from or went to: a different
        stamp means the file was changed since (a reviewed edit, a checkout), and is read again.
        """
        try:
            info = self.path_for(key).stat()
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self.path_for(key).is_file()

    def __len__(self) -> int:
        return len(self.keys())

    def keys(self) -> set[str]:
        """Keys of all stored judgments."""
        if not self.directory.is_dir():
            return set()
        return {
            p.stem
            for p in self.directory.glob("??/*.json")
            if _is_key(p.stem) and p.parent.name == p.stem[:2]
        }

    def models(self) -> set[str]:
        """The judge models of the stored judgments (unreadable files are skipped)."""
        found: set[str] = set()
        for key in self.keys():
            try:
                model = json.loads(self.path_for(key).read_text(encoding="utf-8")).get("model")
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(model, str):
                found.add(model)
        return found

    def _warn(self, key: str, why: str, replay: bool | None) -> None:
        from .cache import RagMetricsWarning

        with self._lock:
            if key in self._warned:
                return
            self._warned.add(key)
        # Say what happens next: only a run that may call the judge will replace the file.
        if replay is None:
            then = "treating it as missing"
        elif replay:
            then = "replay treats the judgment as not recorded"
        else:
            then = "it will be judged again and the file rewritten"
        from ..redact import redact

        warnings.warn(
            redact(f"ignoring judgment store file {self.path_for(key)}: {why}; {then}"),
            RagMetricsWarning,
            stacklevel=3,
        )

    def read_json(self, key: str, *, replay: bool | None = None) -> dict[str, Any] | None:
        """The raw content of a store file, or ``None`` when it is missing or unreadable.

        ``replay`` only words the warning about an unreadable file (see :meth:`get`).
        """
        path = self.path_for(key)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            self._warn(key, f"cannot read it ({exc})", replay)
            return None
        try:
            data = json.loads(text)
        except ValueError as exc:
            self._warn(key, f"it is not valid JSON ({exc})", replay)
            return None
        if not isinstance(data, dict):
            self._warn(key, "it does not hold a JSON object", replay)
            return None
        return data

    def get(self, request: JudgeRequest, *, replay: bool | None = None) -> JudgeAnswer | None:
        """The stored answer to ``request`` (``source="store"``), or ``None``.

        A damaged file (unreadable, wrong JSON types, not fitting the request's schema) is ``None``
        with one warning per file. ``replay`` words that warning: ``True`` when nothing will judge
        the request again, ``False`` when the judge will, ``None`` when unknown.
        """
        key = request.cache_key()
        data = self.read_json(key, replay=replay)
        if data is None:
            return None
        if "answer" not in data:
            self._warn(key, "its answer is malformed (the file has no 'answer')", replay)
            return None
        try:
            answer = JudgeAnswer.from_json(data["answer"], source="store")
        except ValueError as exc:
            self._warn(key, f"its answer is malformed ({exc})", replay)
            return None
        if len(answer.choices) != request.n:
            self._warn(key, f"it holds {len(answer.choices)} answer(s), expected {request.n}", replay)
            return None
        if request.derived:
            # A chunk's sentences are recorded with its judgment rather than split again.
            try:
                request.provide(data.get("inputs"))
            except ValueError as exc:
                self._warn(key, f"its inputs are malformed ({exc})", replay)
                return None
            answer = dataclasses.replace(answer, derived=request.derived_inputs())
        for choice in answer.choices:
            errors = schema_errors(request.schema, choice)
            if errors:
                self._warn(key, "its answer does not conform to the schema: " + "; ".join(errors[:3]), replay)
                return None
        return answer

    def put(self, request: JudgeRequest, answer: JudgeAnswer) -> Path:
        """Record ``answer`` to ``request``; returns the file written."""
        key = request.cache_key()
        record = {
            "key": key,
            "kind": request.kind,
            "prompt_version": request.prompt_version,
            "model": request.model,
            "temperature": request.temperature,
            "seed": request.seed,
            "n": request.n,
            "inputs": request.inputs,
            "schema_name": request.schema_name,
            "answer": answer.to_json(),
        }
        path = self.path_for(key)
        atomic_write_text(path, dump_stable(record))
        return path

    def delete(self, key: str) -> bool:
        """Remove one stored judgment (and its shard directory when that becomes empty)."""
        path = self.path_for(key)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        # Fails while other judgments share the shard directory; that is fine.
        with contextlib.suppress(OSError):
            path.parent.rmdir()
        return True

    def prune(self, keep: set[str], *, dry_run: bool = False) -> list[str]:
        """Delete stored judgments whose key is not in ``keep``; returns the removed keys, sorted."""
        removed = sorted(self.keys() - set(keep))
        if not dry_run:
            for key in removed:
                self.delete(key)
        return removed
