"""Submitting a day's requests: cut into batches at the provider's limits, each batch's worst case reserved in
the budget, its file uploaded, the batch created, and its id saved before anything waits, so that no batch is
ever created, or billed, twice.

The requests no open batch holds are read from disk in recording order (`BatchCalls.fresh`) and written as lines
to a file, one batch at a time: a batch ends before the request that would take it past `limits.requests` lines
or `limits.bytes` bytes (the provider's, or less where the `BatchJob` says so). Each batch then
reserves its own worst case before its upload; when the budget cannot cover it all, the longest prefix that fits
is submitted and every request after it, in this batch and the next ones, is SKIPPED budget_exhausted: what is
submitted is the longest prefix of the day's requests the budget covers.

A `submitting` record (with a submission id that also goes into the batch's metadata) is saved, then the
batch's lines (custom_id -> cache key), before the create call. A create whose answer is lost (a timeout, a
dropped connection, a 5xx) may still have started a batch, so the provider's batches are searched for that id
before any retry; a run killed mid-create leaves the record for the next run, which resumes the batch it finds or
abandons the record (freeing its reservation) when there is none. A run killed between two batches' creates
leaves the batches created so far open: the next run claims their lines and submits only the rest.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval_platform.llm.batch.api import BatchAPI, BatchLimits, custom_id_prefix, error_reason, http_status
from eval_platform.llm.batch.calls import BatchCalls, batch_request
from eval_platform.llm.batch.job import BatchJob
from eval_platform.llm.batch.state import BatchState, TrackedBatch, endpoint_id
from eval_platform.llm.budget import Refusal, Reservation
from eval_platform.llm.client import ERROR_DETAIL_CHARS, CallOutcome, RetryPolicy
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.redaction import clip
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import BATCH_FAILED

log = logging.getLogger(__name__)

# A submitted batch's reservation outlives the run (the provider keeps working after a crash): it holds
# for the completion window plus this margin, unless the batch is settled first.
RESERVATION_MARGIN_S = 3600.0
COMPLETION_WINDOW_S = 24 * 3600.0
# Bytes of a batch's input beyond its lines (Anthropic's body is `{"requests": [<lines>]}`): kept free.
ENVELOPE_BYTES = 64


def batch_limits(job: BatchJob, api: BatchAPI) -> BatchLimits:
    """What one batch may hold: the provider's limits, or the job's where they are set."""
    return BatchLimits(requests=job.max_requests or api.limits.requests, bytes=job.max_bytes or api.limits.bytes)


def reserve_batch(job: BatchJob, runtime: ModelRuntime, worst_usd: list[float | None]):
    """(how many of the requests to submit, their reservation, the refusal that stopped the rest): the worst case
    of the whole batch is reserved at once; when it does not fit, the longest prefix that does."""
    if all(w is None for w in worst_usd):
        return len(worst_usd), None, None
    worst = [w or 0.0 for w in worst_usd]
    totals = list(itertools.accumulate(worst))  # totals[i]: the worst case of the first i + 1 requests
    ttl_s = job.timeout_s + COMPLETION_WINDOW_S + RESERVATION_MARGIN_S
    n, refusal = len(worst), None
    while n > 0:
        result = runtime.ledger.reserve(
            job.owner,
            totals[n - 1],
            job.max_daily_usd,
            job.max_monthly_usd,
            ttl_s=ttl_s,
            outlives_process=True,
        )
        if isinstance(result, Reservation):
            return n, result, refusal
        # The daily or the monthly limit refused: the longest prefix that fits its room, then ask again
        # (the other limit may refuse that one).
        refusal = result
        n = min(bisect.bisect_right(totals, result.remaining_usd + 1e-12), n - 1)
    return 0, None, refusal


@dataclass
class _Lines:
    """One batch being cut: its requests' lines written to a file, and what each line stands for."""

    path: Path
    submission: str = field(default_factory=lambda: uuid.uuid4().hex)
    custom_ids: list[str] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    worst: list[float | None] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)  # the file's size after each line

    def __post_init__(self) -> None:
        self.file = open(self.path, "wb")  # closed by `close`: open while the batch is cut

    @property
    def size(self) -> int:
        return self.ends[-1] if self.ends else 0

    def line(self, api: BatchAPI, seq: int, key: str, request: str) -> tuple[str, bytes]:
        # The submission id rides in every custom_id: how a batch is recognised where a provider keeps no metadata.
        custom_id = f"{custom_id_prefix(self.submission)}r{len(self.seqs):05d}-{key[:16]}"
        return custom_id, api.line(custom_id, batch_request(request)).encode()

    def add(self, custom_id: str, line: bytes, seq: int, key: str, worst: float | None) -> None:
        self.file.write(line)
        self.custom_ids.append(custom_id)
        self.seqs.append(seq)
        self.keys.append(key)
        self.worst.append(worst)
        self.ends.append(self.size + len(line))

    def keep(self, n: int) -> None:
        """Only the first `n` lines go in the batch."""
        self.file.truncate(self.ends[n - 1] if n else 0)
        for held in (self.custom_ids, self.seqs, self.keys, self.worst, self.ends):
            del held[n:]

    def close(self) -> None:
        self.file.close()


