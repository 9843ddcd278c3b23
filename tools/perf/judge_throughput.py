"""Judge-path throughput and CPU per call against the local judge, alternated with a bare aiohttp client.

    python -m tools.perf.judge_throughput [--traces 4000] [--concurrency 128] [--latency-ms 0]
        [--rounds 3] [--litellm]

The local judge runs in its own process and answers every call after a fixed artificial latency, so the
ceiling is about concurrency / latency calls per second (none at 0 ms: then the bare client's rate is the
yardstick). Every measurement runs in a fresh process, in turn: the bare client (aiohttp, same concurrency,
same request bodies), then the platform's judge path (`judge_day`: prompt rendering, cache, budget, the
client with its retries and limiter, parsing, rows), then with `--litellm` the same day with every call
through litellm (`lean=False`); that sequence `--rounds` times (A B A B ...), so neither side inherits the
other's warm caches or its garbage, and a drift of the shared machine's speed hits both. The ratio
ours / bare is taken round by round; min and median are printed, with each side's CPU time per call (the
process's own user + system time over the timed part, `time.process_time`, every thread included) and the
local judge's (its process's user + system time over the same part, from /proc).
Per-process start-up (imports; for the judge path also litellm's price map and uvloop, read once per process)
is outside the timed part on both sides: the timed part is one day of calls, and what it costs per call.

`--before DIR` also measures, in the same rounds, the judge path of another checkout of the project (an earlier
commit in a `git worktree`), run by this same script: before and after on the same machine at the same time.
`--budget` gives the evaluator prices and a daily budget (every call then reserves and settles in the ledger).
`--duplicates 0.2` makes that share of the day's traces repeat another's (input, output), next to it, so that the
identical requests are in flight at once: the judge path sends each distinct request once (single flight,
`llm.call`) and the run prints its calls, cache hits and cost (with `--budget`); the bare client sends the distinct
requests only, so both sides time the same calls.

`--worker bare|ours|litellm --base-url URL` runs one measurement against a running local judge and prints it
as one JSON line (what the rounds run); `--profile FILE` then writes a cProfile of the timed part.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.schemas import TRACE_SCHEMA, conform

DAY = "2026-11-10"
KINDS = ("bare", "ours", "litellm")


def _distinct(n: int, duplicates: float) -> int:
    return n - round(n * duplicates)


def _traces(n: int, duplicates: float = 0.0) -> pl.DataFrame:
    """`n` traces; a `duplicates` share of them repeats the (input, output) of the trace before it."""
    distinct = _distinct(n, duplicates)
    items = [i * distinct // n for i in range(n)]  # each of 0..distinct-1, some twice in a row
    frame = pl.DataFrame(
        {
            "trace_id": [f"bench-{i}" for i in range(n)],
            "timestamp": [f"{DAY}T12:00:00Z"] * n,
            "date": [DAY] * n,
            "input": [f"Summarise item {i} of the benchmark in one sentence." for i in items],
            "output": [f"Item {i} is a synthetic benchmark trace with a short answer." for i in items],
        }
    ).with_columns(pl.col("timestamp").str.to_datetime(time_zone="UTC"))
    return conform(frame, TRACE_SCHEMA)


def _config(base_url: str, budget: bool = False) -> EvaluatorConfig:
    priced = {"input_cost_per_million": 0.15, "output_cost_per_million": 0.6, "max_daily_cost_usd": 1000.0}
    return EvaluatorConfig.model_validate(
        {
            "name": "bench",
            "mode": "score",
            "model": "openai/mock",
            "api_base": base_url,
            "prompt": "Question: {{input}}\nAnswer: {{output}}",
            **(priced if budget else {}),
        }
    )


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


def _process_cpu_s(pid: int) -> float:
    """User + system seconds a running process has used so far (Linux /proc; 0.0 where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _bare_client(base_url: str, bodies: list[dict], concurrency: int) -> int:
    import aiohttp

    semaphore = asyncio.Semaphore(concurrency)
    connector = aiohttp.TCPConnector(limit=concurrency)
    answered = 0
    async with aiohttp.ClientSession(connector=connector) as session:

        async def one(body: dict) -> None:
            nonlocal answered
            async with semaphore, session.post(f"{base_url}/chat/completions", json=body) as response:
                json.loads(await response.text())["choices"][0]["message"]["content"]
                answered += 1

        await asyncio.gather(*(one(b) for b in bodies))
    return answered


def _worker(
    kind: str, base_url: str, n: int, concurrency: int, profile: str | None, budget: bool, duplicates: float = 0.0
) -> dict:
    """One measurement in this process: what it timed, as a dict (printed as one JSON line)."""
    import aiohttp  # noqa: F401 - imported before timing on both sides: a start-up cost, not a per-call one

    from eval_platform.judging.runner import judge_day
    from eval_platform.llm import pricing
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient, _litellm
    from eval_platform.llm.runtime import ModelRuntime

    config, traces = _config(base_url, budget), _traces(n, duplicates)
    day: dict = {}
    with tempfile.TemporaryDirectory() as state:
        if kind == "bare":
            distinct = traces.unique(["input", "output"], keep="first", maintain_order=True)
            bodies = [
                {"model": "mock", "messages": build_messages(config, trace_values(t)), "max_tokens": 512}
                for t in distinct.to_dicts()
            ]

            def run() -> int:
                day.update(calls=len(bodies))
                return asyncio.run(_bare_client(base_url, bodies, concurrency))

        else:
            if kind == "litellm":
                _litellm()  # its seconds of import are a start-up cost, not a per-call one
            # Read once per process, like the imports (and the first day of every run pays them, not every day):
            # litellm's price map (~70 ms of JSON) and uvloop, outside the timed part.
            pricing.model_cost()
            with contextlib.suppress(ImportError):
                import uvloop  # noqa: F401
            runtime = ModelRuntime(
                client=LiteLLMModelClient(max_concurrency=concurrency, lean=kind != "litellm"),
                cache=ModelCache(Path(state) / "cache"),
                ledger=BudgetLedger(Path(state) / "budget.sqlite"),
                env=os.environ,
            )

            def run() -> int:
                day.update(judge_day(config, DAY, traces, runtime).summary)
                return day["completed"]

        profiler = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        cpu, wall = time.process_time(), time.perf_counter()
        completed = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if profiler is not None and profile:
            profiler.disable()
            profiler.dump_stats(profile)
    # calls: the requests sent (one per trace, but for identical ones); cost: what they cost (with --budget)
    return {
        "kind": kind,
        "calls": day["calls"],
        "completed": completed,
        "wall_s": wall,
        "cpu_s": cpu,
        "cache_hits": day.get("cache_hits", 0),
        "cost_usd": day.get("cost_usd") or 0.0,
    }


def _measure(kind: str, server: subprocess.Popen, base_url: str, args: argparse.Namespace) -> dict:
    # This file, run as a script: with --before, on the other checkout's package (PYTHONPATH first).
    command = [sys.executable, __file__, "--worker", "ours" if kind == "before" else kind, "--base-url", base_url]
    command += ["--traces", str(args.traces), "--concurrency", str(args.concurrency)]
    command += ["--budget"] if args.budget else []
    command += ["--duplicates", str(args.duplicates)] if args.duplicates else []
    env = dict(os.environ)
    if kind == "before":
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(args.before).resolve()), env.get("PYTHONPATH")]))
    else:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[2]), env.get("PYTHONPATH")]))
    server_cpu = _process_cpu_s(server.pid)
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    server_cpu = _process_cpu_s(server.pid) - server_cpu  # the worker's start-up is idle time for the server
    if done.returncode != 0:
        raise RuntimeError(f"{kind} worker failed ({done.returncode}): {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["server_cpu_s"] = server_cpu
    return result


def _row(label: str, runs: list[dict]) -> str:
    rates = [r["calls"] / r["wall_s"] for r in runs]
    cpu_ms = [r["cpu_s"] / r["calls"] * 1000 for r in runs]
    server_ms = [r["server_cpu_s"] / r["calls"] * 1000 for r in runs]
    return (
        f"{label:<20}: {min(rates):8.1f} / {statistics.median(rates):8.1f} calls/s   "
        f"CPU per call {min(cpu_ms):.3f} / {statistics.median(cpu_ms):.3f} ms   "
        f"local judge's {statistics.median(server_ms):.3f} ms   completed {min(r['completed'] for r in runs)}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--litellm", action="store_true", help="also time the day with every call through litellm")
    parser.add_argument("--before", help="also time the judge path of this other checkout of the project")
    parser.add_argument("--budget", action="store_true", help="a priced evaluator with a daily budget")
    parser.add_argument(
        "--duplicates", type=float, default=0.0, help="the share of traces repeating another's (input, output)"
    )
    parser.add_argument("--worker", choices=KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    parser.add_argument("--profile", help="with --worker: write a cProfile of the timed part to this file")
    args = parser.parse_args(argv)

    if args.worker:
        worker = _worker(
            args.worker, args.base_url, args.traces, args.concurrency, args.profile, args.budget, args.duplicates
        )
        print(json.dumps(worker))
        return 0

    kinds = ["bare", "ours"] + (["before"] if args.before else []) + (["litellm"] if args.litellm else [])
    runs: dict[str, list[dict]] = {kind: [] for kind in kinds}
    load_before = os.getloadavg()
    server, base_url = _start_server(args.latency_ms)
    try:
        for _ in range(args.rounds):
            for kind in kinds:
                runs[kind].append(_measure(kind, server, base_url, args))
    finally:
        server.terminate()
        server.wait(timeout=10)
    load_after = os.getloadavg()

    theoretical = f"{args.concurrency / (args.latency_ms / 1000):.0f} calls/s" if args.latency_ms > 0 else "none"
    print(
        f"traces={args.traces} concurrency={args.concurrency} latency={args.latency_ms:.0f}ms rounds={args.rounds}"
        f"{' budget' if args.budget else ''}{f' duplicates={args.duplicates:g}' if args.duplicates else ''} "
        f"(theoretical ceiling {theoretical}; load average {load_before[0]:.2f} before, {load_after[0]:.2f} after)"
    )
    print("each a fresh process, in turn; figures are min / median over the rounds (rates: min / median)")
    labels = {
        "bare": "bare aiohttp client",
        "ours": "eval_platform judge",
        "before": "judge path --before",
        "litellm": "all through litellm",
    }
    for kind in kinds:
        print(_row(labels[kind], runs[kind]))
    for kind in kinds[1:]:
        pairs = zip(runs["bare"], runs[kind], strict=True)
        ratios = [(b["wall_s"] / o["wall_s"]) * (o["calls"] / b["calls"]) for b, o in pairs]
        print(
            f"{'ratio ' + kind + ' / bare':<20}: {min(ratios):8.2f} / {statistics.median(ratios):.2f}  "
            f"(round by round: {', '.join(f'{r:.2f}' for r in ratios)}; targets at concurrency 128: "
            f">= 0.90 at 100 ms, >= 0.75 at 0 ms)"
        )
    if args.duplicates:
        distinct = _distinct(args.traces, args.duplicates)
        for kind in kinds[1:]:
            last = runs[kind][-1]
            cost = f", cost {last['cost_usd']:.6f} USD" if args.budget else ""
            print(
                f"{'paid once ' + kind:<20}: {args.traces} traces, {distinct} distinct: {last['calls']} calls, "
                f"{last['cache_hits']} cache hits{cost}"
            )
    completed = min(r["completed"] for kind in kinds[1:] for r in runs[kind])
    return 0 if completed == args.traces else 1


if __name__ == "__main__":
    sys.exit(main())
