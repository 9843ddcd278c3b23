"""Batch mode: judge a partition through the provider's batch API, at its discount, resumable after a crash.

How `judge_day_in_batch` judges one evaluator × day:
1. Record: the runner judges the day with every call recorded instead of sent. Cache hits are answered
   from the cache as always, so a cached verdict is never submitted again.
2. Deliver, per endpoint: recorded requests that a batch this partition already submitted holds (found in
   the state file, `<state>/judge_batches/<evaluator>/<date>.json`) wait for that batch, so a re-run after a
   crash or a timeout resumes it instead of paying twice. The rest become one new batch: the worst case of
   all of it reserved in the budget (as many requests as fit; the others SKIPPED budget_exhausted, as
   interactive calls are), uploaded, created, and its id with the custom_id -> cache key map written to the
   state file before anything waits (`batch_submit`: no batch is created twice, even when the answer to the
   create is lost or the run dies during it). Then every batch is polled until it ends or `batch.timeout_s`
   passes.
3. Answer: the runner judges the day again with each call answered from the batch's output, so parsing,
   scoring, consensus, rows and cache entries are those of the interactive path. A request the batch did
   not answer is FAILED batch_expired / batch_failed (the batch id in reason_detail); one still running
   when the run stops waiting is FAILED batch_timeout, and its batch stays in the state file.
4. Settle: a finished batch's spend (tokens at the discounted price) replaces its reservation, and the
   batch is marked collected. Every batch of the partition still open in the state file is looked at, also
   when the cache answered every request (a run killed after caching the replies, before settling): the
   provider's record settles it, instead of its reservation holding the budget.

Requests are matched to a submitted batch by their cache key, which leaves out the per-request fence
secret: a re-run builds the same keys for the same traces and configuration. A file lock per partition
keeps two runs of one partition from submitting it twice at once.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
import urllib.request
from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from eval_platform.llm.batch.api import TERMINAL, error_reason, http_status, unanswered
from eval_platform.llm.batch.providers import batch_api_for
from eval_platform.llm.batch.state import (
    BatchState,
    RecordedCall,
    TrackedBatch,
    endpoint_id,
    partition_lock,
)
from eval_platform.llm.batch.submit import adopt, batch_options, submit
from eval_platform.llm.budget import BudgetRefused, Refusal, Reservation
from eval_platform.llm.client import ERROR_DETAIL_CHARS, CallOutcome, JudgeRequest
from eval_platform.llm.endpoint import Endpoint, evaluator_endpoint
from eval_platform.llm.redaction import clip
from eval_platform.llm.runtime import JudgeRuntime
from eval_platform.llm.statedb import PostgresState
from eval_platform.schemas import BATCH_FAILED, BATCH_PENDING, BATCH_TIMEOUT

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


class _Summarized(Protocol):
    summary: dict[str, Any]


R = TypeVar("R", bound=_Summarized)

log = logging.getLogger(__name__)


class BatchCalls:
    """The judge's calls in batch mode: recorded in the first pass, answered in the second (see module doc)."""

    def __init__(self) -> None:
        self.recording = True
        self.recorded: list[RecordedCall] = []
        self._answers: dict[str, list[CallOutcome | Refusal]] = defaultdict(list)

    def answer(self, key: str, result: CallOutcome | Refusal) -> None:
        self._answers[key].append(result)

    async def outcome(
        self, endpoint: Endpoint, request: JudgeRequest, key: str, worst_usd: float | None
    ) -> CallOutcome:
        # As an interactive call would, give the other calls of the day their turn before this one's reply
        # lands in the cache: two identical requests of one day are then both answered, not one from the cache.
        await asyncio.sleep(0)
        if self.recording:
            self.recorded.append(RecordedCall(endpoint, request, key, worst_usd))
            return CallOutcome(error_reason=BATCH_PENDING, error_detail="recorded for a batch")
        answers = self._answers.get(key)
        if not answers:  # the day changed between the passes (a cache entry vanished): nothing was asked
            return CallOutcome(error_reason=BATCH_FAILED, error_detail="this request was in no batch of this run")
        result = answers.pop(0)
        if isinstance(result, Refusal):
            raise BudgetRefused(result)
        return copy.copy(result)


