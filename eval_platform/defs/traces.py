"""Trace ingest: the daily `traces` asset, the `quarantine` rollup, the new-files sensor and the daily schedule."""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import dagster as dg

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import not_a_trace_day
from eval_platform.defs.range_runs import (
    CheckOutcome,
    fail_if_any,
    partitioned_check,
    results,
    run_partitions,
)
from eval_platform.defs.resources import WarehouseResource
from eval_platform.ingest.arrivals import ArrivalCursor, scan_day_folders
from eval_platform.ingest.increments import PartsIngest, ingest_in_parts
from eval_platform.ingest.otlp_increments import day_next_day_spans, day_spans, ingest_otlp_in_parts
from eval_platform.ingest.traces import (
    NOT_A_DAY_PARTITION,
    SOURCE,
    StrayEntry,
    is_day_name,
    stray_entries,
    stray_quarantine,
)
from eval_platform.markdown_table import markdown_table
from eval_platform.schemas import NOT_A_DAY_FOLDER
from eval_platform.settings import DEFAULT_PARTITIONS_PER_RUN, file_settle_s
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    has_files,
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
    # the digest of the day's spans still waiting for a root, which the next day's ingest takes when their root is
    # there ("" when none): the new-files sensor re-ingests the next day only when it changed
    next_day_spans: str = ""
    # the files this run read: a day of flat files reads only its new or changed ones (`ingest/increments.py`)
    read: list[str] | None = None

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
            "next_day_spans": self.next_day_spans,
            "files_read": dg.MetadataValue.json(self.files if self.read is None else self.read),
            "dagster/row_count": self.traces,
        }


def ingest_day(root: DataRoot, day: str, log) -> IngestedDay:
    """Read one day's export files and write its traces and quarantine partitions (an OTLP trace's spans are stored
    in its row, where the `spans` view reads them), a file at a time: each file's rows are a part of the partition.
    A day of flat files reads only its new or changed files (`ingest/increments.py`); a day with OTLP files
    re-assembles only the traces its new or changed files touch (`ingest/otlp_increments.py`)."""
    in_parts = ingest_in_parts(root, day)
    if in_parts is not None:
        return _ingested_in_parts(root, day, in_parts, log)
    found = ingest_otlp_in_parts(root, day)
    return _ingested_in_parts(root, day, found, log, day_spans(root, day), day_next_day_spans(root, day))


def _ingested_in_parts(
    root: DataRoot, day: str, found: PartsIngest, log, spans: int = 0, next_day: str = ""
) -> IngestedDay:
    """`ingest_day`'s report of a day ingested in parts: the whole day's counts, the files this run read."""
    strays = stray_entries(root.path)
    write_strays(root, strays)
    how = "every file (the day read whole)" if found.whole_day else f"{len(found.read)} new or changed file(s)"
    log.info(f"{day}: read {how} of {len(found.files)}; {len(found.removed)} gone file(s) removed")
    if found.quarantined:
        log.warning(f"{found.quarantined} rows of {day} quarantined: {found.reasons}")
    for file in found.waiting:
        log.info(
            f"{file} is still being written: its cut end is not read yet (the day is ingested again once it settles)"
        )
    for stray in strays:
        log.warning(f"{stray.detail} (in quarantine: {NOT_A_DAY_FOLDER})")
    if found.traces == 0:
        misnamed = "".join(f"; not read: {s.file}, which reads as this day" for s in strays if s.day == day)
        log.warning(f"traces/{day}/ has {len(found.files)} file(s) and no valid trace: an empty day{misnamed}")
    return IngestedDay(day, found.traces, spans, found.quarantined, found.reasons, found.files, next_day, found.read)


