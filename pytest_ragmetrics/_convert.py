"""The option table's converters: a setting's value as given (text from the command line, an ini
file or the environment; a Python value from a marker, ``ragmetrics_config`` or ``Settings(...)``)
-> its value, or a :class:`~pytest_ragmetrics.errors.ConfigError` with a message a person can act on.

Apart from the table (:mod:`pytest_ragmetrics.options`), which every pytest run with the plugin
installed loads to register the options: these load when settings are resolved.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import ConfigError

#: The largest integer setting: far past any count a person means, and exact in JSON and SQLite.
_MAX_INT = 2**53


def _text(value: Any, name: str) -> str:
    """``value`` as text: a TOML ``true``, number, list or table is no model name and no path (it
    would have been written as ``"True"``, a file of that name)."""
    if not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{name} must be text, got {value!r}", setting=name)
    return str(value).strip()


def text(value: Any, name: str) -> str:
    text = "" if value is None else _text(value, name)
    if not text:
        raise ConfigError(f"{name} must not be empty", setting=name)
    return text


def optional_text(value: Any, name: str) -> str | None:
    if value is None:
        return None
    return _text(value, name) or None


def report_path(value: Any, name: str) -> str | None:
    """A path to write a report to: refused at the start when it is a directory, not after the run."""
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise ConfigError(f"{name} must be the path of the file to write, got {value!r}", setting=name)
    text = optional_text(value, name)
    if text is None:
        return None
    try:
        directory = Path(text).is_dir()
    except OSError as exc:  # a name longer than the file system allows
        raise ConfigError(f"{name} {text!r} cannot be a file's path: {exc.strerror}", setting=name) from None
    if directory:
        raise ConfigError(f"{name} {text!r} is a directory: give the path of the file to write", setting=name)
    return text


def batch_path(value: Any, name: str) -> str | None:
    """The batch file an export writes to. An empty value (``--rag-batch="$BATCH"`` with the variable
    unset) is refused, not taken as no batch: the run would call the judge, at full price."""
    if value is None:
        return None
    text = _text(value, name)
    if not text:
        raise ConfigError(
            f"{name} is empty: give the path of the batch file to write "
            "(without it, the run calls the judge)",
            setting=name,
        )
    return text


def choice(choices: tuple[str, ...]) -> Callable[[Any, str], str]:
    def convert(value: Any, name: str) -> str:
        text = str(value).strip().lower()
        if text not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)}; got {value!r}", setting=name)
        return text

    return convert


def number(
    kind: type, low: float | None = None, optional: bool = False, high: float | None = None
) -> Callable[[Any, str], Any]:
    word = "an integer" if kind is int else "a number"

    def convert(value: Any, name: str) -> Any:
        if optional and (value is None or str(value).strip().lower() == "none"):
            return None
        if isinstance(value, str) and not value.strip():
            # An unset shell variable (--rag-max-judge-calls="$CAP") is not "no cap": that is spelt none.
            unset = ", or the word none to unset it" if optional else ""
            raise ConfigError(f"{name} is empty: give {word}{unset}", setting=name)
        if kind is int and isinstance(value, float) and not value.is_integer():
            # int() would cut 2.5 to 2: a cap, a seed or a count of answers that is not the one given.
            raise ConfigError(f"{name} must be {word}; got {value!r}", setting=name)
        try:
            number = kind(str(value).strip()) if isinstance(value, str) else kind(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be {word}; got {value!r}", setting=name) from None
        # bools are ints; NaN never compares equal; an infinite temperature or price has no JSON form
        if isinstance(value, bool) or number != number or number in (float("inf"), float("-inf")):
            raise ConfigError(f"{name} must be a finite number; got {value!r}", setting=name)
        if low is not None and number < low:
            raise ConfigError(f"{name} must be at least {low:g}; got {value!r}", setting=name)
        if high is not None and number > high:
            raise ConfigError(f"{name} must be at most {high:g}; got {value!r}", setting=name)
        if kind is int and number > _MAX_INT:
            raise ConfigError(f"{name} must be at most {_MAX_INT}; got {value!r}", setting=name)
        return number

    return convert


def flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ConfigError(f"{name} must be true or false; got {value!r}", setting=name)


def names(value: Any, name: str) -> tuple[str, ...]:
    # An ini file's lines may each hold several names, separated by commas, as one line does.
    items = value.replace("\n", ",").split(",") if isinstance(value, str) else list(value)
    items = [part for item in items for part in (item.split(",") if isinstance(item, str) else (item,))]
    # Each name once, in order: a model listed twice would count twice in the average.
    return tuple(dict.fromkeys(str(i).strip() for i in items if str(i).strip()))


def lines(value: Any, name: str) -> tuple[str, ...]:
    items = value.replace(";", "\n").splitlines() if isinstance(value, str) else list(value)
    return tuple(str(i).strip() for i in items if str(i).strip() and not str(i).strip().startswith("#"))


_PLAIN: dict[str, Callable[[Any, str], Any]] = {
    "text": text,
    "optional_text": optional_text,
    "report_path": report_path,
    "batch_path": batch_path,
    "flag": flag,
    "names": names,
    "lines": lines,
}


def converter(
    kind: str, choices: tuple[str, ...], low: float | None, optional: bool, high: float | None = None
) -> Callable[[Any, str], Any]:
    """The converter of an option of ``kind`` (see :class:`~pytest_ragmetrics.options.Option`):
    ``choices`` for ``"choice"``, the least value ``low``, the greatest ``high`` and ``optional``
    (the word none, or nothing, is ``None``) for ``"int"`` and ``"float"``."""
    if kind == "choice":
        return choice(choices)
    if kind in ("int", "float"):
        return number(int if kind == "int" else float, low, optional, high)
    return _PLAIN[kind]
