"""Moving a data root's SQLite state (both ledgers, batch state, the judge cache) into the PostgreSQL database of a
Dagster instance that moved there, against the real PostgreSQL server the suite starts: the spend already billed
comes along exactly once however often the migration runs, a reservation is never lost, and until it has run the
platform refuses to start a budget from zero."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.llm.batch.state import BatchState
from eval_platform.llm.budget import BudgetLedger, Refusal, Reservation
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.migrate_state import UnmigratedState, main, migrate
from eval_platform.llm.shared_state import SharedState
from eval_platform.llm.statedb import postgres_state
from eval_platform.settings import state_dir

REPO = Path(__file__).resolve().parents[2]
TODAY = datetime.now(UTC).strftime("%Y-%m-%d")
MONTH = TODAY[:7]


def _spend(ledger: BudgetLedger, evaluator: str, calls: int, actual: float) -> None:
    for _ in range(calls):
        held = ledger.reserve(evaluator, 1.0, None, 100.0)
        assert isinstance(held, Reservation)
        ledger.settle(held, actual)


def _sqlite_state(root: Path) -> dict:
    """A data root as a team on the SQLite instance leaves it: settled spend on two evaluators, the worst case of
    a call killed in flight (unsettled), a submitted batch's reservation recorded in its batch state, benchmark
    spend, and cached replies."""
    folder = state_dir(root)
    judge = BudgetLedger(folder / "budget.sqlite")
    _spend(judge, "helpfulness", 3, 0.25)
    _spend(judge, "relevance", 2, 0.5)
    killed = judge.reserve("helpfulness", 0.75, None, 100.0, ttl_s=0.0)  # its time is up: counted as spent
    assert isinstance(killed, Reservation)
    batch = judge.reserve("relevance", 2.0, None, 100.0, ttl_s=86400, outlives_process=True)
    assert isinstance(batch, Reservation)
    state = BatchState(folder / "judge_batches", "relevance", TODAY)
    state.batches = [
        {"id": "batch_1", "endpoint": "openai/gpt-4o-mini@", "state": "open", "reservation": asdict(batch)}
    ]
    state.save()
    _spend(BudgetLedger(folder / "benchmark_budget.sqlite", name="benchmark"), "model:m", 4, 0.125)
    cache = ModelCache(folder / "judge_cache")
    for i in range(30):
        cache.put(f"{i:064x}", {"content": f'{{"score": {i}}}', "cost_usd": 0.01})
    cache.flush()
    return {"batch": batch}


def _ledgers(url: str) -> tuple[BudgetLedger, BudgetLedger]:
    pg = postgres_state(url)
    return BudgetLedger(pg, name="judge"), BudgetLedger(pg, name="benchmark")


def _spent(ledger: BudgetLedger, evaluator: str) -> float:
    return ledger.spent(evaluator, month=MONTH)


def test_the_migration_carries_spend_reservations_batches_and_cache_over_once(tmp_path, postgres_db):
    root, url = tmp_path / "data", postgres_db.url()
    made = _sqlite_state(root)
    folder = state_dir(root)
    before = {ev: _spent(BudgetLedger(folder / "budget.sqlite"), ev) for ev in ("helpfulness", "relevance")}
    assert before == pytest.approx({"helpfulness": 1.5, "relevance": 3.0})  # 0.75 unsettled, 2.0 batch in flight

    # Not migrated yet: the platform refuses to open the instance's state, naming the file and the money.
    with pytest.raises(UnmigratedState, match=r"budget\.sqlite \(judge ledger\): 4\.5 USD") as refused:
        SharedState.at(root, url)
    assert "benchmark_budget.sqlite" in str(refused.value) and "migrate_state" in str(refused.value)

    for run in range(3):  # re-runnable: the second and third change nothing
        report = migrate(root, postgres_state(url))
        assert report.spend_usd["judge"] == pytest.approx(1.75 if run == 0 else 0.0)
        judge, benchmark = _ledgers(url)
        assert {ev: _spent(judge, ev) for ev in before} == pytest.approx(before)
        assert _spent(benchmark, "model:m") == pytest.approx(0.5)
        assert [row[2:] for row in judge.totals()] == [pytest.approx((1.5, 4)), pytest.approx((1.0, 2))]
    SharedState.at(root, url)  # no longer refused

    # The batch's reservation is in flight in the database and its record points at the copy: settling it there
    # replaces the 2.0 worst case by what the provider billed, once.
    (record,) = BatchState(postgres_state(url), "relevance", TODAY).batches
    assert {k: v for k, v in record["reservation"].items() if k != "id"} == {
        k: v for k, v in asdict(made["batch"]).items() if k != "id"
    }
    refusal = judge.reserve("relevance", 98.0, None, 100.0)
    assert isinstance(refusal, Refusal) and refusal.in_flight_usd == pytest.approx(2.0)
    judge.settle(Reservation(**record["reservation"]), 0.4)
    assert _spent(judge, "relevance") == pytest.approx(1.4)

    cache = ModelCache(postgres_state(url))
    assert cache.get(f"{7:064x}") == {"content": '{"score": 7}', "cost_usd": 0.01}


def test_spend_added_to_the_files_after_a_migration_is_refused_then_carried_over_exactly(tmp_path, postgres_db):
    root, url = tmp_path / "data", postgres_db.url()
    _sqlite_state(root)
    migrate(root, postgres_state(url))
    # A run on the old instance (or a batch collected there) after the move: the files gained spend, and the
    # batch's reservation was settled in the file (so its copy must not count any more).
    sqlite_ledger = BudgetLedger(state_dir(root) / "budget.sqlite")
    _spend(sqlite_ledger, "helpfulness", 2, 0.125)
    (record,) = BatchState(state_dir(root) / "judge_batches", "relevance", TODAY).batches
    sqlite_ledger.settle(Reservation(**record["reservation"]), 0.5)
    with pytest.raises(UnmigratedState, match=r"0\.75 USD of spend on 2 evaluator-day"):
        SharedState.at(root, url)

    report = migrate(root, postgres_state(url))
    assert (report.spend_usd["judge"], report.calls["judge"]) == (pytest.approx(0.75), 3)
    assert report.dropped_reservations["judge"] == 1
    judge, _ = _ledgers(url)
    for evaluator in ("helpfulness", "relevance"):
        assert _spent(judge, evaluator) == pytest.approx(_spent(sqlite_ledger, evaluator))
    SharedState.at(root, url)


def test_a_run_still_reserving_in_the_files_stops_the_migration_and_nothing_is_copied(tmp_path, postgres_db):
    root, url = tmp_path / "data", postgres_db.url()
    ledger = BudgetLedger(state_dir(root) / "budget.sqlite")
    _spend(ledger, "helpfulness", 1, 0.25)
    held = ledger.reserve("helpfulness", 1.0, None, 100.0)  # this process: alive, its call in flight
    assert isinstance(held, Reservation)
    with pytest.raises(RuntimeError, match=rf"run still going hold reservations \(process {os.getpid()}@"):
        migrate(root, postgres_state(url))
    judge, _ = _ledgers(url)
    assert judge.totals() == []
    ledger.settle(held, 0.5)
    migrate(root, postgres_state(url))
    assert _spent(judge, "helpfulness") == pytest.approx(0.75)


def test_the_command_reads_the_instance_in_dagster_home(tmp_path, postgres_db):
    """`python -m eval_platform.llm.migrate_state`: the database of the instance the shipped dagster.postgres.yaml
    describes, the data root of EVAL_PLATFORM_DATA_DIR; no password in what it prints."""
    root, home = tmp_path / "data", tmp_path / "home"
    _sqlite_state(root)
    home.mkdir()
    (home / "dagster.yaml").write_text(shipped_instance_yaml(postgres=True))
    env = {**os.environ, **postgres_db.env(), "DAGSTER_HOME": str(home), "EVAL_PLATFORM_DATA_DIR": str(root)}
    done = subprocess.run(
        [sys.executable, "-m", "eval_platform.llm.migrate_state"], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert "judge ledger: 1.750000 USD over 5 call(s) added, 2 reservation(s) copied" in done.stdout
    assert "judge cache: 30 entr(ies)" in done.stdout
    assert postgres_db.password not in done.stdout + done.stderr
    judge, _ = _ledgers(postgres_db.url())
    assert _spent(judge, "helpfulness") == pytest.approx(1.5)
    assert main(["--data-dir", str(root), "--postgres-url", postgres_db.url()]) == 0  # again: nothing more
    assert _spent(judge, "helpfulness") == pytest.approx(1.5)
