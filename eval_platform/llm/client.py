"""The one door to LLM providers: litellm, async, with retries, timeouts and bounded concurrency per model.

`ModelClient` is the interface the runner depends on; `LiteLLMModelClient` is the real one. Tests point
evaluators at an OpenAI-compatible server on 127.0.0.1 instead of replacing this code.
"""

from __future__ import annotations

import asyncio
import functools
import os
import random
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from eval_platform.llm.concurrency import NEW, RETRY, EndpointLimiter
from eval_platform.llm.embeddings import EmbeddingRequest, embedding_vectors
from eval_platform.llm.openai_compat import (
    OpenAICompatTransport,
    ProviderHTTPError,
    is_connection_error,
    is_openai_compatible,
)
from eval_platform.llm.redaction import MIN_PIECE, clip, redact, remember
from eval_platform.llm.request_json import MessagesJSON, messages_json
from eval_platform.schemas import CONNECTION_ERROR, RATE_LIMITED, TIMEOUT, provider_error

LITELLM_LOCAL_COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"


@functools.cache
def _litellm() -> Any:
    """litellm, imported on the first call: it takes seconds, and the code location must load fast. The one place
    the platform imports litellm: it reads its bundled price map, never fetching one from the network on import
    (LITELLM_LOCAL_MODEL_COST_MAP, unless the environment says otherwise), and the environment is left as it was."""
    unset = LITELLM_LOCAL_COST_MAP_ENV not in os.environ
    if unset:
        os.environ[LITELLM_LOCAL_COST_MAP_ENV] = "True"
    try:
        import litellm
    finally:
        if unset:
            os.environ.pop(LITELLM_LOCAL_COST_MAP_ENV, None)

    litellm.suppress_debug_info = True
    # Retries are ours (Retry-After, budgets, limiter). litellm's OpenAI embedding path reads `max_retries=0` as
    # "unset" (`max_retries or DEFAULT_MAX_RETRIES`) and let the OpenAI client retry twice more: measured, 3 requests
    # per attempt (eval_platform_tests/llm/test_embedding_calls.py).
    litellm.DEFAULT_MAX_RETRIES = 0  # type: ignore[misc]  # a module constant litellm reads at call time
    return litellm


RETRYABLE_STATUS = {408, 409, 429, 500, 502, 503, 504, 529}
ERROR_DETAIL_CHARS = 2000  # a provider's error text is kept up to this length (redacted before it is cut)


@dataclass(frozen=True)
class ModelRequest:
    model: str  # litellm model string
    messages: list[dict[str, str]]
    api_base: str | None
    api_key: str | None
    temperature: float
    max_tokens: int
    timeout_s: float
    max_retries: int
    fence_secret: str | None = None  # the per-request secret in the messages' fence tags (not sent)
    cache_scope: str | None = None  # what else the cached reply belongs to (a judged span), beside the content

    @functools.cached_property
    def messages_json(self) -> MessagesJSON:
        """The messages as JSON, written once: the cache key's and the lean path's POST body's (`request_json`)."""
        return messages_json(self.messages)


@dataclass
class CallOutcome:
    """What one logical call produced after retries: a reply, or an error with a reason."""

    content: str | None = None
    provider_model: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_prompt_tokens: int = 0  # prompt tokens the provider served from its prompt cache
    finish_reason: str | None = None
    error_reason: str | None = None  # timeout | rate_limited | provider_error:<status> | connection_error
    error_detail: str | None = None
    attempts: int = 0
    latency_ms: float = 0.0
    retry_waits_s: list[float] = field(default_factory=list)
    rate_limited: int = 0  # 429 answers met on the way
    vectors: list[Any] | None = None  # an embedding request's reply: float32 arrays, one per text (no `content`)
    redacted: bool = False  # every text redacted against every secret remembered so far (`redact`)

    @property
    def ok(self) -> bool:
        return self.error_reason is None

    def redact(self, secrets: Iterable[str | None] = ()) -> CallOutcome:
        """Every text the provider wrote (reply, error, reported model) with no piece of a key; self."""
        secrets = [s for s in secrets if s and len(s) >= MIN_PIECE]  # a shorter one is never matched
        if secrets:
            remember(*secrets)  # once, then each text against every remembered secret
        self.content = redact(self.content)
        self.error_detail = redact(self.error_detail)
        self.provider_model = redact(self.provider_model)
        self.finish_reason = redact(self.finish_reason)
        self.redacted = True
        return self


class SendRefused(Exception):
    """Raised by a `before_send` hook to stop a call before anything is sent (e.g. no budget left)."""


BeforeSend = Callable[[], Awaitable[None]]


class ModelClient(Protocol):
    async def complete(
        self, request: ModelRequest | EmbeddingRequest, before_send: BeforeSend | None = None
    ) -> CallOutcome:
        """One logical call with retries. `before_send` runs once, when the call holds a concurrency slot
        and is about to be sent; it may raise `SendRefused`, which propagates with nothing sent."""
        ...


