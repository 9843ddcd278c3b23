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
REFRESH_AFTER_UPDATES = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("refresh after its inputs were updated")


def judge_partitions(evaluator_names: list[str]) -> dg.MultiPartitionsDefinition:
    """evaluator × date; the evaluator values are the YAML files found when the code location loads."""
    return dg.MultiPartitionsDefinition(
        {"date": trace_days, "evaluator": dg.StaticPartitionsDefinition(evaluator_names)}
    )
