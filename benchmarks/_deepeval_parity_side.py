"""The DeepEval half of bench_answer_parity.py; it runs in a separate environment that has DeepEval.

Not imported by anything: bench_answer_parity.py starts it with that environment's Python, writes the
cases and the server's address to its stdin as JSON, and reads DeepEval's scores from its stdout.
Every case is scored with FaithfulnessMetric (``eval_mode="llm"``, no reason asked), once as it comes
(``penalize_ambiguous_claims=False``) and once with ambiguous claims penalized. A score is a number
or ``"error: <what DeepEval raised>"``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")  # nothing leaves the machine
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

from deepeval.metrics import FaithfulnessMetric
from deepeval.models import GPTModel
from deepeval.test_case import LLMTestCase

METRICS = ("faithfulness", "faithfulness_penalize_ambiguous")


def score(job: dict[str, Any], metric: str, case: dict[str, Any]) -> float:
    model = GPTModel(model="gpt-4o-mini", api_key="sk-bench", base_url=job["chat_url"], temperature=0)
    faithfulness = FaithfulnessMetric(
        model=model,
        include_reason=False,
        async_mode=False,
        eval_mode="llm",
        penalize_ambiguous_claims=metric == "faithfulness_penalize_ambiguous",
    )
    test_case = LLMTestCase(
        input=case["question"], actual_output=case["answer"], retrieval_context=case["contexts"]
    )
    return float(faithfulness.measure(test_case, _show_indicator=False))


def main() -> None:
    job = json.load(sys.stdin)
    scores: dict[str, dict[str, Any]] = {}
    for metric in METRICS:
        for case in job["cases"]:
            try:
                value: Any = score(job, metric, case)
            except Exception as exc:  # what DeepEval does with the case is the figure
                value = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:80] if str(exc) else ''}"
            scores.setdefault(metric, {})[case["id"]] = value
    json.dump(scores, sys.stdout)


if __name__ == "__main__":
    main()
