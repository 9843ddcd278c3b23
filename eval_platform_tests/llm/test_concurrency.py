"""Adaptive concurrency per endpoint: pauses for Retry-After, halves on 429s and recovers, retries first."""

from __future__ import annotations

import asyncio

from eval_platform.llm.concurrency import NEW, RETRY, EndpointLimiter


def test_a_429_pauses_the_endpoint_and_halves_its_concurrency_once_per_pause():
    async def scenario():
        limiter = EndpointLimiter(8)
        limiter.rate_limited(0.2)
        limiter.rate_limited(0.2)  # the same burst of 429s: one decrease
        assert limiter.capacity == 4 and limiter.decreases == 1
        loop = asyncio.get_running_loop()
        started = loop.time()
        await limiter.acquire(NEW)  # waits for the pause, whoever got the 429
        assert loop.time() - started >= 0.19
        limiter.release()
        for _ in range(40):
            limiter.succeeded()
        assert limiter.capacity == 8  # additive increase back to the maximum

    asyncio.run(scenario())


def test_a_waiting_retry_gets_the_next_slot_before_new_calls():
    async def scenario():
        limiter = EndpointLimiter(1)
        await limiter.acquire(NEW)
        order: list[str] = []

        async def call(name: str, priority: int):
            await limiter.acquire(priority)
            order.append(name)
            limiter.release()

        tasks = [asyncio.create_task(call(f"new{i}", NEW)) for i in range(3)]
        await asyncio.sleep(0)
        tasks.append(asyncio.create_task(call("retry", RETRY)))
        await asyncio.sleep(0)
        limiter.release()
        await asyncio.gather(*tasks)
        assert order == ["retry", "new0", "new1", "new2"]

    asyncio.run(scenario())


def test_a_fixed_limiter_keeps_its_concurrency():
    async def scenario():
        limiter = EndpointLimiter(8, adaptive=False)
        limiter.rate_limited(5.0)
        assert limiter.capacity == 8 and limiter.paused_until == 0.0

    asyncio.run(scenario())


def test_a_rate_limited_day_finishes_with_every_row_completed(tmp_path):
    import polars as pl

    from eval_platform.judging.runner import judge_day
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
    from eval_platform.llm.runtime import ModelRuntime
    from eval_platform_tests.conftest import REPO_DATA
    from eval_platform_tests.judging.test_runner import evaluator, make_traces
    from tools.local_judge_wires import WiredJudgeServer

    server = WiredJudgeServer(data_root=REPO_DATA, rate_limit_rps=40, rate_limit_burst=5)
    server.start()
    try:
        client = LiteLLMModelClient(max_concurrency=16, retry=RetryPolicy(base_delay_s=0.05, max_delay_s=0.5))
        runtime = ModelRuntime(client, ModelCache(tmp_path / "c"), BudgetLedger(tmp_path / "b.sqlite"), env={})
        config = evaluator(server, "mock").model_copy(update={"max_retries": 10})
        rows = judge_day(config, "2026-11-10", make_traces(60), runtime).rows
        assert rows.filter(pl.col("status") == "COMPLETED").height == 60
        import httpx

        assert httpx.get(f"{server.base_url}/stats").json()["rate_limited"] > 0  # the limit did bite
    finally:
        server.stop()
