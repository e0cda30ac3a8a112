"""``python -m pytest_ragmetrics cache stats|clear|prune`` on a real cache and store."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from judge_requests import make_request

from pytest_ragmetrics.__main__ import main
from pytest_ragmetrics.errors import EXIT_USAGE
from pytest_ragmetrics.judge.base import JudgeAnswer, ScriptedJudge
from pytest_ragmetrics.judge.cache import CachedJudge
from pytest_ragmetrics.judge.last_run import write_last_run
from pytest_ragmetrics.judge.store import JudgmentStore
from pytest_ragmetrics.settings import default_cache_dir


@pytest.fixture
def populated(tmp_path: Path) -> dict[str, Any]:
    """A cache and a store holding 3 judgments of judge-a and 2 of judge-b."""
    cache_dir, store_dir = tmp_path / "cache", tmp_path / "judgments"
    requests = [make_request(i, model="judge-a") for i in range(3)] + [
        make_request(i, model="judge-b") for i in range(2)
    ]
    judge = CachedJudge(
        lambda: ScriptedJudge(lambda r: {"reason": "r", "useful": True}),
        cache_dir=cache_dir,
        store=JudgmentStore(store_dir),
    )

    async def go() -> None:
        for request in requests:
            await judge.judge(request)
        await judge.aclose()

    asyncio.run(go())
    return {"cache": cache_dir, "store": store_dir, "keys": [r.cache_key() for r in requests]}


def record_full_run(cache_dir: Path, keys: list[str], used: list[str]) -> None:
    """Record a full run that used ``used`` of the store's ``keys``."""
    write_last_run(cache_dir, unused=set(keys) - set(used), reason=None)


def cli(*args: Any) -> int:
    return main([str(a) for a in args])


def test_stats_counts_entries_models_and_unused_store_entries(populated, capsys):
    record_full_run(populated["cache"], populated["keys"], populated["keys"][:4])
    assert cli("cache", "stats", "--cache-dir", populated["cache"], "--store-dir", populated["store"]) == 0
    out = capsys.readouterr().out
    assert "entries: 5" in out
    assert "model judge-a: 3" in out
    assert "model judge-b: 2" in out
    assert "size on disk:" in out
    assert "not used by the last full run: 1" in out


def test_stats_json(populated, capsys):
    args = ["cache", "stats", "--json", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*args) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cache"]["entries"] == 5
    assert data["cache"]["models"] == {"judge-a": 3, "judge-b": 2}
    assert data["cache"]["bytes"] > 0
    assert data["store_entries"] == 5
    assert data["store_unused_by_last_run"] is None


def test_stats_counts_an_entry_nested_too_deeply_to_read_under_no_model(populated, capsys):
    # A hand-edited entry nested deeper than Python reads (RecursionError, not a decode error).
    import diskcache

    with diskcache.Cache(str(populated["cache"])) as cache:
        cache.set("f" * 64, "[" * 100_000 + "]" * 100_000)
    assert cli("cache", "stats", "--cache-dir", populated["cache"], "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["cache"]["entries"] == 6
    assert report["cache"]["models"] == {"?": 1, "judge-a": 3, "judge-b": 2}


def test_stats_of_a_missing_cache_is_empty(tmp_path, capsys):
    assert cli("cache", "stats", "--cache-dir", tmp_path / "nope") == 0
    assert "entries: 0" in capsys.readouterr().out


@pytest.mark.parametrize("variable", ["RAGMETRICS_CACHE_DIR", "RAGMETRICS_STORE_DIR"])
def test_a_directory_variable_set_but_empty_is_a_usage_error_as_in_a_pytest_run(
    tmp_path, capsys, monkeypatch, variable
):
    """It was read as unset here, and refused by the pytest run: the commands read what the run reads."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\nrag_cache_dir = cache\nrag_store_dir = judgments\n")
    monkeypatch.setenv(variable, "")
    assert cli("cache", "stats") == 4
    assert f"error: {variable} is set but empty" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--cache-dir", "--store-dir"])
def test_a_directory_option_given_empty_is_a_usage_error_not_the_current_directory(
    tmp_path, capsys, monkeypatch, option
):
    """``--store-dir "$STORE"`` with the variable unset was the current directory: stats counted it,
    and prune would have pruned it, in place of the configured store."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pytest.ini").write_text("[pytest]\nrag_cache_dir = cache\nrag_store_dir = judgments\n")
    for action in ("stats", "prune"):
        assert cli("cache", action, option, " ") == EXIT_USAGE
        assert f"error: argument {option}: is empty: give a directory" in capsys.readouterr().err


