"""Field aliases for :meth:`RagSample.from_dict`, and :func:`load_samples` for golden-set files.

Accepted field names (first one is ours):

==============  =====================================================================
question        ``question``, ``user_input`` (RAGAS), ``userInput`` (NVIDIA-style)
contexts        ``contexts``, ``retrieved_contexts`` (RAGAS), ``retrievedContexts``
ground_truth    ``ground_truth``, ``reference`` (RAGAS, NVIDIA-style), ``ground_truths``
answer          ``answer``, ``response`` (RAGAS, NVIDIA-style)
context_ids     ``context_ids``, ``retrieved_context_ids`` (RAGAS)
reference_...   ``reference_context_ids``, ``reference_contexts`` (RAGAS names)
id, metadata    ``id``, ``metadata``
==============  =====================================================================

Retrieved contexts may also be given as objects holding a text and an id, as LangChain and
LlamaIndex hold them: ``{"page_content": ..., "metadata": {"id": ...}}`` or ``{"text": ..., "id": ...}``
(see :func:`split_retrieved`); their ids become ``context_ids``.

``ground_truths`` is the list form of old RAGAS datasets: its first item becomes the ground truth, and
when it holds more than one, the whole list is also kept in ``metadata["ground_truths"]`` so nothing is
silently dropped. A ``None`` value counts as absent. Two names for the same field with different
values are an error; any other key is kept in ``metadata``.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

from .errors import RagMetricsError

if TYPE_CHECKING:  # pragma: no cover
    from .sample import RagSample

__all__ = [
    "FIELD_ALIASES",
    "SUPPORTED_EXTENSIONS",
    "SampleLoadError",
    "load_samples",
    "sample_kwargs",
    "split_retrieved",
]

#: Our field name -> every key accepted for it, ours first.
FIELD_ALIASES: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "question": ("question", "user_input", "userInput"),
        "contexts": ("contexts", "retrieved_contexts", "retrievedContexts"),
        "ground_truth": ("ground_truth", "reference", "ground_truths"),
        "answer": ("answer", "response"),
        "context_ids": ("context_ids", "retrieved_context_ids"),
        "reference_context_ids": ("reference_context_ids",),
        "reference_contexts": ("reference_contexts",),
        "id": ("id",),
        "metadata": ("metadata",),
    }
)

#: File extensions :func:`load_samples` reads.
SUPPORTED_EXTENSIONS: tuple[str, ...] = (".jsonl", ".json", ".csv")

_KNOWN_KEYS = frozenset(key for names in FIELD_ALIASES.values() for key in names)
_LIST_KEYS = frozenset(
    {*FIELD_ALIASES["contexts"], *FIELD_ALIASES["context_ids"], "ground_truths", "reference_contexts"}
)


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


class _FieldError(ValueError):
    """An invalid field value; converted to ``TypeError``/``ValueError`` or :class:`SampleLoadError`."""

    def __init__(self, message: str, field: str | None, kind: type[Exception]) -> None:
        super().__init__(message)
        self.field = field
        self.kind = kind


def _preview(value: Any, limit: int = 60) -> str:
    """``str 'Paris is…'``: the type and a shortened repr, for error messages."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 1] + "\u2026"
    return f"{type(value).__name__} {text}"


def _pick(data: Mapping[Any, Any], field: str) -> tuple[str, Any] | None:
    """The (key, value) giving ``field``, or None; two keys with different values are an error."""
    found: tuple[str, Any] | None = None
    for key in FIELD_ALIASES[field]:
        value = data.get(key)
        if value is None:
            continue
        if key == "ground_truths":
            value = _first_ground_truth(value)
            if value is None:
                continue
        if found is not None and not _same(found[1], value):
            raise _FieldError(
                f"fields {found[0]!r} and {key!r} both give the {field} but differ: "
                f"{_preview(found[1])} vs {_preview(value)}; keep only one",
                key,
                ValueError,
            )
        if found is None:
            found = (key, value)
    return found


