"""Judge one `judge_scores` partition (evaluator × day) from the warehouse, and a run of many of them.

Framework-free: the `judge_scores` asset calls `judge_partition` once per partition of its run (one for the
automation and the daily path, a range of days for a backfill) and only turns the outcome into Dagster events.

A partition is judged in bounded memory, whatever the day's size: the day's traces are read READ_BATCH_ROWS at a
time, judged as they come (`runner.judge_stream`, which keeps the calls of one batch running while the next is
planned), and the rows written as they are ready into the partition's new file (`warehouse.partition_writer`),
which replaces the old one whole only once every row is in it. What the run keeps of a partition is its summary,
its count of traces without a row and a few rows to preview, never its rows. Two kinds of partition still hold
their day's traces at once (README "Known gaps"): a pairwise or n_wise evaluator (a pair or group is planned from
all the day's traces of its key) and target session (a session's traces span its lookback window); batch mode
holds them too (it runs the day twice).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayResult, DayTally, in_projects
from eval_platform.judging.options import ReferenceOptions
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_stream
from eval_platform.judging.targets import session_window
from eval_platform.llm.runtime import JudgeRuntime
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform
from eval_platform.storage.warehouse import (
    partition_batches,
    partition_path,
    partition_values,
    partition_writer,
    read_partition,
)

# Traces read and planned at once: their prompts and rows are what a partition holds besides the calls in flight.
READ_BATCH_ROWS = 10_000


class PartitionNotReady(Exception):
    """What a partition reads is not materialized yet (its day's traces, its reference dataset)."""


@dataclass
class JudgedPartition:
    """One partition judged and written: its summary, where its rows are, and what its checks see."""

    root: Path
    evaluator: EvaluatorConfig
    day: str
    summary: dict
    path: Path | str
    traces_without_a_row: int
    tally: DayTally  # what the materialization shows of the rows: models that answered, a few final rows

    @cached_property
    def result(self) -> DayResult:
        """The partition's rows, read back from the warehouse (all of them in memory: for tests and small days)."""
        rows = read_partition(self.root, "judge_scores", {"evaluator": self.evaluator.name, "date": self.day})
        assert rows is not None, f"{self.path} was written"
        return DayResult(rows, self.summary)

    @property
    def judged(self) -> int:
        return self.summary["completed"] + self.summary["failed"]

    @property
    def failed_rate(self) -> float:
        return self.summary["failed"] / self.judged if self.judged else 0.0

    @property
    def every_trace_has_one_status(self) -> bool:
        s = self.summary
        return not self.traces_without_a_row and s["rows"] == s["completed"] + s["failed"] + s["skipped"]

    @property
    def failed_rate_ok(self) -> bool:
        return self.failed_rate <= self.evaluator.max_failed_rate


def streams(evaluator: EvaluatorConfig) -> bool:
    """Whether a partition of `evaluator` is judged batch by batch (each trace, or span, its own unit)."""
    grouped = evaluator.judge_mode.unit != "trace" and evaluator.judged_target == "trace"
    return not (grouped or evaluator.judged_target == "session" or evaluator.batched)


def judge_partition(
    root: Path,
    evaluator: EvaluatorConfig,
    day: str,
    runtime: JudgeRuntime,
    trace_ids: set[str],
    batch_rows: int = READ_BATCH_ROWS,
) -> JudgedPartition:
    """Judge `evaluator` over the day's ingested traces and replace its partition; the catalog is not refreshed."""
    cases = None
    if evaluator.reference is not None and evaluator.reference.source == "dataset":
        cases = reference_cases(root, evaluator.reference)

    def prepared(frame: pl.DataFrame | None) -> pl.DataFrame:
        if frame is None:
            raise PartitionNotReady(f"traces for {day} are not materialized yet: materialize traces[{day}] first")
        frame = in_projects(evaluator, frame)  # every trace of its projects gets a row, no other
        if cases is not None:
            frame = attach_dataset_references(frame, cases, evaluator.reference.match_on)
        return frame

    missing_days: list[str] | None = None
    if streams(evaluator):
        batches = partition_batches(root, "traces", {"date": day}, batch_rows)
        if batches is None:
            prepared(None)  # raises PartitionNotReady
        day_batches: Iterator[pl.DataFrame] | list[pl.DataFrame] = map(prepared, batches)
    else:
        day_traces = prepared(read_partition(root, "traces", {"date": day}))
        if evaluator.judged_target == "session":
            day_traces, missing_days = session_traces(root, day, evaluator.session_lookback_days, day_traces)
        day_batches = [day_traces]
    keys = {"evaluator": evaluator.name, "date": day}
    with partition_writer(root, "judge_scores", keys, JUDGE_SCORE_SCHEMA) as out:
        outcome = judge_stream(evaluator, day, day_batches, runtime, trace_ids, out.write)
    if missing_days is not None:
        outcome.summary["session_days_missing"] = missing_days
    path = partition_path(root, "judge_scores", keys)
    return JudgedPartition(root, evaluator, day, outcome.summary, path, outcome.traces_without_a_row, outcome.tally)


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
