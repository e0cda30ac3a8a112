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
* Lists flattened onto one line, as PDF extraction leaves them (``1) flour 2) sugar``, ``1. … 2. …``,
  ``a. … b. … c. …``, ``• … • …``): when the line starts with the first marker, or the list follows a
  colon, and the markers count up (or repeat the same bullet), every item is a sentence of its own and
  keeps its marker (``2) sugar``), so a marker never ends up as a sentence or inside the previous one.
* Then each run of lines is scanned for sentence-ending punctuation followed by white space. The
  decision for a period is Punkt's, from our shipped abbreviations and sentence starters: ``Dr. Smith``,
  ``p.m.``, ``e.g.``, ``Jan. 5`` and ``U.S.`` do not end a sentence, and decimals and versions
  (``3.5``, ``v2.1.0``) never do; after an abbreviation, an initial or a number, a capitalised common
  sentence opener ends the sentence (``... in the U.S. It was ...``, but ``the U.S. Army``).
  On top of Punkt:

  - ``?`` and ``!`` end a sentence unless a lower-case word follows (``"Stop!" he said``,
    ``Yahoo! in``); closing quotes and brackets stay with the sentence they close.
  - A period inside a closing quote or bracket followed by a lower-case word does not end the
    sentence (``"This is fine." she said``, ``(see above.) and then``).
  - A single letter or a number abbreviation before a number does not (``p. 55``, ``No. 5``,
    ``N°. 12``); ``etc.`` before any capitalised word does; so does ``a.m.``/``p.m.`` unless the time
    opens the sentence or a weekday, month or time zone follows; so does a place, company or degree
    abbreviation before a title (``Hale & Co. Mr. Ross``).
  - Ellipses (``...``, ``…``, ``. . .``) end a sentence only before a sentence opener; a four-dot
    ellipsis (``....``, ``. . . .``) before any capitalised word, and ``word. . . . Next`` ends after
    ``word.``. ``[...]`` never ends one. A word starting with ``¿`` or ``¡`` starts a new sentence.
  - ``。``, ``！``, ``？`` (and ``．``, ``｡``) end a sentence without a following space, except inside
    CJK brackets (``《吧！》``) and before text that continues a closing quote (``「…。」と``), and
    ``．`` between digits is a decimal point. ``।``, ``॥``, ``؟``, ``۔``, ``։``, ``።`` and ``။`` end a
    sentence before white space.
* Every sentence is stripped, and pieces without a letter or digit (``---``, a lone ``*``) are dropped.

Each sentence is a verbatim substring of the input, in order, so it can be quoted back.
Known limitations: an abbreviation followed by a capitalised word that is not a common opener does
not end a sentence (``U.S. Troops ...``); a hard wrap before a capitalised word (``the capital is`` /
``Paris``) is taken for a sentence break; a period straight after a word with no space
(``end.Next``) never ends a sentence.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import re
import threading
import types
import unicodedata
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeAlias

from . import _punkt

__all__ = ["PunktSplitter", "Splitter", "default_splitter", "normalize_text", "split_sentences"]

Splitter: TypeAlias = Callable[[str], list[str]]
"""Anything that turns a text into its sentences; each must be a verbatim substring of the text."""

# Punkt's orthographic-context flags (nltk.tokenize.punkt._ORTHO_BEG_UC / _ORTHO_MID_LC). Written out
# because they are private in nltk; tests check them against nltk's values.
_ORTHO_BEG_UC = 1 << 1
_ORTHO_MID_LC = 1 << 5

