"""The judge: the only place where pytest-ragmetrics does I/O.

``base`` defines the contract (:class:`JudgeRequest` in, :class:`JudgeAnswer` out); ``openai_judge``
talks to any OpenAI-compatible server; ``cache`` and ``store`` keep answers on disk.

PYTEST_DONT_REWRITE
"""
