"""Shared test configuration: the fake OpenAI-compatible judge server fixture."""

pytest_plugins = ["pytest_ragmetrics.testing"]
