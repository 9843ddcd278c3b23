"""`judge_day_numbers`: a judge_scores partition in numbers (a few rows per status, reason, model, variant and
config hash, with their counts and sums), written when the partition is, so that the viewer's evaluators page and a
day's summary read a few rows per partition instead of its verdicts.

The rows record the version of the judge_scores files they sum (`source_version`: each file's path, size and
modification time). A reader uses them only while the partition's files are still those; a partition written
otherwise (a copy, a tool writing files directly, a bucket, where no version is recorded) is summed from its
verdicts instead.
"""

from __future__ import annotations

import polars as pl

from eval_platform.schemas import JUDGE_DAY_NUMBERS_SCHEMA, conform
from eval_platform.storage.location import DataRoot, LocalStore
from eval_platform.storage.warehouse import PARTITION_FILE, connect, write_partition

TABLE = "judge_day_numbers"
# The grouped columns and the sums, over judge_scores rows.
GROUPS = "is_final, status, reason, model, variant, config_hash"
SUMS = """count(*) AS rows, sum(score) AS score_sum, count(score) AS scores, sum(passed::INT) AS passes,
          count(passed) AS passed_known, coalesce(sum(calls), 0) AS calls,
          count(*) FILTER (cache_hit) AS cache_hits, coalesce(sum(cost_usd), 0) AS cost_usd"""


def _parts(evaluator: str, day: str) -> tuple[str, ...]:
    return ("judge_scores", f"evaluator={evaluator}", f"date={day}")


def scores_glob(root: DataRoot, evaluator: str, day: str) -> str:
    """Every file of one judge_scores partition: its `part.parquet`, or the parts in its folder."""
    return root.store.location(*_parts(evaluator, day), "**", PARTITION_FILE)


def scores_version(root: DataRoot, evaluator: str, day: str) -> str | None:
    """The version of a judge_scores partition's files (path, size, modification time of each) on local disk;
    None on a bucket (no cheap version) or when it has no file."""
    store = root.store
    if not isinstance(store, LocalStore):
        return None
    version = []
    for parts in store.files(_parts(evaluator, day), PARTITION_FILE):
        stat = store.folder.joinpath(*parts).stat()
        version.append(f"{'/'.join(parts[3:])}:{stat.st_size}:{stat.st_mtime_ns}")
    return ";".join(version) or None


def sum_partition(root: DataRoot, evaluator: str, day: str) -> pl.DataFrame:
    """The partition's numbers, summed from its verdicts (JUDGE_DAY_NUMBERS_SCHEMA)."""
    version = scores_version(root, evaluator, day)
    with connect(root) as conn:
        frame = conn.sql(
            f"SELECT ? AS evaluator, ? AS date, {GROUPS}, {SUMS}, ? AS source_version "
            f"FROM read_parquet('{scores_glob(root, evaluator, day)}', union_by_name = true) GROUP BY ALL",
            params=[evaluator, day, version],
        ).pl()
    return conform(frame, JUDGE_DAY_NUMBERS_SCHEMA)


def write_day_numbers(root: DataRoot, evaluator: str, day: str) -> None:
    """Write `judge_day_numbers` for a judge_scores partition just written (its own small partition); nothing
    when the partition has no file."""
    if not root.store.files(_parts(evaluator, day), PARTITION_FILE):
        return
    write_partition(root, TABLE, {"evaluator": evaluator, "date": day}, sum_partition(root, evaluator, day))
