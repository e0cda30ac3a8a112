"""Quality gates: parsing every form, rejecting malformed lines, evaluating over per-sample scores."""

from __future__ import annotations

import math

import pytest

from pytest_ragmetrics.errors import ConfigError
from pytest_ragmetrics.gates import (
    BUILTIN_METRICS,
    Gate,
    aggregate,
    compare,
    compute_stat,
    evaluate_gates,
    normalize_stat,
    parse_gate,
    parse_gates,
)
from pytest_ragmetrics.specs import BUILTIN_CATALOG, MetricCatalog

# The per-sample scores evaluate_gates reads, keyed by (metric, method).
Scores = dict[tuple[str, str | None], list[float]]


@pytest.mark.parametrize(
    ("line", "metric", "method", "stat", "op", "threshold"),
    [
        ("context_recall mean >= 0.80", "context_recall", None, "mean", ">=", 0.8),
        ("context_precision min >= 0.5", "context_precision", None, "min", ">=", 0.5),
        ("context_relevance[graded] mean >= 0.6", "context_relevance", "graded", "mean", ">=", 0.6),
        ("context_relevance[sentence] max > 0.2", "context_relevance", "sentence", "max", ">", 0.2),
        ("context_relevance[binary] mean <= 1", "context_relevance", "binary", "mean", "<=", 1.0),
        ("context_recall quantile(0.1) >= 0.4", "context_recall", None, "quantile(0.1)", ">=", 0.4),
        ("context_recall p10 >= 0.4", "context_recall", None, "quantile(0.1)", ">=", 0.4),
        ("context_recall P90 < 1", "context_recall", None, "quantile(0.9)", "<", 1.0),
        ("context_recall median >= 0.5", "context_recall", None, "quantile(0.5)", ">=", 0.5),
        ("context_recall pass_rate(>=0.8) >= 0.9", "context_recall", None, "pass_rate(>=0.8)", ">=", 0.9),
        ("context_recall pass_rate( > .5 ) >= 0.9", "context_recall", None, "pass_rate(>0.5)", ">=", 0.9),
        ("  context_recall   mean>=0.8  ", "context_recall", None, "mean", ">=", 0.8),
        ("context_relevance [ graded ] mean >= 6e-1", "context_relevance", "graded", "mean", ">=", 0.6),
    ],
)
def test_parse_gate_accepts_every_documented_form(line, metric, method, stat, op, threshold):
    gate = parse_gate(line)
    assert (gate.metric, gate.method, gate.stat, gate.op) == (metric, method, stat, op)
    assert gate.threshold == pytest.approx(threshold)
    assert gate.key == (metric, method)


def test_gate_spec_is_the_line_as_written_with_whitespace_tidied():
    assert parse_gate("  context_recall   mean >=  0.80 ").spec == "context_recall mean >= 0.80"


def test_gate_is_frozen():
    gate = parse_gate("context_recall mean >= 0.8")
    with pytest.raises(AttributeError):
        gate.threshold = 0.1  # type: ignore[misc]


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ("context_recall mean", "cannot parse"),
        ("context_recall >= 0.8", "cannot parse"),
        ("mean >= 0.8", "cannot parse"),
        ("context_recall mean >= 0.8 extra", "cannot parse"),
        ("context_recall mean => 0.8", "cannot parse"),
        ("context_recall mean == 0.8", "unsupported operator '=='"),
        ("context_recall mean >= high", "threshold 'high' is not a finite number"),
        ("context_recall mean >= nan", "not a finite number"),
        ("context_recall mean >= inf", "not a finite number"),
        ("context_recall average >= 0.8", "unknown statistic 'average'"),
        ("context_recall p101 >= 0.8", "out of range"),
        ("context_recall quantile(1.5) >= 0.8", "out of range"),
        ("context_recall pass_rate(0.8) >= 0.8", "unknown statistic"),
        ("context_recal mean >= 0.8", "unknown metric 'context_recal'"),
        ("context_precision[graded] mean >= 0.8", "takes no [method]"),
        ("context_relevance[fuzzy] mean >= 0.8", "unknown method 'fuzzy'"),
    ],
)
def test_parse_gate_rejects_malformed_lines_naming_the_line_and_the_form(line, why):
    with pytest.raises(ConfigError) as info:
        parse_gate(line)
    message = str(info.value)
    assert why in message
    assert repr(line.strip()) in message
    assert "expected '<metric>[<method>] <stat> <op> <threshold>'" in message