def _same(a: Any, b: Any) -> bool:
    # A list and a tuple of the same chunks are the same contexts.
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return tuple(a) == tuple(b)
    return bool(a == b)


def _first_ground_truth(value: Any) -> Any:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        message = f"field 'ground_truths': expected a list of str, got {_preview(value)}"
        raise _FieldError(message, "ground_truths", TypeError)
    if not value:
        return None
    if not isinstance(value[0], str):
        message = f"field 'ground_truths': item 0 must be a str, got {_preview(value[0])}"
        raise _FieldError(message, "ground_truths", TypeError)
    return value[0]


def _resolve(data: Any, default_id: str | None) -> dict[str, Any]:
    if not isinstance(data, Mapping):
        raise _FieldError(f"expected a mapping (dict) for a sample, got {_preview(data)}", None, TypeError)
    kwargs: dict[str, Any] = {}
    picked = _pick(data, "question")
    if picked is None:
        names = ", ".join(repr(name) for name in FIELD_ALIASES["question"])
        raise _FieldError(f"missing field 'question' (accepted names: {names})", "question", ValueError)
    kwargs["question"] = _check("question", *picked)
    for field in ("ground_truth", "answer", "id", "context_ids", "reference_contexts"):
        picked = _pick(data, field)
        if picked is not None:
            kwargs[field] = _check(field, *picked)
    picked = _pick(data, "contexts")
    # A golden set usually holds questions and references only: the retriever under test
    # supplies the contexts (``sample.with_contexts(retrieve(sample.question))``).
    kwargs["contexts"], carried = _split(picked[1], picked[0]) if picked is not None else ((), None)
    if picked is not None and carried is not None:
        given = _pick(data, "context_ids")
        if given is not None and kwargs["context_ids"] != carried:
            raise _FieldError(
                f"fields {picked[0]!r} and {given[0]!r} both give the context ids but differ: "
                f"{_preview(list(carried))} vs {_preview(given[1])}; keep only one",
                given[0],
                ValueError,
            )
        kwargs["context_ids"] = carried
    picked = _pick(data, "reference_context_ids")
    if picked is not None:
        kwargs["reference_context_ids"] = _check_grades(*picked)
    if kwargs.get("id") is None and default_id is not None:
        kwargs["id"] = default_id

    explicit = data.get("metadata")
    if explicit is not None and not isinstance(explicit, Mapping):
        message = f"field 'metadata': expected a mapping, got {_preview(explicit)}"
        raise _FieldError(message, "metadata", TypeError)
    metadata: dict[Any, Any] = {key: value for key, value in data.items() if key not in _KNOWN_KEYS}
    ground_truths = data.get("ground_truths")
    if isinstance(ground_truths, (list, tuple)) and len(ground_truths) > 1:
        metadata["ground_truths"] = list(ground_truths)
    for key, value in (explicit or {}).items():
        if key in metadata and metadata[key] != value:
            raise _FieldError(
                f"field {key!r} is given both as a key and in 'metadata', with different values: "
                f"{_preview(metadata[key])} vs {_preview(value)}",
                key,
                ValueError,
            )
        metadata[key] = value
    kwargs["metadata"] = metadata
    return kwargs


def _check(field: str, key: str, value: Any) -> Any:
    """Validate one resolved value, naming the key the user wrote."""
    if field == "question":
        if not isinstance(value, str):
            raise _FieldError(f"field {key!r}: expected a str, got {_preview(value)}", key, TypeError)
        from .sample import _invisible

        if _invisible(value):
            message = f"field {key!r}: expected a non-empty str, got {_preview(value)}"
            raise _FieldError(message, key, ValueError)
        return value
    if field in ("context_ids", "reference_contexts"):
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise _FieldError(f"field {key!r}: expected a list of str, got {_preview(value)}", key, TypeError)
        for i, item in enumerate(value):
            if not isinstance(item, str):
                hint = "; write ids as strings" if field == "context_ids" and isinstance(item, int) else ""
                raise _FieldError(
                    f"field {key!r}: item {i} must be a str, got {_preview(item)}{hint}", key, TypeError
                )
        return tuple(value)
    if field == "id":
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        if not isinstance(value, str):
            raise _FieldError(f"field {key!r}: expected a str or int, got {_preview(value)}", key, TypeError)
        return value
    # ground_truth, answer
    if not isinstance(value, str):
        raise _FieldError(f"field {key!r}: expected a str, got {_preview(value)}", key, TypeError)
    return value


