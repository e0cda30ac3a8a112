"""Golden-set files: :func:`load_samples` reads ``.jsonl``, ``.json`` and ``.csv`` files into samples,
naming file, line or item, and field for every problem; :func:`marker_samples` finds the file a
``@pytest.mark.ragmetrics(samples=PATH)`` marker names.

Field names follow :mod:`~pytest_ragmetrics.fields` (ours, RAGAS and NVIDIA-style aliases).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import csv
import functools
import io
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeAlias

from ._files import RepeatedName, json_type, unique_names
from .errors import RagMetricsError
from .fields import (
    _KNOWN_KEYS,
    _LIST_KEYS,
    FIELD_ALIASES,
    _FieldError,
    _Layout,
    _preview,
    _resolve,
    sample_kwargs,
    split_retrieved,
)
from .sample import RagSample

__all__ = [
    "FIELD_ALIASES",
    "SUPPORTED_EXTENSIONS",
    "SampleLoadError",
    "load_marker_samples",
    "load_samples",
    "marker_samples_path",
    "sample_kwargs",
    "split_retrieved",
]

#: File extensions :func:`load_samples` reads.
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".jsonl", ".json", ".csv")

#: A JSON value's type as the messages about golden-set files name it: an array is "a list".
_json_type = functools.partial(json_type, array="a list")


class SampleLoadError(RagMetricsError, ValueError):
    """A golden-set file cannot be loaded; the message names the file, the line or item, and the field.

    ``file`` is the file name, ``line`` the 1-based line (``.jsonl``, ``.csv``, or a JSON syntax error),
    ``index`` the 0-based item index (``.json``), ``field`` the offending key when there is one.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str,
        line: int | None = None,
        index: int | None = None,
        field: str | None = None,
    ) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.index = index
        self.field = field


# --------------------------------------------------------------------------------------------- files


def load_samples(path: str | os.PathLike[str]) -> list[RagSample]:
    """Load a golden set from a ``.jsonl``, ``.json`` or ``.csv`` file (UTF-8, a BOM is tolerated).

    * ``.jsonl``: one JSON object per line; blank lines are skipped, and a BOM at the start of any
      line (files joined together) is tolerated.
    * ``.json``: a list of objects, or an object whose ``"samples"`` key holds that list.
    * ``.csv``: a header row, then one sample per row. The contexts column holds a JSON array of
      strings (``["chunk one", "chunk two"]``), as does ``ground_truths``; ``metadata`` holds a JSON
      object. Other cells are strings, except that a cell of an unknown column holding a valid JSON
      array or object is decoded. Empty cells count as absent.

    Fields are named as :meth:`RagSample.from_dict` accepts. Every sample gets a stable id: its own
    ``id``, else ``<file name>:<line>`` (1-based line where the object or row starts) for ``.jsonl``
    and ``.csv``, and ``<file name>#<index>`` (0-based position in the list, unaffected by
    reformatting) for ``.json``. Ids must be unique within the file.

    Raises :class:`SampleLoadError` (a ``ValueError``) naming the file, line or item, and field (also
    for a file without any sample, a file in UTF-16, and for text that is not valid Unicode: a lone
    surrogate escape such as ``"\\ud800"``); ``OSError`` when the file cannot be read.
    """
    path = Path(path)
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        raise SampleLoadError(
            f"{name}: unsupported file type {path.suffix or '(no extension)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}",
            file=name,
        )
    text = read_text(path, name)
    if suffix == ".jsonl":
        records = jsonl_records(text, name)
    elif suffix == ".json":
        records = _json_records(text, name)
    else:
        records = _csv_records(text, name)

    samples: list[RagSample] = []
    seen: dict[str, str] = {}
    layouts: dict[tuple[Any, ...], _Layout] = {}  # a file's records share their keys
    for where, default_id, line, index, data in records:
        try:
            kwargs = _resolve(data, default_id, layouts)
            sample = RagSample(**kwargs)
        except _FieldError as exc:
            raise SampleLoadError(
                f"{where}: {exc}", file=name, line=line, index=index, field=exc.field
            ) from None
        except (TypeError, ValueError) as exc:  # RagSample's own checks, as a backstop
            field = getattr(exc, "field", None)
            raise SampleLoadError(f"{where}: {exc}", file=name, line=line, index=index, field=field) from None
        sample_id = sample.id if sample.id is not None else default_id
        if sample_id in seen:
            raise SampleLoadError(
                f"{where}: duplicate id {sample_id!r}, already used by {seen[sample_id]}",
                file=name,
                line=line,
                index=index,
                field="id",
            )
        seen[sample_id] = where.removeprefix(f"{name}, ")
        samples.append(sample)
    if not samples:
        # An empty golden set would parametrize nothing and every gate would go unchecked.
        raise SampleLoadError(f"{name}: no samples (the file is empty or holds only blank lines)", file=name)
    return samples


