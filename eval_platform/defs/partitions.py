"""Partition definitions: days of traces, evaluators from YAML, dataset versions added by the sensor."""

from datetime import UTC, datetime

import dagster as dg

from eval_platform.ingest.traces import is_day_name
from eval_platform.settings import START_DATE_ENV


def trace_days(start: str) -> dg.DailyPartitionsDefinition:
    """The day partitions (of `traces`, `judge_scores`, `finetune_exports`) from `start`, the first day the platform
    can score: EVAL_PLATFORM_START_DATE, read where the definitions are built (`build_definitions`) and passed here,
    never at import. The bundled sample data starts on 2026-11-09.

    Today is a partition too (`end_offset=1`): files written into today's folder are ingested and judged as they
    arrive, and a later run of the same day (more files) replaces it whole, as for any day. Tomorrow is not one yet."""
    return dg.DailyPartitionsDefinition(start_date=start, timezone="UTC", end_offset=1)


def not_a_trace_day(day: str, days: dg.DailyPartitionsDefinition, now: datetime | None = None) -> str | None:
    """Why `day` is not one of the day partitions `days` (it cannot be ingested, judged or priced), naming what
    bounds it; None when it is one. The same words for the sensor, the dry run and anyone else who asks. `days`:
    `trace_days` of the start date its caller read once (the definitions', or the dry run's at its start)."""
    if not is_day_name(day):
        return f"{day!r} is not a day (YYYY-MM-DD, a UTC day)"
    start = days.start.strftime("%Y-%m-%d")
    with dg.partition_loading_context(now or datetime.now(UTC)):
        first, last = days.get_first_partition_key(), days.get_last_partition_key()
    if first is not None and day < first:
        return (
            f"{day} is before {START_DATE_ENV} ({start}), the first day partition: set {START_DATE_ENV} "
            "earlier to use it (read when a process starts: reload the code location after changing it)"
        )
    if last is None:
        return f"{day} is not a day partition: there is none yet ({START_DATE_ENV} is {start}, not yet reached)"
    if day > last:
        return (
            f"{day} is not a day partition yet (the last is {last}, today in UTC: a day becomes one when the UTC "
            "clock reaches it)"
        )
    return None


DATASET_VERSIONS = "dataset_versions"
dataset_versions_partitions = dg.DynamicPartitionsDefinition(name=DATASET_VERSIONS)
# Models under test of the benchmark suites (data/benchmarks/models.yaml), added by benchmark_models_sensor.
BENCHMARK_MODELS = "benchmark_models"
benchmark_models = dg.DynamicPartitionsDefinition(name=BENCHMARK_MODELS)


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


def judge_partitions(evaluator_names: list[str], days: dg.DailyPartitionsDefinition) -> dg.MultiPartitionsDefinition:
    """evaluator × date (`days`: `trace_days`); the evaluator values are the YAML files found when the code location
    loads."""
    return dg.MultiPartitionsDefinition({"date": days, "evaluator": dg.StaticPartitionsDefinition(evaluator_names)})
