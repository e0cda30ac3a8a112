"""Settings and the one resolver that builds them.

Precedence, low to high: built-in default < ini (``rag_*``) < environment (``RAGMETRICS_*``) < command
line (``--rag-*``) < ``ragmetrics_config`` fixture < marker (the closest marker wins). API keys are
never settings: the judge reads them from the environment (``OPENAI_API_KEY``, ``AZURE_OPENAI_API_KEY``).

The option table they follow, :data:`OPTIONS`, lives in :mod:`pytest_ragmetrics.options` (imported
here too): the pytest options, ini keys, environment variables and the README's configuration table
come from it.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import ConfigError

if TYPE_CHECKING:
    import pytest

    from .specs import MetricCatalog
from .options import (
    _OPTIONAL,
    CACHE_MODES,
    OPTIONS,
    OPTIONS_BY_NAME,
    PROVIDERS,
    RELEVANCE_METHODS,
    RESPONSE_FORMATS,
    Option,
)

__all__ = [
    "CACHE_MODES",
    "OPTIONS",
    "OPTIONS_BY_NAME",
    "PROVIDERS",
    "RELEVANCE_METHODS",
    "RESPONSE_FORMATS",
    "RUN_WIDE",
    "Option",
    "Settings",
    "advice",
    "check_marker",
    "default_cache_dir",
    "env_values",
    "for_test",
    "from_env",
    "how_to_set",
    "resolve",
    "with_paths_under",
    "wording",
]


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
    concurrency: int = 32
    max_judge_calls: int | None = None
    max_judge_tokens: int | None = None
    timeout: float = 60.0
    max_retries: int = 4
    max_reasks: int = 2
    judge_max_tokens: int | None = None
    cache: str = "readwrite"
    cache_dir: str | None = None
    store_dir: str | None = None
    batch: str | None = None
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
    allow_inconclusive: bool = False
    allow_mixed_baseline: bool = False
    judge_check: str | None = None
    judge_controls: int = 0
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
        layers.append(("env", env_values(env)))
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
            if layer == "cli" and option.repeat:
                refuse_empty_lines(raw, option.repeat, "a floor" if name == "judge_agreement" else "a gate")
            elif layer == "cli" and isinstance(raw, str) and not raw.strip():
                refuse_empty_option(option, raw)
            values[name] = option.convert(raw, shown)
    return Settings(**values)


def refuse_empty_lines(lines: Iterable[Any] | None, flag: str, what: str = "a gate") -> None:
    """A :class:`ConfigError` when a repeatable option ``flag`` was given an empty value.

    An unset shell variable (``--rag-gate "$GATE"``) gives an empty line: that is a mistake to name,
    not a request for no gate.
    """
    if any(not str(line).strip() for line in lines or ()):
        raise ConfigError(f"{flag} is empty: give {what}, or leave the option out", setting=flag)


def refuse_empty_option(option: Option, raw: str) -> None:
    """A :class:`ConfigError` for the command-line option of ``option`` given empty.

    ``--rag-store-dir="$STORE"`` with the variable unset is a mistake to name, as an empty
    ``RAGMETRICS_STORE_DIR`` is: taken as "none" it would silently drop the ini file's store, or its
    baseline, or its report. An ini setting is cleared for one run with pytest's ``-o rag_store_dir=``.
    """
    option.convert(raw, option.cli_name)  # a number, a choice: its own words first
    raise ConfigError(
        f"{option.cli_name} is empty: give it a value, or leave the option out (an empty one does not "
        f"clear {option.ini_name}; -o {option.ini_name}= does)",
        setting=option.cli_name,
    )


def env_values(env: Mapping[str, str]) -> dict[str, str]:
    """The settings given by ``RAGMETRICS_*`` variables of ``env``, by setting name, as text.

    A variable set but empty (a CI variable that expanded to nothing: ``RAGMETRICS_GATES=$GATES``)
    is a :class:`ConfigError` naming it, whatever the setting: taken as unset it would silently
    give the ini file's value instead of the one meant, and taken as "none" it would silently drop
    the ini file's gates, or its baseline, or its cap. A setting of the ini file is cleared for one
    run with pytest's ``-o rag_gates=``."""
    check_names(env=env)
    values = {o.name: env[o.env_name] for o in OPTIONS if o.env and o.env_name in env}
    for name, value in values.items():
        if not value.strip():
            option = OPTIONS_BY_NAME[name]
            option.convert(value, option.env_name)  # a number, a choice, a path: its own words first
            raise ConfigError(
                f"{option.env_name} is set but empty: give it a value, or unset the variable (an empty "
                f"one does not clear {option.ini_name}; in pytest, -o {option.ini_name}= does)",
                setting=option.env_name,
            )
    return values


