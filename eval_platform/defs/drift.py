"""`judge_drift`: evaluators' anchor items judged again and compared with the previous check (`agreement.drift`), with
its WARN check, a schedule per anchored evaluator and a sensor that asks for a check when an evaluator's config hash
or its provider-reported model changes."""

from dataclasses import dataclass, field

import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.agreement.drift import check_anchors, needs_check
from eval_platform.defs.catalog import refresh
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.markdown_table import markdown_table
from eval_platform.schemas import COMPLETED, JUDGE_DRIFT_SCHEMA, empty_frame
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import partition_files, read_partition, scan_parquet, write_partition

SHOWN = ["evaluator", "trigger", "n_paired", "agreement", "mean_shift", "shift_ci_low", "shift_ci_high", "p_value"]


class JudgeDriftConfig(dg.Config):
    evaluators: list[str] = Field(
        default_factory=list, description="Evaluators whose anchors to check; empty: every evaluator with anchors."
    )
    scheduled: bool = Field(False, description="Set by the schedules: the check's trigger is `schedule`.")


def history(root: DataRoot, name: str) -> pl.DataFrame:
    """An evaluator's `judge_drift` rows (every check so far)."""
    frame = read_partition(root, "judge_drift", {"evaluator": name})
    return empty_frame(JUDGE_DRIFT_SCHEMA) if frame is None else frame


def reported_model(root: DataRoot, name: str) -> str | None:
    """The model the provider reported on the evaluator's most recent completed verdict in judge_scores."""
    files = partition_files(root, "judge_scores", "evaluator")
    if name not in files:
        return None
    latest = (
        scan_parquet(root, files[name], hive_partitioning=False)
        .filter((pl.col("status") == COMPLETED) & pl.col("provider_model").is_not_null())
        .sort("judged_at")
        .select(pl.col("provider_model").last())
        .collect()
    )
    return latest.item() if latest.height else None


@dataclass(frozen=True)
class DriftDefinitions:
    """What judge drift adds to the definitions: nothing unless an evaluator declares anchors."""

    assets: list = field(default_factory=list)
    jobs: list = field(default_factory=list)
    schedules: list = field(default_factory=list)
    sensors: list = field(default_factory=list)


def build_judge_drift(evaluators: dict[str, EvaluatorConfig], judge_scores: dg.AssetsDefinition) -> DriftDefinitions:
    """The asset, its job, one schedule per anchored evaluator and the change sensor."""
    anchored = {name: config for name, config in sorted(evaluators.items()) if config.anchors is not None}
    if not anchored:
        return DriftDefinitions()

    @dg.asset(
        deps=[judge_scores],
        kinds={"polars", "parquet"},
        group_name="monitoring",
        check_specs=[
            dg.AssetCheckSpec(
                "no_judge_drift",
                asset="judge_drift",
                description="WARN when an evaluator's anchors, judged again, shifted significantly (paired t-test at "
                "the anchors' alpha) from its previous check.",
            )
        ],
    )
    def judge_drift(
        context: dg.AssetExecutionContext, config: JudgeDriftConfig, warehouse: WarehouseResource, judge: JudgeResource
    ):
        """Judges each anchored evaluator's anchor items (never from the reply cache; spend counts in its budget)
        and compares them with its previous check: agreement, the mean shift with its paired interval, and
        whether it is significant. One row per check. View `judge_drift` (and `anchor_verdicts`)."""
        root = warehouse.root
        unknown = sorted(set(config.evaluators) - set(anchored))
        if unknown:
            raise dg.Failure(f"no anchors declared by evaluator(s) {unknown}; anchored: {sorted(anchored)}")
        runtime = judge.runtime(root.path)
        rows = []
        for name in config.evaluators or list(anchored):
            past = history(root, name)
            previous = None
            if past.height:
                last = past.sort("checked_at").row(-1, named=True)
                previous = read_partition(root, "anchor_verdicts", {"evaluator": name, "check_id": last["check_id"]})
            row, verdicts = check_anchors(
                root.path, anchored[name], runtime, past, previous, scheduled=config.scheduled
            )
            write_partition(root, "anchor_verdicts", {"evaluator": name, "check_id": row["check_id"][0]}, verdicts)
            write_partition(root, "judge_drift", {"evaluator": name}, pl.concat([past, row]))
            rows.append(row)
            found = row.row(0, named=True)
            if found["significant"]:
                context.log.warning(
                    f"{name}: anchors shifted {found['mean_shift']:+.3f} "
                    f"[{found['shift_ci_low']:+.3f}, {found['shift_ci_high']:+.3f}] since check "
                    f"{found['previous_check_id']} (p={found['p_value']:.3g}, {found['trigger']})"
                )
        refresh(root)
        checks = pl.concat(rows)
        drifted = checks.filter(pl.col("significant").fill_null(False))
        yield dg.MaterializeResult(
            metadata={
                "checked": dg.MetadataValue.json(checks["evaluator"].to_list()),
                "drifted": dg.MetadataValue.json(drifted["evaluator"].to_list()),
                "dagster/row_count": checks.height,
            }
        )
        yield dg.AssetCheckResult(
            check_name="no_judge_drift",
            passed=drifted.is_empty(),
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"checks": dg.MetadataValue.md(markdown_table(checks, SHOWN))},
        )

    job = dg.define_asset_job("judge_drift_check", selection=[judge_drift])
    schedules = [
        dg.ScheduleDefinition(
            name=f"judge_drift_{name}",
            job=job,
            cron_schedule=anchors.schedule,
            execution_timezone="UTC",
            run_config={"ops": {"judge_drift": {"config": {"evaluators": [name], "scheduled": True}}}},
            description=f"Judge {name}'s anchors again and compare with its previous check (judge drift).",
        )
        for name, config in anchored.items()
        if (anchors := config.anchors) is not None  # all of them: `anchored` holds those that declare anchors
    ]

    @dg.sensor(
        job=job,
        minimum_interval_seconds=300,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Checks an evaluator's anchors when its config hash, or the model its provider reports in "
        "judge_scores, differs from its last anchor check's (and once, when it has never been checked).",
    )
    def judge_drift_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
        requests = []
        for name, config in anchored.items():
            model = reported_model(warehouse.root, name)
            reason = needs_check(config, history(warehouse.root, name), model)
            if reason is not None:
                requests.append(
                    dg.RunRequest(
                        run_key=f"{name}:{config.config_hash}:{model}",
                        run_config={"ops": {"judge_drift": {"config": {"evaluators": [name]}}}},
                        tags={"judge_drift/reason": reason},
                    )
                )
        return dg.SensorResult(run_requests=requests)

    return DriftDefinitions([judge_drift], [job], schedules, [judge_drift_sensor])
