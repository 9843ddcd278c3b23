"""Trace ingest: the daily `traces` asset, the `quarantine` rollup, the new-files sensor and the daily schedule."""


import hashlib
import json
from datetime import UTC, datetime, timedelta

import dagster as dg
import polars as pl

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import trace_days
from eval_platform.defs.resources import WarehouseResource
from eval_platform.ingest.traces import list_trace_files, read_trace_day
from eval_platform.storage.warehouse import has_files, table_glob, write_partition, write_quarantine


@dg.asset(
    partitions_def=trace_days,
    kinds={"python", "parquet"},
    group_name="ingest",
    check_specs=[dg.AssetCheckSpec("day_has_traces", asset="traces", description="WARN: a day with no trace files or no valid trace")],
)
def traces(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Normalized traces of one UTC day, from every export file in `traces/<day>/` (JSONL, JSON, CSV,
    Parquet, OTLP/JSON GenAI spans). Rejected rows go to `quarantine` with file, line and reason."""
    day = context.partition_key
    root = warehouse.root
    result = read_trace_day(root, day)
    write_partition(root, "traces", {"date": day}, result.traces)
    write_quarantine(root, "traces", day, result.quarantine)
    refresh(root)
    reasons = result.quarantine.group_by("reason").len().sort("reason").rows() if result.quarantine.height else []
    if result.quarantine.height:
        context.log.warning(f"{result.quarantine.height} rows of {day} quarantined: {dict(reasons)}")
    empty = result.traces.height == 0
    if empty:
        context.log.warning(f"traces/{day}/ has {len(result.files)} file(s) and no valid trace: an empty day")
    yield dg.MaterializeResult(
        metadata={
            "traces": result.traces.height,
            "quarantined": result.quarantine.height,
            "quarantine_reasons": dg.MetadataValue.json(dict(reasons)),
            "files": dg.MetadataValue.json(result.files),
            "empty_day": empty,
            "dagster/row_count": result.traces.height,
        }
    )
    yield dg.AssetCheckResult(
        check_name="day_has_traces",
        passed=not empty,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"files": len(result.files), "traces": result.traces.height},
        description=None if not empty else f"traces/{day}/: {len(result.files)} file(s), no valid trace",
    )


@dg.asset(deps=[traces], kinds={"duckdb"}, group_name="ingest")
def quarantine(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Every rejected input row (file, line, reason, raw text) across all sources and partitions.
    Fix the file and re-materialize its partition: the partition's quarantine rows are replaced."""
    root = warehouse.root
    refresh(root)
    if not has_files(root, "quarantine"):
        return dg.MaterializeResult(metadata={"rows": 0})
    frame = pl.read_parquet(table_glob(root, "quarantine"))
    by_reason = frame.group_by("source", "reason").len().sort("source", "reason")
    return dg.MaterializeResult(
        metadata={
            "rows": frame.height,
            "by_source_and_reason": dg.MetadataValue.md(
                "\n".join(["| source | reason | rows |", "|---|---|---|"] + [f"| {s} | {r} | {n} |" for s, r, n in by_reason.rows()])
            ),
        }
    )


traces_job = dg.define_asset_job("ingest_traces", selection=[traces])

# The run queue dequeues higher `dagster/priority` first; backfill runs carry none (0).
SCHEDULE_PRIORITY = "1"


@dg.schedule(
    job=traces_job,
    cron_schedule="0 1 * * *",
    execution_timezone="UTC",
    description="01:00 UTC: ingest yesterday's exports; the automation sensor (on by default) then scores yesterday "
    "for every enabled evaluator and refreshes the rollups.",
)
def daily_ingest_schedule(context: dg.ScheduleEvaluationContext):
    """Every day at 01:00 UTC: ingest yesterday's exports. Each evaluator's `judge_scores` partition of that
    day then runs through its automation condition (scored as soon as the day's traces are updated)."""
    yesterday = (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
    # Above backfill runs (priority 0) in the run queue: yesterday's data is never stuck behind a backfill.
    return dg.RunRequest(run_key=f"scheduled-{yesterday}", partition_key=yesterday, tags={"dagster/priority": SCHEDULE_PRIORITY})


def _file_states(root) -> dict[str, str]:
    """Every file ingest would read, per day folder (the same function decides it), with mtime and size."""
    states = {}
    base = root / "traces"
    if base.is_dir():
        for day in sorted(p.name for p in base.iterdir() if p.is_dir()):
            for path in list_trace_files(root, day):
                stat = path.stat()
                states[path.relative_to(root).as_posix()] = f"{stat.st_mtime_ns}:{stat.st_size}"
    return states


@dg.sensor(
    job=traces_job,
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.STOPPED,
    description="Re-ingests a day when a file under traces/<day>/ (subfolders too) is added or changed.",
)
def new_trace_files_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    """Notices new or changed export files under `traces/<day>/` and re-ingests those days."""
    states = _file_states(warehouse.root)
    previous = json.loads(context.cursor) if context.cursor else {}
    changed_days = sorted({path.split("/")[1] for path, state in states.items() if previous.get(path) != state})
    valid = set(trace_days.get_partition_keys(current_time=datetime.now(UTC)))
    requests = []
    for day in changed_days:
        if day not in valid:
            context.log.warning(f"traces/{day}/ is not a valid day partition (YYYY-MM-DD, not in the future); ignored")
            continue
        files = {p: s for p, s in states.items() if p.split("/")[1] == day}
        run_key = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
        requests.append(dg.RunRequest(run_key=f"{day}-{run_key}", partition_key=day))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(states))
