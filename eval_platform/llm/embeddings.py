"""Embedding calls: the request kind `ModelCaller.call` sends to an embeddings endpoint, and the vectors it gets.

An `EmbeddingRequest` takes the one call path (`llm.call`) exactly as a chat request does: cache, budget
reservation and settlement, retries with backoff, the model's concurrency limit, redaction of every text the
provider wrote, cost, a FAILED row with the client's reason. What differs:
- the reply is vectors, one per input text in order, not text: the caller's parse gets them (float32 arrays);
- the cost is input tokens only (litellm's price map has no output price for embedding models); the worst case a
  budget reserves is every input byte a token (`messages` below feeds `pricing.worst_case_cost` with max_tokens 0);
- the vectors are kept as float32, what providers compute and send, both when they arrive and in the cache
  (base64, a third of the JSON floats' size), so a re-run from the cache gives the very values of the first run;
- a batch API is never used for them (an evaluator's batch mode covers its chat calls).
Both transports send them: the lean OpenAI-compatible path (`POST {api_base}/embeddings`) and `litellm.aembedding`.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np


@dataclass(frozen=True)
class EmbeddingRequest:
    """The embeddings of `texts` (one request, one vector per text) from an embedding model."""

    model: str  # litellm model string
    texts: tuple[str, ...]
    api_base: str | None
    api_key: str | None
    timeout_s: float
    max_retries: int

    # What the call path reads of every request: an embedding has no completion, no fences, no sampling.
    max_tokens: ClassVar[int] = 0
    temperature: ClassVar[float] = 0.0
    fence_secret: ClassVar[None] = None
    cache_scope: ClassVar[None] = None

    @property
    def messages(self) -> list[dict[str, str]]:
        """The texts as messages, for the worst case a budget reserves (every byte a token, plus framing)."""
        return [{"role": "user", "content": text} for text in self.texts]


def embedding_cache_key(request: EmbeddingRequest, endpoint: str | None = None) -> str:
    """The cache key of an embedding: the model, where it is served (`endpoint` when the URL does not say, as for
    the local judge) and the texts. Never equal to a chat request's key (they have no `kind`)."""
    material: dict[str, object] = {
        "kind": "embeddings",
        "model": request.model,
        "api_base": endpoint or request.api_base,
    }
    material["input"] = list(request.texts)
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()


def embedding_vectors(data: Any, expected: int) -> list[np.ndarray]:
    """The vectors of an embeddings response's `data` (OpenAI's list of `{index, embedding}` objects, or litellm's
    objects of that shape), in input order, as float32. ValueError for another shape: a count other than
    `expected`, vectors of different lengths, an empty vector or a value that is not a finite number."""
    if not isinstance(data, Sequence) or isinstance(data, str | bytes):
        raise ValueError(f"'data' is {type(data).__name__}, not a list of embeddings")
    items = [(_field(item, "index"), _field(item, "embedding")) for item in data]
    if len(items) != expected:
        raise ValueError(f"{len(items)} embedding(s) for {expected} input text(s)")
    if all(isinstance(index, int) for index, _ in items):
        if sorted(index for index, _ in items) != list(range(expected)):
            raise ValueError(f"embedding indexes {sorted(i for i, _ in items)} are not 0..{expected - 1}")
        items.sort(key=lambda item: item[0])
    vectors = []
    for index, values in items:
        if not isinstance(values, list) or not values or not all(_number(v) for v in values):
            raise ValueError(f"embedding {index} is not a non-empty list of finite numbers")
        vectors.append(np.asarray(values, dtype=np.float32))
    if len({len(v) for v in vectors}) > 1:
        raise ValueError(f"embeddings of different lengths: {sorted({len(v) for v in vectors})}")
    return vectors


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def pack(vectors: Sequence[np.ndarray]) -> list[str]:
    """Vectors as the cache keeps them: base64 of their float32 bytes (little-endian)."""
    return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii") for v in vectors]


def unpack(packed: Sequence[str]) -> list[np.ndarray]:
    """`pack`'s vectors again (ValueError on an entry that is not)."""
    try:
        return [np.frombuffer(base64.b64decode(text, validate=True), dtype="<f4").astype(np.float32) for text in packed]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not packed vectors: {exc}") from exc
