"""`judge_scores`: LLM-as-judge verdicts, one partition per evaluator × day; the sensor judging waiting traces."""

from datetime import UTC, datetime

import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import judge_partitions
from eval_platform.defs.range_runs import (
    CheckOutcome,
    fail_if_any,
    partitioned_check,
    results,
    run_partitions,
)
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.judging.completion import WaitingCursor
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.day_numbers import write_day_numbers
from eval_platform.judging.evaluator_day import (
    JudgedPartition,
    PartitionNotReady,
    judge_partition,
)
from eval_platform.judging.increments import judge_in_parts
from eval_platform.judging.traces_judged import (
    RECENT,
    TRACES_JUDGED,
    TRACES_JUDGED_RUN,
    UpdatedCursor,
    updated_while_judged,
)
from eval_platform.markdown_table import markdown_table
from eval_platform.schemas import COMPLETED, JUDGE_SCORE_SCHEMA, PLACEHOLDER_MARK, is_placeholder_model
from eval_platform.settings import DEFAULT_PARTITIONS_PER_RUN
from eval_platform.viewer.links import viewer_day_url

# Score a day when its traces were updated after its scores, never while they are still being written.
# A partition whose judge_scores materialization is newer than its traces' is current and is not judged again,
# also when the sensor sees both updates on one tick (it was off during a backfill of traces and judge_scores,
# or both landed within one tick): Dagster then compares their materialization times, which it knows for
# `any_deps_match(newly_updated())` but not for `any_deps_updated()` (whose reset wins every tie). Forgetting
# the update on the tick after a request (second `since`) means a judging run that failed is not retried by the
# sensor, which would pay the provider again and again: a failure waits for a person or the next traces update.
# Comparing times, it takes a judge run as current also when the day's traces were updated while it ran (after it
# read them): `judge_traces_updated_while_judging_sensor` asks for those (`judging/traces_judged.py`).
_TRACES_UPDATED = dg.AutomationCondition.any_deps_match(dg.AutomationCondition.newly_updated()).with_label(
    "traces updated"
)
SCORE_WHEN_TRACES_UPDATE = (
    _TRACES_UPDATED.since(dg.AutomationCondition.newly_updated())
    & _TRACES_UPDATED.since(dg.AutomationCondition.newly_requested())
    & ~dg.AutomationCondition.any_deps_missing()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("score when its traces are newer than its scores")


# A backfill judges a range of days of one evaluator per run (Dagster cuts a multi-partitioned backfill into ranges
# that hold one dimension fixed, then chunks each range), at most this many partitions per run: each run pays the
# start of a Python process and the code location (seconds), while judging a day costs well under a second when
# the cache answers. Bounded so a failed run or a retry costs a bounded slice, and so a 3-evaluator backfill still
# spreads over the queue's two backfill slots. 1 gives Dagster's default, one run per partition. The code location
# passes EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN's value when it builds the asset (`definitions.py`).
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=DEFAULT_PARTITIONS_PER_RUN)


class JudgeScoresConfig(dg.Config):
    trace_ids: list[str] = Field(
        default_factory=list, description="For evaluators with trigger 'manual': the traces to judge."
    )
    now: str | None = Field(
        None,
        description="The time (ISO 8601, UTC when no offset) at which traces are taken as complete or waiting "
        "(an evaluator's `completion:` quiet periods); default: when the partition is judged. A time past the "
        "partition's `complete_at` judges the traces waiting now.",
    )

    def judged_at(self) -> datetime | None:
        if self.now is None:
            return None
        try:
            at = datetime.fromisoformat(self.now)
        except ValueError:
            raise dg.Failure(f"run config `now`: {self.now!r} is not an ISO 8601 time (2026-11-28T10:00:00Z)") from None
        return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def broken_files_text(kind: str, broken: dict[str, str]) -> str:
    """What the UI shows for config files that did not load: each file with its field and message."""
    if not broken:
        return ""
    lines = [f"\n\nBROKEN {kind} files (not loaded; every other one works). Fix them and reload:"]
    lines += [f"- {name}: {message}" for name, message in sorted(broken.items())]
    return "\n".join(lines)


