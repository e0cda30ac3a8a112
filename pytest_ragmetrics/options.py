"""The option table: every setting's command-line flag, ini key, environment variable, help and
parser. The pytest options, ini keys, environment variables and the README's configuration table all
come from :data:`OPTIONS`; :mod:`pytest_ragmetrics.settings` builds ``Settings`` from it.

Its own module, free of dataclasses, because every pytest run with the plugin installed registers the
options: a run that never uses the plugin imports this and not the settings machinery.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

CACHE_MODES = ("readwrite", "replay", "refresh", "off")
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text")
PROVIDERS = ("openai", "azure")
RELEVANCE_METHODS = ("graded", "sentence", "binary", "any")


class Option:
    """One setting: where it can be given and how it is parsed.

    ``kind`` names its converter (see :mod:`pytest_ragmetrics._convert`, loaded when settings are
    resolved): ``text``, ``optional_text``, ``report_path``, ``batch_path``, ``flag``, ``names``, ``lines``,
    ``choice`` (one of ``choices``), or ``int`` / ``float`` (at least ``low``, at most ``high``; the
    word none is ``None`` for a setting whose ``None`` means "not set"; an empty value is refused).

    A plain class rather than a dataclass: this module is imported by every pytest run with the
    plugin installed, and generating a dataclass's methods costs more than the whole table.
    """

    __slots__ = (
        "_convert",
        "choices",
        "cli",
        "env",
        "flag",
        "help",
        "high",
        "ini_type",
        "kind",
        "low",
        "metavar",
        "name",
        "repeat",
    )

    def __init__(
        self,
        name: str,
        kind: str,
        help: str,
        metavar: str | None = None,
        *,
        low: float | None = None,
        high: float | None = None,
        ini_type: str | None = None,
        flag: bool = False,
        cli: bool = True,
        env: bool = True,
        choices: tuple[str, ...] = (),
        repeat: str | None = None,
    ) -> None:
        self.name = name
        self.kind = kind
        self.low = low
        self.high = high
        self._convert: Callable[[Any, str], Any] | None = None
        self.help = help
        self.metavar = metavar
        #: The ini type pytest parses and shows in --help: string, bool, linelist, or for numbers int
        #: and float (pytest >= 8.4; older versions read them as strings). Default: a number's kind,
        #: else string.
        self.ini_type: str | None = ini_type or (kind if kind in ("int", "float") else "string")
        self.flag = flag
        self.cli = cli
        self.env = env
        self.choices = choices
        #: For a list of lines: the command-line flag that gives one line and may be repeated.
        self.repeat = repeat

    @property
    def convert(self) -> Callable[[Any, str], Any]:
        """``convert(value, name)``: the setting's value, or a ``ConfigError`` naming it as ``name``."""
        convert = self._convert
        if convert is None:
            from ._convert import converter

            convert = self._convert = converter(
                self.kind, self.choices, self.low, self.name in _OPTIONAL, self.high
            )
        return convert

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
        "flag",
        "print the ragmetrics report (scores, verdicts, gates, judge cost) at the end",
        flag=True,
        ini_type="bool",
    ),
    Option("report_json", "report_path", "write the report as JSON to PATH", "PATH"),
    Option("report_md", "report_path", "write the report as Markdown to PATH", "PATH"),
    Option("report_html", "report_path", "write a self-contained HTML report to PATH", "PATH"),
    Option(
        "github_summary",
        "flag",
        "append the Markdown report to $GITHUB_STEP_SUMMARY when it is set",
        flag=True,
        ini_type="bool",
    ),
    Option("judge_model", "text", "judge model name; part of every cache key", "NAME"),
    Option(
        "judge_base_url",
        "optional_text",
        "base URL of an OpenAI-compatible server (default: the SDK's OPENAI_BASE_URL, else OpenAI)",
        "URL",
    ),
    Option(
        "judge_provider",
        "choice",
        "openai, or azure (Azure OpenAI, configured by the SDK's "
        "AZURE_OPENAI_* / OPENAI_API_VERSION variables)",
        "NAME",
        choices=PROVIDERS,
    ),
    Option(
        "relevance_models",
        "names",
        "comma-separated judge models whose graded relevance ratings are averaged (default: the judge model)",
        "NAMES",
        # A list in pyproject.toml (["gpt-4o", "gpt-4o-mini"]) is a list to pytest, not a string.
        ini_type="linelist",
    ),
    Option(
        "relevance_method",
        "choice",
        "default method of assert_context_relevance",
        "METHOD",
        choices=RELEVANCE_METHODS,
    ),
    Option(
        "response_format",
        "choice",
        "auto: json_schema (strict structured outputs), falling back to json_object, then text, when the "
        "server does not support it; or one of those three, with no fallback",
        "FORMAT",
        choices=RESPONSE_FORMATS,
    ),
    Option(
        "temperature",
        "float",
        "judge temperature (graded relevance uses graded_temperature)",
        "FLOAT",
        low=0.0,
    ),
    Option("graded_temperature", "float", "judge temperature for graded relevance", "FLOAT", low=0.0),
    Option(
        "seed",
        "int",
        "seed sent to the judge ('none' to send none)",
        "INT",
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "judge_n",
        "int",
        "judge samples per judgment, 1 to 128 as OpenAI takes (self-consistency: majority vote, mean "
        "rating)",
        "N",
        low=1,
        high=128,
    ),
    Option("concurrency", "int", "judge requests in flight at once", "N", low=1),
    Option(
        "max_judge_calls",
        "int",
        "send at most N requests to the judge in the run (retries and re-asks count; all xdist workers "
        "together); past it, a score that needs the judge fails and what was judged is kept",
        "N",
        low=0,
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "max_judge_tokens",
        "int",
        "send no more requests to the judge once its answers in the run used N tokens (prompt and "
        "completion; all xdist workers together; requests in flight may pass it by their own size)",
        "N",
        low=0,
        ini_type="string",  # an integer or the word none
    ),
    Option("timeout", "float", "seconds before one judge request times out", "SECONDS", low=0.001),
    Option("max_retries", "int", "retries on 429, 5xx, timeouts and connection errors", "N", low=0),
    Option("max_reasks", "int", "re-asks when an answer does not fit the schema", "N", low=0),
    Option(
        "judge_max_tokens",
        "int",
        "completion limit of every judge answer, in tokens (default: sized to the answer's schema); an "
        "answer cut off by it is re-asked, never recorded",
        "N",
        low=1,
        ini_type="string",  # an integer or the word none
    ),
    Option(
        "cache",
        "choice",
        "readwrite: use recorded judgments, judge the rest; replay: never "
        "call the judge; refresh: judge everything again; off: judge, store nothing",
        "MODE",
        choices=CACHE_MODES,
    ),
    Option(
        "cache_dir",
        "optional_text",
        "local judgment cache (default: ragmetrics in pytest's cache directory)",
        "PATH",
    ),
    Option(
        "store_dir",
        "optional_text",
        "judgment store to commit: one JSON line per judgment, in 256 shards (off by default)",
        "PATH",
    ),
    Option(
        "batch",
        "batch_path",
        "call no judge: write each judgment that no store or cache holds to PATH, a batch input file "
        "(OpenAI format) to submit with `python -m pytest_ragmetrics store batch submit PATH`; the "
        "tests that need one are skipped",
        "PATH",
    ),
    Option(
        "price_input",
        "float",
        "USD per million prompt tokens, for the cost figure",
        "USD",
        low=0.0,
    ),
    Option("price_output", "float", "USD per million completion tokens", "USD", low=0.0),
    Option(
        "gates",
        "lines",
        "aggregate gates, one per line, e.g. 'context_recall mean >= 0.8' (CLI: "
        "repeatable --rag-gate; env: separated by ';')",
        "GATE",
        ini_type="linelist",
        cli=False,
        repeat="--rag-gate",
    ),
    Option(
        "baseline",
        "optional_text",
        "compare the run with this baseline: a JSON report saved with --rag-save-baseline (or "
        "--rag-report-json)",
        "PATH",
    ),
    Option(
        "save_baseline",
        "optional_text",
        "save this run as a baseline to PATH: the JSON report without its judge counters",
        "PATH",
    ),
    Option(
        "regression_gates",
        "lines",
        "regression gates against the baseline, one per line, e.g. 'context_precision mean drop <= 0.02 "
        "at p < 0.05' (CLI: repeatable --rag-regression-gate; env: separated by ';')",
        "GATE",
        ini_type="linelist",
        cli=False,
        repeat="--rag-regression-gate",
    ),
    Option(
        "allow_inconclusive",
        "flag",
        "let a regression gate pass when its drop (or rise) is beyond the tolerance but the one-sided "
        "test cannot call it significant (inconclusive: fails by default)",
        flag=True,
    ),
    Option(
        "allow_mixed_baseline",
        "flag",
        "compare with a baseline scored by another judge model, prompt version, sentence splitter or "
        "judge sampling (temperature, seed, n) (refused by default; the differences are named either way)",
        flag=True,
    ),
    Option(
        "judge_check",
        "optional_text",
        "labelled set (JSONL) to check the judge against at the end of the run: agreement per judgment kind",
        "PATH",
    ),
    Option(
        "judge_controls",
        "int",
        "judge N negative controls (a question with a chunk retrieved for another sample) and N positive "
        "ones (a sample's own reference as the chunk) at the end of the run, drawn from the samples it "
        "scored, and report the shares judged useful / relevant / needed; floors like "
        "'context_precision controls <= 0.2' or 'context_precision positive_controls >= 0.8' go in "
        "rag_judge_agreement",
        "N",
        low=0,
    ),
    Option(
        "judge_agreement",
        "lines",
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


def overridden_ini_keys(overrides: list[str] | None) -> list[str]:
    """The ``rag_*`` keys given with pytest's ``-o KEY=VALUE`` (``--override-ini``)."""
    keys = (item.partition("=")[0].strip() for item in overrides or ())
    return [key for key in keys if key.startswith("rag_")]


def may_name_unknown_ini_keys(path: Path) -> bool:
    """The configuration file ``path`` may hold a ``rag_*`` key that is no setting: some text in it
    from ``rag_`` to the next ``=``, ``:`` or line end (in any case, stripped) is no ini key of ours.

    A key of the file is such a text, so a file where every one is known holds no unknown key and
    is not parsed for them (the ini parser is not even loaded); text elsewhere (a value, a comment)
    only ever sends it to be parsed.
    """
    try:
        text = path.read_bytes().lower()
    except OSError:
        return False
    known = {option.ini_name.encode() for option in OPTIONS}
    return any(word.strip() not in known for word in re.findall(rb"rag_[^=:\r\n]*", text))