def batch_dir(runtime: JudgeRuntime) -> Path | PostgresState:
    """Where the partition's batches are recorded: the runtime's, else a folder beside the cache's."""
    if runtime.batch_dir is not None:
        return runtime.batch_dir
    if runtime.cache.directory is None:
        raise ValueError("batch mode needs the runtime's batch_dir when the cache is not in a folder")
    return runtime.cache.directory.parent / "judge_batches"


def judge_day_in_batch(
    config: EvaluatorConfig, day: str, runtime: JudgeRuntime, judge_pass: Callable[[JudgeRuntime], R]
) -> R:
    """`judge_pass` (the judge's day, as `judge_day` runs it) for an evaluator with `batch`: the same rows, its
    calls delivered through batches. The pass runs twice: recording its calls, then answering them."""
    with partition_lock(batch_dir(runtime), config.name, day):
        state = BatchState(batch_dir(runtime), config.name, day)
        calls = BatchCalls()
        judge_pass(replace(runtime, batch=calls))
        batches = asyncio.run(_deliver(config, day, calls, runtime, state))
        calls.recording = False
        result = judge_pass(replace(runtime, batch=calls))
        for batch in batches:
            if batch.collected:
                reservation = batch.record.get("reservation")
                if reservation is not None:
                    runtime.ledger.settle(Reservation(**reservation), batch.spend_usd)
                status = (batch.provider or batch.record).get("status")
                batch.record.update(state="collected", status=status, spend_usd=batch.spend_usd)
                state.save()
    result.summary["batches"] = [b.summary() for b in batches]
    return result


async def _deliver(config, day, calls: BatchCalls, runtime: JudgeRuntime, state: BatchState) -> list[TrackedBatch]:
    """Submit or resume, wait, and collect: every recorded request gets an answer in `calls`."""
    groups: dict[str, list[RecordedCall]] = defaultdict(list)
    endpoints: dict[str, Endpoint] = {}
    for recorded in calls.recorded:
        groups[endpoint_id(recorded.endpoint)].append(recorded)
        endpoints[endpoint_id(recorded.endpoint)] = recorded.endpoint
    # The batches earlier runs left open are looked at even when this run needs none of their answers (the
    # cache answered everything: a run killed after caching a batch's replies but before settling it): each
    # one that has ended is settled from the provider's record, so its reservation stops holding the budget.
    for endpoint in filter(None, (evaluator_endpoint(config, spec, runtime) for spec in config.judge_models())):
        eid = endpoint_id(endpoint)
        if state.open_batches(eid) or state.submitting(eid):
            groups.setdefault(eid, [])
            endpoints.setdefault(eid, endpoint)
    if not groups:
        return []
    import aiohttp  # as the lean path: the code location loads without it

    batches: list[TrackedBatch] = []
    trust_env = bool(urllib.request.getproxies())
    async with aiohttp.ClientSession(trust_env=trust_env) as session:
        for eid, requests in groups.items():
            endpoint = endpoints[eid]
            api = batch_api_for(endpoint, session, config.timeout_s)
            try:
                for record in state.submitting(eid):
                    await adopt(api, record, runtime, state)
            except Exception as exc:  # the endpoint cannot say whether that batch exists: do not pay twice
                reason, _ = error_reason(exc)
                detail = clip(
                    f"looking for a batch an earlier run was creating failed: {type(exc).__name__}: {exc}",
                    ERROR_DETAIL_CHARS,
                )
                for request in requests:
                    calls.answer(request.key, CallOutcome(error_reason=reason, error_detail=detail, attempts=1))
                continue
            records = state.open_batches(eid)
            resumed, fresh = _claim(records, requests)
            batches += [TrackedBatch(record, api, endpoint, claims, resumed=True) for record, claims in resumed]
            # A batch no request of this run needs (the traces or the evaluator changed since) is not waited
            # for; once it has ended, its spend is settled and it is closed, which frees its reservation.
            needed = {record["batch_id"] for record, _ in resumed}
            for record in records:
                if record["batch_id"] not in needed:
                    unneeded = TrackedBatch(record, api, endpoint, resumed=True)
                    await _retrieve(unneeded)
                    batches.append(unneeded)
            if fresh:
                submitted = await submit(config, day, api, endpoint, fresh, runtime, state, calls.answer)
                if submitted is not None:
                    batches.append(submitted)
        await _wait(config, batches)
        for batch in batches:
            await _collect(config, batch, calls)
    return batches


