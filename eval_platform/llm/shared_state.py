"""Where the state that every run of the platform shares lives: the judge cache, the judges' and the benchmark's
budget ledgers, and batch mode's record of submitted batches.

It follows the Dagster instance. An instance on SQLite (the default `dagster.yaml`) keeps it in SQLite files
under the data root's `state/` folder. An instance on PostgreSQL (`dagster.postgres.yaml`) keeps it in the same
database, in tables named `eval_platform_*`, so that every host running the instance's runs enforces one budget
and finds one cache. Nothing else to configure: whatever reaches the instance's runs, events and queue reaches
this state, so two hosts can never end up on different ledgers (each would let its runs spend the whole budget).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.migrate_state import check_migrated
from eval_platform.llm.statedb import PostgresState, postgres_state
from eval_platform.settings import state_dir


def instance_postgres_url(instance: Any) -> str | None:
    """The URL of a Dagster instance's PostgreSQL run storage (dagster-postgres builds it from the instance's
    `storage: postgres:` config), or None when the instance is not on PostgreSQL."""
    if instance is None:
        return None
    url = getattr(instance.run_storage, "postgres_url", None)
    return url if isinstance(url, str) else None


@dataclass(frozen=True)
class SharedState:
    root: Path  # the data root: its state/ folder holds the SQLite files
    postgres: PostgresState | None = None  # set: everything is in this database instead

    @classmethod
    def of(cls, root: Path, instance: Any = None) -> SharedState:
        """The shared state of runs of `instance` (a `dg.DagsterInstance`; None: the data root's files).

        On PostgreSQL it refuses (`UnmigratedState`) while the data root's SQLite ledgers hold spend the database
        does not, and warns while its judge cache was never copied (see `migrate_state`)."""
        return cls.at(root, instance_postgres_url(instance))

    @classmethod
    def at(cls, root: Path, postgres_url: str | None) -> SharedState:
        """The shared state in the database at `postgres_url` (checked as `of` says), or in the data root's files
        when None."""
        if not postgres_url:
            return cls(root, None)
        state = postgres_state(postgres_url)
        check_migrated(root, state)
        return cls(root, state)

    def describe(self) -> str:
        return self.postgres.describe() if self.postgres else str(state_dir(self.root))

    def model_cache(self) -> ModelCache:
        return ModelCache(self.postgres or state_dir(self.root) / "judge_cache")

    def judge_ledger(self) -> BudgetLedger:
        """The judges' spend: what their budgets are enforced on and the cost rollups read."""
        return BudgetLedger(self.postgres or state_dir(self.root) / "budget.sqlite", name="judge")

    def benchmark_ledger(self) -> BudgetLedger:
        """Spend of the models under test: a ledger of its own, so it never counts against a judge's budget
        nor shows in `judge_cost_daily`."""
        return BudgetLedger(self.postgres or state_dir(self.root) / "benchmark_budget.sqlite", name="benchmark")

    def batches(self) -> Path | PostgresState:
        """Where batch mode records the batches each partition submitted (see `llm.batch.state`)."""
        return self.postgres or state_dir(self.root) / "judge_batches"
