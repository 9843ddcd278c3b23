"""A Dagster home on the real PostgreSQL server the suite starts (fixtures in shared_state_backends.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval_platform.instance_config import shipped_instance_yaml


@pytest.fixture
def postgres_home(tmp_path, postgres_db, monkeypatch) -> Path:
    """A DAGSTER_HOME holding the shipped PostgreSQL config, with its variables set for the test's database."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(shipped_instance_yaml(postgres=True))
    for name, value in postgres_db.env().items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home
