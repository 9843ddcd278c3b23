"""Trace ingest: the daily `traces` asset, the `quarantine` rollup, the new-files sensor and the daily schedule."""

import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import dagster as dg

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import not_a_trace_day, trace_days
from eval_platform.defs.range_runs import (
    CheckOutcome,
    check_results,
    fail_if_any,
    materialize,
    partitioned_check,
    run_partitions,
)
from eval_platform.defs.resources import WarehouseResource
from eval_platform.ingest.traces import (
    NOT_A_DAY_PARTITION,
    SOURCE,
    StrayEntry,
    is_day_name,
    list_trace_files,
    settled,
    stray_entries,
    stray_quarantine,
    stream_trace_day,
)
from eval_platform.schemas import NOT_A_DAY_FOLDER, QUARANTINE_SCHEMA, SPAN_SCHEMA, TRACE_SCHEMA
from eval_platform.settings import DEFAULT_PARTITIONS_PER_RUN
from eval_platform.storage.warehouse import (
    has_files,
    partition_writer,
    quarantine_keys,
    read_parquet,
    read_partition,
    table_glob,
    write_partition,
)

# A backfill ingests a range of days per run, at most this many: each run pays the start of a Python process and the
# code location (seconds), while ingesting a day of exports takes well under a second. Bounded so that a failed run
# costs a bounded slice. 1 gives Dagster's default, one run per day. The code location applies
# EVAL_PLATFORM_TRACE_DAYS_PER_RUN's value when it is built (`definitions.py`: `traces.with_attributes`).
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=DEFAULT_PARTITIONS_PER_RUN)


@dataclass(frozen=True)
class IngestedDay:
    day: str
    traces: int
    spans: int
    quarantined: int
    reasons: dict[str, int]
    files: list[str]

    @property
    def empty(self) -> bool:
        return self.traces == 0

    def metadata(self) -> dict:
        return {
            "traces": self.traces,
            "spans": self.spans,
            "quarantined": self.quarantined,
            "quarantine_reasons": dg.MetadataValue.json(self.reasons),
            "files": dg.MetadataValue.json(self.files),
            "empty_day": self.empty,
            "dagster/row_count": self.traces,
        }


def ingest_day(root, day: str, log) -> IngestedDay:
    """Read one day's export files and write its traces, spans and quarantine partitions (replacing earlier ones),
    in bounded memory: the day is streamed (`stream_trace_day`) into streaming partition writers, a frame at a time.
    Each partition is replaced whole only once all its rows are written (a failure or a kill leaves the previous)."""
    previous, following = (str(date.fromisoformat(day) + timedelta(days=step)) for step in (-1, 1))
    taken = _trace_ids(root, following)  # the next day's traces took their spans still waiting for a root here
    with stream_trace_day(root, day) as rows:
        written = {}
        for table, frames, keys, schema in (
            ("spans", rows.spans(), {"date": day}, SPAN_SCHEMA),
            ("traces", rows.traces(), {"date": day}, TRACE_SCHEMA),
            ("quarantine", rows.quarantine(), quarantine_keys(SOURCE, day), QUARANTINE_SCHEMA),
        ):
            reasons: dict[str, int] = {}
            with partition_writer(root, table, keys, schema) as out:
                for frame in frames:
                    if table == "quarantine":
                        frame = settled(frame, taken)
                    out.write(frame)
                    if table == "quarantine":
                        for reason, n in frame.group_by("reason").len().rows():
                            reasons[reason] = reasons.get(reason, 0) + n
            written[table] = out.rows
        files = list(rows.files)
    resolved = settle_previous_day(root, previous, _trace_ids(root, day))
    if resolved:
        log.info(f"{resolved} awaiting_root rows of {previous} left the quarantine: {day}'s traces took them")
    strays = stray_entries(root)
    write_strays(root, strays)
    reasons = dict(sorted(reasons.items()))
    if written["quarantine"]:
        log.warning(f"{written['quarantine']} rows of {day} quarantined: {reasons}")
    for stray in strays:
        log.warning(f"{stray.detail} (in quarantine: {NOT_A_DAY_FOLDER})")
    if written["traces"] == 0:
        misnamed = "".join(f"; not read: {s.file}, which reads as this day" for s in strays if s.day == day)
        log.warning(f"traces/{day}/ has {len(files)} file(s) and no valid trace: an empty day{misnamed}")
    return IngestedDay(day, written["traces"], written["spans"], written["quarantine"], reasons, files)