@dataclass
class RetryPolicy:
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    jitter: float = 0.25  # fraction of the delay added at random, so clients do not retry in lockstep

    def delay(self, attempt: int, retry_after_s: float | None) -> float:
        backoff = min(self.max_delay_s, self.base_delay_s * (2**attempt))
        backoff += random.uniform(0, self.jitter * backoff)
        # Retry-After is the provider saying when it will accept us again: never retry earlier.
        return max(backoff, retry_after_s) if retry_after_s is not None else backoff


def _retry_after_s(exc: Exception) -> float | None:
    if isinstance(exc, ProviderHTTPError):
        value = exc.retry_after
    else:
        headers = getattr(exc, "litellm_response_headers", None)
        if headers is None:
            response = getattr(exc, "response", None)
            headers = getattr(response, "headers", None)
        if not headers:
            return None
        value = headers.get("retry-after")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP-date Retry-After: fall back to our own backoff


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def cached_prompt_tokens(usage: Any) -> int:
    """Prompt tokens served from the provider's cache: OpenAI's prompt_tokens_details.cached_tokens, or
    Anthropic's cache_read_input_tokens (as litellm passes them on, or as the JSON usage object)."""
    cached = _field(_field(usage, "prompt_tokens_details"), "cached_tokens")
    if not cached:
        cached = _field(usage, "cache_read_input_tokens")
    try:
        return max(0, int(cached or 0))
    except (TypeError, ValueError):
        return 0


def transport_error_reason(exc: BaseException) -> tuple[str, bool] | None:
    """(reason, retryable) of a timeout, an HTTP error status or a dropped connection on our own HTTP path (the
    lean chat path and the batch Files/Batch API calls), in the codes judge_scores rows use; None otherwise."""
    if isinstance(exc, asyncio.TimeoutError):
        return TIMEOUT, True
    if isinstance(exc, ProviderHTTPError):
        if exc.status == 429:
            return RATE_LIMITED, True
        return provider_error(exc.status), exc.status in RETRYABLE_STATUS
    if is_connection_error(exc):
        return CONNECTION_ERROR, True
    return None


def _classify(exc: Exception) -> tuple[str, bool]:
    """(reason, retryable) for an exception raised by litellm or the lean path."""
    transport = transport_error_reason(exc)
    if transport is not None:
        return transport
    litellm = _litellm()
    if isinstance(exc, litellm.Timeout):
        return TIMEOUT, True
    status = getattr(exc, "status_code", None)
    if status == 429:
        return RATE_LIMITED, True
    if isinstance(exc, litellm.APIConnectionError) and status in (None, 500):
        return CONNECTION_ERROR, True
    if status is not None:
        return provider_error(status), int(status) in RETRYABLE_STATUS
    return provider_error(type(exc).__name__), False


