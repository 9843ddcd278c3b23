"""A run whose budget is held by another host's reservations says so in the run's log and in the partition's
materialization metadata, and waits only EVAL_PLATFORM_BUDGET_WAIT_S before skipping (README, "More than one
machine", "A dead run")."""

from __future__ import annotations

import logging

import dagster as dg

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import copy_sample_days, write_evaluator
from eval_platform_tests.llm.test_budget_use import reserve_on_another_host

DAY = "2026-11-09"


def test_a_budget_held_by_another_hosts_reservations_is_told_in_the_log_and_the_metadata(
    data_root, local_judge, monkeypatch
):
    monkeypatch.setenv("EVAL_PLATFORM_BUDGET_WAIT_S", "1")
    # 1 USD per million tokens: every call's worst case is far under the 1 USD host-b holds, and above the 1e-6 left.
    write_evaluator(
        data_root,
        "tight",
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="Rate {{output}}",
        max_tokens=100,
        input_cost_per_million=1.0,
        output_cost_per_million=1.0,
        max_daily_cost_usd=1.000001,
    )
    copy_sample_days(data_root, [DAY])
    # A run on host-b reserved 1 USD of today's budget and died: its reservation stays in flight for 15 minutes.
    reserve_on_another_host(data_root / "state" / "budget.sqlite", "", "tight", 1.0, ttl_s=900)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        assets = list(defs.assets)
        ingest = dg.materialize(
            assets, selection=["traces"], partition_key=DAY, instance=instance, resources=defs.resources
        )
        assert ingest.success
        result = dg.materialize(
            assets,
            selection=["judge_scores"],
            partition_key=dg.MultiPartitionKey({"date": DAY, "evaluator": "tight"}),
            instance=instance,
            resources=defs.resources,
            raise_on_error=False,
        )
        metadata = result.asset_materializations_for_node("judge_scores")[0].metadata
        warnings = [entry.user_message for entry in instance.all_logs(result.run_id) if entry.level == logging.WARNING]
    # every trace that would be judged (the others are skipped for what they are: an app error, an empty output)
    assert metadata["reasons"].value["budget_exhausted"] > 0 and metadata["completed"].value == 0
    wait = metadata["budget_wait"].value
    assert wait["evaluator"] == "tight" and wait["hosts"] == ["host-b"] and wait["reserved_elsewhere_usd"] == 1.0
    assert wait["max_wait_s"] == 1.0 and wait["outcome"].startswith("gave up")
    (told,) = [w for w in warnings if "waiting up to" in w]
    assert "evaluator tight" in told and "1 USD reserved by calls in flight on host-b" in told
    assert "waiting up to 1 s" in told and "EVAL_PLATFORM_BUDGET_WAIT_S" in told