#: Settings of the run as a whole (reports, gates): a marker or ``ragmetrics_config`` cannot change them.
RUN_WIDE = frozenset(
    {
        "report",
        "report_json",
        "report_md",
        "report_html",
        "github_summary",
        "gates",
        "baseline",
        "save_baseline",
        "regression_gates",
        "allow_inconclusive",
        "allow_mixed_baseline",
        "judge_check",
        "judge_agreement",
        "max_judge_calls",
        "max_judge_tokens",
        "judge_controls",
        "batch",
    }
)

#: Marker arguments that are not settings: ``samples`` parametrizes ``rag_sample``, ``method`` is
#: short for ``relevance_method``, ``metrics`` lists the scores a test takes (started together at its
#: first one; see :mod:`pytest_ragmetrics.prefetch`).
MARKER_WORDS = ("samples", "method", "metrics")

#: Settings that hold paths: relative ones are relative to the rootdir (where the ini file is).
_PATHS = ("cache_dir", "store_dir", "batch", "baseline", "save_baseline", "judge_check")


def configured(ini: Mapping[str, Any], cli: Mapping[str, Any] | None = None) -> Settings:
    """The settings a ``python -m pytest_ragmetrics`` command runs with: the ``rag_*`` keys of the
    pytest configuration here (``ini``, its values as read from the file), then the ``RAGMETRICS_*``
    variables, then what the command's own options give (``cli``, by setting name)."""
    values = {o.name: ini[o.ini_name] for o in OPTIONS if o.ini_name in ini}
    return resolve(ini=values, env=os.environ, cli=cli)


#: The local judgment cache's directory where pytest's cache directory is not there to hold it.
FALLBACK_CACHE_DIR = ".ragmetrics_cache"


def default_cache_dir(config: pytest.Config | None = None, *, cwd: Path | None = None) -> Path:
    """The local judgment cache's directory when no setting names one (``cache_dir``).

    The judgments sit in pytest's cache directory where there is one, so that ``pytest --cache-clear``
    clears them too; each place that opens the cache knows of that directory differently, so each
    passes what it has:

    * a pytest run, its ``config``: ``ragmetrics`` in the directory pytest's cache provider gives
      (``.pytest_cache/d/ragmetrics``, or under pytest's own ``cache_dir`` setting), or, with the
      provider off (``-p no:cacheprovider``), ``.ragmetrics_cache`` in the rootdir;
    * a ``python -m pytest_ragmetrics`` command, the directory it runs in (``cwd``), where a pytest
      run would: ``.pytest_cache/d/ragmetrics`` there once pytest has made ``.pytest_cache``, else
      ``.ragmetrics_cache`` there;
    * a script, nothing: ``.ragmetrics_cache``, relative to the working directory.
    """
    if config is not None:
        cache = getattr(config, "cache", None)  # None under -p no:cacheprovider
        if cache is not None:
            return Path(cache.mkdir("ragmetrics"))
        return config.rootpath / FALLBACK_CACHE_DIR
    if cwd is None:
        return Path(FALLBACK_CACHE_DIR)
    if (cwd / ".pytest_cache").is_dir():
        return cwd / ".pytest_cache" / "d" / "ragmetrics"
    return cwd / FALLBACK_CACHE_DIR


def with_paths_under(settings: Settings, root: Path) -> Settings:
    """``settings`` with its relative paths made absolute under ``root``, wherever the run started."""
    changes = {}
    for name in _PATHS:
        value = getattr(settings, name)
        if value and not os.path.isabs(value):
            changes[name] = str(root / value)
    return settings.replace(**changes) if changes else settings


def check_store_dir(path: str, setting: str) -> None:
    """Raise :class:`ConfigError` naming ``setting`` when the judgment store at ``path`` cannot be a
    directory: it, or a directory above it, is a file. The store is written at the run's end, when
    the run's judgments would be lost to it; this says so before the first one is asked for. A name
    the file system refuses (longer than it allows) is said too, where ``Path.is_dir`` raises."""
    try:
        for place in (Path(path), *Path(path).parents):
            if place.is_dir():
                return
            if place.exists() or place.is_symlink():  # a broken link too: no directory can be made there
                kind = "a file" if place.is_file() else "no directory"
                what = f"is {kind}" if place == Path(path) else f"lies under {place}, which is {kind}"
                raise ConfigError(
                    f"{setting}: the judgment store {path} {what}; the store is a directory of shard "
                    "files: choose another path",
                    setting=setting,
                )
    except OSError as exc:
        raise ConfigError(
            f"{setting}: the judgment store {path} cannot be used ({exc.strerror or exc}): "
            "choose another path",
            setting=setting,
        ) from None