def test_clear_empties_the_cache_but_not_the_store(populated, capsys):
    record_full_run(populated["cache"], populated["keys"], populated["keys"])
    assert cli("cache", "clear", "--cache-dir", populated["cache"]) == 0
    assert "cleared" in capsys.readouterr().out
    assert cli("cache", "stats", "--json", "--cache-dir", populated["cache"]) == 0
    assert json.loads(capsys.readouterr().out)["cache"]["entries"] == 0
    assert len(JudgmentStore(populated["store"])) == 5
    # The record of the last run survives: prune still works after a clear.
    assert (populated["cache"] / "last_run.json").is_file()


def test_clear_removes_only_the_cache_s_own_files_from_a_shared_directory(tmp_path, capsys):
    """With the cache directory set to one other tools use too (RAGMETRICS_CACHE_DIR=~/.cache), `cache
    clear` deleted everything in it but the record of the last run, theirs included."""
    shared = tmp_path / "shared"
    judge = CachedJudge(lambda: ScriptedJudge(lambda r: {"reason": "r" * 70_000, "useful": True}), cache_dir=shared)

    async def go() -> None:
        await judge.judge(make_request())
        await judge.aclose()

    asyncio.run(go())
    assert any(len(p.name) == 2 and p.is_dir() for p in shared.iterdir())  # a large value's directory
    (shared / "pip").mkdir()
    (shared / "pip" / "wheel.whl").write_bytes(b"wheel")
    (shared / "notes.txt").write_text("mine\n", encoding="utf-8")
    assert cli("cache", "clear", "--cache-dir", shared) == 0
    out = capsys.readouterr().out
    assert "left 2 that are not the cache's: notes.txt, pip)" in out
    assert sorted(p.name for p in shared.iterdir()) == ["notes.txt", "pip"]
    assert (shared / "pip" / "wheel.whl").read_bytes() == b"wheel"
    assert cli("cache", "stats", "--json", "--cache-dir", shared) == 0
    assert json.loads(capsys.readouterr().out)["cache"]["entries"] == 0


def test_clear_refuses_a_directory_that_is_not_a_cache(populated, capsys):
    assert cli("cache", "clear", "--cache-dir", populated["store"]) == 1
    assert "does not look like a pytest-ragmetrics cache" in capsys.readouterr().err
    assert len(JudgmentStore(populated["store"])) == 5


def test_corrupt_cache_stats_fails_clearly_and_clear_recovers(tmp_path, capsys):
    cache_dir = tmp_path / "cache"
    cache_dir.mkdir()
    (cache_dir / "cache.db").write_bytes(b"garbage" * 200)
    assert cli("cache", "stats", "--cache-dir", cache_dir) == 1
    err = capsys.readouterr().err
    assert "cannot read the judgment cache" in err
    assert "Traceback" not in err
    assert cli("cache", "clear", "--cache-dir", cache_dir) == 0
    assert cli("cache", "stats", "--cache-dir", cache_dir) == 0


