"""Delivering a partition's recorded calls through the providers' batch APIs: submit or resume, wait, collect,
settle. The caller records the calls and reads the answers (a judge day: `judging.batch_day`, which says how a
day is judged in batches); what the call layer gets is a `BatchJob` and the calls on disk.

Per endpoint: recorded requests that a batch this partition already submitted holds (its lines are in the
partition's state, see `state`) are claimed for that batch, which this run waits for: a re-run after a crash or a
timeout resumes it instead of paying twice. The rest become new batches, cut at the provider's limits (requests
and bytes per batch; `submit`): each batch's worst case reserved in the budget before its upload (as many
requests as fit; the others SKIPPED budget_exhausted, as interactive calls are), uploaded from disk, created, and
its id with its custom_id -> cache key lines written to the state before anything waits (no batch is created
twice, even when the answer to the create is lost or the run dies during it). Then every batch is polled until it
ends or the job's `timeout_s` passes, and each ended batch's results are downloaded to disk and read a line at a
time into the calls' file. A request the batch did not answer is FAILED batch_expired / batch_failed (the batch id
in reason_detail); one still running when the run stops waiting is FAILED batch_timeout, and its batch stays open
in the state. `settle` then replaces a finished batch's reservation by its spend (tokens at the discounted price)
and marks it collected.
"""

from __future__ import annotations

import asyncio
import logging
import time
import urllib.request
from pathlib import Path

from eval_platform.llm.batch.api import TERMINAL, error_reason, http_status, unanswered
from eval_platform.llm.batch.calls import BatchCalls
from eval_platform.llm.batch.job import BatchJob
from eval_platform.llm.batch.providers import batch_api_for
from eval_platform.llm.batch.state import BatchState, TrackedBatch, endpoint_id
from eval_platform.llm.batch.submit import adopt, submit_day
from eval_platform.llm.budget import Reservation
from eval_platform.llm.client import ERROR_DETAIL_CHARS, CallOutcome
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.redaction import clip
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.llm.statedb import PostgresState
from eval_platform.schemas import BATCH_TIMEOUT

log = logging.getLogger(__name__)


def batch_dir(runtime: ModelRuntime) -> Path | PostgresState:
    """Where the partition's batches are recorded: the runtime's, else a folder beside the cache's."""
    if runtime.batch_dir is not None:
        return runtime.batch_dir
    if runtime.cache.directory is None:
        raise ValueError("batch mode needs the runtime's batch_dir when the cache is not in a folder")
    return runtime.cache.directory.parent / "judge_batches"


def scratch_parent(where: Path | PostgresState) -> Path | None:
    """Where a run keeps its day on disk: beside the state's files, or the system's temporary folder."""
    if isinstance(where, PostgresState):
        return None
    Path(where).mkdir(parents=True, exist_ok=True)
    return Path(where)


async def deliver(
    job: BatchJob, calls: BatchCalls, runtime: ModelRuntime, state: BatchState, folder: Path
) -> list[TrackedBatch]:
    """Submit or resume, wait, and collect: every recorded request gets an answer in `calls`."""
    endpoints: dict[str, Endpoint] = dict(calls.endpoints)
    # The batches earlier runs left open are looked at even when this run needs none of their answers (the
    # cache answered everything: a run killed after caching a batch's replies but before settling it): each
    # one that has ended is settled from the provider's record, so its reservation stops holding the budget.
    for endpoint in job.endpoints:
        eid = endpoint_id(endpoint)
        if state.open_batches(eid) or state.submitting(eid):
            endpoints.setdefault(eid, endpoint)
    if not endpoints:
        return []
    import aiohttp  # as the lean path: the code location loads without it

    batches: list[TrackedBatch] = []
    trust_env = bool(urllib.request.getproxies())
    async with aiohttp.ClientSession(trust_env=trust_env) as session:
        for eid, endpoint in endpoints.items():
            api = batch_api_for(endpoint, session, job.request_timeout_s)
            try:
                for record in state.submitting(eid):
                    await adopt(api, record, runtime, state)
            except Exception as exc:  # the endpoint cannot say whether that batch exists: do not pay twice
                reason, _ = error_reason(exc)
                detail = clip(
                    f"looking for a batch an earlier run was creating failed: {type(exc).__name__}: {exc}",
                    ERROR_DETAIL_CHARS,
                )
                calls.answer_endpoint(eid, CallOutcome(error_reason=reason, error_detail=detail, attempts=1))
                continue
            records = state.open_batches(eid)
            claimed = calls.claim(eid, records, state)
            tracked = [
                TrackedBatch(r, api, endpoint, claimed=claimed.get(r.get("submission") or "", 0), resumed=True)
                for r in records
            ]
            batches += [b for b in tracked if b.claimed]
            # A batch no request of this run needs (the traces or the evaluator changed since) is not waited
            # for; once it has ended, its spend is settled and it is closed, which frees its reservation.
            for unneeded in (b for b in tracked if not b.claimed):
                await _retrieve(unneeded)
                batches.append(unneeded)
            batches += await submit_day(job, api, endpoint, calls, runtime, state, folder)
        await _wait(job, batches)
        for batch in batches:
            await _collect(job, batch, calls, folder)
    return batches


