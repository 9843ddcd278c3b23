"""A judge day in batch mode: an evaluator × day judged through the provider's batch API, at its discount,
resumable after a crash, in bounded memory whatever the day's size.

How `judge_day_in_batch` judges one evaluator × day:
1. Record: the runner judges the day with every call recorded instead of sent, to a file on disk
   (`llm.batch.calls`), not a list. Cache hits are answered from the cache as always, so a cached verdict is
   never submitted again.
2. Deliver: the call layer submits the recorded requests, or resumes the batches an earlier run of the partition
   submitted, waits and collects (`llm.batch.deliver`), with the evaluator's name, budget and `batch` options as
   its `BatchJob`.
3. Answer: the runner judges the day again, reading it anew, with each call answered by its cache key from the
   batches' results, so parsing, scoring, consensus, rows and cache entries are those of the interactive path,
   and the rows go to the partition's writer as they come.
4. Settle: a finished batch's spend (tokens at the discounted price) replaces its reservation, and the batch is
   marked collected. Every batch of the partition still open in the state is looked at, also when the cache
   answered every request (a run killed after caching the replies, before settling): the provider's record
   settles it, instead of its reservation holding the budget.

Requests are matched to a submitted batch by their cache key, which leaves out the per-request fence secret: a
re-run builds the same keys for the same traces and configuration. A lock per partition keeps two runs of one
partition from submitting it twice at once. What the run holds is a page of rows at a time and one batch's
bookkeeping (its custom_ids and keys), never the day: the day itself is on disk in a temporary folder beside the
state's files (the system's temporary folder when the state is in PostgreSQL), removed at the end.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from eval_platform.judging.models import evaluator_endpoint
from eval_platform.llm.batch.calls import BatchCalls
from eval_platform.llm.batch.deliver import batch_dir, deliver, scratch_parent, settle
from eval_platform.llm.batch.job import BatchJob
from eval_platform.llm.batch.state import BatchState, partition_lock
from eval_platform.llm.runtime import ModelRuntime

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


class _Summarized(Protocol):
    summary: dict[str, Any]


R = TypeVar("R", bound=_Summarized)


def batch_job(config: EvaluatorConfig, day: str, runtime: ModelRuntime) -> BatchJob:
    """What the call layer needs of the evaluator to deliver its day through batches."""
    options = config.batch
    if options is None:
        raise ValueError(f"evaluator '{config.name}' has no batch options: it is not judged in batches")
    endpoints = (evaluator_endpoint(config, spec, runtime) for spec in config.judge_models())
    return BatchJob(
        owner=config.name,
        day=day,
        max_daily_usd=config.max_daily_cost_usd,
        max_monthly_usd=config.max_monthly_cost_usd,
        poll_interval_s=options.poll_interval_s,
        timeout_s=options.timeout_s,
        max_requests=options.max_requests,
        max_bytes=options.max_bytes,
        request_timeout_s=config.timeout_s,
        max_retries=config.max_retries,
        endpoints=tuple(filter(None, endpoints)),
    )


def judge_day_in_batch(
    config: EvaluatorConfig, day: str, runtime: ModelRuntime, judge_pass: Callable[[ModelRuntime], R]
) -> R:
    """`judge_pass` (the judge's day, as `judge_day` runs it) for an evaluator with `batch`: the same rows, its
    calls delivered through batches. The pass runs twice, reading the day each time: recording its calls (it
    must hand no rows on then: `runtime.batch.recording`), then answering them."""
    job = batch_job(config, day, runtime)
    where = batch_dir(runtime)
    with (
        partition_lock(where, config.name, day),
        tempfile.TemporaryDirectory(prefix="eval_platform-batch-", dir=scratch_parent(where)) as scratch,
    ):
        state = BatchState(where, config.name, day)
        calls = BatchCalls(Path(scratch))
        try:
            judge_pass(replace(runtime, batch=calls))
            calls.recorded()
            batches = asyncio.run(deliver(job, calls, runtime, state, Path(scratch)))
            calls.answering()
            result = judge_pass(replace(runtime, batch=calls))
        finally:
            calls.close()
        settle(batches, runtime, state)
    result.summary["batches"] = [b.summary() for b in batches]
    return result
