"""A real `dagster-webserver` and `dagster-daemon` on 127.0.0.1, started once for the UI tests.

Both run as subprocesses over a temp DAGSTER_HOME (the repo's dagster.yaml) and a temp data root holding four
sample trace days and two evaluators pointed at the local judge. `ui_backfill` launches one backfill through the
webserver's GraphQL API, as the UI's Materialize dialog does, and waits for the daemon to finish it.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import httpx
import pytest

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform_tests.conftest import copy_sample_days, write_evaluator

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
EVALUATOR = "helpfulness"
EVALUATORS = [EVALUATOR, "relevance"]
DAYS = ["2026-11-09", "2026-11-10", "2026-11-11"]  # the backfilled days
NOT_REQUESTED = "2026-11-12"  # copied into the data root but never requested: must stay unscored
STARTUP_TIMEOUT_S = 240.0  # a code location loads in seconds; this only bounds a hang on a loaded 2-core machine
BACKFILL_TIMEOUT_S = 300.0
TERMINAL = {"COMPLETED", "COMPLETED_SUCCESS", "COMPLETED_FAILED", "FAILED", "CANCELED"}

LAUNCH_BACKFILL = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
    ... on PythonError { stack }
  }
}
"""

BACKFILL_STATUS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on Error { message }
    ... on PartitionBackfill {
      id
      status
      error { message }
      runs { runId status }
      assetBackfillData {
        assetBackfillStatuses {
          ... on AssetPartitionsStatusCounts {
            assetKey { path }
            numPartitionsTargeted
            numPartitionsInProgress
            numPartitionsMaterialized
            numPartitionsFailed
          }
        }
      }
    }
  }
}
"""

RUN_ERRORS = """
query RunErrors($runId: ID!) {
  logsForRun(runId: $runId) {
    ... on EventConnection {
      events {
        __typename
        ... on ExecutionStepFailureEvent { stepKey error { message } }
        ... on RunFailureEvent { message }
        ... on EngineEvent { message error { message } }
      }
    }
  }
}
"""

WORKSPACE = """
{
  workspaceOrError {
    __typename
    ... on PythonError { message }
    ... on Workspace {
      locationEntries {
        name
        loadStatus
        locationOrLoadError { __typename ... on PythonError { message } }
      }
    }
  }
}
"""


@dataclass
class DagsterUI:
    """A running webserver (and daemon) the tests talk to over HTTP, as a user's browser would."""

    url: str
    data_root: Path
    home: Path
    logs: dict[str, Path] = field(default_factory=dict)

    def graphql(self, query: str, **variables) -> dict:
        reply = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables}, timeout=60)
        reply.raise_for_status()
        body = reply.json()
        assert not body.get("errors"), f"GraphQL errors: {body['errors']}"
        return body["data"]

    def log_tails(self, lines: int = 40) -> str:
        parts = []
        for name, path in self.logs.items():
            text = path.read_text(errors="replace").splitlines() if path.exists() else []
            parts.append(f"--- last {lines} lines of {name} ({path}) ---\n" + "\n".join(text[-lines:]))
        return "\n".join(parts)

    def query_catalog(self, sql: str) -> list[tuple]:
        """Read the DuckDB catalog as an analyst would; a run refreshing its views may hold the file for a moment."""
        path = str(self.data_root / "eval_platform.duckdb")
        deadline = time.monotonic() + 120
        while True:
            try:
                with duckdb.connect(path, read_only=True) as conn:
                    return conn.execute(sql).fetchall()
            except duckdb.IOException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)

    def run_errors(self, run_ids: list[str]) -> str:
        """The failure messages of these runs, as the run page would show them."""
        found = []
        for run_id in run_ids:
            events = self.graphql(RUN_ERRORS, runId=run_id)["logsForRun"].get("events", [])
            for event in events:
                error = (event.get("error") or {}).get("message")
                if event["__typename"] in ("ExecutionStepFailureEvent", "RunFailureEvent") or error:
                    found.append(f"{run_id} {event['__typename']}: {event.get('message') or ''} {error or ''}".strip())
        return "\n".join(found) or "(no failure event)"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    # A session of its own, so teardown ends the code servers and run workers it spawned with it.
    with log.open("wb") as out:
        return subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(process.pid, signal.SIGKILL)  # whatever of its group is left (code servers, run workers)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def wait_until_loaded(ui: DagsterUI, webserver: subprocess.Popen) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last = "no answer yet"
    while time.monotonic() < deadline:
        if webserver.poll() is not None:
            pytest.fail(f"dagster-webserver exited with {webserver.returncode}\n{ui.log_tails()}")
        try:
            if httpx.get(f"{ui.url}/server_info", timeout=5).status_code == 200:
                workspace = ui.graphql(WORKSPACE)["workspaceOrError"]
                entries = workspace.get("locationEntries", [])
                last = str(workspace)
                if entries and all(e["loadStatus"] == "LOADED" for e in entries):
                    errors = [e for e in entries if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
                    assert not errors, f"the code location did not load: {errors}"
                    return
        except httpx.HTTPError as exc:
            last = repr(exc)
        time.sleep(1)
    pytest.fail(
        f"the webserver did not load the code location within {STARTUP_TIMEOUT_S:.0f} s ({last})\n{ui.log_tails()}"
    )


@pytest.fixture(scope="package")
def dagster_ui(local_judge, tmp_path_factory):
    base = tmp_path_factory.mktemp("dagster_ui")
    root = base / "data"
    (root / "evaluators").mkdir(parents=True)
    copy_sample_days(root, [*DAYS, NOT_REQUESTED])
    for name in EVALUATORS:
        write_evaluator(
            root,
            name,
            mode="score",
            score_scale={"min": 0, "max": 1},
            prompt=f"{name}: {{{{input}}}} -> {{{{output}}}}",
            model="openai/mock",
            api_base=local_judge.base_url,
            temperature=0.0,
        )
    home = base / "dagster_home"
    home.mkdir()
    # The shipped instance config as it is (telemetry off in it: the test talks to 127.0.0.1 only).
    (home / "dagster.yaml").write_text(shipped_instance_yaml())
    # Dagster's first-visit "join the community" dialog counts as seen, so it covers no page in the screenshots.
    (home / ".nux").mkdir()
    (home / ".nux" / "nux.yaml").write_text("seen: 1\n")
    env = {
        **os.environ,
        "DAGSTER_HOME": str(home),
        "EVAL_PLATFORM_DATA_DIR": str(root),
        "EVAL_PLATFORM_LOCAL_JUDGE_URL": local_judge.base_url,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    port = free_port()
    ui = DagsterUI(
        url=f"http://127.0.0.1:{port}",
        data_root=root,
        home=home,
        logs={"webserver": base / "webserver.log", "daemon": base / "daemon.log"},
    )
    workspace = str(REPO / "workspace.yaml")
    processes = []
    try:
        processes.append(
            start(
                [str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", str(port)],
                env,
                ui.logs["webserver"],
            )
        )
        wait_until_loaded(ui, processes[0])
        # Backfills and the run queue are the daemon's work. Started once the webserver has created the instance's
        # SQLite storage: two processes creating it at once can stamp its schema version twice.
        processes.append(start([str(BIN / "dagster-daemon"), "run", "-w", workspace], env, ui.logs["daemon"]))
        yield ui
    finally:
        for process in processes:
            stop(process)


@pytest.fixture(scope="package")
def ui_backfill(dagster_ui: DagsterUI) -> dict:
    """traces and judge_scores for DAYS (every evaluator), launched through GraphQL as one backfill, waited for until
    it ends."""
    launched = dagster_ui.graphql(
        LAUNCH_BACKFILL,
        params={
            "assetSelection": [{"path": ["traces"]}, {"path": ["judge_scores"]}],
            "partitionNames": DAYS,
            "title": "UI test backfill",
        },
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    backfill_id = launched["backfillId"]
    deadline = time.monotonic() + BACKFILL_TIMEOUT_S
    while True:
        backfill = dagster_ui.graphql(BACKFILL_STATUS, id=backfill_id)["partitionBackfillOrError"]
        assert backfill["__typename"] == "PartitionBackfill", backfill
        if backfill["status"] in TERMINAL:
            return backfill
        if time.monotonic() > deadline:
            pytest.fail(
                f"backfill {backfill_id} still {backfill['status']} after {BACKFILL_TIMEOUT_S:.0f} s: {backfill}\n"
                f"{dagster_ui.run_errors([r['runId'] for r in backfill['runs']])}\n{dagster_ui.log_tails()}"
            )
        time.sleep(2)
