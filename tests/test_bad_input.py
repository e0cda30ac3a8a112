"""A corpus of bad input, each through the entry point a user reaches it by: one clear error naming
the file, field or option, never an internal traceback, a hang or silence.

Samples, labels, baselines and shard reports go through the loaders and the command line directly
(fast, and the failure points at the cause); options, ini values, environment variables and marker
arguments through pytest runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.baseline import parse_regression_gate
from pytest_ragmetrics.calibration.check import parse_floor
from pytest_ragmetrics.calibration.labels import load_labels
from pytest_ragmetrics.errors import RagMetricsError
from pytest_ragmetrics.gates import parse_gate
from pytest_ragmetrics.loaders import load_samples
from pytest_ragmetrics.metrics.labels import ndcg
from pytest_ragmetrics.sample import RagSample

DEEP = "[" * 100_000 + "]" * 100_000
GOOD_SAMPLE = {"question": "Q?", "contexts": ["C."], "ground_truth": "A."}

# --- samples ---------------------------------------------------------------------------------------

SAMPLE_FILES: dict[str, tuple[str, bytes]] = {
    "empty": (".jsonl", b""),
    "blank lines": (".jsonl", b"\n\n   \n"),
    "not json": (".jsonl", b"{question: q}\n"),
    "a list per line": (".jsonl", b"[1, 2]\n"),
    "a number": (".jsonl", b"42\n"),
    "deeply nested line": (".jsonl", ('{"question": ' + DEEP + "}\n").encode()),
    "deeply nested metadata": (".jsonl", ('{"question": "q", "contexts": ["c"], "metadata": ' + DEEP + "}").encode()),
    "nested just under the limit": (".jsonl", ('{"question": "q", "contexts": ["c"], "metadata": ' + "[" * 900 + "]" * 900 + "}").encode()),
    "not utf-8": (".jsonl", b'{"question": "\xff\xfe"}\n'),
    "lone surrogate": (".jsonl", b'{"question": "\\ud800", "contexts": ["c"]}\n'),
    "nul bytes": (".jsonl", b"\x00\x00\x00\n"),
    "question a number": (".jsonl", b'{"question": 5, "contexts": ["c"]}\n'),
    "question missing": (".jsonl", b'{"contexts": ["c"]}\n'),
    "contexts a string": (".jsonl", b'{"question": "q", "contexts": "c"}\n'),
    "contexts of numbers": (".jsonl", b'{"question": "q", "contexts": [1, 2]}\n'),
    "contexts nested": (".jsonl", b'{"question": "q", "contexts": [["c"]]}\n'),
    "contexts null": (".jsonl", b'{"question": "q", "contexts": null}\n'),
    "duplicate ids": (".jsonl", b'{"id": "a", "question": "q", "contexts": ["c"]}\n{"id": "a", "question": "q", "contexts": ["c"]}\n'),
    "id an object": (".jsonl", b'{"id": {}, "question": "q", "contexts": ["c"]}\n'),
    "NaN grade": (".jsonl", b'{"question": "q", "contexts": ["c"], "reference_context_ids": {"c": NaN}}\n'),
    "infinite grade": (".jsonl", b'{"question": "q", "contexts": ["c"], "reference_context_ids": {"c": Infinity}}\n'),
    "huge number": (".jsonl", ('{"question": "q", "contexts": ["c"], "reference_context_ids": {"c": 1' + "0" * 5000 + "}}").encode()),
    "metadata a list": (".jsonl", b'{"question": "q", "contexts": ["c"], "metadata": [1]}\n'),
    "truncated line": (".jsonl", b'{"question": "q", "contexts": ["c"\n'),
    "json not a list": (".json", b'{"samples": 5}'),
    "json a string": (".json", b'"samples"'),
    "json deeply nested": (".json", DEEP.encode()),
    "json items not objects": (".json", b"[1, 2, 3]"),
    "json empty list": (".json", b"[]"),
    "csv header only": (".csv", b"question,contexts\n"),
    "csv wrong cell count": (".csv", b"question,contexts\nq\n"),
    "csv contexts not json": (".csv", b'question,contexts\nq,"[not json"\n'),
    "csv duplicate columns": (".csv", b"question,question\nq,q\n"),
    "csv unterminated quote": (".csv", b'question,contexts\n"q,["c"]\n'),
    "csv nested cell": (".csv", ('question,contexts\nq,"' + DEEP + '"\n').encode()),
    "unsupported extension": (".yaml", b"question: q\n"),
}


@pytest.mark.parametrize("suffix, content", SAMPLE_FILES.values(), ids=SAMPLE_FILES.keys())
def test_a_bad_samples_file_is_one_error_naming_the_file(tmp_path, suffix, content):
    path = tmp_path / f"golden{suffix}"
    path.write_bytes(content)
    try:
        load_samples(path)
    except RagMetricsError as exc:
        message = str(exc)
        assert path.name in message and "\n" not in message
    # else: read as samples (a lone surrogate, say): no traceback either way


@pytest.mark.parametrize("special", ["fifo", "directory"])
def test_a_samples_file_that_is_not_a_regular_file_is_refused_at_once(tmp_path, capsys, special):
    """``labels sample`` of a FIFO waited for a writer forever."""
    import os

    path = tmp_path / "golden.jsonl"
    if special == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    with pytest.raises(RagMetricsError, match=r"golden\.jsonl: not a regular file"):
        load_samples(path)
    code, text = _cli(capsys, "labels", "sample", str(path), "--n", "1", "--seed", "1")
    assert code == 4 and "Traceback" not in text and "golden.jsonl: not a regular file" in text


def test_a_long_csv_chunk_is_read(tmp_path):
    """Python's csv module refuses fields over 128 KB by default: a long chunk is a chunk."""
    chunk = "word " * 60_000  # 300 KB
    path = tmp_path / "golden.csv"
    path.write_text(f'question,contexts\nq,"{json.dumps([chunk]).replace(chr(34), chr(34) * 2)}"\n', encoding="utf-8")
    [sample] = load_samples(path)
    assert sample.contexts[0] == chunk