def _changes(given: Mapping[str, Any]) -> dict[str, Any]:
    """Marker or ``ragmetrics_config`` arguments as setting changes."""
    changes = {k: v for k, v in given.items() if k not in ("samples", "metrics")}
    if "method" in changes:
        changes["relevance_method"] = changes.pop("method")
    return changes


def check_marker(
    args: tuple[Any, ...], kwargs: Mapping[str, Any], catalog: MetricCatalog | None = None
) -> None:
    """Raise :class:`ConfigError` unless ``@pytest.mark.ragmetrics(*args, **kwargs)`` is valid: keyword
    arguments only, each a per-test setting or one of :data:`MARKER_WORDS`, each value valid; the
    metrics of ``metrics=`` known to ``catalog`` when it is given."""
    if args:
        raise ConfigError(f"@pytest.mark.ragmetrics takes keyword arguments only, got {args!r}")
    run_wide = sorted(set(kwargs) & RUN_WIDE)
    if run_wide:
        raise ConfigError(
            f"@pytest.mark.ragmetrics: {', '.join(run_wide)} applies to the whole run; "
            "set it on the command line or in the ini file"
        )
    unknown = sorted(set(kwargs) - set(OPTIONS_BY_NAME) - set(MARKER_WORDS))
    if unknown:
        per_test = sorted(set(OPTIONS_BY_NAME) - RUN_WIDE)
        raise ConfigError(
            f"unknown @pytest.mark.ragmetrics argument(s) {', '.join(unknown)}; use samples, method, metrics "
            f"or a setting name: {', '.join(per_test)}"
        )
    try:
        resolve(overrides=_changes(kwargs))
    except ConfigError as exc:
        raise ConfigError(f"@pytest.mark.ragmetrics: {exc}") from None
    if "samples" in kwargs and not isinstance(kwargs["samples"], (str, os.PathLike)):
        raise ConfigError(
            "@pytest.mark.ragmetrics(samples=...) must be the path of a samples file, "
            f"got {kwargs['samples']!r}"
        )
    if "metrics" in kwargs:
        _check_metric_names(kwargs["metrics"], catalog)


def _check_metric_names(value: Any, catalog: MetricCatalog | None = None) -> None:
    """The marker's ``metrics=``: a list of metric names such as ``"context_relevance[graded]"``."""
    from .specs import parse_metric_name

    if (
        isinstance(value, str)
        or not isinstance(value, (list, tuple))
        or not all(isinstance(v, str) for v in value)
    ):
        raise ConfigError(
            f"@pytest.mark.ragmetrics(metrics=...) must be a list of metric names, got {value!r}"
        )
    for name in value:
        try:
            parsed = parse_metric_name(name)
            if catalog is not None:
                catalog.check(parsed)
        except ConfigError as exc:
            raise ConfigError(f"@pytest.mark.ragmetrics(metrics=...): {exc}") from None


def for_test(
    run: Settings,
    *,
    config: Mapping[str, Any] | None = None,
    markers: Iterable[Mapping[str, Any]] = (),
    root: Path,
) -> Settings:
    """The settings of one test: the run's, then its ``ragmetrics_config`` fixture's value, then its
    markers' keyword arguments, farthest first (a test's own marker beats its module's).

    Raises :class:`ConfigError` for a run-wide setting in ``config`` or an invalid value.
    """
    overrides = _changes(config or {})
    run_wide = sorted(set(overrides) & RUN_WIDE)
    if run_wide:
        raise ConfigError(
            f"ragmetrics_config: {', '.join(run_wide)} applies to the whole run; set it on the command "
            "line or in the ini file"
        )
    for kwargs in markers:
        overrides.update(_changes(kwargs))
    if not overrides:
        return run
    try:
        return with_paths_under(run.replace(**overrides), root)
    except ConfigError as exc:
        raise ConfigError(f"ragmetrics settings: {exc}") from None


