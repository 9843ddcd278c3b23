"""The `verdict_exports` asset: each judge_scores partition's final verdicts sent to the destinations of
verdict_export.yaml (logic in `eval_platform.export`). Off by default: without the file the asset is never
requested and a run of it fails saying how to turn it on."""

import os
from pathlib import Path

import dagster as dg

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.export.config import EXPORT_FILE, ExportConfig, ExportConfigError, load_export_config
from eval_platform.export.retry import failed_partitions
from eval_platform.export.run import export_partition
from eval_platform.export.verdicts import NoScores

VERDICT_EXPORTS_DOC = (
    f"Each final COMPLETED verdict of the judge_scores partition sent to the destinations of `{EXPORT_FILE}` under "
    "the data root: OpenTelemetry GenAI evaluation events (`gen_ai.evaluation.result`) over OTLP/HTTP, and Arize "
    "Phoenix span annotations, each on the app's own judged span. Once per verdict and destination: the ledger "
    "table `verdict_exports` records what was sent, so a re-run sends only what is missing. A refused send fails "
    "the run (recorded in the ledger with its error, the verdicts untouched) after the run's own retries, and the "
    "`verdict_export_retries` sensor's next tick requests a run that sends it. FAILED, "
    "SKIPPED verdicts, and verdicts on traces that did not come as OpenTelemetry spans, are not sent: the "
    "metadata counts them by reason. Off by default: requested after each judge_scores update only "
    f"when `{EXPORT_FILE}` declares a destination (docs/export.md)."
)


class ExportFailed(Exception):
    """A destination refused a batch: recorded in the ledger and sent again by the next run."""


def build_verdict_exports(root: Path, judge_scores: dg.AssetsDefinition) -> dg.AssetsDefinition:
    try:
        config, broken = load_export_config(root), None
    except ExportConfigError as exc:
        config, broken = None, str(exc)
    partitions = judge_scores.partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    on = config is not None and bool(config.destinations)
    description = VERDICT_EXPORTS_DOC + (
        f"\n\nOn: {', '.join(d.name for d in config.destinations)}." if on and config else "\n\nOff."
    )
    if broken:
        description += f"\n\nBROKEN {EXPORT_FILE} (nothing is exported until it is fixed and reloaded): {broken}"

    @dg.asset(
        name="verdict_exports",
        partitions_def=partitions,
        deps=[judge_scores],
        kinds={"python", "parquet"},
        group_name="exports",
        description=description,
        automation_condition=REFRESH_AFTER_UPDATES if on else None,
        metadata={"broken_config_files": dg.MetadataValue.json({EXPORT_FILE: broken} if broken else {})},
    )
    def verdict_exports(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        """Sends the partition's verdicts each destination has not had yet (see the asset description)."""
        keys = partitions.get_partition_key_from_str(context.partition_key).keys_by_dimension
        evaluator, day = keys["evaluator"], keys["date"]
        try:
            current = load_export_config(warehouse.root.path)  # read again: the file may have changed since the load
        except ExportConfigError as exc:
            raise dg.Failure(str(exc)) from None
        if current is None or not current.destinations:
            where = warehouse.root.path / EXPORT_FILE
            raise dg.Failure(f"the verdict export is off: {where} declares no destination (docs/export.md)")
        try:
            report = export_partition(warehouse.root, evaluator, day, current, os.environ)
        except NoScores as exc:
            raise dg.Failure(str(exc)) from None
        refresh(warehouse.root)
        context.log.info(report.summary())
        if report.failures:
            raise ExportFailed(
                f"{report.summary()}. Nothing was lost: the verdicts are unchanged in judge_scores, the failed "
                "batch is recorded in verdict_exports with its error, and the next run sends what is missing."
            )
        return dg.MaterializeResult(
            metadata={
                "export": dg.MetadataValue.json(report.as_metadata()),
                "sent": sum(d.sent for d in report.destinations),
                "not_exported": dg.MetadataValue.json(report.not_exported),
            }
        )

    return verdict_exports


def build_verdict_export_retries(root: Path, verdict_exports: dg.AssetsDefinition) -> dg.SensorDefinition:
    """The sensor that sends again what a failed export run left `failed` in the ledger (`export.retry`): running
    by default when verdict_export.yaml declares a destination, stopped otherwise."""
    try:
        config: ExportConfig | None = load_export_config(root)
    except ExportConfigError:
        config = None
    on = config is not None and bool(config.destinations)
    settings = config or ExportConfig()
    partitions = verdict_exports.partitions_def
    assert isinstance(partitions, dg.MultiPartitionsDefinition)
    live = {dimension.name: dimension.partitions_def for dimension in partitions.partitions_defs}[
        "evaluator"
    ].get_partition_keys()

    @dg.sensor(
        name="verdict_export_retries",
        target=[verdict_exports],
        minimum_interval_seconds=settings.retry_interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING if on else dg.DefaultSensorStatus.STOPPED,
        description="Requests an export run for each evaluator × day whose verdicts a failed export run left "
        f"`failed` in the verdict_exports ledger, once per failed attempt, until a verdict was tried "
        f"{settings.max_automatic_attempts} times; the run sends only what is not yet sent.",
    )
    def verdict_export_retries(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
        found = [p for p in failed_partitions(warehouse.root, settings.max_automatic_attempts) if p.evaluator in live]
        if not found:
            return dg.SkipReason("no verdict recorded failed in verdict_exports")
        return [
            dg.RunRequest(
                run_key=p.run_key,
                partition_key=dg.MultiPartitionKey({"date": p.day, "evaluator": p.evaluator}),
                tags={"eval_platform/export_retry": f"{p.failed} verdicts failed, {p.attempts} attempt(s)"},
            )
            for p in found
        ]

    return verdict_export_retries
