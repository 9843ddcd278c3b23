"""Partition definitions: days of traces, evaluators from YAML, dataset versions added by the sensor."""

import os

import dagster as dg

# The first day the platform can score. The bundled sample data starts on 2026-11-09.
START_DATE = os.environ.get("EVAL_PLATFORM_START_DATE", "2026-11-01")

trace_days = dg.DailyPartitionsDefinition(start_date=START_DATE, timezone="UTC")
dataset_versions_partitions = dg.DynamicPartitionsDefinition(name="dataset_versions")
# Models under test of the benchmark suites (data/benchmarks/models.yaml), added by benchmark_models_sensor.
benchmark_models = dg.DynamicPartitionsDefinition(name="benchmark_models")


# Rollups over judge_scores (costs, agreement, experiments, alerts): recomputed once the partitions they read
# were updated and nothing they read is still running, so a 30-day backfill refreshes them once, at its end.
#
# The rule: an input's update is forgotten only once a request of the rollup was made after the sensor saw it.
# The sensor ticks every 30 s and learns of an update on the first tick after it; a tick reports "requested
# on the previous tick" one tick late. So a tick that reports the request and, with it, new updates is not proof
# of anything: those updates may have landed after the requested run read its inputs, and are kept. Dagster's
# `since_last_handled()` forgets them on that tick, and also on the tick that sees the rollup's own new
# materialization (a run that read before the update and finished after it): back-to-back backfills then left
# the rollups stale for good (issue 17). Here only a request forgets, and only on a tick with no new update;
# the cost is at most one extra refresh (a few seconds of DuckDB) when an update came just before a request.
# `any_deps_updated()` ignores updates made by a run that also refreshed this rollup after them, and counts an
# input requested on the same tick, so chained rollups (judge_cost_daily -> judge_cost_monthly) refresh in one run.
_INPUTS_UPDATED = dg.AutomationCondition.any_deps_updated()
REFRESH_AFTER_UPDATES = (
    _INPUTS_UPDATED.since(dg.AutomationCondition.newly_requested() & ~_INPUTS_UPDATED)
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("refresh after its inputs were updated")


def judge_partitions(evaluator_names: list[str]) -> dg.MultiPartitionsDefinition:
    """evaluator × date; the evaluator values are the YAML files found when the code location loads."""
    return dg.MultiPartitionsDefinition(
        {"date": trace_days, "evaluator": dg.StaticPartitionsDefinition(evaluator_names)}
    )