class LiteLLMModelClient:
    """Calls any litellm model; at most `max_concurrency` calls in flight per model string, adapted to 429s
    (see `concurrency`; `adaptive=False` keeps a fixed limit, the behaviour before, for comparison).

    OpenAI-compatible endpoints go through the lean path (`openai_compat`) unless `lean=False`; everything
    else through litellm. Both share the retries, Retry-After, timeouts, limiter and `before_send` below.
    """

    def __init__(
        self, max_concurrency: int = 16, retry: RetryPolicy | None = None, adaptive: bool = True, lean: bool = True
    ):
        self.max_concurrency = max_concurrency
        self.retry = retry or RetryPolicy()
        self.adaptive = adaptive
        self.lean = lean
        self._transport = OpenAICompatTransport()
        self._lean_routes: dict[tuple[str, str | None], bool] = {}
        # Per event loop: each judge_day is its own asyncio.run, and a limiter's futures belong to one loop.
        self._limiters: dict[tuple[int, str], EndpointLimiter] = {}

    def limiter(self, model: str, loop: int | None = None) -> EndpointLimiter:
        """The limiter of `model` on the running event loop (`loop`: its id, when the caller has it)."""
        key = (loop if loop is not None else id(asyncio.get_running_loop()), model)
        if key not in self._limiters:
            self._limiters = {k: v for k, v in self._limiters.items() if k[0] == key[0]}
            self._limiters[key] = EndpointLimiter(self.max_concurrency, adaptive=self.adaptive)
        return self._limiters[key]

    async def aclose(self) -> None:
        """Close the lean path's HTTP session of the running event loop (the runner calls it per day)."""
        await self._transport.aclose()

    def _lean(self, model: str, api_base: str | None) -> bool:
        """Whether this call takes the lean path (looked up in litellm's price map once per model and base)."""
        lean = self._lean_routes.get((model, api_base))
        if lean is None:
            lean = self._lean_routes[(model, api_base)] = self.lean and is_openai_compatible(model, api_base)
        return lean

    async def _send(
        self, request: ModelRequest | EmbeddingRequest, loop: int
    ) -> tuple[Any, str | None, str | None, Any]:
        """(content, finish_reason, provider model, usage) of one attempt on event loop `loop` (the running one's id);
        raises on any failure. The content of an embedding request is its vectors."""
        if isinstance(request, EmbeddingRequest):
            return await self._embed(request)
        if self._lean(request.model, request.api_base):
            reply = await self._transport.complete(
                request.model,
                request.messages,
                request.api_base,
                request.api_key,
                request.temperature,
                request.max_tokens,
                request.timeout_s,
                request.messages_json.text,
                loop=loop,
            )
            return reply.content, reply.finish_reason, reply.model, reply.usage
        response = await _litellm().acompletion(
            model=request.model,
            messages=request.messages,
            api_base=request.api_base,
            api_key=request.api_key,
            temperature=request.temperature,
            max_tokens=request.max_tokens,
            timeout=request.timeout_s,
            max_retries=0,  # retries are ours, so Retry-After and the budget stay in our hands
        )
        choice = response.choices[0]
        return (
            choice.message.content or "",
            choice.finish_reason,
            getattr(response, "model", None),
            getattr(response, "usage", None),
        )

    async def _embed(self, request: EmbeddingRequest) -> tuple[list[Any], None, str | None, Any]:
        """(vectors, None, provider model, usage) of one embedding attempt, on the lean path or litellm's; a reply
        that is not one vector per text is FAILED provider_error:200 (not retried), as a chat reply of another shape."""
        if self._lean(request.model, request.api_base):
            reply = await self._transport.embed(
                request.model, list(request.texts), request.api_base, request.api_key, request.timeout_s
            )
            data: Any = reply.data
            model: str | None = reply.model
            usage: Any = reply.usage
        else:
            response = await _litellm().aembedding(
                model=request.model,
                input=list(request.texts),
                api_base=request.api_base,
                api_key=request.api_key,
                timeout=request.timeout_s,
                max_retries=0,  # retries are ours, as for chat calls
            )
            data, model, usage = response.data, getattr(response, "model", None), getattr(response, "usage", None)
        try:
            vectors = embedding_vectors(data, len(request.texts))
        except ValueError as exc:  # answered 200, but not one vector per text: as a 200 that is not a completion
            raise ProviderHTTPError(200, f"not an embeddings response: {exc}") from exc
        return vectors, None, model, usage

    async def complete(
        self, request: ModelRequest | EmbeddingRequest, before_send: BeforeSend | None = None
    ) -> CallOutcome:
        outcome = CallOutcome()
        started = time.perf_counter()
        # Looked up once per call: in Python 3.11 each `get_running_loop()` is a getpid() system call.
        loop = id(asyncio.get_running_loop())
        for attempt in range(request.max_retries + 1):
            outcome.attempts = attempt + 1
            limiter = self.limiter(request.model, loop)
            await limiter.acquire(RETRY if attempt else NEW)
            try:
                try:
                    if before_send is not None:
                        await before_send()  # a budget reservation: taken when the call is about to go out
                        before_send = None
                    content, finish_reason, provider_model, usage = await self._send(request, loop)
                finally:
                    limiter.release()
            except SendRefused:
                raise
            except Exception as exc:  # both paths map every provider failure to an exception
                reason, retryable = _classify(exc)
                outcome.error_reason = reason
                outcome.error_detail = clip(f"{type(exc).__name__}: {exc}", ERROR_DETAIL_CHARS, [request.api_key])
                retry_after = _retry_after_s(exc)
                if reason == RATE_LIMITED:
                    limiter.rate_limited(retry_after)
                    outcome.rate_limited += 1
                if not retryable or attempt == request.max_retries:
                    break
                wait = self.retry.delay(attempt, retry_after)
                outcome.retry_waits_s.append(wait)
                await asyncio.sleep(wait)
                continue
            limiter.succeeded()
            if isinstance(request, EmbeddingRequest):
                outcome.vectors, content = content, None  # `_embed`'s reply is the vectors, not text
            outcome.content = content
            outcome.finish_reason = finish_reason
            outcome.provider_model = provider_model
            if type(usage) is dict and "prompt_tokens_details" not in usage and "cache_read_input_tokens" not in usage:
                # The lean path's usual usage object: no cached tokens reported.
                outcome.prompt_tokens = int(usage.get("prompt_tokens") or 0)
                outcome.completion_tokens = int(usage.get("completion_tokens") or 0)
            else:
                outcome.prompt_tokens = int(_field(usage, "prompt_tokens") or 0)
                outcome.completion_tokens = int(_field(usage, "completion_tokens") or 0)
                outcome.cached_prompt_tokens = cached_prompt_tokens(usage)
            outcome.error_reason = outcome.error_detail = None
            break
        outcome.latency_ms = (time.perf_counter() - started) * 1000
        # The door from the providers: a key echoed in a reply or an error goes no further.
        return outcome.redact([request.api_key])
