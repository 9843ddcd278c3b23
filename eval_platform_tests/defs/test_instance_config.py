"""The shipped dagster.yaml: a real instance loaded from it queues runs with the limits the README promises."""

from datetime import UTC, datetime

import dagster as dg

from eval_platform.defs.traces import daily_ingest_schedule
from eval_platform.instance_config import shipped_instance_yaml


def test_shipped_instance_config_limits_runs_backfills_and_the_judge_pool(tmp_path, monkeypatch):
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(shipped_instance_yaml())
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    with dg.DagsterInstance.get() as instance:
        config = instance.get_concurrency_config()
        queue = config.run_queue_config
        assert queue is not None, "runs must go through the queued run coordinator"
        assert queue.max_concurrent_runs == 4
        backfill_limits = [t for t in queue.tag_concurrency_limits if t["key"] == "dagster/backfill"]
        assert backfill_limits and backfill_limits[0]["limit"] < queue.max_concurrent_runs
        assert config.pool_config.default_pool_limit == 2  # applies to the llm_judge pool


def test_schedule_runs_outrank_backfill_runs_in_the_queue():
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 13, 1, tzinfo=UTC))
    request = daily_ingest_schedule(context)
    assert request.partition_key == "2026-11-12"
    # backfill runs carry no priority tag (0); the queue starts higher priorities first
    assert int(request.tags["dagster/priority"]) > 0


def test_shipped_instance_configs_turn_telemetry_off(tmp_path, monkeypatch, postgres_db):
    """With telemetry on, every UI page asks the internet for a script (the webserver writes the instance's
    `telemetry_enabled` into the page it serves); both shipped instance files turn it off."""
    for postgres in (False, True):
        home = tmp_path / f"postgres_{postgres}"
        home.mkdir()
        (home / "dagster.yaml").write_text(shipped_instance_yaml(postgres))
        monkeypatch.setenv("DAGSTER_HOME", str(home))
        for name, value in postgres_db.env().items():  # read by dagster.postgres.yaml only
            monkeypatch.setenv(name, value)
        with dg.DagsterInstance.get() as instance:
            assert not instance.is_ephemeral
            assert instance.telemetry_enabled is False, f"postgres={postgres}"


def test_shipped_instance_configs_and_init_prune_tick_history(tmp_path, monkeypatch):
    """Dagster keeps every tick that requested a run forever (a file a minute: a tick a minute, each stored); the
    shipped files, and so what `eval-platform init` writes, prune them."""
    import yaml
    from dagster._core.definitions.run_request import InstigatorType
    from dagster._core.scheduler.instigation import TickStatus

    from eval_platform.init_root import init_root

    blocks = [yaml.safe_load(shipped_instance_yaml(postgres))["retention"] for postgres in (False, True)]
    assert blocks[0] == blocks[1]
    root = tmp_path / "root"
    init_root(root, ["helpfulness"], "openai/gpt-4o-mini", "OPENAI_API_KEY")
    monkeypatch.setenv("DAGSTER_HOME", str(root / "dagster_home"))
    with dg.DagsterInstance.get() as instance:
        sensors = instance.get_tick_retention_settings(InstigatorType.SENSOR)
        schedules = instance.get_tick_retention_settings(InstigatorType.SCHEDULE)
    assert sensors[TickStatus.SUCCESS] == 14 and sensors[TickStatus.SKIPPED] == 1 and sensors[TickStatus.FAILURE] == 30
    assert all(0 < days <= 90 for status, days in schedules.items() if status != TickStatus.STARTED)
