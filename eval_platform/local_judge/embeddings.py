"""`/v1/embeddings` of the local judge: deterministic vectors, so embedding-based metrics run offline and in tests.

The construction (a hashed bag of words, "the hashing trick"): a text is lower-cased and split into word tokens
(`\\w+`); each token adds 1 to coordinate `sha256(token) mod EMBEDDING_DIM`; the count vector is divided by its
L2 norm. Texts sharing words therefore point in similar directions (cosine = the overlap of their word counts,
up to hash collisions), texts sharing none are orthogonal (cosine 0, never negative), and a text is always the
same vector. A text with no word is the zero vector (its cosine with anything is undefined). It measures word
overlap, not meaning: a stand-in for a provider's model, never a quality signal.

`usage.prompt_tokens` counts the tokens as the chat path does (`answers.approx_tokens`), so spend can be tested.
A wire plugged into the server (`server.Wire.embedding`) may fail a model's request, or name the model its
vectors report.
"""

from __future__ import annotations

import hashlib
import math
import re
from typing import Any

from eval_platform.local_judge.answers import JudgeRequestError, approx_tokens

EMBEDDING_DIM = 256
_WORD = re.compile(r"\w+")


def embed(text: str, dim: int = EMBEDDING_DIM) -> list[float]:
    """The text's hashed bag-of-words vector, L2-normalized (all zeros for a text without words)."""
    counts = [0.0] * dim
    for token in _WORD.findall(text.lower()):
        counts[int.from_bytes(hashlib.sha256(token.encode()).digest()[:8], "big") % dim] += 1.0
    norm = math.sqrt(sum(c * c for c in counts))
    return [c / norm for c in counts] if norm else counts


def embedding_inputs(body: Any) -> tuple[str, list[str]]:
    """(model, texts) of an embeddings request body; JudgeRequestError (400) for another shape."""
    if not isinstance(body, dict) or not isinstance(body.get("model"), str):
        raise JudgeRequestError(400, "missing required parameter: 'model'", code="missing_model")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise JudgeRequestError(400, "'input' must be a string or a non-empty list of strings", code="invalid_input")
    return body["model"], texts


def embeddings_response(model: str, texts: list[str], reported_model: str | None = None) -> dict[str, Any]:
    """OpenAI's embeddings response for `texts`, reporting `local/<model>` (or `reported_model`)."""
    tokens = sum(approx_tokens(text) for text in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": embed(text)} for i, text in enumerate(texts)],
        "model": reported_model or f"local/{model}",
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
