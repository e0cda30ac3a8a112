"""Deterministic, offline sentence splitting, and text normalization for hashing and prompts.

Sentences are split with NLTK's Punkt algorithm, but from parameters shipped in this package
(:mod:`pytest_ragmetrics._punkt`), never from NLTK's downloadable ``punkt_tab`` data: that file is
absent on fresh and offline machines and differs between installations, and a different split changes
scores and judge cache keys. ``nltk`` itself is imported on first use only.

How text is split (:class:`PunktSplitter`):

* Lines first. A blank line always ends a sentence, and so does a line break, because RAG chunks are
  full of headings and list items without a final period. A line break does *not* end a sentence when
  the text is clearly hard-wrapped: the next line starts with a lower-case letter or with ``,;:)]}``, or
  the line ends with ``,``, ``;``, ``(``, ``-``, ``/``, ``&``, a known abbreviation or an initial
  (``Dr.`` / ``J.`` at a line end). A line that starts with a list or heading marker
  (``-``, ``*``, ``•``, ``1.``, ``2)``, ``a)``, ``(iv)``, ``#``, ``>``, ``- [ ]``) always starts a new
  sentence, and the marker is left out of it.
* Then Punkt, within each run of joined lines, with our abbreviation list: ``Dr. Smith``, ``p.m.``,
  ``e.g.``, ``Jan. 5`` and ``U.S.`` do not end a sentence, and decimals and versions (``3.5``,
  ``v2.1.0``) never do. After an abbreviation, an initial or a number, a capitalised common sentence
  opener ends the sentence: ``... in the U.S. It was ...`` is two sentences, ``the U.S. Army`` is not.
  Closing quotes and brackets stay with the sentence they close (``He said "Stop." Then he left.``).
* Two fixes on top of Punkt: ``?`` or ``!`` followed by a lower-case word does not end a sentence
  (``"Stop!" he said.``), and ``etc.`` followed by any capitalised word does.
* Every sentence is stripped, and pieces without a letter or digit (``---``, a lone ``*``) are dropped.

Each sentence is a verbatim substring of the input, in order, so it can be quoted back.
Known limitations: the Unicode ellipsis ``…`` never ends a sentence; an abbreviation followed by a
capitalised word that is not a common opener does not either (``U.S. Troops ...``); a hard wrap before
a capitalised word (``the capital is`` / ``Paris``) is taken for a sentence break.
"""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, TypeAlias

from . import _punkt

__all__ = ["PunktSplitter", "Splitter", "default_splitter", "normalize_text", "split_sentences"]

Splitter: TypeAlias = Callable[[str], list[str]]
"""Anything that turns a text into its sentences; each must be a verbatim substring of the text."""

# Punkt's orthographic-context flags (nltk.tokenize.punkt._ORTHO_BEG_UC / _ORTHO_MID_LC). Written out
# because they are private in nltk; tests check them against nltk's values.
_ORTHO_BEG_UC = 1 << 1
_ORTHO_MID_LC = 1 << 5

_LINE_BREAK = re.compile(r"\r\n|[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029]")
# List and heading markers at the start of a line; applied repeatedly, so "> - item" loses both.
_MARKER = re.compile(
    # Bullets, dashes, headings, quotes and task boxes are markers even alone on a line ...
    r"(?:[-*+\u2022\u25e6\u25aa\u25ab\u2023\u25cf\u25cb\u25a0\u25a1\u2013\u2014\u00b7]"  # bullets, dashes
    r"|\#{1,6}|>"  # Markdown heading, block quote
    r"|\[[ xX]\]"  # task-list box
    r")(?:\s+|$)"
    # ... but "42." or "b." alone on a line is the sentence itself: numbering needs text after it.
    r"|(?:\d{1,3}[.)]|\(\d{1,3}\)"  # 1.  2)  (3)
    r"|[a-z][.)]|\([A-Za-z]\)"  # a.  b)  (C)
    r"|[ivx]{1,5}[.)]|\([ivx]{1,5}\)"  # iv.  (ii)
    r")\s+(?=\S)"
)
_CONTINUES_LINE = re.compile(r"[^\W\d_]")  # a letter; the caller checks it is lower case
_LEADING_CONTINUATION = ",;:)]}"
_TRAILING_CONTINUATION = ",;(-/&\u2013\u2014"
_LAST_WORD = re.compile(r"(\S+)\.$")
_INITIAL = re.compile(r"[^\W\d_]$")
_CLOSERS = "\"')]}\u2018\u2019\u201c\u201d\u00ab\u00bb"
_QUESTION_OR_BANG = re.compile(rf"[?!][{re.escape(_CLOSERS)}]*$")
_FINAL_ABBREVIATION = re.compile(
    r"(?<![\w.])(?:" + "|".join(sorted(map(re.escape, _punkt.SENTENCE_FINAL_ABBREVIATIONS))) + r")\."
    rf"[{re.escape(_CLOSERS)}]*(?=\s+[^\W\d_])",
    re.IGNORECASE,
)


