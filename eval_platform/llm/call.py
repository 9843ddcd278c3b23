"""The one path of a model call, for every feature that calls a model (judges, benchmark tasks, batch mode):

    request -> cache -> in flight? -> budget reserve -> send -> redact -> cost -> settle -> the caller's parse
            -> cache write

- The cache answers an identical request for free, when the caller accepts the cached reply (an entry written
  before a parser change may no longer parse: the call is then made again).
- An identical request (the same cache key) already sent and not answered yet is not sent again: it waits for
  that call (single flight) and gets its reply as a cache hit, or its outcome (FAILED with the same reason,
  SKIPPED budget_exhausted) without a call or a cost of its own: identical requests of a day are paid once,
  whichever units, members or modes make them; samples stay several calls (the sample index is in the key).
  Once the reply is in, the cache answers the next days, evaluators and runs.
- With a budget and a priced, non-free endpoint, the call's worst case is reserved when it holds its concurrency
  slot, and settled to its actual cost once the reply is in; a refused reservation is SKIPPED budget_exhausted.
- Every text the provider wrote (and every cached one) is redacted of the caller's keys and every remembered
  secret before it reaches a row, the cache or a log.
- A failed call is FAILED with the client's reason code, never a verdict; a reply the caller's parse rejects
  is FAILED with the parse's reason (`truncated` when the reply was cut at max_tokens) and not cached.
- In batch mode (`runtime.batch`), the call is recorded for, or answered from, a provider batch instead.
- An `EmbeddingRequest` (`llm.embeddings`) takes this same path; its reply is vectors, which `parse` gets instead
  of text, and which the cache keeps (never sent to a batch).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar

from eval_platform.llm import pricing
from eval_platform.llm.budget import Budget, BudgetRefused, Reservation
from eval_platform.llm.cache import cache_key
from eval_platform.llm.client import CallOutcome, ModelRequest
from eval_platform.llm.embeddings import EmbeddingRequest, embedding_cache_key, pack, unpack
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.redaction import redact, remember, remember_env
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import BUDGET_EXHAUSTED, COMPLETED, FAILED, SKIPPED, TRUNCATED

P = TypeVar("P")


class ReplyRejected(Exception):
    """Raised by a caller's parse: the reply is not accepted. The call is FAILED with `reason`, and not cached."""

    def __init__(self, reason: str, detail: str | None = None):
        super().__init__(detail or reason)
        self.reason = reason
        self.detail = detail


@dataclass
class CallResult(Generic[P]):
    """One call's outcome as rows record it."""

    verdict: P | None = None  # what the caller's parse made of the reply
    status: str = COMPLETED
    reason: str | None = None  # a stable code: timeout, unparseable, budget_exhausted, ...
    detail: str | None = None  # the human message that goes with it (reason_detail)
    raw: str | None = None  # the reply, or the provider's error text
    provider_model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0
    cost_usd: float | None = 0.0  # None: the endpoint has no known price (never counted as free)
    cached_cost_usd: float = 0.0  # what a cache hit cost when it was paid for
    latency_ms: float = 0.0
    calls: int = 0
    cache_hit: bool = False


