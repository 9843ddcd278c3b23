"""Judge one `judge_scores` partition (evaluator × day) from the warehouse, and a run of many of them.

Framework-free: the `judge_scores` asset calls `judge_partition` once per partition of its run (one for the
automation and the daily path, a range of days for a backfill) and only turns the outcome into Dagster events.

A partition is judged in bounded memory, whatever the day's size: the day's traces are read READ_BATCH_ROWS at a
time, judged as they come (`runner.judge_stream`, which keeps the calls of one batch running while the next is
planned), and the rows written as they are ready into the partition's new file (`warehouse.partition_writer`),
which replaces the old one whole only once every row is in it. What the run keeps of a partition is its summary,
its count of traces without a row and a few rows to preview, never its rows. When several traces make one unit
(a pairwise pair, an n_wise group, a session over its lookback window) the traces first go through
`key_batches.key_ordered_batches` (spilled to a temporary file, sorted by key out of core by DuckDB), so that a
batch never splits a group; a single group larger than memory is the one thing still held whole. Batch mode
(`batch:`) reads the day twice, recording the calls, then answering them (`judging.batch_day`): the day is read
anew from the warehouse for each pass, never held.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path

import polars as pl

from eval_platform.ingest.datasets import read_dataset_version
from eval_platform.judging.completion import Completion, Waiting
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day import DayResult, DayTally, in_projects, scale_mismatch
from eval_platform.judging.history import keep_superseded
from eval_platform.judging.key_batches import key_ordered_batches
from eval_platform.judging.options import ReferenceOptions
from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.runner import judge_stream
from eval_platform.judging.targets import session_window
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.record_fields import field_text
from eval_platform.schemas import JUDGE_SCORE_SCHEMA
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    iter_partition,
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

    root: DataRoot
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

    @property
    def verdicts_exist(self) -> bool:
        """A partition with selected traces has a verdict (COMPLETED) for at least one: a green partition has scores,
        never a day where every selected trace was SKIPPED (a missing key, a budget spent before the first call) or
        FAILED (a scale or schema the judge does not answer in)."""
        return self.tally.selected == 0 or self.tally.verdicts > 0

    @property
    def no_verdict_text(self) -> str:
        """Why a partition failing `verdicts_exist` has no verdict: its reasons, and each model not called."""
        reasons = ", ".join(f"{code} {n}" for code, n in self.summary["reasons"].items())
        text = f"{self.tally.selected} selected trace(s) and no verdict ({reasons})"
        for model, why in self.summary.get("unreachable_models", {}).items():
            text += f"; {model}: {why}"
        return text

    @property
    def scale_mismatch(self) -> str | None:
        """Why the judge's replies look like another scale than the declared `score_scale`, or None (see `day`)."""
        return scale_mismatch(self.evaluator, self.tally)


def group_key(evaluator: EvaluatorConfig) -> Callable[[dict], str | None] | None:
    """What puts several traces in one unit, so that a batch must hold them all: the session (target session),
    the pair or group key (pairwise, n_wise); None when each trace (span) is its own unit."""
    if evaluator.judged_target == "session":
        return lambda trace: trace.get("session_id") or None
    mode = evaluator.judge_mode
    if evaluator.judged_target == "trace" and mode.group_by is not None:
        name = mode.group_by(evaluator)
        return lambda trace: field_text(trace, name)
    return None


def judge_partition(
    root: DataRoot,
    evaluator: EvaluatorConfig,
    day: str,
    runtime: ModelRuntime,
    trace_ids: set[str],
    batch_rows: int = READ_BATCH_ROWS,
    now: datetime | None = None,
) -> JudgedPartition:
    """Judge `evaluator` over the day's ingested traces complete at `now` (default: the present; the others wait,
    see `judging.completion`) and replace its partition; the catalog is not refreshed."""
    missing_days: list[str] | None = None
    completion = Completion(root.path, evaluator, day, now)  # one `now` for the partition (and both batch-mode passes)
    waiting = Waiting()

    def read_day() -> Iterable[pl.DataFrame]:
        """The day's traces, read anew at each call (batch mode reads the day twice, see `runner.judge_stream`)."""
        nonlocal missing_days, waiting
        batches = iter_partition(root, "traces", {"date": day}, batch_rows)
        if batches is None:
            raise PartitionNotReady(f"traces for {day} are not materialized yet: materialize traces[{day}] first")
        day_batches, missing_days = judged_batches(root, evaluator, day, batches, batch_rows)
        waiting = Waiting()  # counted anew by each read of the day
        return completion.hold_back(day_batches, group_key(evaluator), waiting)

    keys = {"evaluator": evaluator.name, "date": day}
    first = [read_day()]  # a day not ready is refused before the partition's writer opens

    def day_batches() -> Iterable[pl.DataFrame]:
        return first.pop() if first else read_day()

    # the verdicts of an earlier configuration are kept (judge_scores_history) before the new ones replace them
    keep_superseded(root, evaluator.name, day, evaluator.config_hash)
    with partition_writer(root, "judge_scores", keys, JUDGE_SCORE_SCHEMA) as out:
        outcome = judge_stream(evaluator, day, day_batches, runtime, trace_ids, out.write)
    if missing_days is not None:
        outcome.summary["session_days_missing"] = missing_days
    # The traces waiting for completion are the partition's too: no row yet, said so (`partition_metadata`).
    outcome.summary["traces_in_partition"] += waiting.traces
    outcome.summary.update(waiting.summary())
    path = partition_path(root, "judge_scores", keys)
    return JudgedPartition(root, evaluator, day, outcome.summary, path, outcome.traces_without_a_row, outcome.tally)


