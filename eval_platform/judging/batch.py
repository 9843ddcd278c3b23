"""Batch mode: judge a partition through the provider's batch API, at its discount, resumable after a crash.

How `judge_day_in_batch` judges one evaluator × day:
1. Record: the runner judges the day with every call recorded instead of sent. Cache hits are answered
   from the cache as always, so a cached verdict is never submitted again.
2. Deliver, per endpoint: recorded requests that a batch this partition already submitted holds (found in
   the state file, `<state>/judge_batches/<evaluator>/<date>.json`) wait for that batch, so a re-run after a
   crash or a timeout resumes it instead of paying twice. The rest become one new batch: the worst case of
   all of it reserved in the budget (as many requests as fit; the others SKIPPED budget_exhausted, as
   interactive calls are), uploaded, created, and its id with the custom_id -> cache key map written to the
   state file before anything waits. Then every batch is polled until it ends or `batch.timeout_s` passes.
3. Answer: the runner judges the day again with each call answered from the batch's output, so parsing,
   scoring, consensus, rows and cache entries are those of the interactive path. A request the batch did
   not answer is FAILED batch_expired / batch_failed (the batch id in reason_detail); one still running
   when the run stops waiting is FAILED batch_timeout, and its batch stays in the state file.
4. Settle: a finished batch's spend (tokens at the discounted price) replaces its reservation, and the
   batch is marked collected.

Requests are matched to a submitted batch by their cache key, which leaves out the per-request fence
secret: a re-run builds the same keys for the same traces and configuration. A file lock per partition
keeps two runs of one partition from submitting it twice at once.
"""

from __future__ import annotations

import asyncio
import bisect
import copy
import fcntl
import itertools
import json
import logging
import os
import time
import urllib.request
import uuid
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.judging.batch_api import (
    TERMINAL,
    OpenAIBatchAPI,
    error_reason,
    read_results,
    request_line,
    unanswered,
)
from eval_platform.judging.budget import Refusal, Reservation
from eval_platform.judging.client import CallOutcome, JudgeRequest, RetryPolicy
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.openai_compat import ProviderHTTPError, chat_body, resolve_base_and_headers
from eval_platform.judging.runner import BudgetRefused, DayResult, Endpoint, JudgeRuntime, _judge_day_closing

log = logging.getLogger(__name__)

# A submitted batch's reservation outlives the run (the provider keeps working after a crash): it holds
# for the completion window plus this margin, unless the batch is settled first.
RESERVATION_MARGIN_S = 3600.0
COMPLETION_WINDOW_S = 24 * 3600.0


@dataclass
class _Recorded:
    endpoint: Endpoint
    request: JudgeRequest
    key: str  # the cache key: what matches a request to its line in a submitted batch
    worst_usd: float | None  # the request's worst case at the batch price, when the evaluator has a budget


class BatchCalls:
    """The judge's calls in batch mode: recorded in the first pass, answered in the second (see module doc)."""

    def __init__(self) -> None:
        self.recording = True
        self.recorded: list[_Recorded] = []
        self._answers: dict[str, list[CallOutcome | Refusal]] = defaultdict(list)

    def answer(self, key: str, result: CallOutcome | Refusal) -> None:
        self._answers[key].append(result)

    async def outcome(self, endpoint: Endpoint, request: JudgeRequest, key: str, worst_usd: float | None) -> CallOutcome:
        # As an interactive call would, give the other calls of the day their turn before this one's reply
        # lands in the cache: two identical requests of one day are then both answered, not one from the cache.
        await asyncio.sleep(0)
        if self.recording:
            self.recorded.append(_Recorded(endpoint, request, key, worst_usd))
            return CallOutcome(error_reason="batch_pending", error_detail="recorded for a batch")
        answers = self._answers.get(key)
        if not answers:  # the day changed between the passes (a cache entry vanished): nothing was asked
            return CallOutcome(error_reason="batch_failed", error_detail="this request was in no batch of this run")
        result = answers.pop(0)
        if isinstance(result, Refusal):
            raise BudgetRefused(result)
        return copy.copy(result)