def settle(batches: list[TrackedBatch], runtime: ModelRuntime, state: BatchState) -> None:
    """A collected batch's spend replaces its reservation, and the batch is marked collected in the state."""
    for batch in batches:
        if batch.collected:
            reservation = batch.record.get("reservation")
            if reservation is not None:
                runtime.ledger.settle(Reservation(**reservation), batch.spend_usd)
            status = (batch.provider or batch.record).get("status")
            batch.record.update(state="collected", status=status, spend_usd=batch.spend_usd)
            state.save()


async def _retrieve(batch: TrackedBatch) -> None:
    """Ask for the batch's status; a failure to ask leaves the last one known (the batch goes on)."""
    try:
        batch.provider = await batch.api.retrieve(batch.batch_id)
    except Exception as exc:  # an error status, or a dropped connection while polling
        if http_status(exc) != 404:
            log.warning("polling batch %s: %s: %s (will poll again)", batch.batch_id, type(exc).__name__, exc)
            return
        # The endpoint does not know the batch (a different server, or deleted): nothing will come.
        message = f"the endpoint does not know batch {batch.batch_id} (HTTP 404)"
        batch.provider = {"id": batch.batch_id, "status": "failed", "errors": {"data": [{"message": message}]}}


async def _wait(job: BatchJob, batches: list[TrackedBatch]) -> None:
    """Poll every batch this run needs until it ends or the job's `timeout_s` is spent."""
    deadline = time.monotonic() + job.timeout_s
    pending = [b for b in batches if b.claimed and (b.provider or {}).get("status") not in TERMINAL]
    while pending:
        for batch in list(pending):
            await _retrieve(batch)
            if (batch.provider or {}).get("status") in TERMINAL:
                pending.remove(batch)
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0:
            break
        await asyncio.sleep(min(job.poll_interval_s, remaining))


async def _collect(job: BatchJob, batch: TrackedBatch, calls: BatchCalls, folder: Path) -> None:
    """Answer every request of `batch` this run needs: from its output (read from disk a line at a time), or with
    why there is none."""
    provider = batch.provider or {"id": batch.batch_id, "status": batch.record.get("status")}
    status = provider.get("status")
    if status not in TERMINAL and not batch.claimed:
        return  # an unneeded batch still running: left for a later run
    if status not in TERMINAL:
        detail = (
            f"batch {batch.batch_id} still {status} after this run waited {job.timeout_s:g} s; "
            "it stays submitted, and the next run of this partition collects it instead of submitting again"
        )
        calls.answer_batch(batch.submission, CallOutcome(error_reason=BATCH_TIMEOUT, error_detail=detail, attempts=1))
        return
    prices = batch.endpoint.prices
    spend = 0.0

    def priced(results):
        nonlocal spend
        for custom_id, outcome in results:
            if prices is not None and outcome.ok:
                spend += prices.cost(outcome.prompt_tokens, outcome.completion_tokens, outcome.cached_prompt_tokens)
            yield custom_id, outcome

    try:
        calls.answer_lines(batch.submission, priced(await batch.api.results(provider, folder)))
    except Exception as exc:  # the batch is done and paid; a later run downloads it again
        reason, _ = error_reason(exc)
        detail = (
            f"batch {batch.batch_id} ended {status}, but its results could not be downloaded: "
            f"{type(exc).__name__}: {exc}"
        )
        outcome = CallOutcome(error_reason=reason, error_detail=clip(detail, ERROR_DETAIL_CHARS), attempts=1)
        calls.answer_batch(batch.submission, outcome)
        return
    batch.spend_usd = spend
    calls.answer_batch(batch.submission, unanswered(provider))
    batch.collected = True
