"""Our answer metrics against RAGAS 0.4's and DeepEval's own code, on the same claims and verdicts.

    python benchmarks/bench_answer_parity.py [--ragas-python PATH] [--deepeval-python PATH]
        [--random 24] [--seed 13]

Each case is a question, contexts, an answer and a reference, with a script of what a judge says of
them: the claims of every sentence, each answer claim's verdict against the contexts and against the
reference, each reference claim's verdict against the answer, and whether the answer is committal and
how well it addresses the question. Local fake servers on 127.0.0.1 answer every side from that one
script, each in its own schema: our judge's requests; RAGAS's prompts (its statements and claims of a
text are the claims of all its sentences, its 0/1 verdict is 1 for our "supported" and 0 for
"contradicted" and "not found"); DeepEval's (its truths are the contexts, its verdicts "yes", "no"
and "borderline"). For answer relevancy, RAGAS's generated question for a rating r is embedded so that
its cosine with the question is r / 2. The cases are hand-made edge cases (no claims, no contexts, an
empty answer, duplicate claims, a reference without claims, a rounding tie, an answer and a reference
long enough to be judged in windows, split non-committal votes; answers written as lists, with
abbreviations, in Chinese and Arabic, with a decomposed accent, of spaces or of punctuation; only
empty chunks) and seeded random ones. Every side gets the answer as written; ours must split it
into the scripted sentences.

Compared (ours, RAGAS ``ragas.metrics.collections``):

* ``faithfulness`` with Faithfulness;
* ``answer_correctness`` (f1), ``[precision]`` and ``[recall]`` with FactualCorrectness in the same
  mode (RAGAS rounds to two decimals, so those differ by up to 0.005: ours rounded to two decimals
  must be RAGAS's number, a tie of precision or recall rounded down as RAGAS's 1e-8 takes it);
* ``answer_correctness`` with AnswerCorrectness at ``weights=[1.0, 0.0]``, its factuality alone;
* ``answer_relevancy`` with AnswerRelevancy (only the non-committal rule and the mean are compared:
  the cosine is arranged, see above);

the same again with RAGAS's older metrics, ``ragas.metrics`` (those ``ragas.evaluate()`` takes, on a
LangChain chat model); and (ours, DeepEval's FaithfulnessMetric): ``faithfulness[not_contradicted]``
with it as it comes, ``faithfulness`` with ``penalize_ambiguous_claims=True``.

Neither peer is a dependency of this project: each runs in an environment of its own, whose Python is
given with ``--ragas-python`` (or ``RAGAS_PYTHON``) and ``--deepeval-python`` (or ``DEEPEVAL_PYTHON``);
see benchmarks/README.md. Without one, ours are compared with the numbers that peer's published
formulas give for the same verdicts, computed here. Nothing here uses the network.

The bound: wherever both sides give a number they agree (to 1e-9; FactualCorrectness: ours rounded to
two decimals is its number, a tie of precision or recall going down), and every case one side scores
otherwise is marked in its ``documented`` as a difference ``docs/metrics.md`` states.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import random
import tempfile
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _peers import EmbeddingServer, peer_python, run_side, show

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.testing import FakeJudgeServer
from pytest_ragmetrics.text import split_sentences

S, C, N = "supported", "contradicted", "not_found"
CLAIM_METRICS = (
    "faithfulness",
    "faithfulness[not_contradicted]",
    "answer_correctness",
    "answer_correctness[precision]",
    "answer_correctness[recall]",
)


# --- the cases -----------------------------------------------------------------------------------


@dataclass
class Case:
    """A sample and the judge's script for it.

    ``answer``: (sentence, [(claim, verdict against the contexts, verdict against the reference)]);
    ``reference``: (sentence, [(claim, verdict against the answer)]); ``draws``: (committal, rating)
    of each of three relevancy judgments (RAGAS's three generated questions; ours at judge_n=3).
    """

    id: str
    question: str
    contexts: list[str]
    answer: list[tuple[str, list[tuple[str, str, str]]]]
    reference: list[tuple[str, list[tuple[str, str]]]]
    draws: list[tuple[bool, int]] = field(default_factory=lambda: [(True, 2)] * 3)
    note: str = ""
    #: Our metrics on which the case is scored differently by a choice docs/metrics.md states.
    documented: tuple[str, ...] = ()
    #: The answer as the sample gives it, when it is not its sentences joined by spaces (a list, a
    #: text of spaces): our splitter must find the scripted sentences in it.
    text: str | None = None

    @property
    def answer_text(self) -> str:
        return " ".join(s for s, _ in self.answer) if self.text is None else self.text

    @property
    def reference_text(self) -> str:
        return " ".join(s for s, _ in self.reference)

    def answer_claims(self) -> list[str]:
        return [c for _, claims in self.answer for c, _, _ in claims]

    def reference_claims(self) -> list[str]:
        return [c for _, claims in self.reference for c, _ in claims]

    def verdict(self, kind: str, claim: str) -> str:
        if kind == "reference claims against the answer":
            return next(v for _, cs in self.reference for c, v in cs if c == claim)
        column = 1 if kind == "against the contexts" else 2
        return next(t[column] for _, cs in self.answer for t in cs if t[0] == claim)


def hand_cases() -> list[Case]:
    def ctx(name: str) -> list[str]:
        return [f"The {name} opened in 1932 and is 2 km long.", f"The {name} is painted red every decade."]

    return [
        Case(
            "all-supported",
            "When did the harbour bridge open?",
            ctx("harbour bridge"),
            [
                ("The harbour bridge opened in 1932.", [("The harbour bridge opened in 1932.", S, S)]),
                (
                    "It is 2 km long and painted red.",
                    [
                        ("The harbour bridge is 2 km long.", S, S),
                        ("The harbour bridge is painted red.", S, N),
                    ],
                ),
            ],
            [("The harbour bridge opened in 1932.", [("The harbour bridge opened in 1932.", S)])],
        ),
        Case(
            "padded",
            "When did the river bridge open?",
            ctx("river bridge"),
            [
                ("The river bridge opened in 1932.", [("The river bridge opened in 1932.", S, S)]),
                (
                    "It was designed by a famous engineer who won prizes.",
                    [
                        ("The river bridge was designed by a famous engineer.", N, N),
                        ("The engineer of the river bridge won prizes.", N, N),
                    ],
                ),
                ("It is 2 km long.", [("The river bridge is 2 km long.", S, S)]),
            ],
            [
                (
                    "The river bridge opened in 1932 and is 2 km long.",
                    [("The river bridge opened in 1932.", S), ("The river bridge is 2 km long.", S)],
                ),
                ("It carries a railway.", [("The river bridge carries a railway.", N)]),
            ],
        ),
        Case(
            "contradicted",
            "How long is the canal bridge?",
            ctx("canal bridge"),
            [
                ("The canal bridge is 3 km long.", [("The canal bridge is 3 km long.", C, C)]),
                (
                    "It opened in 1932 and is painted blue.",
                    [("The canal bridge opened in 1932.", S, S), ("The canal bridge is painted blue.", C, N)],
                ),
            ],
            [
                ("The canal bridge is 2 km long.", [("The canal bridge is 2 km long.", C)]),
                ("It opened in 1932.", [("The canal bridge opened in 1932.", S)]),
            ],
        ),
        Case(
            "duplicate-claims",
            "When did the valley bridge open?",
            ctx("valley bridge"),
            [
                ("The valley bridge opened in 1932.", [("The valley bridge opened in 1932.", S, S)]),
                ("It has a toll.", [("The valley bridge has a toll.", N, C)]),
                ("The valley bridge opened in 1932.", [("The valley bridge opened in 1932.", S, S)]),
            ],
            [
                (
                    "The valley bridge opened in 1932 without a toll.",
                    [("The valley bridge opened in 1932.", S), ("The valley bridge has no toll.", C)],
                )
            ],
            note="the same sentence twice: its claim counts twice on both sides",
        ),
        Case(
            "greeting-and-claim",
            "How long is the port bridge?",
            ctx("port bridge"),
            [
                ("Good question!", []),
                ("The port bridge is 2 km long.", [("The port bridge is 2 km long.", S, S)]),
            ],
            [("The port bridge is 2 km long.", [("The port bridge is 2 km long.", S)])],
        ),
        Case(
            "no-claims",
            "When did the lake bridge open?",
            ctx("lake bridge"),
            [("I do not know when the lake bridge opened.", [])],
            [("The lake bridge opened in 1932.", [("The lake bridge opened in 1932.", N)])],
            draws=[(False, 0)] * 3,
            note="an answer that makes no claim",
            documented=CLAIM_METRICS,
        ),
        Case(
            "empty-answer",
            "When did the dock bridge open?",
            ctx("dock bridge"),
            [],
            [("The dock bridge opened in 1932.", [("The dock bridge opened in 1932.", N)])],
            draws=[(False, 0)] * 3,
            note="an empty answer",
            documented=(*CLAIM_METRICS, "answer_relevancy"),
        ),
        Case(
            "reference-no-claims",
            "When did the hill bridge open?",
            ctx("hill bridge"),
            [("The hill bridge opened in 1932.", [("The hill bridge opened in 1932.", S, N)])],
            [("Nobody can say.", [])],
            note="a reference without claims",
            documented=("answer_correctness", "answer_correctness[recall]"),
        ),
        Case(
            "no-contexts",
            "When did the moor bridge open?",
            [],
            [("The moor bridge opened in 1932.", [("The moor bridge opened in 1932.", N, S)])],
            [("The moor bridge opened in the year 1932.", [("The moor bridge opened in 1932.", S)])],
            note="nothing retrieved",
            documented=("faithfulness",),
        ),
        Case(
            "rounding-tie",
            "What is known of the bay bridge?",
            ctx("bay bridge"),
            [
                ("The bay bridge opened in 1932.", [("The bay bridge opened in 1932.", S, S)]),
                (
                    "It is blue, tall, old.",
                    [
                        ("The bay bridge is blue.", N, N),
                        ("The bay bridge is tall.", N, N),
                        ("The bay bridge is old.", N, N),
                    ],
                ),
            ],
            [(f"Bay bridge fact {i} holds.", [(f"Bay bridge fact {i} holds.", N)]) for i in range(11)],
            note="TP 1, FP 3, FN 11: F1 2/16 = 0.125",
        ),
        Case(
            "precision-tie",
            "What is known of the wharf bridge?",
            ctx("wharf bridge"),
            [
                ("The wharf bridge opened in 1932.", [("The wharf bridge opened in 1932.", S, S)]),
                ("The wharf bridge is 2 km long.", [("The wharf bridge is 2 km long.", S, S)]),
                ("The wharf bridge is painted red.", [("The wharf bridge is painted red.", S, S)]),
                (
                    "The wharf bridge is blue, tall, old, wide and busy.",
                    [(f"The wharf bridge is {w}.", N, N) for w in ("blue", "tall", "old", "wide", "busy")],
                ),
            ],
            [
                (
                    "The wharf bridge opened in 1932, is 2 km long and is painted red.",
                    [
                        ("The wharf bridge opened in 1932.", S),
                        ("The wharf bridge is 2 km long.", S),
                        ("The wharf bridge is painted red.", S),
                    ],
                )
            ],
            note="TP 3, FP 5: precision 3/8 = 0.375, which RAGAS rounds down (1e-8 added) to 0.37",
        ),
        Case(
            "asymmetric",
            "What colour is the fen bridge?",
            ctx("fen bridge"),
            [("The fen bridge is red.", [("The fen bridge is red.", S, N)])],
            [("The fen bridge is painted red.", [("The fen bridge is painted red.", S)])],
            note="TP 0 and FN 0: recall 0",
        ),
        Case(
            "hedge",
            "When did the glen bridge open?",
            ctx("glen bridge"),
            [
                (
                    "It may have opened in 1932, I am not sure.",
                    [("The glen bridge may have opened in 1932.", N, N)],
                )
            ],
            [("The glen bridge opened in 1932.", [("The glen bridge opened in 1932.", N)])],
            draws=[(False, 1)] * 3,
            note="non-committal, rated 1",
        ),
        Case(
            "partly-relevant",
            "When did the cove bridge open, and who built it?",
            ctx("cove bridge"),
            [("The cove bridge opened in 1932.", [("The cove bridge opened in 1932.", S, S)])],
            [
                (
                    "The cove bridge opened in 1932, built by Dorman.",
                    [("The cove bridge opened in 1932.", S), ("Dorman built the cove bridge.", N)],
                )
            ],
            draws=[(True, 1)] * 3,
        ),
        Case(
            "off-topic",
            "Who built the ness bridge?",
            ctx("ness bridge"),
            [("The ness bridge is 2 km long.", [("The ness bridge is 2 km long.", S, N)])],
            [("Dorman built the ness bridge.", [("Dorman built the ness bridge.", N)])],
            draws=[(True, 0)] * 3,
        ),
        Case(
            "votes-one-committal",
            "When did the firth bridge open?",
            ctx("firth bridge"),
            [("The firth bridge opened in 1932.", [("The firth bridge opened in 1932.", S, S)])],
            [("The firth bridge opened in the year 1932.", [("The firth bridge opened in 1932.", S)])],
            draws=[(False, 0), (False, 0), (True, 2)],
            note="1 of 3 relevancy draws committal",
            documented=("answer_relevancy",),
        ),
        Case(
            "votes-two-committal",
            "When did the sound bridge open?",
            ctx("sound bridge"),
            [("The sound bridge opened in 1932.", [("The sound bridge opened in 1932.", S, S)])],
            [("The sound bridge opened in the year 1932.", [("The sound bridge opened in 1932.", S)])],
            draws=[(True, 2), (True, 1), (False, 0)],
            note="2 of 3 relevancy draws committal",
        ),
        long_case("long-answer", 23, random.Random(7)),
        long_reference_case("long-reference", 24, random.Random(11)),
        *written_cases(),
    ]


def written_cases() -> list[Case]:
    """Answers whose form decides the sentences our judge is asked to break into claims (lists, an
    abbreviation, other scripts, decomposed accents), and answers or contexts with nothing to read."""

    def bridge(name: str, first: str, second: str, text: str, **kw: Any) -> Case:
        return Case(
            name,
            f"When did the {name} bridge open?",
            [f"The {name} bridge opened in 1932.", f"The {name} bridge is 2 km long."],
            [
                (first, [(f"The {name} bridge opened in 1932.", S, S)]),
                (second, [(f"The {name} bridge is 2 km long.", S, N), (f"The {name} bridge is busy.", N, N)]),
            ],
            [(f"The {name} bridge opened in 1932.", [(f"The {name} bridge opened in 1932.", S)])],
            text=text,
            **kw,
        )

    one, two = "The quay bridge opened in 1932.", "The quay bridge is 2 km long and busy."
    bulleted = bridge("quay", one, two, f"- {one}\n- {two}", note="a bulleted list")
    one, two = "The mole bridge opened in 1932.", "The mole bridge is 2 km long and busy."
    numbered = bridge("mole", one, two, f"1. {one}\n2. {two}", note="a numbered list")
    one, two = "Dr. Smith opened the spit bridge in the U.S. in 1932.", "The spit bridge is 2 km long."
    abbreviated = bridge("spit", one, two, f"{one} {two}", note="abbreviations inside a sentence")
    one, two = "港湾大桥于1932年开通。", "港湾大桥长两公里，而且很繁忙。"
    chinese = bridge("harbour-zh", one, two, one + two, note="Chinese: full-width stops, no spaces")
    one, two = "افتتح جسر الميناء عام 1932.", "يبلغ طول جسر الميناء كيلومترين."
    arabic = bridge("harbour-ar", one, two, f"{one} {two}", note="Arabic")
    one, two = "The cafe\u0301 bridge opened in 1932.", "It is 2 km long, near the cafe\u0301."
    decomposed = bridge("cafe", one, two, f"{one} {two}", note="an accent written decomposed (NFD)")
    blank = Case(
        "blank-answer", "When did the blank bridge open?", ["The blank bridge opened in 1932."], [],
        [("The blank bridge opened in 1932.", [("The blank bridge opened in 1932.", N)])],
        draws=[(False, 0)] * 3, text=" \n\t ", note="an answer of spaces",
        documented=(*CLAIM_METRICS,),
    )  # fmt: skip
    dots = Case(
        "punctuation-answer", "When did the dots bridge open?", ["The dots bridge opened in 1932."], [],
        [("The dots bridge opened in 1932.", [("The dots bridge opened in 1932.", N)])],
        draws=[(False, 0)] * 3, text="...", note="an answer of punctuation", documented=CLAIM_METRICS,
    )  # fmt: skip
    empty_chunks = Case(
        "blank-contexts", "When did the hollow bridge open?", ["", " \n "],
        [("The hollow bridge opened in 1932.", [("The hollow bridge opened in 1932.", N, S)])],
        [("The hollow bridge opened in 1932.", [("The hollow bridge opened in 1932.", S)])],
        note="only empty chunks retrieved",
    )  # fmt: skip
    return [bulleted, numbered, abbreviated, chinese, arabic, decomposed, blank, dots, empty_chunks]


def long_case(name: str, sentences: int, rng: random.Random) -> Case:
    """An answer of ``sentences`` sentences, one or two claims each: judged in windows by us."""
    answer = []
    for i in range(sentences):
        claims = [
            (f"Pier {name} {i}{k} holds.", rng.choice((S, S, C, N)), rng.choice((S, N)))
            for k in "ab"[: rng.randint(1, 2)]
        ]
        answer.append((f"Pier {name} {i} holds {len(claims)} facts.", claims))
    reference = [
        (f"Pier {name} ref {i} is true.", [(f"Pier {name} ref {i} is true.", rng.choice((S, N)))])
        for i in range(4)
    ]
    return Case(
        name,
        f"What holds for pier {name}?",
        [f"Pier {name} chunk {k}." for k in range(3)],
        answer,
        reference,
        note="more than 20 sentences and 25 claims",
    )


def long_reference_case(name: str, sentences: int, rng: random.Random) -> Case:
    """A reference of ``sentences`` sentences, one or two claims each: its claims are listed, and
    judged against the answer, in windows by us."""
    reference = []
    for i in range(sentences):
        count = rng.randint(1, 2)
        claims = [(f"Quay {name} ref {i}{k} holds.", rng.choice((S, N, C))) for k in "ab"[:count]]
        reference.append((f"Quay {name} ref {i} holds {len(claims)} facts.", claims))
    answer = [
        (f"Quay {name} says {i}.", [(f"Quay {name} says {i}.", rng.choice((S, N)), rng.choice((S, C, N)))])
        for i in range(3)
    ]
    return Case(
        name,
        f"What holds for quay {name}?",
        [f"Quay {name} chunk {k}." for k in range(2)],
        answer,
        reference,
        note="a reference of more than 20 sentences and 25 claims",
    )


def random_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        name = f"r{n:02d}"
        answer = []
        for i in range(rng.randint(1, 5)):
            claims = [
                (f"Tower {name} fact {i}{k} holds.", rng.choice((S, S, S, C, N)), rng.choice((S, S, C, N)))
                for k in "abc"[: rng.randint(0 if i else 1, 3)]
            ]
            answer.append((f"Tower {name} sentence {i} states things.", claims))
        reference = [
            (f"Tower {name} truth {i} is so.", [(f"Tower {name} truth {i} is so.", rng.choice((S, C, N)))])
            for i in range(rng.randint(1, 5))
        ]
        committal = rng.random() > 0.2
        draws = [(committal, rng.choice((0, 1, 2, 2)) if committal else 0)] * 3
        contexts = [f"Tower {name} chunk {k} says much." for k in range(rng.randint(1, 4))]
        out.append(Case(name, f"What holds for tower {name}?", contexts, answer, reference, draws))
    return out


# --- what the judges answer ----------------------------------------------------------------------


def squash(text: str) -> str:
    """A text as the lookups know it: spaces collapsed, accents composed (our judge is sent NFC)."""
    return unicodedata.normalize("NFC", " ".join(text.split()))


class Script:
    """Looks a case and the kind of verdict up by the texts a request carries."""

    def __init__(self, cases: list[Case]) -> None:
        self.claims: dict[str, list[str]] = {}  # a sentence or a whole text -> its claims
        self.by_text: dict[str, list[tuple[Case, str]]] = {}
        self.by_contexts: dict[frozenset[str], Case] = {}
        self.by_question: dict[str, Case] = {}
        self.draw = {c.id: 0 for c in cases}
        for case in cases:
            for sentence, made in case.answer:
                self.claims[squash(sentence)] = [c for c, _, _ in made]
            for sentence, stated in case.reference:
                self.claims[squash(sentence)] = [c for c, _ in stated]
            self.claims[squash(case.answer_text)] = case.answer_claims()
            self.claims[squash(case.reference_text)] = case.reference_claims()
            for text, kind in (
                (case.answer_text, "reference claims against the answer"),
                (case.reference_text, "answer claims against the reference"),
                ("\n".join(case.contexts), "against the contexts"),
            ):
                self.by_text.setdefault(squash(text), []).append((case, kind))
            self.by_contexts[frozenset(squash(c) for c in case.contexts)] = case
            self.by_question[squash(case.question)] = case
        self.by_answer = {squash(c.answer_text): c for c in cases}
        # "" is the empty and the blank answer, no contexts and only empty ones: told apart by claims.
        if any(len({c.id for c, _ in found}) > 1 for text, found in self.by_text.items() if text):
            raise SystemExit("two cases share a text: the judges could not tell them apart")

    def evidence(self, text: str, claims: list[str]) -> tuple[Case, str]:
        """The case and the kind of verdict asked for: the evidence's text, and whose claims these are
        (the empty text is both an empty answer and no contexts)."""
        for case, kind in self.by_text[squash(text)]:
            own = case.reference_claims() if kind.startswith("reference") else case.answer_claims()
            if all(claim in own for claim in claims):
                return case, kind
        raise ValueError(f"no case judges {claims!r} against {text!r}")

    def next_draw(self, case: Case) -> tuple[bool, int]:
        draw = case.draws[self.draw[case.id] % len(case.draws)]
        self.draw[case.id] += 1
        return draw

    def ours(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.loads(body["messages"][-1]["content"])
        if "sentences" in data:
            return {f"sentence_{n}": {"claims": self.claims[squash(s)]} for n, s in data["sentences"].items()}
        if "claims" in data:
            if "contexts" in data:
                case, kind = (
                    self.by_contexts[frozenset(squash(c) for c in data["contexts"].values())],
                    "against the contexts",
                )
            else:
                case, kind = self.evidence(data["text"], list(data["claims"].values()))
            out: dict[str, Any] = {}
            for n, claim in data["claims"].items():
                verdict = case.verdict(kind, claim)
                out[f"claim_{n}"] = {"reason": "scripted", "verdict": verdict}
                if "contexts" in data:
                    out[f"claim_{n}"]["chunks"] = [] if verdict == N else [1]
            return out
        committal, rating = self.next_draw(self.by_answer[squash(data["answer"])])
        return {"reason": "scripted", "committal": committal, "rating": rating}

    def deepeval(self, body: dict[str, Any]) -> dict[str, Any]:
        """DeepEval's prompts: its truths of the contexts are the contexts themselves, its claims
        ours, its verdict "yes" for supported, "no" for contradicted, "borderline" (once "idk") for
        not found."""
        content = body["messages"][-1]["content"]
        if not isinstance(content, str):  # a list of parts
            content = "".join(part.get("text", "") for part in content)
        text = str(content)
        if "\nRetrieval Contexts:\n" in text and "\nClaims:\n" in text:
            contexts, _, rest = text.rpartition("\nRetrieval Contexts:\n")[2].partition("\n\nClaims:\n")
            claims = ast.literal_eval(rest.rpartition("\n\nJSON:")[0].strip())
            case = self.by_contexts[frozenset(squash(c) for c in contexts.split("\n\n") if c)]
            words = {S: "yes", C: "no", N: "borderline"}
            return {"verdicts": [{"verdict": words[case.verdict("against the contexts", c)]} for c in claims]}
        if "\nAI Output:\n" in text:
            answer = text.rpartition("\nAI Output:\n")[2].rpartition("\n\nJSON:")[0]
            return {"claims": self.claims[squash(answer)]}
        if "\nText:\n" in text:
            contexts = text.rpartition("\nText:\n")[2].rpartition("\n\nJSON:")[0]
            return {"truths": [c for c in contexts.split("\n\n") if c]}
        raise ValueError(f"unknown DeepEval prompt: {text[-300:]!r}")

    def ragas(self, body: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        marker = text.rfind("input: ")
        data = json.loads(text[marker + len("input: ") : text.rstrip().rfind("Output:")])
        if '"title": "StatementGeneratorOutput"' in text:
            return {"statements": self.claims[squash(data["answer"])]}
        if '"title": "ClaimDecompositionOutput"' in text:
            return {"claims": self.claims[squash(data["response"])]}
        if '"title": "NLIStatementOutput"' in text:
            case, kind = self.evidence(data["context"], data["statements"])
            return {
                "statements": [
                    {"statement": s, "reason": "scripted", "verdict": int(case.verdict(kind, s) == S)}
                    for s in data["statements"]
                ]
            }
        if '"title": "ClassificationWithReason"' in text:
            case = self.by_question[squash(data["question"])]
            against = "answer claims against the reference"
            tp = [s for s in data["answer"] if case.verdict(against, s) == S]
            fp = [s for s in data["answer"] if case.verdict(against, s) != S]
            fn = [
                s for s in data["ground_truth"] if case.verdict("reference claims against the answer", s) != S
            ]
            return {
                k: [{"statement": s, "reason": "scripted"} for s in v]
                for k, v in (("TP", tp), ("FP", fp), ("FN", fn))
            }
        if '"title": "AnswerRelevanceOutput"' in text or '"title": "ResponseRelevanceOutput"' in text:
            case = self.by_answer[squash(data["response"])]
            committal, rating = self.next_draw(case)
            return {"question": f"GENERATED r{rating}: {case.question}", "noncommittal": int(not committal)}
        raise ValueError(f"unknown RAGAS prompt: {text[:200]!r}")


def vector(text: str) -> list[float]:
    """A generated question ``GENERATED r<k>: ...`` gets a unit vector whose cosine with every other
    text's (``[1, 0]``) is k / 2."""
    if text.startswith("GENERATED r"):
        cos = int(text[len("GENERATED r")]) / 2
        return [cos, math.sqrt(1 - cos * cos)]
    return [1.0, 0.0]


# --- the two sides -------------------------------------------------------------------------------

#: Our metric name -> the RAGAS figure it is compared with.
PAIRS = (
    ("faithfulness", "faithfulness"),
    ("answer_correctness", "factual_correctness"),
    ("answer_correctness[precision]", "factual_correctness_precision"),
    ("answer_correctness[recall]", "factual_correctness_recall"),
    ("answer_correctness", "answer_correctness_factuality"),
    ("answer_relevancy", "answer_relevancy"),
)
#: The same with RAGAS's older metrics, ``ragas.metrics`` (the ones ``ragas.evaluate()`` takes).
LEGACY_PAIRS = tuple((ours, f"legacy_{theirs}") for ours, theirs in PAIRS)
#: The same with DeepEval's FaithfulnessMetric, as it comes and with ambiguous claims penalized.
DEEPEVAL_PAIRS = (
    ("faithfulness[not_contradicted]", "deepeval_faithfulness"),
    ("faithfulness", "deepeval_faithfulness_penalize_ambiguous"),
)
RELEVANCY_N3 = "answer_relevancy (judge_n=3)"


def run_ours(cases: list[Case], script: Script) -> dict[str, dict[str, Any]]:
    """Each case alone, every metric, errors collected: a number, an outcome or an error."""
    names = sorted({ours for ours, _ in (*PAIRS, *DEEPEVAL_PAIRS)})
    out: dict[str, dict[str, Any]] = {name: {} for name in [*names, RELEVANCY_N3]}
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    with FakeJudgeServer(script.ours) as server, tempfile.TemporaryDirectory() as tmp:
        for n, settings in enumerate(
            (
                Settings(judge_base_url=server.base_url, cache_dir=str(Path(tmp) / "1")),
                Settings(
                    judge_base_url=server.base_url, cache_dir=str(Path(tmp) / "3"), judge_n=3, temperature=0.7
                ),
            )
        ):
            with Evaluator(settings) as evaluator:
                for case in cases:
                    sample = RagSample(
                        case.question,
                        case.contexts,
                        answer=case.answer_text,
                        ground_truth=case.reference_text,
                        id=case.id,
                    )
                    for name in names if n == 0 else ["answer_relevancy"]:
                        script.draw[case.id] = 0
                        key = name if n == 0 else RELEVANCY_N3
                        try:
                            result = evaluator.evaluate([sample], metrics=[name])[case.id][name]
                        except RagMetricsError as exc:
                            out[key][case.id] = f"error: {type(exc).__name__}: {str(exc)[:80]}"
                            continue
                        out[key][case.id] = result.score if result.scored else str(result.outcome)
    return out


def run_deepeval(cases: list[Case], script: Script, python: str) -> dict[str, dict[str, Any]]:
    with FakeJudgeServer(script.deepeval) as chat:
        job = {
            "chat_url": chat.base_url,
            "cases": [
                {"id": c.id, "question": c.question, "contexts": c.contexts, "answer": c.answer_text}
                for c in cases
            ],
        }
        result: dict[str, dict[str, Any]] = run_side(
            "DeepEval", python, "_deepeval_parity_side.py", job, timeout=900
        )
        return result


def run_ragas(cases: list[Case], script: Script, python: str) -> dict[str, dict[str, Any]]:
    for case in cases:
        script.draw[case.id] = 0
    with FakeJudgeServer(script.ragas) as chat, EmbeddingServer(vector) as embeddings:
        job = {
            "chat_url": chat.base_url,
            "embeddings_url": embeddings.base_url,
            "cases": [
                {
                    "id": c.id,
                    "question": c.question,
                    "contexts": c.contexts,
                    "answer": c.answer_text,
                    "reference": c.reference_text,
                }
                for c in cases
            ],
        }
        result: dict[str, dict[str, Any]] = run_side(
            "RAGAS", python, "_ragas_parity_side.py", job, timeout=900
        )
        return result


# --- RAGAS's published formulas, for a run without RAGAS ---------------------------------------


def formulas(case: Case) -> dict[str, Any]:
    """What RAGAS 0.4's and DeepEval's documented formulas give for the case's verdicts (RAGAS docs:
    faithfulness, factual correctness, answer correctness, answer relevancy; DeepEval docs:
    faithfulness), computed here, independently of ours."""
    faith = [case.verdict("against the contexts", c) for c in case.answer_claims()]
    to_ref = [case.verdict("answer claims against the reference", c) == S for c in case.answer_claims()]
    to_ans = [case.verdict("reference claims against the answer", c) == S for c in case.reference_claims()]
    tp, fp, fn = sum(to_ref), len(to_ref) - sum(to_ref), len(to_ans) - sum(to_ans)
    out: dict[str, Any] = legacy_formulas(case, faith, tp, fp, fn)
    if not case.answer_text:  # AnswerCorrectness alone takes an empty response (no statements: 1.0)
        refused = "error: ValueError (empty response)"
        missing = "error: MissingTestCaseParamsError (empty actual_output)"  # DeepEval's refusal
        return {
            **out,
            **dict.fromkeys([r for _, r in PAIRS], refused),
            **dict.fromkeys([r for _, r in DEEPEVAL_PAIRS], missing),
            "answer_correctness_factuality": 1.0,
        }
    out["faithfulness"] = (
        "error: ValueError (no contexts)"
        if not case.contexts
        else faith.count(S) / len(faith)
        if faith
        else "nan"
    )
    out["deepeval_faithfulness"] = 1 - faith.count(C) / len(faith) if faith else 1.0
    out["deepeval_faithfulness_penalize_ambiguous"] = faith.count(S) / len(faith) if faith else 1.0
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    out["factual_correctness"] = round(f1, 2)
    out["factual_correctness_precision"] = round(tp / (tp + fp + 1e-8), 2)
    out["factual_correctness_recall"] = round(tp / (tp + fn + 1e-8), 2)
    if not case.answer_claims() or not case.reference_claims():
        out["answer_correctness_factuality"] = 1.0
    else:
        p = tp / (tp + fp) if tp + fp else (1.0 if fn == 0 else 0.0)
        r = tp / (tp + fn) if tp + fn else (1.0 if fp == 0 else 0.0)
        out["answer_correctness_factuality"] = 2 * p * r / (p + r) if p + r else 0.0
    cosines = [rating / 2 for _, rating in case.draws]
    out["answer_relevancy"] = 0.0 if all(not c for c, _ in case.draws) else sum(cosines) / len(cosines)
    return out


def legacy_formulas(case: Case, faith: list[str], tp: int, fp: int, fn: int) -> dict[str, Any]:
    """The same for ``ragas.metrics``: no check of empty inputs; AnswerCorrectness's factuality is 1.0
    only when neither text has a statement, and its precision without TP or FP is 0."""
    out: dict[str, Any] = {"legacy_faithfulness": faith.count(S) / len(faith) if faith else "nan"}
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    out["legacy_factual_correctness"] = round(f1, 2)
    out["legacy_factual_correctness_precision"] = round(tp / (tp + fp + 1e-8), 2)
    out["legacy_factual_correctness_recall"] = round(tp / (tp + fn + 1e-8), 2)
    neither = not case.answer_claims() and not case.reference_claims()
    out["legacy_answer_correctness_factuality"] = 1.0 if neither else f1
    cosines = [rating / 2 for _, rating in case.draws]
    out["legacy_answer_relevancy"] = 0.0 if all(not c for c, _ in case.draws) else sum(cosines) / len(cosines)
    return out


# --- comparing -----------------------------------------------------------------------------------


def rounded_as_ragas(value: float, metric: str) -> float:
    """Our exact score as FactualCorrectness rounds it: to two decimals, where its precision and
    recall (``tp / (tp + fp + 1e-8)``) sit just below a tie and go down: 3/8 is 0.37 there."""
    below_a_tie = metric.endswith(("_precision", "_recall"))
    return round(value - 1e-9 if below_a_tie else value, 2)


def compare(
    cases: list[Case],
    ours: Mapping[str, Mapping[str, Any]],
    theirs: Mapping[str, Mapping[str, Any]],
    pairs: tuple[tuple[str, str], ...],
    source: str,
) -> bool:
    """Print the agreement per metric; true when every difference is one the docs state."""
    met = True
    print(f"{'ours':<31} {source:<40} {'cases':>5} {'both':>5} {'max |diff|':>10} {'rounded':>8}")
    differences: list[str] = []
    for mine, other in pairs:
        both, worst, rounded_equal = 0, 0.0, 0
        factual = "factual_correctness" in other
        for case in cases:
            a, b = ours[mine][case.id], theirs[other][case.id]
            if mine == "answer_relevancy" and len(set(case.draws)) > 1:
                a = ours[RELEVANCY_N3][case.id]  # three draws: ours at judge_n=3
            documented = mine in case.documented
            if isinstance(a, float) and isinstance(b, float):
                agrees = (rounded_as_ragas(a, other) == b) if factual else abs(a - b) <= 1e-9
                if agrees or not documented:
                    both += 1
                    worst = max(worst, abs(a - b))
                    rounded_equal += rounded_as_ragas(a, other) == b
                if agrees:
                    continue
            elif a == b:
                continue
            met = met and documented
            label = "documented" if documented else "NOT DOCUMENTED"
            differences.append(f"  {case.id:<20} {mine:<31} {show(a):<20} {other:<40} {show(b):<33} {label}")
        rounded = f"{rounded_equal:>4}/{both}" if factual else ""
        print(f"{mine:<31} {other:<40} {len(cases):>5} {both:>5} {worst:>10.4f} {rounded:>8}")
    print(f"cases scored differently ({len(differences)}):")
    print("\n".join(differences))
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ragas-python", help="the Python of an environment with ragas 0.4 (or RAGAS_PYTHON)"
    )
    parser.add_argument(
        "--deepeval-python", help="the Python of an environment with deepeval (or DEEPEVAL_PYTHON)"
    )
    parser.add_argument(
        "--random", type=int, default=24, help="seeded random cases beside the hand-made ones"
    )
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args()
    cases = hand_cases() + random_cases(args.random, args.seed)
    for case in cases:  # the script answers per sentence: our splitter must see the sentences written
        if split_sentences(case.answer_text) != [s for s, _ in case.answer]:
            raise SystemExit(f"case {case.id}: the answer does not split into its scripted sentences")
    script = Script(cases)
    ours = run_ours(cases, script)
    computed: dict[str, dict[str, Any]] = {}
    for case in cases:
        for name, value in formulas(case).items():
            computed.setdefault(name, {})[case.id] = value
    ragas = peer_python(args.ragas_python, "RAGAS_PYTHON", "ragas")
    deepeval = peer_python(args.deepeval_python, "DEEPEVAL_PYTHON", "deepeval")
    print(
        f"{len(cases)} cases ({len(cases) - args.random} hand-made, {args.random} random, seed {args.seed})"
    )
    print(
        "(rounded: how often ours rounded to two decimals, a tie of precision or recall down, "
        "is FactualCorrectness's number)\n"
    )
    theirs = run_ragas(cases, script, ragas) if ragas else computed
    met = compare(cases, ours, theirs, PAIRS, "RAGAS 0.4 (its code)" if ragas else "RAGAS's formulas (here)")
    print()
    source = "RAGAS 0.4 ragas.metrics (its code)" if ragas else "ragas.metrics' formulas (here)"
    met = compare(cases, ours, theirs, LEGACY_PAIRS, source) and met
    print(f"\n{RELEVANCY_N3} beside RAGAS's AnswerRelevancy (three draws each):")
    for case in cases:
        if len(set(case.draws)) > 1:
            print(
                f"  {case.id:<22} ours {show(ours[RELEVANCY_N3][case.id])}   "
                f"RAGAS {show(theirs['answer_relevancy'][case.id])}   ({case.note})"
            )
    print()
    if deepeval:
        theirs = {f"deepeval_{k}": v for k, v in run_deepeval(cases, script, deepeval).items()}
    source = "DeepEval FaithfulnessMetric (its code)" if deepeval else "DeepEval's formulas (here)"
    met = compare(cases, ours, theirs if deepeval else computed, DEEPEVAL_PAIRS, source) and met
    for name, python in (("RAGAS", ragas), ("DeepEval", deepeval)):
        if not python:
            print(f"\n{name} not run: no Python with it was given; compared with its formulas computed here.")
    verdict = "met" if met else "NOT met"
    print(f"\nbound: the same numbers wherever both score, every other difference documented: {verdict}")


if __name__ == "__main__":
    main()