def test_cache_stats_of_a_cache_db_that_is_a_directory_fails_naming_it_and_clear_recovers(tmp_path, capsys):
    """A damaged cache, not an empty one: stats said "entries: 0" and succeeded."""
    cache_dir = tmp_path / "cache"
    (cache_dir / "cache.db").mkdir(parents=True)
    assert cli("cache", "stats", "--cache-dir", cache_dir) == 1
    captured = capsys.readouterr()
    assert f"cannot read the judgment cache at {cache_dir}" in captured.err
    assert f"({cache_dir / 'cache.db'} is a directory)" in captured.err
    assert "entries" not in captured.out and "Traceback" not in captured.err
    assert cli("cache", "clear", "--cache-dir", cache_dir) == 0
    assert cli("cache", "stats", "--cache-dir", cache_dir) == 0


def test_prune_deletes_store_entries_the_last_run_did_not_use(populated, capsys):
    keep = populated["keys"][:2]
    record_full_run(populated["cache"], populated["keys"], keep)
    base = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]

    assert cli(*base, "--dry-run") == 0
    out = capsys.readouterr().out
    assert "would delete 3 of 5 store entries" in out
    assert len(JudgmentStore(populated["store"])) == 5

    assert cli(*base, "--yes") == 0
    assert "deleted 3 of 5 store entries" in capsys.readouterr().out
    assert JudgmentStore(populated["store"]).keys() == set(keep)


