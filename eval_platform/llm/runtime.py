"""What a run calls models with: the client, the call cache, the budget ledger and the environment."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import ModelCache
from eval_platform.llm.client import ModelClient
from eval_platform.llm.statedb import PostgresState
from eval_platform.settings import budget_wait_s

if TYPE_CHECKING:
    from eval_platform.llm.batch.calls import BatchCalls

T = TypeVar("T")


@dataclass
class ModelRuntime:
    client: ModelClient
    cache: ModelCache
    ledger: BudgetLedger
    local_judge_url: str | None = None
    # The demo's mode: a judge model whose key variable is not set is answered by the local judge (its evaluator's
    # `local_judge:` model) instead of SKIPPED no_credentials. Off, the local judge answers only `local/` models.
    local_judge_for_missing_keys: bool = False
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    # Where batch mode keeps submitted batches (a folder, or the instance's PostgreSQL database); default: a
    # folder beside the cache.
    batch_dir: Path | PostgresState | None = None
    batch: BatchCalls | None = None  # set by batch mode while it judges a day (see `judging.batch_day`)
    benchmark_ledger: BudgetLedger | None = None  # the models under test's spend; default: the data root's file
    # The calls sent and not answered yet, by cache key: the event loop each runs on and the futures of the
    # identical requests waiting for its reply (single flight, `llm.call`). Not copied by `dataclasses.replace`:
    # a runtime with another cache waits on none of this one's calls.
    in_flight: dict[str, tuple[asyncio.AbstractEventLoop, list[asyncio.Future]]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    # How long a budgeted evaluator's calls wait, in all, for other hosts' reservations (`budget.HostWait`).
    budget_wait_s: float = field(default_factory=budget_wait_s)
    # Where a run's warnings about its calls go (the step's `context.log` in a Dagster run); default: the module's.
    log: logging.Logger | None = None


def run_calls(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on uvloop's event loop where uvloop is installed (asyncio's own otherwise).

    A day of judge calls at concurrency 128 spends a third of its CPU in the event loop and the socket transports
    (callbacks, futures, timers, reads and writes): uvloop's, written in C over libuv, measured ~10% less CPU per
    call against the local judge (README, "Performance: judge throughput"). Nothing on the path depends on which
    loop runs it (no signal handlers, subprocesses or loop internals): the same code, timeouts and cancellation.
    """
    try:
        import uvloop
    except ImportError:
        return asyncio.run(main)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(main)