def write_strays(root: DataRoot, strays: list[StrayEntry]) -> None:
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
def build_traces(days: dg.DailyPartitionsDefinition) -> dg.AssetsDefinition:
    """The `traces` asset over the day partitions `days` (`partitions.trace_days`, built with the definitions)."""

    @dg.multi_asset(
        name="traces",
        specs=[
            dg.AssetSpec(
                "traces",
                kinds={"python", "parquet"},
                group_name="ingest",
                description="Normalized traces of one UTC day, from every export file in `traces/<day>/` "
                "(JSONL, JSON, CSV, Parquet, OTLP/JSON spans of the GenAI, OpenLLMetry, OpenInference and Langfuse "
                "conventions, whole traces across lines and files); an OTLP trace's spans are stored in its row "
                "(`traces.spans`), which the `spans` view shows one row per span. Rejected "
                "rows go to `quarantine` with file, line and reason.",
            )
        ],
        partitions_def=days,
        backfill_policy=BACKFILL_POLICY,
        check_specs=[
            partitioned_check("day_has_traces", "traces", "WARN: a day with no trace files or no valid trace", days)
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
        outcomes = {key: day_check(day) for key, day in run.done.items()}
        checks = [("day_has_traces", dg.AssetCheckSeverity.WARN, outcomes)]
        yield from results(context, run, {key: day.metadata() for key, day in run.done.items()}, checks)
        fail_if_any(run, "days")

    return traces


@dg.asset(deps=["traces"], kinds={"duckdb"}, group_name="ingest")
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
            "by_source_and_reason": dg.MetadataValue.md(markdown_table(by_reason.rename({"len": "rows"}))),
        }
    )


traces_job = dg.define_asset_job("ingest_traces", selection=["traces"])

# The run queue dequeues higher `dagster/priority` first; backfill runs carry none (0).
SCHEDULE_PRIORITY = "1"


