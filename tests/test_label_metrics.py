"""Label metrics as pure functions: checked against trec_eval (pytrec_eval) and textbook examples."""

from __future__ import annotations

import random

import pytest

from pytest_ragmetrics.metrics import labels as L

pytrec_eval = pytest.importorskip("pytrec_eval")

CUTOFFS = (1, 2, 3, 5, 10, 25)  # 25 is longer than every ranking below


def _random_queries(seed: int, n: int, graded: bool) -> list[tuple[list[str], dict[str, int]]]:
    rng = random.Random(seed)
    queries: list[tuple[list[str], dict[str, int]]] = []
    pool = [f"d{i}" for i in range(30)]
    while len(queries) < n:
        labelled = rng.sample(pool, rng.randint(1, 12))
        grades = {d: (rng.randint(0, 3) if graded else rng.randint(0, 1)) for d in labelled}
        if not any(grades.values()):
            continue  # trec_eval skips queries without a relevant document; so do the metrics
        ranking = rng.sample(pool, rng.randint(1, 15))
        queries.append((ranking, grades))
    return queries


def _trec(queries: list[tuple[list[str], dict[str, int]]], measures: set[str]) -> dict[str, dict[str, float]]:
    qrels = {f"q{n}": grades for n, (_, grades) in enumerate(queries)}
    # Distinct, descending scores: trec_eval ranks by score (ties broken by document id), so the
    # run's order is exactly the ranking's.
    run = {
        f"q{n}": {doc: float(len(ranking) - r) for r, doc in enumerate(ranking)}
        for n, (ranking, _) in enumerate(queries)
    }
    measured: dict[str, dict[str, float]] = pytrec_eval.RelevanceEvaluator(qrels, measures).evaluate(run)
    return measured


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cutoff_metrics_agree_with_trec_eval(seed, graded):
    queries = _random_queries(seed, 200, graded)
    cuts = ",".join(map(str, CUTOFFS))
    expected = _trec(
        queries, {f"success.{cuts}", f"recall.{cuts}", f"P.{cuts}", f"ndcg_cut.{cuts}", f"map_cut.{cuts}"}
    )
    pairs = {
        "success": L.hit_rate,
        "recall": L.recall,
        "P": L.precision,
        "ndcg_cut": L.ndcg,
        "map_cut": L.average_precision,
    }
    checked = 0
    for n, (ranking, grades) in enumerate(queries):
        for k in CUTOFFS:
            for measure, scorer in pairs.items():
                ours = scorer(ranking, grades, k)
                assert ours == pytest.approx(expected[f"q{n}"][f"{measure}_{k}"], abs=1e-12, rel=0), (
                    measure,
                    k,
                    ranking,
                    grades,
                )
                checked += 1
    assert checked == 200 * len(CUTOFFS) * len(pairs)


@pytest.mark.parametrize("graded", [False, True], ids=["binary", "graded"])
def test_whole_ranking_metrics_agree_with_trec_eval(graded):
    queries = _random_queries(7, 300, graded)
    expected = _trec(queries, {"recip_rank", "ndcg", "map", "set_P", "set_recall"})
    pairs = {
        "recip_rank": L.reciprocal_rank,
        "ndcg": L.ndcg,
        "map": L.average_precision,
        "set_P": L.precision,
        "set_recall": L.recall,
    }
    for n, (ranking, grades) in enumerate(queries):
        for measure, scorer in pairs.items():
            ours = scorer(ranking, grades, None)
            assert ours == pytest.approx(expected[f"q{n}"][measure], abs=1e-12, rel=0), (
                measure,
                ranking,
                grades,
            )


def test_mrr_at_k_is_trec_eval_recip_rank_of_the_cut_ranking():
    queries = _random_queries(11, 200, graded=True)
    for k in CUTOFFS:
        cut = [(ranking[:k], grades) for ranking, grades in queries]
        expected = _trec(cut, {"recip_rank"})
        for n, (ranking, grades) in enumerate(queries):
            assert L.reciprocal_rank(ranking, grades, k) == pytest.approx(
                expected[f"q{n}"]["recip_rank"], abs=1e-12, rel=0
            )


def test_the_random_queries_exercise_the_edges():
    """The comparison above is only worth something if it meets misses, grade 0 and short rankings."""
    queries = _random_queries(0, 200, graded=True)
    assert any(L.hit_rate(r, g, 5) == 0.0 for r, g in queries)
    assert any(0 in g.values() for _, g in queries)
    assert any(len(r) < 5 and L.recall(r, g, 5) > 0 for r, g in queries)
    assert any(0.0 < L.ndcg(r, g, 5) < 1.0 for r, g in queries)
    assert any(L.ndcg(r, g, 5) == pytest.approx(1.0) for r, g in queries)


# ------------------------------------------------------------------------------ worked examples