class BatchState:
    """The batches one partition submitted: one JSON file, replaced atomically on every change."""

    def __init__(self, directory: Path, evaluator: str, day: str):
        self.path = directory / evaluator / f"{day}.json"
        self.batches: list[dict[str, Any]] = []
        if self.path.exists():
            self.batches = json.loads(self.path.read_text(encoding="utf-8"))["batches"]

    def open_batches(self, endpoint_id: str) -> list[dict[str, Any]]:
        return [b for b in self.batches if b["state"] == "open" and b["endpoint"] == endpoint_id]

    def submitting(self, endpoint_id: str) -> list[dict[str, Any]]:
        """Batches a run was creating when it stopped: they may or may not exist at the provider."""
        return [b for b in self.batches if b["state"] == "submitting" and b["endpoint"] == endpoint_id]

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.path.with_suffix(f".json.{os.getpid()}.tmp")
        with temporary.open("w", encoding="utf-8") as handle:
            json.dump({"batches": self.batches}, handle, indent=1)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, self.path)


@contextmanager
def partition_lock(directory: Path, evaluator: str, day: str):
    """Held while a run submits, waits for and collects one partition's batches (released if it dies)."""
    path = directory / evaluator / f"{day}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def endpoint_id(endpoint: Endpoint) -> str:
    """Which endpoint a batch lives at (never the key): a batch is resumed only where it was submitted."""
    return f"{endpoint.model}@{endpoint.api_base or ''}"


@dataclass
class _Batch:
    """One batch this run waits for: submitted now or found in the state file."""

    record: dict[str, Any]  # its entry in the state file
    api: OpenAIBatchAPI
    endpoint: Endpoint
    claims: list[tuple[str, _Recorded]] = field(default_factory=list)  # (custom_id, request) this run needs
    resumed: bool = False
    provider: dict[str, Any] | None = None  # the batch object last retrieved
    collected: bool = False
    spend_usd: float = 0.0

    @property
    def batch_id(self) -> str:
        return self.record["batch_id"]

    def summary(self) -> dict[str, Any]:
        status = (self.provider or {}).get("status") or self.record.get("status")
        return {"batch_id": self.batch_id, "model": self.record["model"], "status": status, "resumed": self.resumed,
                "requests": len(self.claims), "collected": self.collected, "cost_usd": round(self.spend_usd, 8)}


def batch_dir(runtime: JudgeRuntime) -> Path:
    return runtime.batch_dir or runtime.cache.directory.parent / "judge_batches"


def judge_day_in_batch(
    config: EvaluatorConfig, day: str, traces: pl.DataFrame, runtime: JudgeRuntime, manual_trace_ids: set[str]
) -> DayResult:
    """`judge_day` for an evaluator with `batch`: the same rows, its calls delivered through batches."""
    with partition_lock(batch_dir(runtime), config.name, day):
        state = BatchState(batch_dir(runtime), config.name, day)
        calls = BatchCalls()
        asyncio.run(_judge_day_closing(config, day, traces, replace(runtime, batch=calls), manual_trace_ids))
        batches = asyncio.run(_deliver(config, day, calls, runtime, state))
        calls.recording = False
        result = asyncio.run(_judge_day_closing(config, day, traces, replace(runtime, batch=calls), manual_trace_ids))
        for batch in batches:
            if batch.collected:
                reservation = batch.record.get("reservation")
                if reservation is not None:
                    runtime.ledger.settle(Reservation(**reservation), batch.spend_usd)
                batch.record.update(state="collected", status=batch.provider["status"], spend_usd=batch.spend_usd)
                state.save()
    result.summary["batches"] = [b.summary() for b in batches]
    return result


