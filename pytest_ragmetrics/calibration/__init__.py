"""Trusting the judge: agreement with labelled verdicts, floors on it, and drift between judges.

``labels`` reads labelled sets, ``agreement`` holds the statistics (pure functions), ``check`` judges
the labelled items and compares, ``drift`` re-judges recorded judgments with another model.

PYTEST_DONT_REWRITE
"""
