"""The package uses only public APIs of pytest, pluggy and diskcache: their private attributes change
without notice from one release to the next.

Found with :mod:`ast`: an attribute of one of the names below read on anything but ``self`` (the
package's own objects may have private attributes of the same name), or the name given as a string
(``getattr(obj, "_tw")``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "pytest_ragmetrics"

#: Private names of pytest (nodes, fixtures, terminal, junitxml) and diskcache known to tempt.
PRIVATE = frozenset(
    {
        "_fixturemanager",
        "_fixtureinfo",
        "_arg2fixturedefs",
        "getfixturedefs",
        "_request",
        "_tw",
        "_sql",
        "_disk",
        "add_global_property",
        "indices",  # callspec.indices
        "_benchmarksession",
        "_inicache",
        "_store",
    }
)

def private_uses(source: str) -> set[str]:
    """The private names ``source`` reaches for."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            if not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
                found.add(node.attr)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in PRIVATE:
            found.add(node.value)
    return found


def test_the_check_finds_attributes_and_getattr_strings_but_not_own_attributes():
    source = (
        "defs = session._fixturemanager._arg2fixturedefs\n"
        "width = getattr(reporter, '_tw', None)\n"
        "class Mine:\n    def f(self):\n        return self._disk()\n"
    )
    assert private_uses(source) == {"_fixturemanager", "_arg2fixturedefs", "_tw"}


def test_the_package_reaches_for_no_private_name_of_pytest_or_diskcache():
    found = {}
    for path in sorted(ROOT.rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        uses = private_uses(path.read_text(encoding="utf-8"))
        if uses:
            found[name] = sorted(uses)
    assert not found
