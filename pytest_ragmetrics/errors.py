"""Exceptions raised by pytest-ragmetrics. All derive from :class:`RagMetricsError`.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import threading
import warnings

#: The exit code of every command for a usage error (a :class:`ConfigError`): pytest's, 4.
EXIT_USAGE = 4


class RagMetricsError(Exception):
    """Base class for every error this package raises on purpose.

    The message passes through :func:`~pytest_ragmetrics.redact.redact`: an error never shows a URL's
    credentials, a configured API key or a bearer token, whatever text it quotes (a server's answer,
    a base URL).
    """

    def __init__(self, *args: object) -> None:
        if args and isinstance(args[0], str):
            from .redact import redact

            args = (redact(args[0]), *args[1:])
        super().__init__(*args)


class ConfigError(RagMetricsError, ValueError):
    """A setting has a value we cannot use; the message names the setting and the accepted values.

    ``setting`` names the refused setting as it was written where its value was given
    (``rag_concurrency`` in an ini file, ``--rag-concurrency``, ``RAGMETRICS_CONCURRENCY``,
    ``Settings.concurrency``) when the error is about one setting's value: the pytest run tells by it
    whether to say which configuration file the value is in.
    """

    def __init__(self, *args: object, setting: str | None = None) -> None:
        super().__init__(*args)
        self.setting = setting


class InvalidSample(RagMetricsError, ValueError):
    """A sample cannot be scored on a metric (no reference for recall, say); names the sample.

    ``field`` names the offending field when there is one (``"contexts[0]"``).
    """

    field: str | None = None


class JudgeError(RagMetricsError):
    """The judge could not produce a usable judgment.

    ``cause`` keeps the low-level exception (from the HTTP client, say) for debugging; it is not
    chained, so a test failure shows our message rather than the SDK's traceback.
    """

    cause: BaseException | None = None


class InvalidJudgeAnswer(JudgeError):
    """The judge answered, but the answer does not conform to the request's schema (after re-asks)."""


class JudgeUnavailable(JudgeError):
    """The judge cannot be reached or is not configured (no API key, retries exhausted, ...)."""


class JudgeCallCapReached(JudgeUnavailable):
    """A spending cap of the run (``max_judge_calls``, ``max_judge_tokens``) is reached: nothing more
    is sent to the judge."""


class JudgmentNotRecorded(JudgeError):
    """Replay mode: the judgment is in neither the cache nor the judgment store."""


class JudgmentPending(JudgeError):
    """Batch export (``--rag-batch=PATH``): judgments recorded nowhere yet, whose requests were written
    to the batch file ``path`` instead of being sent (``count`` of them). A test that meets one ends
    as skipped."""

    def __init__(self, count: int, path: str) -> None:
        self.count = count
        self.path = path
        super().__init__(
            f"{count} judgment(s) not recorded yet: their requests are in the batch file {path}; "
            "submit it, import its results, then run again"
        )


class RagMetricsWarning(UserWarning):
    """Something degraded but the run can go on (e.g. the disk cache is unusable)."""


class WarnOnce:
    """The warnings a long-lived object (the local cache, the judgment store) gives once per topic:
    a damaged entry that every test meets is told once, not once a test. Like an error's message,
    the warning's passes through :func:`~pytest_ragmetrics.redact.redact`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._said: set[str] = set()

    def __call__(self, topic: str, message: str) -> None:
        with self._lock:
            if topic in self._said:
                return
            self._said.add(topic)
        from .redact import redact

        # Shown at the code that met the problem, two calls above the one that said it.
        warnings.warn(redact(message), RagMetricsWarning, stacklevel=4)
