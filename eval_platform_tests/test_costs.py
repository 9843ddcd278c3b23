"""Judge spend rollups against the budgets, from the spend ledger: monthly use, and the spend of killed runs and
of dead hosts counted as the ledger counts it."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
from contextlib import closing
from datetime import UTC, datetime

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from eval_platform import costs
from eval_platform.costs import cost_rollup, counted_cost_rollup, ledger_spend, monthly_rollup, rescan_judged_rows
from eval_platform.defs.catalog import refresh
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.schemas import COMPLETED, FAILED, JUDGE_COST_DAILY_SCHEMA, JUDGE_SCORE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.parts import remove_part, write_part
from eval_platform.storage.warehouse import open_catalog, write_partition

SCHEMA = JUDGE_SCORE_SCHEMA


def test_monthly_budget_use_comes_from_the_ledger(tmp_path):
    ledger = BudgetLedger(tmp_path / "budget.sqlite")
    for cost in (0.5, 0.25):  # reserved at the worst case, settled to what the call cost
        ledger.settle(ledger.reserve("e", 1.0, None, 10.0), cost)
    day = ledger_spend(ledger)["day"].to_list()
    assert len(day) == 1
    config = EvaluatorConfig(
        name="e",
        mode="binary",
        model="openai/x",
        prompt="{{output}}",
        max_monthly_cost_usd=10.0,
        input_cost_per_million=1,
        output_cost_per_million=1,
    )
    daily = conform(
        pl.DataFrame(
            {
                "day": [day[0], day[0]],
                "evaluator": ["e", "e"],
                "model": ["m", "m"],
                "project_id": ["p1", "p2"],
                "calls": [1, 1],
                "spend_usd": [0.5, 0.25],
            }
        ),
        JUDGE_COST_DAILY_SCHEMA,
    )
    monthly = monthly_rollup(daily, ledger, {"e": config})
    assert monthly["month"].to_list() == [day[0][:7]] * 2 and monthly["calls"].to_list() == [1, 1]
    assert monthly["budget_used_pct"].to_list() == pytest.approx([7.5, 7.5])  # the evaluator's month, 0.75 of 10


def test_killed_runs_and_dead_hosts_are_in_the_daily_rollup_at_once(data_root):
    """An evaluator whose only run of the day was killed has a row, and a call in flight on a host that died
    counts at its worst case, as the budgets count them: the rollup never shows less than the provider billed."""
    path = data_root / "state" / "budget.sqlite"
    ledger = BudgetLedger(path)
    today = datetime.now(UTC)
    judged = conform(
        pl.DataFrame({"evaluator": ["alive"], "model": ["openai/x"], "status": [COMPLETED], "calls": [1]}).with_columns(
            pl.lit(today).alias("judged_at"), pl.lit(0.1).alias("cost_usd")
        ),
        JUDGE_SCORE_SCHEMA,
    )
    write_partition(
        DataRoot.from_env(data_root), "judge_scores", {"evaluator": "alive", "date": today.strftime("%Y-%m-%d")}, judged
    )
    ledger.settle(ledger.reserve("alive", 0.5, 10.0, None), 0.1)
    killed = ledger.reserve("killed", 0.4, 10.0, None)  # its run killed with the call in flight, no partition
    remote = ledger.reserve("remote", 0.3, 10.0, None)  # a call in flight on another host, which then died
    gone = subprocess.Popen(["true"])
    gone.wait()
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("UPDATE judge_spend SET pid = ? WHERE id = ?", (gone.pid, killed.id))
        conn.execute("UPDATE judge_spend SET host = 'lost-host' WHERE id = ?", (remote.id,))

    daily = cost_rollup(DataRoot.from_env(data_root), {}, ledger)
    rows = {row["evaluator"]: row for row in daily.iter_rows(named=True)}
    assert set(rows) == {"alive", "killed", "remote"}
    assert rows["alive"]["rows"] == 1 and rows["alive"]["ledger_spend_usd"] == pytest.approx(0.1)
    for evaluator, worst in (("killed", 0.4), ("remote", 0.3)):
        assert rows[evaluator]["rows"] == 0 and rows[evaluator]["calls"] == 0
        assert rows[evaluator]["ledger_spend_usd"] == pytest.approx(worst)
        assert rows[evaluator]["day"] == today.strftime("%Y-%m-%d")
    monthly = monthly_rollup(daily, ledger, {})
    assert monthly["ledger_spend_usd"].sum() == pytest.approx(0.8)


def _verdicts(
    evaluator: str, trace_ids: list[str], judged_at: list[datetime | None], model: str = "openai/x"
) -> pl.DataFrame:
    n = len(trace_ids)
    return conform(
        pl.DataFrame(
            {
                "evaluator": [evaluator] * n,
                "trace_id": trace_ids,
                "model": [model] * n,
                "project_id": ["p1" if i % 2 else "p2" for i in range(n)],
                "status": [COMPLETED if i % 3 else FAILED for i in range(n)],
                "calls": [1] * n,
                "cache_hit": [i % 4 == 0 for i in range(n)],
                "prompt_tokens": [10 + i for i in range(n)],
                "completion_tokens": [None] * n,  # a sum over no known value stays null, as in one query
                "cost_usd": [0.001 * (i + 1) for i in range(n)],
                "judged_at": judged_at,
            }
        ),
        JUDGE_SCORE_SCHEMA,
    )


def _same_rows(daily: pl.DataFrame, root: DataRoot) -> None:
    """The rollup's judged rows are those of one query over every judge_scores row (floats to rounding: the files'
    sums are added up in another order)."""
    expected = rescan_judged_rows(root)
    got = daily.select(expected.columns).filter(pl.col("rows") > 0)
    assert_frame_equal(got, expected, check_dtypes=False, check_exact=False, rel_tol=1e-12)


def test_the_daily_rollup_sums_only_the_files_written_since_and_gives_the_rows_of_a_rescan(data_root, monkeypatch):
    """A judge_scores partition made of parts (a day judged a file at a time) and one written whole, verdicts judged
    on two UTC days (a day's spend is its own, whatever trace day it judged): after each change the rollup reads
    only the files that changed and its rows are those of one query over every row."""
    monkeypatch.setattr(costs, "_FILES_PER_QUERY", 2)  # the first run's files in two queries
    root = DataRoot.local(data_root)
    ledger = BudgetLedger(data_root / "state" / "budget.sqlite")
    yesterday, today = datetime(2026, 11, 26, 23, 59, tzinfo=UTC), datetime(2026, 11, 27, 0, 1, tzinfo=UTC)
    keys = {"evaluator": "e", "date": "2026-11-26"}
    write_part(root, "judge_scores", keys, "a", _verdicts("e", ["a1", "a2", "a3"], [yesterday] * 3), SCHEMA, {})
    write_part(root, "judge_scores", keys, "b", _verdicts("e", ["b1", "b2"], [today] * 2), SCHEMA, {})
    whole = _verdicts("f", ["c1", "c2"], [yesterday, today], model="openai/y")
    write_partition(root, "judge_scores", {"evaluator": "f", "date": "2026-11-25"}, whole)

    daily, counts = counted_cost_rollup(root, {}, ledger)
    assert counts == {"files_summed": 3, "files_kept": 0}
    assert sorted(set(daily["day"].to_list())) == ["2026-11-26", "2026-11-27"]
    _same_rows(daily, root)

    # an arrival: one new part; then a re-run with nothing new
    # (a verdict without a judged_at counts on no day, as in one query)
    write_part(root, "judge_scores", keys, "c", _verdicts("e", ["c9", "c10"], [today, None]), SCHEMA, {})
    daily, counts = counted_cost_rollup(root, {}, ledger)
    assert counts == {"files_summed": 1, "files_kept": 3}
    _same_rows(daily, root)
    assert counted_cost_rollup(root, {}, ledger)[1] == {"files_summed": 0, "files_kept": 4}

    # a part rewritten (a changed file re-judged), a part with no rows, a part removed, a partition gone
    write_part(root, "judge_scores", keys, "a", _verdicts("e", ["a1", "a4"], [today] * 2), SCHEMA, {})
    write_part(root, "judge_scores", keys, "d", _verdicts("e", [], []), SCHEMA, {})
    remove_part(root, "judge_scores", keys, "b")
    daily, counts = counted_cost_rollup(root, {}, ledger)
    assert counts == {"files_summed": 2, "files_kept": 2}
    _same_rows(daily, root)
    assert counted_cost_rollup(root, {}, ledger)[1] == {"files_summed": 0, "files_kept": 4}
    shutil.rmtree(data_root / "warehouse" / "judge_scores" / "evaluator=f")
    daily, counts = counted_cost_rollup(root, {}, ledger)
    assert counts == {"files_summed": 0, "files_kept": 3}
    assert set(daily["evaluator"].to_list()) == {"e"}
    _same_rows(daily, root)


def test_a_rollup_killed_between_two_partitions_leaves_views_queryable_and_the_next_run_is_right(
    data_root, monkeypatch
):
    root = DataRoot.local(data_root)
    ledger = BudgetLedger(data_root / "state" / "budget.sqlite")
    now = datetime.now(UTC)
    for evaluator in ("e", "f"):
        keys = {"evaluator": evaluator, "date": "2026-11-26"}
        write_partition(root, "judge_scores", keys, _verdicts(evaluator, ["t"], [now]))
    counted_cost_rollup(root, {}, ledger)
    refresh(root)
    for evaluator in ("e", "f"):
        rows = _verdicts(evaluator, ["t", "u"], [now] * 2)
        write_partition(root, "judge_scores", {"evaluator": evaluator, "date": "2026-11-26"}, rows)

    original, writes = costs.write_partition, []

    def killed(root, table, keys, frame):
        writes.append(keys)
        if len(writes) == 2:
            raise OSError("killed while writing the second partition")
        return original(root, table, keys, frame)

    monkeypatch.setattr(costs, "write_partition", killed)
    with pytest.raises(OSError):
        counted_cost_rollup(root, {}, ledger)
    monkeypatch.setattr(costs, "write_partition", original)
    with open_catalog(data_root) as conn:
        # e's new sums, f's sums of its file before it was rewritten (not used: a version since replaced)
        assert conn.execute("SELECT sum(rows) FROM judge_cost_parts").fetchall() == [(3,)]

    daily, counts = counted_cost_rollup(root, {}, ledger)
    assert counts == {"files_summed": 1, "files_kept": 1}  # f's file, summed before the kill at an older version
    assert daily["rows"].sum() == 4
    _same_rows(daily, root)
