"""Finished before judged: which traces of a partition are complete enough to judge now, and which wait.

The rule (an evaluator's `completion:` block, `judging.options.CompletionOptions`):

- A trace assembled from spans (OTLP: `span_count` set) is complete once its root span has ended (every span of it
  without a parent in the trace has an end time) and no span of it started or ended for `quiet_period_s` (default
  60 s). Its *last activity* is its own clock's newest span start or end (`timestamp + latency_ms`), but never later
  than the arrival of the newest file holding a span of it (that file's modification time, the platform's clock): a
  span cannot have been recorded after the file holding it was written, so an application clock running ahead (or
  a bogus future timestamp) delays a trace by at most the quiet period after its file arrived. A file no longer
  there caps nothing.
- A trace read whole from one row (JSONL, JSON, CSV, Parquet: `span_count` null) is complete when read: the row is
  the whole trace (the same trace id in a later row is a `duplicate_trace_id`, never a second part), and a row still
  being written is never read (`ingest.arrivals`, `ingest.traces`).
- A session (target session) is complete once each of its traces is and no turn of it (a trace's last activity)
  happened for `session_quiet_period_s` (default 30 minutes). A pair or group (pairwise, n_wise) waits while one of
  its traces does: a comparison is never made with half a candidate, nor a lone candidate skipped `no_pair`.
- A day long past is complete: every trace of day D is complete from D + 2 days 00:00 UTC (`LONG_PAST` after its
  end), whatever its timestamps say, so a root that never ends or a clock years ahead never holds a day forever.
  A backfill of an old day waits for nothing: its spans' times are old.

"Now" is the run's (`judge_partition(now=...)`, the `judge_scores` run config's `now`), fixed for the whole
partition so that batch mode's two passes hold back the same traces. A trace that waits gets no row and costs
nothing; the partition's metadata counts the day's own traces waiting (`traces_waiting_for_completion`) and says
when the first of them completes (`complete_at`), when `judge_waiting_traces_sensor` requests the partition again.
Spans arriving later re-open a trace: the day is ingested again, the trace's new content is a new request (the
cache answers only an identical one), and its old row is replaced when the partition is rewritten.

A slow application clock (behind the platform's by more than the quiet period) makes a trace look quiet early; a
span arriving after it is judged re-opens it (judged again, both calls paid and counted in the ledger).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import UTC_TS

# A day's traces are all complete this long after the day's end.
LONG_PAST = timedelta(days=1)
_SPAN_TIMES = pl.List(
    pl.Struct({"span_id": pl.String, "parent_span_id": pl.String, "end_time": pl.String, "source_file": pl.String})
)


@dataclass
class Waiting:
    """What one read of a partition held back: the day's own traces waiting, and when the first completes."""

    traces: int = 0
    complete_at: datetime | None = None

    def add(self, own: int, due: datetime) -> None:
        self.traces += own
        if own and (self.complete_at is None or due < self.complete_at):
            self.complete_at = due

    def summary(self) -> dict[str, Any]:
        at = self.complete_at.isoformat() if self.complete_at is not None else None
        return {"traces_waiting_for_completion": self.traces, "complete_at": at}


