"""A real PostgreSQL server for the scale-out tests, started by the suite itself (see postgres_server.py)."""

from __future__ import annotations

import uuid

import pytest

from eval_platform_tests.postgres_server import PostgresServer, find_bin_dir


@pytest.fixture(scope="session")
def postgres_server():
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) not found on PATH or under "
                    "/usr/lib/postgresql/*/bin: install them with `apt-get install postgresql` (CI does)")
    server = PostgresServer(bin_dir)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def postgres_db(postgres_server):
    """A fresh, empty database on the session's server: its connection parameters."""
    return postgres_server.create_database(f"dagster_{uuid.uuid4().hex[:12]}")
