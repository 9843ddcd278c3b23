"""Freshness: files of traces arriving into today's day folder, scored (and a threshold alert delivered) by the real
Dagster daemon, with each file's latency, every process's CPU and each step's peak RSS, beside the same day judged in
one run.

    python -m tools.perf.freshness [--files 10 | --day-traces N] [--traces-per-file 1000] [--interval-s 60]
        [--speedup 1] [--preseed 0] [--latency-ms 0] [--trip-every 2] [--max-trips 20] [--fail-share 0.1]
        [--settle-s S] [--no-baseline] [--keep]

Setup (not timed):
- a temp folder holding the data root and DAGSTER_HOME (the shipped `dagster.yaml`, `instance_config`);
- the local judge on 127.0.0.1 in its own process, every reply after `--latency-ms`, with the `echo/output` model
  (`tools/local_judge_wires/scripted.py`): the judge answers each trace's own output, so every trace scripts its
  verdict (0.9, or 0.1 for a failing one: an exact plan of which file trips which rule);
- one score evaluator on it whose `alerts:` hold one threshold rule per tripping file (see `plan_rules`), and
  `alerting.yaml` with a webhook to a receiver in this script (127.0.0.1) that records when each alert arrives;
- `dagster dev` as `eval-platform ui` runs it (`ui.dev_command`: webserver, daemon, code server; loopback only),
  with EVAL_PLATFORM_FILE_SETTLE_S = `--settle-s` (default the shipped 30 s divided by `--speedup`, printed);
- with `--preseed M`: a file of M traces in today's folder, ingested and judged by the daemon before the clock
  starts (the day as it has grown so far; its runs are not counted).

Then a file of `--traces-per-file` traces is written into `traces/<today>/` every `--interval-s / --speedup`
seconds, `--files` of them (or until the day holds `--day-traces`). Every `--trip-every`-th file (at most
`--max-trips`) carries `--fail-share` failing verdicts and trips its own rule. Per file: write (the file closed) ->
ingested (its trace ids in the `traces` partition, the partition file's time) -> scored (its trace ids in the
`judge_scores` partition) -> alert delivered (the webhook received its rule's alert). The script waits until every
file is scored and every alert delivered, then until Dagster is idle (no run for `--idle-s`).

CPU (user + system) and peak RSS come from /proc (Linux): the process tree of `dagster dev` is sampled every
`--sample-s` seconds; a run worker (a child of the code server) is tied to its run by the pid of the run's
RUN_START event. Per step (ingest = `traces` runs, judge = `judge_scores`
runs, rollups = the others): runs, wall, CPU, peak RSS of the worker. A process's CPU after its last sample is
not seen (at most `--sample-s` of it per run). The webserver, daemon and code server are counted for the measured
window only: at a speed-up, their ticking CPU per day is `--speedup` times what a replay shows.

Baseline (unless `--no-baseline`): the same day's files copied into a fresh data root (cold judge cache), then in
one fresh process `traces`, `judge_scores` and the rollups the replay's runs refreshed, each materialized once
(`dagster.materialize`, an ephemeral instance): CPU and peak RSS of that process (its Python start included).
The ratio printed is the replay's run workers' CPU for the files over the one-shot day's CPU scaled to the files'
share of the day's traces (the issue's "within 1.5x", measured on the slice replayed).

Timings on a shared machine are noisy: the load average is printed at the start and the end.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import polars as pl
import yaml

from eval_platform.alerting.rules import parse_rule
from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.markdown_table import markdown_table
from eval_platform.settings import DEFAULT_FILE_SETTLE_S, FILE_SETTLE_ENV, WAREHOUSE_URL_ENV
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_dir
from eval_platform.ui import create_instance_storage, dev_command
from tools.perf.synthetic_project import write_score_evaluator

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

REPO = Path(__file__).resolve().parents[2]
EVALUATOR = "freshness"
WEBHOOK_ENV = "FRESHNESS_WEBHOOK_URL"
PASS_SCORE, FAIL_SCORE = 0.9, 0.1
FAILING = "rate(score < 0.5)"
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


# ------------------------------------------------------------------------------------------------ the day's plan


@dataclass(frozen=True)
class Arrival:
    """File `number` (1-based): its traces, how many of them fail, and the rule it trips (None: it trips none)."""

    number: int
    traces: int
    failing: int
    rule: str | None = None
    min_n: int = 0


def plan_rules(preseed: int, per_file: int, files: int, trip_every: int, max_trips: int, share: float) -> list[Arrival]:
    """The files and the rule each tripping file breaks. Rule k is `rate(score < 0.5) > p_k` with `min_n` = the
    scores the day holds once file k is judged (n_k): it cannot fire before file k's rows are in judge_scores, and
    p_k is the failing rate file k's day would have *without* file k's failing rows (F_(k-1) / n_k, rounded up), so
    it fires only when they are there. The preseed and the other files pass."""
    arrivals, failing_so_far, trips = [], 0, 0
    for number in range(1, files + 1):
        trips_here = trip_every > 0 and number % trip_every == 0 and trips < max_trips
        failing = max(1, round(share * per_file)) if trips_here else 0
        n = preseed + number * per_file
        rule = None
        if trips_here:
            threshold = math.ceil(failing_so_far / n * 1e12) / 1e12
            rule = parse_rule(f"{FAILING} > {threshold:.12f}").text
            trips += 1
        arrivals.append(Arrival(number, per_file, failing, rule, n if rule else 0))
        failing_so_far += failing
    return arrivals


def trace_id(day: str, number: int, i: int) -> str:
    """Trace `i` of file `number` (0: the preseed)."""
    return f"{day}-f{number:05d}-{i:07d}"


def write_traces(path: Path, day: str, number: int, count: int, failing: int) -> None:
    """`count` traces whose output is the verdict the judge echoes: the first `failing` score 0.1, the rest 0.9."""
    temp = path.with_name(path.name + ".tmp")  # not read until renamed (defs/traces.py: `.tmp` files)
    with temp.open("w") as out:
        for i in range(count):
            score = FAIL_SCORE if i < failing else PASS_SCORE
            verdict = {"score": score, "reasoning": f"file {number} trace {i}: scripted verdict {score}"}
            row = {
                "trace_id": trace_id(day, number, i),
                "timestamp": f"{day}T{i % 24:02d}:{i % 60:02d}:00Z",
                "input": f"Summarise item {i} of file {number} in one sentence.",
                "output": json.dumps(verdict),
            }
            out.write(json.dumps(row) + "\n")
    temp.rename(path)


# ------------------------------------------------------------------------------------------------ processes


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


@dataclass
class Proc:
    pid: int
    ppid: int
    started: float  # POSIX time
    cmdline: str
    kind: str = "other"
    cpu_s: float = 0.0
    peak_rss_kb: int = 0
    first_cpu_s: float = 0.0
    last_seen: float = 0.0
    key: tuple[int, float] = (0, 0.0)


def _stat(pid: int) -> tuple[int, float, float] | None:
    """(ppid, CPU seconds, start time in ticks after boot) of a process, None when it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return int(fields[1]), (int(fields[11]) + int(fields[12])) / CLOCK_TICKS, float(fields[19])


