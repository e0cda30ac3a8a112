"""The metrics. ``precision``, ``recall`` and ``relevance`` are pure arithmetic over verdicts;
``builtin`` turns samples into judge requests and answers into verdicts, and registers the built-in
metrics through the same hook a third-party metric uses.

PYTEST_DONT_REWRITE
"""
