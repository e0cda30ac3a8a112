"""Scrub credentials from text before it reaches a person: error messages, warnings, reports.

:func:`redact` replaces

* the user-info of URLs (``http://user:KEY@host/v1`` becomes ``http://***@host/v1``);
* the values of the API-key variables the judge reads (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``,
  ``AZURE_OPENAI_AD_TOKEN``) and of keys passed to a judge in code (:func:`add_secret`);
* bearer tokens (``Authorization: Bearer ...``) and ``api-key`` headers, as a server's error body may
  echo them;
* anything shaped like an OpenAI-style key (``sk-...``),

with ``***``. Every :class:`~pytest_ragmetrics.errors.RagMetricsError` message passes through it, as do
our warnings and the reports, so a judge error can be pasted into a bug report as it is.
"""

from __future__ import annotations

import os
import re
import threading
from typing import Any, TypeVar, cast

__all__ = ["MASK", "SECRET_VARIABLES", "add_secret", "redact", "redact_json"]

MASK = "***"

#: Environment variables whose values are secrets wherever they appear.
SECRET_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")

# Shorter values are not scrubbed: replacing every "1" or "abc" in a message would garble it, and a
# real key is never that short.
_MIN_SECRET = 6

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'\\<>]+@")
_BEARER = re.compile(r"(?i)\b(bearer\s+)[^\s\"',;\\<>]+")
_API_KEY_HEADER = re.compile(r"(?i)\b(api[-_]key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;\\<>]+")
_SK_KEY = re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}")

_extra: set[str] = set()
_extra_lock = threading.Lock()


def add_secret(value: str | None) -> None:
    """Scrub ``value`` from every later message of this process (a key passed to a judge in code)."""
    if value and len(value) >= _MIN_SECRET:
        with _extra_lock:
            _extra.add(value)


def _secrets() -> list[str]:
    values = {os.environ.get(name, "") for name in SECRET_VARIABLES}
    with _extra_lock:
        values |= _extra
    # Longest first, so a key that contains another is replaced whole.
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with URL credentials, configured API keys, bearer tokens and ``sk-`` keys masked."""
    return _redact(text, _secrets()) if text else text


_T = TypeVar("_T")


def redact_json(value: _T) -> _T:
    """A JSON-like value (dicts, lists, strings...) with every string passed through :func:`redact`.

    Containers holding a string that changed are copies; the others are returned as they are (a
    run report holds hundreds of thousands of strings, nearly all clean: copying them all doubled
    what a large run holds in memory at its end).
    """
    secrets = _secrets()
    # Most strings repeat (metric names, labels, reasons): each distinct one is scrubbed once.
    done: dict[str, str | None] = {}  # None: nothing to scrub

    def text(item: str) -> str:
        clean = done.get(item, _UNSEEN)
        if clean is _UNSEEN:
            scrubbed = _redact(item, secrets)
            clean = done[item] = None if scrubbed == item else scrubbed
        return item if clean is None else cast(str, clean)

    def walk(item: Any) -> Any:
        kind = type(item)
        if kind is str:
            return text(item)
        if kind in _SCALARS:
            return item
        if isinstance(item, dict):
            pairs = [(text(k) if isinstance(k, str) else k, walk(v)) for k, v in item.items()]
            if kind is dict and all(
                k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, item.items(), strict=True)
            ):
                return item
            return dict(pairs)
        if isinstance(item, (list, tuple)):
            values = [walk(v) for v in item]
            if kind in (list, tuple) and all(v is old for v, old in zip(values, item, strict=True)):
                return item
            return values if kind is list else type(item)(values)
        if isinstance(item, str):
            return text(item)
        return item

    return cast("_T", walk(value))


_SCALARS = (int, float, bool, type(None))
_UNSEEN: Any = object()
# Each pattern below needs one of these in the text: most texts need no regular expression at all.
_SUSPECT = re.compile(r"(?i)@|bearer|api[-_]key|sk-")


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if _SUSPECT.search(text) is None:
        return text
    if "@" in text:
        text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _BEARER.sub(rf"\1{MASK}", text)
    text = _API_KEY_HEADER.sub(rf"\1{MASK}", text)
    return _SK_KEY.sub(f"sk-{MASK}", text) if "sk-" in text else text
