"""A rate-limited day: adaptive concurrency (AIMD, pause on Retry-After, retries first) beside a fixed limit.

    python -m tools.perf.rate_limited [--traces 2000] [--concurrency 32] [--rps 100] [--latency-ms 100]

The local judge runs in its own process with a token-bucket rate limit and answers 429 with Retry-After when
it is exceeded. The same day is judged twice, each time against a fresh server and an empty cache: with the
client's adaptive limiter (the default) and with a fixed limit (`adaptive=False`, the behaviour before).
Reported: wall time, the 429s the provider had to send, and the longest a call took from its first attempt.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import COMPLETED
from tools.perf.judge_throughput import _traces


def _server(latency_ms: float, rps: float, burst: int) -> tuple[subprocess.Popen, str]:
    command = [
        sys.executable,
        "-m",
        "eval_platform.local_judge",
        "--port",
        "0",
        "--latency-ms",
        str(latency_ms),
        "--rate-limit-rps",
        str(rps),
        "--rate-limit-burst",
        str(burst),
    ]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"local judge did not start: {line!r}")
    return process, line.rsplit(" ", 1)[1]


def run(adaptive: bool, traces: pl.DataFrame, args: argparse.Namespace) -> dict:
    process, base_url = _server(args.latency_ms, args.rps, args.burst)
    try:
        config = EvaluatorConfig.model_validate(
            {
                "name": "rate_limited",
                "mode": "score",
                "model": "openai/mock",
                "api_base": base_url,
                "prompt": "Q: {{input}}\nA: {{output}}",
                "score_scale": {"min": 0, "max": 1},
                "max_retries": 20,
            }
        )
        with tempfile.TemporaryDirectory() as state:
            runtime = ModelRuntime(
                client=LiteLLMModelClient(max_concurrency=args.concurrency, adaptive=adaptive),
                cache=ModelCache(Path(state) / "cache"),
                ledger=BudgetLedger(Path(state) / "budget.sqlite"),
                env={},
            )
            started = time.perf_counter()
            rows = judge_day(config, "2026-11-10", traces, runtime).rows
            wall = time.perf_counter() - started
        with urllib.request.urlopen(f"{base_url}/stats") as response:
            stats = json.load(response)
    finally:
        process.terminate()
        process.wait(10)
    return {
        "client": "adaptive" if adaptive else "fixed",
        "wall_s": round(wall, 1),
        "completed": rows.filter(pl.col("status") == COMPLETED).height,
        "http_429": stats["rate_limited"],
        "requests": stats["requests"],
        "slowest_call_s": round(float(rows["latency_ms"].max()) / 1000, 1),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rps", type=float, default=100.0, help="the provider's rate limit, requests per second")
    parser.add_argument("--burst", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=100.0)
    args = parser.parse_args(argv)
    traces = _traces(args.traces)
    print(
        f"{args.traces} traces, concurrency {args.concurrency}, limit {args.rps:g} req/s (burst {args.burst}), "
        f"latency {args.latency_ms:g} ms"
    )
    for adaptive in (False, True):
        print(run(adaptive, traces, args), flush=True)


if __name__ == "__main__":
    main()
