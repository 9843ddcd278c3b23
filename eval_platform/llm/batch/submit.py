"""Submitting a batch: its worst case reserved in the budget, its file uploaded, the batch created, and its
id saved before anything waits, so that no batch is ever created, or billed, twice.

A `submitting` record (with a submission id that also goes into the batch's metadata) is saved before the
create call. A create whose answer is lost (a timeout, a dropped connection, a 5xx) may still have started a
batch, so the provider's batches are searched for that id before any retry; a run killed mid-create leaves
the record for the next run, which resumes the batch it finds or abandons the record (freeing its
reservation) when there is none.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from eval_platform.llm.batch.api import BatchAPI, error_reason, http_status
from eval_platform.llm.batch.providers import custom_id_prefix
from eval_platform.llm.batch.state import (
    BatchState,
    RecordedCall,
    TrackedBatch,
    endpoint_id,
)
from eval_platform.llm.budget import Refusal, Reservation
from eval_platform.llm.client import ERROR_DETAIL_CHARS, CallOutcome, RetryPolicy
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.redaction import clip
from eval_platform.llm.runtime import JudgeRuntime

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.judging.options import BatchOptions

log = logging.getLogger(__name__)

# A submitted batch's reservation outlives the run (the provider keeps working after a crash): it holds
# for the completion window plus this margin, unless the batch is settled first.
RESERVATION_MARGIN_S = 3600.0
COMPLETION_WINDOW_S = 24 * 3600.0


def batch_options(config: EvaluatorConfig) -> BatchOptions:
    """The evaluator's `batch` options: only an evaluator with them is judged in batches."""
    if config.batch is None:
        raise ValueError(f"evaluator '{config.name}' has no batch options: it is not judged in batches")
    return config.batch


Answer = Callable[[str, CallOutcome | Refusal], None]  # the outcome of a call, by its cache key


def reserve_batch(config: EvaluatorConfig, runtime: JudgeRuntime, fresh: list[RecordedCall]):
    """(requests to submit, their reservation, refused requests): the worst case of the whole batch is reserved
    at once; when it does not fit, the longest prefix that does."""
    if all(r.worst_usd is None for r in fresh):
        return fresh, None, []
    worst = [r.worst_usd or 0.0 for r in fresh]
    totals = list(itertools.accumulate(worst))  # totals[i]: the worst case of the first i + 1 requests
    ttl_s = batch_options(config).timeout_s + COMPLETION_WINDOW_S + RESERVATION_MARGIN_S
    n, refusal = len(fresh), None
    while n > 0:
        result = runtime.ledger.reserve(
            config.name,
            totals[n - 1],
            config.max_daily_cost_usd,
            config.max_monthly_cost_usd,
            ttl_s=ttl_s,
            outlives_process=True,
        )
        if isinstance(result, Reservation):
            break
        # The daily or the monthly limit refused: the longest prefix that fits its room, then ask again
        # (the other limit may refuse that one).
        refusal = result
        n = min(bisect.bisect_right(totals, result.remaining_usd + 1e-12), n - 1)
    else:
        result = None
    # With no refusal, every request fitted: none is left over.
    refused = (
        []
        if refusal is None
        else [(r, replace(refusal, amount_usd=w)) for r, w in zip(fresh[n:], worst[n:], strict=True)]
    )
    return fresh[:n], result, refused