class _Terminal:
    """A stdin that is a terminal and answers the prune question."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked = 0

    def isatty(self) -> bool:
        return True

    def readline(self) -> str:
        self.asked += 1
        return self.answer + "\n"


@pytest.mark.parametrize(("answer", "deleted"), [("y", True), ("yes", True), ("n", False), ("", False)])
def test_prune_lists_what_it_will_delete_and_asks_in_a_terminal(
    populated, capsys, monkeypatch, answer, deleted
):
    record_full_run(populated["cache"], populated["keys"], populated["keys"][:2])
    terminal = _Terminal(answer)
    monkeypatch.setattr(sys, "stdin", terminal)
    code = cli("cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"])
    out = capsys.readouterr().out
    assert terminal.asked == 1
    assert "delete these 3 of 5 store entries? [y/N]" in out
    for key in populated["keys"][2:]:
        assert f"to delete: {key} ({JudgmentStore(populated['store']).path_for(key)})" in out
    if deleted:
        assert code == 0
        assert "deleted 3 of 5 store entries" in out
        assert len(JudgmentStore(populated["store"])) == 2
    else:
        assert code == 1
        assert "nothing deleted" in out
        assert len(JudgmentStore(populated["store"])) == 5


def test_prune_without_a_terminal_deletes_nothing_unless_told_yes(populated, capsys, monkeypatch):
    record_full_run(populated["cache"], populated["keys"], populated["keys"][:2])
    monkeypatch.setattr(sys, "stdin", __import__("io").StringIO("y\n"))  # piped input: not a terminal
    args = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*args) == EXIT_USAGE
    assert "pass --yes" in capsys.readouterr().err
    assert len(JudgmentStore(populated["store"])) == 5
    assert cli(*args, "-y") == 0
    assert len(JudgmentStore(populated["store"])) == 2


def test_prune_with_nothing_to_delete_says_so(populated, capsys):
    record_full_run(populated["cache"], populated["keys"], populated["keys"])
    assert cli("cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]) == 0
    assert "nothing to prune: the last full run used all 5 store entries" in capsys.readouterr().out


def test_prune_after_a_partial_run_deletes_nothing_and_says_why(populated, capsys):
    write_last_run(populated["cache"], unused=None, reason="tests failed or errored")
    args = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*args, "--yes") == 1
    assert "was partial: tests failed or errored; it cannot tell" in capsys.readouterr().err
    assert len(JudgmentStore(populated["store"])) == 5
    assert cli("cache", "stats", "--cache-dir", populated["cache"], "--store-dir", populated["store"]) == 0
    assert "unknown (the last run was partial: tests failed or errored)" in capsys.readouterr().out


def test_skipped_tests_keep_the_entries_about_their_questions_or_about_no_question():
    from pytest_ragmetrics._run import kept_for_skipped

    inputs = {
        "a": {"question": "Limit of plan 1?", "chunk": "Plan 1 has 1 GB."},
        "b": {"question": "Limit of plan 2?", "chunk": "Plan 2 has 2 GB."},
        "c": {"sentences": ["Plan 1 has 1 GB."]},  # an answer's claims: no question to tell by
        "d": None,  # unreadable
    }
    skipped = {"t.py::t[s1]": ["Limit of plan 1?"]}
    assert kept_for_skipped(inputs, skipped, inputs.get) == (
        {"a", "c", "d"},
        "1 skipped test may need them (t.py::t[s1])",
    )
    assert kept_for_skipped(inputs, {}, inputs.get) == (set(), None)
    kept, why = kept_for_skipped(inputs, {**skipped, "t.py::u": None}, inputs.get)
    assert kept == set(inputs) and why == "2 skipped tests with samples the run does not know (t.py::u)"


def test_prune_keeps_entries_stored_after_the_last_full_run(populated, capsys):
    """Only what the full run saw and did not use goes: not what a later run or a merge stored."""
    record_full_run(populated["cache"], populated["keys"][:3], populated["keys"][:2])
    args = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*args, "--yes") == 0
    assert "deleted 1 of 5 store entries" in capsys.readouterr().out
    assert JudgmentStore(populated["store"]).keys() == set(populated["keys"]) - {populated["keys"][2]}


def test_prune_refuses_without_a_record_of_a_full_run(populated, capsys):
    args = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*args) == 1
    assert "no record of a full test run" in capsys.readouterr().err
    assert len(JudgmentStore(populated["store"])) == 5


@pytest.mark.parametrize("args", [[], ["cache"], ["cache", "purge"], ["cache", "stats", "--bogus"]])
def test_usage_errors_exit_4_as_pytest_does(args, capsys):
    assert EXIT_USAGE == int(pytest.ExitCode.USAGE_ERROR) == 4
    assert main(args) == EXIT_USAGE
    assert "usage:" in capsys.readouterr().err


def test_a_cache_usage_error_is_a_message_and_exit_4_without_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "cache", "stats", "--bogus"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 4
    assert "unrecognized arguments: --bogus" in result.stderr
    assert "Traceback" not in result.stderr


def test_help_still_exits_0(capsys):
    assert main(["cache", "--help"]) == 0
    assert "stats" in capsys.readouterr().out


def test_default_cache_dir_follows_pytest_cache(tmp_path):
    assert default_cache_dir(cwd=tmp_path) == tmp_path / ".ragmetrics_cache"
    (tmp_path / ".pytest_cache").mkdir()
    assert default_cache_dir(cwd=tmp_path) == tmp_path / ".pytest_cache" / "d" / "ragmetrics"


def test_a_run_keeps_its_cache_where_its_cache_provider_says_and_a_script_in_the_working_directory(
    pytester: pytest.Pytester,
) -> None:
    """A run asks pytest's cache provider, and without one (``-p no:cacheprovider``) uses the rootdir,
    even where a ``.pytest_cache`` is there; a script has neither, and uses the working directory."""
    pytester.makeini("[pytest]\ncache_dir = elsewhere\n")
    assert default_cache_dir(pytester.parseconfigure()) == pytester.path / "elsewhere" / "d" / "ragmetrics"
    (pytester.path / ".pytest_cache").mkdir()
    off = pytester.parseconfigure("-p", "no:cacheprovider")
    assert default_cache_dir(off) == pytester.path / ".ragmetrics_cache"
    assert default_cache_dir() == Path(".ragmetrics_cache")


def test_module_runs_as_a_program(populated):
    result = subprocess.run(
        [sys.executable, "-m", "pytest_ragmetrics", "cache", "stats", "--cache-dir", str(populated["cache"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "entries: 5" in result.stdout


def test_after_prune_a_readwrite_run_restores_what_it_uses_so_replay_works(populated, capsys):
    """Prune after a partial record, then a full readwrite run served from the cache: CI must replay."""
    record_full_run(populated["cache"], populated["keys"], populated["keys"][:2])
    base = ["cache", "prune", "--cache-dir", populated["cache"], "--store-dir", populated["store"]]
    assert cli(*base, "--yes") == 0
    assert "deleted 3 of 5 store entries" in capsys.readouterr().out

    requests = [make_request(i, model="judge-a") for i in range(3)] + [
        make_request(i, model="judge-b") for i in range(2)
    ]
    readwrite = CachedJudge(
        lambda: pytest.fail("every answer is in the cache"),
        cache_dir=populated["cache"],
        store=JudgmentStore(populated["store"]),
    )
    kept = set(populated["keys"][:2])
    expected = ["store" if r.cache_key() in kept else "cache" for r in requests]
    assert [a.source for a in run_all(readwrite, requests)] == expected
    assert JudgmentStore(populated["store"]).keys() == set(populated["keys"])

    # CI: a fresh checkout has the committed store and no cache.
    replay = CachedJudge(
        lambda: pytest.fail("replay never judges"),
        mode="replay",
        cache_dir=None,
        store=JudgmentStore(populated["store"]),
    )
    assert [a.source for a in run_all(replay, requests)] == ["store"] * 5


def run_all(judge: CachedJudge, requests: list[Any]) -> list[Any]:
    async def go() -> list[Any]:
        try:
            return [await judge.judge(request) for request in requests]
        finally:
            await judge.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize(
    ("filename", "text"),
    [
        (
            "pyproject.toml",
            '[tool.pytest.ini_options]\nrag_store_dir = "judgments"\nrag_cache_dir = "cache"\n',
        ),
        ("pytest.ini", "[pytest]\nrag_store_dir = judgments\nrag_cache_dir = cache\n"),
        ("setup.cfg", "[tool:pytest]\nrag_store_dir = judgments\nrag_cache_dir = cache\n"),
    ],
)
def test_directories_come_from_the_pytest_configuration_here(populated, capsys, monkeypatch, filename, text):
    """`cache prune` with no flags prunes the store the test suite configures."""
    if filename == "pyproject.toml" and sys.version_info < (3, 11):
        pytest.importorskip("tomli")  # what pytest reads pyproject.toml with before Python 3.11
    root = populated["store"].parent
    (root / filename).write_text(text)
    monkeypatch.chdir(root)
    monkeypatch.delenv("RAGMETRICS_STORE_DIR", raising=False)
    monkeypatch.delenv("RAGMETRICS_CACHE_DIR", raising=False)
    record_full_run(populated["cache"], populated["keys"], populated["keys"][:1])
    assert cli("cache", "prune", "--dry-run") == 0
    assert "would delete 4 of 5 store entries" in capsys.readouterr().out


def test_environment_overrides_the_configuration_file(populated, capsys, monkeypatch, tmp_path):
    (populated["store"].parent / "pytest.ini").write_text("[pytest]\nrag_store_dir = elsewhere\n")
    monkeypatch.chdir(populated["store"].parent)
    monkeypatch.setenv("RAGMETRICS_STORE_DIR", str(populated["store"]))
    monkeypatch.setenv("RAGMETRICS_CACHE_DIR", str(populated["cache"]))
    assert cli("cache", "stats") == 0
    out = capsys.readouterr().out
    assert f"store: {populated['store']}\n  entries: 5" in out
    assert f"cache: {populated['cache']}\n  entries: 5" in out


@pytest.mark.parametrize(("value", "shown"), [("true", "true"), ('["a", "b"]', "['a', 'b']")])
@pytest.mark.parametrize(
    "command", [("cache", "stats"), ("cache", "clear"), ("report", "merge", "-o", "m.json", "a.json")]
)
def test_a_toml_boolean_for_a_directory_is_a_usage_error_naming_the_key(
    tmp_path, capsys, monkeypatch, command, value, shown
):
    """``rag_cache_dir = true`` in pyproject.toml was read as the directory ``True``, and
    ``rag_cache_dir = ["a", "b"]`` as the directory "a<newline>b", as a pytest run refuses to: the
    command line refuses them too, naming the key."""
    if sys.version_info < (3, 11):
        pytest.importorskip("tomli")
    (tmp_path / "pyproject.toml").write_text(f"[tool.pytest.ini_options]\nrag_cache_dir = {value}\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGMETRICS_CACHE_DIR", raising=False)
    assert cli(*command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err == f"error: rag_cache_dir must be text, in quotes; got {shown} (in pyproject.toml)\n"


@pytest.mark.parametrize(
    ("filename", "text", "problem"),
    [
        ("pyproject.toml", b'[tool.pytest.ini_options\nrag_store_dir = "j"\n', "cannot be read as TOML: "),
        ("pytest.ini", b"[pytest]\nrag_store_dir = j\n[pytest\n", "ini file: line 3 is neither"),
        ("setup.cfg", b"[tool:pytest]\nrag_store_dir = j\nrag_store_dir = k\n", "'rag_store_dir' is given twice"),
        ("tox.ini", "[pytest]\nrag_store_dir = j\n".encode("utf-16"), "is not UTF-8 text"),
    ],
    ids=["toml", "ini", "cfg", "utf-16"],
)
@pytest.mark.parametrize("command", [("cache", "clear"), ("report", "merge", "-o", "m.json", "a.json", "--gates")])
def test_a_configuration_file_that_cannot_be_read_is_a_usage_error_naming_it(
    tmp_path, capsys, monkeypatch, filename, text, problem, command
):
    """pytest refuses such a file; the command line read it as holding nothing, and cleared the
    default cache, or merged the reports with no gate at all."""
    if filename == "pyproject.toml" and sys.version_info < (3, 11):
        pytest.importorskip("tomli")
    (tmp_path / filename).write_bytes(text)
    monkeypatch.chdir(tmp_path)
    assert cli(*command) == EXIT_USAGE
    err = capsys.readouterr().err
    assert err.startswith(f"error: {filename} ") and problem in err and err.count("\n") == 1, err


def test_prune_without_any_store_says_how_to_name_one(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGMETRICS_STORE_DIR", raising=False)
    assert cli("cache", "prune") == EXIT_USAGE
    assert "pass --store-dir, or set rag_store_dir" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("command", "given"),
    [
        (("store", "rejudge", "--store-dir", "j", "--cache-d", "refresh"), "--cache-d refresh"),
        (("cache", "stats", "--js"), "--js"),
        (("cache", "prune", "--dry"), "--dry"),
    ],
)
def test_a_long_option_is_taken_only_whole(tmp_path, capsys, monkeypatch, command, given):
    """argparse took a prefix for the option it starts: ``store rejudge --cache-d refresh`` ran with
    a cache directory named ``refresh``. pytest refuses prefixes too."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "j").mkdir()
    assert cli(*command) == EXIT_USAGE
    assert f"unrecognized arguments: {given}" in capsys.readouterr().err
    assert not (tmp_path / "refresh").exists()


