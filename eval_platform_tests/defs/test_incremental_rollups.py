"""`judge_cost_daily` after files arrive into a day judged a file at a time (issue 34, "rollups update without
rescanning the day"): the real `traces`, `judge_scores` and `judge_cost_daily` assets on a real Dagster instance,
real files and Parquet parts, the local judge over HTTP. Each run sums only the judge_scores files written since the
last, and its rows are those of one query over every verdict."""

from __future__ import annotations

import shutil

import polars as pl
from polars.testing import assert_frame_equal

from eval_platform.costs import rescan_judged_rows
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_partition
from eval_platform_tests.defs.test_incremental_days import DAY, _ingest, _judge, _run, _view, _write
from eval_platform_tests.defs.test_incremental_days import project as project  # the fixture


def _cost(root, instance) -> dict:
    """Materialize judge_cost_daily; what it summed (its metadata), after checking its rows against a rescan."""
    result = _run(root, instance, "judge_cost_daily", None)
    assert result.success
    (event,) = result.get_asset_materialization_events()
    daily = read_partition(DataRoot.local(root), "judge_cost_daily", {})
    assert daily is not None
    expected = rescan_judged_rows(DataRoot.local(root))
    assert_frame_equal(daily.select(expected.columns), expected, check_dtypes=False, check_exact=False, rel_tol=1e-12)
    assert _view(root, "SELECT sum(rows) FROM judge_cost_daily") == _view(root, "SELECT count(*) FROM judge_scores")
    metadata = event.materialization.metadata
    return {key: metadata[key].value for key in ("files_summed", "files_kept")}


def test_judge_cost_daily_sums_only_the_files_judged_since_and_equals_a_rescan(project):
    root, instance, _judge_server = project
    _write(root, "a.jsonl", ["a1", "a2", "a3"])
    _write(root, "b.jsonl", ["b1", "b2"])
    _ingest(root, instance)
    _judge(root, instance)
    assert _cost(root, instance) == {"files_summed": 2, "files_kept": 0}

    for name, ids in (("c.jsonl", ["c1"]), ("d.jsonl", ["d1", "d2"])):  # two arrivals, one file each
        _write(root, name, ids)
        _ingest(root, instance)
        _judge(root, instance)
        summed = _cost(root, instance)
        assert summed["files_summed"] == 1
    assert summed == {"files_summed": 1, "files_kept": 3}
    assert _cost(root, instance) == {"files_summed": 0, "files_kept": 4}  # a re-run: nothing new

    (root / "traces" / DAY / "b.jsonl").unlink()  # a file removed: its verdicts leave the rollup
    _ingest(root, instance)
    _judge(root, instance)
    assert _cost(root, instance) == {"files_summed": 0, "files_kept": 3}
    assert _view(root, "SELECT sum(rows) FROM judge_cost_daily") == [(6,)]

    # a changed evaluator re-judges every file: each is summed again
    evaluator = (root / "evaluators" / "helpful.yaml").read_text()
    (root / "evaluators" / "helpful.yaml").write_text(evaluator.replace("helpful: ", "helpful now: "))
    _judge(root, instance)
    assert _cost(root, instance) == {"files_summed": 3, "files_kept": 0}

    # a full recompute (the sums kept beside the files removed) gives the same rows
    before = read_partition(DataRoot.local(root), "judge_cost_daily", {})
    shutil.rmtree(root / "warehouse" / "judge_cost_parts")
    assert _cost(root, instance) == {"files_summed": 3, "files_kept": 0}
    after = read_partition(DataRoot.local(root), "judge_cost_daily", {})
    assert before is not None and after is not None
    assert before.select(pl.exclude("computed_at")).equals(after.select(pl.exclude("computed_at")))
