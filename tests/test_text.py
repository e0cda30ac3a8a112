"""Sentence splitting (shipped Punkt parameters, no NLTK data) and text normalization."""

from __future__ import annotations

import itertools
import subprocess
import sys
import textwrap
import unicodedata

import pytest
from hypothesis import given, settings, strategies as st

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


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "The formula is on p. 212 of the manual.", ["The formula is on p. 212 of the manual."], id="p"
        ),
        pytest.param("Check item no. 14 in the list.", ["Check item no. 14 in the list."], id="no-lower"),
        pytest.param(
            "Ask for form No. 7 at the desk. It is free.",
            ["Ask for form No. 7 at the desk.", "It is free."],
            id="No",
        ),
        pytest.param(
            "Filed under N\u00b0. 88.12.4. Keep it safe.",
            ["Filed under N\u00b0. 88.12.4.", "Keep it safe."],
            id="N-degree",
        ),
        pytest.param(
            "Compare p. 4 with P. 9 of the guide.", ["Compare p. 4 with P. 9 of the guide."], id="letters"
        ),
        pytest.param("Pages pp. 4-9 and Fig. 12 agree.", ["Pages pp. 4-9 and Fig. 12 agree."], id="pp-fig"),
        pytest.param(
            "The report was written by Maria K. Olsen.",
            ["The report was written by Maria K. Olsen."],
            id="initial",
        ),
        pytest.param(
            "The winner was me and I. Then came Louis I. Kahn.",
            ["The winner was me and I.", "Then came Louis I. Kahn."],
            id="pronoun-I-vs-initial",
        ),
    ],
)
def test_single_letter_and_number_abbreviations_before_a_number_do_not_end_sentences(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Send it to Tom and co. They will sign it.", ["Send it to Tom and co.", "They will sign it."]),
        ("Did Tom and co. arrive late?", ["Did Tom and co. arrive late?"]),
        (
            "We signed with Hale, Ross & Co. Nobody objected.",
            ["We signed with Hale, Ross & Co.", "Nobody objected."],
        ),
        ("We signed with Hale, Ross & Co. before lunch.", ["We signed with Hale, Ross & Co. before lunch."]),
        ("He was born in the U.K. Where were you born?", ["He was born in the U.K.", "Where were you born?"]),
        ("He served in the U.S. Navy for ten years.", ["He served in the U.S. Navy for ten years."]),
        ("She moved to the U.K. last spring.", ["She moved to the U.K. last spring."]),
        ("The trail to Mt. Rainier was closed.", ["The trail to Mt. Rainier was closed."]),
        (
            "St. Anne's school is on Elm st. past the bridge.",
            ["St. Anne's school is on Elm st. past the bridge."],
        ),
        ("This is Harold Jr.'s car.", ["This is Harold Jr.'s car."]),
        ("Hola Srta. Vidal. Soy el Lic. Ortega.", ["Hola Srta. Vidal.", "Soy el Lic. Ortega."]),
        (
            "The deal went to Hale & Co. Mr. Ross signed it.",
            ["The deal went to Hale & Co.", "Mr. Ross signed it."],
        ),
        (
            "He returned to the U.S. Dr. Lee met him there.",
            ["He returned to the U.S.", "Dr. Lee met him there."],
        ),
        ("Ask Prof. Dr. Ross about it.", ["Ask Prof. Dr. Ross about it."]),
    ],
)
def test_an_abbreviation_ends_a_sentence_only_before_a_sentence_opener_or_a_title(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "The shop opens at 8 a.m. Mrs. Lee unlocks it.",
            ["The shop opens at 8 a.m.", "Mrs. Lee unlocks it."],
        ),
        ("The bus left at 10 P.M. Nobody was on it.", ["The bus left at 10 P.M.", "Nobody was on it."]),
        ("At 7 p.m. Dr. Park gave the talk.", ["At 7 p.m. Dr. Park gave the talk."]),
        ("The call is at 9 a.m. Monday.", ["The call is at 9 a.m. Monday."]),
        ("Trains stop at 11 p.m. EST on weekdays.", ["Trains stop at 11 p.m. EST on weekdays."]),
        ("The call is at 9 a.m. in room 4.", ["The call is at 9 a.m. in room 4."]),
    ],
)
def test_a_time_ends_a_sentence_before_a_capitalised_word_unless_it_opens_it(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He looked up, 'That was close.' he whispered.", ["He looked up, 'That was close.' he whispered."]),
        ('He looked up, "That was close." he whispered.', ['He looked up, "That was close." he whispered.']),
        (
            "He looked up, \u201cThat was close.\u201d he whispered.",
            ["He looked up, \u201cThat was close.\u201d he whispered."],
        ),
        (
            'He looked up, "That was close." Then he laughed.',
            ['He looked up, "That was close."', "Then he laughed."],
        ),
        (
            "She studied law (She later switched to medicine.) at the state college.",
            ["She studied law (She later switched to medicine.) at the state college."],
        ),
        (
            "(The rest is optional.) Continue with step two.",
            ["(The rest is optional.)", "Continue with step two."],
        ),
        (
            '"Rome [...] was not built in a day." (Proverbs 3).',
            ['"Rome [...] was not built in a day." (Proverbs 3).'],
        ),
        (
            "\u00abNo hay prisa.\u00bb, dijo el guía. Luego se fue.",
            ["\u00abNo hay prisa.\u00bb, dijo el guía.", "Luego se fue."],
        ),
        (
            "**Note.** Back up first. **Warning!** It is slow.",
            ["**Note.**", "Back up first.", "**Warning!**", "It is slow."],
        ),
    ],
)
def test_a_period_inside_quotes_or_brackets_before_a_lower_case_word_does_not_end_the_sentence(
    text, expected
):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Write to ops.team@acme.org. They answer fast.",
            ["Write to ops.team@acme.org.", "They answer fast."],
        ),
        (
            "Docs live at https://docs.acme.org/v2/setup.html. Read them first.",
            ["Docs live at https://docs.acme.org/v2/setup.html.", "Read them first."],
        ),
        ("Run pip install -e '.[dev]' in the root.", ["Run pip install -e '.[dev]' in the root."]),
    ],
)
def test_emails_and_urls_end_a_sentence_only_at_their_final_period(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Really?! That is odd.", ["Really?!", "That is odd."]),
        ("Help!! Anyone??", ["Help!!", "Anyone??"]),
        ("Wait!? Is that yours?", ["Wait!?", "Is that yours?"]),
        ("We love Jeopardy! on weekdays.", ["We love Jeopardy! on weekdays."]),
        ("Why? 3 reasons.", ["Why?", "3 reasons."]),
    ],
)
def test_repeated_question_and_exclamation_marks_end_one_sentence(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("1) Mix the flour 2) Add the eggs", ["1) Mix the flour", "2) Add the eggs"], id="paren"),
        pytest.param(
            "1) Mix the flour. 2) Add the eggs.", ["1) Mix the flour.", "2) Add the eggs."], id="paren-period"
        ),
        pytest.param(
            "1. Mix the flour 2. Add the eggs 3. Bake it",
            ["1. Mix the flour", "2. Add the eggs", "3. Bake it"],
            id="dot",
        ),
        pytest.param(
            "1. Mix the flour. 2. Add the eggs.", ["1. Mix the flour.", "2. Add the eggs."], id="dot-period"
        ),
        pytest.param(
            "1.) Mix the flour 2.) Add the eggs", ["1.) Mix the flour", "2.) Add the eggs"], id="dot-paren"
        ),
        pytest.param("(1) Mix it (2) Bake it", ["(1) Mix it", "(2) Bake it"], id="parens"),
        pytest.param(
            "a. Red wires b. Blue wires c. Green wires",
            ["a. Red wires", "b. Blue wires", "c. Green wires"],
            id="letters",
        ),
        pytest.param("A) Yes B) No", ["A) Yes", "B) No"], id="capital-letters-paren"),
        pytest.param("i. Read ii. Write iii. Test", ["i. Read", "ii. Write", "iii. Test"], id="roman"),
        pytest.param("7. Sand it 8. Paint it", ["7. Sand it", "8. Paint it"], id="not-from-one"),
        pytest.param(
            "\u2022 Keep receipts \u2022 File them monthly",
            ["\u2022 Keep receipts", "\u2022 File them monthly"],
            id="bullets",
        ),
        pytest.param(
            "\u2022 4. Sand it \u2022 5. Paint it",
            ["\u2022 4. Sand it", "\u2022 5. Paint it"],
            id="numbered-bullets",
        ),
        pytest.param(
            "\u20436. Sand it \u20437. Paint it",
            ["\u20436. Sand it", "\u20437. Paint it"],
            id="hyphen-bullets",
        ),
        pytest.param(
            "You need: (a) a ladder (b) a drill",
            ["You need:", "(a) a ladder", "(b) a drill"],
            id="after-colon",
        ),
        pytest.param(
            "Steps: 1. Open it. Then wait. 2. Close it.",
            ["Steps:", "1. Open it.", "Then wait.", "2. Close it."],
            id="sentences-in-items",
        ),
    ],
)
def test_a_list_flattened_onto_one_line_splits_into_items_that_keep_their_markers(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("Choose 1) red or 2) blue.", ["Choose 1) red or 2) blue."], id="mid-sentence"),
        pytest.param("1) Mix it 3) Bake it", ["Mix it 3) Bake it"], id="not-counting-up"),
        pytest.param("A. Smith and B. Jones met.", ["A. Smith and B. Jones met."], id="initials"),
        pytest.param("1. Mix it 2) Bake it", ["Mix it 2) Bake it"], id="mixed-styles"),
        pytest.param(
            "We compared three models: (1) BM25, (2) DPR and (3) ColBERT.",
            ["We compared three models: (1) BM25, (2) DPR and (3) ColBERT."],
            id="enumeration-in-a-sentence",
        ),
        pytest.param("Pick: a) tea or b) coffee", ["Pick: a) tea or b) coffee"], id="enumeration-with-or"),
    ],
)
def test_markers_that_do_not_form_a_list_are_ordinary_text(text, expected):
    assert split_sentences(text) == expected