def build_judge_scores(
    evaluators: dict[str, EvaluatorConfig],
    broken: dict[str, str] | None = None,
    partitions_per_run: int = DEFAULT_PARTITIONS_PER_RUN,
    *,
    days: dg.DailyPartitionsDefinition,
) -> dg.AssetsDefinition:
    # Disabled evaluators are not partitions: neither automated nor offered in the backfill dialog as if live.
    live = sorted(name for name, config in evaluators.items() if config.enabled)
    disabled = sorted(set(evaluators) - set(live))
    partitions = judge_partitions(live, days)
    description = (
        "One row per (evaluator, trace or pair, sample): COMPLETED with score/label/reasoning, FAILED with reason "
        "and raw reply (never a score), or SKIPPED with reason. Re-materializing replaces the partition; identical "
        "judge requests are served from the cache, so an unchanged partition costs nothing. A day of flat trace "
        "files is judged a file at a time: only its new or changed traces, the others' rows kept as they were."
    ) + broken_files_text("evaluator", broken or {})
    if disabled:
        description += (
            "\n\nDisabled evaluators (enabled: false; not partitions until enabled and reloaded): "
            f"{', '.join(disabled)}"
        )

    # One asset; `multi_asset` because its `backfill_policy` is stable API (on `@asset` it is a beta parameter).
    @dg.multi_asset(
        name="judge_scores",
        specs=[
            dg.AssetSpec(
                "judge_scores",
                description=description,
                metadata={"broken_config_files": dg.MetadataValue.json(broken or {})},
                deps=["traces"],
                kinds={"python", "parquet"},
                group_name="judging",
                automation_condition=SCORE_WHEN_TRACES_UPDATE,
            )
        ],
        partitions_def=partitions,
        pool="llm_judge",
        backfill_policy=dg.BackfillPolicy.multi_run(max_partitions_per_run=partitions_per_run),
        check_specs=[
            partitioned_check(
                "every_trace_has_one_status",
                "judge_scores",
                "ERROR when a trace of the partition has no row, or a row is not exactly one of "
                "COMPLETED, FAILED or SKIPPED",
                partitions,
            ),
            partitioned_check(
                "failed_rate_below_threshold",
                "judge_scores",
                "WARN when the partition's FAILED rate passes the evaluator's max_failed_rate",
                partitions,
            ),
            partitioned_check(
                "verdicts_exist",
                "judge_scores",
                "ERROR when the partition has selected traces and no verdict: every one SKIPPED for its "
                "configuration (a key variable not set, a budget spent before the first call) or FAILED (a scale or "
                "schema the judge does not answer in). A green partition has scores.",
                partitions,
            ),
            partitioned_check(
                "score_scale_fits_replies",
                "judge_scores",
                "WARN when the judge's replies do not use the declared score_scale: every raw value in its bottom "
                "tenth, or replies outside it (out_of_range); names the scale and the observed range",
                partitions,
            ),
        ],
    )
    def judge_scores(
        context: dg.AssetExecutionContext,
        config: JudgeScoresConfig,
        warehouse: WarehouseResource,
        judge: JudgeResource,
    ):
        root = warehouse.root
        runtime = judge.runtime(root.path)
        runtime.log = context.log  # a wait for other hosts' budget reservations is told in the run's log
        now = config.judged_at()
        traces_read: dict[str, dict] = {}  # per partition: the traces materialization it judged (traces_judged.py)

        def judge_one(key: str) -> JudgedPartition:
            keys = partitions.get_partition_key_from_str(key).keys_by_dimension
            evaluator, day, named = evaluators[keys["evaluator"]], keys["date"], set(config.trace_ids)
            traces_read[key] = latest_traces(context.instance, day)  # before reading them
            try:
                # a day in parts: only its new or changed traces (judging/increments.py); else the whole day
                judged = judge_in_parts(root, evaluator, day, runtime, named, now=now) or judge_partition(
                    root, evaluator, day, runtime, named, now=now
                )
            except PartitionNotReady as exc:
                raise dg.Failure(str(exc)) from exc
            write_day_numbers(root, evaluator.name, day)  # what the viewer's pages count
            return judged

        # One partition (the automation, the daily path, a manual materialize), or a backfill's range of them (see
        # BACKFILL_POLICY): each judged, the catalog refreshed once. When some fail, the partitions judged are
        # recorded as materialized (their rows are in the warehouse) and the run fails naming the others, so the
        # backfill shows exactly those as failed. Backfilling the failed partitions redoes only them; re-executing
        # the whole run re-judges the others from the judge cache, at no cost.
        run = run_partitions(context, judge_one)
        if run.done:
            refresh(root)
        for key, judged in run.done.items():
            context.log.info(f"{key}: {judged.summary}")
            for model, why in judged.summary.get("unreachable_models", {}).items():
                context.log.warning(f"{key}: {model} was not called, its rows are SKIPPED: {why}")
            if judged.summary.get("traces_waiting_for_completion"):
                context.log.info(
                    f"{key}: {judged.summary['traces_waiting_for_completion']} trace(s) wait for completion (no row "
                    f"yet); the first completes at {judged.summary['complete_at']}, when the partition is judged again"
                )
        in_run = not context.has_partition_key
        metadata = {key: partition_metadata(j, in_run=in_run) | traces_read[key] for key, j in run.done.items()}
        checks = [(check, severity, {key: test(j) for key, j in run.done.items()}) for check, severity, test in CHECKS]
        yield from results(context, run, metadata, checks)
        fail_if_any(run)

    return judge_scores


