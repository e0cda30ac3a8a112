"""Scrub credentials from text before it reaches a person: error messages, warnings, reports.

:func:`redact` replaces

* the user-info of URLs (``http://user:KEY@host/v1`` becomes ``http://***@host/v1``) and the values
  of their query parameters named like a credential (``https://host/v1?api-key=KEY&page=2`` becomes
  ``https://host/v1?api-key=***&page=2``); a chunk quoting ``https://docs.example/search?q=manual``
  keeps its query;
* the values of the API-key variables the judge reads (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``,
  ``AZURE_OPENAI_AD_TOKEN``) and of keys passed to a judge in code (:func:`add_secret`);
* the secrets a judge's base URL carries (:func:`url_secrets`: its user-info, its query values and a
  path segment shaped like a key, as a gateway's ``https://gw.example/v1/KEY/`` has), wherever they
  appear: of the base-URL variables (``OPENAI_BASE_URL``, ``AZURE_OPENAI_ENDPOINT``,
  ``RAGMETRICS_JUDGE_BASE_URL``) and of a base URL given otherwise (:func:`add_url`);
* bearer tokens (``Authorization: Bearer ...``) and ``api-key`` headers, as a server's error body may
  echo them;
* anything shaped like an OpenAI-style key (``sk-...``),

with ``***``. Every :class:`~pytest_ragmetrics.errors.RagMetricsError` message passes through it, as do
our warnings and the reports, so a judge error can be pasted into a bug report as it is.

:func:`one_line` is the other half of showing someone else's text: on one line, with the characters
a terminal would act on (ESC, BEL) escaped rather than sent to it. Both sit here, below every module
that quotes such text: the judge, the assertions and the reports.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
import threading
from typing import Any, TypeVar, cast

__all__ = [
    "MASK",
    "SECRET_URL_VARIABLES",
    "SECRET_VARIABLES",
    "add_secret",
    "add_url",
    "one_line",
    "redact",
    "redact_json",
    "short_reason",
    "url_secrets",
]

MASK = "***"

#: Environment variables whose values are secrets wherever they appear.
SECRET_VARIABLES = ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_AD_TOKEN")

#: Environment variables holding a judge's base URL, whose secrets (:func:`url_secrets`) are secrets
#: wherever they appear.
SECRET_URL_VARIABLES = ("OPENAI_BASE_URL", "AZURE_OPENAI_ENDPOINT", "RAGMETRICS_JUDGE_BASE_URL")

#: Query parameter names that carry a credential (``key``, ``api-key``, ``access_token``, ``sig``,
#: ``X-Amz-Signature``, ``client_secret``, ``password``...): their values are masked in every URL.
_CREDENTIAL_NAME = re.compile(r"(?i)key|token|secret|passw|pwd|auth|sig|credential|session")


# Shorter values are not scrubbed: replacing every "1" or "abc" in a message would garble it, and a
# real key is never that short.
_MIN_SECRET = 6


def one_line(text: Any) -> str:
    """``text`` (a judge's reason, a chunk, a server's words) as one line fit for a terminal: each run
    of white space one space, since a newline would break the indentation that groups details under
    their row; and each other character a terminal acts on rather than shows (ESC, which starts a
    colour or clears the screen, BEL, a backspace) escaped as Python's ``repr`` escapes it, ``\\x1b``."""
    line = " ".join(str(text).split())
    if line.isprintable():
        return line
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in line)


#: How much of a judge's reason explanations and reports quote. A reason is a sentence or two; a
#: model that loops in it under a large completion limit, or a server that ignores the limit, sends
#: hundreds of kilobytes, which a failure's why, every report row and the Markdown summary would
#: print whole (the verdict keeps it, in the JSON and HTML reports).
QUOTED_REASON = 200


def short_reason(reason: str) -> str:
    """A judge's ``reason`` as explanations and reports quote it: each run of white space one space,
    its first :data:`QUOTED_REASON` characters."""
    line = " ".join(reason[: 2 * QUOTED_REASON].split())
    return line if len(line) <= QUOTED_REASON else line[: QUOTED_REASON - 1] + "…"


