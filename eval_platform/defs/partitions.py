"""Partition definitions: days of traces, evaluators from YAML, dataset versions added by the sensor."""


import os

import dagster as dg

# The first day the platform can score. The bundled sample data starts on 2026-11-09.
START_DATE = os.environ.get("EVAL_PLATFORM_START_DATE", "2026-11-01")

trace_days = dg.DailyPartitionsDefinition(start_date=START_DATE, timezone="UTC")
dataset_versions_partitions = dg.DynamicPartitionsDefinition(name="dataset_versions")


def judge_partitions(evaluator_names: list[str]) -> dg.MultiPartitionsDefinition:
    """evaluator × date; the evaluator values are the YAML files found when the code location loads."""
    return dg.MultiPartitionsDefinition(
        {"date": trace_days, "evaluator": dg.StaticPartitionsDefinition(evaluator_names)}
    )
