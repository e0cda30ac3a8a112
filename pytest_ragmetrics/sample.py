"""RagSample: one question with what the retriever returned for it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from .errors import InvalidSample
from .fields import grade_out_of_range, invisible, sample_kwargs, split_retrieved


def lone_surrogate(text: str) -> str | None:
    """Why ``text`` is not valid Unicode (a lone surrogate, which no UTF-8 encoder accepts), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (
            f"contains a lone surrogate {text[exc.start]!r} at position {exc.start}: not valid Unicode "
            "text (it cannot be encoded, cached or sent to a judge); fix the source, or decode it "
            "with errors='replace'"
        )
    return None


def _check_unicode(sample: RagSample) -> None:
    """Every text of the sample must be encodable: an InvalidSample names the first field that is not."""
    texts = [
        sample.question,
        *sample.contexts,
        sample.ground_truth or "",
        sample.answer or "",
        sample.id or "",
        *(sample.context_ids or ()),
        *(sample.reference_contexts or ()),
        *(sample.reference_context_ids or {}),
    ]
    try:
        # The texts together first (a golden set is checked sample by sample as it loads): one that
        # cannot be encoded fails the whole, and only then is each field encoded alone to name it.
        "".join(texts).encode("utf-8")
    except (UnicodeEncodeError, TypeError):
        pass
    else:
        return
    fields: list[tuple[str, Any]] = [
        ("question", sample.question),
        *((f"contexts[{i}]", c) for i, c in enumerate(sample.contexts)),
        ("ground_truth", sample.ground_truth),
        ("answer", sample.answer),
        ("id", sample.id),
        *((f"context_ids[{i}]", c) for i, c in enumerate(sample.context_ids or ())),
        *((f"reference_contexts[{i}]", c) for i, c in enumerate(sample.reference_contexts or ())),
        *(("reference_context_ids", k) for k in (sample.reference_context_ids or {})),
    ]
    for name, value in fields:
        problem = lone_surrogate(value) if isinstance(value, str) else None
        if problem is not None:
            error = InvalidSample(f"RagSample.{name} {problem}")
            error.field = name
            raise error


