"""Print the scores the hand labels imply, per sample and per retriever, without the library's engine.

    python expected_scores.py

Computed straight from labels.jsonl, answer_labels.jsonl, the golden set's reference_context_ids and
the metric definitions, so the thresholds in tests/ can be checked by hand; the plugin's report should
show the same numbers when it replays judgments/.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from statistics import mean

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from ragapp.generator import generate, generate_weak  # noqa: E402
from ragapp.retriever import load_corpus, retrieve_docs, retrieve_ids, retrieve_weak_ids  # noqa: E402


def splitter():
    """The library's sentence splitter, or (until text.py exists) Punkt with the shipped parameters."""
    try:
        from pytest_ragmetrics import split_sentences

        return split_sentences
    except (ImportError, AttributeError):
        pass
    from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

    params = PunktParameters()
    try:
        from pytest_ragmetrics import _punkt

        params.abbrev_types = set(_punkt.ABBREVIATIONS)
        for w in _punkt.SENTENCE_STARTERS:
            params.sent_starters.add(w)
    except ImportError:
        params.abbrev_types = {"jan", "a.m", "p.m", "e.g", "i.e", "etc"}
    tok = PunktSentenceTokenizer(params)
    print("note: pytest_ragmetrics.split_sentences not available; using a Punkt fallback", file=sys.stderr)
    return tok.tokenize


def load_labels() -> dict:
    """labels.jsonl indexed by kind, then by (question, chunk) or, for recall, (question, contexts)."""
    from pytest_ragmetrics.calibration.labels import load_labels as load

    index: dict = {}
    for item in load(HERE / "labels.jsonl"):
        # Recall judges the contexts taken together: their order does not matter.
        key = (
            (item.question, frozenset(item.contexts))
            if item.kind == "context_recall"
            else (item.question, item.chunk)
        )
        index.setdefault(item.kind, {})[key] = item.label
    return index


def average_precision(useful: list[bool]) -> float:
    hits, total = 0, 0.0
    for k, u in enumerate(useful, start=1):
        if u:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def label_scores(doc_ids: list[str], grades: dict[str, int]) -> dict[str, float]:
    """The label metrics at k = 3 (the whole ranking) from the golden set's reference_context_ids."""
    relevant = [d for d in doc_ids if grades.get(d, 0) > 0]
    dcg = sum(grades.get(d, 0) / math.log2(rank + 1) for rank, d in enumerate(doc_ids, start=1))
    ideal = sorted(grades.values(), reverse=True)[: len(doc_ids)]
    idcg = sum(g / math.log2(rank + 1) for rank, g in enumerate(ideal, start=1))
    first = next((rank for rank, d in enumerate(doc_ids, start=1) if grades.get(d, 0) > 0), None)
    return {
        "hit@1": float(bool(doc_ids) and grades.get(doc_ids[0], 0) > 0),
        "recall@3": len(relevant) / sum(1 for g in grades.values() if g > 0),
        "mrr": 1 / first if first else 0.0,
        "ndcg@3": dcg / idcg,
    }


def scores(question: str, doc_ids: list[str], labels: dict, split) -> dict[str, float]:
    texts = {d.id: d.text for d in load_corpus()}
    chunks = [texts[d] for d in doc_ids]
    useful = [labels["context_precision"][(question, c)] for c in chunks]
    ratings = [labels["context_relevance_graded"][(question, c)] for c in chunks]
    needed = [labels["context_relevance_sentences"][(question, c)] for c in chunks]
    attributed = labels["context_recall"][(question, frozenset(chunks))]
    n_sent = sum(len(split(c)) for c in chunks)
    return {
        "recall": sum(attributed) / len(attributed),
        "precision": average_precision(useful),
        "graded": mean(r / 2 for r in ratings),
        "sentence": sum(len(n) for n in needed) / n_sent,
        "binary": mean(bool(n) for n in needed),
    }


def table() -> dict[str, dict[str, dict[str, float]]]:
    labels = load_labels()
    split = splitter()
    golden = [json.loads(line) for line in (HERE / "golden.jsonl").read_text().splitlines() if line.strip()]
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, fn in (("bm25", retrieve_ids), ("weak", retrieve_weak_ids)):
        out[name] = {
            g["id"]: scores(g["question"], ids, labels, split) | label_scores(ids, g["reference_context_ids"])
            for g in golden
            for ids in [fn(g["question"])]
        }
    return out


