"""Keep the front door true: the README's commands, table and examples match the code."""

import re
from pathlib import Path

import pytest

from pytest_ragmetrics.settings import OPTIONS

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(lang):
    return re.findall(rf"```{lang}\n(.*?)```", README, flags=re.S)


def test_ci_runs_exactly_the_readme_test_command():
    test_command = next(b for b in code_blocks("bash") if "python -m pytest" in b).strip()
    assert test_command == 'pip install -e ".[test]" && python -m pytest'
    ci = (ROOT / ".ci" / "run").read_text()
    assert 'python -m pip install --quiet -e ".[test]"' in ci
    assert ci.rstrip().splitlines()[-1] == "python -m pytest"


def test_readme_main_command_runs_the_example_project_report():
    assert any(
        b.strip() == "pip install -e . && cd example_project && pytest --rag-report"
        for b in code_blocks("bash")
    )


def test_readme_starts_from_a_virtual_environment():
    """PEP 668 systems refuse `pip install` outside one: the first command makes it."""
    assert code_blocks("bash")[0].strip() == "python3 -m venv .venv && . .venv/bin/activate"


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_configuration_table_lists_every_setting(option):
    row = next(
        (line for line in README.splitlines() if f"`{option.ini_name}`" in line and line.startswith("|")),
        None,
    )
    assert row is not None, f"README configuration table has no row for {option.ini_name}"
    assert f"`{option.env_name}`" in row
    assert (option.cli_name if option.cli else option.repeat) in row


def test_readme_hook_example_works(pytester):
    conftest = next(b for b in code_blocks("python") if b.startswith("# conftest.py\nfrom pytest_ragmetrics"))
    pytester.makeconftest(conftest)
    pytester.makepyfile("""
        from pytest_ragmetrics import RagSample, assert_metric
        from pytest_ragmetrics.engine import get_evaluator

        def test_custom_metric():
            sample = RagSample("q?", ["one", "two", "three"], id="s")
            assert_metric(sample, "chunk_economy") >= 0.3

        def test_custom_splitter():
            assert get_evaluator().splitter("First line\\nsecond line. Still second.") == [
                "First line", "second line. Still second."]
    """)
    result = pytester.runpytest("--rag-gate", "chunk_economy mean >= 0.3", "--rag-report")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*PASS*chunk_economy mean >= 0.3*"])