# --- store show ------------------------------------------------------------------------------------


def shown_records(out: str) -> list[Any]:
    decoder, records, at = json.JSONDecoder(), [], 0
    text = out.strip()
    while at < len(text):
        record, at = decoder.raw_decode(text, at)
        records.append(record)
        at += 1  # the newline between two objects
    return records


def test_store_show_prints_judgments_whole_by_key_or_prefix(populated, capsys):
    store = JudgmentStore(populated["store"])
    chunk = "Paris is the capital and the largest city of France, on the Seine."
    long = make_request(7, inputs={"question": "Where is the capital of France?", "chunk": chunk})
    store.put_many([(long, JudgeAnswer(choices=({"reason": "names it", "useful": True},), model="m"))])
    store.flush()
    assert chunk in store.path_for(long.cache_key()).read_text(encoding="utf-8")  # a diff shows it
    keys = sorted(store.keys())
    assert (
        cli("store", "show", long.cache_key()[:10].upper(), keys[1], "--store-dir", populated["store"]) == 0
    )
    shown = shown_records(capsys.readouterr().out)
    assert shown == [store.read_json(long.cache_key()), store.read_json(keys[1])]
    assert shown[0]["inputs"]["chunk"] == chunk
    # A prefix shared by several keys shows each of them.
    first = keys[0][0]
    assert cli("store", "show", first, "--store-dir", populated["store"]) == 0
    assert [r["key"] for r in shown_records(capsys.readouterr().out)] == [k for k in keys if k[0] == first]


