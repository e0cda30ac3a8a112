"""Running a peer library (RAGAS, DeepEval) beside ours: its own Python, our local servers.

A peer runs in an environment of its own (its dependencies are not ours), as a script of this
directory that reads a job as JSON on stdin and prints its scores as JSON. Its chat model is a
:class:`~pytest_ragmetrics.testing.FakeJudgeServer` and its embeddings an :class:`EmbeddingServer`,
both on 127.0.0.1, so nothing leaves the machine and no key is needed. Imported by
``bench_answer_tokens.py``, ``bench_answer_parity.py`` and ``bench_retrieval_parity.py``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


class EmbeddingServer:
    """``POST /v1/embeddings`` on 127.0.0.1: ``vector(text)`` for each text, as a list of floats;
    every request logged as its ``x-bench`` header and the characters it embedded."""

    def __init__(self, vector: Callable[[str], list[float]]) -> None:
        self.log: list[tuple[str, int]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                chars = sum(len(t) for t in texts)
                owner.log.append((self.headers.get("x-bench", ""), chars))
                data = [
                    {"object": "embedding", "index": i, "embedding": vector(t)} for i, t in enumerate(texts)
                ]
                payload = json.dumps(
                    {
                        "object": "list",
                        "data": data,
                        "model": body.get("model", "fake-embedding"),
                        "usage": {"prompt_tokens": chars // 4, "total_tokens": chars // 4},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def peer_python(given: str | None, variable: str, module: str) -> str | None:
    """The peer's environment's Python (``given``, else the environment variable ``variable``), if
    there is one that imports ``module``."""
    python = given or os.environ.get(variable)
    if not python or not Path(python).exists():
        return None
    probe = subprocess.run([python, "-c", f"import {module}"], capture_output=True, text=True)
    return python if probe.returncode == 0 else None


def run_side(name: str, python: str, script: str, job: dict[str, Any], *, timeout: float) -> Any:
    """Run the peer's ``script`` of this directory with ``job`` on stdin and return what it printed,
    read as JSON. The peer sees none of our ``OPENAI_*`` or ``DEEPEVAL_*`` settings (its servers are
    in the job) and sends RAGAS no usage data."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DEEPEVAL_"))}
    env["RAGAS_DO_NOT_TRACK"] = "true"
    out = subprocess.run(
        [python, str(HERE / script)],
        input=json.dumps(job),
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )
    if out.returncode:
        raise SystemExit(f"the {name} side failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


async def score_each(
    job: dict[str, Any],
    metrics: Iterable[str],
    score: Callable[[dict[str, Any], str, dict[str, Any]], Awaitable[float]],
) -> dict[str, dict[str, Any]]:
    """A peer side's scores: every case of ``job`` on every one of ``metrics``, each on its own, as
    a number, ``"nan"``, or ``"error: <what the peer raised>"`` (what it does with a case is the
    figure). Run in the peer's environment: this module needs nothing but the standard library."""
    scores: dict[str, dict[str, Any]] = {}
    for metric in metrics:
        for case in job["cases"]:
            try:
                value: Any = await score(job, metric, case)
                value = "nan" if math.isnan(value) else value
            except Exception as exc:
                value = f"error: {type(exc).__name__}: {str(exc).splitlines()[0][:80]}"
            scores.setdefault(metric, {})[case["id"]] = value
    return scores


def show(value: Any) -> str:
    """A side's score as the comparison prints it: four decimals, or what the peer raised."""
    if isinstance(value, float):
        return f"{value:.4f}"
    text = str(value)
    return "raises " + text.split(":")[1].strip() if text.startswith("error: ") else text
