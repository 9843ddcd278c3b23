"""Fixtures for the two homes of the shared state (judge cache, budget ledgers, batch state): SQLite files under a
data root, and the real PostgreSQL server the suite starts itself (see postgres_server.py).

`state_backend` runs a test once per backend. A test opens its stores through it (`ledger`, `cache`, `batches`)
with the path it would use on SQLite; on PostgreSQL the path is ignored and every store is in the test's own
fresh database, so processes that share no files still share the state. Subprocesses get `postgres_url` (or "")
and open theirs with `ledger_at` / `cache_at`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.statedb import PostgresState, postgres_state
from eval_platform_tests.postgres_server import PostgresServer, find_bin_dir


@pytest.fixture(scope="session")
def postgres_server():
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip(
            "PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under "
            "/usr/lib/postgresql/*/bin: install them with `apt-get install postgresql` (CI does)"
        )
    server = PostgresServer(bin_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_db(postgres_server):
    """A fresh, empty database on the session's server: its connection parameters."""
    return postgres_server.create_database(f"dagster_{uuid.uuid4().hex[:12]}")


def ledger_at(path: Path, postgres_url: str | None = None, clock: Callable[[], datetime] | None = None):
    """The judges' ledger: the SQLite file at `path`, or the one in the database at `postgres_url`."""
    return BudgetLedger(postgres_state(postgres_url) if postgres_url else path, clock)


def cache_at(directory: Path, postgres_url: str | None = None) -> ModelCache:
    return ModelCache(postgres_state(postgres_url) if postgres_url else directory)


@dataclass(frozen=True)
class StateBackend:
    name: str  # sqlite | postgres
    postgres_url: str | None = None

    def ledger(self, path: Path, clock: Callable[[], datetime] | None = None) -> BudgetLedger:
        return ledger_at(path, self.postgres_url, clock)

    def cache(self, directory: Path) -> ModelCache:
        return cache_at(directory, self.postgres_url)

    def batches(self, directory: Path) -> Path | PostgresState:
        return postgres_state(self.postgres_url) if self.postgres_url else directory

    @property
    def arg(self) -> str:
        """For a subprocess's command line: the URL, or "" for SQLite."""
        return self.postgres_url or ""


@pytest.fixture(params=["sqlite", "postgres"])
def state_backend(request) -> StateBackend:
    if request.param == "sqlite":
        return StateBackend("sqlite")
    return StateBackend("postgres", request.getfixturevalue("postgres_db").url())
