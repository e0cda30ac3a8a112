"""The answer-side judgments: the claims of a text, claim verdicts against evidence, answer relevancy.

Three kinds of judgment, each cached and recorded like the retrieval ones:

=======================  ============================================  ==================================
kind                     one request per                               answer
=======================  ============================================  ==================================
``claim_decomposition``  window of a text's sentences (an answer or a  ``sentence_<i>.claims``: [str]
                         reference), nothing else
``claim_verdicts``       window of claims, with the evidence: the      ``claim_<i>``: reason, ``verdict``
                         contexts (canonical order) or one text        (supported / contradicted /
                                                                       not_found), ``chunks`` (contexts)
``answer_relevancy``     (question, answer)                            reason, ``committal``,
                                                                       ``rating``
=======================  ============================================  ==================================

The decomposition of a text is keyed on that text's sentences, the judge model and the prompt version
only: an answer scored against other contexts, and a reference shared by several runs, are decomposed
once. Verdicts are keyed on the claims and the evidence; contexts go in :func:`canonical_contexts` order,
so re-ranking the same chunks costs no call, and the chunk numbers the judge gives are mapped back to
the sample's ranks.

Each kind is one entry of :data:`ANSWER_KINDS`, which the table of judgment kinds
(:data:`pytest_ragmetrics.kinds.KINDS`) holds beside the retrieval kinds: its prompt, schema, user
message, how a recorded judgment is asked again (drift, ``store rejudge``) and how its answers read as
verdicts. Requests are built through the entry; nothing here switches on a kind's name.

Every schema stays within the strictest provider limits (:mod:`.judge.limits`): a text of more than
:data:`DECOMPOSITION_WINDOW` sentences, or more than :data:`VERDICT_WINDOW` claims, is judged in
windows numbered as in the whole, and their answers are joined. The user message is a JSON document,
as for every other kind.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .fields import invisible
from .judge.base import JudgeAnswer, JudgeRequest
from .judgments import (
    _DATA_NOTE,
    Choices,
    ControlForm,
    JudgeParams,
    JudgmentKind,
    LabelForm,
    Material,
    Prompt,
    Texts,
    _example,
    _numbered,
    _object,
    _reason,
    canonical_contexts,
    windows,
)

if TYPE_CHECKING:
    from .settings import Settings

DECOMPOSITION = "claim_decomposition"
VERDICTS = "claim_verdicts"
RELEVANCY = "answer_relevancy"

#: The three verdicts a claim can get.
SUPPORTED, CONTRADICTED, NOT_FOUND = "supported", "contradicted", "not_found"
VERDICT_VALUES: tuple[str, ...] = (SUPPORTED, CONTRADICTED, NOT_FOUND)

#: Sentences decomposed in one request: 2 schema properties each (sentence_<i>, claims), so 20 are 40
#: properties; the completion limit grows by some 750 tokens per sentence (6 claims of 120 tokens),
#: so 20 sentences stay under the largest completion limit sent.
DECOMPOSITION_WINDOW = 20
#: Claims verified in one request: 4 schema properties each (claim_<i>, reason, verdict, chunks),
#: so 25 stay within 100 properties; 3 enum values each (75 of 500).
VERDICT_WINDOW = 25

_DECOMPOSITION_PROMPT = f"""You are a careful annotator of the factual claims a text makes.
{_DATA_NOTE}

You get the sentences of a text, numbered ("sentences"): an answer a question-answering system gave,
or a reference answer. Break every sentence into its atomic claims: the separate statements of fact
it makes, each short, self-contained and understandable without the others (replace pronouns by what
they refer to, using the other sentences). Keep to what the text says: add nothing, judge nothing.
Write every claim in the language of the text; never translate.
A sentence that states nothing that could be checked (a greeting, a question, a refusal, or saying
that the answer is not known, such as "I don't know") has no claims: give an empty list.

