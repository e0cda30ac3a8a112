"""Settings and the one resolver that builds them.

Precedence, low to high: built-in default < ini (``rag_*``) < environment (``RAGMETRICS_*``) < command
line (``--rag-*``) < marker / ``ragmetrics_config`` fixture. API keys are never settings: the judge
reads them from the environment (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``).

:data:`OPTIONS` is the single table the pytest options, ini keys, environment variables and the
README's configuration table come from.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import ConfigError

CACHE_MODES = ("readwrite", "replay", "refresh", "off")
RESPONSE_FORMATS = ("auto", "json_schema", "json_object", "text")
PROVIDERS = ("openai", "azure")
RELEVANCE_METHODS = ("graded", "sentence", "binary", "any")


@dataclass(frozen=True)
class Settings:
    """Everything that configures judging and reporting. Build with :func:`resolve` or directly."""

    judge_model: str = "gpt-4o-mini"
    judge_base_url: str | None = None
    judge_provider: str = "openai"
    relevance_models: tuple[str, ...] = ()
    response_format: str = "auto"
    temperature: float = 0.0
    graded_temperature: float = 0.1
    seed: int | None = 0
    judge_n: int = 1
    concurrency: int = 16
    timeout: float = 60.0
    max_retries: int = 4
    max_reasks: int = 2
    cache: str = "readwrite"
    cache_dir: str | None = None
    store_dir: str | None = None
    price_input: float | None = None
    price_output: float | None = None
    relevance_method: str = "graded"
    report: bool = False
    report_json: str | None = None
    report_md: str | None = None
    report_html: str | None = None
    github_summary: bool = False
    gates: tuple[str, ...] = ()
    baseline: str | None = None
    save_baseline: str | None = None
    regression_gates: tuple[str, ...] = ()
    judge_check: str | None = None
    judge_agreement: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Built directly or by resolve(): either way every value passes the same checks.
        for option in OPTIONS:
            value = getattr(self, option.name)
            if value is not None or option.name not in _OPTIONAL:
                object.__setattr__(self, option.name, option.convert(value, f"Settings.{option.name}"))

    def replace(self, **changes: Any) -> Settings:
        """A copy with ``changes`` applied and validated (unknown names are a :class:`ConfigError`)."""
        return resolve(base=self, overrides=changes, source="override")

    @property
    def models_for_graded(self) -> tuple[str, ...]:
        return self.relevance_models or (self.judge_model,)


# --- converters: str -> value, raising ConfigError with a message a person can act on ------------


def _text(value: Any, name: str) -> str:
    text = "" if value is None else str(value).strip()
    if not text:
        raise ConfigError(f"{name} must not be empty")
    return text


def _optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return text or None


def _choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def convert(value: Any, name: str) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}")
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
            raise ConfigError(f"{name} must be {word}; got {value!r}") from None
        if isinstance(value, bool) or number != number:  # bools are ints; NaN never compares equal
            raise ConfigError(f"{name} must be a number; got {value!r}")
        if low is not None and number < low:
            raise ConfigError(f"{name} must be at least {low:g}; got {value!r}")
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
    raise ConfigError(f"{name} must be true or false; got {value!r}")


def _names(value: Any, name: str) -> tuple[str, ...]:
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else list(value)
    # Each name once, in order: a model listed twice would count twice in the average.
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


def _lines(value: Any, name: str) -> tuple[str, ...]:
    items = value.replace(";", "\n").splitlines() if isinstance(value, str) else list(value)
    return tuple(str(i).strip() for i in items if str(i).strip() and not str(i).strip().startswith("#"))


@dataclass(frozen=True)
class Option:
    """One setting: where it can be given and how it is parsed."""

    name: str
    convert: Callable[[Any, str], Any]
    help: str
    metavar: str | None = None
    #: The ini type pytest parses and shows in --help: string, bool, linelist, or for numbers int and
    #: float (pytest >= 8.4; older versions read them as strings). Default: the converter's, else string.
    ini_type: str | None = None
    flag: bool = False
    cli: bool = True
    env: bool = True
    choices: tuple[str, ...] = field(default=())
    #: For a list of lines: the command-line flag that gives one line and may be repeated.
    repeat: str | None = None

    def __post_init__(self) -> None:
        if self.ini_type is None:
            object.__setattr__(self, "ini_type", getattr(self.convert, "ini_type", "string"))

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
    Option("report_json", _optional_text, "write the report as JSON to PATH", "PATH"),
    Option("report_md", _optional_text, "write the report as Markdown to PATH", "PATH"),
    Option("report_html", _optional_text, "write a self-contained HTML report to PATH", "PATH"),
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
    Option("timeout", _number(float, 0.001), "seconds before one judge request times out", "SECONDS"),
    Option("max_retries", _number(int, 0), "retries on 429, 5xx, timeouts and connection errors", "N"),
    Option("max_reasks", _number(int, 0), "re-asks when an answer does not fit the schema", "N"),
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
        "judge_check",
        _optional_text,
        "labelled set (JSONL) to check the judge against at the end of the run: agreement per judgment kind",
        "PATH",
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
        "price_input",
        "price_output",
        "seed",
        "report_json",
        "report_md",
        "report_html",
        "baseline",
        "save_baseline",
        "judge_check",
    }
)
_FIELDS = {f.name for f in dataclasses.fields(Settings)}
assert set(OPTIONS_BY_NAME) == _FIELDS, _FIELDS ^ set(OPTIONS_BY_NAME)

_SOURCE_NAMES = {
    "ini": lambda o: o.ini_name,
    "env": lambda o: o.env_name,
    "cli": lambda o: o.cli_name,
    "override": lambda o: o.name,
}


def resolve(
    *,
    base: Settings | None = None,
    ini: Mapping[str, Any] | None = None,
    env: Mapping[str, str] | None = None,
    cli: Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    source: str = "override",
) -> Settings:
    """Apply ini < env < cli < overrides on top of ``base`` (default: built-in defaults).

    Keys of ``ini``, ``cli`` and ``overrides`` are setting names (``judge_model``); ``env`` is a real
    environment mapping (``RAGMETRICS_JUDGE_MODEL``). ``None`` values mean "not given".
    """
    values: dict[str, Any] = dataclasses.asdict(base or Settings())
    layers: list[tuple[str, Mapping[str, Any]]] = [("ini", ini or {})]
    if env is not None:
        layers.append(("env", {o.name: env[o.env_name] for o in OPTIONS if o.env and o.env_name in env}))
    layers += [("cli", cli or {}), (source, overrides or {})]
    for layer, given in layers:
        for name, raw in given.items():
            option = OPTIONS_BY_NAME.get(name)
            shown = _SOURCE_NAMES[layer](option) if option else name
            if option is None:
                raise ConfigError(
                    f"unknown ragmetrics setting {name!r}; known: {', '.join(sorted(OPTIONS_BY_NAME))}"
                )
            if raw is None:
                continue
            values[name] = option.convert(raw, shown)
    return Settings(**values)


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings for use outside pytest: defaults < ``RAGMETRICS_*`` environment variables."""
    return resolve(env=os.environ if environ is None else environ)


def how_to_set(name: str, value: Any) -> str:
    """How a person sets setting ``name`` to ``value`` where this code runs, for messages.

    Inside a pytest run the command-line option (or ini key) is named; in a plain script, which has
    no pytest options, :class:`Settings` and the environment variable.
    """
    from . import _scope

    option = OPTIONS_BY_NAME[name]
    if _scope.pytest_sessions:  # the plugin is configured: this is a pytest run
        if option.cli:
            return f"{option.cli_name}={value} ({option.env_name}={value})"
        return f"{option.ini_name} = {value} ({option.env_name})"
    return f"Settings({name}={value!r}) ({option.env_name}={value})"


def advice(settings: Settings) -> list[str]:
    """Warnings about settings that are valid but almost certainly not what was meant."""
    notes = []
    if settings.judge_n > 1 and settings.temperature == 0:
        notes.append(
            f"judge_n={settings.judge_n} at temperature 0 pays for {settings.judge_n} identical answers "
            "per judgment (graded relevance excepted, at graded_temperature): raise the temperature "
            f"(e.g. {how_to_set('temperature', 0.7)}) or keep judge_n=1"
        )
    return notes