async def submit(
    config: EvaluatorConfig,
    day: str,
    api: BatchAPI,
    endpoint: Endpoint,
    fresh: list[RecordedCall],
    runtime: JudgeRuntime,
    state: BatchState,
    answer: Answer,
) -> TrackedBatch | None:
    """Submit `fresh` as one batch (as much of it as the budget covers); None when nothing was submitted, every
    request then answered with the reason (budget_exhausted, or why the upload or the create failed)."""
    fresh, reservation, refused = reserve_batch(config, runtime, fresh)
    for request, refusal in refused:
        answer(request.key, refusal)
    if not fresh:
        return None
    # The submission id goes into the batch's metadata and every custom_id: how a batch whose creation went
    # unheard is found (by its metadata; by its custom_ids where a provider keeps no metadata, as Anthropic).
    submission = uuid.uuid4().hex
    claims = [(f"{custom_id_prefix(submission)}r{i:05d}-{r.key[:16]}", r) for i, r in enumerate(fresh)]
    content = "".join(api.line(cid, r.request) for cid, r in claims).encode()

    def give_up(outcome: CallOutcome) -> None:
        if reservation is not None:
            runtime.ledger.release(reservation)
        for _, request in claims:
            answer(request.key, outcome)

    try:
        file_id = await with_retries(config, lambda: api.upload(content, f"{config.name}_{day}.jsonl"), "uploading")
    except SubmitFailed as failed:
        give_up(failed.outcome)
        return None
    record = {
        "batch_id": None,
        "submission": submission,
        "endpoint": endpoint_id(endpoint),
        "model": endpoint.label,
        "input_file_id": file_id,
        "submitted_at": datetime.now(UTC).isoformat(),
        "submitted_epoch": time.time(),
        "state": "submitting",
        "status": None,
        "requests": {cid: r.key for cid, r in claims},
        "reservation": None if reservation is None else asdict(reservation),
    }
    state.batches.append(record)
    state.save()  # before creating: a crash while the batch is being created is resolved by the next run
    metadata = {"evaluator": config.name, "date": day, "submission": submission}
    try:
        created = await _create(config, api, file_id, content, metadata, record["submitted_epoch"], len(claims))
    except SubmitFailed as failed:
        if failed.maybe_created:
            # Kept as `submitting` with its reservation: the next run looks the batch up before submitting again.
            failed.outcome.error_detail = (failed.outcome.error_detail or "") + (
                f"; the batch may exist: the next run of this partition looks for submission {submission} first"
            )
            for _, request in claims:
                answer(request.key, failed.outcome)
        else:
            state.batches.remove(record)
            state.save()
            give_up(failed.outcome)
        return None
    record.update(batch_id=created["id"], state="open", status=created.get("status"))
    state.save()  # before any waiting: a crash from here on resumes this batch
    log.info("%s %s: submitted batch %s with %d requests", config.name, day, created["id"], len(claims))
    return TrackedBatch(record, api, endpoint, claims, provider=created)


class SubmitFailed(Exception):
    def __init__(self, outcome: CallOutcome, maybe_created: bool = False):
        super().__init__(outcome.error_detail)
        self.outcome = outcome
        self.maybe_created = maybe_created


def _retry_after_s(exc: BaseException) -> float | None:
    try:
        value = getattr(exc, "retry_after", None)
        return float(value) if value is not None else None
    except ValueError:
        return None


async def with_retries(config: EvaluatorConfig, send, what: str):
    policy = RetryPolicy()
    for attempt in range(config.max_retries + 1):
        try:
            return await send()
        except Exception as exc:  # every failure of the HTTP call becomes a reason code
            reason, retryable = error_reason(exc)
            if not retryable or attempt == config.max_retries:
                detail = f"{what} the batch failed after {attempt + 1} attempt(s): {type(exc).__name__}: {exc}"
                detail = clip(detail, ERROR_DETAIL_CHARS)
                raise SubmitFailed(CallOutcome(error_reason=reason, error_detail=detail, attempts=attempt + 1)) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def _create(
    config: EvaluatorConfig,
    api: BatchAPI,
    file_id: str | None,
    content: bytes,
    metadata: dict[str, str],
    since: float,
    requests: int,
):
    """Create the batch. A create whose answer was lost (a timeout, a dropped connection, a 5xx) may still have
    started a batch, so before trying again the provider's batches are searched for this submission: a batch
    is never created, and billed, twice."""
    policy = RetryPolicy()
    for attempt in range(config.max_retries + 1):
        try:
            return await api.create(file_id, content, metadata)
        except Exception as exc:  # every failure of the HTTP call becomes a reason code
            reason, retryable = error_reason(exc)
            detail = clip(
                f"creating the batch failed after {attempt + 1} attempt(s): {type(exc).__name__}: {exc}",
                ERROR_DETAIL_CHARS,
            )
            outcome = CallOutcome(error_reason=reason, error_detail=detail, attempts=attempt + 1)
            status = http_status(exc)
            refused = status is not None and 400 <= status < 500
            if not refused or status == 408:
                try:
                    found = await api.find(metadata["submission"], since - 60, requests)
                except Exception as lookup:  # cannot tell whether it exists: do not create another
                    looking = f"; looking for it: {type(lookup).__name__}: {lookup}"
                    outcome.error_detail = (outcome.error_detail or "") + clip(looking, ERROR_DETAIL_CHARS)
                    raise SubmitFailed(outcome, maybe_created=True) from lookup
                if found is not None:
                    return found
            if not retryable or attempt == config.max_retries:
                raise SubmitFailed(outcome) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def adopt(api: BatchAPI, record: dict[str, Any], runtime: JudgeRuntime, state: BatchState) -> None:
    """A batch a run was creating when it stopped: found by its submission id (then resumed), or never created."""
    found = await api.find(record["submission"], record["submitted_epoch"] - 60, len(record["requests"]))
    if found is None:
        record.update(state="abandoned")  # never created: its requests are submitted again, nothing was billed
        if record.get("reservation") is not None:
            runtime.ledger.release(Reservation(**record["reservation"]))
    else:
        record.update(batch_id=found["id"], state="open", status=found.get("status"))
    state.save()
