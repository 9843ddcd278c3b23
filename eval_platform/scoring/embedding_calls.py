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

The hook for a local sentence-embedding model (a `model_path:` option, served by
`eval_platform.local_models.embed_texts(model_path, texts)`, imported lazily, no call and no cost) belongs here, in
`embed_cases`, the one place that turns a scorer's texts into vectors; that module is not in this branch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from eval_platform.judging.models import ModelSpec
from eval_platform.llm.budget import Budget
from eval_platform.llm.call import CallResult, ModelCaller
from eval_platform.llm.endpoint import LOCAL_PREFIX, Endpoint, model_endpoint
from eval_platform.llm.runtime import JudgeRuntime, run_calls
from eval_platform.schemas import NO_CREDENTIALS, NO_LOCAL_JUDGE, SKIPPED
from eval_platform.scoring.base import EmbeddingModelOptions


def embedding_model(options: EmbeddingModelOptions) -> ModelSpec:
    """The embedding model as a model spec: its price is litellm's unless `input_cost_per_million` is given
    (an embedding has no output tokens)."""
    explicit = options.input_cost_per_million is not None
    return ModelSpec(
        model=options.model,
        api_base=options.api_base,
        api_key_env=options.api_key_env,
        input_cost_per_million=options.input_cost_per_million,
        output_cost_per_million=0.0 if explicit else None,
    )


def embedding_endpoint(options: EmbeddingModelOptions, runtime: JudgeRuntime) -> tuple[Endpoint | None, str | None]:
    """Where the embeddings are fetched, or (None, why not): a missing key, or a local/ model without a local judge."""
    return model_endpoint(embedding_model(options), runtime)


def embed_cases(
    options: EmbeddingModelOptions,
    texts: Sequence[tuple[str, ...]],
    runtime: JudgeRuntime,
    budget: Budget | None = None,
) -> tuple[list[CallResult | None], str | None]:
    """Per case, the call result of embedding its texts (its verdict: one float32 vector per text), or None for a
    case with no text (no call); and why the cache could not keep the replies, if it could not (they are paid for:
    the results stand, and the next run pays again)."""
    endpoint, why = embedding_endpoint(options, runtime)
    if endpoint is None:
        reason = NO_LOCAL_JUDGE if options.model.startswith(LOCAL_PREFIX) else NO_CREDENTIALS
        skipped = CallResult(status=SKIPPED, reason=reason, detail=why, cost_usd=0.0)
        return [skipped if case else None for case in texts], None
    keys = [options.api_key_env] if options.api_key_env else []
    caller = ModelCaller(runtime, endpoint, budget=budget, key_envs=keys)
    results = run_calls(_embed_all(caller, options, texts))
    return results, runtime.cache.flush_or_report()


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
