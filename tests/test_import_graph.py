"""The package's imports run one way: no circle, counting imports inside functions.

The graph is built from the source with :mod:`ast`, every ``import`` statement of a module, at its
top or inside a function, except those under ``if TYPE_CHECKING:`` (read by type checkers only, never
run). A package's ``__init__`` counts as a module of its own. The same holds one level up: a
subpackage (``report/``, ``judge/``...) taken as one node with the top-level modules, imports run
one way too, so no module of a folder imports what imports another module of that folder.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = "pytest_ragmetrics"
ROOT = Path(__file__).resolve().parent.parent / PACKAGE

#: What ``judge/`` may import of the package outside itself: errors and leaf utilities.
JUDGE_MAY_IMPORT = frozenset(
    {
        f"{PACKAGE}.errors",
        f"{PACKAGE}.redact",
        f"{PACKAGE}._aio",
        f"{PACKAGE}._files",
    }
)

#: What the configuration (the option table and the settings) may import of the package: below it are
#: only errors and leaf utilities (the metric-name grammar of ``specs`` imports nothing but errors).
#: Which run it is in, pytest or a script, is its callers' to say.
CONFIGURATION_MAY_IMPORT = {
    f"{PACKAGE}.options": {f"{PACKAGE}.errors", f"{PACKAGE}._convert"},
    f"{PACKAGE}._convert": {f"{PACKAGE}.errors"},
    f"{PACKAGE}.settings": {f"{PACKAGE}.errors", f"{PACKAGE}.options", f"{PACKAGE}.specs"},
    f"{PACKAGE}.specs": {f"{PACKAGE}.errors"},
}


def _module_name(path: Path, root: Path) -> str:
    """The import name of ``path``: a package's ``__init__.py`` is the package itself."""
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` that can run: any depth, ``if TYPE_CHECKING:`` blocks aside."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def build_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports. ``from .x import y`` imports the submodule
    ``x.y`` when there is one, else module ``x`` (a package's ``__init__``); importing a submodule
    also runs its packages' ``__init__``, which those modules' own edges account for."""
    paths = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in paths.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                start = node.module or ""
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    start = ".".join(base + ([node.module] if node.module else []))
                targets = [f"{start}.{alias.name}" for alias in node.names]
                targets = [t if t in paths else start for t in targets]
            for target in targets:
                while target and target not in paths:  # `import a.b` names module a.b or a
                    target = target.rpartition(".")[0]
                if target and target != module:
                    edges.add(target)
        graph[module] = edges
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                connect(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return sorted(components)


def fold_subpackages(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between the package's top-level modules and subpackages, each subpackage one node."""

    def top(module: str) -> str:
        return ".".join(module.split(".")[:2])

    folded: dict[str, set[str]] = {}
    for module, targets in graph.items():
        folded.setdefault(top(module), set()).update(top(t) for t in targets if top(t) != top(module))
    return folded


def test_the_graph_sees_imports_inside_functions_but_not_type_checking_ones(tmp_path):
    package = tmp_path / PACKAGE
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from .c import C\n"
        "def f():\n    from .sub import b\n"
    )
    (package / "sub" / "b.py").write_text("from ..a import f\nimport pytest_ragmetrics.c\n")
    (package / "c.py").write_text("from . import a\n")
    graph = build_graph(package)
    assert graph[f"{PACKAGE}.a"] == {f"{PACKAGE}.sub.b"}
    assert graph[f"{PACKAGE}.sub.b"] == {f"{PACKAGE}.a", f"{PACKAGE}.c"}
    assert graph[f"{PACKAGE}.c"] == {f"{PACKAGE}.a"}
    assert find_cycles(graph) == [[f"{PACKAGE}.a", f"{PACKAGE}.c", f"{PACKAGE}.sub.b"]]


@pytest.fixture(scope="module")
def package_graph() -> dict[str, set[str]]:
    """The package's import graph, parsed once for the tests that read it (none changes it)."""
    return build_graph()


def test_the_package_imports_run_one_way(package_graph):
    cycles = find_cycles(package_graph)
    assert not cycles, "import circles (function-local imports count):\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_a_circle_through_a_folder_is_seen_where_its_modules_make_none(tmp_path):
    package = tmp_path / PACKAGE
    (package / "report").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "report" / "__init__.py").write_text("")
    (package / "report" / "model.py").write_text("")
    (package / "report" / "build.py").write_text("def f():\n    from .. import baseline\n")
    (package / "baseline.py").write_text("from .report import model\n")
    graph = build_graph(package)
    assert find_cycles(graph) == []
    assert find_cycles(fold_subpackages(graph)) == [[f"{PACKAGE}.baseline", f"{PACKAGE}.report"]]


def test_the_package_folders_imports_run_one_way(package_graph):
    cycles = find_cycles(fold_subpackages(package_graph))
    assert not cycles, "import circles between folders and modules:\n" + "\n".join(
        " <-> ".join(c) for c in cycles
    )


def test_the_judge_imports_nothing_of_the_package_but_errors_and_leaf_utilities(package_graph):
    judge = f"{PACKAGE}.judge"
    outside = {
        module: sorted(t for t in targets if not t.startswith(judge) and t not in JUDGE_MAY_IMPORT)
        for module, targets in package_graph.items()
        if module.startswith(judge)
    }
    assert not {m: t for m, t in outside.items() if t}


def test_the_configuration_imports_nothing_above_it(package_graph):
    assert {m: package_graph[m] - allowed for m, allowed in CONFIGURATION_MAY_IMPORT.items()} == {
        m: set() for m in CONFIGURATION_MAY_IMPORT
    }


if __name__ == "__main__":  # pragma: no cover - a quick look at the graph from a shell
    for cycle in find_cycles(build_graph()):
        print(" <-> ".join(cycle))
    pytest.main([__file__, "-q"])