async def submit_day(
    job: BatchJob,
    api: BatchAPI,
    endpoint: Endpoint,
    calls: BatchCalls,
    runtime: ModelRuntime,
    state: BatchState,
    folder: Path,
) -> list[TrackedBatch]:
    """Submit the endpoint's requests that no open batch holds, as batches cut at the limits (see the module doc);
    the batches created. A request not submitted is answered with why (budget_exhausted, too large for a batch,
    the upload or the create failed)."""
    limits = batch_limits(job, api)
    submitted: list[TrackedBatch] = []
    refusal: Refusal | None = None
    lines: _Lines | None = None
    try:
        for seq, key, worst, request in calls.fresh(endpoint_id(endpoint)):
            if refusal is not None:  # the budget stopped an earlier request: this one is refused too
                calls.answer(seq, replace(refusal, amount_usd=worst or 0.0))
                continue
            lines = lines or _Lines(folder / f"batch-{len(submitted)}.jsonl")
            custom_id, line = lines.line(api, seq, key, request)
            room = limits.bytes - ENVELOPE_BYTES
            if len(lines.seqs) >= limits.requests or lines.size + len(line) > room:
                if lines.seqs:  # the batch is full: submitted, and this request starts the next one
                    batch, refusal = await _submit(job, api, endpoint, lines, calls, runtime, state)
                    submitted += [batch] if batch is not None else []
                    lines = _Lines(folder / f"batch-{len(submitted)}.jsonl")
                    if refusal is not None:
                        calls.answer(seq, replace(refusal, amount_usd=worst or 0.0))
                        continue
                    custom_id, line = lines.line(api, seq, key, request)
                if len(line) > room:  # alone, it is larger than a batch may be
                    detail = f"the request is {len(line):,} bytes as a batch line, over {limits.bytes:,} per batch"
                    calls.answer(seq, CallOutcome(error_reason=BATCH_FAILED, error_detail=detail, attempts=0))
                    continue
            lines.add(custom_id, line, seq, key, worst)
        if lines is not None and lines.seqs:
            batch, _ = await _submit(job, api, endpoint, lines, calls, runtime, state)
            submitted += [batch] if batch is not None else []
    finally:
        if lines is not None:
            lines.close()
            lines.path.unlink(missing_ok=True)
    return submitted


async def _submit(
    job: BatchJob,
    api: BatchAPI,
    endpoint: Endpoint,
    lines: _Lines,
    calls: BatchCalls,
    runtime: ModelRuntime,
    state: BatchState,
) -> tuple[TrackedBatch | None, Refusal | None]:
    """Submit one batch (as much of it as the budget covers): the batch created, or None when nothing was (every
    request then answered with why); and the budget's refusal, when it stopped some."""
    try:
        n, reservation, refusal = reserve_batch(job, runtime, lines.worst)
        if refusal is not None:
            for seq, worst in zip(lines.seqs[n:], lines.worst[n:], strict=True):
                calls.answer(seq, replace(refusal, amount_usd=worst or 0.0))
        lines.keep(n)
        lines.close()
        if not n:
            return None, refusal
        return await _upload_and_create(job, api, endpoint, lines, calls, runtime, state, reservation), refusal
    finally:
        lines.close()
        lines.path.unlink(missing_ok=True)


