"""The option table: every setting's command-line flag, ini key, environment variable, help and
parser. The pytest options, ini keys, environment variables and the README's configuration table all
come from :data:`OPTIONS`; :mod:`pytest_ragmetrics.settings` builds ``Settings`` from it.

Its own module, free of dataclasses, because every pytest run with the plugin installed registers the
options: a run that never uses the plugin imports this and not the settings machinery.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

CACHE_MODES = ("readwrite", "replay", "refresh", "off")
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text")
PROVIDERS = ("openai", "azure")
RELEVANCE_METHODS = ("graded", "sentence", "binary", "any")


# --- converters: str -> value, raising ConfigError with a message a person can act on ------------

#: The largest integer setting: far past any count a person means, and exact in JSON and SQLite.
_MAX_INT = 2**53


def _invalid(message: str) -> Exception:
    from .errors import ConfigError  # on first use: most runs never meet a bad value

    return ConfigError(message)


def _text(value: Any, name: str) -> str:
    text = "" if value is None else str(value).strip()
    if not text:
        raise _invalid(f"{name} must not be empty")
    return text


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _report_path(value: Any, name: str) -> str | None:
    """A path to write a report to: refused at the start when it is a directory, not after the run."""
    text = _optional_text(value, name)
    if text is not None and Path(text).is_dir():
        raise _invalid(f"{name} {text!r} is a directory: give the path of the file to write")
    return text


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def convert(value: Any, name: str) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise _invalid(f"{name} must be one of {', '.join(choices)}; got {value!r}")
        return text

    return convert


def _number(kind: type, low: float | None = None, optional: bool = False) -> Callable[[Any, str], Any]:
    def convert(value: Any, name: str) -> Any:
        if optional and (value is None or str(value).strip().lower() in ("", "none")):
            return None
        try:
            number = kind(str(value).strip()) if isinstance(value, str) else kind(value)
        except (TypeError, ValueError):
            word = "an integer" if kind is int else "a number"
            raise _invalid(f"{name} must be {word}; got {value!r}") from None
        # bools are ints; NaN never compares equal; an infinite temperature or price has no JSON form
        if isinstance(value, bool) or number != number or number in (float("inf"), float("-inf")):
            raise _invalid(f"{name} must be a finite number; got {value!r}")
        if low is not None and number < low:
            raise _invalid(f"{name} must be at least {low:g}; got {value!r}")
        if kind is int and number > _MAX_INT:
            raise _invalid(f"{name} must be at most {_MAX_INT}; got {value!r}")
        return number

    # Numbers are typed in the ini file where pytest can (see Option.ini_type).
    convert.ini_type = "int" if kind is int else "float"  # type: ignore[attr-defined]
    return convert


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise _invalid(f"{name} must be true or false; got {value!r}")


def _names(value: Any, name: str) -> tuple[str, ...]:
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else list(value)
    # Each name once, in order: a model listed twice would count twice in the average.
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


def _lines(value: Any, name: str) -> tuple[str, ...]:
    items = value.replace(";", "\n").splitlines() if isinstance(value, str) else list(value)
    return tuple(str(i).strip() for i in items if str(i).strip() and not str(i).strip().startswith("#"))


class Option:
    """One setting: where it can be given and how it is parsed.

    A plain class rather than a dataclass: this module is imported by every pytest run with the
    plugin installed, and generating a dataclass's methods costs more than the whole table.
    """

    __slots__ = ("choices", "cli", "convert", "env", "flag", "help", "ini_type", "metavar", "name", "repeat")

    def __init__(
        self,
        name: str,
        convert: Callable[[Any, str], Any],
        help: str,
        metavar: str | None = None,
        *,
        ini_type: str | None = None,
        flag: bool = False,
        cli: bool = True,
        env: bool = True,
        choices: tuple[str, ...] = (),
        repeat: str | None = None,
    ) -> None:
        self.name = name
        self.convert = convert
        self.help = help
        self.metavar = metavar
        #: The ini type pytest parses and shows in --help: string, bool, linelist, or for numbers int
        #: and float (pytest >= 8.4; older versions read them as strings). Default: the converter's,
        #: else string.
        self.ini_type: str | None = ini_type or getattr(convert, "ini_type", "string")
        self.flag = flag
        self.cli = cli
        self.env = env
        self.choices = choices
        #: For a list of lines: the command-line flag that gives one line and may be repeated.
        self.repeat = repeat

    def __repr__(self) -> str:
        return f"Option({self.name!r})"

    @property
    def cli_name(self) -> str:
        return "--rag-" + self.name.replace("_", "-")

    @property
    def ini_name(self) -> str:
        return "rag_" + self.name

    @property
    def env_name(self) -> str:
        return "RAGMETRICS_" + self.name.upper()


OPTIONS: tuple[Option, ...] = (
    Option(
        "report",
        _flag,
        "print the ragmetrics report (scores, verdicts, gates, judge cost) at the end",
        flag=True,
        ini_type="bool",
    ),
    Option("report_json", _report_path, "write the report as JSON to PATH", "PATH"),
    Option("report_md", _report_path, "write the report as Markdown to PATH", "PATH"),
    Option("report_html", _report_path, "write a self-contained HTML report to PATH", "PATH"),
    Option(
        "github_summary",
        _flag,
        "append the Markdown report to $GITHUB_STEP_SUMMARY when it is set",
        flag=True,
        ini_type="bool",
    ),
    Option("judge_model", _text, "judge model name; part of every cache key", "NAME"),
    Option(
        "judge_base_url",
        _optional_text,
        "base URL of an OpenAI-compatible server (default: the SDK's OPENAI_BASE_URL, else OpenAI)",
        "URL",
    ),
    Option(
        "judge_provider",
        _choice(PROVIDERS),
        "openai, or azure (Azure OpenAI, configured by the SDK's "
        "AZURE_OPENAI_* / OPENAI_API_VERSION variables)",
        "NAME",
        choices=PROVIDERS,
    ),
    Option(
        "relevance_models",
        _names,
        "comma-separated judge models whose graded relevance ratings are averaged (default: the judge model)",
        "NAMES",
    ),
    Option(
        "relevance_method",
        _choice(RELEVANCE_METHODS),
        "default method of assert_context_relevance",
        "METHOD",
        choices=RELEVANCE_METHODS,
    ),
    Option(
        "response_format",
        _choice(RESPONSE_FORMATS),
        "auto: json_schema (strict structured outputs), falling back to json_object, then text, when the "
        "server does not support it; or one of those three, with no fallback",
        "FORMAT",
        choices=RESPONSE_FORMATS,
    ),
    Option(
        "temperature",
        _number(float, 0.0),
        "judge temperature (graded relevance uses graded_temperature)",
        "FLOAT",
    ),
    Option("graded_temperature", _number(float, 0.0), "judge temperature for graded relevance", "FLOAT"),
    Option(
        "seed",
        _number(int, optional=True),
        "seed sent to the judge ('none' to send none)",
        "INT",
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "judge_n",
        _number(int, 1),
        "judge samples per judgment (self-consistency: majority vote, mean rating)",
        "N",
    ),
    Option("concurrency", _number(int, 1), "judge requests in flight at once", "N"),
    Option(
        "max_judge_calls",
        _number(int, 0, optional=True),
        "send at most N requests to the judge in the run (retries and re-asks count; all xdist workers "
        "together); past it, a score that needs the judge fails and what was judged is kept",
        "N",
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "max_judge_tokens",
        _number(int, 0, optional=True),
        "send no more requests to the judge once its answers in the run used N tokens (prompt and "
        "completion; all xdist workers together; requests in flight may pass it by their own size)",
        "N",
        ini_type="string",  # an integer or the word none
    ),
    Option("timeout", _number(float, 0.001), "seconds before one judge request times out", "SECONDS"),
    Option("max_retries", _number(int, 0), "retries on 429, 5xx, timeouts and connection errors", "N"),
    Option("max_reasks", _number(int, 0), "re-asks when an answer does not fit the schema", "N"),
    Option(
        "judge_max_tokens",
        _number(int, 1, optional=True),
        "completion limit of every judge answer, in tokens (default: sized to the answer's schema); an "
        "answer cut off by it is re-asked, never recorded",
        "N",
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "cache",
        _choice(CACHE_MODES),
        "readwrite: use recorded judgments, judge the rest; replay: never "
        "call the judge; refresh: judge everything again; off: judge, store nothing",
        "MODE",
        choices=CACHE_MODES,
    ),
    Option(
        "cache_dir",
        _optional_text,
        "local judgment cache (default: ragmetrics in pytest's cache directory)",
        "PATH",
    ),
    Option(
        "store_dir",
        _optional_text,
        "judgment store to commit: one JSON line per judgment, in 256 shards (off by default)",
        "PATH",
    ),
    Option(
        "batch",
        _optional_text,
        "call no judge: write each judgment that no store or cache holds to PATH, a batch input file "
        "(OpenAI format) to submit with `python -m pytest_ragmetrics store batch submit PATH`; the "
        "tests that need one are skipped",
        "PATH",
    ),
    Option(
        "price_input",
        _number(float, 0.0, optional=True),
        "USD per million prompt tokens, for the cost figure",
        "USD",
    ),
    Option("price_output", _number(float, 0.0, optional=True), "USD per million completion tokens", "USD"),
    Option(
        "gates",
        _lines,
        "aggregate gates, one per line, e.g. 'context_recall mean >= 0.8' (CLI: "
        "repeatable --rag-gate; env: separated by ';')",
        "GATE",
        ini_type="linelist",
        cli=False,
        repeat="--rag-gate",
    ),
    Option(
        "baseline",
        _optional_text,
        "compare the run with this baseline: a JSON report saved with --rag-save-baseline (or "
        "--rag-report-json)",
        "PATH",
    ),
    Option(
        "save_baseline",
        _optional_text,
        "save this run as a baseline to PATH: the JSON report without its judge counters",
        "PATH",
    ),
    Option(
        "regression_gates",
        _lines,
        "regression gates against the baseline, one per line, e.g. 'context_precision mean drop <= 0.02 "
        "at p < 0.05' (CLI: repeatable --rag-regression-gate; env: separated by ';')",
        "GATE",
        ini_type="linelist",
        cli=False,
        repeat="--rag-regression-gate",
    ),
    Option(
        "allow_inconclusive",
        _flag,
        "let a regression gate pass when its drop (or rise) is beyond the tolerance but the one-sided "
        "test cannot call it significant (inconclusive: fails by default)",
        flag=True,
    ),
    Option(
        "allow_mixed_baseline",
        _flag,
        "compare with a baseline scored by another judge model or prompt version (refused by "
        "default; the differences are named either way)",
        flag=True,
    ),
    Option(
        "judge_check",
        _optional_text,
        "labelled set (JSONL) to check the judge against at the end of the run: agreement per judgment kind",
        "PATH",
    ),
    Option(
        "judge_controls",
        _number(int, 0),
        "judge N negative controls (a question with a chunk retrieved for another sample) and N positive "
        "ones (a sample's own reference as the chunk) at the end of the run, drawn from the samples it "
        "scored, and report the shares judged useful / relevant / needed; floors like "
        "'context_precision controls <= 0.2' or 'context_precision positive_controls >= 0.8' go in "
        "rag_judge_agreement",
        "N",
    ),
    Option(
        "judge_agreement",
        _lines,
        "judge agreement floors, one per line, e.g. 'context_precision kappa >= 0.6'; a judge below one "
        "fails the run (CLI: repeatable; env: separated by ';')",
        "FLOOR",
        ini_type="linelist",
        cli=False,
        repeat="--rag-judge-agreement",
    ),
)

OPTIONS_BY_NAME: Mapping[str, Option] = {o.name: o for o in OPTIONS}
# Settings whose None means "not set" (the rest must hold a value).
_OPTIONAL = frozenset(
    {
        "judge_base_url",
        "cache_dir",
        "store_dir",
        "batch",
        "price_input",
        "price_output",
        "seed",
        "report_json",
        "report_md",
        "report_html",
        "baseline",
        "save_baseline",
        "judge_check",
        "judge_max_tokens",
        "max_judge_calls",
        "max_judge_tokens",
    }
)


def mentions_ini_keys(path: Path) -> bool:
    """The configuration file ``path`` may hold a ``rag_*`` key: it has the text ``rag_`` at all, in
    any case (a quick look before parsing it for them)."""
    try:
        return b"rag_" in path.read_bytes().lower()
    except OSError:
        return False
