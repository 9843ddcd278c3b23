"""Judge one `judge_scores` partition (evaluator × day) from the warehouse, and a run of many of them.

Framework-free: the `judge_scores` asset calls `judge_partition` once per partition of its run (one for the
automation and the daily path, a range of days for a backfill) and only turns the outcome into Dagster events.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayResult, in_projects
from eval_platform.judging.options import ReferenceOptions
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_day
from eval_platform.judging.targets import session_window
from eval_platform.llm.runtime import JudgeRuntime
from eval_platform.schemas import TRACE_SCHEMA, conform
from eval_platform.storage.warehouse import partition_values, read_partition, write_partition


class PartitionNotReady(Exception):
    """What a partition reads is not materialized yet (its day's traces, its reference dataset)."""


@dataclass
class JudgedPartition:
    """One partition judged and written: its rows, where they are, and what its checks see."""

    evaluator: EvaluatorConfig
    day: str
    result: DayResult
    path: Path
    traces_without_a_row: int

    @property
    def judged(self) -> int:
        return self.result.summary["completed"] + self.result.summary["failed"]

    @property
    def failed_rate(self) -> float:
        return self.result.summary["failed"] / self.judged if self.judged else 0.0

    @property
    def every_trace_has_one_status(self) -> bool:
        s = self.result.summary
        return not self.traces_without_a_row and s["rows"] == s["completed"] + s["failed"] + s["skipped"]

    @property
    def failed_rate_ok(self) -> bool:
        return self.failed_rate <= self.evaluator.max_failed_rate


def judge_partition(
    root: Path, evaluator: EvaluatorConfig, day: str, runtime: JudgeRuntime, trace_ids: set[str]
) -> JudgedPartition:
    """Judge `evaluator` over the day's ingested traces and replace its partition; the catalog is not refreshed."""
    day_traces = read_partition(root, "traces", {"date": day})
    if day_traces is None:
        raise PartitionNotReady(f"traces for {day} are not materialized yet: materialize traces[{day}] first")
    day_traces = in_projects(evaluator, day_traces)  # every trace of its projects gets a row, no other
    if evaluator.reference is not None and evaluator.reference.source == "dataset":
        cases = reference_cases(root, evaluator.reference)
        day_traces = attach_dataset_references(day_traces, cases, evaluator.reference.match_on)
    if evaluator.judged_target == "session":
        judged, missing_days = session_traces(root, day, evaluator.session_lookback_days, day_traces)
        result = judge_day(evaluator, day, judged, runtime, trace_ids)
        result.summary["session_days_missing"] = missing_days
    else:
        result = judge_day(evaluator, day, day_traces, runtime, trace_ids)
    path = write_partition(root, "judge_scores", {"evaluator": evaluator.name, "date": day}, result.rows)
    judged_traces = set(result.rows["trace_id"].to_list()) | set(result.rows["trace_id_b"].drop_nulls().to_list())
    if "session_id" in day_traces.columns:  # a session's row stands for each of its traces of the day
        sessions = result.rows["session_id"].drop_nulls().unique()
        judged_traces |= set(day_traces.filter(pl.col("session_id").is_in(sessions.to_list()))["trace_id"].to_list())
    missing = set(day_traces["trace_id"].to_list()) - judged_traces
    return JudgedPartition(evaluator, day, result, path, len(missing))


def session_traces(
    root: Path,
    day: str,
    lookback_days: int,
    day_traces: pl.DataFrame,
    read_day: Callable[[str], pl.DataFrame | None] | None = None,
) -> tuple[pl.DataFrame, list[str]]:
    """The traces a session partition reads: the day's and its `lookback_days` earlier days' (those materialized,
    or those `read_day` finds), and the earlier days that are not (read as empty: their turns are not shown, and
    the metadata says so)."""
    read_day = read_day or (lambda earlier: read_partition(root, "traces", {"date": earlier}))
    frames, missing = [], []
    for earlier in session_window(day, lookback_days)[:-1]:
        frame = read_day(earlier)
        if frame is None:
            missing.append(earlier)
        else:
            frames.append(conform(frame, TRACE_SCHEMA))
    return pl.concat([*frames, conform(day_traces, TRACE_SCHEMA)]), missing


def reference_cases(root: Path, options: ReferenceOptions) -> pl.DataFrame:
    """The test cases of the reference dataset: the version named, else the newest materialized one."""
    versions = sorted(int(v) for v in partition_values(root, "test_cases", {"dataset": options.dataset}, "version"))
    version = options.version if options.version is not None else (versions[-1] if versions else None)
    cases = (
        read_partition(root, "test_cases", {"dataset": options.dataset, "version": str(version)}) if version else None
    )
    if cases is None:
        raise PartitionNotReady(
            f"reference dataset {options.dataset}@v{version or '?'} is not materialized: "
            f"materialize dataset_versions for it first"
        )
    return cases
