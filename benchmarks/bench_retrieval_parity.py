"""Our context precision and context recall against RAGAS 0.4's own code, on the same verdicts.

    python benchmarks/bench_retrieval_parity.py [--ragas-python PATH] [--random 24] [--seed 17]

Each case is a question, contexts and a reference, with a script of what a judge says of them:
which chunks are useful for arriving at the reference, and which reference sentences the contexts
support. Local fake servers on 127.0.0.1 answer both sides from that one script, each in its own
schema: our judge's requests (a chunk's usefulness; the reference sentences, numbered by our
splitter, attributed or not), and RAGAS's prompts (a chunk's 0/1 verdict; its classifications of the
reference's statements are our sentences, attributed 1 or 0). An empty chunk is not useful, as the
judge says of it. The cases are hand-made edge cases (a single chunk, duplicate chunks, empty
chunks, no contexts, an empty or blank reference, a perfect ranking, a reference long enough to be
judged in windows, a sentence of two claims, a sentence of none) and seeded random ones.

Compared: ``context_precision`` with RAGAS's ContextPrecision (``ragas.metrics.collections``) and
LLMContextPrecisionWithReference (``ragas.metrics``, the one ``ragas.evaluate()`` takes), and
``context_recall`` with ContextRecall and LLMContextRecall, whose statements are our sentences;
``context_recall[claims]`` with the same two, their statements then the claims our judge is told
of each sentence (RAGAS's judge writes statements as it sees fit: a sentence may make several);
``context_precision (answer)``, ours of the same sample with no ground truth and the reference as
its answer, with ContextUtilization and LLMContextPrecisionWithoutReference.

RAGAS is not a dependency of this project: it runs in an environment of its own, whose Python is
given with ``--ragas-python`` (or ``RAGAS_PYTHON``); see benchmarks/README.md. Without it, ours are
compared with the numbers RAGAS's published formulas give for the same verdicts, computed here.
Nothing here uses the network.

The bound: wherever both sides give a number they agree (to 1e-9: RAGAS adds 1e-10 to precision's
denominator), both refuse the same cases, and every other case is marked in its ``documented`` as a
difference ``docs/metrics.md`` states.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _peers import peer_python, run_side, show

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.testing import FakeJudgeServer
from pytest_ragmetrics.text import split_sentences

METRICS = ("context_precision", "context_recall", "context_recall[claims]")
#: Context precision of the same sample with its reference given as its answer and no ground truth.
WITHOUT_REFERENCE = "context_precision (answer)"
#: Every figure of ours.
ALL = (*METRICS, WITHOUT_REFERENCE)


@dataclass
class Case:
    """A sample and the judge's script for it: ``useful`` the chunks useful for the reference,
    ``reference`` its sentences as our splitter numbers them, each attributed to the contexts or not."""

    id: str
    question: str
    contexts: list[str]
    useful: frozenset[str]
    reference: list[tuple[str, bool]]
    #: The reference as the sample gives it, when it is not its sentences joined by spaces.
    text: str | None = None
    #: Each reference sentence's claims and whether the contexts support each, for recall by
    #: claims (RAGAS's statements); a sentence not listed is one claim, itself, attributed as it is.
    claims: dict[str, list[tuple[str, bool]]] = field(default_factory=dict)
    note: str = ""
    #: Our metrics on which the case is scored differently by a choice docs/metrics.md states.
    documented: tuple[str, ...] = ()

    @property
    def reference_text(self) -> str:
        return " ".join(s for s, _ in self.reference) if self.text is None else self.text

    def claims_of(self, sentence: str) -> list[tuple[str, bool]]:
        attributed = dict(self.reference)[sentence]
        return self.claims.get(sentence, [(sentence, attributed)])

    def all_claims(self) -> list[tuple[str, bool]]:
        return [c for s, _ in self.reference for c in self.claims_of(s)]


def hand_cases() -> list[Case]:
    def facts(name: str) -> tuple[str, str, str]:
        return (
            f"The {name} opened in 1932.",
            f"The {name} is 2 km long.",
            f"The {name} has a souvenir shop.",
        )

    def reference(name: str, *attributed: bool) -> list[tuple[str, bool]]:
        sentences = [f"The {name} opened in 1932.", "It is 2 km long.", "It carries a railway."]
        return list(zip(sentences, attributed, strict=False))

    cases = []
    a, b, c = facts("single bridge")
    cases.append(
        Case("single-useful", "When did the single bridge open?", [a], frozenset([a]),
             reference("single bridge", True))
    )  # fmt: skip
    a, b, c = facts("lone bridge")
    cases.append(
        Case("single-not-useful", "When did the lone bridge open?", [c], frozenset(),
             reference("lone bridge", False))
    )  # fmt: skip
    a, b, c = facts("twin bridge")
    cases.append(
        Case("duplicate-chunks", "When did the twin bridge open?", [a, a, c], frozenset([a]),
             reference("twin bridge", True, False), note="the same chunk twice at the top")
    )  # fmt: skip
    a, b, c = facts("echo bridge")
    cases.append(
        Case("duplicate-late", "How long is the echo bridge?", [c, b, c, b], frozenset([b]),
             reference("echo bridge", False, True), note="duplicates below a chunk not useful")
    )  # fmt: skip
    a, b, c = facts("gap bridge")
    cases.append(
        Case("empty-chunk", "When did the gap bridge open?", ["", a, "  "], frozenset([a]),
             reference("gap bridge", True, False), note="empty chunks around a useful one")
    )  # fmt: skip
    cases.append(
        Case("only-empty-chunks", "When did the void bridge open?", ["", " \n "], frozenset(),
             reference("void bridge", False, False), note="nothing but empty chunks")
    )  # fmt: skip
    cases.append(
        Case("no-contexts", "When did the null bridge open?", [], frozenset(),
             reference("null bridge", False), note="nothing retrieved",
             documented=ALL)
    )  # fmt: skip
    a, b, c = facts("blank bridge")
    cases.append(
        Case("empty-reference", "When did the blank bridge open?", [a, c], frozenset(), [], text="",
             note="a reference of nothing", documented=ALL)
    )  # fmt: skip
    a, b, c = facts("space bridge")
    cases.append(
        Case("blank-reference", "When did the space bridge open?", [a, c], frozenset(), [], text=" \n ",
             note="a reference of spaces", documented=ALL)
    )  # fmt: skip
    a, b, c = facts("dot bridge")
    cases.append(
        Case("punctuation-reference", "When did the dot bridge open?", [a, c], frozenset(), [],
             text="...", note="a reference of punctuation", documented=METRICS[1:])
    )  # fmt: skip
    a, b, c = facts("top bridge")
    cases.append(
        Case("perfect-ranking", "What of the top bridge?", [a, b, c], frozenset([a, b]),
             reference("top bridge", True, True, False), note="1.0 here; 1 - 5e-11 in RAGAS")
    )  # fmt: skip
    a, b, c = facts("dull bridge")
    cases.append(
        Case("none-useful", "What of the dull bridge?", [c, c + " Really."], frozenset(),
             reference("dull bridge", False, False))
    )  # fmt: skip
    a, b, c = facts("mixed bridge")
    cases.append(
        Case("list-reference", "What of the mixed bridge?", [c, a, b], frozenset([a, b]),
             [("The mixed bridge opened in 1932.", True), ("It is 2 km long.", True),
              ("It carries a railway.", False)],
             text="- The mixed bridge opened in 1932.\n- It is 2 km long.\n- It carries a railway.",
             note="a reference written as a bulleted list")
    )  # fmt: skip
    compound = "The delta bridge is in the delta and its toll is 2 euros."
    cases.append(
        Case("compound-sentence", "Where is the delta bridge?", ["The delta bridge is in the delta."],
             frozenset(["The delta bridge is in the delta."]), [(compound, False)],
             claims={compound: [("The delta bridge is in the delta.", True),
                                ("The toll of the delta bridge is 2 euros.", False)]},
             note="two claims in one sentence, one attributed: 0.5 by claims, 0 by sentence")
    )  # fmt: skip
    empty = "Nobody knows more."
    cases.append(
        Case("sentence-without-claims", "What of the fjord bridge?", ["The fjord bridge opened in 1932."],
             frozenset(["The fjord bridge opened in 1932."]),
             [("The fjord bridge opened in 1932.", True), (empty, False)], claims={empty: []},
             note="a reference sentence with no claim: one unsupported claim here, nothing in RAGAS",
             documented=("context_recall[claims]",))
    )  # fmt: skip
    long = [(f"Pier fact {i} holds for the long pier.", i % 3 != 0) for i in range(35)]
    cases.append(
        Case("long-reference", "What holds for the long pier?",
             ["Long pier chunk one.", "Long pier chunk two."], frozenset(["Long pier chunk two."]), long,
             note="35 sentences: judged in two windows here")
    )  # fmt: skip
    return cases


def random_cases(count: int, seed: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for n in range(count):
        name = f"r{n:02d}"
        chunks = [f"Tower {name} chunk {k} says much." for k in range(rng.randint(1, 6))]
        contexts = [rng.choice(chunks) if rng.random() < 0.15 else chunk for chunk in chunks]
        useful = frozenset(c for c in chunks if rng.random() < 0.4)
        reference = [(f"Tower {name} truth {i} is so.", rng.random() < 0.6) for i in range(rng.randint(1, 6))]
        claims = {}
        for i, (sentence, _) in enumerate(reference):
            count = rng.randint(1, 3)
            made = [f"Tower {name} truth {i}{k} is so." for k in "abc"[:count]]
            claims[sentence] = [(claim, rng.random() < 0.6) for claim in made]
        out.append(Case(name, f"What holds for tower {name}?", contexts, useful, reference, claims=claims))
    return out


# --- what the judges answer ----------------------------------------------------------------------


def squash(text: str) -> str:
    return " ".join(text.split())


class Script:
    """Looks a case up by its question, which every request of both sides carries. ``claims``: RAGAS's
    statements of a reference are its claims (recall by claims), else its sentences."""

    def __init__(self, cases: list[Case], claims: bool = False) -> None:
        self.by_claims = claims
        self.by_question = {squash(c.question): c for c in cases}
        if len(self.by_question) != len(cases):
            raise SystemExit("two cases share a question: the judges could not tell them apart")

    def ours(self, body: dict[str, Any]) -> dict[str, Any]:
        data = json.loads(body["messages"][-1]["content"])
        case = self.by_question[squash(data["question"])]
        if "chunk" in data:
            useful = squash(data["chunk"]) in {squash(u) for u in case.useful}
            return {"reason": "scripted", "useful": useful}
        sentences = {squash(s): s for s, _ in case.reference}
        if '"claims"' in json.dumps(body.get("response_format")):  # recall by claims
            return {
                f"sentence_{n}": {
                    "claims": [
                        {"claim": c, "reason": "scripted", "attributed": a}
                        for c, a in case.claims_of(sentences[squash(s)])
                    ]
                }
                for n, s in data["reference_sentences"].items()
            }
        attributed = {squash(s): a for s, a in case.reference}
        return {
            f"sentence_{n}": {"reason": "scripted", "attributed": attributed[squash(s)]}
            for n, s in data["reference_sentences"].items()
        }

    def ragas(self, body: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        marker = text.rfind("input: ")
        data = json.loads(text[marker + len("input: ") : text.rstrip().rfind("Output:")])
        case = self.by_question[squash(data["question"])]
        if '"title": "ContextPrecisionOutput"' in text or '"title": "Verification"' in text:
            useful = squash(data["context"]) in {squash(u) for u in case.useful}
            return {"reason": "scripted", "verdict": int(useful)}
        if '"title": "ContextRecallOutput"' in text or '"title": "ContextRecallClassifications"' in text:
            statements = case.all_claims() if self.by_claims else case.reference
            return {
                "classifications": [
                    {"statement": s, "reason": "scripted", "attributed": int(a)} for s, a in statements
                ]
            }
        raise ValueError(f"unknown RAGAS prompt: {text[:200]!r}")


# --- the two sides -------------------------------------------------------------------------------

PAIRS = (
    ("context_precision", "context_precision"),
    ("context_recall", "context_recall"),
    ("context_recall[claims]", "context_recall_claims"),
    (WITHOUT_REFERENCE, "context_utilization"),
)
LEGACY_PAIRS = tuple((ours, f"legacy_{theirs}") for ours, theirs in PAIRS)


def run_ours(cases: list[Case], script: Script) -> dict[str, dict[str, Any]]:
    """Each case alone, each metric: a number or an error."""
    out: dict[str, dict[str, Any]] = {name: {} for name in (*METRICS, WITHOUT_REFERENCE)}
    os.environ["OPENAI_API_KEY"] = "sk-bench"
    with FakeJudgeServer(script.ours) as server, tempfile.TemporaryDirectory() as tmp:
        settings = Settings(judge_base_url=server.base_url, cache_dir=str(Path(tmp) / "cache"))
        with Evaluator(settings) as evaluator:
            for case in cases:
                sample = RagSample(case.question, case.contexts, ground_truth=case.reference_text, id=case.id)
                answered = RagSample(case.question, case.contexts, answer=case.reference_text, id=case.id)
                for name, given, metric in (
                    *((name, sample, name) for name in METRICS),
                    (WITHOUT_REFERENCE, answered, "context_precision"),
                ):
                    try:
                        result = evaluator.evaluate([given], metrics=[metric])[case.id][metric]
                    except RagMetricsError as exc:
                        out[name][case.id] = f"error: {type(exc).__name__}: {str(exc)[:80]}"
                        continue
                    out[name][case.id] = result.score
    return out


def run_ragas(cases: list[Case], python: str) -> dict[str, dict[str, Any]]:
    """RAGAS's scores: once with its statements the reference's sentences, once its claims (to
    compare with recall by claims, as ``_claims``)."""
    result: dict[str, dict[str, Any]] = {}
    for claims, metrics in ((False, None), (True, ["context_recall", "legacy_context_recall"])):
        with FakeJudgeServer(Script(cases, claims).ragas) as chat:
            job: dict[str, Any] = {
                "chat_url": chat.base_url,
                "cases": [
                    {"id": c.id, "question": c.question, "contexts": c.contexts}
                    | {"reference": c.reference_text}
                    for c in cases
                ],
            }
            if metrics:
                job["metrics"] = metrics
            scores = run_side("RAGAS", python, "_ragas_retrieval_side.py", job, timeout=900)
        result.update({name + ("_claims" if claims else ""): v for name, v in scores.items()})
    return result


def formulas(case: Case) -> dict[str, Any]:
    """What RAGAS 0.4's code computes from the case's verdicts, written out here: ContextPrecision and
    ContextRecall refuse an empty question, reference or list of contexts (``ValueError``), recall
    without a classification is NaN; precision is Σ precision@k · v_k / (Σ v_k + 1e-10). The older
    metrics refuse nothing."""
    verdicts = [int(squash(c) in {squash(u) for u in case.useful}) for c in case.contexts]
    precision = sum(sum(verdicts[: i + 1]) / (i + 1) * v for i, v in enumerate(verdicts)) / (
        sum(verdicts) + 1e-10
    )
    recalls: dict[str, Any] = {}
    by = (("context_recall", case.reference), ("context_recall_claims", case.all_claims()))
    for name, statements in by:
        attributed = [a for _, a in statements]
        recalls[name] = sum(attributed) / len(attributed) if attributed else "nan"
    out: dict[str, Any] = {"legacy_context_precision": precision, "legacy_context_utilization": precision}
    out.update({f"legacy_{name}": value for name, value in recalls.items()})
    if not case.reference_text or not case.contexts:
        refused = "error: ValueError (empty reference or contexts)"
        return {**out, **dict.fromkeys(["context_precision", "context_utilization", *recalls], refused)}
    return {**out, "context_precision": precision, "context_utilization": precision, **recalls}


# --- comparing -----------------------------------------------------------------------------------


def compare(
    cases: list[Case],
    ours: Mapping[str, Mapping[str, Any]],
    theirs: Mapping[str, Mapping[str, Any]],
    pairs: tuple[tuple[str, str], ...],
    source: str,
) -> bool:
    """Print the agreement per metric; true when every difference is one the docs state."""
    met = True
    print(f"{'ours':<27} {source:<42} {'cases':>5} {'both':>5} {'refuse':>6} {'max |diff|':>10}")
    differences: list[str] = []
    for mine, other in pairs:
        both, refused, worst = 0, 0, 0.0
        for case in cases:
            a, b = ours[mine][case.id], theirs[other][case.id]
            documented = mine in case.documented
            if isinstance(a, float) and isinstance(b, float):
                if abs(a - b) <= 1e-9:
                    both += 1
                    worst = max(worst, abs(a - b))
                    continue
            elif str(a).startswith("error: ") and str(b).startswith("error: "):
                refused += 1
                continue
            met = met and documented
            label = "documented" if documented else "NOT DOCUMENTED"
            differences.append(f"  {case.id:<24} {mine:<27} {show(a):<22} {other:<29} {show(b):<18} {label}")
        print(f"{mine:<27} {other:<42} {len(cases):>5} {both:>5} {refused:>6} {worst:>10.2g}")
    print(f"cases scored differently ({len(differences)}):")
    print("\n".join(differences))
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ragas-python", help="the Python of an environment with ragas 0.4 (or RAGAS_PYTHON)"
    )
    parser.add_argument(
        "--random", type=int, default=24, help="seeded random cases beside the hand-made ones"
    )
    parser.add_argument("--seed", type=int, default=17)
    args = parser.parse_args()
    cases = hand_cases() + random_cases(args.random, args.seed)
    for case in cases:  # the script answers per sentence: our splitter must see the sentences written
        if [squash(s) for s in split_sentences(case.reference_text)] != [s for s, _ in case.reference]:
            raise SystemExit(f"case {case.id}: the reference does not split into its scripted sentences")
    script = Script(cases)
    ours = run_ours(cases, script)
    computed: dict[str, dict[str, Any]] = {}
    for case in cases:
        for name, value in formulas(case).items():
            computed.setdefault(name, {})[case.id] = value
    ragas = peer_python(args.ragas_python, "RAGAS_PYTHON", "ragas")
    hand = len(cases) - args.random
    print(f"{len(cases)} cases ({hand} hand-made, {args.random} random, seed {args.seed})")
    print("(both: the same number; refuse: both refuse the case)\n")
    theirs = run_ragas(cases, ragas) if ragas else computed
    met = compare(cases, ours, theirs, PAIRS, "RAGAS 0.4 (its code)" if ragas else "RAGAS's formulas (here)")
    print()
    source = "RAGAS 0.4 ragas.metrics (its code)" if ragas else "ragas.metrics' formulas (here)"
    met = compare(cases, ours, theirs, LEGACY_PAIRS, source) and met
    if not ragas:
        print("\nRAGAS not run: no Python with it was given; compared with its formulas computed here.")
    verdict = "met" if met else "NOT met"
    print(f"\nbound: the same numbers wherever both score, every other difference documented: {verdict}")


if __name__ == "__main__":
    main()