def _trace_ids(root, day: str):
    found = read_partition(root, "traces", {"date": day}, columns=["trace_id"])
    return None if found is None else found["trace_id"]


def settle_previous_day(root, previous: str, taken) -> int:
    """Take out of the previous day's quarantine its `awaiting_root` rows whose trace the day's ingest took (whole,
    or partial with `missing_root`): the rows that `settled` leaves out when the previous day is ingested again.
    Returns how many left."""
    keys = quarantine_keys(SOURCE, previous)
    before = read_partition(root, "quarantine", keys) if taken is not None else None
    if before is None:
        return 0
    after = settled(before, taken)
    if after.height != before.height:
        write_partition(root, "quarantine", keys, after)
    return before.height - after.height


def write_strays(root, strays: list[StrayEntry]) -> None:
    """What under traces/ no day reads, in its own quarantine partition, replaced whole by every day's ingest: one
    row per entry however many days are ingested (or re-ingested), gone once the entry is fixed."""
    keys = quarantine_keys(SOURCE, NOT_A_DAY_PARTITION)
    if strays or read_partition(root, "quarantine", keys, columns=["file"]) is not None:
        write_partition(root, "quarantine", keys, stray_quarantine(strays))


def day_check(day: IngestedDay) -> CheckOutcome:
    """`day_has_traces` for one day (each day of a run has its own result)."""
    return CheckOutcome(
        passed=not day.empty,
        metadata={"files": len(day.files), "traces": day.traces},
        description=None if not day.empty else f"traces/{day.day}/: {len(day.files)} file(s), no valid trace",
    )