def latest_traces(instance: dg.DagsterInstance, day: str) -> dict:
    """The metadata naming the latest `traces` materialization of `day` (its storage id and run), none when never
    materialized."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("traces"), asset_partitions=[day]), limit=1
    ).records
    if not records:
        return {}
    return {TRACES_JUDGED: records[0].storage_id, TRACES_JUDGED_RUN: records[0].run_id}


JUDGE_SCORES_TABLE_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn(name, str(dtype)) for name, dtype in JUDGE_SCORE_SCHEMA.items()]
)


PREVIEW_COLUMNS = ["trace_id", "status", "reason", "score", "label", "model", "reasoning"]
REASONING_CHARS = 160  # what a preview cell shows of a judge's reasoning (cut with a mark; the row has all of it)


def preview(rows: pl.DataFrame | None) -> str:
    """The final rows a user needs first (`judging.day.preview_rows`: FAILED, the lowest scores, then the
    skipped) as a Markdown table for the UI: full trace ids, the judge's reasoning (a FAILED row's reason detail),
    and the model marked when its verdict is the local judge's placeholder."""
    shown = []
    for row in (rows if rows is not None else pl.DataFrame()).iter_rows(named=True):
        placeholder = is_placeholder_model(row["model"]) or is_placeholder_model(row["provider_model"])
        shown.append(
            {
                **row,
                "model": f"{row['model']} ({PLACEHOLDER_MARK})" if placeholder else row["model"],
                "reasoning": row["reasoning"] if row["status"] == COMPLETED else row["reason_detail"],
            }
        )
    return markdown_table(shown, PREVIEW_COLUMNS, shorten={"reasoning": REASONING_CHARS}, digits=3)