def _peak_rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children(pid: int) -> list[int]:
    found: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(p) for p in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def _kind(cmdline: str, parent: Proc | None) -> str:
    if "dagster-webserver" in cmdline or "dagster_webserver" in cmdline:
        return "webserver"
    if "dagster-daemon" in cmdline or "dagster._daemon" in cmdline or " daemon run" in cmdline:
        return "daemon"
    if "api grpc" in cmdline or "code-server" in cmdline or "code_server" in cmdline:
        return "code server"
    if "resource_tracker" in cmdline:
        return parent.kind if parent else "other"
    if "spawn_main" in cmdline or "--multiprocessing-fork" in cmdline:
        return "run worker" if parent is not None and parent.kind == "code server" else "other"
    if parent is None:
        return "dagster dev"
    return parent.kind if parent.kind != "dagster dev" else "other"


class ProcessTree:
    """Samples the CPU and peak RSS of a process and all its descendants every `interval` s, on a thread."""

    def __init__(self, root_pid: int, interval: float):
        self.root_pid, self.interval = root_pid, interval
        self.boot = _boot_time()
        self.procs: dict[tuple[int, float], Proc] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> None:
        self.sample()
        self.thread.start()

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(10)
        self.sample()

    def _loop(self) -> None:
        while not self.stopping.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        now = time.time()
        by_pid: dict[int, Proc] = {}
        queue = [self.root_pid]
        while queue:
            pid = queue.pop()
            stat = _stat(pid)
            if stat is None:
                continue
            ppid, cpu, ticks = stat
            key = (pid, ticks)
            with self.lock:
                proc = self.procs.get(key)
                if proc is None:
                    try:
                        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
                    except OSError:
                        continue
                    parent = by_pid.get(ppid)
                    proc = Proc(pid, ppid, self.boot + ticks / CLOCK_TICKS, cmdline, first_cpu_s=cpu, key=key)
                    proc.kind = _kind(cmdline, parent if pid != self.root_pid else None)
                    self.procs[key] = proc
                proc.cpu_s, proc.last_seen = cpu, now
                proc.peak_rss_kb = max(proc.peak_rss_kb, _peak_rss_kb(pid))
            by_pid[pid] = proc
            queue += _children(pid)

    def snapshot(self) -> dict[tuple[int, float], float]:
        with self.lock:
            return {key: proc.cpu_s for key, proc in self.procs.items()}

    def all(self) -> list[Proc]:
        with self.lock:
            return list(self.procs.values())


