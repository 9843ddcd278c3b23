"""The automation sensor's rules: once the daemon is idle, no rollup is older than what it reads, even after two
judge_scores backfills back to back; and turning the sensor back on does not re-judge partitions a backfill judged
while it was off (judge_scores newer than its traces is current), while a new traces update is still judged.

First tick by tick (`evaluate_automation_conditions`, the sensor's evaluation without a daemon), then through a
real `dagster-daemon` on a PostgreSQL instance."""

from __future__ import annotations

import json
from collections import Counter

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.dagster_daemon import (
    code_server,
    finished_ticks,
    is_idle,
    running_daemon,
    sensor_cli,
)
from eval_platform_tests.defs.test_pipeline import materialize, query, write_day

DAYS = ["2026-11-09", "2026-11-10"]
EVALUATORS = ["helpfulness", "conciseness"]
TRACES_PER_DAY = 4
# Each rollup of judging and the assets it reads (agreement also reads annotations and imported judgments, which
# these tests never materialize).
ROLLUPS = {
    "judge_cost_daily": ["judge_scores"],
    "judge_cost_monthly": ["judge_cost_daily"],
    "agreement": ["judge_scores"],
    "alerts": ["judge_scores"],
}
JUDGE_SCORES = dg.AssetKey("judge_scores")


@pytest.fixture
def project(data_root, local_judge):
    for day in DAYS:
        write_day(data_root, day, n=TRACES_PER_DAY, bad=False)
    for name in EVALUATORS:
        write_evaluator(
            data_root,
            name,
            mode="score",
            model="openai/mock",
            api_base=local_judge.base_url,
            temperature=0.0,
            score_scale={"min": 0, "max": 1},
            prompt=f"{name}: {{{{output}}}}",
        )
    return data_root


def judge_backfill(defs, instance: dg.DagsterInstance, days: list[str], backfill: str) -> None:
    """A backfill of every judge_scores partition of `days`: one run per day over its evaluators, tagged as the
    backfill daemon tags the runs of a range, executed here as another host would execute them."""
    first, last = sorted(EVALUATORS)[0], sorted(EVALUATORS)[-1]
    for day in days:
        result = dg.materialize(
            list(defs.assets),
            selection=["judge_scores"],
            instance=instance,
            resources=defs.resources,
            tags={
                "dagster/asset_partition_range_start": f"{day}|{first}",
                "dagster/asset_partition_range_end": f"{day}|{last}",
                "test/backfill": backfill,
            },
        )
        assert result.success


def last_materialized(instance: dg.DagsterInstance, asset: str) -> float:
    event = instance.get_latest_materialization_event(dg.AssetKey(asset))
    assert event is not None, f"{asset} was never materialized"
    return event.timestamp


def judge_materializations(instance: dg.DagsterInstance) -> Counter:
    records = instance.fetch_materializations(JUDGE_SCORES, limit=1000).records
    return Counter(record.partition_key for record in records)


def requested(tick, asset: str) -> set:
    return set(tick.get_requested_partitions(dg.AssetKey(asset)))


def test_an_update_seen_on_the_tick_after_the_rollups_request_is_not_forgotten(project, tmp_path):
    defs = build_definitions(project)
    day = DAYS[0]
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert materialize(defs, "traces", day, instance).success
        judge_backfill(defs, instance, [day], "first")
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert all(requested(tick, rollup) == {None} for rollup in ROLLUPS)
        # The requested run reads the first backfill and finishes; the second backfill lands before the next tick,
        # which sees the request, the rollups' new materializations and the second backfill at once.
        assert dg.materialize(
            list(defs.assets), selection=list(ROLLUPS), instance=instance, resources=defs.resources
        ).success
        judge_backfill(defs, instance, [day], "second")
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert all(requested(tick, rollup) == {None} for rollup in ROLLUPS)
        # Requested on a tick after the update was seen: forgotten once a tick brings nothing new.
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert tick.total_requested == 0


def test_a_partition_is_judged_when_its_traces_are_newer_than_its_scores(project, tmp_path):
    """One tick sees every update (the sensor was off, or they landed within one tick): the times decide."""
    defs = build_definitions(project)
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        for day in DAYS:
            assert materialize(defs, "traces", day, instance).success
        judge_backfill(defs, instance, DAYS, "backfill")
        assert materialize(defs, "traces", DAYS[1], instance).success  # re-ingested after it was judged
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert requested(tick, "judge_scores") == {f"{DAYS[1]}|{name}" for name in EVALUATORS}
        # The request is made; if its run fails the sensor does not pay for it again and again.
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor)
        assert requested(tick, "judge_scores") == set()