def from_env(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings for use outside pytest: defaults < ``RAGMETRICS_*`` environment variables."""
    return resolve(env=os.environ if environ is None else environ)


def how_to_set(name: str, value: Any, in_pytest: bool, command_line: bool = False) -> str:
    """How a person sets setting ``name`` to ``value``, for messages.

    Inside a pytest run (``in_pytest``) the command-line option (or ini key) is named; in a
    ``python -m pytest_ragmetrics`` command (``command_line``), which reads the pytest configuration
    of its directory and the environment, the ini key and the environment variable; in a plain
    script, which has no pytest options, :class:`Settings` and the environment variable.
    """
    option = OPTIONS_BY_NAME[name]
    if command_line:  # first: a command run in-process by a test is still a command
        return f"{option.ini_name} = {value} in the pytest configuration ({option.env_name}={value})"
    if in_pytest:
        if option.cli:
            return f"{option.cli_name}={value} ({option.env_name}={value})"
        return f"{option.ini_name} = {value} ({option.env_name})"
    return f"Settings({name}={value!r}) ({option.env_name}={value})"


def wording(in_pytest: bool, command_line: bool = False) -> Callable[[str, Any], str]:
    """:func:`how_to_set` for code that runs inside a pytest run (``in_pytest``), a command
    (``command_line``) or a script: what the judge and the cache are given to word their messages."""
    return functools.partial(how_to_set, in_pytest=in_pytest, command_line=command_line)


def advice(settings: Settings, in_pytest: bool, command_line: bool = False) -> list[str]:
    """Warnings about settings that are valid but almost certainly not what was meant."""
    notes = []
    if settings.judge_n > 1 and settings.temperature == 0:
        notes.append(
            f"judge_n={settings.judge_n} at temperature 0 pays for {settings.judge_n} identical answers "
            "per judgment (graded relevance excepted, at graded_temperature): raise the temperature "
            f"(e.g. {how_to_set('temperature', 0.7, in_pytest, command_line)}) or keep judge_n=1"
        )
    return notes


def pyproject_ini_options(path: Path) -> dict[str, Any] | None:
    """The ``[tool.pytest.ini_options]`` table of the ``pyproject.toml`` at ``path``, its values as
    TOML typed them, or None when it has none. A file that is no TOML is a :class:`ConfigError`
    naming it, as pytest refuses it: read as holding nothing, it would leave a command on the
    default cache and store, and ``report merge --gates`` with no gate."""
    try:
        import tomllib  # type: ignore[import-not-found,unused-ignore]
    except ImportError:  # Python 3.10: pytest itself reads pyproject.toml with tomli there
        try:
            import tomli as tomllib  # type: ignore[import-not-found,no-redef,unused-ignore]
        except ImportError:
            return None
    try:
        table = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:  # tomllib's errors and UnicodeDecodeError are ValueErrors
        raise ConfigError(f"{path.name} cannot be read as TOML: {exc}") from None
    options = table.get("tool", {}).get("pytest", {}).get("ini_options")
    return options if isinstance(options, dict) else None


#: The kinds of settings that take text (names, paths, URLs).
_TEXT_KINDS = ("text", "optional_text", "report_path", "batch_path")


def check_toml_text(inipath: Path | None, values: Mapping[str, Any]) -> None:
    """Refuse a text setting that ``pyproject.toml`` gives as a TOML boolean, number or list
    (``rag_report_json = true``): pytest passes it on as the text ``"True"``, which would name a file.
    So too a list of names holding one (``rag_relevance_models = [1, 2]``), which would name models.
    ``values`` are the ini values pytest read, by setting name.

    Only a value that reads as such a scalar sends the file to be parsed, so a usual run parses
    nothing more.
    """
    if inipath is None or inipath.name != "pyproject.toml":
        return
    suspects = [name for name, value in values.items() if _may_be_scalar(OPTIONS_BY_NAME[name].kind, value)]
    if not suspects:
        return
    raw = pyproject_ini_options(inipath) or {}
    for name in suspects:
        given = raw.get(OPTIONS_BY_NAME[name].ini_name)
        text = isinstance(given, str) or (
            OPTIONS_BY_NAME[name].kind == "names"
            and isinstance(given, list)
            and all(isinstance(item, str) for item in given)
        )
        if given is not None and not text:
            toml = str(given).lower() if isinstance(given, bool) else repr(given)
            raise ConfigError(
                f"{OPTIONS_BY_NAME[name].ini_name} must be text, in quotes; got {toml} (in {inipath.name})"
            )


def _may_be_scalar(kind: str, value: Any) -> bool:
    """Whether the ini value ``value`` of a setting of ``kind`` may have been a TOML boolean or number,
    or for a text setting a TOML list (its items read as lines: ``["a", "b"]`` would name "a\\nb")."""
    if kind in _TEXT_KINDS:
        return isinstance(value, str) and (_scalar_text(value) or "\n" in value)
    if kind == "names":
        items = value.replace("\n", ",").split(",") if isinstance(value, str) else value
        return isinstance(items, list) and any(
            not isinstance(item, str) or _scalar_text(item.strip()) for item in items
        )
    return False


def _scalar_text(value: str) -> bool:
    """Whether ``value`` may be a TOML boolean, number or table as pytest writes it in text."""
    if value in ("True", "False") or value.startswith("{"):
        return True
    try:
        float(value)
    except ValueError:
        return False
    return True


def ini_file_values(path: Path) -> dict[str, str] | None:
    """The pytest ini options of the configuration file ``path`` (``pytest.ini``, ``pyproject.toml``,
    ``tox.ini``, ``setup.cfg``) as text, or None when there is no such file or it holds no pytest
    section. A file that cannot be read as its format is a :class:`ConfigError` naming it."""
    import configparser

    if not path.is_file():
        return None
    if path.name == "pyproject.toml":
        options = pyproject_ini_options(path)
        if options is None:
            return None
        # A list (rag_gates = [...]) reads as an ini linelist: one item per line.
        return {
            k: "\n".join(map(str, v)) if isinstance(v, list) else str(v)
            for k, v in options.items()
            if isinstance(v, (str, int, float, list))
        }
    parser = configparser.ConfigParser(interpolation=None)
    # A name taken as written, as pytest takes it: ``Name`` and ``name`` in one section are two names,
    # not one given twice, and ``RAG_CACHE_DIR`` is not the setting ``rag_cache_dir`` here either.
    parser.optionxform = str  # type: ignore[assignment,method-assign]
    try:
        parser.read(path, encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path.name} is not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except configparser.Error as exc:  # pytest refuses the file too
        raise ConfigError(f"{path.name} cannot be read as an ini file: {_ini_problem(exc)}") from None
    section = {"setup.cfg": "tool:pytest", "tox.ini": "pytest"}.get(path.name, "pytest")
    return dict(parser.items(section)) if parser.has_section(section) else None


def _ini_problem(exc: Exception) -> str:
    """What :mod:`configparser` found wrong, on one line and naming the line, without its
    multi-line message that quotes the path."""
    import configparser

    if isinstance(exc, configparser.MissingSectionHeaderError):
        return f"line {exc.lineno} comes before any [section]"
    if isinstance(exc, configparser.ParsingError) and exc.errors:
        return f"line {exc.errors[0][0]} is neither a [section] nor a name = value"
    if isinstance(exc, configparser.DuplicateOptionError):
        return f"line {exc.lineno}: {exc.option!r} is given twice in [{exc.section}]"
    if isinstance(exc, configparser.DuplicateSectionError):
        return f"line {exc.lineno}: the section [{exc.section}] is given twice"
    return " ".join(str(exc).split())


def check_names(ini: Iterable[str] = (), env: Iterable[str] = ()) -> None:
    """Raise :class:`ConfigError` for a ``rag_*`` ini key or a ``RAGMETRICS_*`` environment variable
    that is no setting, naming the closest real one (a misspelt key would otherwise do nothing)."""
    import difflib

    for given, prefix, known in (
        (ini, "rag_", sorted(o.ini_name for o in OPTIONS)),
        (env, "RAGMETRICS_", sorted("RAGMETRICS_" + o.name.upper() for o in OPTIONS)),
    ):
        for name in sorted(given):
            if name.startswith(prefix) and name not in known:
                words = name.split("_")
                # A word too many (rag_judge_temperature) is the likeliest slip; else the nearest.
                fewer = ["_".join(words[:i] + words[i + 1 :]) for i in range(1, len(words))]
                close = [word for word in fewer if word in known]
                close = close or difflib.get_close_matches(name, known, n=1, cutoff=0.5)
                hint = f"; did you mean {close[0]}?" if close else f"; known: {', '.join(known)}"
                what = "ini key" if prefix == "rag_" else "environment variable"
                raise ConfigError(f"unknown ragmetrics {what} {name}{hint}")
