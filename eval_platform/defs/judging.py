"""`judge_scores`: LLM-as-judge verdicts, one partition per evaluator × day."""

import os

import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import judge_partitions
from eval_platform.defs.range_runs import fail_if_any, materialize, run_partitions
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.defs.traces import traces
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.evaluator_day import (
    JudgedPartition,
    PartitionNotReady,
    judge_partition,
)
from eval_platform.schemas import JUDGE_SCORE_SCHEMA

# Score a day when its traces were updated after its scores, never while they are still being written.
# A partition whose judge_scores materialization is newer than its traces' is current and is not judged again,
# also when the sensor sees both updates on one tick (it was off during a backfill of traces and judge_scores,
# or both landed within one tick): Dagster then compares their materialization times, which it knows for
# `any_deps_match(newly_updated())` but not for `any_deps_updated()` (whose reset wins every tie). Forgetting
# the update on the tick after a request (second `since`) means a judging run that failed is not retried by the
# sensor, which would pay the provider again and again: a failure waits for a person or the next traces update.
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
# spreads over the queue's two backfill slots. 1 gives Dagster's default, one run per partition.
JUDGE_PARTITIONS_PER_RUN = int(os.environ.get("EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN", "10"))
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=JUDGE_PARTITIONS_PER_RUN)


class JudgeScoresConfig(dg.Config):
    trace_ids: list[str] = Field(
        default_factory=list, description="For evaluators with trigger 'manual': the traces to judge."
    )


def broken_files_text(kind: str, broken: dict[str, str]) -> str:
    """What the UI shows for config files that did not load: each file with its field and message."""
    if not broken:
        return ""
    lines = [f"\n\nBROKEN {kind} files (not loaded; every other one works). Fix them and reload:"]
    lines += [f"- {name}: {message}" for name, message in sorted(broken.items())]
    return "\n".join(lines)


def build_judge_scores(
    evaluators: dict[str, EvaluatorConfig], broken: dict[str, str] | None = None
) -> dg.AssetsDefinition:
    # Disabled evaluators are not partitions: neither automated nor offered in the backfill dialog as if live.
    live = sorted(name for name, config in evaluators.items() if config.enabled)
    disabled = sorted(set(evaluators) - set(live))
    partitions = judge_partitions(live)
    description = (
        "One row per (evaluator, trace or pair, sample): COMPLETED with score/label/reasoning, FAILED with reason "
        "and raw reply (never a score), or SKIPPED with reason. Re-materializing replaces the partition; identical "
        "judge requests are served from the cache, so an unchanged partition costs nothing."
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
                deps=[traces],
                kinds={"python", "parquet"},
                group_name="judging",
                automation_condition=SCORE_WHEN_TRACES_UPDATE,
            )
        ],
        partitions_def=partitions,
        pool="llm_judge",
        backfill_policy=BACKFILL_POLICY,
        check_specs=[
            dg.AssetCheckSpec(
                "every_trace_has_one_status",
                asset="judge_scores",
                description="ERROR when a trace of the partition has no row, or a row is not exactly one of "
                "COMPLETED, FAILED or SKIPPED",
            ),
            dg.AssetCheckSpec(
                "failed_rate_below_threshold",
                asset="judge_scores",
                description="WARN when the partition's FAILED rate passes the evaluator's max_failed_rate",
            ),
            dg.AssetCheckSpec(
                "verdicts_exist",
                asset="judge_scores",
                description="ERROR when the partition has selected traces and no verdict: every one SKIPPED for "
                "its configuration (a key variable not set, a budget spent before the first call) or FAILED (a "
                "scale or schema the judge does not answer in). A green partition has scores.",
            ),
            dg.AssetCheckSpec(
                "score_scale_fits_replies",
                asset="judge_scores",
                description="WARN when the judge's replies do not use the declared score_scale: every raw value "
                "in its bottom tenth, or replies outside it (out_of_range); names the scale and the observed range",
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
        runtime = judge.runtime(root)

        def judge_one(key: str) -> JudgedPartition:
            keys = partitions.get_partition_key_from_str(key).keys_by_dimension
            try:
                return judge_partition(
                    root, evaluators[keys["evaluator"]], keys["date"], runtime, set(config.trace_ids)
                )
            except PartitionNotReady as exc:
                raise dg.Failure(str(exc)) from exc

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
        in_run = not context.has_partition_key
        yield from materialize(context, run, {key: partition_metadata(j, in_run=in_run) for key, j in run.done.items()})
        yield from check_results(list(run.done.values()))
        fail_if_any(run)

    return judge_scores


JUDGE_SCORES_TABLE_SCHEMA = dg.TableSchema(
    columns=[dg.TableColumn(name, str(dtype)) for name, dtype in JUDGE_SCORE_SCHEMA.items()]
)


def preview(rows: pl.DataFrame | None, n: int = 5) -> str:
    """A few final rows as a Markdown table, for the UI."""
    columns = ["trace_id", "status", "reason", "score", "label", "model"]
    shown = rows.filter(pl.col("is_final")).head(n).select(columns) if rows is not None else pl.DataFrame()
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in shown.iter_rows():
        cells = ["" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v)[:40]) for v in row]
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(lines)


