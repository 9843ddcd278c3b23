"""A run over a range of partitions (what a backfill policy launches), wired into Dagster the same way for every
asset that has one: each partition's work done (`range_runs.each_partition`: one failure never loses the
others), each partition materialized with its own metadata, and the run failing by name for the ones that failed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TypeVar

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