class Completion:
    """The completion rule of one evaluator's partition (evaluator x day) at `now`."""

    def __init__(self, root: Path, evaluator: EvaluatorConfig, day: str, now: datetime | None = None):
        self.root = Path(root)
        self.day = day
        self.now = now or datetime.now(UTC)
        options = evaluator.completion
        self.quiet = timedelta(seconds=options.quiet_period_s)
        self.session_quiet = (
            timedelta(seconds=options.session_quiet_period_s) if evaluator.judged_target == "session" else None
        )
        start = datetime.combine(date.fromisoformat(day), datetime.min.time(), tzinfo=UTC)
        self.long_past = start + timedelta(days=1) + LONG_PAST
        self._arrivals: dict[str, datetime | None] = {}

    def arrival(self, file: str | None) -> datetime | None:
        """When `file` (relative to the data root) was last written, by the file system's clock; None when gone."""
        if not file:
            return None
        if file not in self._arrivals:
            try:
                self._arrivals[file] = datetime.fromtimestamp((self.root / file).stat().st_mtime, UTC)
            except OSError:
                self._arrivals[file] = None
        return self._arrivals[file]

    def _arrivals_of(self, files: pl.Series) -> pl.Series:
        """Each file's arrival (null: no file, or gone), each distinct file looked up once per partition."""
        mapping = {file: self.arrival(file) for file in files.drop_nulls().unique().to_list()}
        return files.replace_strict(mapping, default=None, return_dtype=UTC_TS)

    def times(self, frame: pl.DataFrame) -> pl.DataFrame:
        """Per trace of `frame`, in order: `last` (its last activity) and `due` (when it is complete; null:
        complete when read). Vectorized: a day's traces are never walked one by one here."""
        long_past = pl.lit(self.long_past, dtype=UTC_TS)
        latency = pl.duration(milliseconds=pl.col("latency_ms").fill_null(0).clip(0))
        rows = frame.select(
            pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"),
            (pl.col("timestamp") + latency).alias("end"),
            pl.col("span_count").is_not_null().alias("assembled"),
        ).with_columns(self._arrivals_of(frame["source_file"]).alias("arrival"))
        if rows["assembled"].any():
            spans = (
                frame.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("row"), "span_count", "spans")
                .filter(pl.col("span_count").is_not_null())
                .select("row", pl.col("spans").str.json_decode(_SPAN_TIMES))
                .explode("spans")
                .filter(pl.col("spans").is_not_null())
                .unnest("spans")
            )
            spans = spans.with_columns(self._arrivals_of(spans["source_file"]).alias("arrival"))
            parents = spans.select("row", pl.col("span_id").alias("parent_span_id"))
            # the root, and the top of any subtree whose parent never arrived: each must have ended
            tops = spans.join(parents, on=["row", "parent_span_id"], how="anti")
            ended = tops.group_by("row").agg(pl.col("end_time").is_not_null().all().alias("ended"))
            arrived = spans.group_by("row").agg(pl.col("arrival").max().alias("span_arrival"))
            rows = (
                rows.join(ended, on="row", how="left", maintain_order="left")
                .join(arrived, on="row", how="left", maintain_order="left")
                .with_columns(
                    pl.when(pl.col("assembled"))
                    .then(pl.col("span_arrival"))
                    .otherwise(pl.col("arrival"))
                    .alias("arrival"),
                    pl.col("ended").fill_null(True),
                )
            )
        else:
            rows = rows.with_columns(pl.lit(True).alias("ended"))
        last = pl.min_horizontal("end", "arrival", long_past)
        quiet_ended = pl.min_horizontal(pl.col("last") + pl.lit(self.quiet), long_past)
        due = pl.when(~pl.col("assembled")).then(None).when(pl.col("ended")).then(quiet_ended).otherwise(long_past)
        return rows.with_columns(last.alias("last")).select("last", due.cast(UTC_TS).alias("due"))

    def hold_back(
        self,
        batches: Iterable[pl.DataFrame],
        key: Callable[[dict], str | None] | None,
        waiting: Waiting,
    ) -> Iterator[pl.DataFrame]:
        """The traces of `batches` complete at `now`, a batch at a time; those not yet counted in `waiting` (the
        day's own). With `key` (a pair, group or session: `evaluator_day.group_key`, whose batches never split a
        unit) a unit waits whole while one of its traces does, and a session until its quiet period has passed."""
        long_past = pl.lit(self.long_past, dtype=UTC_TS)
        for batch in batches:
            if batch.height == 0:
                yield batch
                continue
            times = self.times(batch)
            if self.session_quiet is not None:
                units = batch.select(pl.when(pl.col("session_id") != "").then(pl.col("session_id")).alias("unit"))
                times = times.with_columns(units["unit"])
                unit_due = pl.max_horizontal("due", pl.col("last") + pl.lit(self.session_quiet))
            elif key is not None:
                # a pair or group key may be any field or metadata.<key> (`record_fields.field_text`): read per row,
                # as the mode's planning reads it; a grouped mode's batch holds whole groups in memory anyway
                times = times.with_columns(pl.Series("unit", [key(trace) for trace in batch.to_dicts()], pl.String))
                unit_due = pl.col("due")
            else:
                times = times.with_columns(pl.lit(None, dtype=pl.String).alias("unit"))
                unit_due = pl.col("due")
            unit_due = pl.min_horizontal(unit_due, long_past).max().over("unit")
            due_at = pl.when(pl.col("unit").is_null()).then(pl.col("due")).otherwise(unit_due)
            own = pl.col("date") == self.day if "date" in batch.columns else pl.lit(True)
            marked = times.with_columns(due_at.alias("due_at"), batch.select(own.alias("own"))["own"])
            held = marked.filter(pl.col("due_at") > pl.lit(self.now, dtype=UTC_TS))
            if held.height == 0:
                yield batch
                continue
            held_own = held.filter(pl.col("own"))
            if held_own.height:
                waiting.add(held_own.height, held_own["due_at"].min())  # type: ignore[arg-type]
            yield batch.filter(marked["due_at"].is_null() | (marked["due_at"] <= self.now))


@dataclass
class WaitingCursor:
    """What `judge_waiting_traces_sensor` keeps between ticks: the last `judge_scores` materialization read (a
    storage id) and, per partition whose last materialization left traces waiting, when the first completes. It
    holds the partitions that wait now, not every one ever seen."""

    seen: int | None = None
    waiting: dict[str, str] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | None) -> WaitingCursor:
        if not text:
            return cls()
        data = json.loads(text)
        return cls(seen=data.get("seen"), waiting=dict(data.get("waiting", {})))

    def dump(self) -> str:
        return json.dumps({"seen": self.seen, "waiting": self.waiting}, sort_keys=True, separators=(",", ":"))

    def record(self, partition: str, traces_waiting: int, complete_at: str | None) -> None:
        """A materialization of `partition`: it waits for `complete_at` when it left traces waiting, else not."""
        if traces_waiting and complete_at:
            self.waiting[partition] = complete_at
        else:
            self.waiting.pop(partition, None)

    def due(self, now: datetime) -> list[tuple[str, str]]:
        """The partitions whose first waiting trace is complete at `now` (taken out: the run they get records
        them again if traces still wait then)."""
        ready = sorted((p, at) for p, at in self.waiting.items() if datetime.fromisoformat(at) <= now)
        for partition, _ in ready:
            del self.waiting[partition]
        return ready