Answer with a JSON object with one property per sentence, named "sentence_" and its number
("sentence_1", "sentence_2", ...), each an object with "claims": the list of its claims, in the order
the sentence makes them.

{
    _example(
        {
            "sentences": {
                "1": "Albert Einstein was a German-born physicist.",
                "2": "He developed the theory of relativity and won the 1921 Nobel Prize in Physics.",
            }
        },
        {
            "sentence_1": {
                "claims": ["Albert Einstein was a physicist.", "Albert Einstein was born in Germany."]
            },
            "sentence_2": {
                "claims": [
                    "Albert Einstein developed the theory of relativity.",
                    "Albert Einstein won the 1921 Nobel Prize in Physics.",
                ]
            },
        },
    )
}

{
    _example(
        {"sentences": {"1": "Gute Frage!", "2": "Das weiß ich leider nicht."}},
        {"sentence_1": {"claims": []}, "sentence_2": {"claims": []}},
    )
}"""

_VERDICTS_CONTEXTS_PROMPT = f"""You are a strict evaluator of whether an answer is grounded in its sources.
{_DATA_NOTE}

You get passages a system retrieved ("contexts", numbered, in no particular order) and claims made by
the system's answer ("claims", numbered). For every claim decide, using only what the passages say
(general knowledge does not count):
- "supported": the passages state the claim, or it follows directly from what they state;
- "contradicted": a passage states something that makes the claim false;
- "not_found": the passages neither support nor contradict the claim.

Answer with a JSON object with one property per claim, named "claim_" and its number ("claim_1",
"claim_2", ...), each an object with "reason" (one short sentence: what the passages say about it),
"verdict" ("supported", "contradicted" or "not_found") and "chunks" (the numbers of the passages that
support or contradict the claim; an empty list for "not_found").

{
    _example(
        {
            "contexts": {
                "1": "The Eiffel Tower was completed in 1889 for the World's Fair.",
                "2": "The tower is 330 metres tall.",
            },
            "claims": {
                "1": "The Eiffel Tower was completed in 1889.",
                "2": "The Eiffel Tower is 300 metres tall.",
                "3": "The Eiffel Tower is painted every seven years.",
            },
        },
        {
            "claim_1": {"reason": "Context 1 gives 1889.", "verdict": "supported", "chunks": [1]},
            "claim_2": {
                "reason": "Context 2 gives 330 metres, not 300.",
                "verdict": "contradicted",
                "chunks": [2],
            },
            "claim_3": {"reason": "No context mentions painting.", "verdict": "not_found", "chunks": []},
        },
    )
}"""

_VERDICTS_TEXT_PROMPT = f"""You are a strict evaluator comparing the claims of one text with another text.
{_DATA_NOTE}

You get a text ("text": a reference answer, or an answer a system gave) and claims ("claims",
numbered). For every claim decide, using only what the text says (general knowledge does not count):
- "supported": the text states the claim, or it follows directly from what the text states;
- "contradicted": the text states something that makes the claim false;
- "not_found": the text neither supports nor contradicts the claim.

Answer with a JSON object with one property per claim, named "claim_" and its number ("claim_1",
"claim_2", ...), each an object with "reason" (one short sentence: what the text says about it) and
"verdict" ("supported", "contradicted" or "not_found").

{
    _example(
        {
            "text": "The Eiffel Tower was completed in 1889 and is 330 metres tall.",
            "claims": {
                "1": "The Eiffel Tower was completed in 1889.",
                "2": "The Eiffel Tower is 300 metres tall.",
                "3": "The Eiffel Tower stands in Paris.",
            },
        },
        {
            "claim_1": {"reason": "The text gives 1889.", "verdict": "supported"},
            "claim_2": {"reason": "The text gives 330 metres, not 300.", "verdict": "contradicted"},
            "claim_3": {"reason": "The text does not say where the tower stands.", "verdict": "not_found"},
        },
    )
}"""

_RELEVANCY_PROMPT = f"""You are a strict evaluator of whether an answer addresses the question it was given.
{_DATA_NOTE}

