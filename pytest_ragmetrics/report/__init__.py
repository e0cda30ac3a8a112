"""Reports of a ragmetrics run: terminal, JSON, Markdown and HTML.

Every renderer is a pure function of one *run report*: plain data (dicts, lists, str, int, float,
bool, None) that the plugin assembles at the end of the session. Nothing here calls the judge,
touches the cache or imports pytest; the terminal renderer only writes to the ``TerminalWriter``
it is given.

Run report, version 1
=====================

``{"version": 1, "results": [...], "summary": {...}}``. Fields marked *optional* may be absent;
renderers read everything with defaults, so a report missing them still renders.

``version`` (int)
    ``1``. Renderers raise ``ValueError`` for any other version.

``plugin_version`` (str, *optional*)
    The pytest-ragmetrics version that wrote the report.

``results`` (list): one row per recorded comparison (a threshold assertion), sorted with
:func:`~pytest_ragmetrics.report.json_report.sort_results` by ``(nodeid, metric, method, stat)``.

    ``nodeid`` (str)
        pytest node id of the test that made the comparison.
    ``metric`` (str), ``method`` (str | None)
        e.g. ``"context_relevance"`` / ``"graded"``; ``method`` is ``None`` for metrics without one
        (``"graded"``, ``"sentence"`` or ``"binary"`` for context relevance).
    ``stat`` (str)
        What was compared: ``"score"`` (one sample's score) or an aggregate over several samples in
        the canonical spelling of :func:`pytest_ragmetrics.gates.normalize_stat`: ``"mean"``,
        ``"min"``, ``"max"``, ``"quantile(0.1)"``, ``"pass_rate(>=0.8)"``.
    ``score`` (float | None), ``op`` (``">="``, ``">"``, ``"<="``, ``"<"``), ``threshold`` (float),
    ``passed`` (bool)
        ``score op threshold`` and its outcome. ``score`` is ``None`` only when there was nothing
        to score.
    ``cached`` (bool)
        Every judgment behind the comparison came from the cache or the judgment store.
    ``judges`` (list of str), ``judge_calls`` (int)
        The judge models the scores rest on, and the calls made for them. An empty ``judges`` list
        means no judge was involved (label metrics such as ``ndcg@5``): reports say ``no judge``.
    ``explanation`` (str | None)
        One line a person can act on, e.g. ``reference sentence 2 'Its capital is Paris.' is not
        supported by any context``.
    ``xfail`` (bool, *optional*)
        The comparison was made in an xfail test. Shown as ``XFAIL``/``XPASS``; it neither fails
        the report nor counts in aggregates and gates.
    ``samples`` (list)
        One entry per sample: ``id`` (str), ``score`` (float | None), ``explanation`` (str | None),
        ``mode`` (str | None, e.g. ``"without reference"``), ``models`` (``{model: score}`` | None,
        when several judge models graded relevance) and ``verdicts``, a list of ``{"item"
        ("reference sentence" | "chunk" | "sentence"), "index" (int), "rank" (int | None), "text"
        (str), "verdict" (str, e.g. "not supported", "useful", "2/2"), "value" (float, 0..1),
        "reason" (str | None)}``. Label metrics add ``labels_found`` (bool): whether any retrieved
        id is labelled at all.
        *Optional*, what the score was made with and of: ``judges`` (judge models), ``key`` (a
        digest of the sample's question, contexts and references), ``reference_key`` (a digest of
        its question, reference and relevance labels: the same golden question, however it was
        retrieved),
        ``prompt_versions`` (of the judgments behind the score) and ``splitter`` (the sentence
        splitter's identity, when the metric split text). A baseline comparison matches samples
        and checks comparability with them (see :mod:`pytest_ragmetrics.baseline`).

``summary`` (dict)

    ``metrics`` (list)
        Per ``(metric, method)``, over every per-sample score of the run: ``metric``, ``method``,
        ``n``, ``mean``, ``min``, ``max`` (the three figures ``None`` when ``n`` is 0; see
        :func:`pytest_ragmetrics.gates.aggregate`).
    ``gates`` (list)
        From :func:`pytest_ragmetrics.gates.evaluate_gates`: ``spec`` (as written), ``metric``,
        ``method``, ``stat`` (canonical), ``op``, ``threshold``, ``value`` (float | None), ``n``,
        ``passed``, and two fields added to the original draft: ``margin`` (``value - threshold``,
        ``None`` without a value) and ``reason`` (``None``, or why the gate failed without a value,
        e.g. no recorded evaluations).
    ``judge`` (dict)
        ``model``, ``cache_mode``, ``cache_dir``, ``store_dir`` (str | None); ``model`` is ``None``
        when every comparison was scored without a judge. Where each judgment came from, four
        counters every report format shows in this order and with this meaning: ``calls`` (judged
        now: requests sent and answered), ``store_hits`` (read from the committed judgment store),
        ``cache_hits`` (read from the local cache) and ``reused`` (answers the run already had, asked
        for again); ``recorded`` is ``store_hits + cache_hits + reused``. Then ``prompt_tokens``,
        ``completion_tokens``, ``tokens_saved``, ``retries``, ``reasks``, ``errors`` (int, as in
        ``JudgeStats.to_json``), ``seconds`` (float, wall time: the JSON file leaves it out unless
        timing is asked for, so that two replays of the same judgments write the same bytes) and
        ``cost`` (float | None: ``None`` when the model has no configured price). With a spending cap
        only: ``max_judge_calls``, ``max_judge_tokens`` (int | None each) and ``refused_calls`` (the
        requests the cap refused: more than 0 fails the run).
    ``labels`` (dict, *optional*)
        Present when label metrics scored samples by id: ``samples`` (distinct samples that
        retrieved something), ``not_found`` (those where no retrieved id is labelled at all) and
        ``stale`` (bool: most of at least three samples, so the labels look stale).
    ``unused_store_entries`` (int | None)
        Judgment store entries no test used in this run: what ``python -m pytest_ragmetrics cache
        prune`` would delete after it. ``None`` after a run that did not cover the whole suite
        (named paths or node ids, ``-k``, ``-m``, ``--lf``, a failure, a skipped test, a stop
        after ``-x``...).
    ``scoring`` (dict, *optional*)
        The run's settings that change scores (``judge_model``, ``temperature``, ``judge_n``...,
        see :data:`pytest_ragmetrics.report.build.SCORING_SETTINGS`): ``report merge`` refuses
        shards that differ in them.
    ``suite`` (dict, *optional*)
        The tests the run collected before any deselection and those it ran: ``collected``,
        ``collected_digest``, ``ran``, ``ran_digest`` (a count and a digest each; the digest of a
        union of disjoint sets is the sum of theirs modulo 2**256). ``report merge`` reads them to
        find a missing shard.
    ``judge_controls`` (dict, *optional*)
        The negative controls (``--rag-judge-controls``), from
        :func:`pytest_ragmetrics.calibration.controls.run_controls`: ``pairs``, ``model``, ``kinds``
        (per judgment kind: ``kind``, ``verdict``, ``judged``, ``positive``, ``share``, ``errors``,
        ``error_reasons``, ``examples``), ``floors`` (``spec``, ``kind``, ``value``, ``passed``,
        ``reason``), ``warnings``, ``passed`` and ``error`` (why they could not be judged, or None).
        A failed floor or an error fails the run.
    ``errors`` (list)
        Tests a ragmetrics error stopped before their comparison (a judgment not recorded in replay
        mode, the judge unavailable), sorted by test: ``nodeid``, ``when`` (setup, call, teardown),
        ``error`` (the exception's class name), ``message`` (its first line), ``xfail`` (bool).
        Any outside an xfail test fails the report.
    ``tests`` (dict, *optional*)
        ``{"passed": int, "failed": int}``: pytest's test outcomes.
    ``comparisons`` (dict, *optional*)
        ``{"passed": int, "failed": int}`` over ``results``; renderers derive their counts from
        ``results`` themselves (see :func:`~pytest_ragmetrics.report.model.outcome`).
    ``baseline`` (dict, *optional*)
        The comparison with a baseline report (``--rag-baseline``), from
        :func:`pytest_ragmetrics.baseline.compare_reports`: ``source`` (the baseline's path),
        ``plugin_version`` (``{"baseline", "current"}``) and ``metrics``, one entry per metric and
        method scored in either run: ``metric``, ``method``, ``label``, ``comparable`` (bool) and
        ``reason`` (why not), ``n`` (matched samples), ``baseline_mean``, ``current_mean``,
        ``delta`` (current minus baseline), ``ci_low``, ``ci_high`` (the ``confidence`` interval of
        the delta, paired bootstrap), ``p_value`` and ``test`` (``{"method": "exact" | "monte
        carlo", "permutations", "seed"}``: the paired sign-flip permutation test), ``max_drop``,
        ``verdict`` (``worse``, ``better``, ``not significant``, ``unchanged``, ``not comparable``,
        ``not measured``, ``no matched samples``), ``regressed`` and ``improved`` (the samples that
        moved most, each ``{"id", "baseline", "current", "delta"}``), ``pairs`` (every matched
        sample, the same way), and the ids that were not compared: ``new``, ``not_measured`` (in
        the baseline and in this run, but not scored for this metric: the test stopped at an
        earlier failing check or does not ask for it; in a partial run, every baseline sample the
        run lacks), ``removed`` (in the baseline, not in this run at all), ``changed`` (question or
        reference changed) and ``ambiguous`` (one id naming two evaluations in a run). The numbers
        are ``None`` when the metric is not comparable or nothing matched.
    ``regression_gates`` (list, *optional*)
        From :func:`pytest_ragmetrics.baseline.evaluate_regression_gates`: ``spec``, ``metric``,
        ``method``, ``stat`` (``mean drop`` or ``any drop``), ``op``, ``threshold``,
        ``significance`` (``"p < 0.05"`` or ``None``), ``value`` (the drop, ``None`` without one),
        ``n`` (the matched samples it was evaluated over), ``not_measured`` (how many of the
        baseline's samples this run did not measure), ``delta``, ``ci_low``, ``ci_high``,
        ``p_value``, ``passed``, ``margin``, ``reason`` (why it failed without a value), ``note``
        (why a drop beyond the threshold passed), ``worst`` (the samples that fell most) and
        ``skipped`` (*optional*, partial runs).

A run *passes* (see :func:`~pytest_ragmetrics.report.model.outcome`) when no comparison outside
an xfail test, no gate, no regression gate, no judge agreement floor and no negative-controls floor
failed, and no spending cap refused a judge call.

A *baseline* is a report of this format; ``--rag-save-baseline`` writes it without what only one run
knows or only explains a score (see :func:`pytest_ragmetrics.baseline.baseline_form`).

Floats are written to JSON rounded to 6 decimals; NaN and infinities are refused everywhere.
"""

# The renderers live in their submodules (``report.terminal``, ``report.json_report``, ...) and are
# imported one by one where needed: writing a JSON file should not pay for the HTML renderer.