async def _deliver(config, day, calls: BatchCalls, runtime: JudgeRuntime, state: BatchState) -> list[_Batch]:
    """Submit or resume, wait, and collect: every recorded request gets an answer in `calls`."""
    groups: dict[str, list[_Recorded]] = defaultdict(list)
    for recorded in calls.recorded:
        groups[endpoint_id(recorded.endpoint)].append(recorded)
    if not groups:
        return []
    import aiohttp  # as the lean path: the code location loads without it

    batches: list[_Batch] = []
    trust_env = bool(urllib.request.getproxies())
    async with aiohttp.ClientSession(trust_env=trust_env) as session:
        for eid, requests in groups.items():
            endpoint = requests[0].endpoint
            base, headers = resolve_base_and_headers(endpoint.api_base, endpoint.api_key)
            api = OpenAIBatchAPI(session, base, headers, config.timeout_s)
            try:
                for record in state.submitting(eid):
                    await _adopt(api, record, runtime, state)
            except Exception as exc:  # the endpoint cannot say whether that batch exists: do not pay twice
                reason, _ = error_reason(exc)
                detail = f"looking for a batch an earlier run was creating failed: {type(exc).__name__}: {exc}"[:2000]
                for request in requests:
                    calls.answer(request.key, CallOutcome(error_reason=reason, error_detail=detail, attempts=1))
                continue
            records = state.open_batches(eid)
            resumed, fresh = _claim(records, requests)
            batches += [_Batch(record, api, endpoint, claims, resumed=True) for record, claims in resumed]
            needed = {record["batch_id"] for record, _ in resumed}
            for record in records:
                if record["batch_id"] not in needed:
                    batches.append(await _check_unneeded(_Batch(record, api, endpoint, resumed=True)))
            if fresh:
                submitted = await _submit(config, day, api, endpoint, fresh, runtime, state, calls)
                if submitted is not None:
                    batches.append(submitted)
        await _wait(config, batches)
        for batch in batches:
            await _collect(config, batch, calls)
    return batches


def _claim(records: list[dict[str, Any]], requests: list[_Recorded]):
    """Requests an open batch already holds (by cache key, each line used once), and the rest."""
    free: dict[str, list[tuple[dict, str]]] = defaultdict(list)
    for record in records:
        for custom_id, key in record["requests"].items():
            free[key].append((record, custom_id))
    claims: dict[str, list[tuple[str, _Recorded]]] = defaultdict(list)
    fresh = []
    for request in requests:
        if free.get(request.key):
            record, custom_id = free[request.key].pop(0)
            claims[record["batch_id"]].append((custom_id, request))
        else:
            fresh.append(request)
    resumed = [(record, claims[record["batch_id"]]) for record in records if claims.get(record["batch_id"])]
    return resumed, fresh


def _reserve(config: EvaluatorConfig, runtime: JudgeRuntime, fresh: list[_Recorded]):
    """(requests to submit, their reservation, refused requests): the worst case of the whole batch is reserved
    at once; when it does not fit, the longest prefix that does."""
    if all(r.worst_usd is None for r in fresh):
        return fresh, None, []
    worst = [r.worst_usd or 0.0 for r in fresh]
    totals = list(itertools.accumulate(worst))  # totals[i]: the worst case of the first i + 1 requests
    ttl_s = config.batch.timeout_s + COMPLETION_WINDOW_S + RESERVATION_MARGIN_S
    n, refusal = len(fresh), None
    while n > 0:
        result = runtime.ledger.reserve(
            config.name, totals[n - 1], config.max_daily_cost_usd, config.max_monthly_cost_usd,
            ttl_s=ttl_s, outlives_process=True,
        )
        if isinstance(result, Reservation):
            break
        # The daily or the monthly limit refused: the longest prefix that fits its room, then ask again
        # (the other limit may refuse that one).
        refusal = result
        n = min(bisect.bisect_right(totals, result.remaining_usd + 1e-12), n - 1)
    else:
        result = None
    refused = [(r, replace(refusal, amount_usd=w)) for r, w in zip(fresh[n:], worst[n:], strict=True)]
    return fresh[:n], result, refused