# One line break: "\r\n" or a character of str.splitlines. Written to start with a character class (not
# as an alternation), so a search skips ahead to the break characters instead of trying every position.
_LINE_BREAK = re.compile(r"[\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029](?:(?<=\r)\n)?")
# List and heading markers at the start of a line; applied repeatedly, so "> - item" loses both.
_MARKER = re.compile(
    # Bullets, dashes, headings, quotes and task boxes are markers even alone on a line ...
    r"(?:[-*+\u2022\u25e6\u25aa\u25ab\u2023\u2043\u25cf\u25cb\u25a0\u25a1\u2013\u2014\u00b7]"  # bullets
    r"|\#{1,6}|>"  # Markdown heading, block quote
    r"|\[[ xX]\]"  # task-list box
    r")(?:\s+|$)"
    # ... but "42." or "b." alone on a line is the sentence itself: numbering needs text after it.
    r"|(?:\d{1,3}(?:\.\)|[.)])|\(\d{1,3}\)"  # 1.  2)  1.)  (3)
    r"|[a-z][.)]|\([A-Za-z]\)"  # a.  b)  (C)
    r"|[ivx]{1,5}[.)]|\([ivx]{1,5}\)"  # iv.  (ii)
    r")\s+(?=\S)"
)
# An item marker of a list flattened onto one line. Bullets may carry a number ("• 9.", "⁃10.").
_BULLETS = "\u2022\u25e6\u25aa\u25ab\u2023\u2043\u25cf\u25cb\u25a0\u25a1\u27a2\u27a4\u25ba\u25b8"
_LIST_MARKER = re.compile(
    rf"(?<!\S)(?:(?P<bullet>[{_BULLETS}])[ \t]*(?:\d{{1,3}}(?:\.\)|[.)])|[a-z][.)])?"
    r"|(?P<open>\()?(?P<label>\d{1,3}|[ivxIVX]{1,4}|[a-zA-Z])(?P<close>\.\)|[.)]))"
    r"[ \t]+(?=\S)"
)
# Where a marker of _LIST_MARKER ends, before the white space after it (found quickly: a set of characters).
_MARKER_END = re.compile(rf"[{_BULLETS}.)][ \t]")
_ROMAN = {"i": 1, "v": 5, "x": 10}
_CONTINUES_LINE = re.compile(r"[^\W\d_]")  # a letter; the caller checks it is lower case
_LEADING_CONTINUATION = ",;:)]}"
_TRAILING_CONTINUATION = ",;(-/&\u2013\u2014"
_LAST_WORD = re.compile(r"(\S+)\.$")
_INITIAL = re.compile(r"[^\W\d_]$")

# Closing quotes and brackets, and the end of Markdown emphasis or code (``**Note.** Text``): they stay
# with the sentence they close.
_CLOSERS = (
    "\"')]}*_`\u2018\u2019\u201c\u201d\u00ab\u00bb\u203a"
    "\u300d\u300f\u3011\u3015\u3009\u300b\u3017\uff09\uff3d\uff5d\uff63"  # 」』】〕〉》〗）］｝｣
)
_OPENERS = "\"'([{\u2018\u201c\u00ab\u2039\u300c\u300e\u3010\u3014\u3008\u300a\u3016\uff08\uff3b\uff5b\uff62"
_CJK_OPEN = "\u300c\u300e\u3010\u3014\u3008\u300a\u3016\uff08\uff62"
_CJK_CLOSE = "\u300d\u300f\u3011\u3015\u3009\u300b\u3017\uff09\uff63"
# Ends a sentence with no space after it: 。．｡！？
_CJK_TERMINATORS = "\u3002\uff0e\uff61\uff01\uff1f"
# Ends a sentence before white space unless a lower-case word follows: ?! ‼⁇⁈⁉ and the full stops and
# question marks of Arabic, Urdu, Armenian, Ethiopic, Devanagari and Burmese text.
_STRONG_TERMINATORS = "?!\u203c\u2047\u2048\u2049\u061f\u06d4\u0589\u1362\u1367\u0964\u0965\u104b"
_TERMINATORS = ".\u2026" + _STRONG_TERMINATORS + _CJK_TERMINATORS
# A run of sentence-ending punctuation (with the spaces of ". . ."), its closing quotes and brackets,
# and the white space after it. "[T][T]*" rather than "[T]+": a pattern that starts with a character
# class lets a search skip ahead to the terminators.
_BOUNDARY = re.compile(
    rf"(?P<mark>[{re.escape(_TERMINATORS)}][{re.escape(_TERMINATORS)}]*"
    rf"(?: \.(?=[\s.{re.escape(_CLOSERS)}]|$))*)"
    rf"(?P<close>[{re.escape(_CLOSERS)}]*)\s*"
)
# Characters at which Punkt's word tokenizer ends a word (its "non-word" characters, and the comma).
_WORD_END = re.compile(r"[)\";}\]*:@'({\[\u2018\u2019\u201c\u201d\xab\xbb!?,]")
# A word up to its last character that ends a Punkt word token (``_WORD_END``), if it has one.
_UP_TO_WORD_END = re.compile(r".*" + _WORD_END.pattern, re.DOTALL)
# Where a word ends: the first white space (``str.isspace``, as ``\s`` reads it) or the end.
_WORD = re.compile(r"\S*")
_INVERTED_OPENERS = "\u00bf\u00a1"  # ¿ ¡
# A letter or digit (``str.isalnum``): a word character but the underscore.
_ALNUM = re.compile(r"[^\W_]")
# A short parenthesis followed by the end of the sentence: "(Smith et al. 2019)." after a quotation.
_CITATION = re.compile(r"\([^()?!\n]{1,80}\)[.!?]")
# The data in _punkt.py that the fingerprint covers; rule changes here bump _punkt.PARAMETERS_VERSION.
_PARAMETER_SETS = (
    "ABBREVIATIONS",
    "SENTENCE_STARTERS",
    "SENTENCE_FINAL_ABBREVIATIONS",
    "TIME_ABBREVIATIONS",
    "TIME_QUALIFIERS",
    "CLOSING_ABBREVIATIONS",
    "TITLES",
)


