"""Labelled sets: the verdicts a person gave, per judgment kind, to measure the judge against.

A labelled set is a JSONL file, one labelled item per line (blank lines are skipped). Every item has
a ``kind``, a ``question`` and the person's verdict, plus what the judge is shown for that kind:

==============================  =======================================  ==================================
``kind``                        what is judged                           the label
==============================  =======================================  ==================================
``context_precision``           ``reference``, ``chunk``                 ``useful``: true / false
``context_recall``              ``contexts`` (list), ``reference``       ``attributed``: a true / false
                                (or ``reference_sentences``, a list)     per reference sentence, in order
``context_relevance_graded``    ``chunk``                                ``rating``: 0, 1 or 2
``context_relevance_sentences`` ``chunk``                                ``relevant_sentences``: the
                                                                         numbers (from 1) of the chunk's
                                                                         needed sentences
``claim_verdicts``              ``contexts`` (list), ``claims`` (list)   ``verdicts``: ``supported``,
                                                                         ``contradicted`` or ``not_found``
                                                                         per claim, in order
==============================  =======================================  ==================================

``faithfulness`` may stand for ``claim_verdicts``.

``context_relevance[graded]`` may stand for ``context_relevance_graded``, and
``context_relevance[sentence]`` or ``[binary]`` for ``context_relevance_sentences`` (the binary method
reads the same judgment). A ``reference`` and a ``chunk`` are split into sentences by the configured
splitter when the set is checked, exactly as the metrics split them, so sentence numbers and
``attributed`` entries count the sentences the judge is shown. Optional on every item: ``id`` (a
string or an integer; default ``<file>:<line>``, unique within the file), ``reason`` (why the person
decided so; ``reasons``, a list, for the sentences of a recall item) and ``metadata`` (an object, kept
as is). Any other key is an error, so a misspelt label never passes silently.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from .. import judgments as J, kinds as K
from .._files import json_type
from ..fields import invisible
from ..loaders import SampleLoadError
from ..sample import lone_surrogate

__all__ = ["LabelLoadError", "LabelledItem", "kind_names", "kind_of", "load_labels"]

_COMMON = ("kind", "id", "question", "reason", "metadata")


def kind_of(name: str) -> str | None:
    """The labelled judgment kind ``name`` denotes (a kind, or a metric name with its method), else
    None; the kinds and their other names are those of :data:`pytest_ragmetrics.kinds.KINDS`."""
    kind = K.kind_of(name)
    return kind.name if kind is not None and kind.labels is not None else None


def kind_names() -> str:
    """The labelled kinds, as messages list them."""
    return ", ".join(kind.name for kind in K.labelled_kinds())


class LabelLoadError(SampleLoadError):
    """A labelled set cannot be loaded; the message names the file, the line and the field."""


@dataclass(frozen=True)
class LabelledItem:
    """One labelled item. ``label`` is ``useful`` (bool), ``attributed`` (tuple of bool), ``rating``
    (int), ``relevant_sentences`` (sorted tuple of int) or ``verdicts`` (tuple of claim verdicts),
    after the item's ``kind``."""

    kind: str
    id: str
    where: str
    question: str
    label: Any
    chunk: str | None = None
    reference: str | None = None
    reference_sentences: tuple[str, ...] | None = None
    contexts: tuple[str, ...] = ()
    claims: tuple[str, ...] | None = None
    reason: str = ""
    reasons: tuple[str, ...] = ()
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def material(self) -> J.Material:
        """What the judge is shown for this item."""
        return J.Material(
            self.question,
            chunk=self.chunk,
            reference=self.reference,
            contexts=self.contexts,
            reference_sentences=self.reference_sentences,
            claims=self.claims,
        )


class _Bad(ValueError):
    def __init__(self, message: str, field: str | None) -> None:
        super().__init__(message)
        self.field = field


#: A JSON value's type as the messages about labels files name it: an array is "a list", a number is shown.
_type_name = functools.partial(json_type, array="a list", show_number=True)


def _text(data: Mapping[str, Any], name: str, required: bool = True) -> str | None:
    value = data.get(name)
    if value is None:
        if required:
            raise _Bad(f"missing field {name!r}", name)
        return None
    if not isinstance(value, str):
        raise _Bad(f"field {name!r}: expected a string, got {_type_name(value)}", name)
    if required and invisible(value):  # spaces and zero-width characters show nothing to judge
        raise _Bad(f"field {name!r}: must not be empty", name)
    # A "\ud800" escape: text no request, cache or report can carry, found here rather than as a
    # UnicodeEncodeError from the HTTP client once the judge is asked.
    problem = lone_surrogate(value)
    if problem is not None:
        raise _Bad(f"field {name!r}: {problem}", name)
    return value


