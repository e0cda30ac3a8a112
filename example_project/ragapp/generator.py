"""The answer half of the app: compose an answer from the articles the retriever returned.

A real app would prompt a model with the retrieved articles; this one is deterministic, so its tests
replay exactly: ``generate(question, docs)`` picks the sentences of the retrieved articles that share
the most content words with the question and returns the best two, in the order they were retrieved.
Every sentence of its answer is therefore stated in a retrieved article.

``generate_weak`` is a deliberately weakened variant: it adds one sentence that no article holds, the
kind of confident filler a changed prompt or a smaller model adds. Only the answer metrics notice.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .retriever import Doc, tokenize

#: A sentence ends at . ! or ? followed by a space and a capital letter ("9 a.m. to" and
#: "Jan. 5" do not end one).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

#: How many sentences an answer holds at most.
ANSWER_SENTENCES = 2

#: The sentence the weakened generator adds: a fact no article states.
INVENTED = "Every plan also comes with a 60-day money-back guarantee."


def sentences(text: str) -> list[str]:
    """``text`` split into sentences."""
    return [s.strip() for s in _SENTENCE_END.split(text) if s.strip()]


def generate(question: str, docs: Sequence[Doc]) -> str:
    """An answer to ``question`` from ``docs`` (best first): the best two sentences, in retrieved order.

    A sentence scores the number of the question's content words it contains; ties go to the
    earlier-retrieved sentence. With no sentence sharing a word with the question, the answer says so.
    """
    wanted = set(tokenize(question))
    ranked: list[tuple[int, int, str]] = []
    for position, sentence in enumerate(s for doc in docs for s in sentences(doc.text)):
        overlap = len(wanted & set(tokenize(sentence)))
        if overlap:
            ranked.append((-overlap, position, sentence))
    best = sorted(sorted(ranked)[:ANSWER_SENTENCES], key=lambda item: item[1])
    if not best:
        return "I could not find this in the help centre."
    return " ".join(sentence for _, _, sentence in best)


def generate_weak(question: str, docs: Sequence[Doc]) -> str:
    """Like :func:`generate`, but with :data:`INVENTED` added: a fact no retrieved article holds."""
    return f"{generate(question, docs)} {INVENTED}"