def _check_grades(key: str, value: Any) -> Any:
    """Relevant ids: a list of str ids, or an object id -> non-negative int grade."""
    if isinstance(value, Mapping):
        for id_, grade in value.items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise _FieldError(
                    f"field {key!r}: the grade of {id_!r} must be an int (0 = not relevant, 1, 2... = "
                    f"more relevant), got {_preview(grade)}",
                    key,
                    TypeError,
                )
            if grade < 0:
                message = f"field {key!r}: the grade of {id_!r} must be non-negative, got {grade}"
                raise _FieldError(message, key, ValueError)
        return dict(value)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise _FieldError(
            f"field {key!r}: expected a list of ids or an object id -> grade, got {_preview(value)}",
            key,
            TypeError,
        )
    for i, item in enumerate(value):
        if not isinstance(item, str):
            hint = "; write ids as strings" if isinstance(item, int) else ""
            raise _FieldError(
                f"field {key!r}: item {i} must be a str, got {_preview(item)}{hint}", key, TypeError
            )
        if item in value[:i]:
            raise _FieldError(f"field {key!r}: id {item!r} is listed twice", key, ValueError)
    return tuple(value)


#: Keys holding a retrieved item's text, and its id (``metadata.id`` is tried after ``id``).
_TEXT_KEYS = ("page_content", "text")
_ID_KEY = "id"


def _item_field(item: Any, name: str) -> Any:
    if isinstance(item, Mapping):
        return item.get(name)
    return getattr(item, name, None)


def _split_item(item: Any, i: int, key: str) -> tuple[str, str | None]:
    if isinstance(item, str):
        return item, None
    text = next((t for name in _TEXT_KEYS if (t := _item_field(item, name)) is not None), None)
    if text is None:
        # An object that looks like no retrieved item (a number, None, bytes): the plain message.
        looks = isinstance(item, Mapping) or hasattr(item, "metadata")
        expected = "a str, or an object with 'page_content' or 'text';" if looks else "a str,"
        raise _FieldError(f"field {key!r}: item {i} must be {expected} got {_preview(item)}", key, TypeError)
    if not isinstance(text, str):
        raise _FieldError(
            f"field {key!r}: the text of item {i} must be a str, got {_preview(text)}", key, TypeError
        )
    found = _item_field(item, _ID_KEY)
    if found is None:
        metadata = _item_field(item, "metadata")
        found = metadata.get(_ID_KEY) if isinstance(metadata, Mapping) else None
    if found is not None and not isinstance(found, str):
        raise _FieldError(
            f"field {key!r}: the id of item {i} must be a str, got {_preview(found)}; write ids as strings",
            key,
            TypeError,
        )
    return text, found


def _split(value: Any, key: str) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise _FieldError(f"field {key!r}: expected a list of str, got {_preview(value)}", key, TypeError)
    pairs = [_split_item(item, i, key) for i, item in enumerate(value)]
    with_id = [i for i, (_, found) in enumerate(pairs) if found is not None]
    if not with_id:
        return tuple(text for text, _ in pairs), None
    if len(with_id) != len(pairs):
        missing = next(i for i, (_, found) in enumerate(pairs) if found is None)
        raise _FieldError(
            f"field {key!r}: item {with_id[0]} carries an id but item {missing} does not; give every "
            "retrieved item an id, or none",
            key,
            ValueError,
        )
    return tuple(text for text, _ in pairs), tuple(found for _, found in pairs if found is not None)