def normalize_text(text: str) -> str:
    """Return ``text`` in the canonical form used for hashing (judge cache keys) and for prompts.

    Unicode NFC, ``\\r\\n`` and ``\\r`` turned into ``\\n``, trailing whitespace removed from every line,
    and the whole string stripped. Indentation inside the text is kept: it can carry meaning (code,
    nested lists).
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_text expects a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).strip()


class _OrthoContext(dict[str, int]):
    """Punkt's orthographic context, but reading an unknown word does not store it.

    Punkt keeps this as a ``defaultdict(int)``, which grows by one entry for every distinct word that
    follows a period; in a long test session that is an unbounded, shared cache we do not want.
    """

    def __missing__(self, key: str) -> int:
        return 0


def _build_tokenizer() -> Any:
    """A ``PunktSentenceTokenizer`` from our parameters; loads no NLTK data and downloads nothing."""
    # nltk is a large import; do it only when text is first split. nltk ships no type information.
    from nltk.tokenize.punkt import (
        PunktLanguageVars,
        PunktParameters,
        PunktSentenceTokenizer,
    )

    class _LanguageVars(PunktLanguageVars):  # type: ignore[misc]
        """NLTK's English language variables, pinned to the values of nltk 3.9+.

        Older nltk releases do not treat curly quotes and guillemets as closing punctuation; pinning
        keeps the split the same on every supported nltk version.
        """

        __slots__ = ()

        re_boundary_realignment = re.compile(
            r'["\')\]}\u2018\u2019\u201c\u201d\xab\xbb]+?(?:\s+|(?=--)|$)', re.MULTILINE
        )

        @property
        def _re_non_word_chars(self) -> str:
            return r"(?:[)\";}\]\*:@\'\({\[\u2018\u2019\u201c\u201d\xab\xbb!?])"

    params = PunktParameters()
    params.abbrev_types = set(_punkt.ABBREVIATIONS)
    params.sent_starters = set(_punkt.SENTENCE_STARTERS)
    # Seen capitalised only at a sentence start and in lower case inside sentences: the evidence
    # Punkt's orthographic heuristic needs to call the word a sentence starter.
    params.ortho_context = _OrthoContext.fromkeys(_punkt.SENTENCE_STARTERS, _ORTHO_BEG_UC | _ORTHO_MID_LC)
    return PunktSentenceTokenizer(params, lang_vars=_LanguageVars())


class PunktSplitter:
    """The default :data:`Splitter`: Punkt with shipped parameters, plus line and list handling.

    Callable as ``splitter(text) -> list[str]``. The NLTK tokenizer is built on the first call and
    reused; instances are safe to share between threads. See the module docstring for the rules.
    """

    def __init__(self) -> None:
        self._tokenizer: Any = None
        self._lock = threading.Lock()
        # The same chunk is split once per metric and per test that uses it; remember recent ones.
        self._cached_spans = functools.lru_cache(maxsize=1024)(self._compute_spans)

    @property
    def fingerprint(self) -> str:
        """A short, stable identifier of this splitter's parameters and rules, for cache namespaces."""
        digest = hashlib.sha256()
        for name in ("ABBREVIATIONS", "SENTENCE_STARTERS", "SENTENCE_FINAL_ABBREVIATIONS"):
            digest.update(f"{name}={','.join(sorted(getattr(_punkt, name)))};".encode())
        return f"punkt-{_punkt.PARAMETERS_VERSION}-{digest.hexdigest()[:12]}"

    def __repr__(self) -> str:
        return f"PunktSplitter({self.fingerprint})"

    def __call__(self, text: str) -> list[str]:
        """Split ``text`` into stripped sentences, each a verbatim substring of ``text``, in order."""
        return [text[start:end] for start, end in self.spans(text)]

    def spans(self, text: str) -> list[tuple[int, int]]:
        """The ``(start, end)`` offsets of the sentences of ``text``: ``text[start:end]`` is a sentence."""
        if not isinstance(text, str):
            raise TypeError(f"expected a str to split into sentences, got {type(text).__name__}")
        return list(self._cached_spans(text))

    def _compute_spans(self, text: str) -> tuple[tuple[int, int], ...]:
        if not text.strip():
            return ()
        tokenizer = self._get_tokenizer()
        result: list[tuple[int, int]] = []
        for block_start, block_end in _blocks(text):
            block = text[block_start:block_end]
            spans = [(block_start + s, block_start + e) for s, e in tokenizer.span_tokenize(block)]
            for start, end in _split_final_abbreviations(text, _merge_lowercase_after_bang(text, spans)):
                start, end = _strip(text, start, end)
                if any(ch.isalnum() for ch in text[start:end]):
                    result.append((start, end))
        return tuple(result)

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = _build_tokenizer()
        return self._tokenizer