You get a question and the answer a system gave ("answer"). Do not judge whether the answer is
correct (that is judged elsewhere), only whether it addresses the question.
"committal": false when the answer is evasive, vague or non-committal: it declines to answer, says
it does not know, or hedges without committing to an answer ("I don't know", "It depends"); true when
it commits to an answer, right or wrong.
"rating": 2 = the answer addresses the question directly and as a whole; 1 = it addresses only part of
the question, or mostly talks about something else; 0 = it does not address the question.

Answer with a JSON object: "reason" (one or two sentences), "committal" (true or false) and
"rating" (0, 1 or 2).

{
    _example(
        {
            "question": "When was the Eiffel Tower completed, and how tall is it?",
            "answer": "It was completed in 1889 and is 330 metres tall.",
        },
        {"reason": "The answer gives both the year and the height.", "committal": True, "rating": 2},
    )
}

{
    _example(
        {
            "question": "When was the Eiffel Tower completed?",
            "answer": "I'm not sure; it is hard to say without more information.",
        },
        {"reason": "The answer declines to give a year.", "committal": False, "rating": 0},
    )
}"""

DECOMPOSITION_PROMPT = Prompt("claim-decomposition-1", _DECOMPOSITION_PROMPT)
VERDICTS_CONTEXTS_PROMPT = Prompt("claim-verdicts-contexts-1", _VERDICTS_CONTEXTS_PROMPT)
VERDICTS_TEXT_PROMPT = Prompt("claim-verdicts-text-1", _VERDICTS_TEXT_PROMPT)
RELEVANCY_PROMPT = Prompt("answer-relevancy-1", _RELEVANCY_PROMPT)


# --- schemas --------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _decomposition_schema(first: int, count: int) -> dict[str, Any]:
    sentence = _object({"claims": {"type": "array", "items": {"type": "string"}}})
    return _object({f"sentence_{i}": sentence for i in range(first, first + count)})


@functools.lru_cache(maxsize=512)
def _verdicts_schema(first: int, count: int, with_chunks: bool) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "reason": _reason(),
        "verdict": {"type": "string", "enum": list(VERDICT_VALUES)},
    }
    if with_chunks:
        # Plain integers, not an enum of the chunk numbers: many contexts would spend the enum limit.
        # Numbers outside the contexts are dropped when the answer is read.
        fields["chunks"] = {"type": "array", "items": {"type": "integer"}}
    verdict = _object(fields)
    return _object({f"claim_{i}": verdict for i in range(first, first + count)})


@functools.cache
def _relevancy_schema() -> dict[str, Any]:
    return _object(
        {
            "reason": _reason(),
            "committal": {"type": "boolean"},
            "rating": {"type": "integer", "enum": [0, 1, 2]},
        }
    )


def _first(inputs: Mapping[str, Any], name: str) -> int:
    return int(inputs.get(name, 1))


def _decomposition_payload(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"sentences": _numbered(inputs["sentences"], _first(inputs, "first_sentence"))}


def _verdicts_payload(inputs: Mapping[str, Any]) -> dict[str, Any]:
    claims = _numbered(inputs["claims"], _first(inputs, "first_claim"))
    if "contexts" in inputs:
        return {"contexts": _numbered(inputs["contexts"]), "claims": claims}
    return {"text": inputs["text"], "claims": claims}


def _relevancy_payload(inputs: Mapping[str, Any]) -> dict[str, Any]:
    return {"question": inputs["question"], "answer": inputs["answer"]}


# --- requests -------------------------------------------------------------------------------------


def _window_label(label: str, what: str, spans: Sequence[tuple[int, int]], first: int, last: int) -> str:
    return label if len(spans) == 1 else f"{label}, {what} {first}-{last}"


def decomposition_request(
    sentences: Sequence[str], params: JudgeParams, label: str = "", first: int = 1
) -> JudgeRequest:
    """Break ``sentences`` (numbered from ``first`` in their text) into claims: keyed on those
    sentences alone, no question and no contexts."""
    inputs: dict[str, Any] = {"sentences": list(sentences)}
    if first != 1:
        inputs["first_sentence"] = first
    return ANSWER_KINDS[DECOMPOSITION].request(inputs, params, label)


def decomposition_requests(
    sentences: Sequence[str], params: JudgeParams, label: str = ""
) -> list[JudgeRequest]:
    """One :func:`decomposition_request` per window of at most :data:`DECOMPOSITION_WINDOW` sentences."""
    spans = windows(len(sentences), DECOMPOSITION_WINDOW)
    return [
        decomposition_request(
            sentences[first - 1 : last], params, _window_label(label, "sentences", spans, first, last), first
        )
        for first, last in spans
    ]


def verdict_request(
    claims: Sequence[str],
    params: JudgeParams,
    label: str = "",
    first: int = 1,
    *,
    contexts: Sequence[str] | None = None,
    text: str | None = None,
) -> JudgeRequest:
    """Verify ``claims`` (numbered from ``first``) against the ``contexts`` (put in
    :func:`canonical_contexts` order) or against one ``text``."""
    if (contexts is None) == (text is None):
        raise ValueError("verify claims against contexts or a text, one of the two")
    inputs: dict[str, Any] = {"claims": list(claims)}
    if contexts is not None:
        inputs["contexts"] = canonical_contexts(contexts)
    else:
        inputs["text"] = text
    if first != 1:
        inputs["first_claim"] = first
    return ANSWER_KINDS[VERDICTS].request(inputs, params, label)


def verdict_requests(
    claims: Sequence[str],
    params: JudgeParams,
    label: str = "",
    *,
    contexts: Sequence[str] | None = None,
    text: str | None = None,
) -> list[JudgeRequest]:
    """One :func:`verdict_request` per window of at most :data:`VERDICT_WINDOW` claims: all the
    claims of a usual answer in one request."""
    spans = windows(len(claims), VERDICT_WINDOW)
    return [
        verdict_request(
            claims[first - 1 : last],
            params,
            _window_label(label, "claims", spans, first, last),
            first,
            contexts=contexts,
            text=text,
        )
        for first, last in spans
    ]


def relevancy_request(question: str, answer: str, params: JudgeParams, label: str = "") -> JudgeRequest:
    """Does ``answer`` address ``question``, or is it non-committal?"""
    return ANSWER_KINDS[RELEVANCY].request({"question": question, "answer": answer}, params, label)


# --- reading answers --------------------------------------------------------------------------------
# With n > 1 the judge draws several answers: a sentence takes the claims of the choice whose count is
# closest to the mean count (claims cannot be voted on one by one); a verdict needs a strict majority,
# else the claim is not_found (an even split can neither support nor contradict); ratings are averaged.


def combine_decomposition(
    choices: Sequence[Mapping[str, Any]], count: int, first: int = 1
) -> list[list[str]]:
    """Per sentence ``first`` .. ``first + count - 1``: its claims (those that show nothing, empty or
    only spaces and zero-width characters, dropped: they state nothing to check)."""
    out: list[list[str]] = []
    for i in range(first, first + count):
        per_choice = [[str(c).strip() for c in choice[f"sentence_{i}"]["claims"]] for choice in choices]
        per_choice = [[c for c in claims if not invisible(c)] for claims in per_choice]
        mean = sum(len(c) for c in per_choice) / len(per_choice)
        pick = min(range(len(per_choice)), key=lambda k: (abs(len(per_choice[k]) - mean), k))
        out.append(per_choice[pick])
    return out


@dataclass(frozen=True)
class ClaimVerdict:
    """What the judge decided for one claim: the verdict, its reason and (contexts) the chunk numbers
    in the canonical order of the request's contexts, those outside it dropped."""

    verdict: str
    reason: str
    chunks: tuple[int, ...] = ()


