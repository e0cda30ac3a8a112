"""Tokens per sample of the answer metrics, side by side with RAGAS 0.4's equivalents.

    python benchmarks/bench_answer_tokens.py [--ragas-python PATH] [--samples 15]

Ours: ``faithfulness``, ``answer_relevancy`` and ``answer_correctness`` (f1), each through
``evaluate()`` with a cold cache. RAGAS 0.4 (``ragas.metrics.collections``, defaults): Faithfulness,
AnswerRelevancy (three generated questions and an embedding model) and FactualCorrectness (mode f1).
The samples are the example project's golden set: its questions and references, the articles its BM25
retriever returns and the answers its generator composes from them.

Both sides talk to local OpenAI-compatible fake servers on 127.0.0.1 that answer in each side's
schema with the same content: the claims of a text are its sentences, each verdict carries the same
short reason, RAGAS's generated question is the sample's own question. Tokens are counted the same
way for both, one per four characters (as ``pytest_ragmetrics.testing``'s server counts them): the
prompt is every message's text plus the JSON schema sent in ``response_format`` (a real server counts
that schema as input too; RAGAS writes its schema into the prompt instead), the completion is the
answer's text. RAGAS's embedding requests are counted the same way, one per four characters of the
texts embedded, and shown separately.

RAGAS is not a dependency of this project: it runs in an environment of its own, whose Python is
given with ``--ragas-python`` (or ``RAGAS_PYTHON``); see benchmarks/README.md for how to make one.
Without it the script prints our figures alone and says so. Nothing here uses the network.

The bound: for each metric, our tokens per sample are at most RAGAS's (ratio ours / RAGAS <= 1.0).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from _peers import EmbeddingServer, peer_python, run_side

from pytest_ragmetrics import Evaluator, RagSample, Settings
from pytest_ragmetrics.testing import FakeJudgeServer, RecordedRequest

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parent / "example_project"
sys.path.insert(0, str(EXAMPLE))

from ragapp.generator import generate, sentences  # noqa: E402
from ragapp.retriever import retrieve_docs  # noqa: E402

#: Our metric, RAGAS's equivalent, and the name the RAGAS side knows it by.
METRICS = (
    ("faithfulness", "Faithfulness", "faithfulness"),
    ("answer_relevancy", "AnswerRelevancy", "answer_relevancy"),
    ("answer_correctness", "FactualCorrectness (f1)", "factual_correctness"),
)
CHARS_PER_TOKEN = 4
SUPPORTED = "The context states this."
NOT_SUPPORTED = "The context does not state this."


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


# --- the samples --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    id: str
    question: str
    contexts: list[str]
    answer: str
    ground_truth: str


def load_samples(count: int) -> list[Sample]:
    out = []
    with (EXAMPLE / "golden.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            docs = retrieve_docs(row["question"])
            answer = generate(row["question"], docs)
            out.append(
                Sample(row["id"], row["question"], [d.text for d in docs], answer, row["ground_truth"])
            )
    return out[:count]


# --- what both fake judges answer ----------------------------------------------------------------


def claims_of(text: str) -> list[str]:
    """The claims both judges give for a text: its sentences."""
    return sentences(text)


def squash(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def supported(claim: str, evidence: str) -> bool:
    return squash(claim).rstrip(".") in squash(evidence)


def verdict_reason(claim: str, evidence: str) -> tuple[bool, str]:
    ok = supported(claim, evidence)
    return ok, SUPPORTED if ok else NOT_SUPPORTED


_RAGAS_INPUT = re.compile(r"input: (\{.*\})\s*Output: *$", re.DOTALL)


def ragas_responder(questions: Mapping[str, str]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Answers RAGAS's prompts (instructor's JSON mode: the output schema is in the prompt)."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        text = "\n".join(str(m.get("content", "")) for m in body["messages"])
        match = _RAGAS_INPUT.search(text)
        if match is None:
            raise ValueError(f"not a RAGAS prompt: {text[-300:]!r}")
        data = json.loads(match.group(1))
        if '"title": "StatementGeneratorOutput"' in text:
            return {"statements": claims_of(data["answer"])}
        if '"title": "ClaimDecompositionOutput"' in text:
            return {"claims": claims_of(data["response"])}
        if '"title": "NLIStatementOutput"' in text:
            out = []
            for statement in data["statements"]:
                ok, reason = verdict_reason(statement, data["context"])
                out.append({"statement": statement, "reason": reason, "verdict": int(ok)})
            return {"statements": out}
        if '"title": "AnswerRelevanceOutput"' in text:
            return {"question": questions[data["response"]], "noncommittal": 0}
        raise ValueError(f"unknown RAGAS prompt: {text[:300]!r}")

    return respond


def our_responder(body: dict[str, Any]) -> dict[str, Any]:
    """Answers our judge's requests: the material is the user message's JSON document."""
    data = json.loads(body["messages"][-1]["content"])
    if "sentences" in data:  # the claims of a text, per numbered sentence
        return {f"sentence_{n}": {"claims": claims_of(s)} for n, s in data["sentences"].items()}
    if "claims" in data:  # verdicts against the numbered contexts, or against one text
        contexts = data.get("contexts")
        evidence = "\n".join(contexts.values()) if contexts else data["text"]
        out: dict[str, Any] = {}
        for n, claim in data["claims"].items():
            ok, reason = verdict_reason(claim, evidence)
            verdict: dict[str, Any] = {"reason": reason, "verdict": "supported" if ok else "not_found"}
            if contexts:
                verdict["chunks"] = [int(k) for k, c in contexts.items() if supported(claim, c)]
            out[f"claim_{n}"] = verdict
        return out
    if "question" in data and "answer" in data:  # answer relevancy
        return {"reason": "The answer addresses the question.", "committal": True, "rating": 2}
    raise ValueError(f"unknown request: {sorted(data)}")


# --- counting ------------------------------------------------------------------------------------


def prompt_chars(body: Mapping[str, Any]) -> int:
    chars = sum(len(str(m.get("content", ""))) for m in body.get("messages") or [])
    response_format = body.get("response_format") or {}
    if response_format.get("type") == "json_schema":
        chars += len(json.dumps(response_format["json_schema"]))
    return chars


def request_tokens(request: RecordedRequest, responder: Callable[[dict[str, Any]], Any]) -> tuple[int, int]:
    """(prompt, completion) tokens of one chat request: the responders are pure, so the answer the
    server sent is recomputed from the request."""
    answer = responder(request.body)
    content = answer if isinstance(answer, str) else json.dumps(answer)
    return tokens(prompt_chars(request.body)), tokens(len(content))


#: The length of the embedding server's vectors.
DIMENSIONS = 64


def vector(text: str) -> list[float]:
    """A deterministic vector per text."""
    digest = hashlib.sha256(text.encode()).digest() * 2
    return [b / 255.0 for b in digest[:DIMENSIONS]]


# --- the two sides -------------------------------------------------------------------------------


@dataclass
class Figures:
    calls: int = 0
    prompt: int = 0
    completion: int = 0
    embedding: int = 0
    samples: int = 0
    scores: list[float] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.prompt + self.completion + self.embedding

    def per_sample(self, value: int) -> float:
        return value / self.samples if self.samples else 0.0

    @property
    def mean_score(self) -> float:
        return sum(self.scores) / len(self.scores) if self.scores else float("nan")


def run_ours(samples: list[Sample]) -> dict[str, Figures]:
    """Each metric alone, each sample alone, with a cold cache: nothing is shared between them."""
    figures: dict[str, Figures] = {}
    with FakeJudgeServer(our_responder) as server, tempfile.TemporaryDirectory() as tmp:
        os.environ["OPENAI_API_KEY"] = "sk-bench"
        for ours, _, _ in METRICS:
            fig = figures[ours] = Figures()
            for sample in samples:
                before = len(server.requests)
                settings = Settings(
                    judge_base_url=server.base_url, cache_dir=str(Path(tmp) / f"{ours}-{sample.id}")
                )
                rag = RagSample(
                    sample.question,
                    sample.contexts,
                    answer=sample.answer,
                    ground_truth=sample.ground_truth,
                    id=sample.id,
                )
                with Evaluator(settings) as evaluator:
                    result = evaluator.evaluate([rag], metrics=[ours])
                fig.scores += [s for s in result.scores(ours) if isinstance(s, float)]
                for request in server.requests[before:]:
                    prompt, completion = request_tokens(request, our_responder)
                    fig.calls += 1
                    fig.prompt += prompt
                    fig.completion += completion
                fig.samples += 1
    return figures


def run_ragas(samples: list[Sample], python: str) -> dict[str, Figures]:
    questions = {s.answer: s.question for s in samples}
    responder = ragas_responder(questions)
    with FakeJudgeServer(responder) as chat, EmbeddingServer(vector) as embeddings:
        job = {
            "chat_url": chat.base_url,
            "embeddings_url": embeddings.base_url,
            "metrics": [name for _, _, name in METRICS],
            "samples": [s.__dict__ for s in samples],
        }
        scores = run_side("RAGAS", python, "_ragas_side.py", job, timeout=600)
        by_name = {name: ours for ours, _, name in METRICS}
        figures = {ours: Figures(samples=len(samples)) for ours, _, _ in METRICS}
        for request in chat.requests:
            if request.method != "POST":
                continue
            metric = by_name[request.headers.get("x-bench", "").split("/")[0]]
            prompt, completion = request_tokens(request, responder)
            figures[metric].calls += 1
            figures[metric].prompt += prompt
            figures[metric].completion += completion
        for tag, chars in embeddings.log:
            figures[by_name[tag.split("/")[0]]].embedding += tokens(chars)
        for name, values in scores.items():
            figures[by_name[name]].scores = list(values.values())
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--ragas-python", help="the Python of an environment with ragas 0.4 (or RAGAS_PYTHON)"
    )
    parser.add_argument("--samples", type=int, default=15)
    args = parser.parse_args()
    samples = load_samples(args.samples)
    python = peer_python(args.ragas_python, "RAGAS_PYTHON", "ragas")
    ours = run_ours(samples)
    theirs = run_ragas(samples, python) if python else None

    print(f"{len(samples)} samples of the example project; per sample: tokens (one per 4 characters), calls")
    columns = ("ours", "tokens", "calls", "RAGAS 0.4", "LLM", "embed", "total", "calls", "ratio")
    print("{:<20} {:>7} {:>5}   {:<25} {:>6} {:>6} {:>6} {:>5}   {:>5}".format(*columns))
    met = True
    for name, ragas_name, _ in METRICS:
        o = ours[name]
        line = f"{name:<20} {o.per_sample(o.total):>7.0f} {o.per_sample(o.calls):>5.1f}   {ragas_name:<25}"
        if theirs is not None:
            t = theirs[name]
            ratio = o.total / t.total
            met = met and ratio <= 1.0
            line += (
                f" {t.per_sample(t.prompt + t.completion):>6.0f} {t.per_sample(t.embedding):>6.0f}"
                f" {t.per_sample(t.total):>6.0f} {t.per_sample(t.calls):>5.1f}   {ratio:>5.2f}"
            )
        print(line)
    print("\nmean scores (the fake judges' answers, read by each side):")
    for name, ragas_name, _ in METRICS:
        line = f"  {name:<20} {ours[name].mean_score:.3f}"
        if theirs is not None:
            line += f"   {ragas_name:<25} {theirs[name].mean_score:.3f}"
        print(line)
    if theirs is None:
        print(
            "\nRAGAS not measured: no Python with ragas 0.4 was given (--ragas-python or RAGAS_PYTHON).\n"
            "Make one as benchmarks/README.md says; until then only our figures are shown."
        )
        return
    print(f"\nbound: ours / RAGAS <= 1.0 for every metric: {'met' if met else 'NOT met'}")


if __name__ == "__main__":
    main()
