"""Sentence-splitting speed of the default splitter on realistic chunks.

Splits 1,000 distinct chunks (so the splitter's span cache never helps) of two kinds and prints the
time per chunk and per 100 words:

* ``mixed``: about 640 characters (about 120 words) of prose with abbreviations, numbers,
  quotations, an e-mail address and a URL, an ellipsis, a list flattened onto one line, and a few
  line breaks;
* ``abbreviations``: about 510 characters (about 120 words) dense with ``Dr.``, ``p.m.``, ``Jan.``,
  ``U.S.``, ``e.g.`` and decimals, where Punkt has the most periods to judge.

Bound: 0.5 ms per 100 words of CPU time (process time, which a busy shared machine distorts less
than wall time; both are printed). Each figure is the median of ``--repeat`` runs; a fresh splitter
is used for every run.

    python benchmarks/bench_splitter.py [--chunks 1000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from pytest_ragmetrics.text import PunktSplitter

BOUND_MS_PER_100_WORDS = 0.5

SENTENCES = [
    "Dr. Smith joined the lab at 9 a.m. on Jan. 5 and left at noon.",
    "The U.S. Army ordered 3.5 million rounds in 2021.",
    "Results are in Fig. 4, see also pp. 10-12 of Vol. 2.",
    'She said "the pump is broken." Nobody answered.',
    "The valve (model no. 7) failed twice; it was replaced.",
    "Install version 2.4.1 or later, e.g. with pip.",
    "Why would anyone do that? Nobody knows!",
    "Supported formats: 1) CSV 2) JSON 3) Parquet.",
    "The price rose by 12.5% to $3.20 per unit.",
    "Contact support@example.com or visit https://example.com/help for details.",
    "He paused . . . and then he continued.",
    "Acme Inc. reported revenue of 4.2 bn. in Q3.",
    "The committee met in St. Louis, Mo., last week.",
    "It works with Python, Rust, Go, etc. but not with Perl.",
]
DENSE = ["Dr. Smith came at 5 p.m. on Jan. 5.", "The U.S. Army is large.", "It has 3.5 m, e.g. here."]


def mixed_chunks(count: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    chunks = []
    for i in range(count):
        parts: list[str] = [f"Section {i}."]
        while sum(len(p) + 1 for p in parts) < 620:
            parts.append(rng.choice(SENTENCES))
            if rng.random() < 0.15:
                parts.append("\n")
        chunks.append(" ".join(parts).replace(" \n ", "\n"))
    return chunks


def abbreviation_chunks(count: int) -> list[str]:
    chunk = " ".join(DENSE * 6)
    return [f"{i}: {chunk}" for i in range(count)]


def measure(name: str, chunks: list[str], repeat: int) -> None:
    words = sum(len(c.split()) for c in chunks)
    chars = sum(len(c) for c in chunks)
    times = []
    cpu_times = []
    sentences = 0
    for _ in range(repeat):
        splitter = PunktSplitter()  # fresh caches every run
        splitter("Warm up. The tokenizer is built here.")
        start, cpu_start = time.perf_counter(), time.process_time()
        sentences = sum(len(splitter(c)) for c in chunks)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    elapsed = statistics.median(times)
    cpu = statistics.median(cpu_times)
    per_100_words_ms = cpu / words * 100 * 1e3
    ratio = per_100_words_ms / BOUND_MS_PER_100_WORDS
    size = f"avg {chars / len(chunks):.0f} chars, {words / len(chunks):.0f} words"
    bound = f"bound {BOUND_MS_PER_100_WORDS} ms, ratio {ratio:.2f}"
    print(f"{name}:")
    print(f"  chunks:          {len(chunks)}  ({size})")
    print(f"  sentences:       {sentences}")
    print(f"  wall (median):   {elapsed:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in times)})")
    print(f"  CPU (median):    {cpu:.3f} s  (runs: {', '.join(f'{t:.3f}' for t in cpu_times)})")
    print(
        f"  per chunk:       {cpu / len(chunks) * 1e3:.3f} ms CPU, {elapsed / len(chunks) * 1e3:.3f} ms wall"
    )
    print(f"  per 100 words:   {per_100_words_ms:.3f} ms CPU  ({bound})")
    print(f"  bound:           {'met' if ratio <= 1 else 'NOT met'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    print(f"splitter: {PunktSplitter().fingerprint}")
    measure("mixed", mixed_chunks(args.chunks), args.repeat)
    measure("abbreviations", abbreviation_chunks(args.chunks), args.repeat)


if __name__ == "__main__":
    main()