def normalize_text(text: str) -> str:
    """Return ``text`` in the canonical form used for hashing (judge cache keys) and for prompts.

    Unicode NFC, ``\\r\\n`` and ``\\r`` turned into ``\\n``, trailing whitespace removed from every line,
    and the whole string stripped. Indentation inside the text is kept: it can carry meaning (code,
    nested lists).
    """
    if not isinstance(text, str):
        raise TypeError(f"normalize_text expects a str, got {type(text).__name__}")
    text = unicodedata.normalize("NFC", text)
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\n" not in text:
        return text.strip()  # one line: its trailing whitespace is the whole text's
    return "\n".join([line.rstrip() for line in text.split("\n")]).strip()


class _OrthoContext(dict[str, int]):
    """Punkt's orthographic context, but reading an unknown word does not store it.

    Punkt keeps this as a ``defaultdict(int)``, which grows by one entry for every distinct word that
    follows a period; in a long test session that is an unbounded, shared cache we do not want.
    """

    def __missing__(self, key: str) -> int:
        return 0


#: Modules ``nltk.tokenize.punkt`` imports only for what the splitter never does (training, saving and
#: loading models, printing, span tokenizing by a separator): nltk's path, pickle, tab-data and
#: terminal safety layers and its tokenizer utilities, which bring ``http``, ``email``, ``urllib``,
#: ``ssl`` and ``xml.sax`` with them (about 30 ms at every run's first split).
_UNUSED_BY_SPLITTING = (
    "nltk.pathsec",
    "nltk.picklesec",
    "nltk.tabdata",
    "nltk.termsec",
    "nltk.tokenize.util",
)


def _refusing(message: str) -> Callable[..., NoReturn]:
    """A function that raises ``RuntimeError(message)`` whatever it is called with: what a stand-in
    for something not loaded gives in place of each name asked of it."""

    def unused(*args: Any, **kwargs: Any) -> NoReturn:
        raise RuntimeError(message)

    return unused