@functools.cache
def _patterns() -> tuple[re.Pattern[str], ...]:
    """What :func:`redact` masks (a URL's user-info, a URL's query, a bearer token, an ``api-key``
    header, an ``sk-`` key) and, last, what the last three need in a text: most texts need no
    regular expression.

    Compiled when first needed: most runs scrub nothing, the text of their report found clean by
    substring searches alone (see :func:`_may_hold_secrets`).
    """
    return (
        re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@\"'\\<>]+@"),
        re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://[^\s\"'\\<>?#]*\?)([^\s\"'\\<>#]+)"),
        re.compile(r"(?i)\b(bearer\s+)[^\s\"',;\\<>]+"),
        re.compile(r"(?i)\b(api[-_]key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;\\<>]+"),
        re.compile(r"\bsk-[A-Za-z0-9_\-]{6,}"),
        re.compile(r"(?i)bearer|api[-_]key|sk-"),
    )


_extra: set[str] = set()
_extra_lock = threading.Lock()


def add_secret(value: str | None) -> None:
    """Scrub ``value`` from every later message of this process (a key passed to a judge in code)."""
    if value and len(value) >= _MIN_SECRET:
        with _extra_lock:
            _extra.add(value)


def add_url(url: str | None) -> None:
    """Scrub the secrets of the base URL ``url`` (:func:`url_secrets`) from every later message of
    this process: a base URL given in code or in the pytest configuration."""
    for value in url_secrets(url or ""):
        add_secret(value)


@functools.lru_cache(maxsize=32)
def url_secrets(url: str) -> tuple[str, ...]:
    """The parts of ``url`` that may be credentials: its user-info (user and password), the values of
    its query parameters named like a credential and its bare query items, and each path segment
    shaped like a key (:func:`_key_like`), each also percent-decoded.

    A gateway may take its key in any of them, and a server's error may quote it without the URL
    around it, so each is scrubbed wherever it appears, not only inside a URL.
    """
    from urllib.parse import unquote, urlsplit

    try:
        parts = urlsplit(url.strip())
    except ValueError:  # an unbalanced [ in the host: nothing to take apart
        return ()
    found: list[str] = []
    userinfo, at, _ = parts.netloc.rpartition("@")
    if at:
        found += [userinfo, *userinfo.split(":", 1)]
    for item in parts.query.replace(";", "&").split("&"):
        name, equals, value = item.partition("=")
        if not equals:
            found.append(name)  # a bare token
        elif _CREDENTIAL_NAME.search(name):
            found.append(value)  # not an api-version's date, which would be masked in every report
    found += [segment for segment in parts.path.split("/") if _key_like(segment)]
    values = {v for v in found if len(v) >= _MIN_SECRET} | {unquote(v) for v in found}
    return tuple(sorted(v for v in values if len(v) >= _MIN_SECRET))


def _key_like(segment: str) -> bool:
    """A path segment that looks generated rather than named: a run of 16 or more letters and digits
    holding both (``v1``, ``openai``, ``deployments`` and model names have none), a run of 16 or more
    letters whose case changes at a third of its letters or more (at random, as a generated key's
    does; a name's changes once a word: ``MyProductionDeployment``), or 32 or more hex digits,
    hyphens allowed (a UUID).

    A shorter key is not told from a name (``gpt4o``, ``v1beta``, ``llama3``): such a gateway's key is
    masked when it is also given as the API key (``OPENAI_API_KEY``), masked whatever its shape."""
    runs = re.findall(r"[A-Za-z0-9]{16,}", segment)
    if any(re.search(r"[0-9]", run) and re.search(r"[A-Za-z]", run) for run in runs):
        return True
    for run in re.findall(r"[A-Za-z]{16,}", segment):
        changes = sum(a.isupper() != b.isupper() for a, b in itertools.pairwise(run))
        if changes * 3 >= len(run) - 1:
            return True
    digits = segment.replace("-", "")
    return len(digits) >= 32 and all(c in "0123456789abcdefABCDEF" for c in digits)


def _secrets() -> list[str]:
    environ = os.environ
    values = {environ.get(name, "") for name in SECRET_VARIABLES}
    for name in SECRET_URL_VARIABLES:
        url = environ.get(name)
        if url:
            values.update(url_secrets(url))
    with _extra_lock:
        values |= _extra
    # Longest first, so a key that contains another is replaced whole.
    return sorted((v for v in values if len(v) >= _MIN_SECRET), key=len, reverse=True)


def redact(text: str) -> str:
    """``text`` with URL credentials and query values, configured API keys and base URLs' secrets,
    bearer tokens and ``sk-`` keys masked."""
    return _redact(text, _secrets()) if text else text


