"""The judge: the only place where pytest-ragmetrics does I/O.

``base`` defines the contract (:class:`JudgeRequest` in, :class:`JudgeAnswer` out); ``openai_judge``
talks to any OpenAI-compatible server, reading its answers with ``completions`` and its failures with
``server_errors``, built from what ``openai_settings`` checks; ``cache`` and ``store`` keep answers
on disk.

PYTEST_DONT_REWRITE
"""