def _texts(data: Mapping[str, Any], name: str, required: bool = True) -> tuple[str, ...] | None:
    value = data.get(name)
    if value is None:
        if required:
            raise _Bad(f"missing field {name!r}", name)
        return None
    if not isinstance(value, list) or not value:
        raise _Bad(f"field {name!r}: expected a non-empty list of strings, got {_type_name(value)}", name)
    for i, item in enumerate(value):
        if not isinstance(item, str) or invisible(item):
            raise _Bad(f"field {name!r}: item {i} must be a non-empty string, got {_type_name(item)}", name)
        problem = lone_surrogate(item)
        if problem is not None:
            raise _Bad(f"field {name!r}: item {i} {problem}", name)
    return tuple(value)


def _item(data: Mapping[str, Any], default_id: str, where: str) -> LabelledItem:
    raw_kind = data.get("kind")
    if raw_kind is None:
        raise _Bad(f"missing field 'kind' (one of {kind_names()})", "kind")
    kind = kind_of(raw_kind) if isinstance(raw_kind, str) else None
    if kind is None:
        raise _Bad(f"field 'kind': expected one of {kind_names()}; got {raw_kind!r}", "kind")
    entry = K.KINDS[kind]
    assert entry.labels is not None
    # A label of each unit may come with a reason for each (``reasons``).
    each = ("reasons",) if entry.labels.form == "each" else ()
    accepted = (*_COMMON, *entry.labels.material, entry.labels.field, *each)
    unknown = sorted(set(data) - set(accepted))
    if unknown:
        raise _Bad(
            f"unknown field(s) {', '.join(map(repr, unknown))} for a {kind} item; "
            f"accepted: {', '.join(accepted)}",
            unknown[0],
        )
    item_id = data.get("id")
    if item_id is None:
        item_id = default_id
    elif isinstance(item_id, int) and not isinstance(item_id, bool):
        item_id = str(item_id)
    elif not isinstance(item_id, str) or not item_id.strip():
        raise _Bad(f"field 'id': expected a non-empty string or an integer, got {_type_name(item_id)}", "id")
    question = _text(data, "question")
    assert question is not None
    reason = _text(data, "reason", required=False) or ""
    metadata = data.get("metadata") or {}
    if not isinstance(metadata, Mapping):
        raise _Bad(f"field 'metadata': expected an object, got {_type_name(metadata)}", "metadata")
    common: dict[str, Any] = {
        "kind": kind,
        "id": item_id,
        "where": where,
        "question": question,
        "reason": reason,
        "metadata": dict(metadata),
    }
    form = entry.labels
    assert form is not None
    name = form.field
    if name not in data:
        raise _Bad(f"missing field {name!r}: the verdict a person gave", name)
    label = _label(form.form, name, data[name], entry.classes, entry.unit)
    material: dict[str, Any] = {}
    for field_name in form.material:  # checked in the order they are listed
        if field_name == "contexts":
            material[field_name] = _texts(data, field_name)
        elif field_name == "claims":
            claims = _texts(data, field_name)
            assert claims is not None
            if len(claims) != len(label):
                raise _Bad(f"field {name!r}: {len(label)} entries for {len(claims)} claims", name)
            material[field_name] = claims
        elif field_name == "reference_sentences":
            # The reference, or the reference already split into its sentences: one of the two.
            sentences = _texts(data, "reference_sentences", required=False)
            reference = _text(data, "reference", required=sentences is None)
            if sentences is not None and reference is not None:
                raise _Bad(
                    "give either 'reference' or 'reference_sentences', not both", "reference_sentences"
                )
            if sentences is not None and len(sentences) != len(label):
                raise _Bad(
                    f"field {name!r}: {len(label)} entries for {len(sentences)} reference sentences", name
                )
            material["reference"], material["reference_sentences"] = reference, sentences
        elif field_name == "reference" and "reference_sentences" in form.material:
            continue  # read with the reference's sentences
        else:  # a text: the chunk, or the reference
            material[field_name] = _text(data, field_name)
    if form.form == "each":
        reasons = _texts(data, "reasons", required=False) or ()
        if reasons and len(reasons) != len(label):
            raise _Bad(f"field 'reasons': {len(reasons)} reasons for {len(label)} {name} entries", "reasons")
        material["reasons"] = reasons
    return LabelledItem(**common, label=label, **material)