# Off until someone turns it on: the new-files sensor (on) already ingested yesterday as its files arrived, so a
# nightly re-ingest would change nothing and cost runs (docs/ui.md, Automation). Turn it on where files reach the
# folders without that sensor running.
@dg.schedule(
    job=traces_job,
    cron_schedule="0 1 * * *",
    execution_timezone="UTC",
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="01:00 UTC: ingest yesterday's exports; the automation sensor (on by default) then scores yesterday "
    "for every enabled evaluator and refreshes the rollups. Ships stopped, since new_trace_files_sensor (on by "
    "default) ingests files as they arrive: turn it on here, or with "
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


def _next_day(day: str) -> str:
    return (datetime.strptime(day, "%Y-%m-%d") + timedelta(days=1)).strftime("%Y-%m-%d")


def build_new_trace_files_sensor(days: dg.DailyPartitionsDefinition) -> dg.SensorDefinition:
    """`new_trace_files_sensor` over the day partitions `days` (`partitions.trace_days`, built with the definitions):
    which folders are days it may request is decided by the start date the definitions were built with, never by
    EVAL_PLATFORM_START_DATE as it is when the sensor ticks."""

    @dg.sensor(
        job=traces_job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Ingests a day (today's included) when a file under traces/<day>/ (subfolders too) is added, "
        "changed or removed, once its size and time have stayed the same for EVAL_PLATFORM_FILE_SETTLE_S seconds "
        "(default 30; `.tmp`, `.partial` and `.part` files are not read until renamed). The next day is ingested "
        "again only when the spans this day leaves waiting for a root changed. On by default: turn it off here, or "
        "with `dagster sensor stop new_trace_files_sensor -w workspace.yaml`.",
    )
    def new_trace_files_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
        """Notices new or changed export files under `traces/<day>/` and ingests those days (the automation sensor
        then judges them); on its first tick, folders before yesterday are taken as they are (see docs/traces.md)."""
        now = datetime.now(UTC)
        settle = file_settle_s()
        cursor = ArrivalCursor.load(context.cursor)
        folders = scan_day_folders(warehouse.root.path, now.timestamp(), settle)
        today, yesterday = now.date().isoformat(), (now - timedelta(days=1)).date().isoformat()
        requests: dict[str, dg.RunRequest] = {}
        waiting: list[str] = []
        kept_as_they_are: list[str] = []
        for name, folder in folders.items():
            waiting += folder.waiting
            if folder.digest is None or folder.digest == cursor.days.get(name):
                continue
            why = not_a_trace_day(name, days, now)
            if why is not None and is_day_name(name) and name > today:  # a partition once the UTC clock reaches it
                if cursor.early.get(name) != folder.digest:
                    context.log.warning(f"traces/{name}/ is not ingested yet: {why}; it will be then")
                cursor.early[name] = folder.digest
                continue
            cursor.early.pop(name, None)
            cursor.days[name] = folder.digest
            if why is not None:
                named = "" if is_day_name(name) else f"; the next ingest names it in quarantine ({NOT_A_DAY_FOLDER})"
                context.log.warning(f"traces/{name}/ is not ingested: {why}{named}")
            elif cursor.fresh and name < yesterday:
                kept_as_they_are.append(name)
            else:
                requests[name] = dg.RunRequest(run_key=f"{name}-{folder.digest}", partition_key=name)
        for gone in set(cursor.days) - set(folders):
            del cursor.days[gone]
        if waiting:
            shown = ", ".join(waiting[:5]) + (f" and {len(waiting) - 5} more" if len(waiting) > 5 else "")
            context.log.info(f"{len(waiting)} file(s) changed in the last {settle:g} s, read once settled: {shown}")
        if kept_as_they_are:
            context.log.info(
                f"first tick: {len(kept_as_they_are)} day folder(s) before {yesterday} taken as they are, not "
                f"ingested ({kept_as_they_are[0]} .. {kept_as_they_are[-1]}); judge them with a backfill or "
                "`eval-platform judge --day`; a file added or changed in them from now on is ingested as usual"
            )
        for day, request in _next_days_to_ingest(context.instance, cursor, days, now).items():
            requests.setdefault(day, request)
        cursor.fresh = False
        return dg.SensorResult(run_requests=list(requests.values()), cursor=cursor.dump())

    return new_trace_files_sensor


def _next_days_to_ingest(
    instance: dg.DagsterInstance, cursor: ArrivalCursor, days: dg.DailyPartitionsDefinition, now: datetime
) -> dict[str, dg.RunRequest]:
    """The days to ingest again because the day before handed them other spans: for each `traces` materialization
    since the cursor's, whose `next_day_spans` differ from the day's previous ones, the next day, when it was
    ingested before that materialization (one ingested later read the day as it is now; one never ingested is
    requested for its own files)."""
    key = dg.AssetKey("traces")
    if cursor.seen is None:  # the first tick: what was ingested before is the starting point
        latest = instance.fetch_materializations(dg.AssetRecordsFilter(asset_key=key), limit=1).records
        cursor.seen = latest[0].storage_id if latest else 0
        return {}
    requests: dict[str, dg.RunRequest] = {}
    while True:
        found = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=key, after_storage_id=cursor.seen), limit=500, ascending=True
        )
        for record in found.records:
            cursor.seen = record.storage_id
            day = record.partition_key
            materialization = record.asset_materialization
            if day is None or materialization is None:
                continue
            value = materialization.metadata.get("next_day_spans")
            handed = str(value.value) if value is not None else ""
            before = cursor.handed.pop(day, "")
            if handed:
                cursor.handed[day] = handed
            following = _next_day(day)
            if handed == before or not_a_trace_day(following, days, now) is not None:
                continue
            last = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, asset_partitions=[following]), limit=1
            ).records
            if last and last[0].storage_id < record.storage_id:
                requests[following] = dg.RunRequest(
                    run_key=f"{following}-after-{day}-{record.storage_id}",
                    partition_key=following,
                    tags={"eval_platform/spans_from": day},
                )
        if not found.has_more:
            return requests