async def _submit(config, day, api: OpenAIBatchAPI, endpoint, fresh, runtime, state: BatchState, calls) -> _Batch | None:
    fresh, reservation, refused = _reserve(config, runtime, fresh)
    for request, refusal in refused:
        calls.answer(request.key, refusal)
    if not fresh:
        return None
    claims = [(f"r{i:05d}-{r.key[:16]}", r) for i, r in enumerate(fresh)]
    content = "".join(
        request_line(cid, chat_body(r.request.model, r.request.messages, r.request.temperature, r.request.max_tokens))
        for cid, r in claims
    ).encode()

    def give_up(outcome: CallOutcome) -> None:
        if reservation is not None:
            runtime.ledger.release(reservation)
        for _, request in claims:
            calls.answer(request.key, outcome)

    try:
        file_id = await _with_retries(config, lambda: api.upload(content, f"{config.name}_{day}.jsonl"), "uploading")
    except _SubmitFailed as failed:
        give_up(failed.outcome)
        return None
    submission = uuid.uuid4().hex  # in the batch's metadata: how a batch whose creation went unheard is found
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
        created = await _create(config, api, file_id, metadata, record["submitted_epoch"])
    except _SubmitFailed as failed:
        if failed.maybe_created:
            # Kept as `submitting` with its reservation: the next run looks the batch up before submitting again.
            failed.outcome.error_detail += (
                f"; the batch may exist: the next run of this partition looks for submission {submission} first"
            )
            for _, request in claims:
                calls.answer(request.key, failed.outcome)
        else:
            state.batches.remove(record)
            state.save()
            give_up(failed.outcome)
        return None
    record.update(batch_id=created["id"], state="open", status=created.get("status"))
    state.save()  # before any waiting: a crash from here on resumes this batch
    log.info("%s %s: submitted batch %s with %d requests", config.name, day, created["id"], len(claims))
    return _Batch(record, api, endpoint, claims, provider=created)


class _SubmitFailed(Exception):
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


async def _with_retries(config: EvaluatorConfig, send, what: str):
    policy = RetryPolicy()
    for attempt in range(config.max_retries + 1):
        try:
            return await send()
        except Exception as exc:  # every failure of the HTTP call becomes a reason code
            reason, retryable = error_reason(exc)
            if not retryable or attempt == config.max_retries:
                detail = f"{what} the batch failed after {attempt + 1} attempt(s): {type(exc).__name__}: {exc}"[:2000]
                raise _SubmitFailed(CallOutcome(error_reason=reason, error_detail=detail, attempts=attempt + 1)) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def _create(config: EvaluatorConfig, api: OpenAIBatchAPI, file_id: str, metadata: dict[str, str], since: float):
    """Create the batch. A create whose answer was lost (a timeout, a dropped connection, a 5xx) may still have
    started a batch, so before trying again the provider's batches are searched for this submission: a batch
    is never created, and billed, twice."""
    policy = RetryPolicy()
    for attempt in range(config.max_retries + 1):
        try:
            return await api.create(file_id, metadata)
        except Exception as exc:  # every failure of the HTTP call becomes a reason code
            reason, retryable = error_reason(exc)
            detail = f"creating the batch failed after {attempt + 1} attempt(s): {type(exc).__name__}: {exc}"[:2000]
            outcome = CallOutcome(error_reason=reason, error_detail=detail, attempts=attempt + 1)
            refused = isinstance(exc, ProviderHTTPError) and exc.status is not None and 400 <= exc.status < 500
            if not refused or exc.status == 408:
                try:
                    found = await api.find(metadata["submission"], since - 60)
                except Exception as lookup:  # cannot tell whether it exists: do not create another
                    raise _SubmitFailed(outcome, maybe_created=True) from lookup
                if found is not None:
                    return found
            if not retryable or attempt == config.max_retries:
                raise _SubmitFailed(outcome) from exc
            await asyncio.sleep(policy.delay(attempt, _retry_after_s(exc)))
    raise AssertionError("unreachable")