def _label(form: str, name: str, value: Any, classes: tuple[Any, ...], unit: str) -> Any:
    """The label of a form (see :class:`~pytest_ragmetrics.judgments.LabelForm`), checked against the
    kind's classes."""
    if form == "numbers":
        if not isinstance(value, list):
            raise _Bad(f"field {name!r}: expected a list of sentence numbers, got {_type_name(value)}", name)
        for number in value:
            if isinstance(number, bool) or not isinstance(number, int) or number < 1:
                raise _Bad(f"field {name!r}: sentence numbers start at 1; got {_type_name(number)}", name)
        if len(set(value)) != len(value):
            raise _Bad(f"field {name!r}: a sentence number is listed twice: {value}", name)
        return tuple(sorted(value))
    if form == "one":
        return _class(name, value, classes)
    # each: a verdict per unit
    if not isinstance(value, list) or not value or not all(_is_class(v, classes) for v in value):
        one = _class_names(classes)
        got = _type_name(value) if not isinstance(value, list) else value
        raise _Bad(f"field {name!r}: expected a non-empty list of {one}, one per {unit}, got {got}", name)
    return tuple(value)


def _is_class(value: Any, classes: tuple[Any, ...]) -> bool:
    # True == 1 in Python: a boolean is a class only of yes / no kinds, a number only of ratings.
    return any(type(value) is type(c) and value == c for c in classes)


def _class(name: str, value: Any, classes: tuple[Any, ...]) -> Any:
    if not _is_class(value, classes):
        expected = "true or false" if classes == (False, True) else _class_names(classes)
        raise _Bad(f"field {name!r}: expected {expected}, got {_type_name(value)}", name)
    return value


def _class_names(classes: tuple[Any, ...]) -> str:
    if classes == (False, True):
        return "true / false"
    names = [json.dumps(c) for c in classes]
    return ", ".join(names[:-1]) + f" or {names[-1]}"


def _judgment(item: LabelledItem) -> tuple[Any, ...]:
    """What the judge is shown for ``item`` (its :meth:`~LabelledItem.material`), normalized as the
    judge's requests normalize it: two items alike here label one judgment."""
    from ..text import normalize_text

    def normalized(value: Any) -> Any:
        if isinstance(value, str):
            return normalize_text(value)
        if isinstance(value, tuple):
            return tuple(normalize_text(v) for v in value)
        return value

    material = item.material()
    return (item.kind, *(normalized(getattr(material, f.name)) for f in fields(material)))


def load_labels(path: str | os.PathLike[str]) -> list[LabelledItem]:
    """Read a labelled set (``.jsonl``, UTF-8), see the module docstring for its format.

    Raises :class:`LabelLoadError` (a ``ValueError``) naming the file, line and field; ``OSError``
    when the file cannot be read.
    """
    from ..loaders import jsonl_records, read_text

    path = Path(path)
    name = path.name
    if path.suffix.lower() != ".jsonl":
        raise LabelLoadError(
            f"{name}: a labelled set is a .jsonl file (one labelled item per line); got "
            f"{path.suffix or '(no extension)'!r}",
            file=name,
        )
    try:
        records = list(jsonl_records(read_text(path, name), name))
    except LabelLoadError:
        raise
    except SampleLoadError as exc:
        raise LabelLoadError(str(exc), file=exc.file, line=exc.line) from None
    items: list[LabelledItem] = []
    seen: dict[str, str] = {}
    # Each judgment's label, by what the judge is shown: the labelled score of a sample reads one.
    judged: dict[tuple[Any, ...], tuple[LabelledItem, str]] = {}
    for where, default_id, line, _, data in records:
        try:
            item = _item(data, default_id, where)
        except _Bad as exc:
            raise LabelLoadError(f"{where}: {exc}", file=name, line=line, field=exc.field) from None
        if item.id in seen:
            raise LabelLoadError(
                f"{where}: duplicate id {item.id!r}, already used on {seen[item.id]}",
                file=name,
                line=line,
                field="id",
            )
        here = where.removeprefix(f"{name}, ")
        seen[item.id] = here
        earlier = judged.setdefault(_judgment(item), (item, here))
        form = K.KINDS[item.kind].labels
        if earlier[0].label != item.label and form is not None:
            field_name = form.field
            raise LabelLoadError(
                f"{where}: item {item.id!r} labels the same {item.kind} judgment as item {earlier[0].id!r} "
                f"on {earlier[1]} (the same question and texts), differently: {field_name} "
                f"{json.dumps(item.label)} here, {json.dumps(earlier[0].label)} there; keep the one that "
                "is right",
                file=name,
                line=line,
                field=field_name,
            )
        items.append(item)
    if not items:
        raise LabelLoadError(f"{name}: the labelled set holds no items", file=name)
    return items