# --- labels ----------------------------------------------------------------------------------------

LABEL_FILES: dict[str, bytes] = {
    "empty": b"",
    "not json": b"nope\n",
    "deeply nested": ('{"kind": ' + DEEP + "}\n").encode(),
    "an array": b"[]\n",
    "no kind": b'{"question": "q"}\n',
    "unknown kind": b'{"kind": "nope", "question": "q"}\n',
    "kind a number": b'{"kind": 3}\n',
    "label a string": b'{"kind": "context_precision", "question": "q", "chunk": "c", "label": "yes"}\n',
    "label out of range": b'{"kind": "context_relevance", "question": "q", "chunk": "c", "label": 99}\n',
    "not utf-8": b"\xff\n",
    "duplicate ids": b'{"id": 1, "kind": "context_precision"}\n{"id": 1, "kind": "context_precision"}\n',
    "a truncated line": b'{"kind": "context_precision", "question": \n',
}


@pytest.mark.parametrize("content", LABEL_FILES.values(), ids=LABEL_FILES.keys())
def test_a_bad_labels_file_is_one_error_naming_the_file(tmp_path, content):
    path = tmp_path / "labels.jsonl"
    path.write_bytes(content)
    with pytest.raises(RagMetricsError) as info:
        load_labels(path)
    assert "labels.jsonl" in str(info.value)


# --- baselines and shard reports through the command line ----------------------------------------------


def _report(**changes: Any) -> dict[str, Any]:
    report: dict[str, Any] = {"version": 1, "results": [], "summary": {}}
    report.update(changes)
    return report


def _suite(**changes: Any) -> dict[str, Any]:
    suite: dict[str, Any] = {"collected": 2, "collected_digest": "0" * 64, "ran": 1, "ran_digest": "0" * 64}
    suite.update(changes)
    return suite


REPORT_FILES: dict[str, bytes | None] = {
    "missing": None,
    "empty": b"",
    "not json": b"<html>",
    "a list": b"[]",
    "deeply nested": DEEP.encode(),
    "no results": json.dumps({"version": 1}).encode(),
    "results not a list": json.dumps(_report(results={})).encode(),
    "a result not an object": json.dumps(_report(results=[5])).encode(),
    "a score a string": json.dumps(_report(results=[{"metric": "context_recall", "score": "high"}])).encode(),
    "a NaN score": b'{"version": 1, "results": [{"metric": "context_recall", "score": NaN}], "summary": {}}',
    "a future version": json.dumps(_report(version=999)).encode(),
    "a version a string": json.dumps(_report(version="one")).encode(),
    "summary a list": json.dumps(_report(summary=[])).encode(),
    "suite files a list": json.dumps(_report(summary={"suite": {"files": ["a.py"]}})).encode(),
    "a file digest not hex": json.dumps(_report(summary={"suite": {"files": {"test_a.py": "zz"}}})).encode(),
    "a file digest huge": json.dumps(_report(summary={"suite": {"files": {"test_a.py": "f" * 1_000_000}}})).encode(),
    "a suite without its digests": json.dumps(_report(summary={"suite": {"collected": 2, "ran": 1}})).encode(),
    "a suite that ran a negative count": json.dumps(_report(summary={"suite": _suite(ran=-1)})).encode(),
    "a suite that ran more than it collected": json.dumps(_report(summary={"suite": _suite(ran=10**30)})).encode(),
    "not utf-8": b"\xff\xfe{}",
}


def _report_path(tmp_path: Path, content: bytes | None) -> str:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_bytes(content)
    return str(path)


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out + err


@pytest.mark.parametrize("content", REPORT_FILES.values(), ids=REPORT_FILES.keys())
def test_a_bad_baseline_is_one_error_naming_the_file(tmp_path, capsys, content, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report()), encoding="utf-8")
    path = _report_path(tmp_path, content)
    code, text = _cli(capsys, "baseline", "compare", path, str(good))
    assert code == 4 and "Traceback" not in text
    assert "report.json" in text


@pytest.mark.parametrize("content", REPORT_FILES.values(), ids=REPORT_FILES.keys())
def test_a_bad_shard_report_is_one_error_naming_the_file(tmp_path, capsys, content, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report()), encoding="utf-8")
    path = _report_path(tmp_path, content)
    code, text = _cli(capsys, "report", "merge", str(good), path, "--output", str(tmp_path / "merged.json"))
    assert code == 4 and "Traceback" not in text
    assert "report.json" in text


