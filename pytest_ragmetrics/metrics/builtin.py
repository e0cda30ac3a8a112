"""The built-in metrics: from a sample to judge requests, and from answers to a :class:`MetricResult`.

A metric is any object with ``name``, ``methods``, ``default_method`` and an async ``score``; custom
metrics follow the same :class:`Metric` protocol and register through ``pytest_ragmetrics_metrics``.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from .. import judgments as J, kinds as K
from ..errors import ConfigError, InvalidSample
from ..fields import invisible
from ..judge.base import JudgeAnswer, JudgeRequest, Usage
from ..results import MetricResult, Verdict, new_result, new_verdict
from . import labels as LABELS, precision as P, recall as R, relevance as REL

if TYPE_CHECKING:
    from ..sample import RagSample


class ScoringContext(J.Texts, Protocol):
    """What a metric gets from the engine: what judging any kind needs (settings, the splitter,
    normalizing, cached judging; :class:`~pytest_ragmetrics.judgments.Texts`), and judging several
    requests at once."""

    async def judge_many(
        self, requests: Sequence[JudgeRequest], skip: Callable[[JudgeRequest], bool] | None = None
    ) -> list[JudgeAnswer | None]:
        """Answer several requests: recorded ones at once, the others concurrently.

        ``skip(request)`` is asked for each one without a recorded answer; when it says yes the
        request is not judged and its answer is ``None``.
        """
        ...


@runtime_checkable
class Metric(Protocol):
    """A metric the engine can compute. ``methods`` is empty for metrics without variants.

    Optional attributes: ``takes_k = True`` with a method ``at(k) -> Metric`` for a ranked metric
    whose name takes a cut-off (``ndcg@5`` is the registered ``ndcg``'s ``at(5)``, named ``ndcg@5``);
    ``uses_judge = False`` for a metric that never asks the judge (its results list no judge model,
    and reports say "no judge").

    Scores lie in [0, 1] (a :class:`~pytest_ragmetrics.results.MetricResult` holds no other), so a
    threshold or a gate outside that range is an error rather than a check that can never pass. A
    metric may say ``bounded = False`` to opt out of that check.

    ``scored_ahead = True`` says the score depends on nothing but the sample, the settings and the
    judge: the pytest plugin may then start it for the next tests of a golden set before they run
    (judging ahead). A metric without it is scored in its test's turn only.
    """

    name: str
    methods: tuple[str, ...]
    default_method: str | None

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        """Score one sample. Must not return NaN; raise a clear error for unusable input instead."""
        ...


NO_USAGE = Usage()
#: What an empty chunk is rated by every model: (rating, reason, cached).
_NOT_RATED = (0.0, "empty chunk", True)
#: The label of each rating a single judge gives (a mean over several judges is labelled as it comes).
_RATED = {rating: REL.rating_label(rating) for rating in (0.0, 1.0, 2.0)}
#: Sentence judgments :class:`ContextRelevance` keeps built (see ``_asked``): the chunks of the
#: samples an evaluation has in flight (a block of 16 samples of up to 32 chunks). No more: each holds
#: its inputs and sentences, and every object a run keeps is walked by each full garbage collection.
ASKED_ENTRIES = 512


def judge_cost(answers: Iterable[JudgeAnswer | None]) -> tuple[int, Usage]:
    """The judge calls behind ``answers`` and the tokens they cost: only the answers the judge gave
    now count, not the recorded ones (``None``: a request that was not judged)."""
    calls, usage = 0, NO_USAGE  # immutable: one shared zero for every result judged from records
    for answer in answers:
        if answer is not None and answer.source == "judge":  # not answer.cached
            calls += 1
            usage = usage + answer.usage
    return calls, usage


def metric_result(
    sample: RagSample,
    metric: str,
    method: str | None,
    score: float,
    verdicts: Sequence[Verdict],
    explanation: str,
    spent: tuple[int, Usage],
    mode: str | None = None,
    models: dict[str, float] | None = None,
) -> MetricResult:
    """The metric's result, with what judging it cost (:func:`judge_cost`)."""
    calls, usage = spent
    return new_result(
        score, metric, method, tuple(verdicts), explanation, sample.id, mode, calls == 0, calls, usage,
        models,
    )  # fmt: skip


def _nothing_retrieved(
    metric: str, method: str | None, sample: RagSample, mode: str | None = None
) -> MetricResult:
    return new_result(
        0.0, metric, method, (), "nothing was retrieved: the sample has no contexts", sample.id, mode
    )


def _parts(params: J.JudgeParams) -> tuple[Any, ...]:
    return params.model, params.temperature, params.seed, params.n


def _label(sample: RagSample, metric: str, what: str = "") -> str:
    return f"{metric} of sample {sample.label!r}" + (f", {what}" if what else "")


def _require_reference(sample: RagSample, metric: str, *, or_answer: bool) -> tuple[str, str]:
    """The sample's reference and what it is: the ground truth, else (``or_answer``) the answer.

    Without ``or_answer`` an empty ground truth is returned, for the metric to say it has no sentences.
    A text of only spaces and invisible characters (a zero-width space) is empty: nothing to judge by.
    """
    if sample.ground_truth is not None and (not invisible(sample.ground_truth) or not or_answer):
        return sample.ground_truth, "ground_truth"
    if or_answer and sample.answer is not None and not invisible(sample.answer):
        return sample.answer, "answer"
    needs = "a ground_truth (or an answer)" if or_answer else "a ground_truth (reference answer)"
    raise InvalidSample(f"{metric} needs {needs}; sample {sample.label!r} has none")


class ContextPrecision:
    """Rank-aware precision of the useful chunks (seed: RAGAS context precision)."""

    name = "context_precision"
    bounded = True  # scores lie in [0, 1]
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ()
    default_method: str | None = None

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        reference, reference_kind = _require_reference(sample, self.name, or_answer=True)
        mode = "without reference" if reference_kind == "answer" else None
        if not sample.contexts:
            return _nothing_retrieved(self.name, None, sample, mode)
        (params,) = K.KINDS[J.PRECISION].params(ctx.settings)
        normalize = ctx.normalize
        question, ref = normalize(sample.question), normalize(reference)
        head = _label(sample, self.name)  # each chunk's label: this and its rank
        texts = chunk_texts(sample.contexts, normalize)
        requests = []
        for rank, text in enumerate(texts, start=1):
            if text:
                label = f"{head}, chunk {rank}"
                requests.append(J.precision_request(question, ref, reference_kind, text, params, label))
        answers = await ctx.judge_many(requests)
        answered = iter(answers)
        verdicts: list[Verdict] = []
        useful_ranks: list[bool] = []
        for rank, chunk in enumerate(sample.contexts, start=1):
            if not texts[rank - 1]:
                verdicts.append(new_verdict("chunk", rank, chunk, 0.0, "not useful", "empty chunk", rank))
                useful_ranks.append(False)
                continue
            answer = next(answered)
            assert answer is not None  # nothing is skipped
            useful, reason = J.combine_boolean(answer.choices, "useful")
            cached = answer.source != "judge"
            if useful:
                verdicts.append(new_verdict("chunk", rank, chunk, 1.0, "useful", reason, rank, (), cached))
            else:
                verdicts.append(
                    new_verdict("chunk", rank, chunk, 0.0, "not useful", reason, rank, (), cached)
                )
            useful_ranks.append(useful)
        score = P.average_precision(useful_ranks)
        explanation = P.explain_precision(verdicts)
        if mode:
            explanation += " (judged against the answer: the sample has no ground_truth)"
        return metric_result(sample, self.name, None, score, verdicts, explanation, judge_cost(answers), mode)


class ContextRecall:
    """Share of the reference attributable to the retrieved contexts (RAGAS context recall).

    ``sentence`` (the default, and what the plain name ``context_recall`` means): the share of
    reference sentences, each attributed all or nothing. ``claims``: the judge breaks each reference
    sentence into atomic claims and attributes each; the share of claims. Both are one request per
    sample (per window of a long reference).
    """

    name = "context_recall"
    bounded = True  # scores lie in [0, 1]
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ("sentence", "claims")
    default_method: str | None = "sentence"
    #: The plain name ``context_recall`` means the sentence method; its results carry no [method].
    plain_method = "sentence"

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        shown_method = "claims" if method == "claims" else None
        reference, _ = _require_reference(sample, self.name, or_answer=False)
        normalize = ctx.normalize
        sentences = [sentence for raw in ctx.split(reference) if (sentence := normalize(raw))]
        if not sentences:
            raise InvalidSample(
                f"context_recall: the ground_truth of sample {sample.label!r} has no sentences"
            )
        contexts = chunk_texts(sample.contexts, normalize)
        if not any(contexts):
            # Chunks with nothing visible in them are nothing retrieved, as faithfulness reads them:
            # a judge asked whether an empty text supports the reference may say it does.
            unsupported = tuple(
                new_verdict("reference sentence", i, s, 0.0, "not supported", "nothing was retrieved")
                for i, s in enumerate(sentences, start=1)
            )
            had = "only empty" if sample.contexts else "no"
            why = f"nothing was retrieved: the sample has {had} contexts"
            return new_result(0.0, self.name, shown_method, unsupported, why, sample.id)
        (params,) = K.KINDS[J.CLAIMS if shown_method == "claims" else J.RECALL].params(ctx.settings)
        question = normalize(sample.question)
        label = _label(sample, self.name if shown_method is None else f"{self.name}[claims]")
        if shown_method == "claims":
            return await self._claims(sample, question, contexts, sentences, params, label, ctx)
        requests = J.recall_requests(question, contexts, sentences, params, label)
        answers = await ctx.judge_many(requests)
        decided = J.join_recall(requests, cast("list[JudgeAnswer]", answers))  # nothing is skipped
        verdicts: list[Verdict] = []
        supported: list[bool] = []
        for i, (text, (ok, reason, cached)) in enumerate(zip(sentences, decided, strict=True), start=1):
            if ok:
                verdicts.append(
                    new_verdict("reference sentence", i, text, 1.0, "supported", reason, None, (), cached)
                )
            else:
                verdicts.append(
                    new_verdict("reference sentence", i, text, 0.0, "not supported", reason, None, (), cached)
                )
            supported.append(ok)
        score = R.recall_score(supported)
        explanation = R.explain_recall(verdicts)
        return metric_result(sample, self.name, None, score, verdicts, explanation, judge_cost(answers))

    async def _claims(
        self,
        sample: RagSample,
        question: str,
        contexts: list[str],
        sentences: list[str],
        params: J.JudgeParams,
        label: str,
        ctx: ScoringContext,
    ) -> MetricResult:
        requests = J.claims_requests(question, contexts, sentences, params, label)
        answers = await ctx.judge_many(requests)
        verdicts: list[Verdict] = []
        number = 0
        for request, answer in zip(requests, answers, strict=True):
            assert answer is not None  # nothing is skipped
            window = request.inputs["reference_sentences"]
            first = int(request.inputs.get("first_sentence", 1))
            per_sentence = J.combine_claims(answer.choices, len(window), first)
            for offset, (sentence, claims) in enumerate(zip(window, per_sentence, strict=True)):
                where = f"reference sentence {first + offset}"
                if not claims:
                    # No claim is no evidence: the sentence counts as one claim that is not supported.
                    claims = [(sentence, False, "the judge listed no claim for this sentence")]
                for claim, ok, reason in claims:
                    number += 1
                    verdicts.append(
                        new_verdict(
                            "reference claim",
                            number,
                            claim,
                            1.0 if ok else 0.0,
                            f"supported ({where})" if ok else f"not supported ({where})",
                            reason,
                            extracted=(sentence,),
                            cached=answer.cached,
                        )
                    )
        score = R.recall_score([v.value >= 1.0 for v in verdicts])
        explanation = R.explain_claims(verdicts)
        return metric_result(sample, self.name, "claims", score, verdicts, explanation, judge_cost(answers))


class ContextRelevance:
    """Relevance of the retrieved chunks to the question: graded (0–2), sentence share, binary per
    chunk, or ``any``: 1 when any chunk holds a needed sentence (the question-level score)."""

    name = "context_relevance"
    bounded = True  # scores lie in [0, 1]
    scored_ahead = True  # from the sample, the settings and the judge alone
    methods: tuple[str, ...] = ("graded", "sentence", "binary", "any")
    default_method: str | None = "graded"

    def __init__(self) -> None:
        # The sentence judgment of each chunk asked lately, by everything its request is built from:
        # sentence, binary and any relevance of a sample ask the same judgments, and a request built
        # once is keyed once (canonical JSON, sha256), not once per method.
        self._asked: dict[tuple[Any, ...], JudgeRequest] = {}

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        method = method or ctx.settings.relevance_method
        if not sample.contexts:
            return _nothing_retrieved(self.name, method, sample)
        if method == "graded":
            return await self._graded(sample, ctx)
        return await self._sentences(sample, method, ctx)

    async def _sentences(self, sample: RagSample, method: str, ctx: ScoringContext) -> MetricResult:
        # "sentence", "binary" and "any" read the same judgment: one request per chunk serves all three
        # (a long chunk is judged in windows numbered as in the whole chunk; their picks are joined).
        (params,) = K.KINDS[J.SENTENCES].params(ctx.settings)
        normalize = ctx.normalize
        question = normalize(sample.question)
        fingerprint = ctx.splitter_fingerprint
        split = _splitting(ctx)
        head = _label(sample, "context_relevance")
        contexts = sample.contexts
        texts = chunk_texts(contexts, normalize)  # each chunk's normalized text, empty for an empty chunk
        windows: dict[int, list[JudgeRequest]] = {}  # rank -> the chunk's requests, one per window
        if fingerprint is not None:
            # Keyed on the chunk and the splitter: a recorded answer brings its sentences along.
            asked = self._asked
            same = (fingerprint, sample.label, *_parts(params))
            for rank, text in enumerate(texts, start=1):
                if text:
                    built_from = (question, text, rank, *same)
                    request = asked.get(built_from)
                    if request is None:
                        request = J.chunk_sentences_request(
                            question, text, fingerprint, split, params, f"{head}, chunk {rank}"
                        )
                        if len(asked) >= ASKED_ENTRIES:
                            del asked[next(iter(asked))]  # the oldest: a chunk of a sample scored before
                        asked[built_from] = request
                    windows[rank] = [request]
        else:
            for rank, text in enumerate(texts, start=1):
                if text and (chunk_sentences := split(text)):
                    label = f"{head}, chunk {rank}"
                    windows[rank] = J.sentences_requests(question, chunk_sentences, params, label)

        answered: dict[int, list[JudgeAnswer]] = {}
        firsts = [requests[0] for requests in windows.values()]
        answers = await ctx.judge_many(firsts, _no_sentences)
        later: list[JudgeAnswer | None] = []  # the answers of the windows after a chunk's first
        more = False
        for rank, answer in zip(list(windows), answers, strict=True):
            if answer is None:
                del windows[rank]
                continue
            answered[rank] = [answer]
            count = windows[rank][0].inputs.get("sentence_count", 0)
            if fingerprint is not None and count > J.SENTENCE_WINDOW:
                # The first window tells how many sentences the chunk has: the windows after it.
                more = True
                for first, last in J.windows(count, J.SENTENCE_WINDOW)[1:]:
                    what = f"{head}, chunk {rank}, sentences {first}-{last}"
                    text = texts[rank - 1]
                    windows[rank].append(
                        J.chunk_sentences_request(question, text, fingerprint, split, params, what, first)
                    )
        if more or fingerprint is None:
            rest = [(rank, request) for rank, requests in windows.items() for request in requests[1:]]
            if rest:
                later = await ctx.judge_many([r for _, r in rest])
                for (rank, _), answer in zip(rest, later, strict=True):
                    assert answer is not None  # nothing is skipped
                    answered[rank].append(answer)

        binary = method in ("binary", "any")
        verdicts: list[Verdict] = []
        selected = total = 0
        for rank, chunk in enumerate(contexts, start=1):
            answers_of = answered.get(rank)
            if answers_of is None:
                sentences: Sequence[str] = []
                chosen: tuple[int, ...] = ()
                reason, cached = "empty chunk", True
            elif len(answers_of) == 1:  # a chunk of one window: its picks as they are
                answer = answers_of[0]
                chosen, reason = J.combine_sentences(answer.choices)
                cached = answer.source != "judge"
                sentences = windows[rank][0].inputs["sentences"]
                if chunk != texts[rank - 1]:
                    sentences = _quoted(chunk, sentences, ctx)
            else:
                picks = [J.combine_sentences(a.choices) for a in answers_of]
                chosen = tuple(n for numbers, _ in picks for n in numbers)
                reason = next((why for numbers, why in picks if numbers), picks[0][1])
                joined = [sentence for request in windows[rank] for sentence in request.inputs["sentences"]]
                sentences = _quoted(chunk, joined, ctx)
                cached = all(a.source != "judge" for a in answers_of)
            extracted = tuple([sentences[n - 1] for n in chosen]) if chosen else ()
            if binary:
                if chosen:
                    verdicts.append(
                        new_verdict("chunk", rank, chunk, 1.0, "relevant", reason, rank, extracted, cached)
                    )
                else:
                    verdicts.append(
                        new_verdict("chunk", rank, chunk, 0.0, "not relevant", reason, rank, (), cached)
                    )
            else:
                value = len(chosen) / len(sentences) if sentences else 0.0
                label = f"{len(chosen)}/{len(sentences)} sentences needed"
                selected += len(chosen)
                total += len(sentences)
                verdicts.append(
                    new_verdict("chunk", rank, chunk, value, label, reason, rank, extracted, cached)
                )
        if method == "binary":
            score = REL.binary_score([v.value >= 1.0 for v in verdicts])
            explanation = REL.explain_binary(verdicts)
        elif method == "any":
            score = REL.any_score([v.value >= 1.0 for v in verdicts])
            explanation = REL.explain_any(verdicts)
        else:
            score = selected / total if total else 0.0  # REL.sentence_score over the chunks
            explanation = REL.explain_sentence(verdicts, selected, total)
        spent = judge_cost([*answers, *later] if later else answers)
        return metric_result(sample, self.name, method, score, verdicts, explanation, spent)

    async def _graded(self, sample: RagSample, ctx: ScoringContext) -> MetricResult:
        judges = K.KINDS[J.GRADED].params(ctx.settings)  # every model that rates, its parameters
        several = len(judges) > 1
        normalize = ctx.normalize
        question = normalize(sample.question)
        contexts = sample.contexts
        texts = chunk_texts(contexts, normalize)  # empty for an empty chunk, which is not asked
        head = _label(sample, "context_relevance")
        requests: list[JudgeRequest] = []
        for params in judges:
            judge = f", judge {params.model}" if several else ""
            for rank, text in enumerate(texts, start=1):
                if text:
                    requests.append(J.graded_request(question, text, params, f"{head}, chunk {rank}{judge}"))
        answers = await ctx.judge_many(requests)
        answered = iter(answers)
        # Per model, per chunk: (rating, reason, cached); an empty chunk is rated 0 by every model.
        per_model: list[list[tuple[float, str, bool]]] = []
        disagreed: set[int] = set()  # chunks whose judge samples gave different ratings
        for _ in judges:
            ratings: list[tuple[float, str, bool]] = []
            for position, text in enumerate(texts):
                if text:
                    answer = next(answered)
                    assert answer is not None  # nothing is skipped
                    rating, reason = J.combine_rating(answer.choices)
                    if len({choice["rating"] for choice in answer.choices}) > 1:
                        disagreed.add(position)
                    ratings.append((rating, reason, answer.source != "judge"))
                else:
                    ratings.append(_NOT_RATED)
            per_model.append(ratings)
        models = tuple([params.model for params in judges])
        verdicts: list[Verdict] = []
        if several:
            for position, (rank, chunk) in enumerate(enumerate(contexts, start=1)):
                by_model = [ratings[position] for ratings in per_model]
                mean_rating = sum(r for r, _, _ in by_model) / len(models)
                reason = by_model[0][1]
                cached = all(c for _, _, c in by_model)
                shares = {m: r / 2 for m, (r, _, _) in zip(models, by_model, strict=True)}
                unanimous = position not in disagreed and len({r for r, _, _ in by_model}) == 1
                label = REL.rating_label(mean_rating, unanimous)
                verdicts.append(
                    new_verdict(
                        "chunk", rank, chunk, mean_rating / 2, label, reason, rank, (), cached, shares
                    )
                )
        else:
            for rank, (chunk, (rating, reason, cached)) in enumerate(
                zip(contexts, per_model[0], strict=True), start=1
            ):
                unanimous = rank - 1 not in disagreed
                label = (unanimous and _RATED.get(rating)) or REL.rating_label(rating, unanimous)
                verdicts.append(
                    new_verdict("chunk", rank, chunk, rating / 2, label, reason, rank, (), cached, None)
                )
        model_scores = {
            m: REL.graded_score([r for r, _, _ in ratings])
            for m, ratings in zip(models, per_model, strict=True)
        }
        score = sum(model_scores.values()) / len(models)
        explanation = REL.explain_graded(verdicts)
        if several:
            shown = ", ".join(f"{m} {v:.2f}" for m, v in model_scores.items())
            spread = max(model_scores.values()) - min(model_scores.values())
            explanation += f" (judges: {shown}; spread {spread:.2f})"
        return metric_result(
            sample,
            self.name,
            "graded",
            min(1.0, max(0.0, score)),
            verdicts,
            explanation,
            judge_cost(answers),
            models=model_scores if several else None,
        )


def chunk_texts(contexts: Sequence[str], normalize: Callable[[str], str]) -> list[str]:
    """Each chunk's normalized text, empty for a chunk that shows nothing: spaces and format characters
    (a zero-width space), which normalizing keeps. Such a chunk is scored as the empty chunk it looks
    like, never sent to the judge on its own."""
    texts = [*map(normalize, contexts)]
    for i, text in enumerate(texts):
        # A normalized text is stripped: only one that starts with an unprintable character can be blank.
        if text and not text[0].isprintable() and invisible(text):
            texts[i] = ""
    return texts


def _no_sentences(request: JudgeRequest) -> bool:
    """Whether a chunk's sentence judgment has nothing to judge: a chunk of markers and punctuation."""
    return not request.inputs["sentences"]


def _splitting(ctx: ScoringContext) -> Callable[[str], list[str]]:
    """The normalized sentences of a text, as the context splits it (none empty)."""
    normalize, split = ctx.normalize, ctx.split

    def sentences(text: str) -> list[str]:
        return [sentence for raw in split(text) if (sentence := normalize(raw))]

    return sentences


def _quoted(chunk: str, sentences: Sequence[str], ctx: ScoringContext) -> Sequence[str]:
    """The chunk's own sentences that the judge saw in normalized form, for quoting in verdicts.

    A chunk already in normalized form is quoted as judged. Otherwise (decomposed accents, CRLF line
    ends, trailing spaces) its own split is used when it matches the judged sentences one to one.
    """
    if ctx.normalize(chunk) == chunk:
        return sentences
    own = ctx.split(chunk)
    if len(own) == len(sentences) and all(ctx.normalize(a) == b for a, b in zip(own, sentences, strict=True)):
        return own
    return sentences


class LabelMetric:
    """A retrieval metric computed from labels, with no judge: ``ndcg``, ``recall@3``...

    Registered once per family (``ndcg``); ``takes_k`` says the name accepts a cut-off, and
    :meth:`at` gives the metric cut at rank ``k`` (``ndcg@5``). See :mod:`.labels` for the
    definitions (trec_eval's) and how samples are labelled.
    """

    methods: tuple[str, ...] = ()
    default_method: str | None = None
    takes_k = True
    #: Never asks the judge: results carry no judge model, and reports say "no judge".
    uses_judge = False

    def __init__(self, family: str, k: int | None = None) -> None:
        if family not in LABELS.FAMILIES:
            raise ConfigError(f"unknown label metric {family!r}; known: {', '.join(LABELS.FAMILIES)}")
        if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
            raise ConfigError(f"cut-off @{k} of {family} must be an int of at least 1")
        self.family = family
        self.k = k
        self.name = family if k is None else f"{family}@{k}"

    def at(self, k: int) -> LabelMetric:
        """This metric cut off at rank ``k``."""
        return LabelMetric(self.family, k)

    def score_now(self, sample: RagSample) -> MetricResult:
        """Score ``sample`` synchronously (pure arithmetic over its labels)."""
        return LABELS.label_result(sample, self.family, self.k, self.name)

    async def score(self, sample: RagSample, method: str | None, ctx: ScoringContext) -> MetricResult:
        return self.score_now(sample)

    def __repr__(self) -> str:
        return f"LabelMetric({self.name!r})"


def label_metrics() -> list[Metric]:
    """The label metric families, each accepting ``@k``."""
    return [LabelMetric(family) for family in LABELS.FAMILIES]


def builtin_metrics() -> list[Metric]:
    return [ContextPrecision(), ContextRecall(), ContextRelevance(), *label_metrics()]


def check_method(metric: Metric, method: str | None) -> str | None:
    """Validate ``method`` for ``metric``; raise a clear error otherwise.

    The method a metric's plain name means (``context_recall[sentence]``) is returned as None, so its
    results and aggregates are those of the plain name.
    """
    if not metric.methods:
        if method is not None:
            raise ConfigError(f"{metric.name} has no methods; got method={method!r}")
        return None
    if method is None:
        return None  # resolved against settings when scoring
    if method not in metric.methods:
        raise InvalidSample(
            f"{metric.name}: method must be one of {', '.join(metric.methods)}; got {method!r}"
        )
    if method == getattr(metric, "plain_method", None):
        return None
    return method
