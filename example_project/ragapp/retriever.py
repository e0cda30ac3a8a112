"""A small BM25 retriever over the help-centre corpus, plus a deliberately weakened variant.

This is the "system under test": ``retrieve(question)`` returns the texts of the best-matching help
articles, best first, exactly what a RAG app would put into its prompt.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

CORPUS_PATH = Path(__file__).resolve().parent.parent / "corpus.jsonl"

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "how",
        "i",
        "if",
        "in",
        "is",
        "it",
        "its",
        "my",
        "of",
        "on",
        "or",
        "so",
        "that",
        "the",
        "their",
        "there",
        "they",
        "this",
        "to",
        "was",
        "what",
        "when",
        "where",
        "which",
        "who",
        "will",
        "with",
        "you",
        "your",
    ]
)


@dataclass(frozen=True)
class Doc:
    id: str
    title: str
    text: str


def tokenize(text: str) -> list[str]:
    """Lowercased word tokens without stopwords."""
    return [t for t in re.findall(r"[a-z0-9]+", text.lower()) if t not in STOPWORDS]


@cache
def load_corpus(path: Path = CORPUS_PATH) -> tuple[Doc, ...]:
    with open(path, encoding="utf-8") as f:
        return tuple(Doc(**json.loads(line)) for line in f if line.strip())


class BM25:
    """Okapi BM25 over title + text of each document."""

    def __init__(self, docs: tuple[Doc, ...], k1: float = 1.5, b: float = 0.75) -> None:
        self.docs, self.k1, self.b = docs, k1, b
        self.tf = [Counter(tokenize(f"{d.title} {d.text}")) for d in docs]
        self.len = [sum(tf.values()) for tf in self.tf]
        self.avglen = sum(self.len) / len(docs)
        df = Counter(term for tf in self.tf for term in tf)
        n = len(docs)
        self.idf = {t: math.log(1 + (n - c + 0.5) / (c + 0.5)) for t, c in df.items()}

    def scores(self, query: str) -> list[float]:
        terms = tokenize(query)
        out = []
        for tf, length in zip(self.tf, self.len, strict=False):
            norm = self.k1 * (1 - self.b + self.b * length / self.avglen)
            out.append(sum(self.idf.get(t, 0.0) * tf[t] * (self.k1 + 1) / (tf[t] + norm) for t in terms))
        return out

    def top(self, query: str, k: int) -> list[Doc]:
        scores = self.scores(query)
        # Ties (including all-zero scores) keep corpus order, so results are deterministic.
        order = sorted(range(len(self.docs)), key=lambda i: (-scores[i], i))
        return [self.docs[i] for i in order[:k]]


@cache
def _index() -> BM25:
    return BM25(load_corpus())


def retrieve_docs(question: str, k: int = 3) -> list[Doc]:
    """The ``k`` best documents for ``question``, best first: each has an ``id`` and a ``text``."""
    return _index().top(question, k)


def retrieve_ids(question: str, k: int = 3) -> list[str]:
    """Ids of the ``k`` best documents for ``question``, best first."""
    return [d.id for d in retrieve_docs(question, k)]


def retrieve(question: str, k: int = 3) -> list[str]:
    """Texts of the ``k`` best documents for ``question``, best first (what the RAG prompt gets)."""
    return [d.text for d in retrieve_docs(question, k)]


# --- a deliberately weakened retriever ------------------------------------------------------------
# The kind of regression a refactor can introduce: the query is truncated to its first content word
# (say, a new "keyword extraction" step that keeps only one keyword). It still returns k documents,
# so nothing crashes; only the retrieval metrics notice.


def retrieve_weak_docs(question: str, k: int = 3) -> list[Doc]:
    """Like :func:`retrieve_docs`, but only the first content word of the question is searched for."""
    first = tokenize(question)[:1]
    return _index().top(" ".join(first), k)


def retrieve_weak_ids(question: str, k: int = 3) -> list[str]:
    """Like :func:`retrieve_ids`, but only the first content word of the question is searched for."""
    return [d.id for d in retrieve_weak_docs(question, k)]


def retrieve_weak(question: str, k: int = 3) -> list[str]:
    """Like :func:`retrieve`, but only the first content word of the question is searched for."""
    return [d.text for d in retrieve_weak_docs(question, k)]
