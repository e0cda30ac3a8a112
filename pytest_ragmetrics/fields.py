"""RagSample's fields as datasets write them: the aliases of RAGAS and NVIDIA-style datasets, the
checks each value passes, and retrieved items given as objects (LangChain, LlamaIndex).

Below :mod:`~pytest_ragmetrics.sample` (which builds samples from them) and
:mod:`~pytest_ragmetrics.loaders` (which reads golden-set files through them).

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

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

__all__ = [
    "FIELD_ALIASES",
    "MAX_GRADE",
    "grade_out_of_range",
    "invisible",
    "sample_kwargs",
    "split_retrieved",
]


def invisible(text: str) -> bool:
    """True when ``text`` shows nothing: only whitespace and format characters (zero-width space,
    joiners, BOM, direction marks...), which ``str.strip`` keeps."""
    return all(c.isspace() or unicodedata.category(c) == "Cf" for c in text)


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


_KNOWN_KEYS = frozenset(key for names in FIELD_ALIASES.values() for key in names)
_LIST_KEYS = frozenset(
    {*FIELD_ALIASES["contexts"], *FIELD_ALIASES["context_ids"], "ground_truths", "reference_contexts"}
)


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


def _pick(data: Mapping[Any, Any], field: str, keys: tuple[str, ...]) -> tuple[str, Any] | None:
    """The (key, value) giving ``field`` from its names among ``data``'s keys (ours first), or None;
    two keys with different values are an error."""
    found: tuple[str, Any] | None = None
    for key in keys:
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


class _Layout(NamedTuple):
    """Which of a record's keys give each of our fields, and which are kept in its metadata. It
    depends on the keys alone, so a golden set's lines, which share their keys, work it out once."""

    names: Mapping[str, tuple[str, ...]]  # our field -> its names among the keys, ours first
    others: tuple[Any, ...]  # the keys that are none of ours, in their order


def _layout(keys: tuple[Any, ...]) -> _Layout:
    given = set(keys)
    names = {field: tuple(k for k in aliases if k in given) for field, aliases in FIELD_ALIASES.items()}
    return _Layout(names, tuple(key for key in keys if key not in _KNOWN_KEYS))


def _resolve(
    data: Any, default_id: str | None, layouts: dict[tuple[Any, ...], _Layout] | None = None
) -> dict[str, Any]:
    """RagSample's keyword arguments from ``data``. ``layouts`` keeps the layout of each set of keys
    seen, for a file's records; without it the layout is worked out for this record alone."""
    if not isinstance(data, Mapping):
        raise _FieldError(f"expected a mapping (dict) for a sample, got {_preview(data)}", None, TypeError)
    keys = tuple(data)
    layout = layouts.get(keys) if layouts is not None else None
    if layout is None:
        layout = _layout(keys)
        if layouts is not None:
            layouts[keys] = layout
    names = layout.names
    kwargs: dict[str, Any] = {}
    picked = _pick(data, "question", names["question"])
    if picked is None:
        accepted = ", ".join(repr(name) for name in FIELD_ALIASES["question"])
        raise _FieldError(f"missing field 'question' (accepted names: {accepted})", "question", ValueError)
    kwargs["question"] = _check("question", *picked)
    for field in ("ground_truth", "answer", "id", "context_ids", "reference_contexts"):
        picked = _pick(data, field, names[field]) if names[field] else None
        if picked is not None:
            kwargs[field] = _check(field, *picked)
    picked = _pick(data, "contexts", names["contexts"])
    # A golden set usually holds questions and references only: the retriever under test
    # supplies the contexts (``sample.with_contexts(retrieve(sample.question))``).
    kwargs["contexts"], carried = _split(picked[1], picked[0]) if picked is not None else ((), None)
    if picked is not None and carried is not None:
        given = _pick(data, "context_ids", names["context_ids"])
        if given is not None and kwargs["context_ids"] != carried:
            raise _FieldError(
                f"fields {picked[0]!r} and {given[0]!r} both give the context ids but differ: "
                f"{_preview(list(carried))} vs {_preview(given[1])}; keep only one",
                given[0],
                ValueError,
            )
        kwargs["context_ids"] = carried
    given_as = names["reference_context_ids"]
    picked = _pick(data, "reference_context_ids", given_as) if given_as else None
    if picked is not None:
        kwargs["reference_context_ids"] = _check_grades(*picked)
    if kwargs.get("id") is None and default_id is not None:
        kwargs["id"] = default_id

    explicit = data.get("metadata")
    if explicit is not None and not isinstance(explicit, Mapping):
        message = f"field 'metadata': expected a mapping, got {_preview(explicit)}"
        raise _FieldError(message, "metadata", TypeError)
    metadata: dict[Any, Any] = {key: data[key] for key in layout.others}
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
        if invisible(value):
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


#: The largest relevance grade: every grade up to it is exact as a float, and nDCG's sums of them stay
#: finite (a larger whole number would overflow the float it is divided as).
MAX_GRADE = 2**53


def grade_out_of_range(grade: int) -> str | None:
    """What a message says of an int relevance grade outside 0 to :data:`MAX_GRADE` (``from 0 to
    2**53, got -1``); None for one inside."""
    if 0 <= grade <= MAX_GRADE:
        return None
    return f"from 0 to 2**53, got {grade if grade < 10**20 else 'a larger whole number'}"


def _check_grades(key: str, value: Any) -> Any:
    """Relevant ids: a list of str ids, or an object id -> int grade from 0 to :data:`MAX_GRADE`."""
    if isinstance(value, Mapping):
        for id_, grade in value.items():
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise _FieldError(
                    f"field {key!r}: the grade of {id_!r} must be an int (0 = not relevant, 1, 2... = "
                    f"more relevant), got {_preview(grade)}",
                    key,
                    TypeError,
                )
            wrong = grade_out_of_range(grade)
            if wrong is not None:
                raise _FieldError(f"field {key!r}: the grade of {id_!r} must be {wrong}", key, ValueError)
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
