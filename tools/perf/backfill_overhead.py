"""Dagster's share of a judge_scores backfill launched through the UI's GraphQL API, beside the same judging
called directly, in the same run of this script.

    python -m tools.perf.backfill_overhead [--evaluators 3] [--days 30] [--traces-per-day 100]
        [--latency-ms 200] [--partitions-per-run N]

Setup (not timed): the local judge in its own process, answering every call after `latency-ms`; `days` days of
synthetic traces (the last `days` complete UTC days, `traces-per-day` each) ingested into two data roots, one per
side, so both start from a cold judge cache; `evaluators` score evaluators on the local judge.

- direct: one process calls `judge_partition` (read the day's traces, `judge_day`, write the partition's Parquet:
  what the asset does per partition) for every evaluator × day in turn, then refreshes the catalog once;
- dagster: a real `dagster-webserver` and `dagster-daemon` on 127.0.0.1 over a temp DAGSTER_HOME holding the
  shipped dagster.yaml (4 runs at once, 2 backfill runs, `llm_judge` pool of 2); the backfill of every
  judge_scores partition is launched with the `launchPartitionBackfill` mutation, as the UI's Materialize dialog
  does, and timed until the backfill is COMPLETED_SUCCESS (also: until its last partition is materialized).

`--partitions-per-run 1` starts the Dagster side with EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN=1: Dagster's default
of one run per partition, the baseline. Dagster's overhead is (dagster - direct) / direct.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.markdown_table import markdown_table
from eval_platform.storage.location import DataRoot
from tools.perf.synthetic_project import synthetic_trace, write_score_evaluator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
TIMEOUT_S = 3600.0  # bounds a hang only

LAUNCH = """
mutation Launch($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
    ... on PythonError { message stack }
  }
}
"""
STATUS = """
query Backfill($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status runs { runId status startTime endTime } }
  }
}
"""
MATERIALIZATIONS = """
{
  assetOrError(assetKey: {path: ["judge_scores"]}) {
    __typename
    ... on Asset { assetMaterializations { partition runId timestamp } }
  }
}
"""
WORKSPACE = """
{ workspaceOrError { __typename ... on Workspace { locationEntries { loadStatus
  locationOrLoadError { __typename ... on PythonError { message } } } } } }