def process_cpu_s(pid: int) -> float:
    stat = _stat(pid)
    return stat[1] if stat else 0.0


# ------------------------------------------------------------------------------------------------ the webhook


class Receiver:
    """A webhook receiver on 127.0.0.1 recording when each alert (by rule) first arrives."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}
        self.posts = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                at = time.time()
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                rule = (body.get("alert") or {}).get("rule")
                receiver.posts += 1
                if rule:
                    receiver.arrived.setdefault(parse_rule(rule).text, at)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/alerts"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


# ------------------------------------------------------------------------------------------------ the warehouse


class PartitionWatch:
    """Which files' traces a partition holds, re-read whenever its Parquet files change; per file the time of the
    partition file that first held all its traces."""

    def __init__(self, folder: Path, per_file: dict[int, int]):
        self.folder, self.per_file = folder, per_file
        self.signature: tuple = ()
        self.done: dict[int, float] = {}
        self.rows = 0

    def poll(self) -> None:
        files = sorted(p for p in self.folder.rglob("*.parquet")) if self.folder.is_dir() else []
        try:
            stats = [(str(p), p.stat().st_mtime_ns) for p in files]
        except FileNotFoundError:  # replaced between the listing and here: the next poll reads it
            return
        if not stats or tuple(stats) == self.signature:
            return
        written = max(mtime for _, mtime in stats) / 1e9
        try:
            ids = pl.concat([pl.read_parquet(p, columns=["trace_id"]) for p in files])
        except (FileNotFoundError, OSError, pl.exceptions.ComputeError):
            return
        self.signature = tuple(stats)
        self.rows = ids.height
        counts = (
            ids.select(pl.col("trace_id").str.extract(r"-f(\d{5})-", 1).cast(pl.Int64).alias("file"))
            .group_by("file")
            .len()
        )
        for number, n in counts.iter_rows():
            if number is not None and number not in self.done and n >= self.per_file.get(number, 1 << 62):
                self.done[number] = written


# ------------------------------------------------------------------------------------------------ Dagster


class Dev:
    """`dagster dev` as `eval-platform ui` runs it, in its own process group, on 127.0.0.1."""

    def __init__(self, base: Path, env: dict[str, str]):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.log = base / "dagster_dev.log"
        self.process = subprocess.Popen(
            dev_command("127.0.0.1", self.port),
            cwd=REPO,
            env=env,
            stdout=self.log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def tail(self, chars: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        """SIGTERM to the group (then SIGKILL): the webserver, daemon, code server and runs all started in it."""
        if self.process.poll() is not None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def open_instance(home: Path):
    import dagster as dg

    return dg.DagsterInstance.from_config(str(home))


def sensor_ticked(instance, name: str) -> bool:
    states = [s for s in instance.all_instigator_state() if s.instigator_name == name]
    return bool(states) and bool(instance.get_ticks(states[0].instigator_origin_id, states[0].selector_id, limit=1))


def step_of(record) -> str:
    """ingest (the new-files sensor's `ingest_traces` runs), judge (`judge_scores`) or rollups (the rest)."""
    selection = record.dagster_run.asset_selection or set()
    names = {key.to_user_string() for key in selection}
    if "traces" in names or record.dagster_run.job_name == "ingest_traces":
        return "ingest"
    if "judge_scores" in names:
        return "judge"
    return "rollups"


def run_pid(instance, run_id: str) -> int | None:
    """The process that executed the run: the pid its RUN_START event names."""
    import dagster as dg

    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_START).records
    event = records[0].event_log_entry.dagster_event if records else None
    return event.pid if event is not None else None