class ModelCaller:
    """One endpoint's calls, all through `call` (see the module doc)."""

    def __init__(
        self,
        runtime: ModelRuntime,
        endpoint: Endpoint,
        *,
        budget: Budget | None = None,
        key_envs: Iterable[str] = (),
    ):
        self.runtime, self.endpoint, self.budget = runtime, endpoint, budget
        # Every key this caller may send (the values of `key_envs`) and the endpoint's own key. Remembered for
        # the redaction of rows and log lines, with the environment's keys, which litellm falls back on when an
        # endpoint names none (ANTHROPIC_API_KEY, ...).
        secrets = {runtime.env.get(name) for name in key_envs} | {endpoint.api_key}
        self.secrets = {s for s in secrets if s}
        remember(*self.secrets)
        remember_env(runtime.env)

    def request(
        self, messages: list[dict[str, str]], *, temperature: float, max_tokens: int, timeout_s: float, max_retries: int
    ) -> ModelRequest:
        endpoint = self.endpoint
        return ModelRequest(
            model=endpoint.model,
            messages=messages,
            api_base=endpoint.api_base,
            api_key=endpoint.api_key,
            temperature=temperature,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            max_retries=max_retries,
            fence_secret=getattr(messages, "fence_secret", None),
            cache_scope=getattr(messages, "cache_scope", None),
        )

    def embedding_request(self, texts: list[str], *, timeout_s: float, max_retries: int) -> EmbeddingRequest:
        """The embeddings of `texts` from this caller's endpoint (an embedding model), one vector per text."""
        endpoint = self.endpoint
        return EmbeddingRequest(
            endpoint.model, tuple(texts), endpoint.api_base, endpoint.api_key, timeout_s, max_retries
        )

    def _cost(self, outcome: CallOutcome) -> float | None:
        prices = self.endpoint.prices
        if prices is None:
            return None
        return prices.cost(outcome.prompt_tokens, outcome.completion_tokens, outcome.cached_prompt_tokens)

    def _from_cache(self, key: str, parse: Callable[[str], P]) -> CallResult[P] | None:
        cached: dict[str, Any] | None = self.runtime.cache.get(key)
        if cached is None:
            return None
        # Entries written before replies were redacted may hold a key: redacted on the way out too.
        content = redact(cached.get("content"), self.secrets)
        reply: Any = content or ""
        if "vectors" in cached:  # an embedding's entry: its parse reads the vectors (an unreadable entry: a miss)
            try:
                reply = unpack(cached["vectors"])
            except ValueError:
                return None
        try:
            verdict = parse(reply)
        except ReplyRejected:
            return None
        return CallResult(
            verdict=verdict,
            raw=content,
            provider_model=redact(cached.get("provider_model"), self.secrets),
            prompt_tokens=cached.get("prompt_tokens", 0),
            completion_tokens=cached.get("completion_tokens", 0),
            cached_prompt_tokens=cached.get("cached_prompt_tokens", 0),
            cost_usd=0.0,
            cached_cost_usd=cached.get("cost_usd") or 0.0,
            cache_hit=True,
        )

    async def call(
        self, request: ModelRequest | EmbeddingRequest, sample: int, parse: Callable[[Any], P]
    ) -> CallResult[P]:
        """`request` answered through the one path; `parse` turns a reply (text; an embedding's vectors) into the
        caller's verdict, or raises `ReplyRejected` (then the reply is FAILED and not cached)."""
        runtime = self.runtime
        embedding = isinstance(request, EmbeddingRequest)
        local = "local-judge" if self.endpoint.local else None
        if isinstance(request, EmbeddingRequest):
            key = embedding_cache_key(request, local)
        else:
            key = cache_key(request, sample, endpoint=local)
        hit = self._from_cache(key, parse)
        if hit is not None:
            return hit
        # Single flight: an identical request already sent on this event loop is not sent again; this one waits
        # for its reply. A dict lookup and an insert per call (no task, no lock: one loop runs it all).
        flights = runtime.in_flight
        loop = asyncio.get_running_loop()
        flight = flights.get(key)
        if flight is not None and flight[0] is loop:
            return await self._wait_for(flight[1], loop, key, request, sample, parse)
        waiters: list[asyncio.Future] = []
        mine = flights[key] = (loop, waiters)
        result: CallResult[P] | None = None
        try:
            result = await self._send(request, key, parse, embedding)
            return result
        finally:
            if flights.get(key) is mine:
                del flights[key]
            for waiter in waiters:  # None: this call raised or was cancelled, and each waiter makes its own
                if not waiter.done():
                    waiter.set_result(result)

    async def _wait_for(
        self,
        waiters: list[asyncio.Future],
        loop: asyncio.AbstractEventLoop,
        key: str,
        request: ModelRequest | EmbeddingRequest,
        sample: int,
        parse: Callable[[Any], P],
    ) -> CallResult[P]:
        """The answer to `request` from the identical call in flight: its reply as a cache hit (free), else its
        outcome (FAILED with its reason, SKIPPED budget_exhausted) without a call or a cost of its own."""
        waiter: asyncio.Future[CallResult[P] | None] = loop.create_future()
        waiters.append(waiter)
        sent = await waiter
        if sent is None:  # the call raised or was cancelled: this request is made anew
            return await self.call(request, sample, parse)
        hit = self._from_cache(key, parse)
        if hit is not None:
            return hit
        if sent.status == COMPLETED and self.runtime.cache.get(key) is not None:
            # cached, but this caller's parse rejects the reply (as it would a cache hit): a call of its own
            return await self.call(request, sample, parse)
        # Not cached: the call failed, was refused its budget or its reply rejected (or the cache keeps nothing,
        # as a dry run's): the same outcome, as a cache hit would record it when it is a reply.
        return replace(
            sent,
            cost_usd=0.0,
            cached_cost_usd=sent.cost_usd or 0.0,
            latency_ms=0.0,
            calls=0,
            cache_hit=sent.status == COMPLETED,
        )

    async def _send(
        self, request: ModelRequest | EmbeddingRequest, key: str, parse: Callable[[Any], P], embedding: bool
    ) -> CallResult[P]:
        """The call made: budget reserve, send, redact, cost, settle, parse, cache write."""
        endpoint, runtime, budget = self.endpoint, self.runtime, self.budget
        reservation: Reservation | None = None
        before_send = None
        worst = None
        prices = endpoint.prices
        if budget is not None and prices is not None and prices != pricing.FREE:
            worst = pricing.worst_case_cost(prices, request.messages, request.max_tokens)
            reserve = budget.reserve

            async def before_send() -> None:  # runs while the call holds its concurrency slot
                nonlocal reservation
                reservation = await reserve(worst)

        try:
            if runtime.batch is not None and not isinstance(request, EmbeddingRequest):
                # The batch reserved the worst case of all its requests before it was submitted.
                outcome = await runtime.batch.outcome(endpoint, request, key, worst)
            else:
                outcome = await runtime.client.complete(request, before_send=before_send)
            # A provider may echo the Authorization header: no key reaches a row, the cache or a log. The client
            # redacts what it returns against every remembered secret, this caller's included (remembered when it
            # was made); an outcome that was not (a batch's answer, another client) is redacted here.
            if not outcome.redacted:
                outcome.redact(self.secrets)
        except BudgetRefused as refused:
            return CallResult(status=SKIPPED, reason=BUDGET_EXHAUSTED, detail=str(refused), cost_usd=0.0)
        cost = self._cost(outcome)
        if reservation is not None and budget is not None:
            budget.ledger.settle(reservation, cost or 0.0)
        result: CallResult[P] = CallResult(
            raw=outcome.content,
            provider_model=outcome.provider_model,
            prompt_tokens=outcome.prompt_tokens,
            completion_tokens=outcome.completion_tokens,
            cached_prompt_tokens=outcome.cached_prompt_tokens,
            cost_usd=cost,
            latency_ms=outcome.latency_ms,
            calls=outcome.attempts,
        )
        if not outcome.ok:
            result.status = FAILED
            result.reason = outcome.error_reason
            result.detail = f"after {outcome.attempts} attempt(s): {outcome.error_detail}"
            result.raw = outcome.error_detail
            return result
        try:
            result.verdict = parse(outcome.vectors if embedding else outcome.content or "")
        except ReplyRejected as rejected:
            code = TRUNCATED if outcome.finish_reason == "length" else rejected.reason
            result.status, result.reason, result.detail = FAILED, code, rejected.detail
            return result
        runtime.cache.put(
            key,
            {
                "content": outcome.content,
                "provider_model": outcome.provider_model,
                "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens,
                "cached_prompt_tokens": outcome.cached_prompt_tokens,
                "cost_usd": cost,
                **({"vectors": pack(outcome.vectors or [])} if embedding else {}),
            },
        )
        return result
