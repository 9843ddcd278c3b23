"""The judge side of `agreement` out of core: DuckDB, under a memory limit and spilling to a temporary directory,
reads the judge_scores files and hands Python only small inputs (count tables, the rows that meet a human
reference), from which the same statistics are computed as in memory.

In memory (`read_evaluator`), each evaluator's rows are read whole: about 120 bytes a row for the consensus
evaluator's columns, so 100M judge rows no longer fit in 2 GB. Out of core, what Python holds grows with the
human annotations, not with judge_scores, and DuckDB's buffers are capped by `memory_limit` (beyond it, joins
and aggregations spill to `temp_directory`):

- judge vs human reads only the evaluator's rows whose trace is in the human reference (the inner join that
  follows keeps no other row), so its statistics run on the same rows as in memory;
- the calibrated means take those rows as their labelled ones, and of the other traces' verdicts only per-day
  counts, means and sums of squared deviations (`daily_moments`), all a prediction-powered mean needs of them;
- position consistency gets per-day counts of each (verdict in order, verdict swapped) pair;
- judge vs judge gets, per pair of judges, the count of each pair of verdicts on the same slot (the join
  `join_slots` does, as a count table), and a consensus member's verdict per slot is its first sample-0
  COMPLETED row in file and row order, the row `first_per_slot` keeps.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import polars as pl

from eval_platform.agreement.judge_rows import score_columns
from eval_platform.judging.modes import MODES
from eval_platform.out_of_core import MEMORY_LIMIT, spilling_connection
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform, empty_frame
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files


@dataclass
class OutOfCoreScores:
    """judge_scores of a data root, one file glob per evaluator, read by DuckDB on `conn` (see `open_scores`)."""

    conn: duckdb.DuckDBPyConnection
    files: dict[str, str]
    _members: dict[str, dict[str, str]] = field(default_factory=dict)

    def __contains__(self, name: str) -> bool:
        return name in self.files

    def source(self, name: str) -> str:
        options = "filename = true, file_row_number = true, hive_partitioning = false"
        return f"read_parquet('{self.files[name]}', {options})"

    def has_rows(self, name: str) -> bool:
        if name not in self.files:
            return False
        return self.conn.execute(f"SELECT count(*) FROM {self.source(name)}").fetchall()[0][0] > 0

    def rows_meeting(self, name: str, mode: str, traces: pl.Series) -> pl.DataFrame:
        """The evaluator's rows (`score_columns(mode)`) whose trace_id is one of `traces`, in no particular order."""
        columns = score_columns(mode)
        if name not in self.files:
            return empty_frame(JUDGE_SCORE_SCHEMA).select(columns)
        wanted = pl.DataFrame({"trace_id": traces.cast(pl.String).drop_nulls().unique()})
        self.conn.register("wanted_traces", wanted.to_arrow())
        try:
            frame = self.conn.sql(
                f"""SELECT {", ".join(f'"{c}"' for c in columns)} FROM {self.source(name)}
                    WHERE trace_id IN (SELECT trace_id FROM wanted_traces)"""
            ).pl()
        finally:
            self.conn.unregister("wanted_traces")
        return conform(frame, {c: JUDGE_SCORE_SCHEMA[c] for c in columns})

    def daily_moments(self, name: str, field: str, labelled: pl.Series) -> pl.DataFrame:
        """(date, n, mean, m2) per date of the evaluator's final COMPLETED non-null `field` values (as a double)
        whose trace is not one of `labelled` (a null trace_id counts): the unlabelled set of the calibrated means
        (`calibration.calibrated`), m2 the sum of squared deviations from the day's mean (DuckDB's `var_pop`,
        Welford's algorithm, times the count)."""
        if name not in self.files:
            return pl.DataFrame(schema={"date": pl.String(), "n": pl.Int64(), "mean": pl.Float64(), "m2": pl.Float64()})
        self.conn.register(
            "labelled_traces", pl.DataFrame({"trace_id": labelled.cast(pl.String).drop_nulls()}).to_arrow()
        )
        try:
            return self.conn.sql(
                f"""SELECT date, count(*) AS n, avg(v) AS mean, var_pop(v) * count(*) AS m2
                    FROM (SELECT date, trace_id, CAST("{field}" AS DOUBLE) AS v FROM {self.source(name)}
                          WHERE is_final AND status = 'COMPLETED')
                    WHERE v IS NOT NULL
                      AND (trace_id IS NULL OR trace_id NOT IN (SELECT trace_id FROM labelled_traces))
                    GROUP BY date"""
            ).pl()
        finally:
            self.conn.unregister("labelled_traces")

    def dates(self, name: str) -> list[str | None]:
        return self.conn.sql(f"SELECT DISTINCT date FROM {self.source(name)}").pl()["date"].to_list()

    def position_table(self, name: str) -> pl.DataFrame:
        """(date, verdict_ab, verdict_ba, n) over the final rows judged in both orders."""
        return self.conn.sql(
            f"""SELECT date, verdict_ab, verdict_ba, count(*) AS n FROM {self.source(name)}
                WHERE is_final AND verdict_ab IS NOT NULL AND verdict_ba IS NOT NULL GROUP BY ALL"""
        ).pl()

    def final_verdicts(self, name: str, mode: str) -> str:
        """SQL of the evaluator's final COMPLETED verdicts: (trace_id, trace_id_b, v), v as `JudgeVerdicts.final`."""
        vote = MODES[mode].vote_column if MODES[mode].labelled else "score"
        return f"""SELECT trace_id, trace_id_b, "{vote}" AS v FROM {self.source(name)}
                   WHERE status = 'COMPLETED' AND is_final"""

    def members(self, name: str, mode: str) -> dict[str, str]:
        """Per member model of a consensus evaluator, a temporary table of its verdict per slot (trace_id,
        trace_id_b, v): the first COMPLETED sample-0 member row of the slot in file and row order, as
        `JudgeVerdicts.members` keeps (a struct keeps a null verdict first, as a row would)."""
        if name in self._members:
            return self._members[name]
        vote = MODES[mode].vote_column if MODES[mode].labelled else "raw_score"
        completed = f"""FROM {self.source(name)} WHERE status = 'COMPLETED' AND role = 'member' AND sample = 0"""
        models = self.conn.sql(f"SELECT DISTINCT model {completed}").pl()["model"].to_list()
        first = "{'f': filename, 'r': file_row_number}"  # file and row order
        tables = {}
        for i, model in enumerate(sorted(models, key=lambda m: (m is None, m))):
            table = f"member_{len(self._members)}_{i}"
            self.conn.execute(
                f"""CREATE TEMP TABLE {table} AS
                    SELECT trace_id, trace_id_b, arg_min({{'v': "{vote}"}}, {first}).v AS v
                    {completed} AND model IS NOT DISTINCT FROM ? GROUP BY trace_id, trace_id_b""",
                [model],
            )
            tables["null" if model is None else model] = f"SELECT * FROM {table}"
        self._members[name] = tables
        return tables

    def verdict_pairs(self, first: str, second: str) -> pl.DataFrame:
        """(a, b, n): how many times the verdict pair (a, b) is given on the same slot by the two sides (SQL of
        (trace_id, trace_id_b, v)); every pair of rows with equal slots, nulls equal, as `join_slots` joins."""
        return self.conn.sql(
            f"""SELECT a.v AS a, b.v AS b, count(*) AS n FROM ({first}) a JOIN ({second}) b
                ON a.trace_id IS NOT DISTINCT FROM b.trace_id AND a.trace_id_b IS NOT DISTINCT FROM b.trace_id_b
                GROUP BY ALL"""
        ).pl()


@contextmanager
def open_scores(root: DataRoot, memory_limit: str = MEMORY_LIMIT, temp_directory: Path | None = None) -> Iterator:
    """An `OutOfCoreScores` over the data root's judge_scores, on a `spilling_connection`."""
    with spilling_connection(root, memory_limit, temp_directory) as conn:
        yield OutOfCoreScores(conn, partition_files(root, "judge_scores", "evaluator"))
