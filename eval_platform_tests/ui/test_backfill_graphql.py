"""A backfill launched through a running webserver's GraphQL API, run by the daemon: what the user then sees."""

from __future__ import annotations

from eval_platform_tests.ui.conftest import DAYS, EVALUATOR, NOT_REQUESTED, DagsterUI

MATERIALIZED_PARTITIONS = """
query Materialized($path: [String!]!) {
  assetOrError(assetKey: {path: $path}) {
    __typename
    ... on Asset { assetMaterializations { partition runId } }
  }
}
"""


def materialized_partitions(ui: DagsterUI, asset: str) -> set[str]:
    asset_or_error = ui.graphql(MATERIALIZED_PARTITIONS, path=[asset])["assetOrError"]
    assert asset_or_error["__typename"] == "Asset", asset_or_error
    return {event["partition"] for event in asset_or_error["assetMaterializations"]}


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
            status["numPartitionsTargeted"], status["numPartitionsMaterialized"], status["numPartitionsFailed"]
        )
        for status in ui_backfill["assetBackfillData"]["assetBackfillStatuses"]
    }
    assert counts == {"traces": (2, 2, 0), "judge_scores": (2, 2, 0)}

    # The asset pages: materializations for exactly the requested partitions (multi keys are "date|evaluator").
    assert materialized_partitions(dagster_ui, "traces") == set(DAYS)
    assert materialized_partitions(dagster_ui, "judge_scores") == {f"{day}|{EVALUATOR}" for day in DAYS}

    # The catalog: one judged row per ingested trace, for the requested days only, every one judged.
    traced = dagster_ui.query_catalog("SELECT CAST(date AS VARCHAR), count(*) FROM traces GROUP BY ALL ORDER BY ALL")
    assert [day for day, _ in traced] == DAYS and all(n > 0 for _, n in traced)
    judged = dagster_ui.query_catalog(
        "SELECT CAST(date AS VARCHAR), evaluator, count(*), count(DISTINCT trace_id), "
        "count(*) FILTER (WHERE status = 'COMPLETED') FROM judge_scores GROUP BY ALL ORDER BY ALL",
    )
    assert judged == [(day, EVALUATOR, n, n, n) for day, n in traced]
    assert NOT_REQUESTED not in {row[0] for row in judged}