def test_a_report_that_is_a_symbolic_link_loop_is_named_as_one(tmp_path, capsys, monkeypatch):
    """A shard report that links to itself was a RuntimeError traceback from pathlib (report merge),
    a baseline that does "does not exist" (baseline compare)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.json").write_text(json.dumps(_report()), encoding="utf-8")
    (tmp_path / "loop.json").symlink_to("loop.json")
    code, text = _cli(capsys, "report", "merge", "good.json", "loop.json", "--output", "merged.json")
    assert (code, text) == (4, "error: cannot read report file 'loop.json': Too many levels of symbolic links\n")
    code, text = _cli(capsys, "baseline", "compare", "loop.json", "good.json")
    assert (code, text) == (4, "error: cannot read baseline file 'loop.json': Too many levels of symbolic links\n")


def test_a_store_directory_that_is_a_symbolic_link_loop_ends_no_run_in_a_traceback(pytester):
    """The run's end (its report, the terminal summary) showed the store's path relative to the
    rootdir, and resolving a link that loops raised RuntimeError: a traceback after every test had run.
    Now no directory can be made there, which the run says at its start, as it was given."""
    pytester.makepyfile(
        """
        from pytest_ragmetrics import RagSample, assert_metric

        def test_mrr():
            sample = RagSample("Q?", ["a", "b"], context_ids=["a", "b"], reference_context_ids=["b"])
            assert_metric(sample, "mrr") >= 0.5
        """
    )
    (pytester.path / "judgments").symlink_to("judgments")
    result = pytester.runpytest("--rag-store-dir=judgments", "--rag-cache=replay", "--rag-report")
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    result.stderr.fnmatch_lines(["*--rag-store-dir: the judgment store */judgments is no directory;*"])


def test_a_merged_report_that_cannot_be_written_is_one_error_naming_it(tmp_path, capsys, monkeypatch):
    """An --output that is a directory was an IsADirectoryError traceback."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(_report()), encoding="utf-8")
    (tmp_path / "merged").mkdir()
    code, text = _cli(capsys, "report", "merge", "a.json", "b.json", "--output", "merged", "--allow-partial")
    assert code == 4 and text == "error: cannot write the merged report 'merged': is a directory\n"
    assert [p.name for p in (tmp_path / "merged").iterdir()] == []  # no temporary file left beside it


def test_report_files_that_cannot_be_written_fail_the_run_with_a_line_each(pytester):
    """A report or baseline path under a file (``--rag-save-baseline=tox.ini/b.json``) ended the
    whole run in a FileExistsError traceback, after every test had run, and wrote no other report."""
    pytester.makeini("[pytest]\n")
    pytester.makepyfile(PASSING)
    pytester.path.joinpath("old.json").write_text("{}", encoding="utf-8")
    result = pytester.runpytest(
        "--rag-report-json=tox.ini/report.json",
        "--rag-report-md=report.md",
        "--rag-save-baseline=tox.ini/baseline.json",
    )
    text = result.stdout.str() + result.stderr.str()
    result.assert_outcomes(passed=1)
    assert result.ret == 1
    assert "Traceback" not in text and "INTERNALERROR" not in text
    result.stdout.fnmatch_lines(
        [
            "ragmetrics: cannot write the JSON report to tox.ini/report.json (*Not a directory: *tox.ini')",
            "ragmetrics: cannot write the baseline to *tox.ini/baseline.json (*Not a directory: *tox.ini')",
        ]
    )
    assert pytester.path.joinpath("report.md").read_text(encoding="utf-8").startswith("#")
    assert sorted(p.name for p in pytester.path.iterdir() if p.suffix in (".json", ".tmp")) == ["old.json"]


def test_a_report_written_to_a_pipe_goes_into_the_pipe(tmp_path):
    """A pipe or a device (/dev/stdout, /dev/null) as a report path was replaced by a file."""
    import os
    import stat
    import threading

    from pytest_ragmetrics._files import write_text_atomic

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(pipe.read_text(encoding="utf-8")), daemon=True)
    reader.start()
    write_text_atomic(pipe, "{}\n")
    assert stat.S_ISFIFO(pipe.stat().st_mode)
    reader.join()
    assert read == ["{}\n"]


def test_a_pipe_named_as_a_report_is_written_to_never_read_first(tmp_path):
    """bash's ``--rag-report-json=>(jq .)`` names a pipe: the check that a report path holds no
    other file read it first, so the run waited for ever at its start for a writer."""
    import os
    import threading

    from pytest_ragmetrics.report.build import check_replaceable

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)

    def other_writer() -> None:
        with open(pipe, "w", encoding="utf-8") as handle:  # waits until the pipe is opened to read
            handle.write("not a report\n")

    writer = threading.Thread(target=other_writer, daemon=True)
    writer.start()
    check_replaceable(pipe, "json", "--rag-report-json")  # read the pipe: found "not a report"
    with open(pipe, encoding="utf-8") as handle:  # the pipe's reader is this test, not the check
        assert handle.read() == "not a report\n"
    writer.join()


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "directory", "fifo"])
def test_a_baseline_that_is_not_a_regular_file_is_refused_at_once(tmp_path, capsys, special, monkeypatch):
    """``baseline compare /dev/zero`` read forever; a FIFO would wait for a writer."""
    import os

    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(_report()), encoding="utf-8")
    path = special
    if special == "directory":
        path = str(tmp_path)
    elif special == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)
    code, text = _cli(capsys, "baseline", "compare", path, str(good))
    assert code == 4 and "Traceback" not in text and path in text


# --- gate strings, regression gates, judge floors -----------------------------------------------------

GATES = [
    "",
    "context_recall",
    "context_recall mean",
    "context_recall mean >=",
    "context_recall mean >= high",
    "context_recall mean >= nan",
    "context_recall mean >= inf",
    "context_recall mean >= 1e999",
    "context_recall mean => 0.8",
    "context_recall mean >= 0.8 extra",
    "nope mean >= 0.8",
    "context_recall median-ish >= 0.8",
    "context_recall quantile(2) >= 0.8",
    "context_recall quantile(-0.1) >= 0.8",
    "context_recall quantile() >= 0.8",
    "context_recall pass_rate(>=2) >= 0.8",
    "context_recall pass_rate(>=0.5) >= 1.5",
    "context_relevance mean >= 0.8",
    "context_relevance[nope] mean >= 0.8",
    "context_recall mean >= 0.8 at 95%",
    "ndcg@0 mean >= 0.5",
    "ndcg@-1 mean >= 0.5",
    "ndcg@x mean >= 0.5",
    "\x00 mean >= 0.5",
    "context_recall mean >= 0.8" * 100,
]