# One asset; `multi_asset` because its `backfill_policy` is stable API (on `@asset` it is a beta parameter).
@dg.multi_asset(
    name="traces",
    specs=[
        dg.AssetSpec(
            "traces",
            kinds={"python", "parquet"},
            group_name="ingest",
            description="Normalized traces of one UTC day, from every export file in `traces/<day>/` "
            "(JSONL, JSON, CSV, Parquet, OTLP/JSON spans of the GenAI, OpenLLMetry, OpenInference and Langfuse "
            "conventions, whole traces across lines and files), and their spans in the `spans` table. Rejected "
            "rows go to `quarantine` with file, line and reason.",
        )
    ],
    partitions_def=trace_days,
    backfill_policy=BACKFILL_POLICY,
    check_specs=[
        partitioned_check("day_has_traces", "traces", "WARN: a day with no trace files or no valid trace", trace_days)
    ],
)
def traces(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
    """Normalized traces of one UTC day (a backfill run: of each day of its range), from every export file in
    `traces/<day>/`. Rejected rows go to `quarantine` with file, line and reason."""
    root = warehouse.root
    # One day (the schedule, the sensor, a manual materialize), or a backfill's range of days (see BACKFILL_POLICY):
    # each ingested, the catalog refreshed once; a day that fails fails the run by name, the others materialized.
    run = run_partitions(context, lambda key: ingest_day(root, key, context.log))
    if run.done:
        refresh(root)
    yield from materialize(context, run, {key: day.metadata() for key, day in run.done.items()})
    outcomes = {key: day_check(day) for key, day in run.done.items()}
    yield from check_results(context, "day_has_traces", dg.AssetCheckSeverity.WARN, outcomes)
    fail_if_any(run, "days")


@dg.asset(deps=[traces], kinds={"duckdb"}, group_name="ingest")
def quarantine(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
    """Every rejected input row (file, line, reason, raw text) across all sources and partitions.
    Fix the file and re-materialize its partition: the partition's quarantine rows are replaced."""
    root = warehouse.root
    refresh(root)
    if not has_files(root, "quarantine"):
        return dg.MaterializeResult(metadata={"rows": 0})
    frame = read_parquet(root, table_glob(root, "quarantine"))
    by_reason = frame.group_by("source", "reason").len().sort("source", "reason")
    return dg.MaterializeResult(
        metadata={
            "rows": frame.height,
            "by_source_and_reason": dg.MetadataValue.md(
                "\n".join(
                    ["| source | reason | rows |", "|---|---|---|"]
                    + [f"| {s} | {r} | {n} |" for s, r, n in by_reason.rows()]
                )
            ),
        }
    )


traces_job = dg.define_asset_job("ingest_traces", selection=[traces])

# The run queue dequeues higher `dagster/priority` first; backfill runs carry none (0).
SCHEDULE_PRIORITY = "1"


# Off until someone turns it on: with a provider key exported, a daemon started only to look at the UI would
# otherwise judge (and pay for) yesterday for every enabled evaluator each night (README, "Open the UI").
@dg.schedule(
    job=traces_job,
    cron_schedule="0 1 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="01:00 UTC: ingest yesterday's exports; the automation sensor (on by default) then scores yesterday "
    "for every enabled evaluator and refreshes the rollups. Ships stopped: turn it on here, or with "
    "`dagster schedule start daily_ingest_schedule -w workspace.yaml`; the daemon runs it.",
)
def daily_ingest_schedule(context: dg.ScheduleEvaluationContext):
    """Every day at 01:00 UTC: ingest yesterday's exports. Each evaluator's `judge_scores` partition of that
    day then runs through its automation condition (scored as soon as the day's traces are updated)."""
    yesterday = (context.scheduled_execution_time.astimezone(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")
    # Above backfill runs (priority 0) in the run queue: yesterday's data is never stuck behind a backfill.
    return dg.RunRequest(
        run_key=f"scheduled-{yesterday}", partition_key=yesterday, tags={"dagster/priority": SCHEDULE_PRIORITY}
    )


def _previous_day(day: str) -> str:
    try:
        return (datetime.strptime(day, "%Y-%m-%d") - timedelta(days=1)).strftime("%Y-%m-%d")
    except ValueError:
        return day


def _next_day(day: str) -> str:
    try:
        return (datetime.strptime(day, "%Y-%m-%d") + timedelta(days=1)).strftime("%Y-%m-%d")
    except ValueError:
        return day


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
    description="Re-ingests a day when a file under traces/<day>/ (subfolders too) is added or changed, and the "
    "next day when its folder exists (its ingest reads this day for the spans of traces over midnight).",
)
def new_trace_files_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    """Notices new or changed export files under `traces/<day>/` and re-ingests those days."""
    states = _file_states(warehouse.root)
    previous = json.loads(context.cursor) if context.cursor else {}
    changed = {path.split("/")[1] for path, state in states.items() if previous.get(path) != state}
    # the ingest of a day also reads the day before (spans of its traces that started before midnight)
    changed_days = sorted(
        changed | {_next_day(day) for day in changed if (warehouse.root / "traces" / _next_day(day)).is_dir()}
    )
    now = datetime.now(UTC)
    requests = []
    for day in changed_days:
        why = not_a_trace_day(day, now)
        if why is not None:
            named = "" if is_day_name(day) else f"; the next ingest names it in quarantine ({NOT_A_DAY_FOLDER})"
            context.log.warning(f"traces/{day}/ is not ingested: {why}{named}")
            continue
        files = {p: s for p, s in states.items() if p.split("/")[1] in (day, _previous_day(day))}
        run_key = hashlib.sha256(json.dumps(files, sort_keys=True).encode()).hexdigest()[:16]
        requests.append(dg.RunRequest(run_key=f"{day}-{run_key}", partition_key=day))
    return dg.SensorResult(run_requests=requests, cursor=json.dumps(states))