def combine_verdicts(
    choices: Sequence[Mapping[str, Any]], count: int, first: int = 1, chunk_count: int = 0
) -> list[ClaimVerdict]:
    """Per claim ``first`` .. ``first + count - 1``: the verdict of a strict majority of choices (else
    ``not_found``), with the reason and chunks of the first choice that gave it; a ``not_found`` no
    choice gave (the choices split between supported and contradicted) has a reason saying so, not
    the reason of a choice that argued for another verdict."""
    out: list[ClaimVerdict] = []
    for i in range(first, first + count):
        answers = [choice[f"claim_{i}"] for choice in choices]
        votes = [str(a["verdict"]) for a in answers]
        decided = next((v for v in VERDICT_VALUES if votes.count(v) * 2 > len(votes)), NOT_FOUND)
        agreeing = next((a for a, v in zip(answers, votes, strict=True) if v == decided), None)
        if agreeing is None:
            split = ", ".join(v.replace("_", " ") for v in votes)
            reason = f"the judge's {len(votes)} samples disagree ({split}): no verdict has a majority"
            out.append(ClaimVerdict(NOT_FOUND, reason))
            continue
        chunks: tuple[int, ...] = ()
        if decided != NOT_FOUND and chunk_count:
            numbers = agreeing.get("chunks") or ()
            chunks = tuple(
                sorted({int(n) for n in numbers if not isinstance(n, bool) and 1 <= int(n) <= chunk_count})
            )
        out.append(ClaimVerdict(decided, str(agreeing.get("reason", "")), chunks))
    return out