@pytest.mark.parametrize("line", GATES)
def test_a_bad_gate_is_one_error_naming_it(line):
    with pytest.raises(RagMetricsError) as info:
        parse_gate(line)
    assert "\n" not in str(info.value)


REGRESSION_GATES = [
    "",
    "context_recall",
    "context_recall mean",
    "context_recall mean drop <= high",
    "context_recall mean drop <= 0.05 at 200%",
    "context_recall mean drop <= 0.05 at nan%",
    "nope mean drop <= 0.05",
    "context_recall mean rise >= 0.05 at",
    "context_recall any rise < 0.1 at p < 0.05",
    "context_recall mean rise >= 0.1",
    "context_recall mean rise <= -1",
    "context_recall mean rise <= nan",
    "context_recall mean rise <= inf",
]


@pytest.mark.parametrize("line", REGRESSION_GATES)
def test_a_bad_regression_gate_is_one_error_naming_it(line):
    with pytest.raises(RagMetricsError) as info:
        parse_regression_gate(line)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("option", ["--gate", "--regression-gate"])
@pytest.mark.parametrize("command", ["baseline compare", "report merge"])
def test_an_empty_gate_option_is_a_usage_error_naming_it(tmp_path, capsys, monkeypatch, option, command):
    """``--regression-gate "$GATE"`` with GATE unset compared with no gate, and passed."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.json", "b.json"):
        (tmp_path / name).write_text(json.dumps(_report()), encoding="utf-8")
    more = ("--output", "m.json", "--allow-partial") if command == "report merge" else ()
    code, text = _cli(capsys, *command.split(), "a.json", "b.json", *more, option, " ")
    assert code == 4 and text == f"error: {option} is empty: give a gate, or leave the option out\n"
    assert not (tmp_path / "m.json").exists()


FLOORS = ["", "context_precision", "context_precision kappa", "context_precision kappa >= x",
          "nope kappa >= 0.5", "context_precision nope >= 0.5", "context_precision kappa >= nan"]


@pytest.mark.parametrize("line", FLOORS)
def test_a_bad_judge_floor_is_one_error_naming_it(line):
    with pytest.raises(RagMetricsError) as info:
        parse_floor(line)
    assert "\n" not in str(info.value)


def test_a_judge_floor_out_of_its_statistics_range_is_an_error_naming_the_range():
    """``kappa >= 2`` failed every judge check and ``accuracy >= -0.1`` passed every one, where a
    gate of ``mean >= 2`` is refused: a floor outside its statistic's range checks nothing."""
    out_of_range = {
        "context_precision kappa >= 2": "kappa lies between -1 and 1, so a threshold of 2",
        "context_relevance[graded] weighted_kappa > -1.5": "weighted_kappa lies between -1 and 1, so a threshold of -1.5",
        "context_precision accuracy >= -0.1": "accuracy lies between 0 and 1, so a threshold of -0.1",
        "context_recall f1 >= 1.2": "f1 lies between 0 and 1, so a threshold of 1.2",
        "context_precision controls <= 1.5": "controls lies between 0 and 1, so a threshold of 1.5",
    }
    for line, why in out_of_range.items():
        with pytest.raises(RagMetricsError) as info:
            parse_floor(line)
        assert f"floor {line!r}: {why} is out of range" in str(info.value)
    assert [parse_floor(line).threshold for line in ("context_precision kappa >= -1", "context_precision f1 >= 1")] == [-1, 1]


# --- the caps of store rejudge, store batch import's results file, cache prune's record ------------

BAD_CAPS = ["-1", "1.5", "abc", str(10**30), ""]


@pytest.mark.parametrize("option", ["--max-judge-calls", "--max-judge-tokens"])
@pytest.mark.parametrize("value", BAD_CAPS)
def test_a_bad_rejudge_cap_is_a_usage_error_naming_it(tmp_path, capsys, option, value):
    """An empty cap (an unset shell variable) is not "no cap": that is spelt none."""
    (tmp_path / "store").mkdir()
    store, cache = str(tmp_path / "store"), str(tmp_path / "cache")
    code, text = _cli(capsys, "store", "rejudge", "--store-dir", store, "--cache-dir", cache, option, value)
    assert code == 4 and "Traceback" not in text
    assert option in text and text.count("\n") == 1


@pytest.mark.parametrize("what", ["missing", "directory"])
def test_a_results_file_that_is_not_a_file_is_a_usage_error_naming_it(tmp_path, capsys, what, monkeypatch):
    monkeypatch.chdir(tmp_path)
    if what == "directory":
        (tmp_path / "results.jsonl").mkdir()
    code, text = _cli(
        capsys, "store", "batch", "import", "results.jsonl", "--batch", "b.jsonl", "--cache-dir", "c"
    )
    assert code == 4 and "Traceback" not in text
    why = "does not exist" if what == "missing" else "is not a regular file"
    assert text == f"error: the results file results.jsonl {why}\n"


