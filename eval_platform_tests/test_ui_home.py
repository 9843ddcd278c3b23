"""`eval-platform ui` on a new data root: the instance's storage exists before `dagster dev` starts its processes.

`dagster dev` starts the webserver, the daemon and the code server together; on a home without storage each creates
it, and two stamping the schema at once leave the code location unloaded ("Version table 'alembic_version' has more
than one head present", seen in CI). `dagster_home` creates it first, once.
"""

from __future__ import annotations

import sqlite3

from eval_platform.ui import dagster_home


def test_a_new_home_has_its_storage_created_once_before_dagster_dev(tmp_path, monkeypatch):
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    root = tmp_path / "data"
    root.mkdir()
    home = dagster_home(root)
    assert home == root / "dagster_home"
    assert "max_concurrent_runs" in (home / "dagster.yaml").read_text()
    for db in ("history/runs.db", "history/runs/index.db", "schedules/schedules.db"):
        with sqlite3.connect(home / db) as connection:
            heads = connection.execute("SELECT version_num FROM alembic_version").fetchall()
        assert len(heads) == 1, (db, heads)
    # Opening it again (the next `eval-platform ui`) keeps the one head.
    dagster_home(root)
    with sqlite3.connect(home / "history/runs.db") as connection:
        assert len(connection.execute("SELECT version_num FROM alembic_version").fetchall()) == 1