def test_unknown_metric_error_lists_the_known_metrics():
    with pytest.raises(
        ConfigError,
        match=r"known metrics: answer_correctness, answer_relevancy, average_precision, context_precision, "
        r"context_recall, context_relevance, faithfulness, hit_rate, mrr, ndcg, precision, recall\)",
    ):
        parse_gate("groundedness mean >= 0.8")


def test_custom_registered_metric_is_accepted_when_passed_in():
    known = {*BUILTIN_METRICS, "answer_coverage"}
    gate = parse_gate("answer_coverage mean >= 0.7", known_metrics=known)
    assert gate.metric == "answer_coverage"
    with pytest.raises(ConfigError, match="answer_coverage"):
        parse_gate("answer_coverage mean >= 0.7")


def test_custom_methods_table():
    gate = parse_gate(
        "my_metric[strict] mean >= 0.7", known_metrics={"my_metric"}, methods={"my_metric": {"strict"}}
    )
    assert gate.method == "strict"


def test_parse_gates_skips_blank_lines_and_comments():
    text = """
    # recall must not regress
    context_recall mean >= 0.80

    context_precision min >= 0.5   # worst sample
    """
    gates = parse_gates(text)
    assert [g.spec for g in gates] == ["context_recall mean >= 0.80", "context_precision min >= 0.5"]
    assert parse_gates(["", "  # only a comment", "context_recall max <= 1"])[0].stat == "max"
    assert parse_gates([]) == []


def test_parse_gates_raises_on_the_first_bad_line():
    with pytest.raises(ConfigError, match="context_recall nonsense"):
        parse_gates(["context_recall mean >= 0.8", "context_recall nonsense"])


@pytest.mark.parametrize(
    ("stat", "canonical"),
    [
        ("MEAN", "mean"),
        ("p0", "quantile(0)"),
        ("p100", "quantile(1)"),
        ("quantile(0.25)", "quantile(0.25)"),
        ("pass_rate(>= 1.0)", "pass_rate(>=1)"),
    ],
)
def test_normalize_stat(stat, canonical):
    assert normalize_stat(stat) == canonical


def test_compute_stat_values():
    scores = [0.0, 0.5, 1.0, 1.0]
    assert compute_stat("mean", scores) == 0.625
    assert compute_stat("min", scores) == 0.0
    assert compute_stat("max", scores) == 1.0
    assert compute_stat("median", scores) == 0.75
    assert compute_stat("p0", scores) == 0.0
    assert compute_stat("p100", scores) == 1.0
    # Linear interpolation: position (4 - 1) * 0.1 = 0.3 between 0.0 and 0.5.
    assert compute_stat("quantile(0.1)", scores) == pytest.approx(0.15)
    assert compute_stat("pass_rate(>=0.5)", scores) == 0.75
    assert compute_stat("pass_rate(>0.5)", scores) == 0.5
    assert compute_stat("pass_rate(<0.5)", scores) == 0.25
    assert compute_stat("quantile(0.3)", [0.4]) == 0.4


@pytest.mark.parametrize("stat", ["mean", "min", "max", "p10", "pass_rate(>=0.8)"])
def test_compute_stat_of_nothing_is_none_never_nan(stat):
    assert compute_stat(stat, []) is None


def test_nan_scores_are_refused():
    with pytest.raises(ValueError, match="finite"):
        compute_stat("mean", [0.5, math.nan])
    with pytest.raises(ValueError, match="finite"):
        aggregate([math.inf])


def test_aggregate():
    assert aggregate([0.5, 1.0, 0.0]) == {"n": 3, "mean": 0.5, "min": 0.0, "max": 1.0}
    assert aggregate([]) == {"n": 0, "mean": None, "min": None, "max": None}
    assert aggregate(iter([0.25])) == {"n": 1, "mean": 0.25, "min": 0.25, "max": 0.25}


def test_compare_tolerates_float_noise_but_not_real_differences():
    noisy = math.fsum([0.7, 0.9, 0.8]) / 3  # 0.7999999999999999
    assert noisy < 0.8
    assert compare(noisy, ">=", 0.8)
    assert not compare(0.79, ">=", 0.8)
    assert not compare(0.8, ">", 0.8)
    assert compare(0.81, ">", 0.8)
    assert compare(0.8, "<=", 0.8)
    assert not compare(0.8, "<", 0.8)
    assert compare(0.7, "<", 0.8)
    with pytest.raises(ValueError, match="operator"):
        compare(1.0, "==", 1.0)


