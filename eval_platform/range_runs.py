"""A run over a range of partitions (what a backfill policy launches): each one's work done, one failure never
losing the rest. `defs/range_runs.py` wires it into Dagster."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass
class PartitionRun(Generic[T]):
    """The partitions whose work succeeded (key -> result) and those that failed (key -> error message)."""

    done: dict[str, T]
    failed: dict[str, str]


def each_partition(
    keys: Iterable[str], work: Callable[[str], T], log: Callable[[str], None] = print
) -> PartitionRun[T]:
    """`work(key)` for every partition key; one that fails (input missing, provider down, a bug) is recorded with
    its error and the others still run, so a backfill run never throws away the partitions it got right."""
    run: PartitionRun[T] = PartitionRun(done={}, failed={})
    for key in keys:
        try:
            run.done[key] = work(key)
        except Exception as exc:  # noqa: BLE001 - any failure of one partition is reported, never lost
            run.failed[key] = f"{type(exc).__name__}: {exc}"
            log(f"{key} failed, doing the rest of the run: {run.failed[key]}")
    return run