def partition_metadata(judged: JudgedPartition, in_run: bool = False) -> dict:
    """What the UI shows on one partition's materialization. `in_run`: judged in a run of several partitions; its
    check outcomes are shown here too, beside its own results in the checks tab."""
    summary, tally = judged.summary, judged.tally  # counted as the rows were written: they are not held
    placeholder = (
        f"{tally.placeholder_verdicts} of {tally.verdicts} verdicts: {PLACEHOLDER_MARK}"
        if tally.placeholder_verdicts
        else None
    )
    metadata = {
        "evaluator": judged.evaluator.name,
        # the model that actually answered (e.g. local/mock when the key is missing), not the configured one
        "model": ", ".join(sorted(tally.models)) or "(no call made)",
        "provider_model": ", ".join(sorted(tally.provider_models)) or None,
        "configured_model": judged.evaluator.model_label,
        "failed_rate": dg.MetadataValue.float(round(judged.failed_rate, 4)),
        "config_hash": judged.evaluator.config_hash,
        "traces_in_partition": summary["traces_in_partition"],
        # traces not finished yet (judging.completion): no row, no call; judged again once the first completes
        "traces_waiting_for_completion": summary.get("traces_waiting_for_completion", 0),
        **({"complete_at": summary["complete_at"]} if summary.get("complete_at") else {}),
        "rows": summary["rows"],
        "completed": summary["completed"],
        "failed": summary["failed"],
        "skipped": summary["skipped"],
        "reasons": dg.MetadataValue.json(summary["reasons"]),
        "mean_score": (
            dg.MetadataValue.float(round(summary["mean_score"], 4)) if summary["mean_score"] is not None else None
        ),
        # scores the local judge's placeholder gave: the mean above is no quality judgment (as many as these are)
        **({"placeholder_verdicts": placeholder} if placeholder else {}),
        "cost_usd": dg.MetadataValue.float(round(summary["cost_usd"], 6)),
        "calls": summary["calls"],
        "cache_hits": summary["cache_hits"],
        # judged a part at a time: the rows kept from earlier runs as they were, the parts judged by this one
        **({"rows_kept": summary["rows_kept"]} if "rows_kept" in summary else {}),
        **({"parts_judged": summary["parts_judged"]} if "parts_judged" in summary else {}),
        # batch mode: each batch waited for (id, status, resumed or new, requests, spend)
        **({"batches": dg.MetadataValue.json(summary["batches"])} if "batches" in summary else {}),
        # target session: earlier days of its window whose traces are not materialized (their turns not shown)
        **(
            {"session_days_missing": dg.MetadataValue.json(summary["session_days_missing"])}
            if "session_days_missing" in summary
            else {}
        ),
        # the configured models that could not be called (a key variable not set): why, naming the variable
        **(
            {"unreachable_models": dg.MetadataValue.json(summary["unreachable_models"])}
            if "unreachable_models" in summary
            else {}
        ),
        # its calls waited for budget reservations of other hosts (how much, where, how long, and how it ended)
        **({"budget_wait": dg.MetadataValue.json(summary["budget_wait"])} if "budget_wait" in summary else {}),
        # the rows are written, but the judge-call cache could not keep their replies: a re-run pays again
        **({"cache_write_failed": summary["cache_write_failed"]} if "cache_write_failed" in summary else {}),
        "dagster/row_count": summary["rows"],
        "dagster/column_schema": JUDGE_SCORES_TABLE_SCHEMA,
        "parquet": dg.MetadataValue.path(str(judged.path)),
        "preview": dg.MetadataValue.md(preview(tally.preview)),
    }
    # every verdict of the partition in the results viewer, when its address is configured (viewer/links.py)
    viewer = viewer_day_url(judged.evaluator.name, judged.day)
    if viewer:
        metadata["viewer"] = dg.MetadataValue.url(viewer)
    if in_run:
        metadata["traces_without_a_row"] = judged.traces_without_a_row
        metadata["checks"] = dg.MetadataValue.json(
            {
                "every_trace_has_one_status": "PASSED" if judged.every_trace_has_one_status else "FAILED",
                "failed_rate_below_threshold": "PASSED" if judged.failed_rate_ok else "WARN",
                "verdicts_exist": "PASSED" if judged.verdicts_exist else "FAILED",
                "score_scale_fits_replies": "PASSED" if judged.scale_mismatch is None else "WARN",
            }
        )
    return metadata