def test_flattened_list_items_on_separate_lines_and_their_spans():
    text = "Intro line\n1) Mix it 2) Bake it\nthen serve\n- Wash up"
    assert split_sentences(text) == ["Intro line", "1) Mix it", "2) Bake it\nthen serve", "Wash up"]
    spans = PunktSplitter().spans(text)
    assert [text[s:e] for s, e in spans] == split_sentences(text)
    assert spans[1] == (11, 20)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("He stopped. . . . Then the rain began.", ["He stopped.", ". . . Then the rain began."]),
        ("I waited and waited.... The bus never came.", ["I waited and waited....", "The bus never came."]),
        ("It rained all day . . . . Nobody came.", ["It rained all day . . . .", "Nobody came."]),
        ("She said she might . . . well, never mind.", ["She said she might . . . well, never mind."]),
        ("It was late . . . I went home anyway.", ["It was late . . . I went home anyway."]),
        ("It was late... Then it rained.", ["It was late...", "Then it rained."]),
        ("It was late\u2026 Then it rained.", ["It was late\u2026", "Then it rained."]),
        ("It was late\u2026 so I left.", ["It was late\u2026 so I left."]),
        ("Maybe...no.", ["Maybe...no."]),
        (
            "The quote reads \u201cthe end is near. . . .\u201d",
            ["The quote reads \u201cthe end is near. . . .\u201d"],
        ),
        ('"Rome [...] was built [...]" (Livy 2).', ['"Rome [...] was built [...]" (Livy 2).']),
        ("Values run from 0 .. N in the loop.", ["Values run from 0 .. N in the loop."]),
    ],
)
def test_ellipses(text, expected):
    assert split_sentences(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            "\u00bfVienes ma\u00f1ana? \u00a1Claro que s\u00ed! Nos vemos.",
            ["\u00bfVienes ma\u00f1ana?", "\u00a1Claro que s\u00ed!", "Nos vemos."],
            id="spanish",
        ),
        pytest.param(
            "Lleg\u00f3 tarde. \u00bfPor qu\u00e9?",
            ["Lleg\u00f3 tarde.", "\u00bfPor qu\u00e9?"],
            id="spanish-after-period",
        ),
        pytest.param(
            "Vino el Dr. \u00bfLo viste?", ["Vino el Dr.", "\u00bfLo viste?"], id="spanish-after-abbreviation"
        ),
        pytest.param(
            "\u4eca\u65e5\u306f\u6674\u308c\u3067\u3059\u3002\u660e\u65e5\u306f\u96e8\u3067\u3059\u3002",
            [
                "\u4eca\u65e5\u306f\u6674\u308c\u3067\u3059\u3002",
                "\u660e\u65e5\u306f\u96e8\u3067\u3059\u3002",
            ],
            id="japanese-full-stop",
        ),
        pytest.param(
            "\u4f60\u597d\u5417\uff1f\u6211\u5f88\u597d\uff01\u8c22\u8c22\u3002",
            ["\u4f60\u597d\u5417\uff1f", "\u6211\u5f88\u597d\uff01", "\u8c22\u8c22\u3002"],
            id="chinese-marks",
        ),
        pytest.param(
            "\u6211\u8bfb\u4e86\u300a\u5feb\u8dd1\uff01\u5c0f\u732b\u300b\u5417\uff1f\u8bfb\u4e86\u3002",
            [
                "\u6211\u8bfb\u4e86\u300a\u5feb\u8dd1\uff01\u5c0f\u732b\u300b\u5417\uff1f",
                "\u8bfb\u4e86\u3002",
            ],
            id="inside-title-brackets",
        ),
        pytest.param(
            "\u5f7c\u306f\u300c\u5f85\u3063\u3066\u3002\u300d\u3068\u8a00\u3063\u305f\u3002\u300c\u306f\u3044\u3002\u300d\u300c\u3069\u3046\u305e\u3002\u300d",
            [
                "\u5f7c\u306f\u300c\u5f85\u3063\u3066\u3002\u300d\u3068\u8a00\u3063\u305f\u3002",
                "\u300c\u306f\u3044\u3002\u300d",
                "\u300c\u3069\u3046\u305e\u3002\u300d",
            ],
            id="japanese-quotes",
        ),
        pytest.param(
            "\u6e29\u5ea6\u306f\uff13\uff0e\uff15\u5ea6\u3067\u3059\u3002\u6674\u308c\u3002",
            ["\u6e29\u5ea6\u306f\uff13\uff0e\uff15\u5ea6\u3067\u3059\u3002", "\u6674\u308c\u3002"],
            id="full-width-decimal",
        ),
        pytest.param(
            "\u092f\u0939 \u0918\u0930 \u0939\u0948\u0964 \u0935\u0939 \u0938\u094d\u0915\u0942\u0932 \u0939\u0948\u0964",
            [
                "\u092f\u0939 \u0918\u0930 \u0939\u0948\u0964",
                "\u0935\u0939 \u0938\u094d\u0915\u0942\u0932 \u0939\u0948\u0964",
            ],
            id="devanagari-danda",
        ),
        pytest.param(
            "\u0647\u0644 \u0623\u0646\u062a \u0628\u062e\u064a\u0631\u061f \u0646\u0639\u0645.",
            ["\u0647\u0644 \u0623\u0646\u062a \u0628\u062e\u064a\u0631\u061f", "\u0646\u0639\u0645."],
            id="arabic-question-mark",
        ),
        pytest.param(
            "Done\u3002 Next line.", ["Done\u3002", "Next line."], id="ideographic-stop-in-latin-text"
        ),
    ],
)
def test_multilingual_sentence_punctuation(text, expected):
    assert split_sentences(text) == expected


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