_T = TypeVar("_T")


def redact_json(value: _T) -> _T:
    """A JSON-like value (dicts, lists, strings...) with every string passed through :func:`redact`.

    Containers holding a string that changed are copies; the others are returned as they are (a
    run report holds hundreds of thousands of strings, nearly all clean: copying them all doubled
    what a large run holds in memory at its end).
    """
    secrets = _secrets()
    if not _may_hold_secrets(value, secrets):
        return value
    # Most strings repeat (metric names, labels, reasons): each distinct one is scrubbed once.
    # None: nothing to scrub. Leaves are handled inline: a call per string cost more than the scrub.
    done: dict[str, str | None] = {}

    def scrub(text: str) -> str:
        clean = done.get(text, _UNSEEN)
        if clean is _UNSEEN:
            scrubbed = _redact(text, secrets)
            clean = done[text] = None if scrubbed == text else scrubbed
        return text if clean is None else cast(str, clean)

    def leaf(item: Any) -> Any:
        kind = type(item)
        if kind is str:
            clean = done.get(item, _UNSEEN)
            return item if clean is None else scrub(item) if clean is _UNSEEN else clean
        if kind in _SCALARS:
            return item
        return walk(item)

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            return scrub(item)
        if isinstance(item, dict):
            pairs = [(scrub(k) if isinstance(k, str) else k, leaf(v)) for k, v in item.items()]
            if type(item) is dict and all(
                k is old_k and v is old_v for (k, v), (old_k, old_v) in zip(pairs, item.items(), strict=True)
            ):
                return item
            return dict(pairs)
        if isinstance(item, (list, tuple)):
            values = [leaf(v) for v in item]
            if type(item) in (list, tuple) and all(v is old for v, old in zip(values, item, strict=True)):
                return item
            return values if type(item) is list else type(item)(values)
        return item

    return cast("_T", leaf(value))


def _may_hold_secrets(value: Any, secrets: list[str]) -> bool:
    """False when no string in ``value`` can need scrubbing: one search of its JSON text (C code)
    instead of a Python call per string. JSON escapes a string character by character, so a
    secret appears in the text in its escaped form; the patterns whose match could span an escaped
    character (whitespace after ``Bearer``, quotes around an ``api-key``) are looked for by their
    fixed part alone. Anything the JSON encoder refuses: True (look at every string)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return True
    if any(json.dumps(secret, ensure_ascii=False)[1:-1] in text for secret in secrets):
        return True
    if "sk-" in text:
        return True
    if "://" in text and (_patterns()[0].search(text) is not None or _patterns()[1].search(text) is not None):
        return True
    if any(letter in text for letter in FOLDS_TO_ASCII):
        return True  # the patterns' case-insensitive letters match these too; lower() does not
    lowered = text.lower()  # what the case-insensitive patterns match (substring search: fast)
    return "bearer" in lowered or "api-key" in lowered or "api_key" in lowered


#: The characters beyond ASCII that a case-insensitive pattern matches to an ASCII letter (dotted and
#: dotless i, long s, the Kelvin sign).
FOLDS_TO_ASCII = ("\u0130", "\u0131", "\u017f", "\u212a")
_SCALARS = (int, float, bool, type(None))
_UNSEEN: Any = object()


def _redact(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    url_userinfo, url_query, bearer, api_key_header, sk_key, suspect = _patterns()
    if "://" in text:
        if "@" in text:
            text = url_userinfo.sub(rf"\1{MASK}@", text)
        if "?" in text:
            text = url_query.sub(_masked_query, text)
    if suspect.search(text) is None:
        return text
    text = bearer.sub(rf"\1{MASK}", text)
    text = api_key_header.sub(rf"\1{MASK}", text)
    return sk_key.sub(f"sk-{MASK}", text) if "sk-" in text else text


def _masked_query(match: re.Match[str]) -> str:
    """A URL's query with the values of its credential-named parameters masked, the names kept (they
    say which setting to look at). Other values are the user's data (a chunk quoting a search URL)."""
    items = []
    for item in match[2].split("&"):
        name, equals, _ = item.partition("=")
        items.append(f"{name}={MASK}" if equals and _CREDENTIAL_NAME.search(name) else item)
    return match[1] + "&".join(items)
