"""What the call layer needs to deliver one partition's calls through batches: whose they are, which day, the
budget they are reserved against, the batches' limits and how long a run waits for them. The caller builds it
(a judge day: `judging.batch_day`); the call layer knows nothing else of it."""

from __future__ import annotations

from dataclasses import dataclass

from eval_platform.llm.endpoint import Endpoint


@dataclass(frozen=True)
class BatchJob:
    owner: str  # whose partition, spend and batches (an evaluator's name): the budget's account, the batches' metadata
    day: str
    max_daily_usd: float | None
    max_monthly_usd: float | None
    poll_interval_s: float  # how often a batch's status is asked for
    timeout_s: float  # how long one run waits for its batches
    max_requests: int | None = None  # per batch; None: the provider's limit
    max_bytes: int | None = None
    request_timeout_s: float = 60.0  # one HTTP call to the batch API
    max_retries: int = 4  # of one upload or create
    # The owner's endpoints: their batches earlier runs left open are looked at even when no call of this run
    # needs them (settled once ended, so their reservations stop holding the budget).
    endpoints: tuple[Endpoint, ...] = ()
