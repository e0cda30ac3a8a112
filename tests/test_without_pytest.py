"""The engine and the assertion helpers in a plain Python script: no pytest anywhere."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import sys
    from pytest_ragmetrics import (
        Evaluator, RagSample, ScriptedJudge, Settings, assert_context_recall, context_precision, evaluate,
    )

    def judge(request):
        if request.kind == "context_recall":
            return {f"sentence_{i}": {"reason": "r", "attributed": i == 1}
                    for i in range(1, len(request.inputs["reference_sentences"]) + 1)}
        if request.kind == "context_precision":
            return {"reason": "r", "useful": "Paris" in request.inputs["chunk"]}
        return {"reason": "r", "rating": 2}

    sample = RagSample("Capital of France?", ["Bread is tasty.", "Paris is the capital."],
                       ground_truth="France is a country. Paris is its capital.", id="s1")
    with Evaluator(Settings(cache="off"), judge=ScriptedJudge(judge)) as ev:
        print("precision", float(context_precision(sample, evaluator=ev)))
        out = evaluate([sample], ["context_recall", "context_relevance[graded]"], evaluator=ev)
        print("aggregates", out.aggregates["context_recall"]["mean"], out.aggregates["context_relevance[graded]"]["n"])
        assert_context_recall(sample, evaluator=ev) >= 0.5
        try:
            assert_context_recall(sample, evaluator=ev) >= 0.8
        except AssertionError as exc:
            print("ASSERTION", str(exc).splitlines()[0])
    print("pytest imported:", "pytest" in sys.modules or "_pytest" in sys.modules)
''')


def test_engine_and_assertions_run_without_pytest(tmp_path):
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "precision 0.5" in lines
    assert "aggregates 0.5 1" in lines
    assert "ASSERTION context_recall of sample 's1' = 0.500, expected >= 0.8" in lines
    assert "pytest imported: False" in lines
