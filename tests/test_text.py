"""Sentence splitting (shipped Punkt parameters, no NLTK data) and text normalization."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pytest_ragmetrics import _punkt
from pytest_ragmetrics.text import PunktSplitter, default_splitter, normalize_text, split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "Dr. Smith arrived at 5 p.m. on Jan. 5. He left early.",
            ["Dr. Smith arrived at 5 p.m. on Jan. 5.", "He left early."],
            id="title-time-month",
        ),
        pytest.param(
            "Fruit, e.g. apples, is healthy. So are i.e. pears.",
            ["Fruit, e.g. apples, is healthy.", "So are i.e. pears."],
            id="latin",
        ),
        pytest.param(
            "The U.S. Army is large. It has many soldiers.",
            ["The U.S. Army is large.", "It has many soldiers."],
            id="us-mid-sentence",
        ),
        pytest.param(
            "He lived in the U.S. It was great.",
            ["He lived in the U.S.", "It was great."],
            id="us-then-sentence-starter",
        ),
        pytest.param(
            "Mr. and Mrs. Smith met Prof. Jones at St. Paul's at 9 a.m. The meeting went well.",
            ["Mr. and Mrs. Smith met Prof. Jones at St. Paul's at 9 a.m.", "The meeting went well."],
            id="titles-and-am",
        ),
        pytest.param(
            "Smith et al. reported it. See Fig. 3 and Vol. 2, pp. 10-12. Results vary.",
            ["Smith et al. reported it.", "See Fig. 3 and Vol. 2, pp. 10-12.", "Results vary."],
            id="citations",
        ),
        pytest.param(
            "J. K. Rowling wrote it. She took vitamin C. The end.",
            ["J. K. Rowling wrote it.", "She took vitamin C.", "The end."],
            id="initials",
        ),
        pytest.param(
            "Acme Inc. makes rockets. It was founded by Acme Corp. The end.",
            ["Acme Inc. makes rockets.", "It was founded by Acme Corp.", "The end."],
            id="companies",
        ),
        pytest.param(
            "Supports CSV, JSON, etc. Python 3.10 is required.",
            ["Supports CSV, JSON, etc.", "Python 3.10 is required."],
            id="etc-before-capital",
        ),
        pytest.param(
            "Apples, pears, etc. are fruit.",
            ["Apples, pears, etc. are fruit."],
            id="etc-before-lowercase",
        ),
    ],
)
def test_abbreviations_do_not_end_sentences_but_sentence_starters_do(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Pi is about 3.14 and e is 2.718. Next.", ["Pi is about 3.14 and e is 2.718.", "Next."]),
        ("Install v2.1.0 or 3.5.1rc2 now. Done.", ["Install v2.1.0 or 3.5.1rc2 now.", "Done."]),
        ("It costs $3.50 (approx. 5% more). Fine.", ["It costs $3.50 (approx. 5% more).", "Fine."]),
        ("It grew in 2020. In 2021 it shrank.", ["It grew in 2020.", "In 2021 it shrank."]),
    ],
)
def test_decimals_and_versions_stay_inside_their_sentence(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("He said \u201cStop.\u201d Then he left.", ["He said \u201cStop.\u201d", "Then he left."]),
        ("(He left.) She stayed.", ["(He left.)", "She stayed."]),
        ('"Stop!" he said. Then he ran.', ['"Stop!" he said.', "Then he ran."]),
        ('He asked, "Why?" and left.', ['He asked, "Why?" and left.']),
    ],
)
def test_closing_quotes_and_brackets_stay_with_their_sentence(text, expected):
    assert split_sentences(text) == expected


def test_question_and_exclamation_marks_end_sentences():
    assert split_sentences("Is it safe? Yes! It is. Really?! Sure.") == [
        "Is it safe?",
        "Yes!",
        "It is.",
        "Really?!",
        "Sure.",
    ]


def test_ellipsis_ends_a_sentence_only_before_a_sentence_starter():
    assert split_sentences("Wait... what? He paused... Then he spoke.") == [
        "Wait... what?",
        "He paused...",
        "Then he spoke.",
    ]


def test_line_breaks_between_headings_list_items_and_paragraphs_end_sentences():
    text = textwrap.dedent(
        """\
        # Installation
        Run pip install foo

        Requirements:
        - Python 3.10 or later
        * a C compiler
        \u2022 an internet connection
        1. Download the archive
        2) Unpack it
        (b) Run the installer
        - [ ] Tick the box

        Second paragraph without a period
        Third line"""
    )
    assert split_sentences(text) == [
        "Installation",
        "Run pip install foo",
        "Requirements:",
        "Python 3.10 or later",
        "a C compiler",
        "an internet connection",
        "Download the archive",
        "Unpack it",
        "Run the installer",
        "Tick the box",
        "Second paragraph without a period",
        "Third line",
    ]


def test_hard_wrapped_lines_are_joined():
    text = "The capital of France is\nParis, which has\nmany museums. It is\nlarge.\n  Call Dr.\nSmith today."
    assert split_sentences(text) == [
        "The capital of France is",  # a hard wrap before a capital is taken for a break (documented)
        "Paris, which has\nmany museums.",
        "It is\nlarge.",
        "Call Dr.\nSmith today.",
    ]


def test_lines_without_letters_or_digits_are_dropped():
    assert split_sentences("Title\n---\n***\n- \nBody text.") == ["Title", "Body text."]


def test_windows_line_endings_and_surrounding_whitespace():
    assert split_sentences("  First line\r\nSecond line.  \r\n\r\n\tThird.  ") == [
        "First line",
        "Second line.",
        "Third.",
    ]


@pytest.mark.parametrize("text", ["", " ", "\n\n", " \t\r\n ", "\u2028"])
def test_empty_or_blank_text_gives_no_sentences(text):
    assert split_sentences(text) == []


def test_splitting_a_non_string_raises_type_error():
    with pytest.raises(TypeError, match="expected a str"):
        split_sentences(None)  # type: ignore[arg-type]


def test_spans_locate_the_sentences():
    text = "One. Two!\n- Three"
    spans = PunktSplitter().spans(text)
    assert spans == [(0, 4), (5, 9), (12, 17)]
    assert [text[s:e] for s, e in spans] == ["One.", "Two!", "Three"]


def test_default_splitter_is_shared_and_split_sentences_uses_it():
    assert default_splitter() is default_splitter()
    text = "A first one. A second one."
    assert split_sentences(text) == default_splitter()(text) == PunktSplitter()(text)


def test_fingerprint_is_stable_and_tracks_the_parameters(monkeypatch):
    fingerprint = PunktSplitter().fingerprint
    assert fingerprint == PunktSplitter().fingerprint
    assert fingerprint.startswith(f"punkt-{_punkt.PARAMETERS_VERSION}-")
    monkeypatch.setattr(_punkt, "ABBREVIATIONS", _punkt.ABBREVIATIONS | {"xyz"})
    assert PunktSplitter().fingerprint != fingerprint


def test_ortho_flags_match_nltk():
    """text.py writes Punkt's private orthographic flags out; they must equal nltk's."""
    from nltk.tokenize import punkt

    from pytest_ragmetrics import text

    assert text._ORTHO_BEG_UC == punkt._ORTHO_BEG_UC
    assert text._ORTHO_MID_LC == punkt._ORTHO_MID_LC


def test_splitting_does_not_grow_the_tokenizer_state():
    splitter = PunktSplitter()
    splitter("Warm up. Now.")
    ortho = splitter._get_tokenizer()._params.ortho_context
    before = len(ortho)
    splitter("Zebra. Quokka. Axolotl. Numbat.")
    assert len(ortho) == before


def test_splitting_needs_no_nltk_data_and_never_downloads(tmp_path):
    """With NLTK_DATA empty and nltk's data loading and downloader booby-trapped, splitting still works."""
    code = textwrap.dedent(
        """
        import sys
        import pytest_ragmetrics, pytest_ragmetrics.sample, pytest_ragmetrics.loaders, pytest_ragmetrics.text
        assert "nltk" not in sys.modules, "importing the package imported nltk"
        import nltk, nltk.data

        def trap(*args, **kwargs):
            raise AssertionError(f"nltk data access: {args!r}")

        nltk.download = nltk.downloader.download = trap
        nltk.data.load = nltk.data.find = trap
        print(pytest_ragmetrics.split_sentences("Dr. Smith left at 5 p.m. It rained. Did it?"))
        """
    )
    empty = tmp_path / "nltk_data"
    empty.mkdir()
    env = {"NLTK_DATA": str(empty), "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['Dr. Smith left at 5 p.m.', 'It rained.', 'Did it?']"
    assert list(empty.iterdir()) == []


def test_splitting_is_deterministic_across_processes():
    text = "Dr. Who met Mr. X. at 3 p.m. in the U.S. It rained! Was it 3.5 mm? Yes.\n- item one\n- item two"
    code = f"from pytest_ragmetrics.text import split_sentences; print(split_sentences({text!r}))"
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert outputs == {f"{split_sentences(text)!r}\n"}


_ALPHABET = st.sampled_from(
    [
        *"abcXYZ019 .!?\"'()\n\t-*#\u201c\u201d\u2026",
        *["Dr. ", "U.S. ", "e.g. ", " It ", " The ", "3.5", "...", "etc. ", "\r\n", "\n\n", "1. ", "- "],
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_ALPHABET, max_size=40).map("".join))
def test_sentences_are_ordered_stripped_verbatim_substrings(text):
    sentences = split_sentences(text)
    pos = 0
    for sentence in sentences:
        assert sentence and sentence == sentence.strip()
        found = text.find(sentence, pos)
        assert found >= 0, (sentence, text)
        pos = found + len(sentence)
    spans = PunktSplitter().spans(text)
    assert [text[s:e] for s, e in spans] == sentences
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert split_sentences(text) == sentences  # deterministic, and the span cache changes nothing


def test_splitting_a_thousand_chunks_is_fast():
    """1,000 chunks of ~600 characters split in well under a few seconds (about 1 s on a laptop)."""
    import time

    sentences = ["Dr. Smith came at 5 p.m. on Jan. 5.", "The U.S. Army is large.", "It has 3.5 m, e.g. here."]
    chunk = " ".join(sentences * 6)
    chunks = [f"{i}: {chunk}" for i in range(1000)]  # distinct texts, so the span cache does not help
    splitter = PunktSplitter()
    splitter("Warm up.")
    start = time.perf_counter()
    count = sum(len(splitter(c)) for c in chunks)
    elapsed = time.perf_counter() - start
    assert count == 1000 * 18
    assert elapsed < 10, f"splitting 1,000 chunks took {elapsed:.2f}s"


class TestNormalizeText:
    def test_unicode_is_composed(self):
        assert normalize_text("cafe\u0301") == "caf\u00e9"

    def test_line_endings_become_newlines(self):
        assert normalize_text("a\r\nb\rc\nd") == "a\nb\nc\nd"

    def test_trailing_whitespace_is_removed_but_indentation_kept(self):
        assert normalize_text("\n  first  \t\n\n    second   \n\n") == "first\n\n    second"

    def test_is_idempotent(self):
        text = " x \r\n\r\n  y\u0301 \t"
        assert normalize_text(normalize_text(text)) == normalize_text(text)

    def test_rejects_non_strings(self):
        with pytest.raises(TypeError, match="expects a str"):
            normalize_text(b"bytes")  # type: ignore[arg-type]