def tie_workers(procs: list[Proc], runs: list, instance) -> dict[str, Proc]:
    """Each run's worker process: the run worker with the pid its RUN_START event names, started before it."""
    workers = [p for p in procs if p.kind == "run worker"]
    tied: dict[str, Proc] = {}
    for record in runs:
        pid = run_pid(instance, record.dagster_run.run_id)
        started = record.start_time or time.time()
        candidates = [p for p in workers if p.pid == pid and p.started <= started + 1]
        if candidates:
            tied[record.dagster_run.run_id] = max(candidates, key=lambda p: p.started)
    return tied


# ------------------------------------------------------------------------------------------------ helpers


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (nearest rank) of `values`."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{percentile(values, 50):.1f} / {percentile(values, 95):.1f} / {max(values):.1f}"


def load() -> str:
    return "/".join(f"{v:.1f}" for v in os.getloadavg())


def start_judge(latency_ms: float) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "tools.perf.freshness", "--serve-judge", "--latency-ms", str(latency_ms)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    if "listening on" not in line:
        process.kill()
        raise RuntimeError(f"local judge did not start: {line!r}")
    return process, line.rsplit(" ", 1)[1]


def serve_judge(latency_ms: float) -> int:
    """The local judge with the scripted `echo/` models, until SIGTERM."""
    from eval_platform.local_judge.server import LocalJudgeServer
    from eval_platform.startup import start_process
    from tools.local_judge_wires.scripted import Scripted

    start_process()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    with LocalJudgeServer(latency_ms=latency_ms, host="127.0.0.1", port=0, wires=[Scripted()]) as server:
        print(f"local judge listening on {server.base_url}", flush=True)
        stopping.wait()
    return 0


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


# ------------------------------------------------------------------------------------------------ the one-shot day


def one_shot(root: Path, day: str, rollups: list[str]) -> int:
    """In this (fresh) process: the day's traces, its judge_scores partition and `rollups`, each materialized once."""
    os.environ["EVAL_PLATFORM_DATA_DIR"] = str(root)
    import dagster as dg

    from eval_platform.definitions import build_definitions

    defs = build_definitions(root)
    assets = list(defs.assets or [])
    resources = dict(defs.resources or {})
    did = {}
    with dg.DagsterInstance.ephemeral() as instance:
        for label, selection, key in (
            ("traces", ["traces"], day),
            ("judge_scores", ["judge_scores"], f"{day}|{EVALUATOR}"),
            ("rollups", rollups, None),
        ):
            if not selection:
                continue
            result = dg.materialize(
                assets, selection=selection, partition_key=key, resources=resources, instance=instance
            )
            did[label] = result.success
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(json.dumps({"success": did, "peak_rss_gb": peak}))
    return 0 if all(did.values()) else 1


