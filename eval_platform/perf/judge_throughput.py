"""Judge-path throughput against the local judge, beside a bare async HTTP client's ceiling in the same run.

    python -m eval_platform.perf.judge_throughput [--traces 2000] [--concurrency 32] [--latency-ms 250] [--litellm]

The local judge runs in its own process and answers every call after a fixed artificial latency, so the
ceiling is about concurrency / latency calls per second. The bare client (aiohttp, same concurrency, same
request bodies) measures what this machine reaches; the platform's path (prompt rendering, the client with
its retries and limiter, cache, parsing, row building) is reported as a fraction of it. OpenAI-compatible
endpoints take the lean path (`llm.openai_compat`); `--litellm` also times the same day with every call
through litellm (`lean=False`), the path before, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import JudgeCache
from eval_platform.llm.client import LiteLLMJudgeClient, _litellm
from eval_platform.llm.runtime import JudgeRuntime
from eval_platform.schemas import TRACE_SCHEMA, conform


def _traces(n: int) -> pl.DataFrame:
    frame = pl.DataFrame(
        {
            "trace_id": [f"bench-{i}" for i in range(n)],
            "timestamp": ["2026-11-10T12:00:00Z"] * n,
            "date": ["2026-11-10"] * n,
            "input": [f"Summarise item {i} of the benchmark in one sentence." for i in range(n)],
            "output": [f"Item {i} is a synthetic benchmark trace with a short answer." for i in range(n)],
        }
    ).with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    return conform(frame, TRACE_SCHEMA)


def _start_server(latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "eval_platform.local_judge", "--port", "0", "--latency-ms", str(latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"local judge did not start: {line!r}")
    return process, line.rsplit(" ", 1)[1]


async def _bare_client(base_url: str, bodies: list[dict], concurrency: int) -> float:
    semaphore = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: dict) -> None:
            async with semaphore, session.post(f"{base_url}/chat/completions", json=body) as response:
                json.loads(await response.text())["choices"][0]["message"]["content"]

        started = time.perf_counter()
        await asyncio.gather(*(one(b) for b in bodies))
        return len(bodies) / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency-ms", type=float, default=250.0)
    parser.add_argument("--litellm", action="store_true", help="also time the day with every call through litellm")
    args = parser.parse_args(argv)

    server, base_url = _start_server(args.latency_ms)
    try:
        config = EvaluatorConfig.model_validate(
            {
                "name": "bench",
                "mode": "score",
                "model": "openai/mock",
                "api_base": base_url,
                "prompt": "Question: {{input}}\nAnswer: {{output}}",
            }
        )
        traces = _traces(args.traces)
        bodies = [
            {"model": "mock", "messages": build_messages(config, trace_values(t)), "max_tokens": 512}
            for t in traces.to_dicts()
        ]
        ceiling = asyncio.run(_bare_client(base_url, bodies, args.concurrency))

        def timed(lean: bool) -> tuple[float, int]:
            with tempfile.TemporaryDirectory() as state:
                runtime = JudgeRuntime(
                    client=LiteLLMJudgeClient(max_concurrency=args.concurrency, lean=lean),
                    cache=JudgeCache(Path(state) / "cache"),
                    ledger=BudgetLedger(Path(state) / "budget.sqlite"),
                    env=os.environ,
                )
                started = time.perf_counter()
                result = judge_day(config, "2026-11-10", traces, runtime)
                return args.traces / (time.perf_counter() - started), result.summary["completed"]

        ours, completed = timed(lean=True)
        if args.litellm:
            _litellm()  # imported before timing: its seconds of import are a start-up cost, not per call
            through_litellm, completed_litellm = timed(lean=False)
    finally:
        server.terminate()
        server.wait(timeout=10)
    # At 0 ms the server's latency sets no ceiling: the bare client's own rate is the one to compare with.
    theoretical = f"{args.concurrency / (args.latency_ms / 1000):.0f} calls/s" if args.latency_ms > 0 else "none"
    print(
        f"traces={args.traces} concurrency={args.concurrency} latency={args.latency_ms:.0f}ms "
        f"(theoretical ceiling {theoretical})"
    )
    print(f"bare aiohttp client : {ceiling:8.1f} calls/s")
    print(f"eval_platform judge : {ours:8.1f} calls/s  ({completed} COMPLETED rows)")
    print(f"ratio               : {ours / ceiling:8.2f}  (target >= 0.90 at 100 ms, >= 0.95 at 500 ms)")
    if args.litellm:
        print(
            f"all through litellm : {through_litellm:8.1f} calls/s  ({completed_litellm} COMPLETED rows, "
            f"ratio {through_litellm / ceiling:.2f})"
        )
        completed = min(completed, completed_litellm)
    return 0 if completed == args.traces else 1


if __name__ == "__main__":
    sys.exit(main())
