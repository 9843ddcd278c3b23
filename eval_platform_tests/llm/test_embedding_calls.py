"""Embedding calls through the one call path (`ModelCaller` with an `EmbeddingRequest`), over real HTTP to the local
judge's `/v1/embeddings` on 127.0.0.1, on both transports (the lean OpenAI-compatible path and litellm's
`aembedding`): the vectors the server sent, input-token cost, the cache, budgets, failures and keys."""

from __future__ import annotations

import asyncio
import sqlite3

import httpx
import numpy as np
import pytest

from eval_platform.llm import pricing
from eval_platform.llm.budget import Budget, BudgetLedger
from eval_platform.llm.cache import ModelCache, cache_key
from eval_platform.llm.call import ModelCaller
from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
from eval_platform.llm.embeddings import embedding_cache_key, embedding_vectors
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.runtime import ModelRuntime
from eval_platform_tests.conftest import judge_requests
from eval_platform_tests.llm.test_redaction import holds_a_piece

TEXTS = ["The cat sat on the mat.", "A cat was sitting on a mat!", "Quarterly revenue rose by four percent."]
PRICED = "openai/text-embedding-3-small"  # litellm's map: 0.02 USD per million input tokens, no output price
KEY = "sk-embed-9f3Qx7Lm2Vb8Rt4Kw6Zp1Hd5"


def runtime(tmp_path, lean: bool) -> ModelRuntime:
    return ModelRuntime(
        client=LiteLLMModelClient(lean=lean, retry=RetryPolicy(base_delay_s=0.01, max_delay_s=0.02)),
        cache=ModelCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={},
    )


def endpoint(server, model: str = PRICED, prices=None, key: str = "no-key") -> Endpoint:
    prices = pricing.lookup(model, server.base_url) if prices is None else prices
    return Endpoint(model, model, server.base_url, key, prices)


def embed(caller: ModelCaller, texts=TEXTS, max_retries: int = 0):
    async def main():
        try:
            request = caller.embedding_request(list(texts), timeout_s=10, max_retries=max_retries)
            return await caller.call(request, 0, parse=lambda vectors: vectors)
        finally:
            await caller.runtime.client.aclose()

    result = asyncio.run(main())
    caller.runtime.cache.flush()
    return result


def served(server, texts=TEXTS) -> list[np.ndarray]:
    """The vectors the local judge sends for `texts`, read over HTTP without the platform."""
    body = httpx.post(f"{server.base_url}/embeddings", json={"model": "x", "input": list(texts)}, timeout=30).json()
    return [np.array(item["embedding"]) for item in sorted(body["data"], key=lambda d: d["index"])]


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "litellm"])
def test_an_embedding_call_returns_the_served_vectors_and_costs_its_input_tokens(local_judge, tmp_path, lean):
    caller = ModelCaller(runtime(tmp_path, lean), endpoint(local_judge))
    before = judge_requests(local_judge)
    result = embed(caller)
    assert result.status == "COMPLETED" and result.calls == 1 and not result.cache_hit
    assert judge_requests(local_judge) - before == 1  # one request for the three texts
    expected = served(local_judge)
    assert len(result.verdict) == 3
    for got, want in zip(result.verdict, expected, strict=True):
        assert got.dtype == np.float32 and np.allclose(got, want, atol=1e-7)
    assert result.provider_model == "local/text-embedding-3-small"
    assert result.prompt_tokens > 0 and result.completion_tokens == 0
    assert result.cost_usd == pytest.approx(result.prompt_tokens * 0.02 / 1e6)

    # Re-run: from the cache, the same float32 vectors, nothing sent, nothing paid (what it cost is remembered).
    before = judge_requests(local_judge)
    again = embed(ModelCaller(runtime(tmp_path, lean), endpoint(local_judge)))
    assert judge_requests(local_judge) == before
    assert again.cache_hit and again.cost_usd == 0.0 and again.calls == 0
    assert again.cached_cost_usd == pytest.approx(result.cost_usd)
    assert all(np.array_equal(a, b) for a, b in zip(again.verdict, result.verdict, strict=True))


def test_an_embedding_of_unknown_price_has_an_unknown_cost_never_zero(local_judge, tmp_path):
    # An embedding model litellm does not price, behind a gateway that is not loopback: no price (pricing's rule).
    unpriced = pricing.lookup("openai/in-house-embedder", "https://gateway.example.com/v1")
    assert unpriced is None
    unknown = Endpoint("openai/in-house-embedder", "e", local_judge.base_url, "k", None)
    caller = ModelCaller(runtime(tmp_path, True), unknown)
    result = embed(caller)
    assert result.status == "COMPLETED" and result.prompt_tokens > 0 and result.cost_usd is None