def test_store_show_masks_a_key_the_judgment_quotes_as_a_report_does(populated, capsys):
    """A key pasted into a golden set's chunk is recorded with the judgment of that chunk; `store
    show` printed it whole (into a CI log, say), where a run's report masks it."""
    store = JudgmentStore(populated["store"])
    chunk = "Use the key sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123 to call the API."
    request = make_request(8, inputs={"question": "How do I call the API?", "chunk": chunk})
    store.put_many([(request, JudgeAnswer(choices=({"reason": "quotes sk-proj-AbCdEfGhIjKlMnOpQrStUvWxYz0123", "useful": True},), model="m"))])
    store.flush()
    assert cli("store", "show", request.cache_key(), "--store-dir", populated["store"]) == 0
    out = capsys.readouterr().out
    assert "sk-proj-AbCd" not in out
    [shown] = shown_records(out)
    assert shown["inputs"]["chunk"] == "Use the key sk-*** to call the API."
    assert shown["answer"]["choices"] == [{"reason": "quotes sk-***", "useful": True}]


def test_store_show_says_what_it_cannot_show(populated, capsys):
    assert cli("store", "show", "ffffffffffffffffff", "--store-dir", populated["store"]) == 1
    assert "no judgment in" in capsys.readouterr().err
    assert cli("store", "show", "not-a-key", "--store-dir", populated["store"]) == EXIT_USAGE
    assert "is not a judgment key" in capsys.readouterr().err