def _import(tmp_path: Path, content: bytes) -> tuple[Any, list[Any]]:
    """Import ``content`` as the results of a batch of one request; (outcome, what was recorded)."""
    from judge_requests import make_request

    from pytest_ragmetrics.judge.base import JudgeAnswer
    from pytest_ragmetrics.judge.batch import AskedRequests, BatchExport, import_results

    request = make_request()
    export = BatchExport.create(tmp_path / "b.jsonl")
    export.add(request, {"model": request.model, "messages": list(request.messages)})
    export.finish()
    results = tmp_path / "results.jsonl"
    results.write_bytes(content.replace(b"KEY", request.cache_key().encode()))
    recorded: list[Any] = []
    asked = AskedRequests(tmp_path / "b.jsonl")
    try:
        outcome = import_results(
            results,
            asked,
            read=lambda r, body, at: JudgeAnswer((), judged_at=at),
            recorded=lambda r: False,
            record=recorded.extend,
        )
    finally:
        asked.close()
    return outcome, recorded


BODY = {"created": 10**30, "choices": []}
RESULTS_FILES: dict[str, bytes] = {
    "empty": b"",
    "blank lines": b"\n  \n",
    "deeply nested line": DEEP.encode() + b"\n",
    "created past time_t": json.dumps(
        {"custom_id": "KEY", "response": {"status_code": 200, "body": BODY}, "error": None}
    ).encode(),
}


@pytest.mark.parametrize("content", RESULTS_FILES.values(), ids=RESULTS_FILES.keys())
def test_a_bad_results_file_is_an_error_or_a_failed_line_naming_it(tmp_path, content):
    try:
        outcome, recorded = _import(tmp_path, content)
    except ValueError as exc:  # the command prints it as one error line
        assert "results.jsonl is empty" in str(exc)
        return
    if recorded:  # a creation time no clock can show is left out, not a traceback
        assert [answer.judged_at for _, answer in recorded] == [""]
    else:
        [(source, number, _, _, why)] = outcome.failed
        assert source.endswith("results.jsonl") and number == 1 and "nested too deeply" in why


def test_a_damaged_requests_file_is_an_error_or_a_failed_line_naming_it(tmp_path):
    """The export's record of what it asked (``b.jsonl.requests.sqlite``) ended `store batch import`
    in a sqlite3.DatabaseError traceback when it was not a database, in a KeyError one when a record
    in it was damaged."""
    import sqlite3

    from judge_requests import make_request

    from pytest_ragmetrics.judge.batch import AskedRequests, BatchExport, import_results, requests_path

    request = make_request()
    export = BatchExport.create(tmp_path / "b.jsonl")
    export.add(request, {"model": request.model, "messages": list(request.messages)})
    export.finish()
    results = tmp_path / "results.jsonl"
    line = {"custom_id": request.cache_key(), "response": {"status_code": 200, "body": {}}, "error": None}
    results.write_text(json.dumps(line) + "\n", encoding="utf-8")

    def run() -> Any:
        asked = AskedRequests(tmp_path / "b.jsonl")
        try:
            return import_results(results, asked, read=_unread, recorded=lambda r: False, record=_unrecorded)
        finally:
            asked.close()

    db = sqlite3.connect(requests_path(tmp_path / "b.jsonl"))
    with db:
        db.execute("UPDATE request SET record = ?", ('{"kind": 5}',))
    db.close()
    assert [(number, why) for _, number, _, _, why in run().failed] == [
        (1, "the export's record of this request in b.jsonl.requests.sqlite is damaged (KeyError: 'prompt_version')")
    ]
    requests_path(tmp_path / "b.jsonl").write_bytes(b"not a database\n" * 1000)
    with pytest.raises(ValueError) as info:
        run()
    assert str(info.value) == (
        f"cannot read {requests_path(tmp_path / 'b.jsonl')}, the record of what the export asked (file is not a "
        "database): write the export again (pytest --rag-batch=PATH)"
    )


def _unread(request: Any, body: Any, at: str) -> Any:
    raise AssertionError("no answer is read from a line whose request is unknown")


def _unrecorded(pairs: Any) -> None:
    raise AssertionError("nothing is recorded")


def test_a_results_line_says_what_is_wrong_with_it(tmp_path):
    """A results line whose status_code was the text "200" failed as "HTTP 200: HTTP 200"; an array,
    or a custom_id that is a number, as "the line has no custom_id"."""
    lines = [
        b"[1, 2]",
        json.dumps({"custom_id": 5}).encode(),
        json.dumps({"custom_id": "KEY", "response": {"status_code": "200", "body": {}}}).encode(),
        json.dumps({"custom_id": "KEY", "response": {"status_code": 500, "body": {}}}).encode(),
    ]
    outcome, recorded = _import(tmp_path, b"\n".join(lines) + b"\n")
    assert recorded == []
    assert [(number, why) for _, number, _, _, why in outcome.failed] == [
        (1, "the line is not a JSON object"),
        (2, "the line's custom_id is 5, not the key of a request"),
        (3, 'the response\'s status_code is "200", not 200'),
        (4, "the response's status_code is 500, not 200"),
    ]