def marker_samples_path(name: str | os.PathLike[str], test_file: Path, root: Path) -> Path:
    """The file a ``@pytest.mark.ragmetrics(samples=name)`` marker on a test of ``test_file`` names:
    a relative ``name`` is looked up beside the test file first, then under the rootdir ``root``."""
    path = Path(name)
    if not path.is_absolute():
        beside = test_file.parent / path
        path = beside if beside.exists() else root / path
    return path


def load_marker_samples(name: str | os.PathLike[str], path: Path) -> list[RagSample]:
    """The golden set a ``@pytest.mark.ragmetrics(samples=name)`` marker names, in file order, from
    ``path`` (:func:`marker_samples_path`).

    Raises ``ValueError`` naming the marker and what is wrong (no such file, or a
    :class:`SampleLoadError`).
    """
    where = f"@pytest.mark.ragmetrics(samples={str(name)!r})"
    try:
        return load_samples(path)
    except FileNotFoundError:
        raise ValueError(f"{where}: no such file: {path}") from None
    except (OSError, ValueError) as exc:
        raise ValueError(f"{where}: {exc}") from None


# (location for messages, default id, line, index, data)
_Record: TypeAlias = "tuple[str, str, int | None, int | None, Any]"


def read_text(path: Path, name: str) -> str:
    """The text of the file at ``path`` (called ``name`` in messages), read as UTF-8: a file that is
    not a regular one, or not UTF-8 text (UTF-16, as PowerShell writes it), is a
    :class:`SampleLoadError` saying what to do. The labelled set is read the same way."""
    if path.exists() and not path.is_file():  # a FIFO would wait for a writer, /dev/zero never end
        raise SampleLoadError(f"{name}: not a regular file (a directory, a pipe or a device)", file=name)
    data = path.read_bytes()
    # UTF-16, as PowerShell's `>` and Excel's "Unicode Text" write a file: with a byte order mark, or
    # without one a NUL byte beside each ASCII character (valid UTF-8, read as nonsense).
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        why = "is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8"
        raise SampleLoadError(f"{name}: the file {why}; save it as UTF-8", file=name)
    if b"\x00" in data[:2]:
        why = "starts with a NUL byte: UTF-16 text without a byte order mark, or no text at all"
        raise SampleLoadError(f"{name}: the file {why}; save it as UTF-8 text", file=name)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SampleLoadError(
            f"{name}, line {line}: not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start}); "
            "save the file as UTF-8",
            file=name,
            line=line,
        ) from None


class _Repeats(dict):  # type: ignore[type-arg]  # Any values, as JSON's
    """A JSON object that gave :attr:`name` twice, only made to find which field holds it."""

    name = ""


