"""A Dagster home on the real PostgreSQL server the suite starts (fixtures in shared_state_backends.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SHIPPED_POSTGRES = Path(__file__).resolve().parents[2] / "dagster.postgres.yaml"


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