def test_rollups_are_never_older_than_what_they_read_after_back_to_back_backfills(project, postgres_home, tmp_path):
    """The race of issue 17, pinned: the sensor requests the rollups after the first backfill; their run reads it
    and finishes; the second backfill lands before the sensor's next tick, so that one tick sees both the rollups'
    new materializations and the second backfill's (and, when it follows the request, the request). The daemon is
    paused while that happens (the code is served apart, so launched runs go on), which only fixes an interleaving
    a 30 s tick allows by chance. Each backfill is one run (one day's evaluators), so the sensor cannot refresh the
    rollups between two runs of the same backfill."""
    defs = build_definitions(project)
    day = DAYS[0]
    rows = len(EVALUATORS) * TRACES_PER_DAY
    with dg.DagsterInstance.get() as instance:
        assert materialize(defs, "traces", day, instance).success
        with code_server(tmp_path) as workspace, running_daemon(postgres_home, workspace) as daemon:
            daemon.wait_for(lambda: finished_ticks(instance))  # the first tick only records where it starts from
            judge_backfill(defs, instance, [day], "first")  # every call made: nothing in the judge cache yet

            def rollup_run():
                runs = instance.get_runs()
                return next(
                    (run for run in runs if dg.AssetKey("judge_cost_daily") in (run.asset_selection or ())), None
                )

            # STARTED is written by the run's own process: from then on it needs nothing from the daemon.
            launched = (dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)
            daemon.wait_for(lambda: (run := rollup_run()) is not None and run.status in launched)
            with daemon.paused():
                started = [run for run in instance.get_runs() if run.status == dg.DagsterRunStatus.STARTED]
                daemon.wait_for(lambda: all(instance.get_run_by_id(run.run_id).is_finished for run in started))
                first_refresh = instance.get_latest_materialization_event(dg.AssetKey("judge_cost_daily"))
                judge_backfill(defs, instance, [day], "second")  # nothing changed: every row kept, no call
            daemon.wait_for(lambda: is_idle(instance))

            # The rollups' run read the first backfill: it counted its calls.
            assert first_refresh.asset_materialization.metadata["calls"].value == rows
            for rollup, reads in ROLLUPS.items():
                for upstream in reads:
                    assert last_materialized(instance, rollup) > last_materialized(instance, upstream), (
                        f"{rollup} is older than the {upstream} it reads"
                    )
            assert instance.get_run_by_id(rollup_run().run_id).status == dg.DagsterRunStatus.SUCCESS
            latest = instance.get_latest_materialization_event(dg.AssetKey("judge_cost_daily"))
            # the second backfill kept the day's rows as they were (issue 34): the day still counts its calls
            assert latest.asset_materialization.metadata["calls"].value == rows

    # What an analyst reads: the costs count what the day spent (the first backfill's calls), once.
    judged = query(
        project,
        "SELECT evaluator, count(*), sum(calls), sum(cache_hit::INT) FROM judge_scores GROUP BY ALL ORDER BY ALL",
    )
    assert judged == [(name, TRACES_PER_DAY, TRACES_PER_DAY, 0) for name in sorted(EVALUATORS)]
    for table in ("judge_cost_daily", "judge_cost_monthly"):
        costs = query(
            project, f"SELECT evaluator, sum(rows), sum(calls), sum(cache_hits) FROM {table} GROUP BY ALL ORDER BY ALL"
        )
        assert costs == judged, table


def judge_runs(instance: dg.DagsterInstance) -> set[str]:
    return {run.run_id for run in instance.get_runs() if JUDGE_SCORES in (run.asset_selection or ())}


def test_turning_the_sensor_back_on_does_not_rejudge_what_a_backfill_judged_while_it_was_off(project, postgres_home):
    defs = build_definitions(project)
    with dg.DagsterInstance.get() as instance, running_daemon(postgres_home) as daemon:
        daemon.wait_for(lambda: finished_ticks(instance))  # the sensor has a cursor: it was on, then is turned off
        # This test ingests the days itself: the new-files sensor (on by default) would ingest the late file too.
        sensor_cli("stop", "new_trace_files_sensor")
        sensor_cli("stop")
        for day in DAYS:  # while it is off: ingest the days and judge them
            assert materialize(defs, "traces", day, instance).success
        judge_backfill(defs, instance, DAYS, "while the sensor was off")
        judged_while_off = judge_materializations(instance)
        runs_while_off = judge_runs(instance)
        ticks_while_off = len(finished_ticks(instance))

        sensor_cli("start")
        daemon.wait_for(lambda: len(finished_ticks(instance)) > ticks_while_off and is_idle(instance))
        assert judge_runs(instance) == runs_while_off, "the sensor re-judged partitions that were current"
        assert judge_materializations(instance) == judged_while_off
        assert not [b for b in instance.get_backfills() if JUDGE_SCORES in (b.asset_selection or ())]
        # the rollups it missed while off are refreshed
        assert last_materialized(instance, "judge_cost_daily") > last_materialized(instance, "judge_scores")

        # A genuinely new update is still judged: a late export for the first day, re-ingested.
        late = {"trace_id": "late-trace", "timestamp": f"{DAYS[0]}T23:00:00Z", "input": "late", "output": "late"}
        (project / "traces" / DAYS[0] / "late.jsonl").write_text(json.dumps(late) + "\n")
        assert materialize(defs, "traces", DAYS[0], instance).success
        ticks_before = len(finished_ticks(instance))
        daemon.wait_for(
            lambda: (
                len(finished_ticks(instance)) > ticks_before
                and judge_runs(instance) != runs_while_off
                and is_idle(instance)
            )
        )
        again = judge_materializations(instance) - judged_while_off
        assert again == Counter({f"{DAYS[0]}|{name}": 1 for name in EVALUATORS})
        assert last_materialized(instance, "judge_cost_daily") > last_materialized(instance, "judge_scores")

    judged = query(
        project,
        "SELECT evaluator, CAST(date AS VARCHAR), count(*) FROM judge_scores WHERE trace_id = "
        "'late-trace' GROUP BY ALL ORDER BY ALL",
    )
    assert judged == [(name, DAYS[0], 1) for name in sorted(EVALUATORS)]
