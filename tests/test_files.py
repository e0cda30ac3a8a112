"""The one atomic writer: every file the package writes for others is replaced whole or not at all."""

from __future__ import annotations

import json
import os
import stat
import sys

import pytest

from pytest_ragmetrics._files import write_atomic, write_text_atomic


def test_write_text_atomic_creates_parents_and_writes_exact_text(tmp_path):
    target = tmp_path / "deep" / "er" / "report.json"
    text = '{"a": "b\u00e9"}\n'
    assert write_text_atomic(target, text) == target
    assert target.read_bytes() == text.encode("utf-8")
    assert os.listdir(target.parent) == ["report.json"]


def test_write_text_atomic_replaces_and_keeps_newlines(tmp_path):
    target = tmp_path / "r.md"
    target.write_text("old")
    write_text_atomic(str(target), "a\nb\n")
    assert target.read_bytes() == b"a\nb\n"


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_write_text_atomic_makes_a_readable_file(tmp_path):
    target = tmp_path / "r.html"
    write_text_atomic(target, "x")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def test_write_text_atomic_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    target = tmp_path / "r.json"
    target.write_text("old")

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError, match="disk full"):
        write_text_atomic(target, "new")
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["r.json"]


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
def test_a_replaced_file_keeps_its_permissions(tmp_path):
    target = tmp_path / "shard.jsonl"
    target.write_bytes(b"old\n")
    target.chmod(0o640)
    write_atomic(target, b"new\n")
    assert target.read_bytes() == b"new\n"
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_directory_is_refused_and_left_alone(tmp_path):
    with pytest.raises(IsADirectoryError):
        write_atomic(tmp_path, b"x")
    assert os.listdir(tmp_path) == []


def test_a_labelling_sample_that_cannot_be_written_leaves_the_old_record_whole(tmp_path, monkeypatch, capsys):
    from pytest_ragmetrics.__main__ import main

    golden = tmp_path / "golden.jsonl"
    golden.write_text(
        "".join(json.dumps({"id": f"q{i}", "question": "q?", "contexts": ["c"]}) + "\n" for i in range(6))
    )
    out = tmp_path / "labels.sample.json"
    assert main(["labels", "sample", "--n", "3", "--seed", "1", str(golden), "--out", str(out)]) == 0
    before = out.read_bytes()

    def broken_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    code = main(["labels", "sample", "--n", "4", "--seed", "2", str(golden), "--out", str(out)])
    monkeypatch.undo()
    assert code == 4
    assert "cannot write" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert sorted(os.listdir(tmp_path)) == ["golden.jsonl", "labels.sample.json"]


def test_a_labelling_sample_is_never_written_over_a_file_that_is_no_record(tmp_path, capsys):
    """``labels sample golden.jsonl --out golden.jsonl`` replaced the golden set with the record of the
    draw. Only a record written before, or an empty file, is replaced now; anything else is left alone."""
    from pytest_ragmetrics.__main__ import main

    golden = tmp_path / "golden.jsonl"
    text = "".join(json.dumps({"id": f"q{i}", "question": "q?", "contexts": ["c"]}) + "\n" for i in range(6))
    golden.write_text(text)
    assert main(["labels", "sample", "--n", "3", "--seed", "1", str(golden), "--out", str(golden)]) == 4
    assert f"{golden} exists and is not a record written by" in capsys.readouterr().err
    assert golden.read_text() == text
    record = tmp_path / "labels.sample.json"
    for seed in ("1", "2"):  # a record written before is replaced
        assert main(["labels", "sample", "--n", "3", "--seed", seed, str(golden), "--out", str(record)]) == 0
    assert json.loads(record.read_text())["seed"] == 2