async def _upload_and_create(
    job: BatchJob,
    api: BatchAPI,
    endpoint: Endpoint,
    lines: _Lines,
    calls: BatchCalls,
    runtime: ModelRuntime,
    state: BatchState,
    reservation: Reservation | None,
) -> TrackedBatch | None:
    submission, count = lines.submission, len(lines.seqs)
    calls.carry(submission, zip(lines.custom_ids, lines.seqs, strict=True))

    def give_up(outcome: CallOutcome) -> None:
        if reservation is not None:
            runtime.ledger.release(reservation)
        calls.answer_batch(submission, outcome)

    try:
        file_id = await with_retries(
            job.max_retries, lambda: api.upload(lines.path, f"{job.owner}_{job.day}.jsonl"), "uploading"
        )
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
        "request_count": count,
        "reservation": None if reservation is None else asdict(reservation),
    }
    # Before creating: a crash while the batch is being created is resolved by the next run, which finds the
    # batch with its lines (a record without its lines is abandoned: it was never created).
    state.batches.append(record)
    state.save()
    state.add_requests(submission, zip(lines.custom_ids, lines.keys, strict=True))
    metadata = {"evaluator": job.owner, "date": job.day, "submission": submission}
    try:
        created = await _create(job.max_retries, api, file_id, lines.path, metadata, record["submitted_epoch"], count)
    except SubmitFailed as failed:
        if failed.maybe_created:
            # Kept as `submitting` with its reservation: the next run looks the batch up before submitting again.
            failed.outcome.error_detail = (failed.outcome.error_detail or "") + (
                f"; the batch may exist: the next run of this partition looks for submission {submission} first"
            )
            calls.answer_batch(submission, failed.outcome)
        else:
            state.batches.remove(record)
            state.save()
            give_up(failed.outcome)
        return None
    record.update(batch_id=created["id"], state="open", status=created.get("status"))
    state.save()  # before any waiting: a crash from here on resumes this batch
    log.info("%s %s: submitted batch %s with %d requests", job.owner, job.day, created["id"], count)
    return TrackedBatch(record, api, endpoint, claimed=count, provider=created)


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


async def with_retries(max_retries: int, send, what: str):
    policy = RetryPolicy()
    for attempt in range(max_retries + 1):
        try:
            return await send()
        except Exception as exc:  # every failure of the HTTP call becomes a reason code
            reason, retryable = error_reason(exc)
            if not retryable or attempt == max_retries:
                detail = f"{what} the batch failed after {attempt + 1} attempt(s): {type(exc).__name__}: {exc}"
                detail = clip(detail, ERROR_DETAIL_CHARS)
                raise SubmitFailed(CallOutcome(error_reason=reason, error_detail=detail, attempts=attempt + 1)) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def _create(
    max_retries: int,
    api: BatchAPI,
    file_id: str | None,
    path: Path,
    metadata: dict[str, str],
    since: float,
    requests: int,
):
    """Create the batch. A create whose answer was lost (a timeout, a dropped connection, a 5xx) may still have
    started a batch, so before trying again the provider's batches are searched for this submission: a batch
    is never created, and billed, twice."""
    policy = RetryPolicy()
    for attempt in range(max_retries + 1):
        try:
            return await api.create(file_id, path, metadata)
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
            if not retryable or attempt == max_retries:
                raise SubmitFailed(outcome) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def adopt(api: BatchAPI, record: dict[str, Any], runtime: ModelRuntime, state: BatchState) -> None:
    """A batch a run was creating when it stopped: found by its submission id (then resumed), or never created."""
    found = await api.find(record["submission"], record["submitted_epoch"] - 60, record.get("request_count", 0))
    if found is None:
        record.update(state="abandoned")  # never created: its requests are submitted again, nothing was billed
        if record.get("reservation") is not None:
            runtime.ledger.release(Reservation(**record["reservation"]))
    else:
        record.update(batch_id=found["id"], state="open", status=found.get("status"))
    state.save()
