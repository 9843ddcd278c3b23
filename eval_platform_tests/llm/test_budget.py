"""Budgets: spend never passes the daily/monthly budget, even with partitions running in parallel processes."""

from __future__ import annotations

import multiprocessing
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.conftest import REPO_DATA
from eval_platform_tests.judging.test_runner import make_traces
from eval_platform_tests.shared_state_backends import cache_at, ledger_at

# 1000 $ per million tokens makes one call cost about 0.1-0.3 $ (prompt ~150 tokens, reply ~40).
PRICED = {"input_cost_per_million": 1000.0, "output_cost_per_million": 1000.0}


def budgeted(base_url: str, **limits) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": "budgeted",
            "mode": "score",
            "model": "openai/mock",
            "api_base": base_url,
            "prompt": "Q: {{input}} A: {{output}}",
            "max_tokens": 100,
            **PRICED,
            **limits,
        }
    )


def _run_partition(args: tuple[str, str, str, int, str]) -> list[dict]:
    base_url, state, day, n, postgres_url = args
    runtime = ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=8),
        cache=cache_at(Path(state) / f"cache-{day}", postgres_url or None),
        ledger=ledger_at(Path(state) / "budget.sqlite", postgres_url or None),
        env={},
    )
    traces = make_traces(n).with_columns(pl.col("trace_id") + f"-{day}", pl.lit(day).alias("date"))
    rows = judge_day(budgeted(base_url, max_daily_cost_usd=2.0), day, traces, runtime).rows
    return rows.select("status", "reason", "cost_usd").to_dicts()


def test_concurrent_partitions_never_overspend(local_judge, tmp_path, state_backend):
    days = ["2026-11-09", "2026-11-10", "2026-11-11"]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(
            _run_partition, [(local_judge.base_url, str(tmp_path), d, 30, state_backend.arg) for d in days]
        )
    rows = [row for result in results for row in result]
    spent = sum(r["cost_usd"] or 0 for r in rows)
    completed = sum(r["status"] == "COMPLETED" for r in rows)
    exhausted = sum(r["reason"] == "budget_exhausted" for r in rows)
    assert completed > 0 and exhausted > 0  # the budget bit, and it let some calls through
    assert completed + exhausted == 90
    assert spent <= 2.0
    ledger = state_backend.ledger(tmp_path / "budget.sqlite")
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    assert abs(ledger.spent("budgeted", day=today) - spent) < 1e-9  # the ledger holds what the rows say


def test_monthly_budget_counts_earlier_days(local_judge, tmp_path, state_backend):
    clock = {"now": datetime(2026, 11, 3, tzinfo=UTC)}
    ledger = state_backend.ledger(tmp_path / "budget.sqlite", clock=lambda: clock["now"])
    runtime = ModelRuntime(LiteLLMModelClient(), ModelCache(tmp_path / "cache"), ledger, env={})
    config = budgeted(local_judge.base_url, max_monthly_cost_usd=1.5)
    first = judge_day(config, "2026-11-03", make_traces(4), runtime).rows
    clock["now"] = datetime(2026, 11, 20, tzinfo=UTC)
    later = judge_day(config, "2026-11-20", make_traces(8).with_columns(pl.col("trace_id") + "-b"), runtime).rows
    total = first["cost_usd"].sum() + later["cost_usd"].sum()
    assert total <= 1.5
    assert "budget_exhausted" in later["reason"].to_list()
    clock["now"] = datetime(2026, 12, 1, tzinfo=UTC)  # a new month starts from zero
    december = judge_day(config, "2026-12-01", make_traces(2).with_columns(pl.col("trace_id") + "-c"), runtime).rows
    assert december["status"].to_list() == ["COMPLETED", "COMPLETED"]


def test_cost_is_tokens_times_price_per_million(local_judge, tmp_path):
    runtime = ModelRuntime(
        LiteLLMModelClient(), ModelCache(tmp_path / "c"), BudgetLedger(tmp_path / "b.sqlite"), env={}
    )
    rows = judge_day(budgeted(local_judge.base_url), "2026-11-10", make_traces(2), runtime).rows
    expected = (rows["prompt_tokens"] * 1000.0 + rows["completion_tokens"] * 1000.0) / 1e6
    assert (rows["cost_usd"] - expected).abs().max() < 1e-12
    assert (rows["prompt_tokens"] > 0).all()


@pytest.fixture(scope="module")
def proxy():
    """A gateway on localhost answering as gpt-4o-mini (the local judge's mock behind a paid model's name)."""
    from tools.local_judge_wires import WiredJudgeServer

    server = WiredJudgeServer(data_root=REPO_DATA, aliases={"gpt-4o-mini": "mock"})
    server.start()
    yield server
    server.stop()


def proxied(base_url: str, **fields) -> EvaluatorConfig:
    return EvaluatorConfig.model_validate(
        {
            "name": "proxied",
            "mode": "score",
            "model": "openai/gpt-4o-mini",
            "api_base": base_url,
            "prompt": "Q: {{input}} A: {{output}}",
            "max_tokens": 100,
            **fields,
        }
    )


