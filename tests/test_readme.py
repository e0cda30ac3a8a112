"""Keep the front door true: the README's commands match CI, and it stays short.

Its examples run and its sample output is checked in tests/test_docs.py, with the documentation's.
"""

import re
import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest depends on tomli there (absent, and unknown to mypy, on a newer Python)
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def code_blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}[^\n]*\n(.*?)```", README, flags=re.S)


def test_readme_is_a_front_door_not_a_manual():
    assert len(README.splitlines()) <= 300


def test_ci_runs_exactly_the_readme_test_command():
    test_command = next(b for b in code_blocks("bash") if "python -m pytest" in b).strip()
    assert test_command == 'pip install -e ".[test]" && python -m pytest -n 2'
    ci = (ROOT / ".ci" / "run").read_text()
    install = re.search(r'python -m pip install --quiet -e "\.\[([a-z,]+)\]"', ci)
    assert install and "test" in install.group(1).split(",")
    assert ci.rstrip().splitlines()[-1] == "python -m pytest -n 2"


def test_contributing_gives_exactly_the_lint_commands_ci_runs():
    contributing = (ROOT / "docs" / "contributing.md").read_text(encoding="utf-8")
    block = re.search(r"## Lint\n.*?```bash\n(.*?)```", contributing, flags=re.S)
    assert block, "docs/contributing.md has no Lint section with a bash block"
    documented = [line for line in block.group(1).splitlines() if line.startswith("python -m")]
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    assert documented == [line for line in ci if line.startswith(("python -m ruff", "python -m mypy"))]
    assert "python -m mypy --strict --allow-untyped-defs --check-untyped-defs tests" in documented


def test_ci_lints_the_package_the_tests_and_the_benchmark_scripts():
    """The benchmark scripts are the project's figures: they are held to the package's lint rules."""
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    (ruff,) = [line for line in ci if line.startswith("python -m ruff check ")]
    assert {"pytest_ragmetrics", "tests", "benchmarks"} <= set(ruff.split()[4:])


def test_readme_main_command_runs_the_example_project_report():
    assert any(
        b.strip() == "pip install -e . && cd example_project && pytest --rag-report" for b in code_blocks("bash")
    )


def test_readme_starts_from_a_virtual_environment_after_the_install_lines():
    """PEP 668 systems refuse `pip install` outside one: the first command on a clone makes it."""
    clone_commands = [b.strip() for b in code_blocks("bash") if "pip install -e" in b or "venv" in b]
    assert clone_commands[0] == "python3 -m venv .venv && . .venv/bin/activate"


def test_readme_says_how_to_install_a_release_and_from_git_until_then():
    blocks = [b.strip() for b in code_blocks("bash")]
    assert "pip install pytest-ragmetrics" in blocks
    assert 'pip install "pytest-ragmetrics @ git+https://github.com/pytest-ragmetrics/pytest-ragmetrics"' in blocks


def test_readme_links_to_every_documentation_page_it_names():
    for page in re.findall(r"/blob/main/docs/([a-z-]+\.md)", README):
        assert (ROOT / "docs" / page).is_file(), page


def test_package_summary_names_both_halves_the_readme_tests():
    """The one line the package index shows says what the README's first line says: retrieval and answers."""
    assert "the retrieval half and the answer" in README.splitlines()[2]
    summary = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["description"]
    assert "retrieval half" not in summary
    for metric in ("context precision", "faithfulness", "answer correctness"):
        assert metric in summary, metric
