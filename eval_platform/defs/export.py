"""The `verdict_exports` asset: each judge_scores partition's final verdicts sent to the destinations of
verdict_export.yaml (logic in `eval_platform.export`). Off by default: without the file the asset is never
requested and a run of it fails saying how to turn it on."""

import os
from pathlib import Path

import dagster as dg

from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.export.config import EXPORT_FILE, ExportConfigError, load_export_config
from eval_platform.export.run import export_partition
from eval_platform.export.verdicts import NoScores

VERDICT_EXPORTS_DOC = (
    f"Each final COMPLETED verdict of the judge_scores partition sent to the destinations of `{EXPORT_FILE}` under "
    "the data root: OpenTelemetry GenAI evaluation events (`gen_ai.evaluation.result`) over OTLP/HTTP, and Arize "
    "Phoenix span annotations, each on the app's own judged span. Once per verdict and destination: the ledger "
    "table `verdict_exports` records what was sent, so a re-run sends only what is missing. A refused send fails "
    "the run (recorded in the ledger with its error, the verdicts untouched) and the next run sends it. FAILED, "
    "SKIPPED, pairwise and session verdicts, and verdicts on traces that did not come as OpenTelemetry spans, are "
    "not sent: the metadata counts them by reason. Off by default: requested after each judge_scores update only "
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
            current = load_export_config(warehouse.root)  # read again: the file may have changed since the load
        except ExportConfigError as exc:
            raise dg.Failure(str(exc)) from None
        if current is None or not current.destinations:
            raise dg.Failure(
                f"the verdict export is off: {warehouse.root / EXPORT_FILE} declares no destination (docs/export.md)"
            )
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
