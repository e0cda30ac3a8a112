"""Metric names and gate-like lines: one syntax for gates, regression gates and agreement floors."""

from __future__ import annotations

import pytest

from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.specs import (
    BUILTIN_CATALOG,
    MetricCatalog,
    MetricName,
    gate_lines,
    parse_gate_line,
    parse_metric_name,
    subject_names,
)

RANKED = BUILTIN_CATALOG.merged(MetricCatalog({"ndcg": (), "mrr": ()}, frozenset({"ndcg", "mrr"})))


@pytest.mark.parametrize(
    ("text", "name", "method", "k", "metric", "shown"),
    [
        ("context_recall", "context_recall", None, None, "context_recall", "context_recall"),
        (
            " context_relevance[ graded ] ",
            "context_relevance",
            "graded",
            None,
            "context_relevance",
            "context_relevance[graded]",
        ),
        ("ndcg@5", "ndcg", None, 5, "ndcg@5", "ndcg@5"),
        ("ndcg", "ndcg", None, None, "ndcg", "ndcg"),
    ],
)
def test_metric_names_parse_into_name_method_and_cutoff(text, name, method, k, metric, shown):
    parsed = parse_metric_name(text)
    assert (parsed.name, parsed.method, parsed.k) == (name, method, k)
    assert parsed.metric == metric
    assert str(parsed) == shown
    assert parsed.key == (metric, method)


@pytest.mark.parametrize("text", ["", "ndcg@", "ndcg@x", "1metric", "context_relevance[graded", "a b"])
def test_malformed_metric_names_are_config_errors(text):
    with pytest.raises(ConfigError, match="invalid metric name"):
        parse_metric_name(text)


def test_the_catalog_knows_metrics_methods_and_cutoffs():
    assert parse_metric_name("ndcg@10", RANKED) == MetricName("ndcg", None, 10)
    with pytest.raises(ConfigError, match="unknown metric 'groundedness'"):
        parse_metric_name("groundedness", RANKED)
    with pytest.raises(ConfigError, match="takes no @k"):
        parse_metric_name("context_recall@5", RANKED)
    with pytest.raises(ConfigError, match="at least 1"):
        parse_metric_name("ndcg@0", RANKED)
    with pytest.raises(ConfigError, match="takes no \\[method\\]"):
        parse_metric_name("context_precision[graded]", RANKED)
    with pytest.raises(ConfigError, match="unknown method 'fuzzy'"):
        parse_metric_name("context_relevance[fuzzy]", RANKED)
    assert parse_metric_name("context_relevance", RANKED).method is None
    with pytest.raises(ConfigError, match="needs a method: write context_relevance\\[any\\] or"):
        parse_metric_name("context_relevance", RANKED, require_method=True)


def test_catalog_of_registered_metric_objects():
    class Ranked:
        name, methods, takes_k = "ndcg", (), True

    class Plain:
        name, methods = "chunk_economy", ("a", "b")

    catalog = MetricCatalog.of([Ranked(), Plain()])
    assert catalog.methods == {"ndcg": (), "chunk_economy": ("a", "b")}
    assert catalog.ranked == frozenset({"ndcg"})


@pytest.mark.parametrize(
    ("line", "subject", "stat", "op", "threshold", "condition"),
    [
        ("context_recall mean >= 0.8", "context_recall", "mean", ">=", 0.8, None),
        ("context_relevance[graded]  p10 > .4", "context_relevance[graded]", "p10", ">", 0.4, None),
        ("context_recall pass_rate(>=0.8) >= 0.9", "context_recall", "pass_rate(>=0.8)", ">=", 0.9, None),
        ("context_precision mean drop <= 0.02", "context_precision", "mean drop", "<=", 0.02, None),
        (
            "context_precision mean  drop <= 0.02 at p < 0.05",
            "context_precision",
            "mean drop",
            "<=",
            0.02,
            ("p", "<", 0.05),
        ),
        ("context_recall any drop <= 0.3", "context_recall", "any drop", "<=", 0.3, None),
        ("ndcg@5 quantile(0.1) drop <= 1e-1", "ndcg@5", "quantile(0.1) drop", "<=", 0.1, None),
        ("context_precision kappa >= 0.6", "context_precision", "kappa", ">=", 0.6, None),
    ],
)
def test_gate_like_lines_split_into_their_parts(line, subject, stat, op, threshold, condition):
    parsed = parse_gate_line(line)
    assert str(parsed.subject) == subject
    assert (parsed.stat, parsed.op, parsed.threshold, parsed.condition) == (stat, op, threshold, condition)
    assert parsed.spec == " ".join(line.split())


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("context_recall >= 0.8", "cannot parse it"),
        ("context_recall mean", "cannot parse it"),
        ("context_recall mean == 0.8", "unsupported operator '=='"),
        ("context_recall mean >= nan", "threshold 'nan' is not a finite number"),
        ("context_recall mean >= inf", "not a finite number"),
        ("context_recall mean drop <= 0.1 at p != 0.05", "unsupported operator '!='"),
        ("context_recall mean drop <= 0.1 at p < x", "p value 'x' is not a finite number"),
    ],
)
def test_bad_gate_like_lines_say_what_is_wrong_and_quote_the_form(line, why):
    with pytest.raises(ConfigError) as info:
        parse_gate_line(line, what="regression gate", form="expected THE FORM")
    message = str(info.value)
    assert message.startswith(f"invalid ragmetrics regression gate {line!r}: ")
    assert why in message
    assert message.endswith("; expected THE FORM")


def test_a_parsed_line_makes_errors_about_itself():
    parsed = parse_gate_line("context_recall  kappa >= 2", what="agreement floor", form="FORM")
    assert str(parsed.error("kappa is at most 1")) == (
        "invalid ragmetrics agreement floor 'context_recall kappa >= 2': kappa is at most 1; FORM"
    )


def test_gate_lines_skip_blanks_and_comments_and_split_on_semicolons():
    assert gate_lines("a mean >= 1; b min > 0 # note\n\n  # only a comment") == ["a mean >= 1", "b min > 0"]
    assert gate_lines(["", " x max <= 1 "]) == ["x max <= 1"]


def test_subject_names_lists_the_base_names_of_parseable_lines():
    assert subject_names(["ndcg@5 mean >= 0.5", "context_relevance[graded] min > 0", "garbage"]) == {
        "ndcg",
        "context_relevance",
    }
