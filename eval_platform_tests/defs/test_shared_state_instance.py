"""The judge cache, the budget ledger and batch state follow the Dagster instance: on the shipped PostgreSQL config
they are tables of its database (nothing under the data root's state/ folder), on a SQLite instance files there;
the cost rollups read the same ledger the budgets were enforced on."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_platform.definitions import build_definitions
from eval_platform.settings import state_dir
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_pipeline import key, materialize, query, write_day

DAY = "2026-11-09"
PRICED = {"input_cost_per_million": 1000.0, "output_cost_per_million": 1000.0}


def spent_approx(value: float):
    return pytest.approx(value, rel=1e-9)


def write_evaluators(root, base_url: str) -> None:
    common = dict(
        mode="score",
        score_scale={"min": 0, "max": 1},
        model="openai/mock",
        api_base=base_url,
        max_daily_cost_usd=100.0,
        **PRICED,
    )
    write_evaluator(root, "budgeted", name="budgeted", prompt="{{input}} -> {{output}}", **common)
    batch = {"poll_interval_s": 0.05, "timeout_s": 120}
    write_evaluator(root, "batched", name="batched", prompt="Q: {{input}} A: {{output}}", batch=batch, **common)


def judge_and_roll_up(root, instance) -> float:
    """Judge the day with both evaluators, roll the costs up: the judges' spend in the warehouse."""
    defs = build_definitions(root)
    assert materialize(defs, "traces", DAY, instance).success
    for evaluator in ("budgeted", "batched"):
        assert materialize(defs, "judge_scores", key(DAY, evaluator), instance).success
    assert dg.materialize(
        list(defs.assets), selection=["judge_cost_daily"], instance=instance, resources=defs.resources
    ).success
    assert query(root, "SELECT DISTINCT status FROM judge_scores") == [("COMPLETED",)]
    (spend,) = query(root, "SELECT sum(cost_usd) FROM judge_scores")[0]
    assert spend > 0
    return spend


def test_on_a_postgres_instance_the_shared_state_is_in_its_database(data_root, local_judge, postgres_home, postgres_db):
    write_day(data_root, DAY, bad=False)
    write_evaluators(data_root, local_judge.base_url)
    with dg.DagsterInstance.get() as instance:
        spend = judge_and_roll_up(data_root, instance)

    conn = postgres_db.connect()
    try:
        with conn.cursor() as cursor:
            cursor.execute(
                "SELECT evaluator, sum(spend_usd), sum(calls) FROM eval_platform_judge_spend_daily GROUP BY 1"
            )
            ledger = {evaluator: (spent, calls) for evaluator, spent, calls in cursor.fetchall()}
            cursor.execute("SELECT count(*) FROM eval_platform_judge_spend")
            (open_reservations,) = cursor.fetchone()
            cursor.execute("SELECT count(*) FROM eval_platform_judge_cache")
            (cached,) = cursor.fetchone()
            cursor.execute("SELECT evaluator, day, batches FROM eval_platform_judge_batches")
            batches = cursor.fetchall()
    finally:
        conn.close()
    assert set(ledger) == {"budgeted", "batched"} and open_reservations == 0
    assert sum(spent for spent, _ in ledger.values()) == spent_approx(spend)
    assert cached == 12  # six traces, two evaluators
    assert [(evaluator, day) for evaluator, day, _ in batches] == [("batched", DAY)]
    assert '"state": "collected"' in batches[0][2]
    # Nothing of the shared state under the data root: another host would not see it there.
    assert not state_dir(data_root).exists() or not [p for p in state_dir(data_root).rglob("*") if p.is_file()]
    # The cost rollup read the ledger in the database.
    (ledger_spend,) = query(data_root, "SELECT sum(ledger_spend_usd) FROM judge_cost_daily")[0]
    assert ledger_spend == spent_approx(spend)


def test_on_a_sqlite_instance_the_shared_state_is_under_the_data_root(data_root, local_judge, tmp_path):
    write_day(data_root, DAY, bad=False)
    write_evaluators(data_root, local_judge.base_url)
    (tmp_path / "home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "home")) as instance:
        spend = judge_and_roll_up(data_root, instance)
    state = state_dir(data_root)
    assert (state / "budget.sqlite").exists() and (state / "judge_cache" / "replies.sqlite").exists()
    assert (state / "judge_batches" / "batched" / f"{DAY}.json").exists()
    (ledger_spend,) = query(data_root, "SELECT sum(ledger_spend_usd) FROM judge_cost_daily")[0]
    assert ledger_spend == spent_approx(spend)
