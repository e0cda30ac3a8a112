"""Finished scores kept in the disk cache, so a warm rerun serves each score with one read.

A warm run already has every judgment recorded, yet scoring a sample again still rebuilds its
requests, hashes their keys, reads and validates each answer and redoes the arithmetic: most of
its time. A *score record* keeps a built-in metric's finished result for one sample, keyed on
everything the result follows from:

* the metric and method, and the sample's whole content (its id included);
* the settings the judgments are made with (judge model, relevance models, sampling parameters);
* the sentence splitter's fingerprint (a splitter without one turns score records off);
* this package's own code (every module's bytes), so a changed prompt or formula never serves an
  old result, and the versions of Python, its Unicode data and nltk, which splitting rests on;
* the judgment store's files as they are (name, size, modification time): the store is the
  source of truth, and a pull, checkout, edit or new judgment in it turns every record made before
  into a miss;
* the cache's *epoch*, renewed whenever a recorded judgment is replaced in the cache (``refresh``
  mode, a damaged entry dropped), which turns every record made before into a miss, in later runs
  and, through :func:`~pytest_ragmetrics.judge.cache.replacements`, in this process.

And a record is served only while each judgment it has from the disk cache is still there, stored
before the record: one the cache evicted, or judged and stored again since, makes it a miss.

A record also lists the judgments the score rests on (key, kind, what each decided, where it came
from), so a served record still counts its hits, keeps its judgments from being pruned and feeds
the run's judge checks, as the judgments themselves would. Records are written in ``readwrite``
mode only, read in ``readwrite`` and ``replay``; a record that is damaged or does not belong to its
key is a miss. The disk cache may evict them like any entry: a miss only costs the slower path.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import functools
import hashlib
import json
import math
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engine import _remembered, decision
from .results import MetricResult, Verdict

if TYPE_CHECKING:
    from .engine import Evaluator
    from .judge.cache import CachedJudge
    from .metrics.builtin import Metric
    from .sample import RagSample

#: Prefix of the disk-cache keys of score records (judgments are keyed by a bare sha256).
SCORE_PREFIX = "score:"
#: The disk-cache key holding the cache's epoch (see the module's documentation).
EPOCH_KEY = "score-epoch"
#: The layout of a record; a record of another layout is a miss.
FORMAT = 1
#: Records written in one transaction of the judge's I/O thread.
WRITE_BATCH = 256
#: Batches of records waiting for the I/O thread before the next one waits for the first.
WRITES_WAITING = 4
#: Samples of the tests to come whose records a test's first score also reads (see :meth:`ScoreRecords.find`).
READ_AHEAD = 32

# One judgment a score rests on: (key, kind, what it decided, source, tokens it saved).
Traced = tuple[str, str, tuple[str, ...], str, int]
_UNKNOWN = object()


@functools.cache
def code_digest() -> str:
    """A digest of this package's modules: a changed prompt, schema or formula changes it."""
    root = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode("utf-8") + b"\0")
        digest.update(path.read_bytes())
    return digest.hexdigest()


@functools.cache
def environment() -> list[Any]:
    """What sentence splitting and text normalizing rest on besides this package: Python's version
    and Unicode data, and the installed nltk (where it is, and its files' sizes and times, without
    importing it or reading every package's metadata)."""
    import importlib.util
    import unicodedata

    nltk: list[Any] | None = None
    spec = importlib.util.find_spec("nltk")
    if spec is not None and spec.origin:
        root = Path(spec.origin).parent
        nltk = [str(root)]
        for name in ("__init__.py", "VERSION", "tokenize/punkt.py"):
            with contextlib.suppress(OSError):
                stat = (root / name).stat()
                nltk.append([name, stat.st_size, stat.st_mtime_ns])
    return [list(sys.version_info[:2]), unicodedata.unidata_version, nltk]