@pytest.mark.filterwarnings("default")
def test_a_damaged_store_line_is_one_warning_line_not_a_line_of_our_source(populated, capsys):
    """The commands showed a store's warning as Python does: the path of our module, the warning's
    class and a line of our source code after it."""
    shard = sorted(populated["store"].glob("??.jsonl"))[0]
    number = len(shard.read_text(encoding="utf-8").splitlines()) + 1
    with shard.open("a", encoding="utf-8") as handle:
        handle.write("# reviewed\n")
    assert cli("cache", "stats", "--cache-dir", populated["cache"], "--store-dir", populated["store"]) == 0
    err = capsys.readouterr().err
    assert err == (
        f"warning: the judgment store shard {shard} has a line that is not a judgment "
        f"(line {number}: '# reviewed'); it is skipped\n"
    )


def test_a_configuration_file_pytest_reads_is_read_with_its_names_as_written(tmp_path, capsys, monkeypatch):
    """pytest takes an ini name as written: ``Name`` and ``name`` in another tool's section are two
    names, not a file to refuse, and ``RAG_CACHE_DIR`` is not the setting ``rag_cache_dir``."""
    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nName = x\nname = y\n[tool:pytest]\nrag_cache_dir = kept\nRAG_CACHE_DIR = other\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("RAGMETRICS_CACHE_DIR", raising=False)
    assert cli("cache", "clear") == 0
    assert "kept" in capsys.readouterr().out