class _Unused(types.ModuleType):
    """A stand-in for a module of :data:`_UNUSED_BY_SPLITTING`: each name it is asked for is a
    function that says it was not loaded, should anything call it."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _refusing(f"{self.__name__}.{name} is not loaded for splitting sentences")


class _Uncompiled(_Unused):
    """A stand-in for ``nltk.redos``, through which nltk compiles every pattern with the third-party
    ``regex`` engine, each match under a timeout. Punkt and the nltk modules it imports compile their
    patterns as they are imported; splitting matches with none of them (the token's and the language
    variables' patterns it does use are ours, compiled by ``re``), and loading ``regex`` for them cost
    more than the rest of punkt together. Each pattern it gives says it was not compiled, should
    anything match with it."""

    def __getattr__(self, name: str) -> Any:
        if name == "compile":
            return _UncompiledPattern
        return super().__getattr__(name)


class _UncompiledPattern:
    """A pattern :class:`_Uncompiled` was given: it keeps its text, and matching with it is an error."""

    def __init__(self, pattern: Any, flags: int = 0, timeout: Any = None) -> None:
        self.pattern = getattr(pattern, "pattern", pattern)
        self.flags = flags

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _refusing(f"the pattern {self.pattern!r} is not compiled for splitting sentences")


def _import_punkt() -> Any:
    """``nltk.tokenize.punkt`` without the rest of nltk.

    ``import nltk`` runs the package's ``__init__``, which imports nearly all of nltk, and scipy and
    numpy with it when they are installed: over 100 MB and seconds, for a module that needs a few
    small ones. Unless the process has imported nltk already, punkt is loaded with stand-ins for the
    two packages around it, and everything loaded that way is taken out of ``sys.modules`` again: a
    later ``import nltk`` anywhere gets the whole, ordinary package.
    """
    import importlib
    import importlib.util
    import sys

    if "nltk" in sys.modules:
        return importlib.import_module("nltk.tokenize.punkt")
    import _imp

    _imp.acquire_lock()  # no other thread imports nltk while the stand-ins are in place
    try:
        before = set(sys.modules)
        for name in ("nltk", "nltk.tokenize"):
            spec = importlib.util.find_spec(name)
            if spec is None or spec.submodule_search_locations is None:
                raise ImportError(f"cannot find the {name} package")
            package = types.ModuleType(name)
            package.__path__ = list(spec.submodule_search_locations)
            package.__spec__ = spec
            sys.modules[name] = package
        for name in _UNUSED_BY_SPLITTING:
            sys.modules[name] = _Unused(name)
        sys.modules["nltk.redos"] = _Uncompiled("nltk.redos")
        try:
            return importlib.import_module("nltk.tokenize.punkt")
        finally:
            for name in set(sys.modules) - before:
                if name == "nltk" or name.startswith("nltk."):
                    del sys.modules[name]
    finally:
        _imp.release_lock()


def _build_tokenizer() -> Any:
    """A ``PunktSentenceTokenizer`` from our parameters; loads no NLTK data and downloads nothing."""
    # nltk is a large import; do it only when text is first split. nltk ships no type information.
    punkt = _import_punkt()
    PunktLanguageVars: Any = punkt.PunktLanguageVars
    PunktParameters: Any = punkt.PunktParameters
    PunktSentenceTokenizer: Any = punkt.PunktSentenceTokenizer
    PunktToken: Any = punkt.PunktToken

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

    class _Token(PunktToken):  # type: ignore[misc]
        """Punkt's token with its patterns compiled by ``re``: same patterns, without the per-match
        timeout recent nltk versions wrap around every regular expression (tests compare them)."""

        _RE_ELLIPSIS = re.compile(r"\.\.+$")
        _RE_NUMERIC = re.compile(r"^-?[\.,]?\d[\d,\.-]*\.?$")
        _RE_INITIAL = re.compile(r"[^\W\d]\.$", re.UNICODE)
        _RE_ALPHA = re.compile(r"[^\W\d]+$", re.UNICODE)

    params = PunktParameters()
    params.abbrev_types = set(_punkt.ABBREVIATIONS)
    params.sent_starters = set(_punkt.SENTENCE_STARTERS)
    # Seen capitalised only at a sentence start and in lower case inside sentences: the evidence
    # Punkt's orthographic heuristic needs to call the word a sentence starter.
    params.ortho_context = _OrthoContext.fromkeys(_punkt.SENTENCE_STARTERS, _ORTHO_BEG_UC | _ORTHO_MID_LC)
    return PunktSentenceTokenizer(params, lang_vars=_LanguageVars(), token_cls=_Token)


class PunktSplitter:
    """The default :data:`Splitter`: Punkt with shipped parameters, plus line, list and punctuation rules.

    Callable as ``splitter(text) -> list[str]``. The NLTK tokenizer is built on the first call and
    reused; instances are safe to share between threads. See the module docstring for the rules.
    """

    def __init__(self) -> None:
        self._tokenizer: Any = None
        self._fingerprint: str | None = None
        self._lock = threading.Lock()
        # The same chunk is split once per metric and per test that uses it; remember recent ones.
        self._cached_spans = functools.lru_cache(maxsize=1024)(self._compute_spans)
        # Most periods follow the same few hundred words; Punkt's verdict depends on the two words only.
        self._period_ends_sentence = functools.lru_cache(maxsize=8192)(self._punkt_verdict)

    @property
    def fingerprint(self) -> str:
        """A short, stable identifier of this splitter's parameters and rules, for cache namespaces."""
        # Asked for every result and sentence judgment: sorting the parameter sets each time cost a
        # warm run more than its cache reads. The parameters are read once per splitter anyway.
        if self._fingerprint is None:
            digest = hashlib.sha256()
            for name in _PARAMETER_SETS:
                digest.update(f"{name}={','.join(sorted(getattr(_punkt, name)))};".encode())
            self._fingerprint = f"punkt-{_punkt.PARAMETERS_VERSION}-{digest.hexdigest()[:12]}"
        return self._fingerprint

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
        result: list[tuple[int, int]] = []
        for start, body, end in _blocks(text):
            # text[start:body] is a list marker kept with the item's first sentence.
            for cut in [*self._cuts(text, body, end), end]:
                first, last = _strip(text, start, cut)
                if _ALNUM.search(text, first, last):
                    result.append((first, last))
                start = cut
        return tuple(result)

    def _cuts(self, text: str, start: int, end: int) -> list[int]:
        """Where the sentences of ``text[start:end]`` end, in order (``end`` itself not included)."""
        cuts: list[int] = []
        sentence_start = start
        for match in _BOUNDARY.finditer(text, start, end):
            if match.end("close") >= end:
                break
            cut = self._cut(text, start, sentence_start, match)
            if cut is not None:
                cuts.append(cut)
                sentence_start = cut
        return cuts

    def _cut(self, text: str, start: int, sentence_start: int, match: re.Match[str]) -> int | None:
        """Where the sentence ends if the punctuation ``match`` ends it, else None."""
        mark = match["mark"]
        begin, after = match.start(), match.end("close")
        closed = after > match.end("mark")
        nxt = match.end()  # first character of the next word, if there was white space
        if mark[-1] in _CJK_TERMINATORS:
            if mark == "\uff0e" and text[begin - 1 : begin].isdigit() and text[after].isdigit():
                return None  # ３．２９: a full-width decimal point
            if not closed and _open_cjk_brackets(text, sentence_start, begin):
                return None  # 《摔跤吧！爸爸》: inside a title or a quotation
            if closed and nxt == after and text[after].isalnum():
                return None  # 「…。」と言った: the quotation is part of the sentence
            return after
        if nxt == after:
            return None  # no white space: 3.5, U.S.A, e.g.,, Yahoo!Inc, ...see
        first = text[nxt]
        if first in ",;:":
            return None  # no sentence starts with these: "!=8.0.* ; extra"
        lower = first.islower()
        if any(ch in _STRONG_TERMINATORS for ch in mark):
            return None if lower else after
        if closed and lower:
            return None  # "This is fine." she said / (see above.) and then
        if closed and first == "(" and _CITATION.match(text, nxt, match.endpos):
            return None  # "... in a day." (Proverbs 3). The citation belongs to the quotation.
        word = _next_word(text, nxt, match.endpos)
        dots = mark.count(".") + 3 * mark.count("\u2026")
        if dots >= 3:
            if text[begin - 1 : begin] in ("[", "("):
                return None  # [...] marks an omission
            if first in _INVERTED_OPENERS:
                return after
            if dots == 3:
                return after if self._period_ends_sentence("...", word) else None
            if not _first_letter_is_upper(word):
                return None
            if mark.startswith(". ") and begin > start and not text[begin - 1].isspace():
                return begin + 1  # "word. . . . Next": the period ends it, the ellipsis opens the next
            return after
        if mark != ".":
            return None  # "..": a range (0 .. N) or a typo, never a sentence end for Punkt either
        if first in _INVERTED_OPENERS:
            return after  # ... fin. ¿Qué?
        # Stepped back over the word alone: splitting text[start:begin] would copy the paragraph so far
        # at every period, quadratic in a long paragraph's length.
        word_start = begin
        while word_start > start and not text[word_start - 1].isspace():
            word_start -= 1
        token = _last_token(text[word_start : begin + 1])
        if (
            token[:-1].lower() in _punkt.TIME_ABBREVIATIONS
            and _first_letter_is_upper(word)
            and word.rstrip(".").lower() not in _punkt.TIME_QUALIFIERS
            and len(text[sentence_start:word_start].split()) > 3
        ):
            return after  # "... left at 6 P.M. Mr. Smith then ...", but "At 5 a.m. Mr. Smith went ..."
        return after if self._period_ends_sentence(token, word) else None

    def _punkt_verdict(self, token: str, next_word: str) -> bool:
        """Whether the period ending Punkt token ``token`` ends a sentence when ``next_word`` follows."""
        kind = token[:-1].lower()
        if kind in _punkt.SENTENCE_FINAL_ABBREVIATIONS and _first_letter_is_upper(next_word):
            return True  # CSV, JSON, etc. Python 3.10 is required.
        if (
            kind in _punkt.CLOSING_ABBREVIATIONS
            and _first_letter_is_upper(next_word)
            and next_word.rstrip(".").lower() in _punkt.TITLES
        ):
            return True  # ... signed with Hale & Co. Mr. Ross then ...
        if len(token) == 2 and token[0].isalpha() and next_word[:1].isdigit():
            return False  # p. 55, Table B. 2
        tokenizer = self._get_tokenizer()
        pair = [tokenizer._Token(token), tokenizer._Token(next_word)]
        for _ in tokenizer._annotate_tokens(pair):
            pass
        return bool(pair[0].sentbreak)

    def _get_tokenizer(self) -> Any:
        if self._tokenizer is None:
            with self._lock:
                if self._tokenizer is None:
                    self._tokenizer = _build_tokenizer()
        return self._tokenizer


def _last_token(word: str) -> str:
    """The last Punkt word token of ``word``, which ends with a period: ``"(see Fig.`` -> ``Fig.``."""
    found = _UP_TO_WORD_END.match(word, 0, len(word) - 1)
    return word[found.end() :] if found is not None else word


def _next_word(text: str, start: int, end: int) -> str:
    """The word at ``start`` as Punkt's word tokenizer reads it, without opening quotes or brackets."""
    found = _WORD.match(text, start, end)  # \S* matches, if only the empty word
    stop = found.end() if found is not None else start
    word = start
    while word < stop and text[word] in _OPENERS:
        word += 1
    if word == stop:  # only quotes or brackets
        return text[start:stop]
    match = _WORD_END.search(text, word, stop)
    return text[word : match.start() if match is not None and match.start() > word else stop]


def _first_letter_is_upper(word: str) -> bool:
    return word[:1].isupper()


def _open_cjk_brackets(text: str, start: int, end: int) -> bool:
    """Whether a CJK bracket or quotation opened in ``text[start:end]`` is still open at ``end``."""
    depth = 0
    for ch in text[start:end]:
        if ch in _CJK_OPEN:
            depth += 1
        elif ch in _CJK_CLOSE and depth:
            depth -= 1
    return depth > 0


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


def _roman(label: str) -> int | None:
    """The value of a lower-case Roman numeral up to 39, or None if ``label`` is not one."""
    total = 0
    for index, ch in enumerate(label):
        value = _ROMAN[ch]
        total += -value if index + 1 < len(label) and _ROMAN[label[index + 1]] > value else value
    canonical = "x" * (total // 10) + ["", "i", "ii", "iii", "iv", "v", "vi", "vii", "viii", "ix"][total % 10]
    return total if 0 < total < 40 and canonical == label else None


def _ordinals(match: re.Match[str]) -> list[tuple[str, int]]:
    """What an enumeration marker may count in: ``("digit", 2)``, ``("lower", 1)``, ``("roman", 4)``..."""
    label, close = match["label"], match["close"]
    if match["open"] and close != ")":
        return []
    if label.isdigit():
        return [("digit", int(label))]
    values = []
    folded = label.lower()
    if all(ch in _ROMAN for ch in folded) and (roman := _roman(folded)) is not None:
        values.append(("roman" if label.islower() else "ROMAN", roman))
    if len(label) == 1 and (label.islower() or close != "."):  # "B." is an initial, "B)" a marker
        values.append(("lower" if label.islower() else "upper", ord(folded)))
    return values


def _flattened_list(text: str, start: int, end: int) -> list[tuple[int, int]] | None:
    """The items of a list flattened onto the line ``text[start:end]``, as (marker start, text start).

    The first marker opens the line or follows a colon; the others repeat its bullet or count up from
    it in the same style (``1)``, ``2)``, ``3)`` or ``a.``, ``b.``), and no item but the last ends with
    a comma, a semicolon or "and"/"or" (that is an enumeration within a sentence). None if the line
    is no such list.
    """
    # Every marker ends with a bullet, or a period or bracket, before a space or tab: a line with
    # fewer than two such places (most sentences) has no two markers, and is not looked through.
    first_end = _MARKER_END.search(text, start, end)
    if first_end is None or _MARKER_END.search(text, first_end.end(), end) is None:
        return None
    markers = list(_LIST_MARKER.finditer(text, start, end))
    if len(markers) < 2:
        return None
    first = markers[0]
    if first.start() > start and not text[start : first.start()].rstrip().endswith(":"):
        return None
    if first["bullet"]:
        chain = [m for m in markers if m["bullet"] == first["bullet"]]
    else:
        style = (first["open"], first["close"])
        chain = []
        for kind, value in _ordinals(first):
            candidate = [first]
            for marker in markers[1:]:
                if (marker["open"], marker["close"]) == style and (kind, value + 1) in _ordinals(marker):
                    candidate.append(marker)
                    value += 1
            if len(candidate) > len(chain):
                chain = candidate
    if len(chain) < 2:
        return None
    for marker, following in itertools.pairwise(chain):
        words = text[marker.end() : following.start()].split()
        if not words or words[-1].endswith((",", ";")) or words[-1].lower() in ("and", "or", "nor"):
            return None  # an enumeration inside a sentence: "(1) BM25, (2) DPR and (3) ColBERT"
    return [(marker.start(), marker.end()) for marker in chain]


def _line_pieces(text: str, start: int, end: int) -> Iterator[tuple[int, int, int, bool]]:
    """A line as (start, text start, end, starts with a marker): one piece, or a list's lead-in and items."""
    items = _flattened_list(text, start, end)
    if items is None:
        body, end, marked = _strip_markers(text, start, end)
        yield body, body, end, marked
        return
    if items[0][0] > start:  # the lead-in, such as "Ingredients:"
        body, lead_end, marked = _strip_markers(text, start, _strip(text, start, items[0][0])[1])
        yield body, body, lead_end, marked
    for index, (marker, body) in enumerate(items):
        item_end = items[index + 1][0] if index + 1 < len(items) else end
        yield marker, body, _strip(text, body, item_end)[1], True


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


def _blocks(text: str) -> Iterator[tuple[int, int, int]]:
    """Runs of lines that may form one sentence, as (start, text start, end), edges stripped.

    ``text[start:text start]`` is a list marker that stays with the run's first sentence (items of a
    flattened list); markers of items that have a line of their own are left out.
    """
    block: tuple[int, int, int] | None = None
    block_is_heading = False
    for line_start, line_end in _lines(text):
        if line_start == line_end:  # a blank line ends the paragraph
            if block is not None:
                yield block
            block = None
            continue
        first_piece = True
        for start, body, end, marked in _line_pieces(text, line_start, line_end):
            if body >= end:  # a line holding only a marker, such as "-" or "##"
                if block is not None:
                    yield block
                block = None
                continue
            if (
                block is not None
                and first_piece
                and not marked
                and not block_is_heading
                and _continues(text, block[2], body)
            ):
                block = (block[0], block[1], end)
                first_piece = False
                continue
            first_piece = False
            if block is not None:
                yield block
            block = (start, body, end)
            block_is_heading = text[line_start:body].lstrip().startswith("#")
    if block is not None:
        yield block


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