def _every_trace_has_one_status(judged: JudgedPartition) -> CheckOutcome:
    """ERROR when a trace judged now has no row; the traces waiting for completion have none yet, and it says so."""
    waiting = judged.summary.get("traces_waiting_for_completion", 0)
    metadata = {"traces_without_a_row": judged.traces_without_a_row, "traces_waiting_for_completion": waiting}
    said = f"{waiting} trace(s) wait for completion: no row until {judged.summary['complete_at']}" if waiting else None
    return CheckOutcome(judged.every_trace_has_one_status, metadata, said)


def _failed_rate_below_threshold(judged: JudgedPartition) -> CheckOutcome:
    return CheckOutcome(
        judged.failed_rate_ok,
        {
            "failed_rate": round(judged.failed_rate, 4),
            "max_failed_rate": judged.evaluator.max_failed_rate,
            "failed": judged.summary["failed"],
            "judged": judged.judged,
        },
    )


def _verdicts_exist(judged: JudgedPartition) -> CheckOutcome:
    """ERROR when the partition has selected traces and no verdict: why, naming the variable to set."""
    return CheckOutcome(
        judged.verdicts_exist,
        {"selected": judged.tally.selected, "verdicts": judged.tally.verdicts},
        None if judged.verdicts_exist else judged.no_verdict_text,
    )


def _score_scale_fits_replies(judged: JudgedPartition) -> CheckOutcome:
    """WARN when the replies do not use the evaluator's score_scale (see `day.scale_mismatch`)."""
    scale = judged.evaluator.score_scale
    low, high = judged.tally.raw_low, judged.tally.raw_high
    return CheckOutcome(
        judged.scale_mismatch is None,
        {
            "score_scale": f"{scale.min:g}..{scale.max:g}" if scale is not None else "(none)",
            "observed_raw_range": f"{low:g}..{high:g}" if low is not None and high is not None else "(no reply)",
            "replies": judged.tally.replies,
        },
        judged.scale_mismatch,
    )


# The checks of judge_scores: each partition's own result (`range_runs.results`).
CHECKS = (
    ("every_trace_has_one_status", dg.AssetCheckSeverity.ERROR, _every_trace_has_one_status),
    ("failed_rate_below_threshold", dg.AssetCheckSeverity.WARN, _failed_rate_below_threshold),
    ("verdicts_exist", dg.AssetCheckSeverity.ERROR, _verdicts_exist),
    ("score_scale_fits_replies", dg.AssetCheckSeverity.WARN, _score_scale_fits_replies),
)


def build_waiting_traces_sensor(judge_scores: dg.AssetsDefinition) -> dg.SensorDefinition:
    """The sensor that judges a partition again once the first of its waiting traces is complete."""
    partitions = judge_scores.partitions_def
    assert partitions is not None

    @dg.sensor(
        name="judge_waiting_traces_sensor",
        target=judge_scores,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Judges a judge_scores partition again once the first of its traces waiting for completion "
        "(its metadata's traces_waiting_for_completion and complete_at: an evaluator's `completion:` quiet periods) "
        "is complete. On by default: turn it off here, or with "
        "`dagster sensor stop judge_waiting_traces_sensor -w workspace.yaml`; waiting traces are then judged when "
        "their day's traces are next updated.",
    )
    def judge_waiting_traces_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = WaitingCursor.load(context.cursor)
        key = dg.AssetKey("judge_scores")
        while True:
            found = context.instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=key, after_storage_id=cursor.seen), limit=500, ascending=True
            )
            for record in found.records:
                cursor.seen = record.storage_id
                materialization = record.asset_materialization
                if record.partition_key is None or materialization is None:
                    continue
                count = materialization.metadata.get("traces_waiting_for_completion")
                first = materialization.metadata.get("complete_at")
                waiting = count.value if count is not None and isinstance(count.value, int) else 0
                cursor.record(record.partition_key, waiting, str(first.value) if first is not None else None)
            if not found.has_more:
                break
        requests = []
        for partition, complete_at in cursor.due(datetime.now(UTC)):
            if not partitions.has_partition_key(partition):  # an evaluator disabled or removed since
                continue
            requests.append(dg.RunRequest(run_key=f"{partition}-complete-at-{complete_at}", partition_key=partition))
        return dg.SensorResult(run_requests=requests, cursor=cursor.dump())

    return judge_waiting_traces_sensor