def join_decomposition(
    requests: Sequence[JudgeRequest], answers: Sequence[JudgeAnswer]
) -> list[tuple[str, str]]:
    """The answers to :func:`decomposition_requests` joined: ``(claim, the sentence it comes from)``
    for every claim of the text, in order."""
    claims: list[tuple[str, str]] = []
    for request, answer in zip(requests, answers, strict=True):
        sentences = request.inputs["sentences"]
        first = _first(request.inputs, "first_sentence")
        per_sentence = combine_decomposition(answer.choices, len(sentences), first)
        for sentence, found in zip(sentences, per_sentence, strict=True):
            claims += [(claim, sentence) for claim in found]
    return claims


def join_verdicts(requests: Sequence[JudgeRequest], answers: Sequence[JudgeAnswer]) -> list[ClaimVerdict]:
    """The answers to :func:`verdict_requests` joined: one :class:`ClaimVerdict` per claim, in order."""
    verdicts: list[ClaimVerdict] = []
    for request, answer in zip(requests, answers, strict=True):
        verdicts += _read_verdicts(request, answer.choices)
    return verdicts


def combine_relevancy(choices: Sequence[Mapping[str, Any]]) -> tuple[bool, float, str]:
    """``(non-committal, mean rating 0..2, a reason)``: the answer counts as committal only when a
    strict majority of choices says so (RAGAS's ``noncommittal`` flag, inverted so that true is the
    positive verdict); the reason is that of a choice that agrees, closest to the mean rating."""
    flags = [bool(c["committal"]) for c in choices]
    committal = sum(flags) * 2 > len(flags)
    ratings = [int(c["rating"]) for c in choices]
    mean = sum(ratings) / len(ratings)
    order = sorted(range(len(choices)), key=lambda k: (flags[k] != committal, abs(ratings[k] - mean), k))
    return not committal, mean, str(choices[order[0]].get("reason", ""))


# --- the answer kinds' entries -----------------------------------------------------------------------


def _decomposition_verdicts(request: JudgeRequest, choices: Choices) -> list[tuple[float, str]]:
    # Per sentence: 1 when it makes at least one claim; the reason lists the claims.
    inputs = request.inputs
    found = combine_decomposition(choices, len(inputs["sentences"]), _first(inputs, "first_sentence"))
    return [(1.0 if claims else 0.0, "; ".join(claims)) for claims in found]


