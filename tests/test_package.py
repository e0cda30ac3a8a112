import subprocess
import sys

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
