"""The engine: turns samples into metric results through the (cached) judge, with or without pytest.

All judging runs on one background event loop owned by a :class:`LoopRunner`, so synchronous test code,
code already inside an event loop (``aevaluate``) and several tests share one HTTP client and one
concurrency limit, and nothing ever nests event loops.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import hashlib
import json
import operator
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from . import _scope
from ._aio import Escaped, each_bounded, map_bounded
from .errors import ConfigError, InvalidJudgeAnswer, JudgeCallCapReached, JudgmentPending, RagMetricsError
from .judge.base import JudgeAnswer, plain_json_encoder, text_json, unfrozen
from .judging_loop import LoopRunner
from .kinds import answer_classes
from .metrics.builtin import Metric, ScoringContext, check_method
from .results import MetricResult, aggregate
from .sample import RagSample, as_samples
from .settings import Settings, default_cache_dir, from_env, wording
from .specs import format_metric, format_sampling, registered_metrics
from .text import PunktSplitter, normalize_text  # stdlib only: nltk loads when a splitter is built

if TYPE_CHECKING:
    from .judge.base import Judge, JudgeAnswer, JudgeRequest
    from .judge.batch import BatchExport
    from .judge.cache import CachedJudge, CacheMode
    from .judge.stats import JudgeStats
    from .judging_loop import Handed
    from .text import Splitter

_UNKNOWN = object()


def parse_metric_spec(spec: str | tuple[str, str | None]) -> tuple[str, str | None]:
    """``"context_relevance[graded]"`` or ``("context_relevance", "graded")`` -> (metric, method).

    The syntax is :func:`pytest_ragmetrics.specs.parse_metric_name`'s; ``ndcg@5`` -> ``("ndcg@5", None)``.
    """
    if isinstance(spec, tuple):
        return spec[0], spec[1]
    from .specs import parse_metric_name

    try:
        return parse_metric_name(spec).key
    except ConfigError as exc:
        raise ValueError(str(exc)) from None


@dataclass
class EvaluationResult:
    """Results of :func:`evaluate`: per sample and metric, plus per-metric aggregates.

    ``errors`` maps a sample id to ``{metric name: error}`` for the evaluations that failed (only
    with ``errors="collect"``; by default the first failure is raised); ``results`` and
    ``aggregates`` then hold what succeeded.
    """

    samples: list[RagSample]
    results: dict[str, dict[str, MetricResult]]
    aggregates: dict[str, dict[str, Any]] = field(default_factory=dict)
    errors: dict[str, dict[str, RagMetricsError]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every (sample, metric) was scored."""
        return not self.errors

    def __getitem__(self, sample_id: str) -> dict[str, MetricResult]:
        return self.results[sample_id]

    def scores(self, metric: str) -> list[float]:
        """Per-sample scores of one metric name (``context_relevance[graded]`` form), in sample order;
        samples without a score (``no_claims``) are left out (see :meth:`outcomes`)."""
        return [r[metric].score for r in self.results.values() if metric in r and r[metric].scored]

    def outcomes(self, metric: str) -> dict[str, str]:
        """Sample id -> outcome of the samples of one metric name that have no score (``no_claims``)."""
        return {
            sid: str(r[metric].outcome)
            for sid, r in self.results.items()
            if metric in r and r[metric].outcome is not None
        }

    def misled(self) -> dict[str, list[dict[str, Any]]]:
        """Sample id -> the answer claims a retrieved chunk supports but the reference does not, for
        the samples scored on both faithfulness and answer correctness (no judge call: see
        :func:`~pytest_ragmetrics.metrics.answer.misled_claims`)."""
        from .metrics.answer import misled_claims

        out: dict[str, list[dict[str, Any]]] = {}
        for sid, results in self.results.items():
            faithful = next((r for r in results.values() if r.metric == "faithfulness"), None)
            correct = next((r for r in results.values() if r.metric == "answer_correctness"), None)
            if faithful is None or correct is None:
                continue
            claims = misled_claims(
                [v.to_json() for v in faithful.verdicts], [v.to_json() for v in correct.verdicts]
            )
            if claims:
                out[sid] = claims
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "samples": {
                sid: {name: r.to_json() for name, r in rs.items()} for sid, rs in self.results.items()
            },
            "aggregates": self.aggregates,
            "errors": {
                sid: {name: f"{type(e).__name__}: {e}" for name, e in es.items()}
                for sid, es in self.errors.items()
            },
        }


# Every metric of a sample normalizes the same question and chunks again: remember recent texts.
_normalize = functools.lru_cache(maxsize=4096)(normalize_text)


class _Context:
    """The :class:`~pytest_ragmetrics.metrics.builtin.ScoringContext` the engine hands to metrics."""

    __slots__ = ("_evaluator", "prompt_versions", "settings", "split_used")

    #: The normalized form of a text (remembered: every metric of a sample asks again).
    normalize = staticmethod(_normalize)

    def __init__(self, evaluator: Evaluator) -> None:
        self._evaluator = evaluator
        self.settings = evaluator.settings
        #: What the score was made with, for telling whether two runs' scores can be compared.
        self.prompt_versions: set[str] = set()
        self.split_used = False

    def split(self, text: str) -> list[str]:
        self.split_used = True
        return self._evaluator.splitter(text)

    @property
    def splitter_fingerprint(self) -> str | None:
        # A judgment keyed on the splitter depends on it even when its sentences come recorded.
        self.split_used = True
        return self._evaluator.splitter_fingerprint

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        self.prompt_versions.add(request.prompt_version)
        answer = await self._evaluator.judge.judge(request)
        self._evaluator.note_answer(request, answer)
        return answer

    async def judge_many(
        self, requests: Sequence[JudgeRequest], skip: Callable[[JudgeRequest], bool] | None = None
    ) -> list[JudgeAnswer | None]:
        evaluator = self._evaluator
        keys = [request.cache_key() for request in requests]
        answers = await evaluator.judge.judge_many(requests, skip, keys)
        self.prompt_versions.update(map(_prompt_version, requests))
        evaluator.note_answers(requests, answers, keys)
        return answers