def _sample_material(sample: RagSample) -> str:
    grades = sample.reference_context_ids
    material = [
        sample.id,
        sample.question,
        list(sample.contexts),
        sample.ground_truth,
        sample.answer,
        None if sample.context_ids is None else list(sample.context_ids),
        None if grades is None else sorted(grades.items()),
        None if sample.reference_contexts is None else list(sample.reference_contexts),
    ]
    return json.dumps(material, ensure_ascii=False)


def _compute_digest(sample: RagSample) -> str:
    """A digest of everything in ``sample`` a built-in metric's result can follow from."""
    return hashlib.sha256(_sample_material(sample).encode("utf-8")).hexdigest()


#: :func:`_compute_digest`, remembered for recent samples like the engine's sample keys.
sample_digest = _remembered(_compute_digest)


def records_serve(metric: Metric) -> bool:
    """Whether ``metric``'s results are kept as score records: the built-in judged metrics only
    (their code is in :func:`code_digest`; a plugin's metric may change without telling)."""
    return type(metric).__module__ == "pytest_ragmetrics.metrics.builtin" and getattr(
        metric, "serves_recorded", False
    )


class ScoreRecords:
    """The score records of one evaluator: keys, reads ahead, hits and batched writes."""

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator
        self._base: object = _UNKNOWN  # str, or None: records are off for this evaluator
        self._replacements = -1  # judgments this process had replaced when the base was made
        self._pending: list[tuple[str, str]] = []
        self._writing: list[concurrent.futures.Future[None]] = []
        # The (metric, method) pairs asked for so far, and records read ahead for the last sample.
        self._asked: dict[tuple[str, str | None], None] = {}
        self._ahead: dict[str, tuple[MetricResult, list[Traced]] | None] = {}

    # -- keys --------------------------------------------------------------------------------
    def _judge(self) -> CachedJudge:
        return self._evaluator.judge

    def base(self) -> str | None:
        """The part of every key this evaluator shares, or ``None`` when records are off."""
        from .judge.cache import replacements

        replaced = replacements()
        if self._base is _UNKNOWN or replaced != self._replacements:
            # Again after this process replaced a judgment: records made before are then misses.
            self._replacements = replaced
            self._base = self._compute_base()
        return self._base  # type: ignore[return-value]

    def _compute_base(self) -> str | None:
        judge = self._judge()
        if judge.mode not in ("readwrite", "replay") or judge.cache_dir is None:
            return None
        fingerprint = self._evaluator.splitter_fingerprint
        if fingerprint is None:
            return None
        generation: str | None = None
        if judge.store is not None:
            generation = judge.store.generation()
            if generation is None:
                return None
        epoch = judge.score_epoch()
        if epoch is None:
            return None
        s = self._evaluator.settings
        material = [
            FORMAT,
            code_digest(),
            environment(),
            s.judge_model,
            list(s.models_for_graded),
            s.temperature,
            s.graded_temperature,
            s.seed,
            s.judge_n,
            s.relevance_method,
            fingerprint,
            generation,
            epoch,
        ]
        return hashlib.sha256(json.dumps(material).encode("utf-8")).hexdigest()

    def key(self, name: str, method: str | None, sample: RagSample) -> str | None:
        """The record key of ``name[method]`` for ``sample``, or ``None`` when records are off."""
        base = self.base()
        if base is None:
            return None
        text = f"{base}\0{name}\0{method or ''}\0{sample_digest(sample)}"
        return SCORE_PREFIX + hashlib.sha256(text.encode("utf-8")).hexdigest()

    # -- reading -----------------------------------------------------------------------------
    def find(self, name: str, method: str | None, key: str, sample: RagSample) -> MetricResult | None:
        """The recorded result of ``key`` (its hits counted), or ``None``: score it.

        A test asks for several scores of its sample: the first one read also reads (and checks)
        the records of the sample's other scores this evaluator was asked for so far, together, and
        so do the samples of the next tests when the pytest plugin knows them (their ``rag_sample``):
        a warm run reads records a window of tests at a time, not a query or two per test.
        """
        self._asked.setdefault((name, method), None)
        try:
            entry = self._ahead.pop(key)
        except KeyError:
            ahead = self._evaluator.ahead
            coming = ahead.coming_samples(READ_AHEAD) if ahead is not None else []
            wanted = [(key, sample)]
            for each in (sample, *coming):
                for n, m in list(self._asked):
                    other = self.key(n, m, each) if each is not sample or (n, m) != (name, method) else None
                    if other is not None:
                        wanted.append((other, each))
            found = self._judge().read_entries([k for k, _ in wanted])
            checked = self._checked([(k, found[k], s) for k, s in wanted if k in found])
            # The window's only: memory stays flat.
            self._ahead = {k: checked.get(k) for k, _ in wanted[1:]}
            entry = checked.get(key)
        if entry is None:
            return None
        self._replay(entry[1])
        return entry[0]

    def serve_many(
        self, entries: Sequence[tuple[str, tuple[Any, float], RagSample]]
    ) -> list[MetricResult | None]:
        """The results the disk-cache entries ``(key, (text, stored), sample)`` record (their hits
        counted), each ``None`` when it cannot be served (see :meth:`_checked`): score it."""
        checked = self._checked(entries)
        served: list[MetricResult | None] = []
        for key, _, _ in entries:
            found = checked.get(key)
            if found is not None:
                self._replay(found[1])
            served.append(None if found is None else found[0])
        return served

    def _checked(
        self, entries: Sequence[tuple[str, tuple[Any, float], RagSample]]
    ) -> dict[str, tuple[MetricResult, list[Traced]]]:
        """The result and judgments of each entry that can be served, by key: one that is damaged,
        not a record of its key, or no longer rests on the judgments it was made from is left out.

        A judgment from the disk cache must still be there, stored before the record (not evicted,
        not judged or written again since); one from the judgment store is there as it was, since
        the store's files are as they were (the key says so). One query checks them all.
        """
        decoded: list[tuple[str, MetricResult, list[Traced], float]] = []
        wanted: set[str] = set()
        in_store = self._judge().store is not None
        for key, (raw, stored), sample in entries:
            try:
                result, traced = decode(raw, key, sample)
            except (ValueError, TypeError, KeyError, IndexError, UnicodeDecodeError):
                continue  # damaged: scored again, and the new record replaces it
            decoded.append((key, result, traced, stored))
            wanted.update(t[0] for t in traced if not (in_store and t[3] == "store"))
        times = self._judge().stored_at(sorted(wanted)) if wanted else {}
        if times is None:
            return {}
        return {
            key: (result, traced)
            for key, result, traced, stored in decoded
            # A judgment it rests on that is gone or was written again since: not served.
            if all(times.get(t[0], math.inf) <= stored for t in traced if not (in_store and t[3] == "store"))
        }

    def _replay(self, traced: Sequence[Traced]) -> None:
        """What serving the judgments would have done: count hits, mark them used, note answers."""
        evaluator = self._evaluator
        judge = evaluator.judge
        used, answers = judge.used_keys, evaluator.answers
        store = judge.store is not None
        store_hits = tokens = 0
        for key, kind, classes, source, saved in traced:
            used.add(key)
            if key not in answers:
                answers[key] = decision(kind, classes)
            store_hits += store and source == "store"
            tokens += saved
        evaluator.stats.record_hits(cache=len(traced) - store_hits, store=store_hits, tokens_saved=tokens)

    # -- writing -----------------------------------------------------------------------------
    def keep(self, key: str, result: MetricResult, traced: Sequence[Traced], sample: RagSample) -> None:
        """Record ``result`` (written in batches off the calling thread), in ``readwrite`` mode."""
        if not self._judge().keeps_entries:
            return
        try:
            text = encode(key, result, traced, sample)
        except (ValueError, TypeError):  # a text JSON cannot hold (a lone surrogate): no record
            return
        self._pending.append((key, text))
        if len(self._pending) >= WRITE_BATCH:
            self.flush()

    def flush(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        # At most a few batches wait for the I/O thread: records made faster than they are written
        # (a first warm run of a large suite) must not pile up in memory.
        writing = [future for future in self._writing if not future.done()]
        while len(writing) >= WRITES_WAITING:
            writing.pop(0).result()
        future = self._judge().write_entries(pending)
        self._writing = writing if future is None else [*writing, future]


# --- the record's JSON form -------------------------------------------------------------------
# A record is the sha256 of its JSON text, then the text: one that is not byte for byte what
# encode() wrote (damaged, cut short, edited) is a miss, and one that is needs no field checked.
# A chunk's verdict quoting the whole chunk leaves its text out (the sample has it: its content is
# in the key).


def encode(key: str, result: MetricResult, traced: Iterable[Traced], sample: RagSample) -> str:
    """A record of ``result`` as served from records: no judge calls, nothing spent."""
    contexts = sample.contexts
    body = json.dumps(
        {
            "format": FORMAT,
            "key": key,
            "score": result.score,
            "metric": result.metric,
            "method": result.method,
            "explanation": result.explanation,
            "mode": result.mode,
            "models": None if result.models is None else dict(result.models),
            "judges": result.judges,
            "sample_key": result.sample_key,
            "reference_key": result.reference_key,
            "labels_found": result.labels_found,
            "prompt_versions": result.prompt_versions,
            "splitter": result.splitter,
            "verdicts": [
                [
                    v.item,
                    v.index,
                    None if _quotes_chunk(v, contexts) else v.text,
                    v.value,
                    v.label,
                    v.reason,
                    v.rank,
                    v.extracted,
                    None if v.models is None else dict(v.models),
                ]
                for v in result.verdicts
            ],
            "judgments": list(traced),
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return hashlib.sha256(body.encode("utf-8")).hexdigest() + body


def _quotes_chunk(verdict: Verdict, contexts: Sequence[str]) -> bool:
    rank = verdict.rank
    return rank is not None and 0 < rank <= len(contexts) and verdict.text == contexts[rank - 1]


def decode(raw: Any, key: str, sample: RagSample) -> tuple[MetricResult, list[Traced]]:
    """The result and judgments a record holds; ``ValueError``/``TypeError`` when it is damaged."""
    if isinstance(raw, bytes):
        raw = raw.decode("utf-8")
    if not isinstance(raw, str):
        raise TypeError("not a text entry")
    body = raw[64:]
    if hashlib.sha256(body.encode("utf-8")).hexdigest() != raw[:64]:
        raise ValueError("the record is not as it was written")
    data = json.loads(body)
    if data["format"] != FORMAT or data["key"] != key:
        raise ValueError("not a record of this key")
    contexts = sample.contexts
    # Names, labels and classes recur in every record: one string each, as a judged score shares them.
    i = sys.intern
    verdicts = tuple(
        Verdict(
            i(item),
            index,
            contexts[rank - 1] if text is None else text,
            value,
            i(label),
            reason,
            rank,
            tuple(extracted),
            True,
            models,
        )
        for item, index, text, value, label, reason, rank, extracted, models in data["verdicts"]
    )
    method = data["method"]
    result = MetricResult(
        data["score"],
        i(data["metric"]),
        None if method is None else i(method),
        verdicts,
        data["explanation"],
        sample.id,
        data["mode"],
        models=data["models"],
        judges=tuple(map(i, data["judges"])),
        sample_key=i(data["sample_key"]),
        labels_found=data["labels_found"],
        reference_key=i(data["reference_key"]),
        prompt_versions=tuple(map(i, data["prompt_versions"])),
        splitter=data["splitter"],
    )
    traced = [
        (jkey, i(kind), tuple(map(i, classes)), source, saved)
        for jkey, kind, classes, source, saved in data["judgments"]
    ]
    return result, traced