def test_ndcg_textbook_example():
    """Wikipedia's DCG article: gains 3, 2, 3, 0, 1, 2; the ideal adds two unretrieved grades 3 and 2."""
    ranking = ["d1", "d2", "d3", "d4", "d5", "d6"]
    grades = {"d1": 3, "d2": 2, "d3": 3, "d4": 0, "d5": 1, "d6": 2, "d7": 3, "d8": 2}
    # DCG6 = 6.861, IDCG6 (3, 3, 3, 2, 2, 2) = 8.740, nDCG6 = 0.785 (three decimals in the article).
    assert L.ndcg(ranking, grades, 6) == pytest.approx(0.785, abs=5e-4)
    assert L.ndcg(ranking, grades, 6) == pytest.approx(6.861 / 8.740, abs=1e-3)


def test_precision_and_average_precision_by_hand():
    ranking = ["a", "x", "b", "y"]
    grades = {"a": 1, "b": 1, "c": 1}
    assert L.precision(ranking, grades, 2) == 0.5
    assert L.precision(ranking, grades, 10) == 0.2  # divided by k, as trec_eval's P_10
    assert L.precision(ranking, grades) == 0.5  # the whole ranking: 2 of 4
    assert L.average_precision(ranking, grades) == pytest.approx((1 / 1 + 2 / 3) / 3)
    assert L.average_precision(ranking, grades, 2) == pytest.approx(1 / 3)
    assert L.reciprocal_rank(["x", "y", "b"], grades) == pytest.approx(1 / 3)
    assert L.reciprocal_rank(["x", "y", "b"], grades, 2) == 0.0
    assert L.recall(ranking, grades, 1) == pytest.approx(1 / 3)
    assert L.hit_rate(ranking, grades, 1) == 1.0 and L.hit_rate(["x"], grades, 1) == 0.0


def test_grade_zero_is_not_relevant_and_only_ndcg_reads_grades():
    ranking = ["a", "b"]
    assert L.recall(ranking, {"a": 0, "b": 3, "c": 1}) == 0.5
    assert L.ndcg(["b", "c"], {"b": 1, "c": 2}) < 1.0 < L.ndcg(["c", "b"], {"b": 1, "c": 2}) + 1e-12


def test_empty_ranking_scores_zero_and_missing_labels_are_an_error():
    for scorer in L.FAMILIES.values():
        assert scorer([], {"a": 1}, 5) == 0.0
        assert scorer([], {"a": 1}, None) == 0.0
        with pytest.raises(ValueError, match=r"no relevant id"):
            scorer(["a"], {"a": 0}, 5)


# ------------------------------------------------------------------------------ matching by text


def test_match_references_by_containment_either_way():
    contexts = [
        "Intro.",
        "The  Eiffel Tower is in PARIS, France.",
        "eiffel tower is in paris",  # the same reference again: credited once only
        "Berlin",
    ]
    references = ["eiffel tower is in Paris", "Berlin is the capital of Germany."]
    ranking, grades, matched = L.match_references(contexts, references)
    assert matched == (None, 0, None, 1)  # "Berlin" is contained in the second reference
    assert ranking == ("chunk:1", "ref:1", "chunk:3", "ref:2")
    assert grades == {"ref:1": 1, "ref:2": 1}
    assert L.recall(ranking, grades) == 1.0
    assert L.reciprocal_rank(ranking, grades) == 0.5


def test_match_references_normalizes_unicode_and_ignores_blank_texts():
    _, grades, matched = L.match_references(["  ", "ＣＡＦÉ au lait"], ["café AU\nlait", " "])
    assert matched == (None, 0)
    assert grades == {"ref:1": 1}


def test_match_references_misleads_on_paraphrase_and_two_references_in_one_chunk():
    """Documented limits: a paraphrase never matches; one chunk holding two references is credited once."""
    _, _, matched = L.match_references(["Paris is France's capital."], ["The capital of France is Paris."])
    assert matched == (None,)
    ranking, grades, _ = L.match_references(["Alpha. Beta."], ["alpha.", "beta."])
    assert L.recall(ranking, grades) == 0.5


def test_a_script_scoring_only_label_metrics_never_imports_openai():
    """evaluate() outside pytest: label metrics build no judge, so the openai package stays unloaded."""
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import sys
        from pytest_ragmetrics import RagSample, evaluate

        samples = [
            RagSample("q1", ["a", "b"], id="s1", context_ids=["d1", "d2"], reference_context_ids={"d2": 2}),
            RagSample("q2", ["c"], id="s2", reference_contexts=["c"]),
        ]
        result = evaluate(samples, metrics=["ndcg@5", "recall@1", "mrr"])
        print(round(result.aggregates["ndcg@5"]["mean"], 6), result.aggregates["recall@1"]["mean"])
        print(result["s2"]["mrr"].mode, result["s1"]["ndcg@5"].judges)
        print("openai imported:", "openai" in sys.modules)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    )
    # s1: the grade-2 id at rank 2, 2 / log2(3) / 2 = 0.63093; s2: matched by text at rank 1.
    assert out.stdout.splitlines() == ["0.815465 0.5", "matched by text ()", "openai imported: False"]
