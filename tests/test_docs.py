"""The documentation cannot drift: its examples run, and what it names exists.

Every fenced ``python`` block of README.md, example_project/README.md and docs/*.md runs. A block titled with a path
(```` ```python title="tests/test_x.py" ````) is a file of a small project, one per page, that pytest
runs; titled blocks of other languages (``golden.jsonl``, ``pyproject.toml``) join that project.
Untitled ``python`` blocks run in order as one script. Both see ``myapp.retrieve`` (below) and a
local fake judge that gives the most positive answer. A block preceded by
``<!-- not run: why -->`` is skipped. Sample output preceded by ``<!-- output of: COMMAND (in
example_project) -->`` must be what the example project prints today, times aside.
"""

from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from pytest_env import SPARE_PLUGINS

from pytest_ragmetrics.options import OPTIONS
from pytest_ragmetrics.testing import FakeJudgeServer

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: pytest depends on tomli there (absent, and unknown to mypy, on a newer Python)
    import tomli as tomllib  # type: ignore[import-not-found, unused-ignore]

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "example_project" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE = ROOT / "example_project"

MYAPP = '''
"""A stand-in retriever for the documentation's examples: the chunks for a question, best first."""

CHUNKS = {
    "france": ["France is a country in Western Europe.", "Paris is the capital of France."],
    "eiffel": ["Koechlin and Nouguier drew the first plans of the Eiffel Tower.", "Paris has many museums."],
}


def retrieve(question):
    key = "eiffel" if "eiffel" in question.lower() else "france"
    return list(CHUNKS[key])
'''


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    lang: str
    title: str | None
    code: str
    skip: str | None  # the reason given in <!-- not run: ... -->
    output_of: str | None  # the command given in <!-- output of: ... -->

    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


_FENCE = re.compile(r"^```(\w*)(.*)$")


def blocks(page: Path) -> list[Block]:
    found: list[Block] = []
    lines = page.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        start, lang, rest = i, match.group(1), match.group(2)
        title = re.search(r'title="([^"]+)"', rest)
        end = next(j for j in range(i + 1, len(lines)) if lines[j].rstrip() == "```")
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        skip = re.fullmatch(r"<!-- not run: (.+) -->", before)
        output = re.fullmatch(r"<!-- output of: (.+) -->", before)
        found.append(
            Block(
                page,
                start + 1,
                lang,
                title.group(1) if title else None,
                "\n".join(lines[start + 1 : end]) + "\n",
                skip.group(1) if skip else None,
                output.group(1) if output else None,
            )
        )
        i = end + 1
    return found


ALL = {page: blocks(page) for page in PAGES}


def page_id(page: Path) -> str:
    return str(page.relative_to(ROOT))


def project_pages() -> list[Path]:
    return [p for p, bs in ALL.items() if any(b.lang == "python" and b.title and not b.skip for b in bs)]


def script_pages() -> list[Path]:
    return [p for p, bs in ALL.items() if any(b.lang == "python" and not b.title and not b.skip for b in bs)]


@pytest.fixture(scope="module")
def judge_server():
    with FakeJudgeServer() as server:
        yield server


@pytest.fixture
def docs_env(monkeypatch, judge_server):
    """The environment of an example: a fake judge and no settings of the outer run."""
    for name in list(os.environ):
        if name.startswith(("RAGMETRICS_", "OPENAI_", "AZURE_OPENAI")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("OPENAI_API_KEY", "unused")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("PYTEST_ADDOPTS", SPARE_PLUGINS)


def write_project(page: Path, target: Path) -> list[Block]:
    (target / "myapp.py").write_text(textwrap.dedent(MYAPP), encoding="utf-8")
    titled = [(b.title, b) for b in ALL[page] if b.title and not b.skip]
    titles = [title for title, _ in titled]
    duplicates = sorted({t for t in titles if titles.count(t) > 1})
    assert not duplicates, f"{page_id(page)}: several blocks titled {duplicates}"
    for title, block in titled:
        path = target / title
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code, encoding="utf-8")
    return [block for _, block in titled]


def test_every_python_block_runs_or_says_why_not():
    for found in ALL.values():
        for block in found:
            if block.lang == "" and not block.output_of:
                pytest.fail(f"{block.where()}: a fenced block without a language (use text for output)")


@pytest.mark.parametrize("page", project_pages(), ids=page_id)
def test_page_project_passes(page, pytester, docs_env):
    """The page's titled files, as a project: pytest passes it with the fake judge."""
    titled = write_project(page, pytester.path)
    tests = sum(len(re.findall(r"^def test_", b.code, flags=re.M)) for b in titled if b.lang == "python")
    assert tests, f"{page_id(page)}: titled python blocks but no test function"
    pytester.syspathinsert()  # myapp
    result = pytester.runpytest("-p", "no:cacheprovider", "-W", "error::pytest_ragmetrics.RagMetricsWarning")
    outcomes = result.parseoutcomes()
    assert result.ret == 0, f"{page_id(page)}: its example project fails\n" + str(result.stdout)
    assert outcomes.get("passed", 0) >= tests


