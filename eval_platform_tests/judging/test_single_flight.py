"""Paid once: identical judge requests in flight at the same moment are sent once (single flight), counted at the
wire of the local judge, and the dry run's distinct count is what the run sends and the ledger holds."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import polars as pl

from eval_platform.dry_run import estimate
from eval_platform.ingest.traces import read_trace_day
from eval_platform.judging.loading import load_evaluators
from eval_platform.judging.runner import judge_day
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.settings import state_dir
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import judge_requests, write_evaluator
from eval_platform_tests.judging.test_runner import evaluator, make_traces

DAY = "2026-11-10"


def support_bot_day(n: int = 200, distinct: int = 42) -> list[dict]:
    """A day of `n` traces of a support bot asked the same few things: `distinct` (input, output) pairs."""
    return [
        {
            "trace_id": f"t{i:03d}",
            "timestamp": f"{DAY}T12:{i // 60:02d}:{i % 60:02d}Z",
            "project_id": "support-bot",
            "input": f"How do I reset my password? (case {i % distinct})",
            "output": f"Open Settings, then Security, then step {i % distinct}.",
        }
        for i in range(n)
    ]


def test_a_day_with_42_distinct_pairs_in_200_traces_makes_42_calls(data_root, local_judge):
    day_folder = data_root / "traces" / DAY
    day_folder.mkdir(parents=True)
    (day_folder / "traces.jsonl").write_text("".join(json.dumps(t) + "\n" for t in support_bot_day()))
    write_evaluator(
        data_root,
        "helpful",
        mode="score",
        score_scale={"min": 1, "max": 5},
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="Q: {{input}}\nA: {{output}}",
        max_tokens=100,
        input_cost_per_million=1.0,
        output_cost_per_million=2.0,
        max_daily_cost_usd=100.0,
    )
    config = load_evaluators(data_root / "evaluators")["helpful"]
    bill = estimate(config, [DAY], DataRoot.from_env(data_root))
    assert (bill.calls, bill.distinct, bill.cached) == (200, 42, 0)

    ledger = BudgetLedger(data_root / "ledger.sqlite")
    runtime = ModelRuntime(
        LiteLLMModelClient(max_concurrency=16), ModelCache(state_dir(data_root) / "judge_cache"), ledger, env={}
    )
    before = judge_requests(local_judge)
    result = judge_day(config, DAY, read_trace_day(data_root, DAY).traces, runtime)
    rows = result.rows
    assert judge_requests(local_judge) - before == bill.distinct == 42  # what the dry run said is what is sent

    assert rows.height == 200 and (rows["status"] == "COMPLETED").all()
    paid = rows.filter(~pl.col("cache_hit"))
    shared = rows.filter(pl.col("cache_hit"))
    assert paid.height == 42 and paid["calls"].to_list() == [1] * 42 and (paid["cost_usd"] > 0).all()
    # the others are answered as the cache answers: free, no call, what the reply cost kept in cached_cost_usd
    assert shared.height == 158 and shared["calls"].sum() == 0 and shared["cost_usd"].sum() == 0
    assert (shared["cached_cost_usd"] > 0).all()
    assert result.summary["calls"] == 42 and result.summary["cache_hits"] == 158
    # every trace of one pair got the one reply
    pair_of = {t["trace_id"]: t["input"] for t in support_bot_day()}
    per_pair = rows.with_columns(pl.col("trace_id").replace_strict(pair_of).alias("pair")).group_by("pair")
    assert per_pair.agg(pl.col("raw_response").n_unique())["raw_response"].to_list() == [1] * 42

    # the budget reserved and settled the 42 calls made, nothing for the others
    today = datetime.now(UTC).strftime("%Y-%m-%d")
    ((name, _, spend, calls),) = ledger.totals()
    assert (name, calls) == ("helpful", 42)
    assert abs(spend - float(rows["cost_usd"].sum())) < 1e-12
    assert abs(ledger.spent("helpful", day=today) - spend) < 1e-12


def test_a_failed_call_fails_every_identical_request_waiting_for_it_with_its_reason(local_judge, runtime):
    config = evaluator(local_judge, "fault/server_error", max_retries=1)
    traces = make_traces(10).with_columns(pl.lit("Same question?").alias("input"), pl.lit("Same.").alias("output"))
    before = judge_requests(local_judge)
    rows = judge_day(config, DAY, traces, runtime).rows
    assert judge_requests(local_judge) - before == 2  # one call and its one retry, not ten of each
    assert rows["status"].to_list() == ["FAILED"] * 10
    assert rows["reason"].to_list() == ["provider_error:500"] * 10
    assert rows["score"].null_count() == 10  # never a score
    assert rows["reason_detail"].n_unique() == 1 and rows["reason_detail"][0].startswith("after 2 attempt(s)")
    assert sorted(rows["calls"].to_list()) == [0] * 9 + [2]  # the attempts are counted once, on the call made

    # a failure is not cached: the next run calls again (once)
    again = judge_day(config, DAY, traces, runtime).rows
    assert judge_requests(local_judge) - before == 4
    assert again["reason"].to_list() == ["provider_error:500"] * 10


def test_samples_stay_separate_calls_while_identical_traces_share_them(local_judge, runtime):
    config = evaluator(local_judge, samples=3, temperature=0.7)
    traces = make_traces(12).with_columns(
        (pl.lit("Question ") + (pl.int_range(12) % 4).cast(pl.String)).alias("input"),
        (pl.lit("Answer ") + (pl.int_range(12) % 4).cast(pl.String)).alias("output"),
    )
    before = judge_requests(local_judge)
    rows = judge_day(config, DAY, traces, runtime).rows
    assert judge_requests(local_judge) - before == 4 * 3  # 4 distinct traces x 3 samples, each sample a draw
    members = rows.filter(pl.col("role") == "member")
    assert members.height == 12 * 3 and (members["status"] == "COMPLETED").all()
    paid = members.filter(~pl.col("cache_hit"))
    assert sorted(paid.group_by("sample").len()["len"].to_list()) == [4, 4, 4]
