"""Reading the judge's answer out of a chat completion (its shape checked first, see
:func:`~pytest_ragmetrics.judge.server_errors.completion_shape_problem`): each choice's content as
text (content parts, a tool call's arguments), the JSON answer in it (bare, fenced, in prose, after a
reasoning model's thinking), checked against the request's schema; what was wrong with those that are
not, in words the judge is shown when it is asked again and as facts that decide whether it is; and the
tokens the server says the answer cost.

Nothing here sends anything: the judge that asked (:mod:`~pytest_ragmetrics.judge.openai_judge`)
decides what to do with what is read.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from .._files import RepeatedName, unique_names
from ..redact import one_line
from .base import MAX_TOKEN_COUNT, HowToSet, JudgeRequest, Usage, answer_errors

_FENCE = re.compile(r"```[A-Za-z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
#: How reasoning models (DeepSeek-R1, Qwen3, QwQ) mark their thinking before the answer.
_THINK_START, _THINK_END = "<think>", "</think>"


def valid_text(value: Any) -> Any:
    """``value`` (an answer's JSON) with each lone surrogate in its strings replaced by U+FFFD.

    A model may write half of an escaped pair (``\\ud83d``, half an emoji): text UTF-8 cannot carry,
    which the cache could not write (nor a report, nor the terminal). The rest of the answer is kept.
    """
    if isinstance(value, str):
        if value.isascii():
            return value
        return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    if isinstance(value, dict):
        return {valid_text(name): valid_text(item) for name, item in value.items()}
    if isinstance(value, list):
        return [valid_text(item) for item in value]
    return value


def content_text(content: Any) -> Any:
    """A message's content as text: a string as it is; a list of content parts as its text parts
    joined, others (a reasoning model's ``thinking`` parts, as Mistral's answer) left out, or None
    when it has none; anything else as it is, to be reported as not text."""
    if isinstance(content, list) and all(
        isinstance(part, dict) and isinstance(part.get("type"), str) for part in content
    ):
        texts = [part.get("text") for part in content if part["type"] == "text"]
        if all(isinstance(text, str) for text in texts):
            return "".join(texts) if texts else None
    return content


def _has_text(content: Any) -> bool:
    """Whether a message's content holds anything but whitespace (a non-text content counts)."""
    return content is not None and not (isinstance(content, str) and not content.strip())


def tool_call_arguments(message: Mapping[str, Any]) -> tuple[str, str] | None:
    """The function name and arguments (text) of the first tool call of a chat message (or of its
    legacy ``function_call``), or None when it has none."""
    calls = message.get("tool_calls")
    legacy = message.get("function_call")
    for call in [*(calls if isinstance(calls, list) else ()), {"function": legacy}]:
        function = call.get("function") if isinstance(call, Mapping) else None
        if isinstance(function, Mapping) and isinstance(function.get("arguments"), str):
            return str(function.get("name") or ""), function["arguments"]
    return None


def _tool_call_advice(called: tuple[str, str] | None, how_to_set: HowToSet) -> str:
    """What to do about a server that answered with a tool call holding no answer, for a problem."""
    if called is None:
        return ""
    setting = how_to_set("response_format", "json_object")
    return (
        "; the server answered with a tool call instead of content: if it answers structured output "
        f"so, check its tool-call parser and chat template, or set {setting}"
    )


def _reasoning(message: Mapping[str, Any]) -> str:
    """A reasoning model's thinking as the server returns it beside the content: vLLM's and
    DeepSeek's ``reasoning_content``, OpenRouter's and Ollama's ``reasoning``; empty when none."""
    for name in ("reasoning_content", "reasoning"):
        text = message.get(name)
        if isinstance(text, str) and text.strip():
            return text
    return ""


def _thinking(message: Mapping[str, Any], body: Mapping[str, Any]) -> str:
    """How much a reasoning model thought, as the answer says: the characters of its thinking beside
    the content, or the reasoning tokens its usage counts (OpenAI's, which keep the thinking hidden);
    "" when it says nothing of thinking."""
    reasoning = _reasoning(message)
    if reasoning:
        return f"{len(reasoning):,} characters of reasoning"
    usage = body.get("usage")
    details = usage.get("completion_tokens_details") if isinstance(usage, dict) else None
    tokens = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else 0
    return f"{tokens:,} reasoning tokens" if tokens else ""


def reported_usage(body: Mapping[str, Any]) -> Usage:
    """The tokens a chat completion (its shape checked) says it used; none when it does not say,
    or says it in a form that is not a count (``"usage": 5``, ``"prompt_tokens": "12"``, ``-3``)."""
    usage = body.get("usage")
    if not usage or not isinstance(usage, dict):
        return Usage()
    return Usage(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _whole(value: Any) -> int | None:
    """``value`` as a whole number of at least 0, or None: ``12.0`` is 12, as JSON means it (a
    server written in Python may send its token counts as floats)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _count(value: Any) -> int:
    """A token count a server reported, as a count: one missing or not a count (text, negative, a
    fraction) is 0, unknown; an absurd one is bounded."""
    return min(_whole(value) or 0, MAX_TOKEN_COUNT)


class ParsedChoices(NamedTuple):
    """A chat completion's choices as read against a request: what decides whether and how the judge
    is asked again, as facts rather than words to search the problems for."""

    #: The choices that parsed and fit the schema.
    choices: list[dict[str, Any]]
    #: What was wrong with each of the others, in the words the judge and the user are shown.
    problems: list[str]
    #: The first bad content, shown to the judge when it is re-asked ("" when none held text).
    bad_content: str
    #: A choice was cut off by the completion limit.
    cut_off: bool
    #: A choice reached the limit thinking, before it gave any answer: asked again under the same
    #: limit, it spends it again.
    thought_out: bool


def parse_choices(
    request: JudgeRequest,
    body: Mapping[str, Any],
    sent_limit: Callable[[JudgeRequest], str],
    how_to_set: HowToSet,
) -> ParsedChoices:
    """The choices of a chat completion (its shape checked), each parsed and checked against the
    request's schema, and what was wrong with those that were not (see :class:`ParsedChoices`).

    ``sent_limit`` names the completion limit a request was sent with (``max_tokens=512``), asked only
    for the problem of an answer it cut off; ``how_to_set`` words the settings a problem advises.
    """
    choices: list[dict[str, Any]] = []
    problems: list[str] = []
    bad_content = ""
    cut_off = thought_out = False
    got: list[dict[str, Any]] = body["choices"]
    if len(got) != request.n:
        problems.append(f"expected {request.n} choice(s), got {len(got)}")
    for i, choice in enumerate(got):
        message = choice.get("message") or {}
        content = content_text(message.get("content"))
        where = f"choice {i}" if request.n > 1 else "answer"
        called = None if _has_text(content) else tool_call_arguments(message)
        if called is not None:
            # No content, and a tool call the request offered no tool for: a server that implements
            # structured output through a tool call put the answer in its arguments. Read, checked
            # and recorded as content is (a reasoning model's thinking, by contrast, is a draft).
            name, content = called
            where = f"{where} (the arguments of a tool call {name!r}, a tool the request did not offer)"
        if isinstance(content, str):
            content = valid_text(content)  # shown to the judge again when re-asked: sent as UTF-8
        finish = choice.get("finish_reason")
        if finish == "length":
            # Cut off mid-answer, or a reasoning model mid-thinking with no answer yet: even when
            # what came parses, it is not the answer the model meant.
            thought = "" if _has_text(content) else _thinking(message, body)
            cut_off = True
            limit = sent_limit(request)
            if thought:
                thought_out = True
                problems.append(
                    f"{where}: cut off at the completion limit ({limit}) before it gave any answer, "
                    f"thinking ({thought})"
                )
            else:
                problems.append(f"{where}: cut off at the completion limit ({limit}) before it was complete")
            bad_content = bad_content or (content if isinstance(content, str) else "")
            continue
        if content is None or (isinstance(content, str) and not content.strip()):
            refusal = message.get("refusal")
            if refusal:
                why = f" (refusal: {one_line(valid_text(str(refusal)))})"  # the model's words, on one line
            elif isinstance(finish, str) and finish != "stop":
                why = f" (finish_reason {finish!r})"  # content_filter, tool_calls: what stopped it
            elif reasoning := _reasoning(message):
                # vLLM's reasoning parsers put a whole answer there when the model never closed
                # its thinking (Qwen3 with thinking turned off): never read as the answer.
                why = (
                    f" (only {len(reasoning)} characters of reasoning: the server's "
                    "reasoning parser may have taken the answer for thinking)"
                )
            else:
                why = ""
            problems.append(f"{where} has no content{why}")
            continue
        if not isinstance(content, str):
            # A server that put the JSON object itself (or a number) where the text belongs:
            # the answer is not what was asked for, so it is re-asked like any invalid answer.
            problems.append(f"{where}: the content is a {type(content).__name__}, not text")
            bad_content = bad_content or json.dumps(content, default=str)
            continue
        try:
            value = parse_json_answer(content)
        except ValueError as exc:
            problems.append(f"{where}: {exc}: {content[:200]!r}{_tool_call_advice(called, how_to_set)}")
            bad_content = bad_content or content
            continue
        errors = answer_errors(request.schema, value)
        if errors:
            problems.append(f"{where}: " + "; ".join(errors[:5]) + _tool_call_advice(called, how_to_set))
            bad_content = bad_content or content
            continue
        choices.append(valid_text(value))
    return ParsedChoices(choices, problems, bad_content, cut_off, thought_out)


def parse_json_answer(text: str) -> Any:
    """Extract the JSON value of a judge's answer from ``text``.

    Accepts bare JSON, JSON in a Markdown code fence, and a JSON object embedded in prose (the
    outermost objects that parse). A reasoning model's thinking before its answer
    (``<think>...</think>``, left in the answer by a server without a reasoning parser) is not part
    of the answer: a draft verdict in it is never taken. Raises :class:`ValueError` when there is no
    answer, when its fences or its prose hold two different JSON objects, or an object of it gives
    one property twice (which was meant is unknown), or when it is nested too deeply to read.
    """
    try:
        return _parse_json_answer(text)
    except RepeatedName as exc:
        raise ValueError(f"the answer gives {exc.name!r} twice") from None
    except RecursionError:
        raise ValueError("the answer is nested too deeply to read") from None


_DECODER = json.JSONDecoder(object_pairs_hook=unique_names)
_NOT_JSON = object()


def _decode(text: str) -> Any:
    """``text`` as one JSON value, or ``_NOT_JSON``; an object giving a property twice raises."""
    try:
        return _DECODER.decode(text)
    except RepeatedName:
        raise
    except ValueError:
        return _NOT_JSON


def _parse_json_answer(text: str) -> Any:
    stripped = text.strip()
    if not stripped:
        raise ValueError("the answer is empty")
    value = _decode(stripped)  # bare JSON, even one whose text speaks of </think>
    if value is not _NOT_JSON:
        return value
    final = _final_channel(stripped)
    if final is not None:
        stripped = final
        if not stripped:
            raise ValueError("the answer is all thinking (gpt-oss's analysis), with no final answer")
        value = _decode(stripped)
        if value is not _NOT_JSON:
            return value
    thinking, closed, answer = stripped.partition(_THINK_END)
    if closed and (_THINK_START not in thinking or thinking.startswith(_THINK_START)):
        # DeepSeek-R1's template opens the thinking in the prompt: its answer has the closing tag only.
        stripped = answer.strip()
        if not stripped:
            raise ValueError("the answer is all thinking, with no answer after it")
        value = _decode(stripped)
        if value is not _NOT_JSON:
            return value
    elif stripped.startswith(_THINK_START):
        raise ValueError("the answer is all thinking, with no answer after it")
    fenced = [v for v in (_decode(block.strip()) for block in _FENCE.findall(stripped)) if v is not _NOT_JSON]
    if fenced:
        return _one_answer(fenced, "in code fences")
    found = []
    start = stripped.find("{")
    while start != -1:
        try:
            value, end = _DECODER.raw_decode(stripped, start)
        except RepeatedName:
            raise
        except ValueError:
            start = stripped.find("{", start + 1)
            continue
        found.append(value)  # an object: raw_decode at a brace reads nothing else
        start = stripped.find("{", end)
    if found:
        return _one_answer(found, "in its text")
    raise ValueError("no JSON object found in the answer")


#: gpt-oss's harmony format, left in the content by a server that does not parse it: its analysis
#: channel, then its answer in the final channel; with the special tokens dropped, the channel names
#: run into the text ("analysisWe need...assistantfinal{...}").
_HARMONY = (("<|channel|>", "<|channel|>final<|message|>"), ("analysis", "assistantfinal"))
_HARMONY_ENDS = ("<|return|>", "<|end|>")


def _final_channel(text: str) -> str | None:
    """What gpt-oss wrote in its final channel ("" when it wrote none), or None when ``text`` is not
    in its harmony format."""
    for opening, final in _HARMONY:
        if text.startswith(opening) and (opening != "analysis" or final in text):
            answer = text.rpartition(final)[2] if final in text else ""
            answer = answer.strip()
            for end in _HARMONY_ENDS:
                answer = answer.removesuffix(end)
            return answer.strip()
    return None


def _one_answer(values: list[Any], where: str) -> Any:
    """The one value the JSON found in an answer's prose or code fences gives. Two that differ (a
    draft verdict and the verdict, thinking a server left in the content, an example and the answer)
    are no answer: which one the judge meant cannot be told, so it is asked again."""
    different: list[Any] = []
    for value in values:
        if value not in different:
            different.append(value)
    if len(different) > 1:
        raise ValueError(
            f"the answer holds {len(different)} different JSON objects {where}: which one is the answer "
            "cannot be told"
        )
    return different[0]