@pytest.mark.parametrize(
    "name",
    [
        "SENTENCE_STARTERS",
        "SENTENCE_FINAL_ABBREVIATIONS",
        "TIME_ABBREVIATIONS",
        "TIME_QUALIFIERS",
        "CLOSING_ABBREVIATIONS",
        "TITLES",
    ],
)
def test_fingerprint_covers_every_parameter_set(monkeypatch, name):
    fingerprint = PunktSplitter().fingerprint
    monkeypatch.setattr(_punkt, name, getattr(_punkt, name) | {"xyz"})
    assert PunktSplitter().fingerprint != fingerprint


def test_fingerprint_changes_with_the_parameters_version(monkeypatch):
    fingerprint = PunktSplitter().fingerprint
    monkeypatch.setattr(_punkt, "PARAMETERS_VERSION", _punkt.PARAMETERS_VERSION + "x")
    assert PunktSplitter().fingerprint != fingerprint


def test_ortho_flags_match_nltk():
    """text.py writes Punkt's private orthographic flags out; they must equal nltk's."""
    from nltk.tokenize import punkt

    from pytest_ragmetrics import text

    assert text._ORTHO_BEG_UC == punkt._ORTHO_BEG_UC
    assert text._ORTHO_MID_LC == punkt._ORTHO_MID_LC