async def _adopt(api: OpenAIBatchAPI, record: dict[str, Any], runtime: JudgeRuntime, state: BatchState) -> None:
    """A batch a run was creating when it stopped: found by its submission id (then resumed), or never created."""
    found = await api.find(record["submission"], record["submitted_epoch"] - 60)
    if found is None:
        record.update(state="abandoned")  # never created: its requests are submitted again, nothing was billed
        if record.get("reservation") is not None:
            runtime.ledger.release(Reservation(**record["reservation"]))
    else:
        record.update(batch_id=found["id"], state="open", status=found.get("status"))
    state.save()


async def _check_unneeded(batch: _Batch) -> _Batch:
    """A submitted batch no request of this run needs (the traces or the evaluator changed since): it is not
    waited for, but once it has ended its spend is settled and it is closed, so its reservation is freed."""
    await _retrieve(batch)
    return batch


async def _retrieve(batch: _Batch) -> None:
    """Ask for the batch's status; a failure to ask leaves the last one known (the batch goes on)."""
    try:
        batch.provider = await batch.api.retrieve(batch.batch_id)
    except ProviderHTTPError as exc:
        if exc.status != 404:
            log.warning("polling batch %s: %s (will poll again)", batch.batch_id, exc)
            return
        # The endpoint does not know the batch (a different server, or deleted): nothing will come.
        message = f"the endpoint does not know batch {batch.batch_id} (HTTP 404)"
        batch.provider = {"id": batch.batch_id, "status": "failed", "errors": {"data": [{"message": message}]}}
    except Exception as exc:  # a dropped connection while polling
        log.warning("polling batch %s: %s: %s (will poll again)", batch.batch_id, type(exc).__name__, exc)


async def _wait(config: EvaluatorConfig, batches: list[_Batch]) -> None:
    """Poll every batch this run needs until it ends or the run's `batch.timeout_s` is spent."""
    deadline = time.monotonic() + config.batch.timeout_s
    pending = [b for b in batches if b.claims and (b.provider or {}).get("status") not in TERMINAL]
    while pending:
        for batch in list(pending):
            await _retrieve(batch)
            if (batch.provider or {}).get("status") in TERMINAL:
                pending.remove(batch)
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0:
            break
        await asyncio.sleep(min(config.batch.poll_interval_s, remaining))


async def _collect(config: EvaluatorConfig, batch: _Batch, calls: BatchCalls) -> None:
    """Answer every request of `batch` this run needs: from its output, or with why there is none."""
    provider = batch.provider or {"id": batch.batch_id, "status": batch.record.get("status")}
    status = provider.get("status")
    if status not in TERMINAL and not batch.claims:
        return  # an unneeded batch still running: left for a later run
    if status not in TERMINAL:
        detail = (
            f"batch {batch.batch_id} still {status} after this run waited {config.batch.timeout_s:g} s; it stays "
            "submitted, and the next run of this partition collects it instead of submitting again"
        )
        for _, request in batch.claims:
            calls.answer(request.key, CallOutcome(error_reason="batch_timeout", error_detail=detail, attempts=1))
        return
    try:
        output = await batch.api.content(provider["output_file_id"]) if provider.get("output_file_id") else ""
        errors = await batch.api.content(provider["error_file_id"]) if provider.get("error_file_id") else ""
    except Exception as exc:  # the batch is done and paid; a later run downloads it again
        reason, _ = error_reason(exc)
        detail = f"batch {batch.batch_id} ended {status}, but its results could not be downloaded: {type(exc).__name__}: {exc}"
        for _, request in batch.claims:
            calls.answer(request.key, CallOutcome(error_reason=reason, error_detail=detail[:2000], attempts=1))
        return
    results = read_results(provider, output, errors)
    prices = batch.endpoint.prices
    if prices is not None:
        batch.spend_usd = sum(
            prices.cost(r.prompt_tokens, r.completion_tokens, r.cached_prompt_tokens) for r in results.values() if r.ok
        )
    for custom_id, request in batch.claims:
        calls.answer(request.key, results.get(custom_id) or unanswered(provider))
    batch.collected = True