def build_traces_updated_sensor(judge_scores: dg.AssetsDefinition) -> dg.SensorDefinition:
    """The sensor that judges a partition again when its day's traces were updated during the run that judged it
    (`judging/traces_judged.py`): the update the automation takes as judged."""
    partitions = judge_scores.partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    traces_key, judge_key = dg.AssetKey("traces"), dg.AssetKey("judge_scores")

    @dg.sensor(
        name="judge_traces_updated_while_judging_sensor",
        target=judge_scores,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Judges a judge_scores partition again when its day's traces were ingested while the run that "
        f"judged it was going (its metadata's {TRACES_JUDGED} is older than the day's latest traces "
        "materialization, itself older than the judge run's): the automation takes that run as current. Looks at "
        f"the days whose traces materialized in the last {int(RECENT.total_seconds() // 3600)} hours; never while a "
        "run of the partition is in progress. On by default: turn it off here, or with "
        "`dagster sensor stop judge_traces_updated_while_judging_sensor -w workspace.yaml`; such a file is then "
        "judged when its day's traces are next updated.",
    )
    def judge_traces_updated_while_judging_sensor(context: dg.SensorEvaluationContext) -> dg.SensorResult:
        cursor = UpdatedCursor.load(context.cursor)
        instance = context.instance
        since = (datetime.now(UTC) - RECENT).timestamp()
        latest: dict[str, int] = {}  # day -> its latest traces materialization (storage id)
        page = None
        while True:
            found = instance.fetch_materializations(
                dg.AssetRecordsFilter(asset_key=traces_key, after_timestamp=since), limit=500, cursor=page
            )
            for record in found.records:  # newest first
                if record.partition_key is not None:
                    latest.setdefault(record.partition_key, record.storage_id)
            if not found.has_more:
                break
            page = found.cursor
        evaluators = partitions.get_partitions_def_for_dimension("evaluator").get_partition_keys()
        missed: dict[str, int] = {}
        for day, traces_id in sorted(latest.items()):
            for evaluator in evaluators:
                partition = str(dg.MultiPartitionKey({"date": day, "evaluator": evaluator}))
                if not partitions.has_partition_key(partition):
                    continue
                records = instance.fetch_materializations(
                    dg.AssetRecordsFilter(asset_key=judge_key, asset_partitions=[partition]), limit=1
                ).records
                materialization = records[0].asset_materialization if records else None
                if materialization is None:
                    continue
                judged = materialization.metadata.get(TRACES_JUDGED)
                judged_id = judged.value if judged is not None and isinstance(judged.value, int) else None
                if updated_while_judged(judged_id, traces_id, records[0].storage_id):
                    missed[partition] = traces_id
        status = (instance.get_status_by_partition(judge_key, sorted(missed), partitions) or {}) if missed else {}
        busy = {p for p, state in status.items() if state == dg.AssetPartitionStatus.IN_PROGRESS}
        requests = [
            dg.RunRequest(run_key=f"{partition}-traces-{traces_id}", partition_key=partition)
            for partition, traces_id in cursor.due(missed, busy)
        ]
        return dg.SensorResult(run_requests=requests, cursor=cursor.dump())

    return judge_traces_updated_while_judging_sensor