def _claim(records: list[dict[str, Any]], requests: list[RecordedCall]):
    """Requests an open batch already holds (by cache key, each line used once), and the rest."""
    free: dict[str, list[tuple[dict, str]]] = defaultdict(list)
    for record in records:
        for custom_id, key in record["requests"].items():
            free[key].append((record, custom_id))
    claims: dict[str, list[tuple[str, RecordedCall]]] = defaultdict(list)
    fresh = []
    for request in requests:
        if free.get(request.key):
            record, custom_id = free[request.key].pop(0)
            claims[record["batch_id"]].append((custom_id, request))
        else:
            fresh.append(request)
    resumed = [(record, claims[record["batch_id"]]) for record in records if claims.get(record["batch_id"])]
    return resumed, fresh


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


async def _wait(config: EvaluatorConfig, batches: list[TrackedBatch]) -> None:
    """Poll every batch this run needs until it ends or the run's `batch.timeout_s` is spent."""
    options = batch_options(config)
    deadline = time.monotonic() + options.timeout_s
    pending = [b for b in batches if b.claims and (b.provider or {}).get("status") not in TERMINAL]
    while pending:
        for batch in list(pending):
            await _retrieve(batch)
            if (batch.provider or {}).get("status") in TERMINAL:
                pending.remove(batch)
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0:
            break
        await asyncio.sleep(min(options.poll_interval_s, remaining))


async def _collect(config: EvaluatorConfig, batch: TrackedBatch, calls: BatchCalls) -> None:
    """Answer every request of `batch` this run needs: from its output, or with why there is none."""
    provider = batch.provider or {"id": batch.batch_id, "status": batch.record.get("status")}
    status = provider.get("status")
    if status not in TERMINAL and not batch.claims:
        return  # an unneeded batch still running: left for a later run
    if status not in TERMINAL:
        detail = (
            f"batch {batch.batch_id} still {status} after this run waited {batch_options(config).timeout_s:g} s; "
            "it stays submitted, and the next run of this partition collects it instead of submitting again"
        )
        for _, request in batch.claims:
            calls.answer(request.key, CallOutcome(error_reason=BATCH_TIMEOUT, error_detail=detail, attempts=1))
        return
    try:
        results = await batch.api.results(provider)
    except Exception as exc:  # the batch is done and paid; a later run downloads it again
        reason, _ = error_reason(exc)
        detail = (
            f"batch {batch.batch_id} ended {status}, but its results could not be downloaded: "
            f"{type(exc).__name__}: {exc}"
        )
        detail = clip(detail, ERROR_DETAIL_CHARS)
        for _, request in batch.claims:
            calls.answer(request.key, CallOutcome(error_reason=reason, error_detail=detail, attempts=1))
        return
    prices = batch.endpoint.prices
    if prices is not None:
        batch.spend_usd = sum(
            prices.cost(r.prompt_tokens, r.completion_tokens, r.cached_prompt_tokens) for r in results.values() if r.ok
        )
    for custom_id, request in batch.claims:
        calls.answer(request.key, results.get(custom_id) or unanswered(provider))
    batch.collected = True