#: The metadata of every sample given none: read-only, and nothing else holds its dict.
_NO_METADATA: Mapping[str, Any] = MappingProxyType({})


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RagSample:
    """One evaluation sample: the question, the retrieved contexts (chunks, best first), and optionally
    the reference answer (``ground_truth``) and the generated ``answer``.

    Labels for the retrieval metrics that need no judge (``ndcg@5``, ``recall@3``...):

    * ``context_ids``: the id of each retrieved chunk, parallel to ``contexts`` (same length, same
      order, each id once).
    * ``reference_context_ids``: the relevant ids, as a list (each is relevant, grade 1) or a mapping
      id -> grade (an int from 0 to 2**53; 0 means judged not relevant). Stored as a read-only mapping.
    * ``reference_contexts``: reference texts, for golden sets without ids; a retrieved chunk counts
      as relevant when it matches one (see :mod:`pytest_ragmetrics.metrics.labels`).

    Immutable and validated on construction; a wrong value raises ``TypeError`` or ``ValueError`` naming
    the field and showing what was given.
    """

    question: str
    contexts: tuple[str, ...]
    ground_truth: str | None = None
    answer: str | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)
    context_ids: tuple[str, ...] | None = None
    reference_context_ids: Mapping[str, int] | None = field(default=None, hash=False)
    reference_contexts: tuple[str, ...] | None = None

    if TYPE_CHECKING:  # what the constructor takes: lists as the docs show them, stored as tuples

        def __init__(
            self,
            question: str,
            contexts: Sequence[str],
            ground_truth: str | None = None,
            answer: str | None = None,
            id: str | None = None,
            metadata: Mapping[str, Any] = ...,
            context_ids: Sequence[str] | None = None,
            reference_context_ids: Mapping[str, int] | Sequence[str] | None = None,
            reference_contexts: Sequence[str] | None = None,
        ) -> None: ...

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise TypeError(
                f"RagSample.question must be a str, got {type(self.question).__name__}: "
                f"{_show(self.question)}"
            )
        if invisible(self.question):
            raise ValueError(
                f"RagSample.question must be a non-empty str, got {_show(self.question)}"
                + (" (only invisible characters)" if self.question.strip() else "")
            )
        contexts = self.contexts
        if isinstance(contexts, (str, bytes)) or not isinstance(contexts, (list, tuple)):
            raise TypeError(
                "RagSample.contexts must be a list or tuple of str (the retrieved chunks, best first), "
                f"got {type(contexts).__name__}: {_show(contexts)}"
            )
        for i, chunk in enumerate(contexts):
            if not isinstance(chunk, str):
                raise TypeError(
                    f"RagSample.contexts[{i}] must be a str, got {type(chunk).__name__}: {_show(chunk)}"
                )
        object.__setattr__(self, "contexts", tuple(contexts))
        for name in ("ground_truth", "answer"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise TypeError(
                    f"RagSample.{name} must be a str or None, got {type(value).__name__}: {_show(value)}"
                )
        if self.id is not None and not isinstance(self.id, str):
            if isinstance(self.id, int) and not isinstance(self.id, bool):
                object.__setattr__(self, "id", str(self.id))
            else:
                raise TypeError(
                    f"RagSample.id must be a str or None, got {type(self.id).__name__}: {_show(self.id)}"
                )
        if self.id is not None and invisible(self.id):
            # The name a report, a baseline and the test's id give the sample: "" is none, and a
            # golden set's line with "id": "" (a script's unset variable) is better left out.
            error = InvalidSample(
                f"RagSample.id must show something, got {_show(self.id)}; leave it out for the default "
                "id (the file and line, in a golden set)"
            )
            error.field = "id"
            raise error
        if not isinstance(self.metadata, Mapping):
            raise TypeError(
                f"RagSample.metadata must be a mapping, got {type(self.metadata).__name__}: "
                f"{_show(self.metadata)}"
            )
        # A read-only copy: the sample stays immutable, and the caller's dict is not shared. Samples
        # without metadata (most of a golden set) share one empty mapping rather than each keeping
        # two objects the garbage collector walks.
        metadata = self.metadata
        object.__setattr__(self, "metadata", MappingProxyType(dict(metadata)) if metadata else _NO_METADATA)
        if self.context_ids is not None:
            ids = _ids("context_ids", self.context_ids)
            if len(ids) != len(self.contexts):
                raise ValueError(
                    f"RagSample.context_ids has {len(ids)} id(s) but contexts has {len(self.contexts)} "
                    "chunk(s); context_ids must give the id of each retrieved chunk, in the same order"
                )
            object.__setattr__(self, "context_ids", ids)
        if self.reference_context_ids is not None:
            object.__setattr__(self, "reference_context_ids", _grades(self.reference_context_ids))
        if self.reference_contexts is not None:
            object.__setattr__(
                self, "reference_contexts", _texts("reference_contexts", self.reference_contexts)
            )
        _check_unicode(self)

    def __hash__(self) -> int:
        # The fields the dataclass would hash, hashed once per object: a warm test hashes its sample
        # several times per score (the scores started for it are kept by sample). Kept in the
        # instance only: __reduce__ rebuilds a copy from its values, so another process (where str
        # hashes differ) computes its own. Read as an attribute, not from ``__dict__``: asking for
        # the instance's ``__dict__`` makes the interpreter build one, a dict the garbage collector
        # then keeps for every sample of a golden set.
        try:
            return self._hash  # type: ignore[attr-defined,no-any-return]
        except AttributeError:
            value = hash(tuple([getattr(self, name) for name in _HASHED]))
            object.__setattr__(self, "_hash", value)
            return value

    def __reduce__(self) -> tuple[Any, ...]:
        # mappingproxy cannot be pickled or deep-copied; rebuild from plain values instead.
        grades = self.reference_context_ids
        return (
            type(self),
            (
                self.question,
                self.contexts,
                self.ground_truth,
                self.answer,
                self.id,
                dict(self.metadata),
                self.context_ids,
                None if grades is None else dict(grades),
                self.reference_contexts,
            ),
        )

    def with_contexts(self, contexts: Sequence[Any], ids: Sequence[str] | None = None) -> RagSample:
        """A copy with ``contexts`` replaced: fill a golden-set question with what your retriever returns.

        ``contexts`` holds the chunks best first, as str or as objects carrying a text and an id
        (``{"page_content": ..., "metadata": {"id": ...}}``, ``{"text": ..., "id": ...}``, or objects
        with those attributes, such as LangChain documents); their ids become ``context_ids``. ``ids``
        gives the ids explicitly. Without either, the copy has no ``context_ids``.
        """
        texts, found = split_retrieved(contexts, "contexts")
        if ids is not None:
            checked = _ids("context_ids", ids)
            if found is not None and found != checked:
                raise ValueError(
                    f"RagSample.with_contexts: ids={_show(list(checked))} differ from the ids the "
                    f"contexts carry, {_show(list(found))}; give the ids one way"
                )
            found = checked
        return dataclasses.replace(self, contexts=texts, context_ids=found)

    @property
    def reference(self) -> str | None:
        """The text precision is judged against: the ground truth, else the answer."""
        if self.ground_truth is not None and not invisible(self.ground_truth):
            return self.ground_truth
        if self.answer is not None and not invisible(self.answer):
            return self.answer
        return None

    @property
    def label(self) -> str:
        """How the sample is named in messages: its id, else the (shortened) question."""
        if self.id is not None:
            return self.id
        question = " ".join(self.question.split())
        return question if len(question) <= 50 else question[:49] + "…"

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, default_id: str | None = None) -> RagSample:
        """Build a sample from our field names or those of RAGAS and NVIDIA-style datasets.

        Accepted aliases: question = ``user_input`` / ``userInput``; contexts = ``retrieved_contexts`` /
        ``retrievedContexts``; ground_truth = ``reference`` / ``ground_truths`` (first item);
        answer = ``response``. Unknown fields go to ``metadata``.
        """
        return cls(**sample_kwargs(data, default_id=default_id))