def _decomposition_decision(request: JudgeRequest, choices: Choices) -> tuple[str, ...]:
    # Nearly every sentence making a claim is what texts do, not a judge that does not discriminate.
    return ()


def _read_verdicts(request: JudgeRequest, choices: Choices) -> list[ClaimVerdict]:
    inputs = request.inputs
    count, first = len(inputs["claims"]), _first(inputs, "first_claim")
    return combine_verdicts(choices, count, first, len(inputs.get("contexts") or ()))


#: A claim's verdicts as classes, in the order of their values: contradicted 0, not found 0.5,
#: supported 1 (so a verdict that changes either way is a flip in drift).
CLAIM_CLASSES: tuple[str, ...] = (CONTRADICTED, NOT_FOUND, SUPPORTED)
_CLAIM_VALUES = {verdict: i / 2 for i, verdict in enumerate(CLAIM_CLASSES)}


def _claim_verdict_values(request: JudgeRequest, choices: Choices) -> list[tuple[float, str]]:
    return [(_CLAIM_VALUES[v.verdict], v.reason) for v in _read_verdicts(request, choices)]


def _claim_verdict_decision(request: JudgeRequest, choices: Choices) -> tuple[str, ...]:
    return tuple(v.verdict for v in _read_verdicts(request, choices))


def _relevancy_verdicts(request: JudgeRequest, choices: Choices) -> list[tuple[float, str]]:
    noncommittal, rating, reason = combine_relevancy(choices)
    return [(0.0 if noncommittal else rating / 2, reason)]


def _relevancy_decision(request: JudgeRequest, choices: Choices) -> tuple[str, ...]:
    noncommittal, rating, _ = combine_relevancy(choices)
    return ("non-committal",) if noncommittal else (str(int(rating + 0.5)),)


def _judge_params(settings: Settings) -> list[JudgeParams]:
    s = settings
    return [JudgeParams(s.judge_model, s.temperature, s.seed, s.judge_n)]


async def _no_units(material: Material, texts: Texts) -> list[str]:
    return []


def _not_asked(
    material: Material, units: Sequence[str], params: JudgeParams, label: str, texts: Texts
) -> list[JudgeRequest] | None:
    return None


async def _claims_of(material: Material, texts: Texts) -> list[str]:
    """The claims a labelled item lists, else those of the answer (a negative control): decomposed
    exactly as the faithfulness metric decomposes it, so the run's recorded decomposition serves."""
    if material.claims is not None:
        return [texts.normalize(claim) for claim in material.claims]
    if material.answer is None or not material.contexts or not texts.normalize(material.answer):
        return []  # nothing to check, or nothing to check it against
    sentences = [s for raw in texts.split(material.answer) if (s := texts.normalize(raw))]
    (params,) = _judge_params(texts.settings)
    requests = decomposition_requests(sentences, params, "claims of the answer")
    answers = [await texts.judge(request) for request in requests]
    return [claim for claim, _ in join_decomposition(requests, answers)]


def _labelled_verdicts(request: JudgeRequest, labels: Sequence[Any]) -> dict[str, Any]:
    inputs = request.inputs
    first = _first(inputs, "first_claim")
    chunks: dict[str, Any] = {"chunks": []} if "contexts" in inputs else {}
    return {
        f"claim_{i}": {"reason": "labelled", "verdict": labels[i - 1], **chunks}
        for i in range(first, first + len(inputs["claims"]))
    }


def _ask_claim_verdicts(
    material: Material, units: Sequence[str], params: JudgeParams, label: str, texts: Texts
) -> list[JudgeRequest] | None:
    # The claims against the contexts, as the faithfulness metric asks; None without either.
    contexts = [text for context in material.contexts if (text := texts.normalize(context))]
    if not units or not contexts:
        return None
    return verdict_requests(list(units), params, label, contexts=contexts)


