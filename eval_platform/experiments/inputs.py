"""Reading what experiments and regression checks need from the warehouse: only the partitions and columns used."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import polars as pl

from eval_platform.out_of_core import MEMORY_LIMIT, reads_out_of_core, spilling_connection
from eval_platform.schemas import (
    FINAL_COMPLETED,
    JUDGE_SCORE_SCHEMA,
    TRACE_SCHEMA,
    conform,
)
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files, scan_parquet

SCORE_COLUMNS = [
    "evaluator",
    "date",
    "trace_id",
    "trace_id_b",
    "is_final",
    "status",
    "score",
    "passed",
    "winner",
    "experiment_id",
    "variant",
]
TRACE_COLUMNS = ["trace_id", "experiment_id", "variant"]
TRACE_SCHEMA_COLUMNS = {name: TRACE_SCHEMA[name] for name in TRACE_COLUMNS}


def _scan(root: DataRoot, files: list[str], schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    # Partitions written by older versions may lack newer columns (null here); a file's other columns are not read.
    return scan_parquet(
        root, files, hive_partitioning=False, schema=schema, missing_columns="insert", extra_columns="ignore"
    )


def read_final_scores(root: DataRoot, evaluators: list[str]) -> pl.DataFrame:
    """The final completed `judge_scores` rows of these evaluators (only the columns the analyses use), read by
    polars from those evaluators' partitions only: a third of the time of DuckDB over every file, most of which
    went into handing millions of text values over to polars."""
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in SCORE_COLUMNS}
    files = partition_files(root, "judge_scores", "evaluator")
    wanted = sorted(set(evaluators) & set(files))
    if not wanted:
        return conform(pl.DataFrame(), schema)
    final = FINAL_COMPLETED & pl.col("evaluator").is_in(wanted)
    return conform(_scan(root, [files[name] for name in wanted], schema).filter(final).collect(), schema)


def read_trace_variants(root: DataRoot) -> pl.DataFrame:
    """trace_id → experiment_id, variant, one row per trace id (its first non-null values when it repeats)."""
    schema = {name: TRACE_SCHEMA[name] for name in TRACE_COLUMNS}
    files = list(partition_files(root, "traces", "date").values())
    if not files:
        return conform(pl.DataFrame(), schema)
    traces = _scan(root, files, schema).collect()
    keys = np.sort(traces["trace_id"].hash().to_numpy())  # distinct hashes: distinct ids, nothing to merge
    if traces["trace_id"].null_count() == 0 and not (keys[1:] == keys[:-1]).any():
        return traces
    return traces.group_by("trace_id", maintain_order=True).agg(
        pl.col(c).drop_nulls().first() for c in TRACE_COLUMNS[1:]
    )


@contextmanager
def experiment_inputs(
    root: DataRoot,
    evaluators: list[str],
    pairwise: list[str],
    out_of_core: bool | None = None,
    memory_limit: str = MEMORY_LIMIT,
) -> Iterator[tuple[pl.DataFrame | pl.LazyFrame, pl.DataFrame]]:
    """(scores, traces) for `experiment_results`: in memory (`read_final_scores`, `read_trace_variants`), or out of
    core when `reads_out_of_core` (above 20M judge_scores rows by default, or as `out_of_core` says; see
    `_out_of_core_inputs`). `pairwise`: the evaluators whose verdicts are between two traces."""
    if not reads_out_of_core(root, out_of_core):
        yield read_final_scores(root, evaluators), read_trace_variants(root)
        return
    with tempfile.TemporaryDirectory(prefix="experiment-inputs-") as folder:
        yield _out_of_core_inputs(root, evaluators, pairwise, Path(folder), memory_limit)


def _out_of_core_inputs(
    root: DataRoot, evaluators: list[str], pairwise: list[str], folder: Path, memory_limit: str
) -> tuple[pl.LazyFrame, pl.DataFrame]:
    """The same analysis inputs without holding every final row and every trace: DuckDB (under `MEMORY_LIMIT`,
    spilling into `folder`) writes the final completed rows to one Parquet file in `folder`, returned as a lazy
    scan (each metric then reads only its own rows), and resolves the sides of pairwise verdicts itself. A side
    is all that `pairwise_verdicts` reads of a trace (its experiment and variant), so the traces become one row
    per distinct (experiment_id, variant), numbered, and a pairwise row's trace_id and trace_id_b are the
    numbers of its sides' (null when the trace is not in `traces`: left out, as in memory). A trace's experiment
    and variant are its first non-null ones in file and row order, as `read_trace_variants` takes them. Other
    evaluators' trace ids are not read (no analysis uses them)."""
    schema = {name: JUDGE_SCORE_SCHEMA[name] for name in SCORE_COLUMNS}
    files = partition_files(root, "judge_scores", "evaluator")
    wanted = sorted(set(evaluators) & set(files))
    trace_files = list(partition_files(root, "traces", "date").values())
    out = folder / "final_scores.parquet"
    measures = "is_final, status, score, passed, winner, experiment_id, variant"
    selects = []
    for name in wanted:
        source = f"read_parquet('{files[name]}', hive_partitioning = false, union_by_name = true)"
        where = "WHERE is_final AND status = 'COMPLETED'"
        if name in pairwise and trace_files:
            selects.append(
                f"""SELECT evaluator, date, CAST(a.class AS VARCHAR) AS trace_id,
                    CAST(b.class AS VARCHAR) AS trace_id_b, {measures} FROM (SELECT * FROM {source} {where}) s
                    LEFT JOIN sides a ON s.trace_id = a.trace_id LEFT JOIN sides b ON s.trace_id_b = b.trace_id"""
            )
        else:
            selects.append(
                f"SELECT evaluator, date, NULL::VARCHAR AS trace_id, NULL::VARCHAR AS trace_id_b, {measures} "
                f"FROM {source} {where}"
            )
    with spilling_connection(root, memory_limit, folder) as conn:
        classes = pl.DataFrame(schema={"trace_id": pl.String, "experiment_id": pl.String, "variant": pl.String})
        if trace_files:
            first = "{'f': filename, 'r': file_row_number}"
            conn.execute(
                f"""CREATE TEMP TABLE traces AS SELECT trace_id,
                        arg_min(experiment_id, {first}) FILTER (WHERE experiment_id IS NOT NULL) AS experiment_id,
                        arg_min(variant, {first}) FILTER (WHERE variant IS NOT NULL) AS variant
                    FROM read_parquet({[str(f) for f in trace_files]}, filename = true, file_row_number = true,
                                      hive_partitioning = false, union_by_name = true)
                    WHERE trace_id IS NOT NULL GROUP BY trace_id"""
            )
            classes = conn.sql(
                """SELECT experiment_id, variant, (row_number() OVER (ORDER BY experiment_id, variant) - 1) AS class
                   FROM (SELECT DISTINCT experiment_id, variant FROM traces)"""
            ).pl()
            conn.register("classes", classes.to_arrow())
            conn.execute(
                """CREATE TEMP TABLE sides AS SELECT t.trace_id, c.class FROM traces t JOIN classes c
                   ON t.experiment_id IS NOT DISTINCT FROM c.experiment_id
                   AND t.variant IS NOT DISTINCT FROM c.variant"""
            )
            conn.execute("DROP TABLE traces")
            classes = classes.select(pl.col("class").cast(pl.String).alias("trace_id"), "experiment_id", "variant")
        if not selects:
            return conform(pl.DataFrame(), schema).lazy(), conform(classes, TRACE_SCHEMA_COLUMNS)
        conn.execute(f"COPY ({' UNION ALL '.join(selects)}) TO '{out}' (FORMAT parquet)")
    # The sides' numbers, verdicts, experiments and variants are a few distinct values over millions of rows:
    # categories (4 bytes a row, text 16), in the traces frame too, so that the sides' lookup matches them.
    categorical = dict.fromkeys(["trace_id", "trace_id_b", "winner"], pl.Categorical())
    scores = pl.scan_parquet(out).select(
        [pl.col(name).cast(categorical.get(name, dtype)) for name, dtype in schema.items()]
    )
    return scores, conform(classes, dict.fromkeys(TRACE_COLUMNS, pl.Categorical()))