#: The fields a sample's hash covers: those the dataclass would hash (compared, not hash=False).
_HASHED = tuple(f.name for f in dataclasses.fields(RagSample) if (f.compare if f.hash is None else f.hash))


def _ids(name: str, value: Any) -> tuple[str, ...]:
    """A ranking of ids: a list or tuple of distinct non-empty str."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"RagSample.{name} must be a list or tuple of str, got {type(value).__name__}: {_show(value)}"
        )
    seen: dict[str, int] = {}
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise TypeError(
                f"RagSample.{name}[{i}] must be a str, got {type(item).__name__}: {_show(item)}"
                + (
                    "; write ids as strings so retrieved and reference ids compare exactly"
                    if isinstance(item, int)
                    else ""
                )
            )
        if not item.strip():
            raise ValueError(f"RagSample.{name}[{i}] must be a non-empty str, got {_show(item)}")
        if item in seen:
            why = (
                "a ranking holds each id once (when ids name documents rather than chunks, keep each "
                "document's best-ranked chunk)"
                if name == "context_ids"
                else "list each relevant id once"
            )
            raise ValueError(
                f"RagSample.{name}: id {_show(item)} appears twice (items {seen[item]} and {i}); {why}"
            )
        seen[item] = i
    return tuple(value)


def _grades(value: Any) -> Mapping[str, int]:
    """Relevant ids as a list (grade 1 each) or a mapping id -> int grade from 0 to 2**53."""
    name = "reference_context_ids"
    if isinstance(value, Mapping):
        grades: dict[str, int] = {}
        for key, grade in value.items():
            if not isinstance(key, str) or not key.strip():
                raise TypeError(
                    f"RagSample.{name} keys must be non-empty str ids, got {type(key).__name__}: {_show(key)}"
                )
            if isinstance(grade, bool) or not isinstance(grade, int):
                raise TypeError(
                    f"RagSample.{name}[{key!r}] must be an int grade (0 = not relevant, 1, 2... = more "
                    f"relevant), got {type(grade).__name__}: {_show(grade)}"
                )
            wrong = grade_out_of_range(grade)
            if wrong is not None:
                raise ValueError(f"RagSample.{name}[{key!r}] must be a grade {wrong}")
            grades[key] = grade
        return MappingProxyType(grades)
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"RagSample.{name} must be a list of relevant ids or a mapping id -> grade, "
            f"got {type(value).__name__}: {_show(value)}"
        )
    return MappingProxyType(dict.fromkeys(_ids(name, value), 1))


def _texts(name: str, value: Any) -> tuple[str, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(
            f"RagSample.{name} must be a list or tuple of str, got {type(value).__name__}: {_show(value)}"
        )
    for i, text in enumerate(value):
        if not isinstance(text, str):
            raise TypeError(f"RagSample.{name}[{i}] must be a str, got {type(text).__name__}: {_show(text)}")
    return tuple(value)


def as_samples(value: RagSample | Sequence[RagSample]) -> tuple[list[RagSample], bool]:
    """Normalize a sample or a sequence of samples; the flag says whether a single sample was given."""
    if isinstance(value, RagSample):
        return [value], True
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(
            f"expected a RagSample or a list of RagSample, got {type(value).__name__}: {_show(value)}"
        )
    samples = list(value)
    for i, s in enumerate(samples):
        if not isinstance(s, RagSample):
            raise TypeError(f"samples[{i}] must be a RagSample, got {type(s).__name__}: {_show(s)}")
    if not samples:
        raise ValueError("expected at least one RagSample, got an empty list")
    return samples, False
