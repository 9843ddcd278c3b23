"""A run over a range of partitions (what a backfill policy launches), wired into Dagster the same way for every
asset that has one: each partition's work done (`range_runs.each_partition`: one failure never loses the
others), each partition materialized with its own metadata and its own check results, and the run failing by
name for the ones that failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import dagster as dg

from eval_platform.range_runs import PartitionRun, each_partition

T = TypeVar("T")


def run_partitions(context: dg.AssetExecutionContext, work: Callable[[str], T]) -> PartitionRun[T]:
    """`work(key)` for each partition of the run. A run of one partition raises its error as before; in a run of
    several, one partition's failure does not stop the others."""
    if context.has_partition_key:
        return PartitionRun(done={context.partition_key: work(context.partition_key)}, failed={})
    return each_partition(context.partition_keys, work, log=context.log.error)


def materialize(
    context: dg.AssetExecutionContext, run: PartitionRun, metadata: dict[str, dict]
) -> Iterator[dg.MaterializeResult]:
    """The materialization(s) of a run, `metadata` per partition key: one partition as a plain materialization;
    several, each with its own metadata. When some failed, the others are recorded as materialized (events)
    before the run fails (`fail_if_any`), so a backfill shows exactly the failed ones as failed."""
    if context.has_partition_key:
        yield dg.MaterializeResult(metadata=metadata[context.partition_key])
        return
    if run.failed:
        for key in run.done:
            context.log_event(
                dg.AssetMaterialization(asset_key=context.asset_key, partition=key, metadata=metadata[key])
            )
        return
    for key in run.done:
        context.add_asset_metadata(metadata[key], partition_key=key)
    yield dg.MaterializeResult()


Checks = list[tuple[str, dg.AssetCheckSeverity, dict[str, "CheckOutcome"]]]


def results(
    context: dg.AssetExecutionContext, run: PartitionRun, metadata: dict[str, dict], checks: Checks
) -> list[dg.MaterializeResult | dg.AssetCheckResult | dg.AssetCheckEvaluation | dg.Output]:
    """What a run yields, in order: its materialization(s) (`materialize`), then each check's results
    (`check_results`: (check, severity, outcome per partition key) of `checks`); then call `fail_if_any`."""
    out: list[dg.MaterializeResult | dg.AssetCheckResult | dg.AssetCheckEvaluation | dg.Output] = [
        *materialize(context, run, metadata)
    ]
    for check, severity, outcomes in checks:
        out += check_results(context, check, severity, outcomes)
    return out


def fail_if_any(run: PartitionRun, what: str = "partitions") -> None:
    """Fail the run naming each partition that failed and its error (the others are materialized)."""
    if run.failed:
        raise dg.Failure(
            f"{len(run.failed)} of {len(run.failed) + len(run.done)} {what} failed (the other {len(run.done)} are "
            "materialized): " + "; ".join(f"{key}: {message}" for key, message in sorted(run.failed.items())),
            metadata={
                "failed_partitions": dg.MetadataValue.json(run.failed),
                "materialized_partitions": sorted(run.done),
            },
        )


def partitioned_check(name: str, asset: str | dg.AssetKey, description: str, partitions_def) -> dg.AssetCheckSpec:
    """A check of a partitioned asset whose results each name their partition (the UI's checks tab shows it,
    never "Partition —"). Dagster 1.13 marks a check's `partitions_def` as a preview feature (a PreviewWarning when
    the definitions load); it is the only way a check result carries its partition."""
    return dg.AssetCheckSpec(name, asset=asset, description=description, partitions_def=partitions_def)


@dataclass(frozen=True)
class CheckOutcome:
    """One partition's result of a check."""

    passed: bool
    metadata: dict[str, Any] = field(default_factory=dict)
    description: str | None = None


def check_results(
    context: dg.AssetExecutionContext, check: str, severity: dg.AssetCheckSeverity, outcomes: dict[str, CheckOutcome]
) -> Iterator[dg.AssetCheckResult | dg.AssetCheckEvaluation | dg.Output]:
    """A `partitioned_check`'s result for each partition of the run (`outcomes`, by partition key), each naming
    its partition. A run of one partition yields a plain result (Dagster attaches the run's partition and its
    materialization). A run of several cannot say which partition an AssetCheckResult is for, so each partition
    gets its own check evaluation, and the check's output is yielded once so the step is complete."""
    if not outcomes:
        return
    if context.has_partition_key:
        outcome = outcomes[context.partition_key]
        yield dg.AssetCheckResult(
            check_name=check,
            passed=outcome.passed,
            severity=severity,
            metadata=outcome.metadata,
            description=outcome.description,
        )
        return
    key = dg.AssetCheckKey(context.asset_key, check)
    yield dg.Output(None, output_name=context.assets_def.get_output_name_for_asset_check_key(key))
    for partition, outcome in outcomes.items():
        yield dg.AssetCheckEvaluation(
            asset_key=context.asset_key,
            check_name=check,
            passed=outcome.passed,
            severity=severity,
            metadata=outcome.metadata,
            description=outcome.description,
            partition=partition,
        )
