"""A parametrized test's body run ahead of its turn, up to its first score (``--rag-run-ahead``).

A test whose body calls the retriever has no sample until that body runs, so nothing can be judged
for it before its turn. With ``--rag-run-ahead``, while a test waits for the judge, the bodies of the
next tests of the same function run up to their first score: the sample each one built has its
function's plan started on it (see :mod:`pytest_ragmetrics.prefetch`), and the body stops there. When
the test's turn comes, its body runs again from the start and takes those results.

Only bodies that can be run faithfully out of turn are: a plain (not async) test function of the same
module and class as the running test, whose arguments are its own direct ``@pytest.mark.parametrize``
values or fixtures wider than a function that the running test already holds (a session-scoped
retriever, say), with nothing function-scoped in its fixture closure (``tmp_path``, ``monkeypatch``,
``request``, an autouse fixture) and no ``skip``/``skipif`` mark. What a body prints or warns ahead is
dropped: it prints and warns again in its own turn, where it belongs; what it raises, too.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from . import _scope

if TYPE_CHECKING:
    import pytest


class Ahead(BaseException):
    """Stops a body run ahead at its first score (a BaseException: ``except Exception`` in a test
    body does not swallow it)."""


def _direct_params(item: Any) -> set[str]:
    """The names parametrized directly (not ``indirect``) by the item's ``parametrize`` marks."""
    names: set[str] = set()
    for mark in item.iter_markers("parametrize"):
        if not mark.args:
            continue
        argnames = mark.args[0]
        if isinstance(argnames, str):
            argnames = [name.strip() for name in argnames.split(",") if name.strip()]
        indirect = mark.kwargs.get("indirect", False)
        for name in argnames:
            if indirect is True or (isinstance(indirect, (list, tuple)) and name in indirect):
                continue
            names.add(name)
    return names


def body(item: pytest.Item, running: pytest.Item) -> Callable[[], Any] | None:
    """A call of ``item``'s test function with the arguments its turn will give it, taken from its
    parameters and from ``running`` (a set-up test of the same function); ``None`` when that cannot
    be done faithfully."""
    callspec = getattr(item, "callspec", None)
    info = getattr(item, "_fixtureinfo", None)
    funcargs = getattr(running, "funcargs", None)
    running_callspec = getattr(running, "callspec", None)
    if callspec is None or info is None or not isinstance(funcargs, dict) or running_callspec is None:
        return None
    if item.parent is not running.parent or getattr(item, "originalname", None) != getattr(
        running, "originalname", None
    ):
        return None
    if any(True for _ in item.iter_markers("skip")) or any(True for _ in item.iter_markers("skipif")):
        return None
    params = {**getattr(callspec, "funcargs", {}), **callspec.params}  # pytest 7 keeps direct ones apart
    direct = _direct_params(item)
    for name in getattr(item, "fixturenames", ()):
        if name in direct and name in params:
            continue
        if name in params and callspec.indices.get(name) != running_callspec.indices.get(name):
            return None  # a parametrized fixture set up for another parameter
        fixturedefs = info.name2fixturedefs.get(name)
        if not fixturedefs or fixturedefs[-1].scope == "function":
            return None  # request, or set up anew for each test
    arguments: dict[str, Any] = {}
    for name in info.argnames:
        if name in direct and name in params:
            arguments[name] = params[name]
        elif name in funcargs:
            arguments[name] = funcargs[name]
        else:
            return None
    cls = getattr(item, "cls", None)
    try:
        # A fresh instance for a method, as pytest makes one for each test (never the item's own).
        function = getattr(cls(), item.originalname) if cls is not None else item.obj  # type: ignore[attr-defined]
    except Exception:
        return None
    if not callable(function) or inspect.iscoroutinefunction(function):
        return None  # an async test: its plugin runs it
    return lambda: function(**arguments)


def run(call: Callable[[], Any], scope: _scope.TestScope) -> None:
    """Run a body ahead with ``scope`` current until its first score stops it (or it ends)."""
    token = _scope.current_test.set(scope)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            result = call()
            close = getattr(result, "close", None)
            if inspect.iscoroutine(result) and close is not None:
                close()
    except KeyboardInterrupt:
        raise
    except BaseException:
        pass  # Ahead, or what its own turn will raise where it belongs
    finally:
        _scope.current_test.reset(token)
