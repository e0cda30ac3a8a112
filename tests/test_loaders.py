"""load_samples: .jsonl / .json / .csv golden sets, stable ids, and errors naming file, line and field."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pytest_ragmetrics import load_samples
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.loaders import SUPPORTED_EXTENSIONS, SampleLoadError
from pytest_ragmetrics.sample import RagSample


def write(tmp_path: Path, name: str, text: str, encoding: str = "utf-8") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding=encoding, newline="")
    return path


def jsonl(*objects: object) -> str:
    return "".join(json.dumps(o) + "\n" for o in objects)


# ------------------------------------------------------------------------------------------ .jsonl


def test_jsonl_loads_one_sample_per_line_skipping_blank_lines(tmp_path):
    path = write(
        tmp_path,
        "golden.jsonl",
        '{"id": "q1", "question": "Capital of France?", "contexts": ["Paris is the capital."],'
        ' "ground_truth": "Paris"}\n'
        "\n"
        "   \n"
        '{"user_input": "Capital of Italy?", "retrieved_contexts": ["Rome."], "reference": "Rome",'
        ' "response": "Rome", "source": "wiki"}\n',
    )
    first, second = load_samples(path)
    assert first == RagSample("Capital of France?", ("Paris is the capital.",), "Paris", id="q1")
    assert second == RagSample("Capital of Italy?", ("Rome.",), "Rome", "Rome", id="golden.jsonl:4")
    assert second.metadata == {"source": "wiki"}


def test_jsonl_accepts_str_paths_crlf_and_a_bom(tmp_path):
    text = '{"question": "q", "contexts": ["c"]}\r\n{"question": "r", "contexts": []}\r\n'
    path = write(tmp_path, "bom.JSONL", text, encoding="utf-8-sig")
    samples = load_samples(str(path))
    assert [s.id for s in samples] == ["bom.JSONL:1", "bom.JSONL:2"]
    assert samples[1].contexts == ()


def test_jsonl_joined_from_files_with_a_bom_each_loads_every_line(tmp_path):
    """``cat a.jsonl b.jsonl``: the second file's byte order mark begins line 2. It is tolerated
    there as at the start of the file (the judgment store reads such lines too)."""
    line = '\ufeff{"question": "%s", "contexts": ["c"]}\n'
    path = write(tmp_path, "joined.jsonl", line % "q" + line % "r" + "\ufeff\n")
    assert [(s.id, s.question) for s in load_samples(path)] == [("joined.jsonl:1", "q"), ("joined.jsonl:2", "r")]


def test_ids_are_stable_and_integer_ids_become_strings(tmp_path):
    path = write(
        tmp_path,
        "g.jsonl",
        jsonl({"id": 7, "question": "q", "contexts": []}, {"question": "r", "contexts": []}),
    )
    assert [s.id for s in load_samples(path)] == ["7", "g.jsonl:2"]
    assert [s.id for s in load_samples(path)] == ["7", "g.jsonl:2"]


def test_jsonl_field_error_names_file_line_and_field(tmp_path):
    long_chunk = "Paris is the capital of France and by far its largest city, on the Seine."
    path = write(
        tmp_path,
        "golden.jsonl",
        jsonl(
            {"question": "a", "contexts": ["x"]},
            {"question": "b", "contexts": ["y"]},
            {"question": "c", "contexts": long_chunk},
        ),
    )
    with pytest.raises(SampleLoadError) as info:
        load_samples(path)
    message = str(info.value)
    assert message.startswith(
        "golden.jsonl, line 3: field 'contexts': expected a list of str, got str 'Paris is"
    )
    assert long_chunk not in message and message.endswith("\u2026")  # the value is shown truncated
    assert (info.value.file, info.value.line, info.value.field) == ("golden.jsonl", 3, "contexts")
    assert isinstance(info.value, ValueError) and isinstance(info.value, RagMetricsError)


def test_jsonl_error_names_the_alias_the_file_used(tmp_path):
    path = write(tmp_path, "r.jsonl", jsonl({"user_input": "q", "retrieved_contexts": ["ok", 3]}))
    with pytest.raises(
        SampleLoadError,
        match=r"^r\.jsonl, line 1: field 'retrieved_contexts': item 1 must be a str, got int 3$",
    ):
        load_samples(path)


def test_jsonl_invalid_json_names_file_and_line(tmp_path):
    path = write(tmp_path, "bad.jsonl", jsonl({"question": "q", "contexts": []}) + '{"question": "q",, }\n')
    with pytest.raises(SampleLoadError, match=r"^bad\.jsonl, line 2: invalid JSON: .* \(column \d+\)$"):
        load_samples(path)


def test_a_field_given_twice_is_an_error_naming_file_line_and_field(tmp_path):
    """JSON keeps the last of two values silently: the line was scored on a question nobody reads."""
    text = jsonl({"question": "q", "contexts": []}) + '{"question": "a?", "contexts": [], "question": "b?"}\n'
    with pytest.raises(SampleLoadError, match=r"^twice\.jsonl, line 2: field 'question' is given twice$") as info:
        load_samples(write(tmp_path, "twice.jsonl", text))
    assert (info.value.line, info.value.field) == (2, "question")
    text = '[{"question": "q", "contexts": []}, {"question": "a?", "contexts": [], "question": "b?"}]'
    with pytest.raises(
        SampleLoadError, match=r"^twice\.json, item #1: field 'question' is given twice$"
    ) as info:
        load_samples(write(tmp_path, "twice.json", text))
    assert (info.value.index, info.value.field) == (1, "question")


@pytest.mark.parametrize(
    ("name", "text", "where", "field", "given_twice"),
    [
        (
            "in.jsonl",
            jsonl({"question": "q", "contexts": []})
            + '{"question": "q", "contexts": [], "metadata": {"k": 1, "k": 2}}\n',
            ("line", 2),
            "metadata",
            "k",
        ),
        (
            "in.json",
            '{"samples": [{"question": "q", "contexts": [], "reference_context_ids": {"d1": 2, "d1": 0}}]}',
            ("index", 0),
            "reference_context_ids",
            "d1",
        ),
        (
            "s.csv",
            'question,contexts,reference_context_ids\nq,[],"{""d1"": 2, ""d1"": 0}"\n',
            ("line", 2),
            "reference_context_ids",
            "d1",
        ),
        ("s.csv", 'question,contexts,metadata\nq,[],"{""k"": 1, ""k"": 2}"\n', ("line", 2), "metadata", "k"),
    ],
    ids=["jsonl-metadata", "json-grades", "csv-grades", "csv-metadata"],
)
def test_a_name_given_twice_inside_a_field_is_an_error_naming_that_field(
    tmp_path, name, text, where, field, given_twice
):
    """A name inside ``metadata`` or graded reference ids is no field of the sample, and JSON keeps
    the last of its two values silently (a grade given twice for one document): the error names the
    field that holds it, in each format."""
    place = f"line {where[1]}" if where[0] == "line" else f"item #{where[1]}"
    with pytest.raises(
        SampleLoadError,
        match=rf"^{re.escape(name)}, {place}: field '{field}': its JSON gives '{given_twice}' twice$",
    ) as info:
        load_samples(write(tmp_path, name, text))
    assert (getattr(info.value, where[0]), info.value.field) == (where[1], field)


def test_jsonl_line_that_is_not_an_object_is_an_error(tmp_path):
    path = write(tmp_path, "list.jsonl", '["q", ["c"]]\n')
    with pytest.raises(SampleLoadError, match=r"^list\.jsonl, line 1: expected a JSON object, got a list$"):
        load_samples(path)


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        (
            {"contexts": []},
            r"line 1: missing field 'question' \(accepted names: 'question', 'user_input', 'userInput'\)",
        ),
        (
            {"question": "  ", "contexts": []},
            r"line 1: field 'question': expected a non-empty str, got str '  '",
        ),
        ({"question": 3, "contexts": []}, r"line 1: field 'question': expected a str, got int 3"),
        (
            {"question": "q", "contexts": [], "reference": ["a"]},
            r"line 1: field 'reference': expected a str, got list",
        ),
        (
            {"question": "q", "contexts": [], "id": 1.5},
            r"line 1: field 'id': expected a str or int, got float 1.5",
        ),
        (
            {"question": "q", "contexts": [], "metadata": []},
            r"line 1: field 'metadata': expected a mapping, got list",
        ),
    ],
)
def test_field_errors(tmp_path, record, pattern):
    path = write(tmp_path, "f.jsonl", jsonl(record))
    with pytest.raises(SampleLoadError, match=r"^f\.jsonl, " + pattern):
        load_samples(path)


def test_duplicate_ids_name_both_lines(tmp_path):
    path = write(
        tmp_path,
        "dup.jsonl",
        jsonl(
            {"id": "q1", "question": "a", "contexts": []},
            {"id": "q2", "question": "b", "contexts": []},
            {"id": "q1", "question": "c", "contexts": []},
        ),
    )
    with pytest.raises(
        SampleLoadError, match=r"^dup\.jsonl, line 3: duplicate id 'q1', already used by line 1$"
    ):
        load_samples(path)


def test_invalid_utf8_names_the_line(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(
        jsonl({"question": "a", "contexts": []}).encode() + '{"question": "caf\xe9"}\n'.encode("latin-1")
    )
    with pytest.raises(SampleLoadError, match=r"^latin1\.jsonl, line 2: not valid UTF-8"):
        load_samples(path)


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv"])
def test_a_utf16_golden_set_is_named_as_such(tmp_path, suffix):
    """Saved as UTF-16 (PowerShell's `>`, Excel's "Unicode Text"), a golden set was "not valid
    UTF-8 (byte 0xff at offset 0)" with a mark, and with none a JSON syntax error at column 2 or, as
    CSV, a header of NUL-riddled names and "missing field 'question'"."""
    text = {
        ".jsonl": jsonl({"question": "Q?", "contexts": ["C."]}),
        ".json": json.dumps([{"question": "Q?", "contexts": ["C."]}]),
        ".csv": 'question,contexts\nQ?,"[""C.""]"\n',
    }[suffix]
    marked, unmarked = tmp_path / f"marked{suffix}", tmp_path / f"unmarked{suffix}"
    marked.write_bytes(text.encode("utf-16"))
    unmarked.write_bytes(text.encode("utf-16-le"))
    with pytest.raises(SampleLoadError) as info:
        load_samples(marked)
    assert str(info.value) == (
        f"marked{suffix}: the file is UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8; "
        "save it as UTF-8"
    )
    with pytest.raises(SampleLoadError) as info:
        load_samples(unmarked)
    assert str(info.value) == (
        f"unmarked{suffix}: the file starts with a NUL byte: UTF-16 text without a byte order mark, or no "
        "text at all; save it as UTF-8 text"
    )
    marked.write_bytes(text.encode("utf-8-sig"))  # UTF-8 with a mark, as Excel's "CSV UTF-8" writes it
    assert [s.question for s in load_samples(marked)] == ["Q?"]


@pytest.mark.parametrize(("name", "text"), [("empty.jsonl", "\n\n"), ("none.jsonl", ""), ("e.json", "[]")])
def test_a_golden_set_without_samples_is_an_error(tmp_path, name, text):
    """An empty golden set used to load silently as no samples: nothing tested, every gate unchecked."""
    with pytest.raises(SampleLoadError, match=rf"^{name.replace('.', '[.]')}: no samples"):
        load_samples(write(tmp_path, name, text))


def test_a_lone_surrogate_escape_is_an_error_naming_line_and_field(tmp_path):
    text = '{"question": "q?", "contexts": ["ok", "a \\ud800 b"], "ground_truth": "g."}\n'
    with pytest.raises(
        SampleLoadError, match=r"^s\.jsonl, line 1: RagSample\.contexts\[1\] contains a lone"
    ) as info:
        load_samples(write(tmp_path, "s.jsonl", text))
    assert info.value.field == "contexts[1]"


def test_a_question_of_only_zero_width_characters_is_an_error(tmp_path):
    text = jsonl({"question": "\u200b\u200d\ufeff ", "contexts": []})
    with pytest.raises(SampleLoadError, match=r"line 1: field 'question': expected a non-empty str"):
        load_samples(write(tmp_path, "z.jsonl", text))



@pytest.mark.parametrize("given", ["", "  ", "\u200b"])
def test_an_id_that_shows_nothing_is_an_error_naming_the_line_and_field(tmp_path, given):
    """``"id": ""`` (a script's unset variable) named the sample "" in every report and baseline, and
    its test by a number pytest chose; a CSV's empty cell is no id, and the default id applies."""
    text = jsonl({"question": "a", "contexts": []}, {"id": given, "question": "b", "contexts": []})
    with pytest.raises(SampleLoadError, match=r"^z\.jsonl, line 2: RagSample\.id must show something, got ") as info:
        load_samples(write(tmp_path, "z.jsonl", text))
    assert (info.value.line, info.value.field) == (2, "id")
    with pytest.raises(RagMetricsError, match=r"RagSample\.id must show something"):
        RagSample("q", [], id=given)
    empty_cell = load_samples(write(tmp_path, "z.csv", "id,question\n,a\n"))
    assert [s.id for s in empty_cell] == ["z.csv:2"]


# ------------------------------------------------------------------------------------------- .json


def test_json_list_and_samples_object(tmp_path):
    records = [
        {"question": "a", "contexts": ["x"]},
        {"id": "b", "userInput": "b", "retrievedContexts": ["y"]},
    ]
    as_list = load_samples(write(tmp_path, "list.json", json.dumps(records, indent=2)))
    as_object = load_samples(write(tmp_path, "obj.json", json.dumps({"version": 1, "samples": records})))
    assert [s.id for s in as_list] == ["list.json#0", "b"]
    assert [s.id for s in as_object] == ["obj.json#0", "b"]
    assert [s.question for s in as_list] == [s.question for s in as_object] == ["a", "b"]
    assert as_object[1].contexts == ("y",)


def test_json_ids_do_not_depend_on_formatting(tmp_path):
    records = [{"question": "a", "contexts": []}, {"question": "b", "contexts": []}]
    compact = load_samples(write(tmp_path, "g.json", json.dumps(records)))
    pretty = load_samples(write(tmp_path, "g.json", json.dumps(records, indent=4)))
    assert [s.id for s in compact] == [s.id for s in pretty] == ["g.json#0", "g.json#1"]


def test_json_field_error_names_the_item(tmp_path):
    records = [{"question": "a", "contexts": []}, {"question": "b", "contexts": [None]}]
    with pytest.raises(
        SampleLoadError,
        match=r"^g\.json, item #1: field 'contexts': item 0 must be a str, got NoneType None$",
    ) as info:
        load_samples(write(tmp_path, "g.json", json.dumps(records)))
    assert (info.value.index, info.value.line, info.value.field) == (1, None, "contexts")


def test_json_duplicate_ids_name_both_items(tmp_path):
    records = [{"id": "x", "question": "a", "contexts": []}, {"id": "x", "question": "b", "contexts": []}]
    with pytest.raises(
        SampleLoadError, match=r"^d\.json, item #1: duplicate id 'x', already used by item #0$"
    ):
        load_samples(write(tmp_path, "d.json", json.dumps(records)))


def test_json_syntax_error_names_the_line(tmp_path):
    with pytest.raises(SampleLoadError, match=r"^s\.json, line 3: invalid JSON: "):
        load_samples(
            write(tmp_path, "s.json", '[\n  {"question": "a", "contexts": []},\n  {"question" "b"}\n]')
        )


@pytest.mark.parametrize(
    ("doc", "got"),
    [
        ({"items": []}, "an object without a 'samples' list"),
        ("text", "a string"),
        ({"samples": 3}, "an object"),
    ],
)
def test_json_of_the_wrong_shape_is_an_error(tmp_path, doc, got):
    with pytest.raises(SampleLoadError, match=r"^w\.json: expected a JSON list of sample objects") as info:
        load_samples(write(tmp_path, "w.json", json.dumps(doc)))
    assert got in str(info.value)


def test_json_item_that_is_not_an_object_is_an_error(tmp_path):
    with pytest.raises(SampleLoadError, match=r"^n\.json, item #1: expected a JSON object, got a number$"):
        load_samples(write(tmp_path, "n.json", '[{"question": "a", "contexts": []}, 5]'))


# -------------------------------------------------------------------------------------------- .csv


def test_csv_with_json_contexts_quoted_commas_and_multiline_cells(tmp_path):
    text = (
        "id,question,contexts,ground_truth,tags,note\r\n"
        'q1,"Capital, of France?","[""Paris is the capital."", ""It is on the Seine.""]",Paris,"[""geo""]",'
        "hello\r\n"
        "\r\n"
        ',Capital of Italy?,"[""Rome is\nthe capital.""]",,,[not json\r\n'
    )
    first, second = load_samples(write(tmp_path, "golden.csv", text))
    assert first == RagSample(
        "Capital, of France?", ("Paris is the capital.", "It is on the Seine."), "Paris", id="q1"
    )
    assert first.metadata == {"tags": ["geo"], "note": "hello"}
    assert second.id == "golden.csv:4"  # header is line 1, the blank line 3 is skipped
    assert second.contexts == ("Rome is\nthe capital.",)
    assert second.ground_truth is None
    assert second.metadata == {"note": "[not json"}


def test_csv_ragas_columns_and_ground_truths_list(tmp_path):
    text = (
        "user_input,retrieved_contexts,ground_truths,response\n"
        'q,"[""c""]","[""first"", ""second""]",an answer\n'
    )
    (sample,) = load_samples(write(tmp_path, "ragas.csv", text))
    assert (sample.question, sample.contexts, sample.ground_truth, sample.answer) == (
        "q",
        ("c",),
        "first",
        "an answer",
    )
    assert sample.metadata == {"ground_truths": ["first", "second"]}


def test_csv_line_numbers_count_multiline_rows(tmp_path):
    text = 'question,contexts\n"two\nlines","[]"\nq,Paris is the capital\n'
    with pytest.raises(SampleLoadError) as info:
        load_samples(write(tmp_path, "m.csv", text))
    assert str(info.value) == (
        "m.csv, line 4: field 'contexts': expected a JSON array of strings, got str 'Paris is the capital'"
    )
    assert (info.value.line, info.value.field) == (4, "contexts")


def test_csv_contexts_that_are_json_but_not_a_list(tmp_path):
    text = 'question,contexts\nq,"""just a string"""\n'
    with pytest.raises(
        SampleLoadError,
        match=r"^s\.csv, line 2: field 'contexts': expected a JSON array of strings, got a string",
    ):
        load_samples(write(tmp_path, "s.csv", text))


def test_csv_row_with_wrong_number_of_cells(tmp_path):
    with pytest.raises(
        SampleLoadError, match=r"^c\.csv, line 3: expected 2 cells \(as in the header\), got 3$"
    ):
        load_samples(write(tmp_path, "c.csv", "question,contexts\nq,[]\nq,[],extra\n"))


def test_csv_duplicate_ids_name_both_lines(tmp_path):
    text = "id,question,contexts\nx,a,[]\ny,b,[]\nx,c,[]\n"
    with pytest.raises(SampleLoadError, match=r"^d\.csv, line 4: duplicate id 'x', already used by line 2$"):
        load_samples(write(tmp_path, "d.csv", text))


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_csv_separated_by_semicolons_or_tabs_is_named_as_such(tmp_path, separator):
    """A spreadsheet set to a European locale saves "CSV" with semicolons: every row then failed as
    "missing field 'question'" under a header that plainly holds it."""
    path = tmp_path / "golden.csv"
    path.write_text(f'question{separator}contexts\nWhat?{separator}["c"]\n', encoding="utf-8")
    with pytest.raises(SampleLoadError) as info:
        load_samples(path)
    header = f"question{separator}contexts"
    assert str(info.value) == (
        f"golden.csv, line 1: the header is one column, {header!r}: its cells are separated by "
        f"{separator!r}, not by commas; save the file as comma-separated CSV"
    )
    assert (info.value.line, info.value.field) == (1, None)
    path.write_text("question\nWhat is a semicolon; a mark?\n", encoding="utf-8")  # one column: read
    assert [s.question for s in load_samples(path)] == ["What is a semicolon; a mark?"]


def test_csv_with_only_a_header_is_an_error(tmp_path):
    with pytest.raises(SampleLoadError, match=r"^h\.csv: no samples"):
        load_samples(write(tmp_path, "h.csv", "question,contexts\n"))


# ------------------------------------------------------------------------------------------ others


@pytest.mark.parametrize("name", ["golden.yaml", "golden.txt", "golden"])
def test_unsupported_extension_lists_the_supported_ones(tmp_path, name):
    path = write(tmp_path, name, "")
    with pytest.raises(SampleLoadError, match="unsupported file type") as info:
        load_samples(path)
    for extension in SUPPORTED_EXTENSIONS:
        assert extension in str(info.value)


def test_missing_file_raises_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        load_samples(tmp_path / "nope.jsonl")


def test_load_samples_is_exported_lazily():
    import pytest_ragmetrics.loaders

    assert load_samples is pytest_ragmetrics.loaders.load_samples


def test_golden_set_without_contexts_loads_with_empty_contexts(tmp_path):
    """The retriever under test supplies the contexts later, with RagSample.with_contexts."""
    path = write(tmp_path, "golden.jsonl", '{"id": "q1", "question": "Where?", "ground_truth": "Here."}\n')
    (sample,) = load_samples(path)
    assert sample.contexts == ()
    filled = sample.with_contexts(["Here it is."])
    assert filled.contexts == ("Here it is.",) and filled.id == "q1" and filled.ground_truth == "Here."
