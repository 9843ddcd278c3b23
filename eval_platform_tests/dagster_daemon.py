"""A real `dagster-daemon` for the tests, over the DAGSTER_HOME and data root of the test's environment.

`running_daemon` starts `dagster-daemon run -w <workspace>` as its own process group and stops the group at the
end; with the repo's workspace.yaml the daemon starts its own code server, and the runs it launches are children
of that server. `Daemon.wait_for` polls a condition and fails with the daemon's log when it dies or takes too
long. `Daemon.paused` freezes the daemon process (its sensors, backfills and run queue) to pin an interleaving that
otherwise happens by chance; runs already launched go on only when the code server is not the daemon's own (it
shuts down without the daemon's heartbeat), so a test that pauses serves the code itself with `code_server`.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sysconfig
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import pytest
import yaml

from eval_platform_tests.postgres_server import free_port

REPO = Path(__file__).resolve().parents[1]
AUTOMATION_SENSOR = "judge_scores_automation"
SCRIPTS = Path(sysconfig.get_path("scripts"))
WORKSPACE = REPO / "workspace.yaml"
STARTUP_POLLS = 480  # 0.5 s each: a code location loads in seconds; this bounds a hang on a loaded 2-core machine


@dataclass
class Daemon:
    process: subprocess.Popen
    log: Path

    def log_tail(self, chars: int = 5000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def wait_for(self, condition: Callable[[], object], polls: int = 1200) -> None:
        """Poll every 0.5 s until `condition()` holds; fail with the daemon's log if it dies or ~10 min pass."""
        for _ in range(polls):
            if condition():
                return
            assert self.process.poll() is None, f"the daemon exited:\n{self.log_tail()}"
            time.sleep(0.5)
        pytest.fail(f"the daemon did not get there in {polls // 2} s:\n{self.log_tail()}")

    @contextmanager
    def paused(self) -> Iterator[None]:
        os.kill(self.process.pid, signal.SIGSTOP)
        try:
            yield
        finally:
            os.kill(self.process.pid, signal.SIGCONT)


def stop_group(process: subprocess.Popen) -> None:
    os.killpg(process.pid, signal.SIGCONT)  # a paused process cannot handle SIGTERM
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextmanager
def running_daemon(home: Path, workspace: Path = WORKSPACE) -> Iterator[Daemon]:
    log = home / "daemon.log"
    process = subprocess.Popen(
        [str(SCRIPTS / "dagster-daemon"), "run", "-w", str(workspace)],
        cwd=REPO,
        env=dict(os.environ),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        yield Daemon(process, log)
    finally:
        stop_group(process)


@contextmanager
def code_server(folder: Path) -> Iterator[Path]:
    """The project's code location served by `dagster api grpc` on 127.0.0.1, outside any daemon: the path of a
    workspace file naming it. Runs launched through it are its children."""
    port = free_port()
    log = folder / "code_server.log"
    process = subprocess.Popen(
        [
            str(SCRIPTS / "dagster"),
            "api",
            "grpc",
            "-m",
            "eval_platform.definitions",
            "--location-name",
            "eval_platform",
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
            "-d",
            str(REPO),
        ],
        cwd=REPO,
        env=dict(os.environ),
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    workspace = folder / "workspace.yaml"
    location = {"host": "127.0.0.1", "port": port, "location_name": "eval_platform"}
    workspace.write_text(yaml.safe_dump({"load_from": [{"grpc_server": location}]}))
    try:
        for _ in range(STARTUP_POLLS):
            assert process.poll() is None, f"the code server exited:\n{log.read_text()[-5000:]}"
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.5)
        else:
            pytest.fail(f"the code server did not listen in {STARTUP_POLLS // 2} s:\n{log.read_text()[-5000:]}")
        yield workspace
    finally:
        stop_group(process)


def automation_ticks(instance: dg.DagsterInstance) -> Sequence:
    """The automation sensor's ticks, newest first (none before the daemon first evaluated it)."""
    states = [s for s in instance.all_instigator_state() if s.instigator_name == AUTOMATION_SENSOR]
    if not states:
        return []
    return instance.get_ticks(states[0].instigator_origin_id, states[0].selector_id)


def finished_ticks(instance: dg.DagsterInstance) -> list:
    return [tick for tick in automation_ticks(instance) if tick.status.value != "STARTED"]


def is_idle(instance: dg.DagsterInstance) -> bool:
    """Every backfill and run finished, and the automation sensor evaluated everything they recorded without
    requesting more: a tick that started after the last run ended (so it saw every event) requested nothing."""
    if any(backfill.status.value in ("REQUESTED", "CANCELING", "FAILING") for backfill in instance.get_backfills()):
        return False
    records = instance.get_run_records()
    if any(not record.dagster_run.is_finished for record in records):
        return False
    last_end = max((record.end_time or 0.0 for record in records), default=0.0)
    later = [tick for tick in finished_ticks(instance) if tick.timestamp > last_end]
    return bool(later) and all(tick.status.value == "SKIPPED" for tick in later)


def sensor_cli(action: str, sensor: str = AUTOMATION_SENSOR) -> None:
    """`dagster sensor start|stop <sensor>`, as a user turns a sensor on or off from a shell."""
    subprocess.run(
        [str(SCRIPTS / "dagster"), "sensor", action, sensor, "-w", str(WORKSPACE)],
        cwd=REPO,
        env=dict(os.environ),
        check=True,
        capture_output=True,
    )