_prompt_version = operator.attrgetter("prompt_version")


@functools.lru_cache(maxsize=1024)
def decision(kind: str, classes: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    """What a judgment decided, as noted in :attr:`Evaluator.answers`: one shared ``(kind, classes)``
    pair per distinct decision, as a large run notes tens of thousands of judgments that decide a
    handful of things."""
    return kind, classes


class _CountingJudge:
    """Counts calls, tokens and time for a judge that keeps no figures of its own (a scripted one)."""

    def __init__(self, inner: Judge, stats: JudgeStats, how_to_set: Callable[[str, Any], str]) -> None:
        self.inner = inner
        self.stats = stats
        self.how_to_set = how_to_set

    async def judge(self, request: JudgeRequest) -> JudgeAnswer:
        if not self.stats.take_call():  # the run's spending caps hold for any judge
            assert self.stats.budget is not None  # only a budget refuses
            label = request.label or request.kind
            raise JudgeCallCapReached(self.stats.budget.refusal(label, self.how_to_set))
        with self.stats.timer():
            pending = self.inner.judge(request)
            if not hasattr(pending, "__await__"):  # inspect.isawaitable, without importing inspect
                raise TypeError(f"the judge {type(self.inner).__name__}: judge() must be an async def")
            answer = await pending
        if not isinstance(answer, JudgeAnswer):  # a judge of one's own: say which, not what broke after
            raise InvalidJudgeAnswer(
                f"the judge {type(self.inner).__name__} gave {type(answer).__name__} {answer!r:.60} for "
                f"{request.label or request.kind}; expected a JudgeAnswer"
            )
        self.stats.record_call(answer.usage)
        return answer

    async def aclose(self) -> None:
        close = getattr(self.inner, "aclose", None)
        if close is not None:
            await close()


class ScoresAhead(Protocol):
    """Holds results started before they were asked for (the pytest plugin's prefetching)."""

    def claim(
        self, evaluator: Evaluator, sample: RagSample, metric: str, method: str | None
    ) -> Handed[MetricResult] | None:
        """The future of this score if it was started ahead (it is handed out once), else ``None``.

        Called for every single-sample score, so it also learns which scores a test asks for.
        """
        ...


class LabelledScorer(Protocol):
    """Scores a sample from a person's labelled verdicts instead of the judge's (the judge check's
    labelled set, :class:`~pytest_ragmetrics.calibration.labelled.LabelAnswers`)."""

    async def score(
        self, metric: Metric, sample: RagSample, method: str | None, ctx: ScoringContext
    ) -> float | None:
        """``metric``'s score of ``sample`` with the labels as its verdicts, or None when not labelled."""
        ...


class SamplesScored(Protocol):
    """Keeps the samples a run scored (the pytest plugin's controls draw from them)."""

    def add(self, sample: RagSample, key: str | None) -> None:
        """A sample was scored; ``key`` is its content key."""
        ...


class Evaluator:
    """Computes metrics for samples with one configuration.

    ``judge`` replaces the configured judge (it still sits behind the cache and store as configured by
    ``settings.cache``); ``hook`` is a pluggy hook relay (pytest's ``config.hook`` inside pytest, else
    :func:`~pytest_ragmetrics.builtin_hooks.plugin_manager`'s). ``stats`` and ``runner`` can be shared
    between evaluators; ``run`` names the run the evaluator judges for (the xdist workers of one pytest
    run share it: see :class:`~pytest_ragmetrics.judge.cache.CachedJudge`). Use it as a context
    manager, or call :meth:`close`, to let the judgments in flight finish and sort the judgment store.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        judge: Judge | None = None,
        splitter: Splitter | None = None,
        hook: Any = None,
        stats: JudgeStats | None = None,
        runner: LoopRunner | None = None,
        default_cache_dir: str | Path | None = None,
        run: str | None = None,
    ) -> None:
        self.settings = settings or from_env()
        self._run = run
        in_pytest, command_line = _scope.in_pytest(), _scope.command_line.get()
        #: How this evaluator's messages tell a person to set a setting: pytest options, the pytest
        #: configuration (in a command) or Settings.
        self.how_to_set = wording(in_pytest, command_line)
        if not in_pytest:  # a script or a command: inside pytest, the plugin warns at startup
            from .settings import advice

            for note in advice(self.settings, in_pytest=False, command_line=command_line):
                import warnings

                from .errors import RagMetricsWarning

                warnings.warn(note, RagMetricsWarning, stacklevel=2)
        self._judge_override = judge
        self._splitter = None if splitter is None else _checked_splitter(splitter)
        self._hook = hook
        self._stats = stats
        # Evaluators given the run's figures (a pytest run's) leave them to the run to report.
        self._owns_stats = stats is None
        self._owns_runner = runner is None
        self.runner = runner or LoopRunner()
        self._default_cache_dir = default_cache_dir
        self._cached_judge: CachedJudge | None = None
        self._metrics: dict[str, Metric] | None = None
        self._fingerprint: object = _UNKNOWN
        self._identity: str | None = None  # splitter_identity(self.splitter), once known
        self._cut: dict[str, Metric] = {}  # "ndcg@5" -> the ndcg family cut at 5
        self._lock = threading.Lock()
        #: Results judged ahead of time, asked first by :meth:`score` (see :class:`ScoresAhead`).
        self.ahead: ScoresAhead | None = None
        #: What every judgment the metrics asked for decided, by cache key: (kind, answer classes),
        #: noted for a run that checks how its judge's answers are spread (the pytest plugin's sets
        #: a dict here). None: nobody reads them, so a script's evaluation notes nothing.
        self.answers: dict[str, tuple[str, tuple[str, ...]]] | None = None
        #: Where the judge records the keys of the judgments it served (the pytest plugin's run gives
        #: its own set); None: a set of the judge's own.
        self.used_keys: set[str] | None = None
        #: A labelled set: each judged result also gets the score the labels give (``labelled``).
        self.labelled: LabelledScorer | None = None
        #: ``--rag-batch``: the run's batch export, which takes the requests instead of the judge.
        self.batch: BatchExport | None = None
        #: Told of every sample scored with the judge (the controls' pool), when set.
        self.scored: SamplesScored | None = None

    @contextlib.contextmanager
    def noting_nothing(self) -> Iterator[None]:
        """Judge within it without noting what the judgments decided (:attr:`answers`): a labelled
        set's items and the controls say nothing about how the run's own judgments were spread."""
        noted, self.answers = self.answers, None
        try:
            yield
        finally:
            self.answers = noted

    def note_answer(self, request: JudgeRequest, answer: JudgeAnswer) -> None:
        """Remember what a judgment decided (a few short strings), so the run can tell a judge that
        answers everything alike: in :attr:`answers`, when it is a dict."""
        self.note_answers((request,), (answer,))

    def note_answers(
        self,
        requests: Sequence[JudgeRequest],
        answers: Sequence[JudgeAnswer | None],
        keys: Sequence[str] | None = None,
    ) -> None:
        """:meth:`note_answer` for each request that has an answer (not ``None``); ``keys`` are the
        requests' cache keys, when the caller has them already."""
        noted = self.answers
        if noted is None:
            return
        if keys is None:
            keys = [request.cache_key() for request in requests]
        for request, answer, key in zip(requests, answers, keys, strict=True):
            # One key, one answer within a run (sentence and binary relevance share it).
            if answer is not None and key not in noted:
                noted[key] = decision(request.kind, answer_classes(request, answer.choices))

    def scoring_context(self) -> ScoringContext:
        """The context metrics score in: settings, splitting, normalizing and cached judging."""
        return _Context(self)

    # -- lazily built parts ------------------------------------------------------------------
    @property
    def hook(self) -> Any:
        if self._hook is None:
            from .builtin_hooks import plugin_manager

            self._hook = plugin_manager().hook
        return self._hook

    @property
    def stats(self) -> JudgeStats:
        if self._stats is None:
            from .judge.stats import JudgeStats

            calls, tokens = self.settings.max_judge_calls, self.settings.max_judge_tokens
            if calls is None and tokens is None:
                self._stats = JudgeStats()
            else:
                from .judge.budget import JudgeBudget

                self._stats = JudgeStats(budget=JudgeBudget(calls, tokens))
        return self._stats

    @property
    def splitter(self) -> Splitter:
        if self._splitter is None:
            splitter = self.hook.pytest_ragmetrics_make_splitter(settings=self.settings)
            if splitter is None:
                raise ConfigError("no sentence splitter: every pytest_ragmetrics_make_splitter returned None")
            self._splitter = _checked_splitter(splitter)
        return self._splitter

    @property
    def splitter_fingerprint(self) -> str | None:
        """The splitter's identity (its ``fingerprint``), or ``None`` for a splitter without one."""
        if self._fingerprint is _UNKNOWN:
            fingerprint = getattr(self.splitter, "fingerprint", None)
            self._fingerprint = fingerprint if isinstance(fingerprint, str) and fingerprint else None
        return cast("str | None", self._fingerprint)

    @property
    def metrics(self) -> dict[str, Metric]:
        if self._metrics is None:
            found: dict[str, Metric] = {}
            for metric in registered_metrics(self.hook.pytest_ragmetrics_metrics()):
                if metric.name in found:
                    raise ConfigError(f"metric {metric.name!r} is registered twice")
                found[metric.name] = metric
            self._metrics = found
        return self._metrics

    def _make_inner_judge(self) -> Judge:
        judge = self._judge_override
        if judge is None:
            judge = self.hook.pytest_ragmetrics_make_judge(settings=self.settings)
            if judge is None:
                raise ConfigError("no judge: every pytest_ragmetrics_make_judge implementation returned None")
        if not callable(getattr(judge, "judge", None)):
            raise ConfigError(
                f"the judge {type(judge).__name__} {judge!r:.60} is no judge: a judge has an async "
                "judge(request) returning a JudgeAnswer"
            )
        from .judge.stats import JudgeStats

        if isinstance(getattr(judge, "stats", None), JudgeStats):
            judge.stats = self.stats  # type: ignore[union-attr]  # it counts calls, retries, re-asks itself
            return judge
        return _CountingJudge(judge, self.stats, self.how_to_set)

    @property
    def cache_dir(self) -> str:
        return str(self.settings.cache_dir or self._default_cache_dir or default_cache_dir())

    @property
    def judge(self) -> CachedJudge:
        """The judge behind the cache and judgment store (built on first use)."""
        judge = self._cached_judge
        if judge is not None:
            return judge
        with self._lock:
            if self._cached_judge is None:
                from .judge.cache import CachedJudge
                from .judge.store import JudgmentStore

                store = JudgmentStore(self.settings.store_dir) if self.settings.store_dir else None
                if self.settings.batch and self.batch is None:
                    raise ConfigError(
                        "a batch export is written by a pytest run of the tests (pytest --rag-batch=PATH), "
                        "not by one that only sets them up (--setup-only, --setup-plan); outside pytest, "
                        "unset the batch setting"
                    )
                self._cached_judge = CachedJudge(
                    self._make_inner_judge,
                    mode=cast("CacheMode", self.settings.cache),  # validated by the settings
                    cache_dir=self.cache_dir,
                    store=store,
                    stats=self.stats,
                    concurrency=self.settings.concurrency,
                    run=self._run,
                    how_to_set=self.how_to_set,
                    batch=self.batch,
                    used_keys=self.used_keys,
                )
            return self._cached_judge

    @property
    def built_judge(self) -> CachedJudge | None:
        """The cached judge if anything has been judged yet, else None (nothing is built)."""
        return self._cached_judge

    def metric(self, name: str) -> Metric:
        """The registered metric ``name``; ``ndcg@5`` is the ``ndcg`` family's ``at(5)``."""
        found = self.metrics.get(name) or self._cut.get(name)
        if found is not None:
            return found
        from .specs import MetricCatalog, parse_metric_name

        try:
            parsed = parse_metric_name(name)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        family = self.metrics.get(parsed.name)
        if family is None or parsed.method is not None:
            raise ValueError(f"unknown metric {name!r}; registered: {', '.join(sorted(self.metrics))}")
        try:
            MetricCatalog.of([family]).check(parsed)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None
        at = getattr(family, "at", None)
        if parsed.k is None or at is None:
            raise ValueError(f"metric {parsed.name!r} takes @k but has no at(k) method to cut it off")
        cut: Metric = at(parsed.k)
        self._cut[name] = cut
        return cut

    # -- scoring -----------------------------------------------------------------------------
    async def _score(
        self, sample: RagSample, name: str, method: str | None, metric: Metric | None = None
    ) -> MetricResult:
        """Score one sample: the metric asks the (cached) judge for its judgments.

        ``metric``: the metric ``name`` denotes, when the caller has looked it up and checked
        ``method`` for it already (an evaluation does so once per metric, not once per sample).
        """
        if not isinstance(sample, RagSample):
            raise TypeError(f"expected a RagSample, got {type(sample).__name__}")
        if metric is None:
            metric = self.metric(name)
            method = check_method(metric, method)
        ctx = _Context(self)
        try:
            pending = metric.score(sample, method, ctx)
            if not hasattr(pending, "__await__"):  # a result, a number: not an async def's coroutine
                raise TypeError(
                    f"metric {metric.name!r}: score() must be an async def; it returned "
                    f"{type(pending).__name__} {pending!r:.60}"
                )
            scored = await pending
        except (KeyboardInterrupt, SystemExit) as exc:  # a custom metric's, out of any task between
            raise Escaped(exc) from None
        if not isinstance(scored, MetricResult):  # a custom metric's: say which, not what broke after
            raise TypeError(
                f"metric {metric.name!r}: score() returned {type(scored).__name__} {scored!r:.60}, "
                "expected a MetricResult"
            )
        result = self._finish(metric, sample, scored, ctx)
        if getattr(metric, "uses_judge", True):
            if self.scored is not None:
                self.scored.add(sample, result.sample_key)
            if self.labelled is not None:
                labelled = await self.labelled.score(metric, sample, method, ctx)
                if labelled is not None:
                    result = _filled_in(result, labelled=labelled)
        return result

    def _finish(
        self, metric: Metric, sample: RagSample, result: MetricResult, ctx: _Context | None = None
    ) -> MetricResult:
        """``result`` with the judge models it rests on, the sample's content keys and, from ``ctx``,
        the prompt versions and splitter it was made with."""
        sampling: str | None
        if not getattr(metric, "uses_judge", True):
            judges: tuple[str, ...] = ()
            sampling = None
        elif result.method == "graded" and result.metric == "context_relevance":
            judges, sampling = self._graded_models, self._graded_sampling
        else:
            judges, sampling = self._judge_models, self._sampling
        hit = _SAMPLE_KEYS.get(id(sample))  # _sample_keys(sample), without a call when known
        keys = hit[1] if hit is not None and hit[0] is sample else _sample_keys(sample)
        if ctx is None:
            return _finished(result, judges, keys[0], keys[1], (), None, sampling)
        versions = ctx.prompt_versions
        return _finished(
            result,
            judges,
            keys[0],
            keys[1],
            tuple(versions) if len(versions) < 2 else tuple(sorted(versions)),
            self._splitter_identity() if ctx.split_used else None,
            sampling,
        )

    @functools.cached_property
    def _judge_models(self) -> tuple[str, ...]:
        return (self.settings.judge_model,)

    @functools.cached_property
    def _graded_models(self) -> tuple[str, ...]:
        return self.settings.models_for_graded

    @functools.cached_property
    def _sampling(self) -> str:
        s = self.settings
        return format_sampling(s.temperature, s.seed, s.judge_n)

    @functools.cached_property
    def _graded_sampling(self) -> str:
        # Graded relevance is asked at its own temperature (see judgments.KINDS' parameters).
        s = self.settings
        return format_sampling(s.graded_temperature, s.seed, s.judge_n)

    def _splitter_identity(self) -> str:
        identity = self._identity
        if identity is None:
            identity = self._identity = splitter_identity(self.splitter)
        return identity

    async def _score_many(
        self, samples: Sequence[RagSample], name: str, method: str | None
    ) -> list[MetricResult]:
        metric = self.metric(name)
        now = getattr(metric, "score_now", None)
        if now is not None and not getattr(metric, "uses_judge", True):
            # Pure arithmetic (label metrics): nothing to wait for, so no task per sample.
            check_method(metric, method)
            for sample in samples:
                if not isinstance(sample, RagSample):
                    raise TypeError(f"expected a RagSample, got {type(sample).__name__}")
            return [self._finish(metric, sample, now(sample)) for sample in samples]
        if self.batch is None:
            jobs = self._jobs
            return await map_bounded(lambda i: self._score(samples[i], name, method), len(samples), jobs)
        # A batch export: every sample writes what it needs, whichever others are pending too.
        pending: list[JudgmentPending] = []

        async def score_or_pend(i: int) -> MetricResult | None:
            try:
                return await self._score(samples[i], name, method)
            except JudgmentPending as exc:
                pending.append(exc)
                return None

        results = await map_bounded(score_or_pend, len(samples), self._jobs)
        if pending:
            raise JudgmentPending(sum(p.count for p in pending), pending[0].path)
        return cast("list[MetricResult]", results)

    @property
    def _jobs(self) -> int:
        """Evaluations run at once: enough to keep every allowed judge call busy, no more."""
        return max(64, 4 * (self.settings.concurrency or 16))

    async def ascore(self, sample: RagSample, metric: str, method: str | None = None) -> MetricResult:
        """Score one sample (awaitable from any event loop)."""
        return await self.runner.arun(self._score(sample, metric, method))

    def score(self, sample: RagSample, metric: str, method: str | None = None) -> MetricResult:
        """Score one sample on the judging loop, blocking until the judge has answered.

        A score the pytest plugin started ahead for this test (a golden set's next samples) is
        taken instead of starting it again: the same coroutine, started earlier.
        """
        __tracebackhide__ = True
        ahead = self.ahead
        if ahead is not None:
            future = ahead.claim(self, sample, metric, method)
            if future is not None:
                return self.runner.wait(future)
        return self.runner.run(self._score(sample, metric, method))

    def submit_score(self, sample: RagSample, metric: str, method: str | None = None) -> Handed[MetricResult]:
        """Start scoring one sample on the judging loop; what it returns holds the result (or the
        error): ``result(timeout=None)``, ``cancel()``, ``cancelled()``, ``done()`` and
        ``add_done_callback()``, as a ``concurrent.futures.Future`` (which it is not: from async code,
        await :meth:`ascore`)."""
        return self.runner.submit(self._score(sample, metric, method))

    def submit_scores(
        self, scores: Sequence[tuple[RagSample, str, str | None]], *, until_started: bool = False
    ) -> list[Handed[MetricResult]]:
        """Start several ``(sample, metric, method)`` scores on the judging loop, in order, with one
        hand-over to its thread; each future holds its result (or its error). ``until_started``: see
        :meth:`LoopRunner.submit_many`."""
        return self.runner.submit_many(
            [self._score(sample, metric, method) for sample, metric, method in scores],
            until_started=until_started,
        )

    def score_many(
        self, samples: Sequence[RagSample], metric: str, method: str | None = None
    ) -> list[MetricResult]:
        """Score several samples concurrently (bounded by the judge's concurrency)."""
        __tracebackhide__ = True
        return self.runner.run(self._score_many(samples, metric, method))

    async def _evaluate(
        self, samples: Sequence[RagSample], specs: list[tuple[str, str | None]], errors: str = "raise"
    ) -> EvaluationResult:
        if errors not in ("raise", "collect"):
            raise ConfigError(f"evaluate(errors=...) must be 'raise' or 'collect'; got {errors!r}")
        ids = _sample_ids(samples)
        for name, method in specs:
            check_method(self.metric(name), method)  # fail before judging anything
        table = await self._score_table(samples, specs)
        # Keyed by each result's own name, so a method a metric chose itself (the configured
        # default) is spelled out: "context_relevance[graded]".
        spelled: dict[tuple[str, str | None], str] = {}
        results: dict[str, dict[str, MetricResult]] = {}
        missed: list[tuple[str, tuple[str, str | None], RagMetricsError]] = []
        outcomes = iter(table)
        for sid in ids:
            results[sid] = scored = {}
            for spec in specs:
                outcome = next(outcomes)
                if isinstance(outcome, MetricResult):
                    spelled[spec] = name = outcome.name
                    scored[name] = outcome
                else:
                    missed.append((sid, spec, outcome))
        failed: dict[str, dict[str, RagMetricsError]] = {}
        for sid, spec, error in missed:
            failed.setdefault(sid, {})[spelled.get(spec) or format_metric(*spec)] = error
        if failed and errors == "raise":
            raise next(e for es in failed.values() for e in es.values())
        labels = list(dict.fromkeys(spelled[spec] for spec in specs if spec in spelled))
        aggregates = {
            label: _aggregate([results[sid][label] for sid in ids if label in results[sid]])
            for label in labels
        }
        return EvaluationResult(list(samples), results, aggregates, failed)

    async def _score_table(
        self, samples: Sequence[RagSample], specs: list[tuple[str, str | None]]
    ) -> list[MetricResult | RagMetricsError]:
        """Every (sample, metric) outcome: ``[i * len(specs) + j]`` is sample ``i`` on ``specs[j]``; a
        failure is its own outcome, not the others'.

        :data:`EVALUATION_BLOCK` samples at a time, metric by metric within them: the judgments the
        metrics of one sample share (a chunk's sentence selection serves sentence and binary
        relevance) are still among the answers in memory when the second metric asks, however many
        samples the run has (read and checked once, not read again from disk), and one metric runs
        over many samples in a row. One failure does not cancel the others: every answer that
        arrives is recorded (cache and store), so what was paid for is never paid again. Bugs
        (other exceptions) still cancel.
        """
        width = len(specs)
        table: list[MetricResult | RagMetricsError | None] = [None] * (len(samples) * width)
        judged: list[tuple[int, str, str | None]] = []
        for j, (name, method) in enumerate(specs):
            metric = self.metric(name)
            now = getattr(metric, "score_now", None)
            if now is None or getattr(metric, "uses_judge", True):
                judged.append((j, name, method))
                continue
            # Pure arithmetic (label metrics): nothing to wait for, so no coroutine per sample.
            for i, sample in enumerate(samples):
                try:
                    table[i * width + j] = self._finish(metric, sample, now(sample))
                except RagMetricsError as exc:
                    table[i * width + j] = exc
        if judged:
            # Each metric looked up and its method checked once, for every sample.
            metrics = [self.metric(name) for _, name, _ in judged]
            resolved = [
                (j, name, check_method(metric, method), metric)
                for (j, name, method), metric in zip(judged, metrics, strict=True)
            ]
            jobs = (
                (i * width + j, samples[i], name, method, metric)
                for start in range(0, len(samples), EVALUATION_BLOCK)
                for j, name, method, metric in resolved
                for i in range(start, min(start + EVALUATION_BLOCK, len(samples)))
            )

            async def settled(job: tuple[int, RagSample, str, str | None, Metric]) -> None:
                at, sample, name, method, metric = job
                try:
                    table[at] = await self._score(sample, name, method, metric)
                except RagMetricsError as exc:
                    table[at] = exc

            await each_bounded(settled, jobs, len(samples) * len(judged), self._jobs)
        return cast("list[MetricResult | RagMetricsError]", table)

    async def aevaluate(
        self,
        samples: Iterable[RagSample],
        metrics: Sequence[str | tuple[str, str | None]] | None = None,
        *,
        errors: str = "raise",
    ) -> EvaluationResult:
        """Async twin of :meth:`evaluate` for code already running inside an event loop."""
        batch, specs = _evaluate_args(samples, metrics)
        return await self.runner.arun(self._evaluate(batch, specs, errors))

    def evaluate(
        self,
        samples: Iterable[RagSample],
        metrics: Sequence[str | tuple[str, str | None]] | None = None,
        *,
        errors: str = "raise",
    ) -> EvaluationResult:
        """Judge every (sample, metric) concurrently: per-sample results and (n, mean, min, max).

        A failed evaluation (a judge error, an unusable sample) does not stop the others, so every
        answer that arrives is recorded. ``errors="raise"`` (default) then raises the first failure;
        ``errors="collect"`` returns what succeeded, with the failures in
        :attr:`EvaluationResult.errors` (sample id -> metric name -> error).
        """
        batch, specs = _evaluate_args(samples, metrics)
        return self.runner.run(self._evaluate(batch, specs, errors))

    def close(self, *, wait: bool = True) -> None:
        """Close the judge's client and the cache; stop the event loop if this evaluator owns it.

        The answers to requests already sent are awaited (for up to 30 seconds) and recorded; a
        Ctrl-C meanwhile, or ``wait=False``, drops them instead. The answers received are recorded
        either way, and the ``KeyboardInterrupt`` goes on once the cache is closed.
        """
        judge, self._cached_judge = self._cached_judge, None
        try:
            if judge is not None:
                with contextlib.suppress(RuntimeError):  # the loop is already gone: nothing left to close
                    try:
                        self.runner.run(judge.aclose(wait=wait))
                    except KeyboardInterrupt:
                        self.runner.run(judge.aclose(wait=False))
                        raise
        finally:
            if self._owns_runner:
                self.runner.close()
        stats = self._stats
        if judge is None or not self._owns_stats or stats is None:
            return
        # A pytest run ends with this line and exit 1; a script has only this warning to say that a
        # committed store lacks judgments CI replay will ask for (each of them told once).
        untold, why = stats.unrecorded_untold()
        if untold:
            import warnings

            from .errors import RagMetricsWarning

            warnings.warn(
                f"recording failed: {why}; {untold} judgment(s) were not recorded for replay",
                RagMetricsWarning,
                stacklevel=2,
            )

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            # Ctrl-C: the wait for the answers already sent is said, and Ctrl-C again ends it in one
            # line, as at a script's exit; the first Ctrl-C goes on as it came.
            _close_at_exit(self)
        else:
            self.close()


def _aggregate(results: Sequence[MetricResult]) -> dict[str, Any]:
    """n, mean, min, max over the scored results; ``no_claims`` counts those without a score."""
    scores = [r.score for r in results if r.outcome is None]  # the scored ones (MetricResult.scored)
    return aggregate(scores, no_claims=len(results) - len(scores))


DEFAULT_METRICS = ("context_precision", "context_recall", "context_relevance[graded]")


def _evaluate_args(
    samples: Iterable[RagSample], metrics: Sequence[str | tuple[str, str | None]] | None
) -> tuple[list[RagSample], list[tuple[str, str | None]]]:
    batch, _ = as_samples(list(samples))
    specs = [parse_metric_spec(m) for m in (metrics or DEFAULT_METRICS)]
    return batch, specs


#: Samples :meth:`Evaluator.evaluate` takes at a time, every metric over them in turn: the answers
#: kept in memory (512) hold the judgments two metrics of a sample share for samples of up to 32
#: chunks, so such a judgment is read from disk once however large the run.
EVALUATION_BLOCK = 16

_RESULT_FIELDS = tuple(f.name for f in dataclasses.fields(MetricResult))


def _filled_in(result: MetricResult, **fields: Any) -> MetricResult:
    """``dataclasses.replace(result, **fields)`` for fields the engine fills in, without replace's
    per-call look at the fields and a second check of a score that does not change."""
    filled = object.__new__(MetricResult)
    for name in _RESULT_FIELDS:
        object.__setattr__(filled, name, fields[name] if name in fields else getattr(result, name))
    return filled


def _copier(*filled: str) -> Callable[..., MetricResult]:
    """``_filled_in(result, **dict(zip(filled, values)))`` written out field by field, for the fields
    the engine fills in on every result (a warm run finishes thousands): no loop, no keywords.

    The copy is made as an object of the plain class with the same slots that a result is built
    under (see :func:`~pytest_ragmetrics.judge.base.quick_init`), whose fields are set as any
    attribute is, and then takes its own class: a frozen dataclass refuses plain assignment, and
    setting each field through its slot's descriptor costs a call per field (about four times the
    whole copy made this way). The two classes have one layout, so the copy is a ``MetricResult``
    like any other.
    """
    twin = unfrozen(MetricResult)
    assert twin is not None  # the layout of a result takes it (quick_init uses it to build one)
    lines = [f"def copy(result, {', '.join(filled)}):", "    new = new_result(Unfrozen)"]
    lines += [f"    new.{n} = {n if n in filled else 'result.' + n}" for n in _RESULT_FIELDS]
    lines += ["    new.__class__ = MetricResult", "    return new"]
    namespace: dict[str, Any] = {"new_result": object.__new__, "Unfrozen": twin}
    namespace["MetricResult"] = MetricResult
    exec("\n".join(lines), namespace)  # our own field names, fixed at import
    return cast("Callable[..., MetricResult]", namespace["copy"])


#: ``result`` with the judge models, content keys, prompt versions, splitter and sampling filled in.
_finished = _copier("judges", "sample_key", "reference_key", "prompt_versions", "splitter", "sampling")

# The content keys of the samples scored lately, by identity: every metric of a sample asks again.
# An entry holds its sample (immutable), so the id is not reused while it is here.
_SAMPLE_KEYS: dict[int, tuple[RagSample, tuple[str, str]]] = {}


def _sample_keys(sample: RagSample) -> tuple[str, str]:
    """The sample's content key and reference key (see :class:`MetricResult`)."""
    hit = _SAMPLE_KEYS.get(id(sample))
    if hit is not None and hit[0] is sample:
        return hit[1]
    keys = (_compute_sample_key(sample), _compute_reference_key(sample))
    if len(_SAMPLE_KEYS) >= 1024:
        _SAMPLE_KEYS.clear()
    _SAMPLE_KEYS[id(sample)] = (sample, keys)
    return keys


# json.dumps(material, ensure_ascii=False), with the encoder made once rather than per call.
_material_json = plain_json_encoder(json.JSONEncoder(ensure_ascii=False))


def _sample_json(material: list[Any]) -> str:
    """``json.dumps(material, ensure_ascii=False)``: its texts (a question, the chunks, a reference)
    as :func:`~pytest_ragmetrics.judge.base.text_json` keeps them since the keys of the sample's
    judgments were made, rather than encoded again; anything else through json's C encoder."""
    parts = []
    for value in material:
        if type(value) is str:
            parts.append(text_json(value))
        elif value is None:
            parts.append("null")
        elif type(value) is list and all(type(item) is str for item in value):
            parts.append("[" + ", ".join(map(text_json, value)) + "]")
        else:
            return _material_json(material)
    return "[" + ", ".join(parts) + "]"


def _compute_sample_key(sample: RagSample) -> str:
    material: list[Any] = [sample.question, list(sample.contexts), sample.ground_truth, sample.answer]
    grades = sample.reference_context_ids
    if sample.context_ids is not None or grades is not None or sample.reference_contexts is not None:
        # Labels change label scores, so they tell samples apart; unlabelled samples keep their keys.
        ids = None if sample.context_ids is None else list(sample.context_ids)
        refs = None if sample.reference_contexts is None else list(sample.reference_contexts)
        material += [ids, None if grades is None else sorted(grades.items()), refs]
    return hashlib.sha256(_sample_json(material).encode("utf-8")).hexdigest()[:16]


def _compute_reference_key(sample: RagSample) -> str:
    # What the sample asks and what counts as the right answer, not what was retrieved: two runs of
    # one golden question match on this however differently they retrieved. The answer stands in for
    # a missing reference, as it does for context precision; the labels are the reference of the
    # label metrics (added only when present, so an unlabelled sample's key never changes).
    reference = sample.ground_truth if sample.ground_truth is not None else sample.answer
    material: list[Any] = [sample.question, reference]
    if sample.reference_context_ids is not None:
        material.append(sorted(sample.reference_context_ids.items()))
    if sample.reference_contexts is not None:
        material.append(list(sample.reference_contexts))
    return hashlib.sha256(_sample_json(material).encode("utf-8")).hexdigest()[:16]


def splitter_identity(splitter: Any) -> str:
    """A name for a sentence splitter that changes when its output can: the default Punkt splitter's
    fingerprint of its shipped parameters, else the splitter's module and qualified name."""
    if isinstance(splitter, _CheckedSplitter):
        splitter = splitter.wrapped
    fingerprint = getattr(splitter, "fingerprint", None)
    if isinstance(fingerprint, str) and fingerprint:
        return fingerprint
    target = splitter if callable(splitter) and hasattr(splitter, "__qualname__") else type(splitter)
    return f"{getattr(target, '__module__', '?')}.{getattr(target, '__qualname__', '?')}"


def _sample_ids(samples: Sequence[RagSample]) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    for i, s in enumerate(samples):
        sid = s.id if s.id is not None else f"#{i}"
        if sid in seen:
            raise ValueError(f"two samples share the id {sid!r}; ids must be unique within one evaluation")
        seen.add(sid)
        ids.append(sid)
    return ids


# --- the evaluator used by the module-level functions -------------------------------------------
# Inside a pytest test it is that test's evaluator; outside pytest, one configured from the
# environment, built on first use.

_default: Evaluator | None = None
_default_lock = threading.Lock()


def get_evaluator() -> Evaluator:
    """The current pytest test's evaluator, else a process-wide one configured from the environment."""
    global _default
    from . import _scope

    scope = _scope.current_test.get()
    if scope is not None:
        return scope.evaluator  # type: ignore[no-any-return]
    run = _scope.current_run.get()
    if run is not None:
        return run()  # type: ignore[no-any-return]
    with _default_lock:
        if _default is None:
            _default = Evaluator()
            # It owns a thread, a cache connection and the store's appended shards: a script that
            # never closes it still has its judgments in flight finished and its store sorted.
            atexit.register(_close_at_exit, _default)
        return _default


def waiting_line(count: int) -> str:
    """What a run that closes says while it waits for the answers to ``count`` requests already sent."""
    return (
        f"ragmetrics: waiting for the answers to {count} judge request{'s' if count != 1 else ''} "
        "already sent, to record them (Ctrl-C again stops waiting)"
    )


#: What a run says when a Ctrl-C stopped its wait for the answers already sent.
INTERRUPTED_AGAIN = "ragmetrics: interrupted again: the answers received are recorded, the rest dropped"


def _close_at_exit(evaluator: Evaluator) -> None:
    """Close the process-wide evaluator as the interpreter exits (a script stopped by Ctrl-C, say),
    or one whose ``with`` block Ctrl-C left: it waits for the answers already sent, saying so, and a
    Ctrl-C meanwhile stops the wait with one line rather than an "Exception ignored in atexit
    callback" traceback."""
    try:
        judge = evaluator.built_judge
        waiting = judge.in_flight() if judge is not None else 0
        if waiting:
            print(waiting_line(waiting), file=sys.stderr, flush=True)
        evaluator.close()
    except KeyboardInterrupt:
        evaluator.close(wait=False)  # whatever the interrupt left open: what was received is recorded
        print(INTERRUPTED_AGAIN, file=sys.stderr, flush=True)


def context_precision(sample: RagSample, *, evaluator: Evaluator | None = None) -> MetricResult:
    """Rank-aware precision of the chunks judged useful for the reference (exact average precision)."""
    return (evaluator or get_evaluator()).score(sample, "context_precision")


def context_recall(
    sample: RagSample, method: str | None = None, *, evaluator: Evaluator | None = None
) -> MetricResult:
    """Share of the reference's sentences (``method="sentence"``, the default) or of their atomic
    claims (``method="claims"``) that the retrieved contexts support."""
    return (evaluator or get_evaluator()).score(sample, "context_recall", method)


def context_relevance(
    sample: RagSample, method: str | None = None, *, evaluator: Evaluator | None = None
) -> MetricResult:
    """Relevance of the chunks to the question; ``method`` is graded (default), sentence, binary or any."""
    return (evaluator or get_evaluator()).score(sample, "context_relevance", method)


def faithfulness(
    sample: RagSample, method: str | None = None, *, evaluator: Evaluator | None = None
) -> MetricResult:
    """Share of the answer's claims the retrieved contexts support (``method="supported"``, the
    default) or do not contradict (``method="not_contradicted"``); ``outcome == "no_claims"`` for an
    answer without claims."""
    return (evaluator or get_evaluator()).score(sample, "faithfulness", method)


def answer_relevancy(sample: RagSample, *, evaluator: Evaluator | None = None) -> MetricResult:
    """Whether the answer addresses the question: 0 when it is non-committal, else the judge's 0-2
    rating / 2 (no embedding model)."""
    return (evaluator or get_evaluator()).score(sample, "answer_relevancy")


def answer_correctness(
    sample: RagSample, method: str | None = None, *, evaluator: Evaluator | None = None
) -> MetricResult:
    """Claim-level agreement of the answer with the ground truth: ``method`` f1 (default),
    precision or recall; ``outcome == "no_claims"`` for an answer without claims."""
    return (evaluator or get_evaluator()).score(sample, "answer_correctness", method)


class _CheckedSplitter:
    """A splitter of someone else's (a plugin's, a script's), its answers checked: a text returned
    whole would split into its characters, ``None`` fail with an error naming nothing."""

    def __init__(self, splitter: Splitter) -> None:
        #: The splitter as given: its identity is the run's (see :func:`splitter_identity`).
        self.wrapped = splitter
        self.fingerprint = getattr(splitter, "fingerprint", None)

    def __call__(self, text: str) -> list[str]:
        sentences = self.wrapped(text)
        if isinstance(sentences, list):
            return sentences
        if sentences is None or isinstance(sentences, (str, bytes)) or not isinstance(sentences, Iterable):
            got = f"{type(sentences).__name__} {sentences!r:.60}"
            raise TypeError(
                f"the sentence splitter {splitter_identity(self.wrapped)} returned {got}, expected a list of "
                "sentences (str)"
            )
        return list(sentences)


def _checked_splitter(splitter: Splitter) -> Splitter:
    """``splitter``, checked unless it is the built-in one (its own tests check it)."""
    if not callable(splitter):
        raise ConfigError(
            f"the sentence splitter {type(splitter).__name__} {splitter!r:.60} is not callable: a splitter "
            "is a callable (text) -> list of sentences"
        )
    return splitter if type(splitter) is PunktSplitter else _CheckedSplitter(splitter)


def evaluate(
    samples: Iterable[RagSample],
    metrics: Sequence[str | tuple[str, str | None]] | None = None,
    *,
    evaluator: Evaluator | None = None,
    errors: str = "raise",
) -> EvaluationResult:
    """Judge ``samples`` on ``metrics`` (default: precision, recall, graded relevance) concurrently.

    ``errors="collect"`` returns the results that succeeded together with per-sample errors
    (:attr:`EvaluationResult.errors`) instead of raising the first failure; see :meth:`Evaluator.evaluate`.
    """
    return (evaluator or get_evaluator()).evaluate(samples, metrics, errors=errors)


async def aevaluate(
    samples: Iterable[RagSample],
    metrics: Sequence[str | tuple[str, str | None]] | None = None,
    *,
    evaluator: Evaluator | None = None,
    errors: str = "raise",
) -> EvaluationResult:
    """Async twin of :func:`evaluate`."""
    return await (evaluator or get_evaluator()).aevaluate(samples, metrics, errors=errors)