def test_an_embedding_cache_entry_is_never_a_chat_reply(local_judge, tmp_path):
    """An embedding and a chat request of the same model and text have different keys: neither answers the other."""
    caller = ModelCaller(runtime(tmp_path, True), endpoint(local_judge))
    request = caller.embedding_request(["hello"], timeout_s=1, max_retries=0)
    messages = [{"role": "user", "content": "hello"}]
    chat = caller.request(messages, temperature=0, max_tokens=0, timeout_s=1, max_retries=0)

    assert embedding_cache_key(request) != cache_key(chat, 0)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "litellm"])
def test_a_budget_that_cannot_afford_the_call_skips_it_unsent(local_judge, tmp_path, lean):
    rt = runtime(tmp_path, lean)
    budget = Budget(rt.ledger, "embedder", 0.0, None, 900.0)
    before = judge_requests(local_judge)
    result = embed(ModelCaller(rt, endpoint(local_judge), budget=budget))
    assert result.status == "SKIPPED" and result.reason == "budget_exhausted" and result.verdict is None
    assert "daily" in result.detail and result.cost_usd == 0.0
    assert judge_requests(local_judge) == before  # nothing was sent


def test_a_budget_reserves_and_settles_an_embedding_to_its_cost(local_judge, tmp_path):
    rt = runtime(tmp_path, True)
    budget = Budget(rt.ledger, "embedder", 1.0, None, 900.0)
    result = embed(ModelCaller(rt, endpoint(local_judge), budget=budget))
    assert result.status == "COMPLETED"
    day = rt.ledger.clock().strftime("%Y-%m-%d")
    assert rt.ledger.spent("embedder", day=day) == pytest.approx(result.cost_usd)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "litellm"])
def test_a_failing_embeddings_endpoint_is_failed_with_its_reason_after_retries_and_not_cached(
    local_judge, tmp_path, lean
):
    model = "openai/fault/server_error"
    caller = ModelCaller(runtime(tmp_path, lean), endpoint(local_judge, model, prices=pricing.FREE))
    before = judge_requests(local_judge)
    result = embed(caller, max_retries=2)
    assert result.status == "FAILED" and result.reason == "provider_error:500" and result.verdict is None
    assert result.calls == 3 and "injected by fault/server_error" in result.detail
    assert judge_requests(local_judge) - before == 3
    embed(ModelCaller(runtime(tmp_path, lean), endpoint(local_judge, model, prices=pricing.FREE)))
    assert judge_requests(local_judge) - before == 4  # a failure is not cached: the next run asks again


def test_a_reply_is_read_as_one_float32_vector_per_text_in_input_order_or_refused():
    data = [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1.0, 0.0]}]
    first, second = embedding_vectors(data, 2)
    assert first.tolist() == [1.0, 0.0] and second.tolist() == [0.0, 1.0] and first.dtype == np.float32
    for bad, why in [
        (data[:1], "1 embedding"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}], "different lengths"),
        ([{"index": 0, "embedding": [float("nan")]}, {"index": 1, "embedding": [1.0]}], "finite"),
        ([{"index": 0, "embedding": "AAAA"}, {"index": 1, "embedding": [1.0]}], "finite"),
        ({"data": []}, "not a list"),
    ]:
        with pytest.raises(ValueError, match=why):
            embedding_vectors(bad, 2)


@pytest.mark.parametrize("lean", [True, False], ids=["lean", "litellm"])
@pytest.mark.parametrize("model", ["fault/echo_key", "fault/echo_key_long", "fault/echo_key_reply"])
def test_no_piece_of_the_key_an_embeddings_provider_echoes_is_kept(local_judge, tmp_path, lean, model):
    rt = runtime(tmp_path, lean)
    caller = ModelCaller(rt, endpoint(local_judge, f"openai/{model}", prices=pricing.FREE, key=KEY))
    result = embed(caller)
    texts = [result.reason, result.detail, result.raw, result.provider_model]
    if model == "fault/echo_key_reply":
        assert result.status == "COMPLETED" and "[REDACTED]" in result.provider_model  # it did echo
        again = embed(ModelCaller(runtime(tmp_path, lean), endpoint(local_judge, f"openai/{model}", pricing.FREE, KEY)))
        assert again.cache_hit
        texts.append(again.provider_model)
    else:
        assert result.status == "FAILED" and "[REDACTED]" in result.detail  # it did echo, in the error
    assert not any(holds_a_piece(text, KEY) for text in texts if text)
    if model == "fault/echo_key_reply":  # a failure is not cached
        with sqlite3.connect(tmp_path / "cache" / "replies.sqlite") as db:
            stored = "".join(entry for (entry,) in db.execute("SELECT entry FROM replies"))
        assert "[REDACTED]" in stored and not holds_a_piece(stored, KEY)
