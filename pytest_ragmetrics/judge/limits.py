"""The size limits providers put on a strict structured-output schema, and how to measure a schema.

Providers reject a ``json_schema`` response format whose schema is too large, with an HTTP 400 before
any model runs. The documented limits:

=================================  ==========  ===========  ===============  ==========
provider                           properties  enum values  name characters  nesting
=================================  ==========  ===========  ===============  ==========
OpenAI structured outputs (now)    5,000       1,000        120,000          10
Azure OpenAI, OpenAI in 2024       100         500          15,000           5
=================================  ==========  ===========  ===============  ==========

*properties* counts the properties of every object in the schema; *enum values* all values of all
``enum`` keywords; *name characters* the total length of property names, enum values and ``const``
values; *nesting* the levels of objects and arrays from the root (the root object is level 1).

Every request this package builds stays within :data:`STRICTEST` whatever the input size: long
references and chunks are judged in windows (see :mod:`pytest_ragmetrics.judgments`). The functions
here are pure and use only the standard library, so :mod:`pytest_ragmetrics.testing` can enforce the
same limits in its fake server.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AZURE_OPENAI",
    "OPENAI",
    "STRICTEST",
    "SchemaLimits",
    "SchemaSize",
    "completion_tokens",
    "limit_problems",
    "measure",
]


@dataclass(frozen=True)
class SchemaLimits:
    """The largest strict schema a provider accepts."""

    name: str
    max_properties: int
    max_enum_values: int
    max_name_characters: int
    max_nesting: int


#: OpenAI's strict structured outputs as documented today.
OPENAI = SchemaLimits("OpenAI structured outputs", 5000, 1000, 120_000, 10)
#: Azure OpenAI (and OpenAI's own limits of 2024).
AZURE_OPENAI = SchemaLimits("Azure OpenAI", 100, 500, 15_000, 5)
#: The strictest of the limits above: what every request this package builds stays within.
STRICTEST = SchemaLimits(
    "the strictest provider limits",
    min(OPENAI.max_properties, AZURE_OPENAI.max_properties),
    min(OPENAI.max_enum_values, AZURE_OPENAI.max_enum_values),
    min(OPENAI.max_name_characters, AZURE_OPENAI.max_name_characters),
    min(OPENAI.max_nesting, AZURE_OPENAI.max_nesting),
)


@dataclass(frozen=True)
class SchemaSize:
    """What a schema spends of each limit."""

    properties: int = 0
    enum_values: int = 0
    name_characters: int = 0
    nesting: int = 0


def measure(schema: Mapping[str, Any]) -> SchemaSize:
    """Count a schema's properties, enum values, name characters and nesting levels."""
    properties = enum_values = characters = 0
    deepest = 0
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, level = stack.pop()
        if not isinstance(node, Mapping):
            continue
        kind = node.get("type")
        if kind in ("object", "array") or "properties" in node or "items" in node:
            deepest = max(deepest, level)
        props = node.get("properties")
        if isinstance(props, Mapping):
            properties += len(props)
            for name, sub in props.items():
                characters += len(str(name))
                stack.append((sub, level + 1))
        if "enum" in node:
            values = list(node["enum"])
            enum_values += len(values)
            characters += sum(len(str(v)) for v in values)
        if "const" in node:
            characters += len(str(node["const"]))
        items = node.get("items")
        if isinstance(items, Mapping):
            stack.append((items, level + 1))
        for defs in ("$defs", "definitions"):
            found = node.get(defs)
            if isinstance(found, Mapping):
                for name, sub in found.items():
                    characters += len(str(name))
                    stack.append((sub, level))
    return SchemaSize(properties, enum_values, characters, deepest)


def limit_problems(schema: Mapping[str, Any], limits: SchemaLimits = STRICTEST) -> list[str]:
    """Why ``schema`` exceeds ``limits``, one message per limit exceeded (empty when it fits)."""
    size = measure(schema)
    problems = []
    if size.properties > limits.max_properties:
        problems.append(
            f"the schema has {size.properties} object properties; the limit is {limits.max_properties}"
        )
    if size.enum_values > limits.max_enum_values:
        problems.append(
            f"the schema has {size.enum_values} enum values; the limit is {limits.max_enum_values}"
        )
    if size.name_characters > limits.max_name_characters:
        problems.append(
            f"the property names and enum values of the schema total {size.name_characters} characters; "
            f"the limit is {limits.max_name_characters}"
        )
    if size.nesting > limits.max_nesting:
        problems.append(f"the schema nests {size.nesting} levels deep; the limit is {limits.max_nesting}")
    return problems


# --- how long an answer may be ---------------------------------------------------------------------

#: Tokens allowed for one free-text string of an answer (a ``reason``, a ``claim``): the prompts ask
#: for one or two sentences, some 20 to 50 tokens; twice that and more leaves room for a verbose model
#: while a model looping inside its reason is cut off after a few hundred tokens, not thousands.
STRING_TOKENS = 120
#: Tokens for a boolean, a number or one enum value, with its punctuation.
VALUE_TOKENS = 4
#: Tokens for a property name, its quotes and separators.
PROPERTY_TOKENS = 8
#: Items allowed for an array of objects (the atomic claims of one sentence).
ARRAY_ITEMS = 6
#: Room for a code fence or a word of prose around the JSON (answers not in strict structured mode).
ANSWER_MARGIN = 64
#: The largest limit sent: the most completion tokens many current models produce (gpt-4o's limit).
MAX_COMPLETION_TOKENS = 16_384


def completion_tokens(schema: Mapping[str, Any]) -> int:
    """A completion limit, in tokens, for one answer conforming to ``schema``.

    Sized generously from the schema (:data:`STRING_TOKENS` per string, :data:`ARRAY_ITEMS` items per
    array of objects, every enum value of an array of enums), so a valid answer fits and a model that
    loops stops within a few hundred tokens of it; never more than :data:`MAX_COMPLETION_TOKENS`.
    """
    return min(MAX_COMPLETION_TOKENS, _tokens(schema) + ANSWER_MARGIN)


def _tokens(node: Any) -> int:
    if not isinstance(node, Mapping):
        return VALUE_TOKENS
    if "enum" in node:
        return VALUE_TOKENS
    kind = node.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    properties = node.get("properties")
    if kind == "object" or isinstance(properties, Mapping):
        children = properties.values() if isinstance(properties, Mapping) else ()
        return 2 + sum(PROPERTY_TOKENS + _tokens(child) for child in children)
    if kind == "array":
        items = node.get("items")
        if isinstance(items, Mapping) and "enum" in items:
            return 2 + len(list(items["enum"])) * VALUE_TOKENS
        return 2 + ARRAY_ITEMS * (_tokens(items) + 1)
    if kind == "string":
        return STRING_TOKENS
    return VALUE_TOKENS