def _rebuild_decomposition(inputs: Mapping[str, Any], params: JudgeParams, label: str) -> JudgeRequest:
    return decomposition_request(inputs["sentences"], params, label, _first(inputs, "first_sentence"))


def _rebuild_claim_verdicts(inputs: Mapping[str, Any], params: JudgeParams, label: str) -> JudgeRequest:
    first = _first(inputs, "first_claim")
    if "contexts" in inputs:
        return verdict_request(inputs["claims"], params, label, first, contexts=inputs["contexts"])
    return verdict_request(inputs["claims"], params, label, first, text=inputs["text"])


def _rebuild_relevancy(inputs: Mapping[str, Any], params: JudgeParams, label: str) -> JudgeRequest:
    return relevancy_request(inputs["question"], inputs["answer"], params, label)


_ANSWER_METRICS: tuple[tuple[str, str | None], ...] = (
    ("faithfulness", None),
    ("faithfulness", "not_contradicted"),
    ("answer_correctness", None),
    ("answer_correctness", "precision"),
    ("answer_correctness", "recall"),
)


#: The answer kinds' entries in the table of judgment kinds (:data:`pytest_ragmetrics.kinds.KINDS`).
ANSWER_KINDS: dict[str, JudgmentKind] = {
    kind.name: kind
    for kind in (
        JudgmentKind(
            name=DECOMPOSITION,
            prompt=DECOMPOSITION_PROMPT,
            unit="text sentence",
            schema=lambda inputs: _decomposition_schema(
                _first(inputs, "first_sentence"), len(inputs["sentences"])
            ),
            payload=_decomposition_payload,
            rebuild=_rebuild_decomposition,
            verdicts=_decomposition_verdicts,
            decision=_decomposition_decision,
            params=_judge_params,
            units_of=_no_units,
            ask=_not_asked,
            meaning="claim_decomposition: share of sentences that make a claim",
            decides="claims made",
            metrics=_ANSWER_METRICS,
        ),
        JudgmentKind(
            name=VERDICTS,
            prompt=VERDICTS_CONTEXTS_PROMPT,
            variant=lambda inputs: None if "contexts" in inputs else VERDICTS_TEXT_PROMPT,
            unit="claim",
            schema=lambda inputs: _verdicts_schema(
                _first(inputs, "first_claim"), len(inputs["claims"]), "contexts" in inputs
            ),
            payload=_verdicts_payload,
            rebuild=_rebuild_claim_verdicts,
            verdicts=_claim_verdict_values,
            decision=_claim_verdict_decision,
            params=_judge_params,
            units_of=_claims_of,
            ask=_ask_claim_verdicts,
            meaning="claim_verdicts: mean verdict (supported 1, not found 0.5, contradicted 0)",
            decides="verdict",
            metrics=_ANSWER_METRICS,
            aliases=("faithfulness",),
            classes=CLAIM_CLASSES,
            labels=LabelForm("verdicts", "each", ("contexts", "claims")),
            labelled_answer=_labelled_verdicts,
            # Negative controls only: an answer against its own contexts may well be unfaithful.
            control=ControlForm("supported", positive_from=CLAIM_CLASSES.index(SUPPORTED), positives=False),
        ),
        JudgmentKind(
            name=RELEVANCY,
            prompt=RELEVANCY_PROMPT,
            unit="answer",
            schema=lambda inputs: _relevancy_schema(),
            payload=_relevancy_payload,
            rebuild=_rebuild_relevancy,
            verdicts=_relevancy_verdicts,
            decision=_relevancy_decision,
            params=_judge_params,
            units_of=_no_units,
            ask=_not_asked,
            meaning="answer_relevancy: mean score (0 when non-committal, else rating / 2)",
            decides="rating",
            metrics=(("answer_relevancy", None),),
            classes=(0, 1, 2),
            ordinal=True,
        ),
    )
}