def _strip(text: str, start: int, end: int) -> tuple[int, int]:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return start, end


def _lines(text: str) -> Iterator[tuple[int, int]]:
    """Offsets of every line's content, stripped; blank lines come out as empty spans."""
    pos = 0
    for match in _LINE_BREAK.finditer(text):
        yield _strip(text, pos, match.start())
        pos = match.end()
    yield _strip(text, pos, len(text))


def _strip_markers(text: str, start: int, end: int) -> tuple[int, int, bool]:
    """Skip list/heading markers at ``start``; the flag says whether there were any."""
    found = False
    while start < end:
        match = _MARKER.match(text, start, end)
        if match is None:
            break
        found = True
        start = match.end()
    return start, end, found


def _continues(text: str, prev_end: int, start: int) -> bool:
    """Whether the line starting at ``start`` continues the sentence of the line ending at ``prev_end``."""
    first = text[start]
    if first in _LEADING_CONTINUATION or (_CONTINUES_LINE.match(first) and first.islower()):
        return True
    last = text[prev_end - 1]
    if last in _TRAILING_CONTINUATION:
        return True
    if last == ".":
        # Let Punkt decide about "Dr.", "e.g.", "J." at a line end: they rarely end a sentence.
        line_start = text.rfind(" ", 0, prev_end) + 1
        word = _LAST_WORD.search(text, line_start, prev_end)
        if word is not None:
            stem = word.group(1).lower().lstrip(_CLOSERS + "(")
            return stem in _punkt.ABBREVIATIONS or bool(_INITIAL.fullmatch(stem))
    return False


def _blocks(text: str) -> Iterator[tuple[int, int]]:
    """Runs of lines that may form one sentence, with markers removed and the edges stripped."""
    block: tuple[int, int] | None = None
    block_is_heading = False
    for start, end in _lines(text):
        if start == end:  # a blank line ends the paragraph
            if block is not None:
                yield block
            block = None
            continue
        start, end, marked = _strip_markers(text, start, end)
        if start >= end:  # a line holding only a marker, such as "-" or "##"
            if block is not None:
                yield block
            block = None
            continue
        if block is not None and not marked and not block_is_heading and _continues(text, block[1], start):
            block = (block[0], end)
            continue
        if block is not None:
            yield block
        block = (start, end)
        block_is_heading = text[text.rfind("\n", 0, start) + 1 : start].lstrip().startswith("#")
    if block is not None:
        yield block


def _merge_lowercase_after_bang(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Undo Punkt's break after ``?``/``!`` when the next word is lower case: ``"Stop!" he said.``"""
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged:
            prev_start, prev_end = merged[-1]
            nxt = _strip(text, start, end)[0]
            if (
                nxt < end
                and text[nxt].islower()
                and _QUESTION_OR_BANG.search(text, prev_start, _strip(text, prev_start, prev_end)[1])
            ):
                merged[-1] = (prev_start, end)
                continue
        merged.append((start, end))
    return merged


def _split_final_abbreviations(text: str, spans: list[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    """Break after ``etc.`` (and friends) before a capitalised word, which Punkt would not do."""
    for start, end in spans:
        for match in _FINAL_ABBREVIATION.finditer(text, start, end):
            nxt = _strip(text, match.end(), end)[0]
            if nxt < end and text[nxt].isupper():
                yield start, match.end()
                start = match.end()
        yield start, end


_DEFAULT: PunktSplitter | None = None


def default_splitter() -> PunktSplitter:
    """The shared :class:`PunktSplitter` (one per process, its tokenizer built on first use)."""
    global _DEFAULT
    if _DEFAULT is None:
        _DEFAULT = PunktSplitter()
    return _DEFAULT


def split_sentences(text: str) -> list[str]:
    """Split ``text`` into sentences with the default splitter.

    Sentences are stripped, verbatim substrings of ``text`` in their order; empty or blank text gives
    ``[]``. To use another splitter, pass any :data:`Splitter` where the engine accepts one.
    """
    return default_splitter()(text)