def test_known_model_behind_a_localhost_api_base_is_charged_its_price(proxy, tmp_path):
    # A localhost api_base is how people run the LiteLLM proxy or a tunnel in front of a paid provider.
    import litellm

    config = proxied(proxy.base_url)
    runtime = ModelRuntime(
        LiteLLMModelClient(), ModelCache(tmp_path / "c"), BudgetLedger(tmp_path / "b.sqlite"), env={}
    )
    rows = judge_day(config, "2026-11-10", make_traces(3), runtime).rows
    entry = litellm.model_cost["gpt-4o-mini"]
    expected = (
        rows["prompt_tokens"] * entry["input_cost_per_token"]
        + rows["completion_tokens"] * entry["output_cost_per_token"]
    )
    assert (rows["status"] == "COMPLETED").all() and (rows["cost_usd"] > 0).all()
    assert (rows["cost_usd"] - expected).abs().max() < 1e-15


def test_daily_budget_of_a_known_model_behind_a_localhost_api_base_triggers(proxy, tmp_path):
    # Before the pricing rule, these calls cost 0 and the budget never stopped anything.
    from eval_platform.judging.prompts import build_messages, trace_values
    from eval_platform.llm.pricing import worst_case_prompt_tokens

    entry = litellm_price_map_entry("gpt-4o-mini")
    assert (entry["input_cost_per_token"], entry["output_cost_per_token"]) == (0.15e-6, 0.60e-6)
    traces = make_traces(12)
    probe = proxied(proxy.base_url)
    worst = max(
        (worst_case_prompt_tokens(build_messages(probe, trace_values(t, None))) * 0.15 + 100 * 0.60) / 1e6
        for t in traces.to_dicts()
    )
    budget = 3.5 * worst
    runtime = ModelRuntime(
        LiteLLMModelClient(), ModelCache(tmp_path / "c"), BudgetLedger(tmp_path / "b.sqlite"), env={}
    )
    rows = judge_day(proxied(proxy.base_url, max_daily_cost_usd=budget), "2026-11-10", traces, runtime).rows
    completed = rows.filter(pl.col("status") == "COMPLETED")
    expected = (completed["prompt_tokens"] * 0.15 + completed["completion_tokens"] * 0.60) / 1e6
    assert (completed["cost_usd"] - expected).abs().max() < 1e-15
    skipped = rows.filter(pl.col("status") == "SKIPPED")
    assert skipped.height > 0 and set(skipped["reason"]) == {"budget_exhausted"}
    assert budget - worst <= rows["cost_usd"].sum() <= budget


def litellm_price_map_entry(model: str) -> dict:
    import litellm

    return litellm.model_cost[model]


def test_budget_on_a_local_model_without_a_price_is_a_load_error():
    with pytest.raises(ValueError, match="no known price"):
        EvaluatorConfig.model_validate(
            {
                "name": "x",
                "mode": "score",
                "model": "openai/my-finetune",
                "api_base": "http://127.0.0.1:4000/v1",
                "prompt": "{{output}}",
                "max_daily_cost_usd": 1.0,
            }
        )


def test_cached_prompt_tokens_are_stored_and_priced_at_the_cached_rate(tmp_path):
    from tools.local_judge_wires import WiredJudgeServer

    server = WiredJudgeServer(data_root=REPO_DATA, prompt_cache=True)
    server.start()
    try:
        config = EvaluatorConfig.model_validate(
            {**budgeted(server.base_url).model_dump(), "cached_input_cost_per_million": 100.0}
        )
        runtime = ModelRuntime(
            LiteLLMModelClient(max_concurrency=1),
            ModelCache(tmp_path / "c"),
            BudgetLedger(tmp_path / "b.sqlite"),
            env={},
        )
        rows = judge_day(config, "2026-11-10", make_traces(3), runtime).rows.sort("trace_id")
    finally:
        server.stop()
    cached = rows["cached_prompt_tokens"].to_list()
    assert cached[0] == 0 and all(c > 0 for c in cached[1:])  # the fixed system prompt repeats: cached
    expected = (
        (rows["prompt_tokens"] - rows["cached_prompt_tokens"]) * 1000.0
        + rows["cached_prompt_tokens"] * 100.0
        + rows["completion_tokens"] * 1000.0
    ) / 1e6
    assert (rows["cost_usd"] - expected).abs().max() < 1e-12


def test_litellm_cached_price_is_used_when_known():
    from eval_platform.llm import pricing
    from eval_platform.llm.pricing import model_cost

    prices = pricing.lookup("openai/gpt-4o-mini")
    assert prices.cached_input_per_million == model_cost()["gpt-4o-mini"]["cache_read_input_token_cost"] * 1e6
    assert prices.cost(1000, 0, cached_prompt_tokens=1000) < prices.cost(1000, 0)