def test_evaluate_gates_rows_with_value_n_passed_and_margin():
    gates = parse_gates(["context_recall mean >= 0.80", "context_precision min >= 0.5"])
    scores: Scores = {
        ("context_recall", None): [0.7, 0.9, 0.8, 1.0],
        ("context_precision", None): [0.25, 1.0],
    }
    recall, precision = evaluate_gates(gates, scores)
    assert recall == {
        "spec": "context_recall mean >= 0.80",
        "metric": "context_recall",
        "method": None,
        "stat": "mean",
        "op": ">=",
        "threshold": 0.8,
        "value": 0.85,
        "n": 4,
        "passed": True,
        "margin": 0.05,
        "reason": None,
    }
    assert precision["passed"] is False
    assert precision["value"] == 0.25
    assert precision["margin"] == -0.25


def test_gate_exactly_on_threshold_passes_despite_float_noise():
    [row] = evaluate_gates(
        parse_gates("context_recall mean >= 0.8"), {("context_recall", None): [0.7, 0.9, 0.8]}
    )
    assert row["value"] == 0.8
    assert row["margin"] == 0.0
    assert math.copysign(1, row["margin"]) == 1  # not -0.0
    assert row["passed"] is True


@pytest.mark.parametrize(
    ("line", "scores"),
    [
        ("context_recall mean >= 0.8", {("context_precision", None): [1.0]}),
        ("context_recall max <= 1", {("context_recall", None): []}),
    ],
    ids=["other metrics scored", "an empty score list"],
)
def test_gate_without_scores_fails_with_a_reason(line, scores):
    [row] = evaluate_gates(parse_gates(line), scores)
    assert row["passed"] is False
    assert row["value"] is None
    assert row["margin"] is None
    assert row["n"] == 0
    assert row["reason"] == "context_recall not measured: 0 samples (no sample of this run)"


def test_gate_without_scores_names_the_run_samples_not_measured():
    [row] = evaluate_gates(parse_gates("context_recall mean >= 0.8"), {}, run_samples=3)
    assert row["not_measured"] == 3
    assert row["reason"] == (
        "context_recall not measured: none of the run's 3 samples has a score (their tests stopped at an "
        "earlier failing check, or do not ask for it)"
    )


def test_gate_with_method_reads_only_that_method():
    scores = {
        ("context_relevance", "graded"): [1.0, 0.5],
        ("context_relevance", "binary"): [0.0],
        ("context_recall", None): [0.1],
    }
    graded, binary, sentence = evaluate_gates(
        parse_gates(
            [
                "context_relevance[graded] mean >= 0.7",
                "context_relevance[binary] mean >= 0.7",
                "context_relevance[sentence] mean >= 0.7",
            ]
        ),
        scores,
    )
    assert (graded["value"], graded["n"], graded["passed"]) == (0.75, 2, True)
    assert (binary["value"], binary["n"], binary["passed"]) == (0.0, 1, False)
    assert sentence["value"] is None
    assert "context_relevance[sentence]" in sentence["reason"]


def test_a_metric_with_methods_needs_one_in_a_gate():
    """Pooling graded ratings with sentence shares would mix three scales."""
    with pytest.raises(
        ConfigError, match=r"context_relevance needs a method: write context_relevance\[any\] or"
    ):
        parse_gate("context_relevance mean >= 0.7")


def test_evaluate_gates_keeps_gate_order_and_accepts_hand_built_gates():
    gate = Gate("context_recall", None, "quantile(0.5)", "<", 0.9, "recall median < 0.9")
    rows = evaluate_gates([gate, gate], {("context_recall", None): [0.2, 0.4, 1.0]})
    assert [r["spec"] for r in rows] == ["recall median < 0.9"] * 2
    assert rows[0]["value"] == 0.4
    assert rows[0]["passed"] is True
    assert rows[0]["margin"] == -0.5


def test_a_partial_run_skips_gates_over_metrics_it_never_scored():
    gates = parse_gates(["context_recall mean >= 0.8", "context_precision mean >= 0.5"])
    scores: Scores = {("context_recall", None): [0.9]}
    full = evaluate_gates(gates, scores)
    partial = evaluate_gates(gates, scores, partial=True)
    assert [g["passed"] for g in full] == [True, False]
    assert [g["passed"] for g in partial] == [True, True]
    assert "skipped" not in partial[0]
    assert partial[1]["skipped"] is True
    assert partial[1]["reason"] == (
        "not evaluated: context_precision not measured: 0 samples (no sample of this run) (partial run)"
    )


