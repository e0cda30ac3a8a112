import ast
import subprocess
import sys
from pathlib import Path

import pytest_ragmetrics


def test_import_has_no_heavy_dependencies():
    """Importing the package or the plugin must not import openai, nltk or diskcache."""
    code = (
        "import sys, pytest_ragmetrics, pytest_ragmetrics.plugin\n"
        "print(sorted(m for m in ('openai', 'nltk', 'diskcache', 'httpx', 'httpx2') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_unknown_attribute_raises_attribute_error():
    try:
        pytest_ragmetrics.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("expected AttributeError")


def test_every_name_the_package_exports_is_found_where_it_says():
    """Each public name is imported from its module on first use: a name whose module no longer
    holds it would fail only there, in a user's code (``-W error::pytest_ragmetrics.RagMetricsWarning``
    would stop pytest before it runs)."""
    code = (
        "import pytest_ragmetrics as p\n"
        "missing = []\n"
        "for name in p.__all__:\n"
        "    try:\n"
        "        getattr(p, name)\n"
        "    except AttributeError:\n"
        "        missing.append(name)\n"
        "print(missing)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_every_module_of_the_package_turns_pytest_assertion_rewriting_off():
    """pytest rewrites the asserts of every module of a plugin's distribution as it imports it (with
    PYTHONDONTWRITEBYTECODE=1, again in every process); ours need none of it: plain asserts."""
    root = Path(pytest_ragmetrics.__file__).parent
    modules = sorted(root.rglob("*.py"))
    missing = [
        str(path.relative_to(root))
        for path in modules
        if "PYTEST_DONT_REWRITE" not in (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
    ]
    assert len(modules) > 50
    assert missing == []