@pytest.mark.parametrize("page", script_pages(), ids=page_id)
def test_page_script_runs(page, tmp_path, docs_env):
    """The page's untitled python blocks, in order, as one script."""
    write_project(page, tmp_path)
    script, origin = [], []  # origin[i]: the doc line of script line i + 1
    for block in ALL[page]:
        if block.lang != "python" or block.title or block.skip:
            continue
        for offset, line in enumerate(block.code.splitlines()):
            script.append(line)
            origin.append(f"{page_id(page)}:{block.line + 1 + offset}")
    (tmp_path / "docs_script.py").write_text("\n".join(script) + "\n", encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path), *sys.path]))
    out = subprocess.run(
        [sys.executable, "docs_script.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    if out.returncode:
        lines = [int(n) for n in re.findall(r'File ".*docs_script\.py", line (\d+)', out.stderr)]
        where = origin[lines[-1] - 1] if lines else page_id(page)
        pytest.fail(f"the example at {where} fails:\n{out.stderr[-3000:]}")


# --- what the pages name exists -------------------------------------------------------------------

CLI_FLAGS = {o.cli_name for o in OPTIONS if o.cli} | {o.repeat for o in OPTIONS if o.repeat}
INI_NAMES = {o.ini_name for o in OPTIONS}
ENV_NAMES = {o.env_name for o in OPTIONS}
FIXTURES = {"rag_sample", "rag_evaluator"}


CHANGELOG = ROOT / "CHANGELOG.md"


def page_text(page: Path) -> str:
    """A page's text; of the changelog, what the next release will say (its [Unreleased] section),
    less the misspelt names it quotes as examples (`rag_x`: did you mean ...)."""
    text = page.read_text(encoding="utf-8")
    if page == CHANGELOG:
        unreleased = text.split("\n## [")[1]
        assert unreleased.startswith("Unreleased]"), "CHANGELOG.md: no [Unreleased] section on top"
        return re.sub(r"`[^`]+`: did\s+you\s+mean", "", unreleased)
    return text


@pytest.mark.parametrize("page", [*PAGES, CHANGELOG], ids=page_id)
def test_every_named_setting_exists(page):
    text = page_text(page)
    unknown = sorted(
        {f for f in re.findall(r"--rag-[a-z-]*[a-z]", text) if f not in CLI_FLAGS}
        | {n for n in re.findall(r"\brag_[a-z_]*[a-z]", text) if n not in INI_NAMES | FIXTURES}
        | {n for n in re.findall(r"\bRAGMETRICS_[A-Z_]*[A-Z]", text) if n not in ENV_NAMES}
    )
    assert not unknown, f"{page_id(page)} names settings that do not exist: {unknown}"


@pytest.mark.parametrize("page", PAGES, ids=page_id)
def test_toml_blocks_parse_and_name_real_settings(page):
    for block in ALL[page]:
        if block.lang != "toml":
            continue
        data = tomllib.loads(block.code)
        ini = data.get("tool", {}).get("pytest", {}).get("ini_options", {})
        unknown = sorted(k for k in ini if k.startswith("rag_") and k not in INI_NAMES)
        assert not unknown, f"{block.where()}: unknown settings {unknown}"


def cli_parsers() -> dict[tuple[str, str], argparse.ArgumentParser]:
    """The parser of every (command, action) of ``python -m pytest_ragmetrics``."""
    from pytest_ragmetrics.__main__ import _parser

    def subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return action.choices

    return {
        (command, action): leaf
        for command, sub in subparsers(_parser()).items()
        for action, leaf in subparsers(sub).items()
    }


def cli_commands() -> dict[tuple[str, str], set[str]]:
    """Every (command, action) of ``python -m pytest_ragmetrics`` and its option flags."""
    return {key: {s for a in leaf._actions for s in a.option_strings} for key, leaf in cli_parsers().items()}


@pytest.mark.parametrize("page", [*PAGES, CHANGELOG], ids=page_id)
def test_every_named_command_exists(page):
    commands = cli_commands()
    named = re.findall(
        r"(?:python -m pytest_ragmetrics|^pytest-ragmetrics|`pytest-ragmetrics) ([a-z]+) ([a-z]+)", page_text(page), re.M
    )
    unknown = sorted({f"{c} {a}" for c, a in named if (c, a) not in commands})
    assert not unknown, f"{page_id(page)} names commands that do not exist: {unknown}"


def test_cli_reference_documents_only_real_commands_and_options():
    commands = cli_commands()
    text = page_text(ROOT / "docs" / "cli.md")
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    assert sections
    for section in sections:
        heading = re.match(r"`([a-z]+) ([a-z]+)", section)
        assert heading, f"docs/cli.md: a section does not start with `command action`: {section[:60]!r}"
        command, action = heading.groups()
        assert (command, action) in commands, f"docs/cli.md documents `{command} {action}`, which does not exist"
        rows = [line for line in section.splitlines() if line.startswith("| `-")]
        flags = {flag for row in rows for flag in re.findall(r"`(--[a-z-]+|-[a-z])\b", row.split("|")[1])}
        shared = {"--cache-dir", "--store-dir"}
        assert flags <= commands[(command, action)] | shared, (command, action, flags - commands[(command, action)])
        named = set(re.findall(r"`(--[a-z-]+|-[a-z])\b", section))  # in a row or in the prose
        undocumented = commands[(command, action)] - named - shared - {"-h", "--help"}
        assert not undocumented, f"docs/cli.md: `{command} {action}` has no row for {sorted(undocumented)}"


def test_cli_reference_gives_each_fixed_default_the_command_has():
    """A default the parser holds (``--sample 100``) is the one its row of docs/cli.md names."""
    sections = {
        tuple(section.split("`")[1].split()[:2]): section
        for section in re.split(r"^### ", page_text(ROOT / "docs" / "cli.md"), flags=re.M)[1:]
    }
    checked = 0
    for (command, action), leaf in cli_parsers().items():
        for option in leaf._actions:
            if not option.option_strings or option.default in (None, argparse.SUPPRESS):
                continue
            if isinstance(option.default, bool):
                continue
            flag = option.option_strings[0]
            rows = [line for line in sections[(command, action)].splitlines() if line.startswith(f"| `{flag} ")]
            assert len(rows) == 1, f"docs/cli.md: `{command} {action}` has no row for {flag}"
            default = str(option.default)
            assert f"default {default})" in rows[0] or f"default `{default}`" in rows[0], (
                f"docs/cli.md: `{command} {action} {flag}` defaults to {default}, its row says otherwise: {rows[0]}"
            )
            checked += 1
    assert checked


def test_every_documented_command_line_parses(capsys):
    """Each ``python -m pytest_ragmetrics ...`` line of a shell or CI block is one the command accepts."""
    from pytest_ragmetrics.__main__ import _parser

    refused = []
    for found in ALL.values():
        for block in found:
            if block.lang not in ("bash", "yaml"):
                continue
            for line in block.code.replace("\\\n", " ").splitlines():
                match = re.search(r"(?:python -m pytest_ragmetrics|^pytest-ragmetrics) (.*)", line)
                if not match:
                    continue
                try:
                    _parser().parse_args(shlex.split(match.group(1), comments=True))
                except SystemExit:
                    refused.append(f"{block.where()}: {line.strip()}\n{capsys.readouterr().err}")
    assert not refused, "\n".join(refused)


def test_marker_help_names_every_word_the_marker_takes(pytester):
    """``pytest --markers`` shows each keyword of ``@pytest.mark.ragmetrics`` that is not a setting."""
    from pytest_ragmetrics.settings import MARKER_WORDS

    result = pytester.runpytest("--markers", "-p", "no:cacheprovider")
    line = next(line for line in result.outlines if line.startswith("@pytest.mark.ragmetrics("))
    missing = [word for word in MARKER_WORDS if f"{word}=" not in line]
    assert not missing, f"the ragmetrics marker's help leaves out {missing}: {line}"


def test_every_hook_has_the_docstring_its_reference_is_built_from():
    from pytest_ragmetrics import hookspecs

    hooks = [name for name in vars(hookspecs) if name.startswith("pytest_ragmetrics_")]
    assert hooks
    for name in hooks:
        assert (getattr(hookspecs, name).__doc__ or "").strip(), f"hookspec {name} has no docstring"
    assert '::: pytest_ragmetrics.hookspecs' in page_text(ROOT / "docs" / "extending.md")


# --- the options table ------------------------------------------------------------------------------

CONFIGURATION = ROOT / "docs" / "configuration.md"


def option_rows() -> list[str]:
    return [line for line in page_text(CONFIGURATION).splitlines() if line.startswith("| `--rag-")]


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_options_table_has_one_row_per_option(option):
    rows = [row for row in option_rows() if f"| `{option.ini_name}` |" in row]
    assert len(rows) == 1, f"docs/configuration.md has {len(rows)} rows for {option.ini_name}"
    cells = [c.strip() for c in rows[0].strip("|").split("|")]
    flag = option.cli_name if option.cli else option.repeat
    assert cells[0].startswith(f"`{flag}"), cells[0]
    assert cells[2] == f"`{option.env_name}`"


#: The options table's default of a setting that is unset by default but falls back to something.
UNSET_DEFAULTS = {"cache_dir": "`.pytest_cache/d/ragmetrics`", "judge_max_tokens": "sized to the answer's schema"}


@pytest.mark.parametrize("option", OPTIONS, ids=lambda o: o.name)
def test_options_table_gives_the_default_a_setting_has(option):
    """The default column is what ``Settings()`` holds: `32`, `readwrite`, off for a flag, and — for
    unset (``None``, no items), unless the setting falls back to something a user should know."""
    from pytest_ragmetrics.settings import Settings

    row = next(row for row in option_rows() if f"| `{option.ini_name}` |" in row)
    documented = [c.strip() for c in row.strip("|").split("|")][3]
    default = getattr(Settings(), option.name)
    if isinstance(default, bool):
        assert documented == ("on" if default else "off"), row
    elif default is not None and default != ():
        assert documented == f"`{default}`", row
    else:
        assert documented == UNSET_DEFAULTS.get(option.name, "—"), row


def test_options_table_has_no_row_for_a_missing_option():
    named = []
    for row in option_rows():
        ini = re.search(r"\| `(rag_[a-z_]+)` \|", row)
        assert ini, f"a row of the options table names no rag_* ini key: {row}"
        named.append(ini.group(1))
    assert sorted(named) == sorted(o.ini_name for o in OPTIONS)


# --- sample output -----------------------------------------------------------------------------------


def normalize(line: str) -> str:
    """A line with its wall-clock-shaped text made alike: times of any length, pytest's ``(0:01:15)``,
    and the ``=`` padding of a summary line, which is one shorter for each digit a time gains."""
    line = re.sub(r"\d+\.\d+s( \(\d+:\d\d:\d\d\))?(?=\W|$)", "N.NNs", line.rstrip())
    return re.sub(r"^=+ (.*) =+$", r"== \1 ==", line)


@pytest.mark.parametrize(
    "slow",
    [
        "========================= 4 passed in 10.02s ==========================",
        "======================= 4 passed in 75.50s (0:01:15) ========================",
    ],
)
def test_documented_output_matches_runs_of_any_length(slow):
    """A run of 10 s or more on a slow machine prints the same documented line."""
    fast = "========================== 4 passed in 9.87s =========================="
    assert normalize(slow) == normalize(fast) == "== 4 passed in N.NNs =="
    assert normalize("  0 errors, 123.45s judging") == normalize("  0 errors, 0.00s judging")


# Lines that depend on the machine and the plugins installed, not on the project.
_HEADER = ("platform ", "rootdir:", "configfile:", "plugins:", "cachedir:", "testpaths:", "benchmark:")


def check_output(doc: str, real: str) -> None:
    """Each line of ``doc`` is a line of ``real``, in order; a line ``...`` stands for lines left out."""
    real_lines = [normalize(line) for line in real.splitlines()]
    position = 0
    for wanted in doc.splitlines():
        if wanted.strip() == "..." or wanted.startswith("...  ") or wanted.startswith(_HEADER):
            continue
        wanted = normalize(wanted)
        try:
            position = real_lines.index(wanted, position) + 1
        except ValueError:
            pytest.fail(f"this line of the documented output is not printed (in this order):\n{wanted}\n\n{real}")


@pytest.fixture(scope="module")
def example_outputs(tmp_path_factory):
    runs: dict[str, str] = {}

    def run(command: str) -> str:
        if command not in runs:
            target = tmp_path_factory.mktemp("example") / "example_project"
            shutil.copytree(EXAMPLE, target, ignore=shutil.ignore_patterns(".pytest_cache", "__pycache__"))
            env = {
                k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "AZURE_OPENAI", "RAGMETRICS_"))
            }
            env["PYTEST_ADDOPTS"] = SPARE_PLUGINS
            env["COLUMNS"] = "100"
            argv = shlex.split(command)
            while "=" in argv[0]:  # VARIABLE=value pytest ...
                name, value = argv.pop(0).split("=", 1)
                env[name] = value
            assert argv[0] == "pytest"
            out = subprocess.run(
                [sys.executable, "-m", "pytest", *argv[1:]],
                cwd=target,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            runs[command] = out.stdout
        return runs[command]

    return run


OUTPUTS = [b for bs in ALL.values() for b in bs if b.output_of]


@pytest.mark.parametrize("block", OUTPUTS, ids=Block.where)
def test_documented_output_is_what_the_example_project_prints(block, example_outputs):
    command = re.fullmatch(r"(.+) \(in example_project\)", block.output_of)
    assert command, f"{block.where()}: say `<!-- output of: COMMAND (in example_project) -->`"
    check_output(block.code, example_outputs(command.group(1)))
