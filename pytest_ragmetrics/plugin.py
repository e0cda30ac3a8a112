"""The pytest plugin (entry point ``ragmetrics``): options, marker, fixtures and report hooks.

Kept thin and cheap to import: everything heavy is imported inside the hooks that need it.
"""

from __future__ import annotations
