"""A dead run never stops the living: judging runs killed (kill -9 of the run worker and its step processes) on two
"hosts" that share the real PostgreSQL instance leave their `llm_judge` pool slots behind; with the shipped
instance config's run monitoring, the daemon on a third host frees them and its own judging run goes through.

Each host has its own DAGSTER_HOME and its own code server (`dagster api grpc`), and launches its run at once
through it (the test's instance config leaves the queue out for hosts 1 and 2: with Dagster's default coordinator,
`dagster job launch` starts the run as a child of that host's code server, as DefaultRunLauncher does on the
daemon's host); the third host runs `dagster-daemon` on the shipped config, its polls shortened by the test's copy.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from contextlib import ExitStack
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.instance_config import shipped_instance_yaml
from eval_platform_tests.conftest import copy_sample_days, write_evaluator
from eval_platform_tests.dagster_daemon import REPO, SCRIPTS, WORKSPACE, code_server, running_daemon
from eval_platform_tests.defs.test_postgres_instance import judge_key, materialize, sql
from eval_platform_tests.s3_server import StallingProxy

DAY = "2026-11-09"
POOL = "llm_judge"


def home_with(folder: Path, edit) -> Path:
    """A DAGSTER_HOME holding the shipped PostgreSQL config as `edit` changes it (in place)."""
    folder.mkdir(parents=True)
    config = yaml.safe_load(shipped_instance_yaml(postgres=True))
    edit(config)
    (folder / "dagster.yaml").write_text(yaml.safe_dump(config))
    return folder


def without_queue(config: dict) -> None:
    """Runs start at once on the launching host's code server (Dagster's default coordinator): no queue, no run
    limits; the pool limits stay."""
    # Dagster's documented name for its default coordinator (the queue is the default when none is named).
    config["run_coordinator"] = {"module": "dagster._core.run_coordinator", "class": "DefaultRunCoordinator"}
    del config["concurrency"]["runs"]


def quick_monitoring(config: dict) -> None:
    """The daemon's run monitoring polling every second and freeing a dead run's slots a second after its end."""
    config.setdefault("run_monitoring", {}).update({"poll_interval_seconds": 1, "free_slots_after_run_end_seconds": 1})


def launch(home: Path, workspace: Path, evaluator: str) -> str:
    """`dagster job launch` of one judge_scores partition from `home`: the run's id."""
    run_id = str(uuid.uuid4())
    partition = str(judge_key(DAY, evaluator))
    tags = {
        "dagster/partition": partition,
        "dagster/partition/date": DAY,
        "dagster/partition/evaluator": evaluator,
    }
    done = subprocess.run(
        [
            str(SCRIPTS / "dagster"),
            "job",
            "launch",
            "-w",
            str(workspace),
            "-j",
            "__ASSET_JOB",
            "-o",
            "judge_scores",
            "--tags",
            json.dumps(tags),
            "--run-id",
            run_id,
        ],
        cwd=REPO,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return run_id


def holds_slot(instance: dg.DagsterInstance, run_id: str) -> bool:
    run = instance.get_run_by_id(run_id)
    if run is not None and run.is_finished:
        messages = [event.message for event in instance.all_logs(run_id)]
        pytest.fail(f"run {run_id} ended ({run.status}) before it was killed: {messages}")
    info = instance.event_log_storage.get_concurrency_info(POOL)
    return any(slot.run_id == run_id for slot in info.claimed_slots)


def descendants(pid: int) -> list[int]:
    children = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    found = [int(child) for child in children.split()]
    return found + [grandchild for child in found for grandchild in descendants(child)]


def kill_run_worker(instance: dg.DagsterInstance, run_id: str) -> None:
    """kill -9 of the run's worker process and the step processes it started (a machine or container lost)."""
    (start,) = instance.all_logs(run_id, of_type=dg.DagsterEventType.RUN_START)
    worker = start.dagster_event.pid
    for pid in [worker, *descendants(worker)]:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def run_story(instance: dg.DagsterInstance, run_id: str) -> str:
    run = instance.get_run_by_id(run_id)
    return f"{run and run.status}: " + "\n".join(str(event.message) for event in instance.all_logs(run_id))


def wait_for(condition, what: str, polls: int = 600, story=lambda: "") -> None:
    for _ in range(polls):
        if condition():
            return
        time.sleep(0.5)
    pytest.fail(f"{what}: not within {polls // 2} s\n{story()}")


def test_runs_killed_on_two_hosts_do_not_block_judging_on_a_third(
    data_root, local_judge, postgres_db, tmp_path, monkeypatch
):
    copy_sample_days(data_root, [DAY])
    common = {"mode": "score", "score_scale": {"min": 0, "max": 1}, "model": "openai/mock", "temperature": 0.0}
    # The judge of hosts 1 and 2 never answers: their runs hold their pool slots, waiting, when they are killed.
    stalled = StallingProxy(("127.0.0.1", local_judge.port), limit=0)
    for name in ("stuck_one", "stuck_two"):
        write_evaluator(
            data_root, name, api_base=stalled.endpoint_url, timeout_s=600, max_retries=0, prompt="{{output}}", **common
        )
    write_evaluator(data_root, "helpfulness", api_base=local_judge.base_url, prompt="helpful? {{output}}", **common)
    for name, value in postgres_db.env().items():
        monkeypatch.setenv(name, value)
    # Hosts 1 and 2 start their runs at once on their own code server; host 3 is the shipped config, its daemon's
    # polls shortened here (the shipped values are for users: README "More than one machine").
    hosts = [home_with(tmp_path / f"host{i}", without_queue) for i in (1, 2)]
    daemon_home = home_with(tmp_path / "host3", quick_monitoring)
    monkeypatch.setenv("DAGSTER_HOME", str(daemon_home))
    with dg.DagsterInstance.get() as instance:
        assert materialize(build_definitions(data_root), "traces", DAY, instance).success
        subprocess.run(  # the README's one-time step for a new PostgreSQL database (Dagster issue #33552)
            [str(SCRIPTS / "dagster"), "instance", "concurrency", "set", POOL, "2"], check=True, capture_output=True
        )

        with ExitStack() as stack:
            stack.callback(stalled.close)
            killed = []
            for host, evaluator in zip(hosts, ("stuck_one", "stuck_two"), strict=True):
                monkeypatch.setenv("DAGSTER_HOME", str(host))  # the host's code server loads its own instance
                workspace = stack.enter_context(code_server(host))
                run_id = launch(host, workspace, evaluator)
                wait_for(
                    lambda run_id=run_id: holds_slot(instance, run_id),
                    f"run {run_id} taking its pool slot",
                    polls=120,
                    story=lambda run_id=run_id, host=host: (
                        run_story(instance, run_id) + (host / "code_server.log").read_text()[-3000:]
                    ),
                )
                kill_run_worker(instance, run_id)
                killed.append(run_id)
            monkeypatch.setenv("DAGSTER_HOME", str(daemon_home))
            info = instance.event_log_storage.get_concurrency_info(POOL)
            assert info.slot_count == 2 and {slot.run_id for slot in info.claimed_slots} == set(killed)

            daemon = stack.enter_context(running_daemon(daemon_home))
            judged = launch(daemon_home, WORKSPACE, "helpfulness")  # queued; the daemon launches it
            daemon.wait_for(lambda: instance.get_run_by_id(judged).is_finished, polls=600)

            assert instance.get_run_by_id(judged).status == dg.DagsterRunStatus.SUCCESS, daemon.log_tail()
            for run_id in killed:  # marked failed, their slots freed
                assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.FAILURE
            assert not instance.event_log_storage.get_concurrency_info(POOL).claimed_slots
    # host 3's run judged its partition; the killed runs wrote none
    judged_rows = sql(data_root, "SELECT evaluator, status, count(*) FROM judge_scores GROUP BY ALL ORDER BY ALL")
    assert {evaluator for evaluator, *_ in judged_rows} == {"helpfulness"}
    assert ("helpfulness", "COMPLETED") in {(evaluator, status) for evaluator, status, _ in judged_rows}