def test_gates_over_ranked_metrics_use_the_catalog_of_registered_metrics():
    catalog = BUILTIN_CATALOG.merged(MetricCatalog({"ndcg": ()}, frozenset({"ndcg"})))
    gate = parse_gate("ndcg@10 mean >= 0.7", catalog)
    assert (gate.metric, gate.method, gate.key) == ("ndcg@10", None, ("ndcg@10", None))
    with pytest.raises(ConfigError, match="takes no @k cut-off"):
        parse_gate("context_recall@3 mean >= 0.7", catalog)
    with pytest.raises(ConfigError, match="regression gates"):
        parse_gate("context_recall mean >= 0.7 at p < 0.05")


def test_label_metric_gates_take_a_cut_off():
    gate = parse_gate("ndcg@10 mean >= 0.7")
    assert (gate.metric, gate.method, gate.stat) == ("ndcg@10", None, "mean")
    assert parse_gate("mrr p10 > 0.2").key == ("mrr", None)
    with pytest.raises(ConfigError, match=r"metric 'context_recall' takes no @k cut-off"):
        parse_gate("context_recall@3 mean >= 0.5")
    with pytest.raises(ConfigError, match=r"metric 'recall' takes no \[method\]"):
        parse_gate("recall@3[graded] mean >= 0.5")


@pytest.mark.parametrize(
    "line",
    [
        "context_recall mean >= 2",
        "context_precision min > -0.1",
        "context_relevance[graded] p10 >= 1.5",
        "context_recall pass_rate(>=0.8) >= 1.2",
        "context_recall pass_rate(>=1.5) >= 0.5",
    ],
)
def test_a_gate_outside_the_range_of_a_bounded_metric_is_an_error(line):
    """`context_recall mean >= 2` used to be accepted, and could never pass."""
    with pytest.raises(ConfigError, match=r"lies between 0 and 1, so a threshold of .* is out of range"):
        parse_gate(line)


@pytest.mark.parametrize(
    ("line", "why"),
    [
        (
            "faithfulness corrected_mean >= 0.8",
            "claim_decomposition judgments, which a labelled set cannot label",
        ),
        ("faithfulness[not_contradicted] corrected_mean >= 0.8", "claim_decomposition judgments"),
        ("answer_correctness[recall] corrected_mean >= 0.5", "claim_decomposition judgments"),
        ("answer_relevancy corrected_mean >= 0.5", "answer_relevancy judgments, which a labelled set"),
        ("context_recall[claims] corrected_mean >= 0.5", "context_recall_claims judgments"),
        ("ndcg@10 corrected_mean >= 0.5", "ndcg@10 is computed from labels, with no judge to correct"),
        ("mrr corrected_mean >= 0.5", "mrr is computed from labels, with no judge to correct"),
    ],
)
def test_a_corrected_mean_gate_over_a_metric_that_can_have_no_labelled_score_is_an_error(line, why):
    """Such a gate was accepted and failed every run, saying to label what no labelled set can label."""
    with pytest.raises(ConfigError) as info:
        parse_gate(line)
    assert why in str(info.value) and repr(line) in str(info.value)
    assert "corrected_mean takes context_precision, context_recall or context_relevance" in str(info.value)


@pytest.mark.parametrize(
    "line",
    [
        "context_precision corrected_mean >= 0.5",
        "context_recall corrected_mean >= 0.5",
        "context_recall[sentence] corrected_mean >= 0.5",
        "context_relevance[graded] corrected_mean >= 0.5",
        "context_relevance[binary] corrected_mean <= 0.9",
        "context_relevance[any] corrected_mean >= 0.5",
    ],
)
def test_a_corrected_mean_gate_over_a_labelled_judged_metric_is_accepted(line):
    assert parse_gate(line).stat == "corrected_mean"


def test_gates_at_the_ends_of_the_range_are_fine():
    assert parse_gate("context_recall mean >= 1").threshold == 1.0
    assert parse_gate("context_recall max > 0").threshold == 0.0


class _Custom:
    methods = ()
    default_method = None

    def __init__(self, name: str, bounded: bool | None) -> None:
        self.name = name
        if bounded is not None:
            self.bounded = bounded


def test_custom_metrics_declare_whether_they_are_bounded():
    catalog = BUILTIN_CATALOG.merged(
        MetricCatalog.of([_Custom("latency_ms", False), _Custom("faithfulness", None)])
    )
    assert parse_gate("latency_ms max <= 250", catalog).threshold == 250
    with pytest.raises(ConfigError, match="faithfulness lies between 0 and 1"):
        parse_gate("faithfulness mean >= 80", catalog)
    with pytest.raises(ConfigError, match="pass_rate"):
        parse_gate("latency_ms pass_rate(<=250) >= 90", catalog)  # a rate is a share whatever the metric
