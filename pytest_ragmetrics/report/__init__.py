"""Reports of a ragmetrics run: terminal, JSON, Markdown and HTML.

Every renderer is a pure function of one *run report*: plain data (dicts, lists, str, int, float,
bool, None) that the plugin assembles at the end of the session. Nothing here calls the judge,
touches the cache or imports pytest; the terminal renderer only writes to the ``TerminalWriter``
it is given.

Run report, version 1
=====================

``{"version": 1, "plugin_version": ..., "results": [...], "summary": {...}}``. Its schema is written
once, as the ``TypedDict`` classes of :mod:`pytest_ragmetrics.report_schema`, each field with its
meaning: :class:`~pytest_ragmetrics.report_schema.RunReport` at the top, one
:class:`~pytest_ragmetrics.report_schema.ResultRow` per recorded comparison (a threshold assertion,
sorted with :func:`~pytest_ragmetrics.report.json_report.sort_results`) with one
:class:`~pytest_ragmetrics.report_schema.SampleResult` per sample, and the run-wide
:class:`~pytest_ragmetrics.report_schema.Summary` (figures, gates, the judge, the baseline comparison,
regression gates, the judge check and controls). The writer follows them; the validator that reads a
baseline or a shard walks them (:func:`~pytest_ragmetrics.report_schema.schema_problems`), naming the
file and the field of every value of the wrong type; renderers read optional fields with defaults, so
a report missing them still renders, and fields a newer version added are left alone.

A run *passes* (see :func:`~pytest_ragmetrics.report.display.outcome`) when no comparison outside
an xfail test, no gate, no regression gate, no judge agreement floor and no negative-controls floor
failed, and no spending cap refused a judge call.

A *baseline* is a report of this format; ``--rag-save-baseline`` writes it without what only one run
knows or only explains a score (see :func:`pytest_ragmetrics.baseline.baseline_form`).

Floats are written to JSON in full precision (reports round for display only), so every gate gives
the same outcome over the run, a report of it, a merge of its shards, or a baseline comparison;
NaN and infinities are refused everywhere.

PYTEST_DONT_REWRITE
"""

# The renderers live in their submodules (``report.terminal``, ``report.json_report``, ...) and are
# imported one by one where needed: writing a JSON file should not pay for the HTML renderer.
