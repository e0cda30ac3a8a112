"""A parametrized test's body run ahead of its turn, up to its first score (``--rag-run-ahead``).

A test whose body calls the retriever has no sample until that body runs, so nothing can be judged
for it before its turn. With ``--rag-run-ahead``, before a test's body runs (while the judge is
needed), the bodies of the next tests of the same function run up to their first score: the sample
each one built has its function's plan started on it (see :mod:`pytest_ragmetrics.prefetch`), and the
body stops there. When the test's turn comes, its body runs again from the start and takes those
results.

Only bodies that can be run faithfully out of turn are: a plain (not async) test function of the same
module and class as the running test, whose arguments are its own direct ``@pytest.mark.parametrize``
values or fixtures wider than a function that the running test already holds (a session-scoped
retriever, say), with nothing function-scoped in its fixture closure (``tmp_path``, ``monkeypatch``,
``request``, an autouse fixture), no ``skip``/``skipif`` or ``xfail(run=False)`` mark, and a
``ragmetrics_config`` that takes no arguments. What a body prints, logs or warns ahead is dropped: it
does so again in its own turn, where it belongs; what it raises, too. Nothing runs ahead while a
timer signal is armed (pytest-timeout's signal method): its exception belongs to the running test.
"""

from __future__ import annotations

import contextlib
import inspect
import io
import logging
import signal
import warnings
from collections.abc import Callable, Sequence
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
        if mark.kwargs.get("scope", "function") != "function":
            continue  # its fixtures wider than a test may be set up for another value: not direct
        indirect = mark.kwargs.get("indirect", False)
        for name in argnames:
            if indirect is True or (isinstance(indirect, (list, tuple)) and name in indirect):
                continue
            names.add(name)
    return names


def _fixturedefs(item: Any, name: str) -> Sequence[Any]:
    """The definitions of fixture ``name`` visible from ``item``, whether or not it asks for it."""
    manager = item.session._fixturemanager
    try:
        return manager.getfixturedefs(name, item) or ()  # pytest >= 8.1
    except (AttributeError, TypeError):
        return manager.getfixturedefs(name, item.nodeid) or ()


def _plain_config(item: Any) -> bool:
    """Whether the item's ``ragmetrics_config`` (looked up by the plugin, not in the fixture closure)
    gives every test of its scope the same settings: a definition without arguments or params."""
    try:
        fixturedefs = _fixturedefs(item, "ragmetrics_config")
    except Exception:
        return False
    if not fixturedefs:
        return True
    last = fixturedefs[-1]
    return not getattr(last, "argnames", ()) and getattr(last, "params", None) is None


def timed() -> bool:
    """Whether a timer signal is armed (pytest-timeout's signal method, say): what its handler raises
    must reach the running test, not a body run ahead."""
    getitimer = getattr(signal, "getitimer", None)
    return getitimer is not None and getitimer(signal.ITIMER_REAL)[0] > 0


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
    if any(mark.kwargs.get("run", True) is False for mark in item.iter_markers("xfail")):
        return None  # pytest does not run it
    if not _plain_config(item):
        return None  # its settings may not be the running test's
    params = {**getattr(callspec, "funcargs", {}), **callspec.params}  # pytest 7 keeps direct ones apart
    direct = _direct_params(item)
    for name in getattr(item, "fixturenames", ()):
        if (name in direct and name in params) or name == "request":
            continue  # the test's own request is refused below; a fixture's came with its value
        if name in params and callspec.indices.get(name) != running_callspec.indices.get(name):
            return None  # a parametrized fixture set up for another parameter
        fixturedefs = info.name2fixturedefs.get(name)
        if not fixturedefs or fixturedefs[-1].scope == "function":
            return None  # request, or set up anew for each test
    arguments: dict[str, Any] = {}
    for name in info.argnames:
        if name == "request":
            return None  # the running test's would be the wrong one
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
    logged = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with (
            warnings.catch_warnings(),
            contextlib.redirect_stdout(io.StringIO()),
            contextlib.redirect_stderr(io.StringIO()),
        ):
            warnings.simplefilter("ignore")
            result = call()
            if inspect.iscoroutine(result):
                result.close()
    except KeyboardInterrupt:
        raise
    except BaseException:
        pass  # Ahead, or what its own turn will raise where it belongs
    finally:
        logging.disable(logged)
        _scope.current_test.reset(token)
