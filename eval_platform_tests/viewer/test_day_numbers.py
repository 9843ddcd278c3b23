"""`judge_day_numbers`: the judge_scores asset writes each partition's numbers with it (through a real Dagster
materialization against the local judge), the catalog has them as a view, and the viewer's evaluators page counts
from them while they describe the partition's files, and from the verdicts once the files changed."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import polars as pl

from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_path, read_partition, write_partition
from eval_platform.viewer.queries import Warehouse
from eval_platform_tests.defs.test_pipeline import DAYS, key, materialize, query
from eval_platform_tests.defs.test_pipeline import project as project  # the fixture: a data root with evaluators

DAY = DAYS[0]


def test_the_judge_scores_asset_writes_the_partitions_numbers_and_the_viewer_counts_with_them(project):
    root, defs, instance = project
    assert materialize(defs, "traces", DAY, instance).success
    assert materialize(defs, "judge_scores", key(DAY, "helpfulness"), instance).success
    # the numbers, as an analyst sums the verdicts
    expected = query(
        root,
        """SELECT status, count(*), sum(calls), round(sum(score), 9) FROM judge_scores
           WHERE evaluator = 'helpfulness' AND date = '2026-11-09' GROUP BY ALL ORDER BY 1""",
    )
    stored = query(
        root,
        """SELECT status, sum(rows)::BIGINT, sum(calls)::BIGINT, round(sum(score_sum), 9) FROM judge_day_numbers
           WHERE evaluator = 'helpfulness' AND date = '2026-11-09' GROUP BY ALL ORDER BY 1""",
    )
    assert stored == expected and expected
    # the viewer's first evaluators request reads those numbers, not the verdicts: with the verdicts' file made
    # unreadable (same size and modification time, so the same version) the page still has its numbers
    keys = {"evaluator": "helpfulness", "date": DAY}
    verdicts = read_partition(DataRoot.from_env(root), "judge_scores", keys)
    assert verdicts is not None and verdicts.height > 1
    path = str(
        partition_path(DataRoot.from_env(root), "judge_scores", keys)
    )  # a day of flat files: a pattern over its parts
    files = glob.glob(path, recursive=True) if "*" in path else [path]
    assert files
    for file in files:
        stat = os.stat(file)
        Path(file).write_bytes(b"\0" * stat.st_size)
        os.utime(file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (shown,) = [e for e in Warehouse(DataRoot.from_env(root)).evaluators(7) if e["name"] == "helpfulness"]
    assert shown["totals"]["completed"] == dict((s, n) for s, n, _, _ in expected)["COMPLETED"]
    # the partition's file replaced by another writer (half its verdicts, no numbers written): the viewer counts
    # the new file's verdicts, not the numbers of the old one
    write_partition(DataRoot.from_env(root), "judge_scores", keys, verdicts.head(verdicts.height // 2))
    (shown,) = [e for e in Warehouse(DataRoot.from_env(root)).evaluators(7) if e["name"] == "helpfulness"]
    half = verdicts.head(verdicts.height // 2)
    assert shown["totals"]["rows"] == half.height
    assert shown["totals"]["completed"] == half.filter(pl.col("is_final") & (pl.col("status") == "COMPLETED")).height