def test_token_patterns_match_nltk():
    """Our Punkt token compiles nltk's token patterns with ``re``; they must be nltk's patterns."""
    from nltk.tokenize import punkt

    token_cls = PunktSplitter()._get_tokenizer()._Token
    assert issubclass(token_cls, punkt.PunktToken)
    for name in ("_RE_ELLIPSIS", "_RE_NUMERIC", "_RE_INITIAL", "_RE_ALPHA"):
        assert getattr(token_cls, name).pattern == getattr(punkt.PunktToken, name).pattern, name


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


def test_splitting_loads_none_of_the_nltk_modules_it_never_uses():
    """nltk's package __init__ imports scipy and most of nltk, and Punkt imports nltk's path, pickle
    and terminal safety layers and its tokenizer utilities (with them http, email, ssl and urllib) for
    training, saving and loading models, and compiles patterns it never matches when splitting with
    the ``regex`` engine: splitting loads none of them, and a later ``import nltk`` gets the whole,
    ordinary package with its real modules, not the stand-ins. (One process answers both: importing
    nltk whole, scipy with it, is what costs.)"""
    code = textwrap.dedent(
        """
        import sys
        from pytest_ragmetrics.text import default_splitter, split_sentences
        print(split_sentences("Dr. Smith left at 5 p.m. It rained."))
        print(sorted(m for m in sys.modules if m.split(".")[0] in ("nltk", "scipy", "numpy")))
        unused = ("http.client", "ssl", "email.message", "urllib.request", "regex")
        print(sorted(m for m in unused if m in sys.modules))
        try:  # a punkt pattern splitting never matches with: matching with it anyway says so
            default_splitter()._get_tokenizer()._lang_vars.word_tokenize("Dr. Smith left.")
        except RuntimeError as exc:
            print("not compiled for splitting sentences" in str(exc))
        import nltk
        from nltk import redos
        from nltk.tokenize.util import string_span_tokenize
        print(nltk.tokenize.punkt.PunktSentenceTokenizer is not None)
        print(list(string_span_tokenize("a b", " ")))
        print(redos.compile(r"a+").findall("aa b a"))
        print(split_sentences("One. Two."))
        """
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "['Dr. Smith left at 5 p.m.', 'It rained.']",
        "[]",
        "[]",
        "True",
        "True",
        "[(0, 1), (2, 3)]",
        "['aa', 'a']",
        "['One.', 'Two.']",
    ]


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
        *["2) ", "a. ", "b. ", "\u2022 ", ": ", ". . .", "p. ", " 5", "a.m. ", "\u00bf", "\u00a1", "**"],
        *["\u3002", "\uff01", "\uff1f", "\u300c", "\u300d", "\u300a", "\u300b", "\uff0e", "\u0964"],
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

    @given(
        st.lists(st.sampled_from(["a", "e\u0301", " ", "\t", "\r", "\n", "\u2028", "\x0b", "\u3000"])).map(
            "".join
        )
    )
    def test_is_each_line_without_trailing_whitespace_and_the_whole_stripped(self, text):
        lines = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
        assert normalize_text(text) == "\n".join(line.rstrip() for line in lines).strip()

    def test_rejects_non_strings(self):
        with pytest.raises(TypeError, match="expects a str"):
            normalize_text(b"bytes")  # type: ignore[arg-type]
