"""RagSample: one question with what the retriever returned for it, and the loaders for golden sets."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


def _show(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class RagSample:
    """One evaluation sample: the question, the retrieved contexts (chunks, best first), and optionally
    the reference answer (``ground_truth``) and the generated ``answer``.

    Immutable and validated on construction; a wrong value raises ``TypeError`` or ``ValueError`` naming
    the field and showing what was given.
    """

    question: str
    contexts: tuple[str, ...]
    ground_truth: str | None = None
    answer: str | None = None
    id: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.question, str):
            raise TypeError(
                f"RagSample.question must be a str, got {type(self.question).__name__}: "
                f"{_show(self.question)}"
            )
        if not self.question.strip():
            raise ValueError(f"RagSample.question must be a non-empty str, got {_show(self.question)}")
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
        if not isinstance(self.metadata, Mapping):
            raise TypeError(
                f"RagSample.metadata must be a mapping, got {type(self.metadata).__name__}: "
                f"{_show(self.metadata)}"
            )
        # A read-only copy: the sample stays immutable, and the caller's dict is not shared.
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def __reduce__(self) -> tuple[Any, ...]:
        # mappingproxy cannot be pickled or deep-copied; rebuild from plain values instead.
        return (
            type(self),
            (self.question, self.contexts, self.ground_truth, self.answer, self.id, dict(self.metadata)),
        )

    def with_contexts(self, contexts: Sequence[str]) -> RagSample:
        """A copy with ``contexts`` replaced: fill a golden-set question with what your retriever returns."""
        return dataclasses.replace(self, contexts=contexts)  # type: ignore[arg-type]  # validated, made a tuple

    @property
    def reference(self) -> str | None:
        """The text precision is judged against: the ground truth, else the answer."""
        if self.ground_truth is not None and self.ground_truth.strip():
            return self.ground_truth
        if self.answer is not None and self.answer.strip():
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
        from .loaders import sample_kwargs

        return cls(**sample_kwargs(data, default_id=default_id))


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