def split_retrieved(items: Any, field: str = "contexts") -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """Texts and ids of retrieved items, best first: ``(texts, ids)``, ids None when no item has one.

    An item is a str (a chunk without id), or a mapping or object with the text in ``page_content`` or
    ``text`` and the id in ``id`` or ``metadata["id"]``: LangChain's ``Document`` and
    ``{"page_content": ..., "metadata": {"id": ...}}``, LlamaIndex-style ``{"text": ..., "id": ...}``.
    Either every item has an id or none does. Raises ``TypeError``/``ValueError`` naming ``field``.
    """
    try:
        return _split(items, field)
    except _FieldError as exc:
        raise exc.kind(str(exc)) from None


def sample_kwargs(data: Mapping[str, Any], *, default_id: str | None = None) -> dict[str, Any]:
    """Map a dict in our, RAGAS or NVIDIA-style field names to :class:`RagSample` keyword arguments.

    See the module docstring for the accepted names. ``default_id`` is used when the data has no id.
    Missing contexts load as an empty tuple (a golden set without retrieval results). Raises
    ``TypeError`` for a non-mapping or a value of the wrong type, ``ValueError`` for a missing
    question (listing the accepted names), an empty question, or two names for one field
    with different values. Messages name the key as written in ``data``.
    """
    try:
        return _resolve(data, default_id)
    except _FieldError as exc:
        raise exc.kind(str(exc)) from None


# --------------------------------------------------------------------------------------------- files


def load_samples(path: str | os.PathLike[str]) -> list[RagSample]:
    """Load a golden set from a ``.jsonl``, ``.json`` or ``.csv`` file (UTF-8, a BOM is tolerated).

    * ``.jsonl``: one JSON object per line; blank lines are skipped.
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
    for a file without any sample, and for text that is not valid Unicode: a lone surrogate escape
    such as ``"\\ud800"``); ``OSError`` when the file cannot be read.
    """
    from .sample import RagSample

    path = Path(path)
    name = path.name
    suffix = path.suffix.lower()
    if suffix not in SUPPORTED_EXTENSIONS:
        raise SampleLoadError(
            f"{name}: unsupported file type {path.suffix or '(no extension)'!r}; "
            f"supported: {', '.join(SUPPORTED_EXTENSIONS)}",
            file=name,
        )
    text = _read_text(path, name)
    if suffix == ".jsonl":
        records = _jsonl_records(text, name)
    elif suffix == ".json":
        records = _json_records(text, name)
    else:
        records = _csv_records(text, name)

    samples: list[RagSample] = []
    seen: dict[str, str] = {}
    for where, default_id, line, index, data in records:
        try:
            kwargs = _resolve(data, default_id)
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


# (location for messages, default id, line, index, data)
_Record: TypeAlias = "tuple[str, str, int | None, int | None, Any]"


def _read_text(path: Path, name: str) -> str:
    data = path.read_bytes()
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


def _jsonl_records(text: str, name: str) -> Iterator[_Record]:
    # split("\n"), not splitlines(): editors and `sed -n 3p` count only \n (and \r\n) as line breaks.
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        where = f"{name}, line {number}"
        try:
            data = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise SampleLoadError(
                f"{where}: invalid JSON: {exc.msg} (column {exc.colno})", file=name, line=number
            ) from None
        if not isinstance(data, dict):
            raise SampleLoadError(
                f"{where}: expected a JSON object, got {_json_type(data)}", file=name, line=number
            )
        yield where, f"{name}:{number}", number, None, data


def _json_records(text: str, name: str) -> Iterator[_Record]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        message = f"{name}, line {exc.lineno}: invalid JSON: {exc.msg} (column {exc.colno})"
        raise SampleLoadError(message, file=name, line=exc.lineno) from None
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
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        columns = [column.strip() for column in header]
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
            return json.loads(cell, strict=False)
        except json.JSONDecodeError:
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
            # strict=False: a chunk typed into a spreadsheet cell may hold raw line breaks.
            value = json.loads(cell, strict=False)
        except json.JSONDecodeError:
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
            return json.loads(cell, strict=False)
        except json.JSONDecodeError:
            return cell
    return cell


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")