def answer_scores(golden: list[dict], split) -> dict[str, dict[str, dict[str, float]]]:
    """Per generator and question: faithfulness (both methods), answer relevancy and correctness."""
    rows = [
        json.loads(line) for line in (HERE / "answer_labels.jsonl").read_text().splitlines() if line.strip()
    ]
    labelled = (HERE / "labels.jsonl").read_text().splitlines()
    rows += [r for r in map(json.loads, labelled) if r["kind"] == "claim_verdicts"]
    claims = {r["sentence"]: r["claims"] for r in rows if r["kind"] == "claims"}
    verdicts: dict = {}  # (claim, evidence) -> verdict; evidence: the contexts as a set, or a text
    for r in rows:
        if r["kind"] == "claim_verdicts":
            evidence = frozenset(r["contexts"]) if "contexts" in r else r["text"]
            for claim, verdict in zip(r["claims"], r["verdicts"], strict=True):
                verdicts[claim, evidence] = verdict
    rating = {(r["question"], r["answer"]): r["rating"] for r in rows if r["kind"] == "answer_relevancy"}

    def claims_of(text: str) -> list[str]:
        return [c for sentence in split(text) for c in claims[sentence]]

    out: dict[str, dict[str, dict[str, float]]] = {}
    for name, generator in (("generate", generate), ("generate_weak", generate_weak)):
        out[name] = {}
        for g in golden:
            docs = retrieve_docs(g["question"])
            answer = generator(g["question"], docs)
            found = [verdicts[c, frozenset(d.text for d in docs)] for c in claims_of(answer)]
            r = out[name][g["id"]] = {
                "faithfulness": found.count("supported") / len(found),
                "not_contradicted": (len(found) - found.count("contradicted")) / len(found),
            }
            tp = [verdicts[c, g["ground_truth"]] for c in claims_of(answer)].count("supported")
            fp = len(claims_of(answer)) - tp
            fn = [verdicts[c, answer] for c in claims_of(g["ground_truth"])].count("supported")
            fn = len(claims_of(g["ground_truth"])) - fn
            precision = tp / (tp + fp) if tp + fp else 0.0
            recall = tp / (tp + fn) if tp + fn else 0.0
            r["relevancy"] = rating[g["question"], answer] / 2
            r["precision"], r["recall"] = precision, recall
            r["f1"] = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return out


def main() -> None:
    golden = [json.loads(line) for line in (HERE / "golden.jsonl").read_text().splitlines() if line.strip()]
    for name, rows in table().items():
        fn = retrieve_ids if name == "bm25" else retrieve_weak_ids
        print(
            f"\n{name}:  id   recall precision graded sentence binary "
            "| hit@1 recall@3  mrr  ndcg@3  retrieved"
        )
        for g in golden:
            r = rows[g["id"]]
            ids = fn(g["question"])
            print(
                f"       {g['id']}  {r['recall']:.3f}  {r['precision']:.3f}    {r['graded']:.3f}  "
                f"{r['sentence']:.3f}    {r['binary']:.3f}  | {r['hit@1']:.0f}     {r['recall@3']:.3f}  "
                f"{r['mrr']:.3f} {r['ndcg@3']:.3f}   {ids}"
            )
        judged = ("recall", "precision", "graded", "sentence", "binary")
        for m in (*judged, "hit@1", "recall@3", "mrr", "ndcg@3"):
            vals = sorted(r[m] for r in rows.values())
            n = len(vals)
            # quantile with linear interpolation (numpy's default)
            pos = 0.1 * (n - 1)
            q10 = vals[int(pos)] + (vals[min(int(pos) + 1, n - 1)] - vals[int(pos)]) * (pos - int(pos))
            print(
                f"  {m:9s} mean={mean(vals):.3f} min={vals[0]:.3f} q10={q10:.3f} "
                f"pass_rate(0.8)={sum(v >= 0.8 for v in vals) / n:.3f}"
            )

    for name, rows in answer_scores(golden, splitter()).items():
        metrics = list(next(iter(rows.values())))
        print(f"\nanswers of {name}:  id   " + " ".join(f"{m:>16}" for m in metrics))
        for g in golden:
            print(f"       {g['id']}  " + " ".join(f"{rows[g['id']][m]:>16.3f}" for m in metrics))
        for m in metrics:
            vals = sorted(r[m] for r in rows.values())
            print(f"  {m:16s} mean={mean(vals):.3f} min={vals[0]:.3f}")


if __name__ == "__main__":
    main()