def _marked(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    try:
        return unique_names(pairs)
    except RepeatedName as exc:
        repeats = _Repeats(pairs)
        repeats.name = exc.name
        return repeats


def _repeated_within(value: Any) -> str | None:
    """The name an object in ``value`` (a field's JSON value) gives twice, if any."""
    if isinstance(value, _Repeats):
        return value.name
    inner = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((name for item in inner if (name := _repeated_within(item)) is not None), None)


def _repeated(record: dict[str, Any], where: str, **at: Any) -> SampleLoadError | None:
    """The error naming the field of ``record`` (decoded by :data:`_MARKING`) that holds a name given
    twice: the field itself, or a name inside its value (``metadata``, graded reference ids)."""
    if isinstance(record, _Repeats):
        return SampleLoadError(f"{where}: field {record.name!r} is given twice", field=record.name, **at)
    for field, value in record.items():
        name = _repeated_within(value)
        if name is not None:
            return SampleLoadError(
                f"{where}: field {field!r}: its JSON gives {name!r} twice", field=field, **at
            )
    return None


_DECODER = json.JSONDecoder(object_pairs_hook=unique_names)
#: Read again with it only when :data:`_DECODER` found a name given twice, to say where it is.
_MARKING = json.JSONDecoder(object_pairs_hook=_marked)
#: A CSV cell's JSON: strict=False, as a chunk typed into a spreadsheet cell may hold raw line breaks.
_CELL_DECODER = json.JSONDecoder(object_pairs_hook=unique_names, strict=False)


def jsonl_records(text: str, name: str) -> Iterator[_Record]:
    """The records of a JSON Lines ``text`` (the file ``name``), one a non-blank line, each with where
    it stands; a line that is not a JSON object is a :class:`SampleLoadError` naming it. The labelled
    set is read the same way."""
    # split("\n"), not splitlines(): editors and `sed -n 3p` count only \n (and \r\n) as line breaks.
    for number, raw in enumerate(text.split("\n"), start=1):
        # A byte order mark begins any line of files joined together (`cat a.jsonl b.jsonl`): it is
        # no part of the JSON, as the judgment store reads it.
        raw = raw.removeprefix("\ufeff")
        if not raw.strip():
            continue
        where = f"{name}, line {number}"
        try:
            data = _DECODER.decode(raw)
        except json.JSONDecodeError as exc:
            raise SampleLoadError(
                f"{where}: invalid JSON: {exc.msg} (column {exc.colno})", file=name, line=number
            ) from None
        except RepeatedName as exc:
            record = _MARKING.decode(raw)
            error = _repeated(record, where, file=name, line=number) if isinstance(record, dict) else None
            raise error or SampleLoadError(
                f"{where}: {exc.name!r} is given twice in one object", file=name, line=number
            ) from None
        except RecursionError:
            raise SampleLoadError(f"{where}: the JSON is nested too deeply", file=name, line=number) from None
        except ValueError as exc:  # a number of more than 4,300 digits
            raise SampleLoadError(f"{where}: invalid JSON: {exc}", file=name, line=number) from None
        if not isinstance(data, dict):
            raise SampleLoadError(
                f"{where}: expected a JSON object, got {_json_type(data)}", file=name, line=number
            )
        yield where, f"{name}:{number}", number, None, data


def _json_records(text: str, name: str) -> Iterator[_Record]:
    try:
        doc = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        message = f"{name}, line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        raise SampleLoadError(message, file=name, line=exc.lineno) from None
    except RepeatedName as exc:
        doc = _MARKING.decode(text)
        items = doc.get("samples") if isinstance(doc, dict) else doc
        for index, data in enumerate(items if isinstance(items, list) else ()):
            if isinstance(data, dict) and (
                error := _repeated(data, f"{name}, item #{index}", file=name, index=index)
            ):
                raise error from None
        raise SampleLoadError(f"{name}: {exc.name!r} is given twice in one object", file=name) from None
    except RecursionError:
        raise SampleLoadError(f"{name}: the JSON is nested too deeply", file=name) from None
    except ValueError as exc:  # a number of more than 4,300 digits
        raise SampleLoadError(f"{name}: invalid JSON: {exc}", file=name) from None
    items = doc.get("samples") if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        got = "an object without a 'samples' list" if isinstance(doc, dict) else _json_type(doc)
        raise SampleLoadError(
            f"{name}: expected a JSON list of sample objects, or an object with a 'samples' list; got {got}",
            file=name,
        )
    for index, data in enumerate(items):
        where = f"{name}, item #{index}"
        if not isinstance(data, dict):
            raise SampleLoadError(
                f"{where}: expected a JSON object, got {_json_type(data)}", file=name, index=index
            )
        yield where, f"{name}#{index}", None, index, data


def _csv_records(text: str, name: str) -> Iterator[_Record]:
    # The csv module refuses a field over 128 KB by default; a long chunk is still a chunk. No field
    # can be longer than the file, which is in memory already.
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        columns = [column.strip() for column in header]
        separator = next((c for c in (";", "\t") if len(columns) == 1 and c in columns[0]), None)
        if separator is not None:  # as a spreadsheet set to a European locale saves "CSV"
            raise SampleLoadError(
                f"{name}, line 1: the header is one column, {columns[0][:60]!r}: its cells are separated "
                f"by {separator!r}, not by commas; save the file as comma-separated CSV",
                file=name,
                line=1,
            )
        duplicates = sorted({column for column in columns if columns.count(column) > 1})
        if duplicates:
            raise SampleLoadError(
                f"{name}, line 1: duplicate column(s) {', '.join(map(repr, duplicates))}", file=name, line=1
            )
        while True:
            number = reader.line_num + 1  # the line this row starts on
            row = next(reader, None)
            if row is None:
                return
            if not any(cell.strip() for cell in row):
                continue
            where = f"{name}, line {number}"
            if len(row) != len(columns):
                raise SampleLoadError(
                    f"{where}: expected {len(columns)} cells (as in the header), got {len(row)}",
                    file=name,
                    line=number,
                )
            data: dict[str, Any] = {}
            for column, cell in zip(columns, row, strict=True):
                if cell == "":
                    continue
                data[column] = _csv_cell(column, cell, where, name, number)
            yield where, f"{name}:{number}", number, None, data
    except csv.Error as exc:
        line = reader.line_num
        raise SampleLoadError(f"{name}, line {line}: malformed CSV: {exc}", file=name, line=line) from None


def _csv_cell(column: str, cell: str, where: str, name: str, line: int) -> Any:
    if column in FIELD_ALIASES["reference_context_ids"]:
        try:
            return _CELL_DECODER.decode(cell)
        except RepeatedName as exc:
            raise _repeated_in_cell(exc, column, where, name, line) from None
        except (ValueError, RecursionError):
            raise SampleLoadError(
                f"{where}: field {column!r}: expected a JSON array of ids or a JSON object id -> grade, "
                f"got {_preview(cell)}",
                file=name,
                line=line,
                field=column,
            ) from None
    if column in _LIST_KEYS or column == "metadata":
        expected = "a JSON object" if column == "metadata" else "a JSON array of strings"
        try:
            value = _CELL_DECODER.decode(cell)
        except RepeatedName as exc:
            raise _repeated_in_cell(exc, column, where, name, line) from None
        except (ValueError, RecursionError):
            raise SampleLoadError(
                f"{where}: field {column!r}: expected {expected}, got {_preview(cell)}",
                file=name,
                line=line,
                field=column,
            ) from None
        if not isinstance(value, dict if column == "metadata" else list):
            raise SampleLoadError(
                f"{where}: field {column!r}: expected {expected}, got {_json_type(value)}: {_preview(cell)}",
                file=name,
                line=line,
                field=column,
            )
        return value
    if column not in _KNOWN_KEYS and cell.lstrip()[:1] in ("[", "{"):
        try:
            return _CELL_DECODER.decode(cell)
        except (ValueError, RecursionError):  # a name given twice too: the cell is kept as its text
            return cell
    return cell


def _repeated_in_cell(exc: RepeatedName, column: str, where: str, name: str, line: int) -> SampleLoadError:
    return SampleLoadError(
        f"{where}: field {column!r}: its JSON gives {exc.name!r} twice", file=name, line=line, field=column
    )