def judged_batches(
    root: DataRoot,
    evaluator: EvaluatorConfig,
    day: str,
    batches: Iterable[pl.DataFrame],
    batch_rows: int = READ_BATCH_ROWS,
    other_day: Callable[[str], Iterable[pl.DataFrame] | None] | None = None,
) -> tuple[Iterable[pl.DataFrame], list[str] | None]:
    """What `judge_stream` judges for `evaluator` from the day's trace `batches`: the traces of its projects with
    their dataset references; for sessions the lookback window's earlier days first (`other_day(day)`'s batches,
    by default their ingested partitions) and the earlier days missing; for a pair, group or session the traces
    in key order, never a unit split between batches. A run and the dry run plan from the same batches."""
    cases = None
    if evaluator.reference is not None and evaluator.reference.source == "dataset":
        cases = reference_cases(root, evaluator.reference)

    def prepared(frame: pl.DataFrame) -> pl.DataFrame:
        frame = in_projects(evaluator, frame)  # every trace of its projects gets a row, no other
        if cases is not None:
            assert evaluator.reference is not None  # `cases` are its reference dataset's
            frame = attach_dataset_references(frame, cases, evaluator.reference.match_on)
        return frame

    day_batches: Iterable[pl.DataFrame] = map(prepared, batches)
    missing_days: list[str] | None = None
    if evaluator.judged_target == "session":
        day_batches, missing_days = session_batches(
            root, day, evaluator.session_lookback_days, day_batches, batch_rows, other_day
        )
    key = group_key(evaluator)
    if key is not None:
        # a pair, group or session is planned from one batch: batches cut between keys, out of core
        day_batches = key_ordered_batches(
            day_batches, key, batch_rows, folder=root.path if root.path.is_dir() else None
        )
    return day_batches, missing_days


def session_batches(
    root: DataRoot,
    day: str,
    lookback_days: int,
    day_batches: Iterable[pl.DataFrame],
    batch_rows: int,
    other_day: Callable[[str], Iterable[pl.DataFrame] | None] | None = None,
) -> tuple[Iterator[pl.DataFrame], list[str]]:
    """The traces a session partition reads, a batch at a time: the earlier days' traces of the window (those
    `other_day` gives, by default those materialized), then the day's; and the earlier days that are not (read
    as empty: their turns are not shown, and the metadata says so)."""
    other_day = other_day or (lambda other: iter_partition(root, "traces", {"date": other}, batch_rows))
    earlier, missing = [], []
    for other in session_window(day, lookback_days)[:-1]:
        batches = other_day(other)
        if batches is None:
            missing.append(other)
        else:
            earlier.append(batches)
    return itertools.chain(*earlier, day_batches), missing


def reference_cases(root: DataRoot, options: ReferenceOptions) -> pl.DataFrame:
    """The test cases of the reference dataset, through the one dataset reader (`read_dataset_version`, as the
    benchmark suites read theirs): the version named, else the newest materialized one. The version must be
    materialized: the gold answers of a verdict are then rows of the `test_cases` view a user can join it with."""
    assert options.dataset is not None  # `ReferenceOptions`: source 'dataset' names its dataset
    materialized = {int(v) for v in partition_values(root, "test_cases", {"dataset": options.dataset}, "version")}
    version = options.version if options.version is not None else max(materialized, default=None)
    if version not in materialized:
        raise PartitionNotReady(
            f"reference dataset {options.dataset}@v{version or '?'} is not materialized: "
            f"materialize dataset_versions for it first"
        )
    return read_dataset_version(root.path, options.dataset, version).cases