"""


def write_project(root: Path, days: list[str], evaluators: list[str], traces_per_day: int, judge_url: str) -> None:
    """Evaluators on the local judge and `traces_per_day` JSONL traces per day, ingested into the warehouse."""
    from eval_platform.ingest.traces import read_trace_day
    from eval_platform.storage.warehouse import write_partition

    for name in evaluators:
        write_score_evaluator(root, name, judge_url)
    for day in days:
        folder = root / "traces" / day
        folder.mkdir(parents=True)
        lines = [json.dumps(synthetic_trace(day, i, 5)) for i in range(traces_per_day)]
        (folder / "export.jsonl").write_text("\n".join(lines) + "\n")
        write_partition(DataRoot.from_env(root), "traces", {"date": day}, read_trace_day(root, day).traces)


def start_judge(latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eval_platform.local_judge",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--latency-ms",
            str(latency_ms),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"local judge did not start: {line!r}")
    return process, line.rsplit(" ", 1)[1]


def judge_directly(root: Path, days: list[str], evaluators: list[str]) -> tuple[float, int]:
    """Every partition judged in this process, as the asset judges each; the catalog refreshed once."""
    from eval_platform.defs.catalog import refresh
    from eval_platform.defs.resources import JudgeResource
    from eval_platform.judging.evaluator_day import judge_partition
    from eval_platform.judging.loading import load_evaluators

    configs = load_evaluators(root / "evaluators")
    runtime = JudgeResource().runtime(root)
    started = time.perf_counter()
    rows = 0
    for name in evaluators:
        for day in days:
            rows += judge_partition(DataRoot.from_env(root), configs[name], day, runtime, set()).summary["completed"]
    refresh(DataRoot.from_env(root))
    return time.perf_counter() - started, rows


class Dagster:
    """A webserver and a daemon over a temp DAGSTER_HOME with the shipped dagster.yaml, on 127.0.0.1."""

    def __init__(self, base: Path, root: Path, start_date: str, partitions_per_run: int | None):
        self.home = base / "dagster_home"
        self.home.mkdir()
        (self.home / "dagster.yaml").write_text(shipped_instance_yaml())
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "EVAL_PLATFORM_DATA_DIR": str(root),
            "EVAL_PLATFORM_START_DATE": start_date,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        }
        if partitions_per_run is not None:
            self.env["EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN"] = str(partitions_per_run)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.base = base
        self.processes: list[subprocess.Popen] = []

    def _start(self, command: list[str], log: str) -> subprocess.Popen:
        with (self.base / log).open("wb") as out:
            process = subprocess.Popen(
                command, cwd=REPO, env=self.env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.processes.append(process)
        return process

    def __enter__(self) -> Dagster:
        workspace = str(REPO / "workspace.yaml")
        port = self.url.rsplit(":", 1)[1]
        webserver = self._start(
            [str(BIN / "dagster-webserver"), "-w", workspace, "-h", "127.0.0.1", "-p", port], "webserver.log"
        )
        deadline = time.monotonic() + 600
        while not self._loaded():
            if webserver.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"webserver did not load: {(self.base / 'webserver.log').read_text()[-3000:]}")
            time.sleep(1)
        # after the webserver created the instance's storage (two processes creating it at once can collide)
        self._start([str(BIN / "dagster-daemon"), "run", "-w", workspace], "daemon.log")
        return self

    def __exit__(self, *exc) -> None:
        for process in self.processes:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    os.killpg(process.pid, signal.SIGKILL)
                    process.wait()

    def _loaded(self) -> bool:
        try:
            entries = self.graphql(WORKSPACE)["workspaceOrError"].get("locationEntries", [])
        except httpx.HTTPError:
            return False
        if entries and all(e["loadStatus"] == "LOADED" for e in entries):
            errors = [e for e in entries if e["locationOrLoadError"]["__typename"] != "RepositoryLocation"]
            if errors:
                raise RuntimeError(f"the code location did not load: {errors}")
            return True
        return False

    def graphql(self, query: str, **variables) -> dict:
        reply = httpx.post(f"{self.url}/graphql", json={"query": query, "variables": variables}, timeout=60)
        reply.raise_for_status()
        body = reply.json()
        if body.get("errors"):
            raise RuntimeError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def backfill(self, partitions: list[str]) -> dict:
        """Launch the backfill of these judge_scores partitions and wait for it; times from the launch."""
        started = time.time()
        launched = self.graphql(
            LAUNCH,
            params={
                "assetSelection": [{"path": ["judge_scores"]}],
                "partitionNames": partitions,
                "title": "backfill_overhead",
            },
        )
        launched = launched["launchPartitionBackfill"]
        if launched["__typename"] != "LaunchBackfillSuccess":
            raise RuntimeError(f"launch failed: {launched}")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            backfill = self.graphql(STATUS, id=launched["backfillId"])["partitionBackfillOrError"]
            if backfill["status"] not in ("REQUESTED", "CANCELING"):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"backfill still {backfill['status']} after {TIMEOUT_S:.0f} s")
            time.sleep(0.5)
        completed = time.time() - started
        events = self.graphql(MATERIALIZATIONS)["assetOrError"].get("assetMaterializations", [])
        last = max(int(e["timestamp"]) / 1000 for e in events) - started if events else float("nan")
        runs = backfill["runs"]
        busy = sum(r["endTime"] - r["startTime"] for r in runs if r["startTime"] and r["endTime"])
        return {
            "status": backfill["status"],
            "wall_s": completed,
            "last_materialized_s": last,
            "runs": len(runs),
            "run_seconds": busy,
            "materialized": sorted(e["partition"] for e in events),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evaluators", type=int, default=3)
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--traces-per-day", type=int, default=100)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument(
        "--partitions-per-run",
        type=int,
        default=None,
        help="EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN for the Dagster side (default: the project's)",
    )
    args = parser.parse_args(argv)

    today = datetime.now(UTC).date()
    days = [(today - timedelta(days=args.days - i)).isoformat() for i in range(args.days)]
    evaluators = [f"criterion_{k}" for k in range(args.evaluators)]
    partitions = [f"{day}|{name}" for name in evaluators for day in days]
    judge, judge_url = start_judge(args.latency_ms)
    base = Path(tempfile.mkdtemp(prefix="backfill_overhead_"))
    try:
        direct_root, dagster_root = base / "direct" / "data", base / "dagster" / "data"
        for root in (direct_root, dagster_root):
            write_project(root, days, evaluators, args.traces_per_day, judge_url)
        direct_s, rows = judge_directly(direct_root, days, evaluators)
        with Dagster(base / "dagster", dagster_root, days[0], args.partitions_per_run) as dagster:
            result = dagster.backfill(partitions)
    finally:
        judge.terminate()
        judge.wait(timeout=10)

    ok = result["status"] == "COMPLETED_SUCCESS" and result["materialized"] == sorted(partitions)
    policy = args.partitions_per_run or "project default"
    print(
        f"{args.evaluators} evaluators x {args.days} days = {len(partitions)} partitions, {args.traces_per_day} "
        f"traces/day, judge latency {args.latency_ms:.0f} ms, {rows} COMPLETED rows directly; "
        f"partitions per run: {policy}; machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
    )
    columns = ["side", "partitions", "runs", "wall time (s)", "overhead"]
    table = [["direct (judge_partition in one process)", len(partitions), "-", f"{direct_s:.1f}", "-"]]
    for side, seconds in (
        ("Dagster backfill, launch to COMPLETED_SUCCESS", result["wall_s"]),
        ("Dagster backfill, launch to last partition materialized", result["last_materialized_s"]),
    ):
        overhead = f"{100 * (seconds - direct_s) / direct_s:+.0f}%"
        table.append([side, len(partitions), result["runs"], f"{seconds:.1f}", overhead])
    print(markdown_table([dict(zip(columns, row, strict=True)) for row in table], columns))
    print(f"runs' own durations summed: {result['run_seconds']:.1f} s (runs overlap: the backfill tag limit is 2)")
    if not ok:
        print(
            f"BACKFILL NOT CLEAN: status {result['status']}, {len(result['materialized'])} of {len(partitions)} "
            f"partitions materialized; logs in {base}"
        )
        return 1
    shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