def run_one_shot(base: Path, root: Path, day: str, rollups: list[str], judge_url: str, judge_pid: int) -> dict:
    fresh = base / "one_shot" / "data"
    (fresh / "traces").mkdir(parents=True)
    shutil.copytree(root / "traces" / day, fresh / "traces" / day)
    shutil.copytree(root / "evaluators", fresh / "evaluators")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}
    env[FILE_SETTLE_ENV] = "0"
    env.pop(WAREHOUSE_URL_ENV, None)
    env.pop("DAGSTER_HOME", None)
    command = [sys.executable, "-m", "tools.perf.freshness", "--one-shot", str(fresh), "--day", day]
    command += ["--rollups", ",".join(rollups)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    judge_before = process_cpu_s(judge_pid)
    started = time.perf_counter()
    done = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=7200)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"the one-shot day failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {**result, "wall_s": wall, "cpu_s": cpu, "judge_cpu_s": process_cpu_s(judge_pid) - judge_before}


# ------------------------------------------------------------------------------------------------ the replay


@dataclass
class Replay:
    arrivals: list[Arrival]
    written: dict[int, float] = field(default_factory=dict)
    runs: list = field(default_factory=list)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10, help="files to write (default 10)")
    parser.add_argument("--day-traces", type=int, help="instead of --files: write files until the day holds this many")
    parser.add_argument("--traces-per-file", type=int, default=1000)
    parser.add_argument("--interval-s", type=float, default=60.0, help="between two files, before the speed-up")
    parser.add_argument("--speedup", type=float, default=1.0, help="divides the interval and the settle time")
    parser.add_argument("--preseed", type=int, default=0, help="traces already in the day, judged before the clock")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="the local judge's delay per call")
    parser.add_argument("--trip-every", type=int, default=2, help="every n-th file trips its own alert rule")
    parser.add_argument("--max-trips", type=int, default=20)
    parser.add_argument("--fail-share", type=float, default=0.1, help="failing verdicts in a tripping file")
    parser.add_argument("--settle-s", type=float, help="EVAL_PLATFORM_FILE_SETTLE_S (default 30 / speed-up)")
    parser.add_argument("--sample-s", type=float, default=0.25, help="how often the process tree is read")
    parser.add_argument("--idle-s", type=float, default=75.0, help="no run for this long after the last: idle")
    parser.add_argument(
        "--stuck-s",
        type=float,
        default=180.0,
        help="every file written and no run for this long, yet some file not scored or alert not delivered: stop",
    )
    parser.add_argument("--timeout-s", type=float, default=3600.0, help="bounds a hang only")
    parser.add_argument(
        "--ready-timeout-s", type=float, default=600.0, help="fail when the new-files sensor has not ticked by then"
    )
    parser.add_argument("--no-baseline", action="store_true", help="skip the one-shot day")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (logs, warehouse, instance)")
    parser.add_argument("--serve-judge", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--one-shot", help=argparse.SUPPRESS)
    parser.add_argument("--day", help=argparse.SUPPRESS)
    parser.add_argument("--rollups", default="", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_judge:
        return serve_judge(args.latency_ms)
    if args.one_shot:
        return one_shot(Path(args.one_shot), args.day, [a for a in args.rollups.split(",") if a])

    files = args.files
    if args.day_traces is not None:
        files = max(1, math.ceil((args.day_traces - args.preseed) / args.traces_per_file))
    interval = args.interval_s / args.speedup
    settle = args.settle_s if args.settle_s is not None else DEFAULT_FILE_SETTLE_S / args.speedup
    arrivals = plan_rules(args.preseed, args.traces_per_file, files, args.trip_every, args.max_trips, args.fail_share)
    base = Path(tempfile.mkdtemp(prefix="freshness-"))
    root, home = base / "data", base / "dagster_home"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(shipped_instance_yaml())
    day = datetime.now(UTC).date().isoformat()
    folder = root / "traces" / day
    folder.mkdir(parents=True)
    print(
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {os.cpu_count()} cores, load {load()}; day {day}: "
        f"{args.preseed:,} traces pre-seeded, {files} files of {args.traces_per_file:,} every {interval:g} s "
        f"({args.interval_s:g} s / speed-up {args.speedup:g}), {FILE_SETTLE_ENV}={settle:g}; local judge at "
        f"{args.latency_ms:g} ms; {sum(1 for a in arrivals if a.rule)} files trip a rule; temp folder {base}",
        flush=True,
    )

    judge, judge_url = start_judge(args.latency_ms)
    receiver = Receiver()
    dev: Dev | None = None
    tree: ProcessTree | None = None
    ok = False
    try:
        rules = [{"rule": a.rule, "min_n": a.min_n} for a in arrivals if a.rule]
        write_score_evaluator(root, EVALUATOR, judge_url, model="openai/echo/output", max_retries=2, alerts=rules)
        alerting = {"destinations": [{"name": "bench", "type": "webhook", "url_env": WEBHOOK_ENV, "timeout_s": 5}]}
        (root / "alerting.yaml").write_text(yaml.safe_dump(alerting))
        if args.preseed:
            write_traces(folder / "preseed.jsonl", day, 0, args.preseed, 0)
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            "EVAL_PLATFORM_DATA_DIR": str(root),
            "EVAL_PLATFORM_START_DATE": day,
            FILE_SETTLE_ENV: f"{settle:g}",
            WEBHOOK_ENV: receiver.url,
            "LITELLM_LOCAL_MODEL_COST_MAP": "True",
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        }
        env.pop(WAREHOUSE_URL_ENV, None)  # the partitions are watched on local disk
        create_instance_storage(home)  # as `eval-platform ui` does, before the processes that share it start
        instance = open_instance(home)
        started_dev = time.time()
        dev = Dev(base, env)
        tree = ProcessTree(dev.process.pid, args.sample_s)
        tree.start()
        deadline = time.monotonic() + args.timeout_s
        ready_by = time.monotonic() + args.ready_timeout_s

        def check_alive() -> None:
            if not dev.alive():
                raise RuntimeError(f"dagster dev exited:\n{dev.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"timed out after {args.timeout_s:g} s:\n{dev.tail()}")

        def check_started() -> None:
            check_alive()
            if time.monotonic() > ready_by:
                raise RuntimeError(f"the new-files sensor never ticked in {args.ready_timeout_s:g} s:\n{dev.tail()}")

        per_file = {a.number: a.traces for a in arrivals} | {0: args.preseed}
        judged = PartitionWatch(
            partition_dir(DataRoot.from_env(root), "judge_scores", {"evaluator": EVALUATOR, "date": day}), per_file
        )
        ingested = PartitionWatch(partition_dir(DataRoot.from_env(root), "traces", {"date": day}), per_file)

        # Ready: the new-files sensor ticked (and, with a preseed, the day is judged and Dagster idle).
        while not sensor_ticked(instance, "new_trace_files_sensor"):
            check_started()
            time.sleep(1)
        if args.preseed:
            while True:
                check_alive()
                judged.poll()
                if 0 in judged.done and idle_for(instance, args.idle_s):
                    break
                time.sleep(1)
        warmup_runs = {r.dagster_run.run_id for r in instance.get_run_records()}
        print(
            f"ready after {time.time() - started_dev:.0f} s ({len(warmup_runs)} warm-up runs); load {load()}",
            flush=True,
        )
        window_start = time.time()
        cpu_at_start = tree.snapshot()
        judge_cpu_start = process_cpu_s(judge.pid)

        replay = Replay(arrivals)
        expected_alerts = {a.rule for a in arrivals if a.rule}
        next_file = 0
        while True:
            check_alive()
            now = time.time()
            if next_file < len(arrivals) and now >= window_start + next_file * interval:
                arrival = arrivals[next_file]
                path = folder / f"arrival-{arrival.number:05d}.jsonl"
                write_traces(path, day, arrival.number, arrival.traces, arrival.failing)
                replay.written[arrival.number] = time.time()
                next_file += 1
                continue
            ingested.poll()
            judged.poll()
            everything = next_file == len(arrivals) and all(a.number in judged.done for a in arrivals)
            if everything and expected_alerts <= set(receiver.arrived):
                break
            if next_file == len(arrivals) and idle_for(instance, args.stuck_s, since=replay.written[len(arrivals)]):
                stuck = [a.number for a in arrivals if a.number not in judged.done]
                print(f"STUCK: Dagster idle for {args.stuck_s:g} s with files {stuck or 'none'} not scored", flush=True)
                break
            time.sleep(0.5)
        while not idle_for(instance, args.idle_s):
            check_alive()
            time.sleep(1)
        window_end = time.time()
        tree.sample()
        judge_cpu = process_cpu_s(judge.pid) - judge_cpu_start
        runs = [r for r in instance.get_run_records() if r.dagster_run.run_id not in warmup_runs]
        procs = tree.all()
        workers = tie_workers(procs, runs, instance)
        print(f"replay done in {window_end - window_start:.0f} s; load {load()}", flush=True)

        report_latency(replay, ingested, judged, receiver)
        rollup_assets = report_steps(runs, workers, tree, cpu_at_start, window_end - window_start, judge_cpu)
        replay_worker_cpu = sum(workers[r.dagster_run.run_id].cpu_s for r in runs if r.dagster_run.run_id in workers)
        failed = [r.dagster_run.run_id for r in runs if r.dagster_run.status.value != "SUCCESS"]
        if failed:
            print(f"RUNS NOT SUCCESSFUL: {len(failed)}: {failed}")
        dev.stop()
        tree.stop()
        instance.dispose()

        if not args.no_baseline:
            day_traces = args.preseed + sum(a.traces for a in arrivals)
            arriving = sum(a.traces for a in arrivals)
            shot = run_one_shot(base, root, day, rollup_assets, judge_url, judge.pid)
            share = arriving / day_traces
            print(
                f"\none-shot day ({day_traces:,} traces: traces, judge_scores, {len(rollup_assets)} rollups "
                f"materialized once in one process): {shot['wall_s']:.1f} s wall, {shot['cpu_s']:.1f} s CPU, peak "
                f"{shot['peak_rss_gb']:.2f} GB; local judge CPU {shot['judge_cpu_s']:.1f} s"
            )
            print(
                f"the files' share of the day ({arriving:,} of {day_traces:,} traces): "
                f"{shot['cpu_s'] * share:.1f} s of the one-shot CPU; the replay's run workers used "
                f"{replay_worker_cpu:.1f} s: ratio {replay_worker_cpu / (shot['cpu_s'] * share):.1f}x "
                "(the issue's target: within 1.5x)"
            )
        delivered = expected_alerts <= set(receiver.arrived)
        ok = not failed and all(a.number in judged.done for a in arrivals) and delivered
    finally:
        if dev is not None:
            dev.stop()
        if tree is not None:
            tree.stop()
        receiver.close()
        stop(judge)
        if args.keep or not ok:
            print(f"kept: {base}")
        else:
            shutil.rmtree(base, ignore_errors=True)
    return 0 if ok else 1


def idle_for(instance, seconds: float, since: float = 0.0) -> bool:
    """No run in progress, and none created or ended in the last `seconds` (nor was `since`, a POSIX time)."""
    records = instance.get_run_records()
    if any(not r.dagster_run.is_finished for r in records):
        return False
    times = [since] + [r.create_timestamp.timestamp() for r in records] + [r.end_time or 0.0 for r in records]
    return time.time() - max(times) >= seconds


def report_latency(replay: Replay, ingested: PartitionWatch, judged: PartitionWatch, receiver: Receiver) -> None:
    rows, to_ingest, to_score, to_alert = [], [], [], []
    for arrival in replay.arrivals:
        written = replay.written[arrival.number]
        got = ingested.done.get(arrival.number)
        scored = judged.done.get(arrival.number)
        alerted = receiver.arrived.get(arrival.rule) if arrival.rule else None
        if got is not None:
            to_ingest.append(max(0.0, got - written))
        if scored is not None:
            to_score.append(max(0.0, scored - written))
        if alerted is not None:
            to_alert.append(alerted - written)
        rows.append(
            {
                "file": arrival.number,
                "failing": arrival.failing,
                "ingested s": f"{got - written:.1f}" if got is not None else "never",
                "scored s": f"{scored - written:.1f}" if scored is not None else "never",
                "alert s": (f"{alerted - written:.1f}" if alerted is not None else "never") if arrival.rule else "-",
            }
        )
    print()
    print(markdown_table(rows, ["file", "failing", "ingested s", "scored s", "alert s"]))
    print(
        f"\nlatency from the file's write, p50 / p95 / max: ingested {spread(to_ingest)} s; traces scored "
        f"{spread(to_score)} s ({len(to_score)} of {len(replay.arrivals)} files); alert delivered {spread(to_alert)} s "
        f"({len(to_alert)} of {sum(1 for a in replay.arrivals if a.rule)} alerts); webhook posts {receiver.posts}"
    )


def report_steps(
    runs: list, workers: dict[str, Proc], tree: ProcessTree, cpu_at_start: dict, window_s: float, judge_cpu: float
) -> list[str]:
    """Per step and per standing process: CPU and peak RSS. Returns the rollup assets the runs refreshed."""
    steps: dict[str, list] = {"ingest": [], "judge": [], "rollups": []}
    rollup_assets: set[str] = set()
    for record in runs:
        step = step_of(record)
        steps[step].append(record)
        if step == "rollups":
            rollup_assets |= {k.to_user_string() for k in record.dagster_run.asset_selection or set()}
    rows = []
    total_worker = 0.0
    for step, records in steps.items():
        walls = [r.end_time - r.start_time for r in records if r.start_time and r.end_time]
        tied = [workers[r.dagster_run.run_id] for r in records if r.dagster_run.run_id in workers]
        cpu = sum(p.cpu_s for p in tied)
        total_worker += cpu
        rows.append(
            {
                "step": step,
                "runs": len(records),
                "wall s p50 / p95 / max": spread(walls),
                "CPU s (sum)": f"{cpu:.1f}",
                "CPU s per run p50 / max": f"{percentile([p.cpu_s for p in tied], 50):.1f} / "
                f"{max(p.cpu_s for p in tied):.1f}"
                if tied
                else "-",
                "peak RSS GB (max)": f"{max(p.peak_rss_kb for p in tied) / 2**20:.2f}" if tied else "-",
                "workers seen": len(tied),
            }
        )
    columns = list(rows[0])
    print()
    print(markdown_table(rows, columns))
    standing: dict[str, list[float]] = {}
    for proc in tree.all():
        if proc.kind == "run worker":
            continue
        before = cpu_at_start.get(proc.key, 0.0)  # 0: it started in the window
        if proc.kind == "other":
            print(f"other process {proc.pid} (parent {proc.ppid}): {proc.cmdline[:120]}")
        entry = standing.setdefault(proc.kind, [0.0, 0.0])
        entry[0] += proc.cpu_s - before
        entry[1] = max(entry[1], proc.peak_rss_kb / 2**20)
    parts = [f"{kind} {cpu:.1f} s (peak {peak:.2f} GB)" for kind, (cpu, peak) in sorted(standing.items())]
    others = sum(cpu for cpu, _ in standing.values())
    print(
        f"\nCPU over the {window_s:.0f} s window: run workers {total_worker:.1f} s; " + "; ".join(parts) + f"; all "
        f"Dagster processes {total_worker + others:.1f} s; the local judge (the provider) {judge_cpu:.1f} s"
    )
    return sorted(rollup_assets)


if __name__ == "__main__":
    sys.exit(main())
