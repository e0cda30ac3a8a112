"""The samples a run scored, kept for drawing its controls: wherever they came from, in any process.

Controls are drawn from the samples the run actually scored, from a golden file or built in a test
body (``rag_sample.with_contexts(retrieve(...))``). The pool keeps a bounded, seeded selection of
them: the ``keep`` samples whose seeded digest of their content is smallest (a bottom-k sample). That
selection depends only on the set of samples scored, not on the order they were scored in nor on which
xdist worker scored which, so the workers' pools merged on the controller hold exactly what one
process would have kept.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from typing import Any

from ..sample import RagSample

__all__ = ["SamplePool", "sample_from_json", "sample_json"]


def sample_json(sample: RagSample) -> dict[str, Any]:
    """The fields of a sample a control reads, as plain JSON (the worker-to-controller form)."""
    out: dict[str, Any] = {"question": sample.question, "contexts": list(sample.contexts)}
    for name in ("ground_truth", "answer", "id"):
        if getattr(sample, name) is not None:
            out[name] = getattr(sample, name)
    if sample.context_ids is not None:
        out["context_ids"] = list(sample.context_ids)
    if sample.reference_context_ids is not None:
        out["reference_context_ids"] = dict(sample.reference_context_ids)
    if sample.reference_contexts is not None:
        out["reference_contexts"] = list(sample.reference_contexts)
    return out


def sample_from_json(data: Mapping[str, Any]) -> RagSample:
    """A sample written by :func:`sample_json`."""
    return RagSample.from_dict(data)


class SamplePool:
    """A bounded, seeded selection of the samples scored (see the module docstring)."""

    def __init__(self, keep: int, seed: int = 0) -> None:
        self.keep = max(1, keep)
        self.seed = seed
        self._kept: dict[str, tuple[str, RagSample]] = {}  # content key -> (rank, sample)

    def __len__(self) -> int:
        return len(self._kept)

    def _rank(self, key: str) -> str:
        return hashlib.sha256(f"{self.seed}:{key}".encode()).hexdigest()

    def add(self, sample: RagSample, key: str | None) -> None:
        """Keep ``sample`` (content key ``key``) if it is among the ``keep`` smallest ranks so far."""
        if key is None or key in self._kept or not (sample.contexts or sample.ground_truth or sample.answer):
            return
        self._kept[key] = (self._rank(key), sample)
        if len(self._kept) > 2 * self.keep:  # prune now and then, not at every sample
            self._prune()

    def _prune(self) -> None:
        ranked = sorted(self._kept.items(), key=lambda item: item[1][0])
        self._kept = dict(ranked[: self.keep])

    def samples(self) -> list[RagSample]:
        """The kept samples, in rank order (the same whatever order they were added in)."""
        self._prune()
        return [sample for _, sample in sorted(self._kept.values(), key=lambda kept: kept[0])]

    def to_json(self) -> list[list[Any]]:
        """``[[key, sample], ...]`` for the controller (:meth:`merge`)."""
        self._prune()
        return [[key, sample_json(sample)] for key, (_, sample) in self._kept.items()]

    def merge(self, data: Iterable[Any]) -> None:
        """Add a worker's pool (:meth:`to_json`)."""
        for key, sample in data:
            self.add(sample_from_json(sample), str(key))
