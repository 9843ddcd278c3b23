"""Embeddings for the scorers that compare them (`Scorer.embeds`: semantic_similarity), fetched before scoring.

A scorer's `value` runs per case and synchronously; an embedding is a model call, paid for and fallible. So the
caller (a benchmark task's scoring, a check evaluator's day) first asks `embed_cases` for the vectors of every
case's texts: one request per case (its output and references together), all concurrent under the model's
concurrency limit, each through the one call path (`llm.call.ModelCaller`: cache, budget reservation and
settlement, retries, redaction, cost). Each case gets a `CallResult`: COMPLETED with its vectors as the verdict, or
FAILED / SKIPPED with the reason, which the caller makes the case's status, never a score.

The model is the scorer's `EmbeddingModelOptions`: a litellm string with its api_base and key variable (priced from
litellm's map, input tokens only; an unknown price is an unknown cost, never free), or `local/<name>` for the local
judge. A key that is not set SKIPS the case (no_credentials); it never falls back on the local judge's stand-in,
whose vectors measure word overlap, not meaning.

A local sentence-embedding model (`model_path`: a folder on this machine, `local_models.embed_texts`) makes no call:
its vectors are computed here, in this process, a batch of texts at a time, with no cache, budget or cost (cost 0,
known); a folder that cannot be loaded or run FAILS every case with `local_model_error` and the reason.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from eval_platform.llm.budget import Budget
from eval_platform.llm.call import CallResult, ModelCaller
from eval_platform.llm.endpoint import LOCAL_PREFIX, Endpoint, ModelAddress, model_endpoint
from eval_platform.llm.runtime import ModelRuntime, run_calls
from eval_platform.schemas import FAILED, LOCAL_MODEL_ERROR, NO_CREDENTIALS, NO_LOCAL_JUDGE, SKIPPED
from eval_platform.scoring.base import EmbeddingModelOptions


def embedding_model(options: EmbeddingModelOptions) -> ModelAddress:
    """The embedding model as the call layer calls it: its price is litellm's unless `input_cost_per_million` is given
    (an embedding has no output tokens)."""
    explicit = options.input_cost_per_million is not None
    if options.model is None:
        raise ValueError("a local model (model_path) makes no call: it has no model spec")
    return ModelAddress(
        model=options.model,
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        input_cost_per_million=options.input_cost_per_million,
        output_cost_per_million=0.0 if explicit else None,
        cached_input_cost_per_million=None,
    )


def embedding_endpoint(options: EmbeddingModelOptions, runtime: ModelRuntime) -> tuple[Endpoint | None, str | None]:
    """Where the embeddings are fetched, or (None, why not): a missing key, or a local/ model without a local judge."""
    return model_endpoint(embedding_model(options), runtime)


def embed_cases(
    options: EmbeddingModelOptions,
    texts: Sequence[tuple[str, ...]],
    runtime: ModelRuntime,
    budget: Budget | None = None,
) -> tuple[list[CallResult | None], str | None]:
    """Per case, the call result of embedding its texts (its verdict: one float32 vector per text), or None for a
    case with no text (no call); and why the cache could not keep the replies, if it could not (they are paid for:
    the results stand, and the next run pays again)."""
    if options.model_path is not None:
        return embed_locally(options.model_path, texts), None
    endpoint, why = embedding_endpoint(options, runtime)
    if endpoint is None:
        reason = NO_LOCAL_JUDGE if (options.model or "").startswith(LOCAL_PREFIX) else NO_CREDENTIALS
        skipped: CallResult = CallResult(status=SKIPPED, reason=reason, detail=why, cost_usd=0.0)
        return [skipped if case else None for case in texts], None
    keys = [options.api_key_env] if options.api_key_env else []
    caller = ModelCaller(runtime, endpoint, budget=budget, key_envs=keys)
    results = run_calls(_embed_all(caller, options, texts))
    return results, runtime.cache.flush_or_report()


def embed_locally(model_path: str, texts: Sequence[tuple[str, ...]]) -> list[CallResult | None]:
    """`embed_cases` with a local model: every case's texts embedded in this process (float32 vectors, as a
    provider's), no call and no cost; a folder that cannot be loaded or run FAILS every case with its reason."""
    from eval_platform.local_models import LocalModelError, embed_texts  # torch is imported on first use

    flat = [text for case in texts for text in case]
    try:
        vectors = iter(embed_texts(model_path, flat) if flat else [])
    except LocalModelError as exc:
        failed: CallResult = CallResult(status=FAILED, reason=LOCAL_MODEL_ERROR, detail=str(exc), cost_usd=0.0)
        return [failed if case else None for case in texts]
    model = f"local_model:{model_path}"
    results: list[CallResult | None] = []
    for case in texts:
        verdict = [np.asarray(next(vectors), dtype=np.float32) for _ in case]
        results.append(CallResult(verdict=verdict, provider_model=model, cost_usd=0.0) if case else None)
    return results


async def _embed_all(
    caller: ModelCaller, options: EmbeddingModelOptions, texts: Sequence[tuple[str, ...]]
) -> list[CallResult | None]:
    async def one(case: tuple[str, ...]) -> CallResult | None:
        if not case:
            return None
        request = caller.embedding_request(list(case), timeout_s=options.timeout_s, max_retries=options.max_retries)
        return await caller.call(request, 0, parse=lambda vectors: vectors)

    try:
        return list(await asyncio.gather(*(one(case) for case in texts)))
    finally:
        # This event loop ends here: its HTTP sessions close with it.
        close = getattr(caller.runtime.client, "aclose", None)
        if close is not None:
            await close()
