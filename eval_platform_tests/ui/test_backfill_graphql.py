"""A backfill launched through a running webserver's GraphQL API, run by the daemon: what the user then sees."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from eval_platform_tests.ui.conftest import DAYS, EVALUATORS, NOT_REQUESTED, DagsterUI

MATERIALIZATIONS = """
query Materialized($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    __typename
    ... on Asset {
      assetMaterializations {
        partition
        runId
        timestamp
        metadataEntries { label ... on IntMetadataEntry { intValue } }
      }
    }
  }
}
"""
ROLLUP_TIMEOUT_S = 300.0  # the automation sensor ticks every 30 s; this only bounds a hang


def materializations(ui: DagsterUI, asset: str) -> list[dict]:
    asset_or_error = ui.graphql(MATERIALIZATIONS, path=[asset])["assetOrError"]
    if asset_or_error["__typename"] == "AssetNotFoundError":
        return []  # never materialized yet
    assert asset_or_error["__typename"] == "Asset", asset_or_error
    return asset_or_error["assetMaterializations"]


def metadata_int(event: dict, label: str) -> int:
    [value] = [entry["intValue"] for entry in event["metadataEntries"] if entry["label"] == label]
    return value


def materialized_partitions(ui: DagsterUI, asset: str) -> set[str]:
    return {event["partition"] for event in materializations(ui, asset)}


def test_backfill_launched_through_graphql_materializes_exactly_the_requested_partitions(dagster_ui, ui_backfill):
    run_ids = [run["runId"] for run in ui_backfill["runs"]]
    assert ui_backfill["status"] == "COMPLETED_SUCCESS", (
        f"backfill {ui_backfill['id']} ended {ui_backfill['status']}: {ui_backfill['error']}\n"
        f"{dagster_ui.run_errors(run_ids)}\n{dagster_ui.log_tails()}"
    )
    assert run_ids and {run["status"] for run in ui_backfill["runs"]} == {"SUCCESS"}, ui_backfill["runs"]

    # The backfill page's per-asset counts: every targeted partition materialized, none failed.
    counts = {
        "/".join(status["assetKey"]["path"]): (
            status["numPartitionsTargeted"],
            status["numPartitionsMaterialized"],
            status["numPartitionsFailed"],
        )
        for status in ui_backfill["assetBackfillData"]["assetBackfillStatuses"]
    }
    partitions = {f"{day}|{evaluator}" for day in DAYS for evaluator in EVALUATORS}
    assert counts == {"traces": (len(DAYS), len(DAYS), 0), "judge_scores": (len(partitions), len(partitions), 0)}

    # The asset pages: materializations for exactly the requested partitions (multi keys are "date|evaluator").
    assert materialized_partitions(dagster_ui, "traces") == set(DAYS)
    assert materialized_partitions(dagster_ui, "judge_scores") == partitions

    # The catalog: one judged row per ingested trace, for the requested days only, every one judged, but the agent
    # app's traces with no text (recorded without content) or a failed model call, and PandaLM items whose model
    # answered nothing (no_final_answer): SKIPPED, never paid for.
    traced = dagster_ui.query_catalog("SELECT CAST(date AS VARCHAR), count(*) FROM traces GROUP BY ALL ORDER BY ALL")
    assert [day for day, _ in traced] == DAYS and all(n > 0 for _, n in traced)
    judged = dagster_ui.query_catalog(
        "SELECT CAST(date AS VARCHAR), evaluator, count(*), count(DISTINCT trace_id), "
        "count(*) FILTER (WHERE status = 'COMPLETED' OR (status = 'SKIPPED' AND reason IN ('empty_text', 'app_error', "
        "'no_final_answer'))"
        ") FROM judge_scores GROUP BY ALL ORDER BY ALL",
    )
    assert judged == [(day, evaluator, n, n, n) for day, n in traced for evaluator in EVALUATORS]
    assert NOT_REQUESTED not in {row[0] for row in judged}


def test_the_backfill_judges_many_partitions_per_run(dagster_ui, ui_backfill):
    """The backfill policies of judge_scores and traces: fewer runs than partitions, each partition materialized
    exactly once."""
    judged = materializations(dagster_ui, "judge_scores")
    per_partition = Counter(event["partition"] for event in judged)
    assert per_partition == Counter({f"{day}|{evaluator}": 1 for day in DAYS for evaluator in EVALUATORS})
    # Dagster cuts the backfill into ranges holding one dimension fixed (a day's evaluators, or an evaluator's
    # days, depending on which traces days were done when the daemon looked): every run judges at least two.
    per_run = Counter(event["runId"] for event in judged)
    assert min(per_run.values()) >= min(len(DAYS), len(EVALUATORS))
    assert len(per_run) <= len(per_partition) // 2
    # The backfill's runs: one for the traces days (traces' policy takes up to 10 days per run) plus those judge
    # runs, nothing else.
    backfill_runs = {run["runId"] for run in ui_backfill["runs"]}
    assert set(per_run) <= backfill_runs
    assert len(backfill_runs) == 1 + len(per_run)
    ingest_runs = Counter(event["runId"] for event in materializations(dagster_ui, "traces"))
    assert set(ingest_runs) == backfill_runs - set(per_run) and list(ingest_runs.values()) == [len(DAYS)]


def test_rollups_refresh_after_the_backfill_not_during_it(dagster_ui, ui_backfill):
    """The automation sensor, in the real daemon, refreshes judge_cost_daily once the backfill's judging is done:
    its first materialization comes after the last judge_scores one and counts every call of the backfill."""
    deadline = time.monotonic() + ROLLUP_TIMEOUT_S
    while not (rollups := materializations(dagster_ui, "judge_cost_daily")):
        if time.monotonic() > deadline:
            pytest.fail(
                f"judge_cost_daily not refreshed {ROLLUP_TIMEOUT_S:.0f} s after the backfill\n{dagster_ui.log_tails()}"
            )
        time.sleep(2)
    judged = materializations(dagster_ui, "judge_scores")
    first_rollup = min(rollups, key=lambda event: int(event["timestamp"]))
    assert int(first_rollup["timestamp"]) > max(int(event["timestamp"]) for event in judged)
    # It counts every call the backfill's judging reported: no refresh ran on half of it.
    judged_calls = sum(metadata_int(event, "calls") for event in judged)
    assert len(judged) == len(DAYS) * len(EVALUATORS) and judged_calls > 0
    assert metadata_int(first_rollup, "calls") == judged_calls
