"""A real PostgreSQL server for the scale-out tests, started by the suite itself (see postgres_server.py)."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import pytest

from eval_platform_tests.postgres_server import PostgresServer, find_bin_dir

SHIPPED_POSTGRES = Path(__file__).resolve().parents[2] / "dagster.postgres.yaml"


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


@pytest.fixture
def postgres_home(tmp_path, postgres_db, monkeypatch) -> Path:
    """A DAGSTER_HOME holding the shipped PostgreSQL config, with its variables set for the test's database."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copyfile(SHIPPED_POSTGRES, home / "dagster.yaml")
    for name, value in postgres_db.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home