def partition_metadata(judged: JudgedPartition, in_run: bool = False) -> dict:
    """What the UI shows on one partition's materialization. `in_run`: judged in a run of several partitions,
    whose check results cover the whole run, so this partition's own check outcomes are shown here too."""
    summary, tally = judged.summary, judged.tally  # counted as the rows were written: they are not held
    metadata = {
        "evaluator": judged.evaluator.name,
        # the model that actually answered (e.g. local/mock when the key is missing), not the configured one
        "model": ", ".join(sorted(tally.models)) or "(no call made)",
        "provider_model": ", ".join(sorted(tally.provider_models)) or None,
        "configured_model": judged.evaluator.model_label,
        "failed_rate": dg.MetadataValue.float(round(judged.failed_rate, 4)),
        "config_hash": judged.evaluator.config_hash,
        "traces_in_partition": summary["traces_in_partition"],
        "rows": summary["rows"],
        "completed": summary["completed"],
        "failed": summary["failed"],
        "skipped": summary["skipped"],
        "reasons": dg.MetadataValue.json(summary["reasons"]),
        "mean_score": (
            dg.MetadataValue.float(round(summary["mean_score"], 4)) if summary["mean_score"] is not None else None
        ),
        "cost_usd": dg.MetadataValue.float(round(summary["cost_usd"], 6)),
        "calls": summary["calls"],
        "cache_hits": summary["cache_hits"],
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
        # the rows are written, but the judge-call cache could not keep their replies: a re-run pays again
        **({"cache_write_failed": summary["cache_write_failed"]} if "cache_write_failed" in summary else {}),
        "dagster/row_count": summary["rows"],
        "dagster/column_schema": JUDGE_SCORES_TABLE_SCHEMA,
        "parquet": dg.MetadataValue.path(str(judged.path)),
        "preview": dg.MetadataValue.md(preview(tally.preview)),
    }
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


def check_results(judged: list[JudgedPartition]) -> list[dg.AssetCheckResult]:
    """The checks of a run. Dagster 1.13 records one result per check per run (AssetCheckResult has no
    partition), so a run of several partitions passes a check only if every partition does, and names those
    that do not; each partition's own outcome is in its materialization's `checks` metadata."""
    if not judged:
        return []
    if len(judged) == 1:
        [one] = judged
        summary = one.summary
        return [
            dg.AssetCheckResult(
                check_name="every_trace_has_one_status",
                passed=one.every_trace_has_one_status,
                severity=dg.AssetCheckSeverity.ERROR,
                metadata={"traces_without_a_row": one.traces_without_a_row},
            ),
            dg.AssetCheckResult(
                check_name="failed_rate_below_threshold",
                passed=one.failed_rate_ok,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={
                    "failed_rate": round(one.failed_rate, 4),
                    "max_failed_rate": one.evaluator.max_failed_rate,
                    "failed": summary["failed"],
                    "judged": one.judged,
                },
            ),
            verdicts_check([one]),
            scale_check([one]),
        ]
    name = partition_name
    without_status = sorted(name(p) for p in judged if not p.every_trace_has_one_status)
    above = {name(p): round(p.failed_rate, 4) for p in judged if not p.failed_rate_ok}
    failed, total = sum(p.summary["failed"] for p in judged), sum(p.judged for p in judged)
    return [
        dg.AssetCheckResult(
            check_name="every_trace_has_one_status",
            passed=not without_status,
            severity=dg.AssetCheckSeverity.ERROR,
            metadata={
                "partitions": len(judged),
                "traces_without_a_row": sum(p.traces_without_a_row for p in judged),
                "failing_partitions": without_status,
            },
        ),
        dg.AssetCheckResult(
            check_name="failed_rate_below_threshold",
            passed=not above,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "partitions": len(judged),
                "partitions_above_threshold": dg.MetadataValue.json(above),
                "worst_failed_rate": round(max(p.failed_rate for p in judged), 4),
                "failed": failed,
                "judged": total,
            },
        ),
        verdicts_check(judged),
        scale_check(judged),
    ]


def verdicts_check(judged: list[JudgedPartition]) -> dg.AssetCheckResult:
    """ERROR unless every partition of the run with selected traces has a verdict; each failing one named, with
    its reasons and the variable to set."""
    failing = {partition_name(p): p.no_verdict_text for p in judged if not p.verdicts_exist}
    return dg.AssetCheckResult(
        check_name="verdicts_exist",
        passed=not failing,
        severity=dg.AssetCheckSeverity.ERROR,
        description="; ".join(f"{name}: {text}" for name, text in failing.items()) or None,
        metadata={
            "selected": sum(p.tally.selected for p in judged),
            "verdicts": sum(p.tally.verdicts for p in judged),
            "partitions_without_a_verdict": dg.MetadataValue.json(failing),
        },
    )


def scale_check(judged: list[JudgedPartition]) -> dg.AssetCheckResult:
    """WARN when a partition's replies do not use its evaluator's score_scale (see `day.scale_mismatch`)."""
    mismatched = {partition_name(p): text for p in judged if (text := p.scale_mismatch) is not None}
    scales = {f"{s.min:g}..{s.max:g}" for p in judged if (s := p.evaluator.score_scale) is not None}
    lows = [p.tally.raw_low for p in judged if p.tally.raw_low is not None]
    highs = [p.tally.raw_high for p in judged if p.tally.raw_high is not None]
    return dg.AssetCheckResult(
        check_name="score_scale_fits_replies",
        passed=not mismatched,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(f"{name}: {text}" for name, text in mismatched.items()) or None,
        metadata={
            "score_scale": ", ".join(sorted(scales)) or "(none)",
            "observed_raw_range": f"{min(lows):g}..{max(highs):g}" if lows else "(no reply)",
            "replies": sum(p.tally.replies for p in judged),
            "partitions_mismatched": dg.MetadataValue.json(mismatched),
        },
    )


def partition_name(judged: JudgedPartition) -> str:
    return f"{judged.day}|{judged.evaluator.name}"