def test_a_results_line_error_is_quoted_with_credentials_masked_and_printable(tmp_path, monkeypatch):
    """A provider's error on a results line was quoted as it came: a key the provider echoed was
    printed, and half an escaped pair (\\ud83d) could not be printed at all."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-secret-0123456789abcdef")
    lines = [
        json.dumps({"custom_id": "KEY", "error": {"code": "invalid_api_key",
                    "message": "Incorrect API key provided: sk-test-secret-0123456789abcdef \ud83d"}}).encode(),
    ]  # fmt: skip
    outcome, recorded = _import(tmp_path, b"\n".join(lines) + b"\n")
    assert recorded == []
    [(_, number, _, _, why)] = outcome.failed
    assert number == 1
    assert "sk-test-secret-0123456789abcdef" not in why
    assert why.startswith("invalid_api_key: Incorrect API key provided: ")
    assert why.endswith("\ufffd")
    why.encode("utf-8")  # printable: no lone surrogate left


@pytest.mark.parametrize(
    "answer", [DEEP, '{"a": ' * 100_000, "```json\n" + DEEP + "\n```", 'Sure: {"a": ' + DEEP + "}"]
)
def test_a_judge_answer_nested_too_deeply_is_an_invalid_answer(answer):
    """A judge (live, or a batch's results file) answering deeply nested JSON was a RecursionError
    traceback; it is an invalid answer, which is reported and never cached."""
    from pytest_ragmetrics.judge.completions import parse_json_answer

    with pytest.raises(ValueError, match="nested too deeply"):
        parse_json_answer(answer)


def test_an_absurd_token_count_in_a_batch_answer_is_bounded():
    """A results line reporting 10**40 tokens was recorded as such, swamping every token total."""
    from judge_requests import make_request

    from pytest_ragmetrics.judge.openai_judge import OpenAIJudge

    answer = json.dumps({"reason": "r", "useful": True})
    body = {
        "id": "c", "object": "chat.completion", "created": 1, "model": "judge-model",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": answer}}],
        "usage": {"prompt_tokens": 10**40, "completion_tokens": 5, "total_tokens": 10**40 + 5},
    }  # fmt: skip
    judge = OpenAIJudge(api_key="sk-dummy", base_url="http://127.0.0.1:9/v1")
    recorded = judge.answer_from_body(make_request(), body, "")
    assert (recorded.usage.prompt_tokens, recorded.usage.completion_tokens) == (2**53, 5)


LAST_RUNS: dict[str, bytes | None] = {
    "garbage": b"garbage",
    "empty": b"",
    "not an object": b"[]",
    "deeply nested": DEEP.encode(),
    "unused a string": b'{"unused": "abc"}',
    "unused numbers": b'{"unused": [1, 2]}',
    "missing fields": b"{}",
    "kept negative": b'{"unused": [], "kept": {"entries": -3, "for": "x"}}',
    "kept a bool": b'{"unused": [], "kept": {"entries": true, "for": "x"}}',
    "a directory": None,
}


@pytest.mark.parametrize("content", LAST_RUNS.values(), ids=LAST_RUNS.keys())
def test_a_damaged_last_run_record_prunes_nothing_and_names_the_file(tmp_path, capsys, content):
    (tmp_path / "store").mkdir()
    (tmp_path / "store" / "ab.jsonl").write_text("")
    record = tmp_path / "cache" / "last_run.json"
    record.parent.mkdir()
    if content is None:
        record.mkdir()
    else:
        record.write_bytes(content)
    dirs = ("--cache-dir", str(tmp_path / "cache"), "--store-dir", str(tmp_path / "store"))
    code, text = _cli(capsys, "cache", "prune", "--yes", *dirs)
    assert code == 1 and "Traceback" not in text
    assert f"error: {record} is damaged: " in text and "nothing is pruned" in text
    assert (tmp_path / "store" / "ab.jsonl").exists()
    code, text = _cli(capsys, "cache", "stats", *dirs)
    assert code == 0 and f"unknown ({record} is damaged: " in text


STORE_COMMANDS = [("cache", "stats"), ("cache", "prune"), ("store", "show", "ab"), ("store", "rejudge")]


@pytest.mark.parametrize("which", ["--store-dir", "--cache-dir"])
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=[" ".join(c) for c in STORE_COMMANDS])
def test_a_store_or_cache_that_is_a_file_is_a_usage_error_naming_it(tmp_path, capsys, which, command):
    """A store directory that is a file read as an empty store: rejudge re-judged nothing, with success."""
    dirs = {"--store-dir": tmp_path / "store", "--cache-dir": tmp_path / "cache"}
    dirs["--store-dir"].mkdir()
    dirs[which] = tmp_path / "a-file"
    dirs[which].write_text("x")
    code, text = _cli(capsys, *command, *(str(a) for pair in dirs.items() for a in pair))
    what = "store" if which == "--store-dir" else "cache"
    assert code == 4 and text == f"error: the judgment {what} {tmp_path / 'a-file'} is not a directory\n"


@pytest.mark.parametrize("which", ["--store-dir", "--cache-dir"])
@pytest.mark.parametrize("command", STORE_COMMANDS, ids=[" ".join(c) for c in STORE_COMMANDS])
def test_a_store_or_cache_whose_name_the_file_system_refuses_is_a_usage_error_naming_it(
    tmp_path, capsys, which, command
):
    """A name longer than the file system allows made ``Path.exists`` raise: a traceback, exit 1."""
    dirs = {"--store-dir": tmp_path / "store", "--cache-dir": tmp_path / "cache"}
    dirs["--store-dir"].mkdir()
    dirs[which] = tmp_path / ("g" * 300)
    code, text = _cli(capsys, *command, *(str(a) for pair in dirs.items() for a in pair))
    what = "store" if which == "--store-dir" else "cache"
    assert code == 4 and text.startswith(f"error: the judgment {what} {dirs[which]} cannot be used: ")
    assert "Traceback" not in text


@pytest.mark.parametrize("command", [("store", "show", "ab"), ("store", "rejudge")], ids=["show", "rejudge"])
def test_a_store_that_does_not_exist_is_a_usage_error_naming_it(tmp_path, capsys, command):
    """A misspelt --store-dir read as an empty store: rejudge re-judged nothing, with success."""
    missing = tmp_path / "judgmnets"
    code, text = _cli(capsys, *command, "--store-dir", str(missing), "--cache-dir", str(tmp_path / "cache"))
    assert code == 4 and text == f"error: the judgment store {missing} does not exist\n"
    assert not missing.exists()


# --- command-line options, ini values, environment variables, marker arguments ---------------------

PASSING = "def test_nothing():\n    pass\n"

BAD_OPTIONS = [
    "--rag-max-judge-calls=100000000000000000000000",
    "--rag-max-judge-calls=-1",
    "--rag-max-judge-tokens=lots",
    "--rag-concurrency=0",
    "--rag-concurrency=1e3",
    "--rag-judge-n=0",
    "--rag-judge-temperature=inf",
    "--rag-judge-temperature=nan",
    "--rag-cache=sometimes",
    "--rag-response-format=yaml",
    "--rag-gate=nope mean >= 0.8",
    "--rag-gate=context_recall mean >= 2",
    "--rag-judge-timeout=-5",
    "--rag-seed=99999999999999999999999999",
    "--rag-judge-max-tokens=0",
]


@pytest.mark.parametrize("option", BAD_OPTIONS)
def test_a_bad_option_is_a_usage_error_naming_it(pytester, option):
    pytester.makepyfile(PASSING)
    result = pytester.runpytest(option)
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    name, value = option.split("=", 1)
    assert name in text or value in text  # the option, or the gate it holds


def test_an_empty_number_is_an_error_naming_it_where_none_means_unset():
    """``--rag-max-judge-calls="$CAP"`` or ``RAGMETRICS_MAX_JUDGE_CALLS=$CAP`` with CAP unset ran with
    no cap at all (and an empty ``RAGMETRICS_SEED`` sent no seed): an empty number is an error in
    every layer; no cap, no seed is spelt none."""
    from pytest_ragmetrics.settings import resolve

    named = {
        "ini": "rag_max_judge_calls",
        "env": "RAGMETRICS_MAX_JUDGE_CALLS",
        "cli": "--rag-max-judge-calls",
        "overrides": "max_judge_calls",
    }
    for layer, name in named.items():
        given = {"RAGMETRICS_MAX_JUDGE_CALLS": " "} if layer == "env" else {"max_judge_calls": " "}
        layers: dict[str, Any] = {"ini": {"max_judge_calls": "5"}, layer: given}  # over a cap of 5
        with pytest.raises(RagMetricsError) as info:
            resolve(**layers)
        assert str(info.value) == f"{name} is empty: give an integer, or the word none to unset it"
    with pytest.raises(RagMetricsError, match=r"^RAGMETRICS_SEED is empty"):
        resolve(env={"RAGMETRICS_SEED": ""})
    capped = resolve(ini={"max_judge_calls": "5", "max_judge_tokens": "9"}, env={"RAGMETRICS_SEED": "none"})
    assert (capped.max_judge_calls, capped.max_judge_tokens, capped.seed) == (5, 9, None)
    uncapped = resolve(ini={"max_judge_calls": "5"}, env={"RAGMETRICS_MAX_JUDGE_CALLS": "None"})
    assert uncapped.max_judge_calls is None


@pytest.mark.parametrize("name", ["report_json", "report_md", "report_html"])
def test_a_report_path_that_is_a_directory_is_refused_before_the_run(tmp_path, name):
    """--rag-report-json=DIR ran the whole suite, then ended in an IsADirectoryError traceback; a
    name longer than the file system allows stopped pytest at its start with an INTERNALERROR."""
    from pytest_ragmetrics.settings import OPTIONS_BY_NAME

    flag = "--rag-" + name.replace("_", "-")
    with pytest.raises(RagMetricsError) as info:
        OPTIONS_BY_NAME[name].convert(str(tmp_path), flag)
    assert str(info.value) == f"{flag} {str(tmp_path)!r} is a directory: give the path of the file to write"
    assert OPTIONS_BY_NAME[name].convert(str(tmp_path / "report"), flag) == str(tmp_path / "report")
    too_long = str(tmp_path / ("r" * 300))
    with pytest.raises(RagMetricsError) as info:
        OPTIONS_BY_NAME[name].convert(too_long, flag)
    assert str(info.value) == f"{flag} {too_long!r} cannot be a file's path: File name too long"


BAD_INI = {
    "rag_max_judge_calls = many": "rag_max_judge_calls",
    "rag_concurrency = -3": "rag_concurrency",
    "rag_temperature = inf": "rag_temperature",
    "rag_judge_temperature = inf": "rag_temperature",  # misspelt: names the closest real one
    "rag_cache = sometimes": "rag_cache",
    "rag_gates = nope mean >= 0.8": "rag_gates",
    "rag_judge_modle = gpt-4o": "rag_judge_model",
}


@pytest.mark.parametrize("line, named", BAD_INI.items(), ids=BAD_INI.keys())
def test_a_bad_ini_value_is_a_usage_error_naming_it(pytester, line, named):
    pytester.makeini(f"[pytest]\n{line}\n")
    pytester.makepyfile(PASSING)
    result = pytester.runpytest()
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert named in text or line.split("=", 1)[1].strip() in text


CONFIG_FILES = {
    # Every rag_ key known (in any case): nothing for the check to find, the file is not parsed.
    "[pytest]\nrag_cache_dir = .cache\nRAG_JUDGE_MODEL: gpt-4o\n": False,
    "[tool.pytest.ini_options]\nrag_gates = [\n  'context_recall mean >= 0.8',\n]\n": False,
    "[pytest]\naddopts = -q\n": False,
    # A key that may be unknown: parsed, and the check decides.
    "[pytest]\nrag_judge_temperature = 0.5\n": True,
    "[pytest]\nrag_cache_dir-old = .cache\n": True,  # a known name is only part of it
    '[tool.pytest.ini_options]\n"rag_cache_dir" = ".cache"\n': True,
    "[pytest]\naddopts = -p rag_tools\n": True,  # not a key: the parse finds no such key
}


@pytest.mark.parametrize("text, parsed", CONFIG_FILES.items(), ids=range(len(CONFIG_FILES)))
def test_a_configuration_file_is_parsed_for_unknown_keys_unless_every_rag_key_in_it_is_known(
    tmp_path, text, parsed
):
    from pytest_ragmetrics.options import may_name_unknown_ini_keys

    path = tmp_path / "pytest.ini"
    path.write_text(text, encoding="utf-8")
    assert may_name_unknown_ini_keys(path) is parsed
    assert may_name_unknown_ini_keys(tmp_path / "missing.ini") is False


BAD_ENV = {
    "RAGMETRICS_MAX_JUDGE_CALLS=-1": "RAGMETRICS_MAX_JUDGE_CALLS",
    "RAGMETRICS_CONCURRENCY=zero": "RAGMETRICS_CONCURRENCY",
    "RAGMETRICS_CACHE=sometimes": "RAGMETRICS_CACHE",
    "RAGMETRICS_JUDGE_MODLE=gpt-4o": "RAGMETRICS_JUDGE_MODEL",  # misspelt: names the closest real one
}


@pytest.mark.parametrize("assignment, named", BAD_ENV.items(), ids=BAD_ENV.keys())
def test_a_bad_environment_variable_is_a_usage_error_naming_it(pytester, monkeypatch, assignment, named):
    name, value = assignment.split("=", 1)
    monkeypatch.setenv(name, value)
    pytester.makepyfile(PASSING)
    result = pytester.runpytest()
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert named in text


BAD_MARKERS = {
    "positional": "'context_recall'",
    "unknown metric": "metrics=['nope']",
    "metrics a string of nonsense": "metrics='nope'",
    "metrics a number": "metrics=5",
    "cache_dir a number": "cache_dir=5",
    "store_dir a list": "store_dir=['a']",
    "unknown argument": "nope=1",
    "run-wide setting": "max_judge_calls=3",
    "bad cache mode": "cache='sometimes'",
    "concurrency zero": "concurrency=0",
    "temperature a string": "judge_temperature='hot'",
    "samples a number": "samples=5",
    "samples missing file": "samples='nowhere.jsonl'",
}


@pytest.mark.parametrize("arguments", BAD_MARKERS.values(), ids=BAD_MARKERS.keys())
def test_a_bad_marker_argument_is_a_usage_error_naming_the_marker(pytester, arguments):
    pytester.makepyfile(f"import pytest\n\n@pytest.mark.ragmetrics({arguments})\ndef test_marked():\n    pass\n")
    result = pytester.runpytest()
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    assert "@pytest.mark.ragmetrics" in text


def test_a_golden_set_marker_that_names_no_file_is_a_usage_error_naming_each_test(pytester):
    """``samples=5`` on a test taking ``rag_sample`` stopped collection with a TypeError traceback
    from pathlib; a symbolic link that points at itself is named with what is wrong."""
    pytester.makepyfile(
        """
        import pytest

        @pytest.mark.ragmetrics(samples=5)
        def test_number(rag_sample):
            pass

        @pytest.mark.ragmetrics(samples=b"golden.jsonl")
        def test_bytes(rag_sample):
            pass

        @pytest.mark.ragmetrics(samples="loop.jsonl")
        def test_loop(rag_sample):
            pass
        """
    )
    (pytester.path / "loop.jsonl").symlink_to("loop.jsonl")
    result = pytester.runpytest()
    text = result.stdout.str() + result.stderr.str()
    assert result.ret == 4, text
    assert "Traceback" not in text and "INTERNALERROR" not in text
    result.stderr.fnmatch_lines(
        [
            "ERROR: *::test_number: @pytest.mark.ragmetrics(samples=...) must be the path of a samples file, got 5",
            "*::test_bytes: @pytest.mark.ragmetrics(samples=...) must be the path of a samples file, got b'golden.jsonl'",
            "*::test_loop: @pytest.mark.ragmetrics(samples='loop.jsonl'): *Too many levels of symbolic links*",
        ]
    )


def test_a_grade_too_large_for_ndcg_is_refused_naming_the_file_field_and_id(tmp_path):
    # 1 followed by 400 zeros is a whole number JSON reads, but no float holds it: nDCG divides it.
    path = tmp_path / "golden.jsonl"
    path.write_text('{"question": "q", "contexts": ["c"], "reference_context_ids": {"c": 1' + "0" * 400 + "}}\n")
    with pytest.raises(RagMetricsError) as excinfo:
        load_samples(path)
    message = str(excinfo.value)
    assert "golden.jsonl" in message and "reference_context_ids" in message and "'c'" in message
    assert "from 0 to 2**53" in message and "a larger whole number" in message
    with pytest.raises(ValueError, match=r"reference_context_ids\['c'\] must be a grade from 0 to 2\*\*53, got 9007199254740993"):
        RagSample("q", ["c"], reference_context_ids={"c": 2**53 + 1})
    # The largest grade scores: two of them rank with finite sums.
    top = RagSample("q", ["a", "b"], context_ids=["a", "b"], reference_context_ids={"a": 2**53, "b": 2**53})
    assert dict(top.reference_context_ids or {}) == {"a": 2**53, "b": 2**53}
    assert ndcg(["b", "a"], dict(top.reference_context_ids or {})) == 1.0
