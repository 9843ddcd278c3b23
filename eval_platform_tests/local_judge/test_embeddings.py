"""The local judge's `/v1/embeddings`, over real HTTP on 127.0.0.1: deterministic, normalized hashed bag-of-words
vectors (texts sharing words are closer), OpenAI's response shape with `usage.prompt_tokens`, failures on request."""

from __future__ import annotations

import httpx
import numpy as np
from scipy.spatial.distance import cosine as cosine_distance

from eval_platform.local_judge.answers import approx_tokens

TEXTS = [
    "The capital of France is Paris.",
    "Paris is the capital city of France.",
    "Bananas are rich in potassium.",
]


def post(server, body: dict) -> httpx.Response:
    return httpx.post(f"{server.base_url}/embeddings", json=body, timeout=30)


def test_vectors_are_normalized_deterministic_and_closer_for_texts_sharing_words(local_judge):
    reply = post(local_judge, {"model": "embed", "input": TEXTS})
    assert reply.status_code == 200
    body = reply.json()
    assert [d["index"] for d in body["data"]] == [0, 1, 2]
    assert body["usage"]["prompt_tokens"] == sum(approx_tokens(t) for t in TEXTS)
    vectors = np.array([d["embedding"] for d in body["data"]])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    similar, unrelated = 1 - cosine_distance(vectors[0], vectors[1]), 1 - cosine_distance(vectors[0], vectors[2])
    assert similar > 0.5 and unrelated < 0.2 and similar > unrelated
    again = post(local_judge, {"model": "embed", "input": TEXTS[0]}).json()["data"][0]["embedding"]
    assert again == body["data"][0]["embedding"]


def test_a_bad_request_or_a_fault_model_is_an_error_answer(local_judge):
    assert post(local_judge, {"model": "embed", "input": []}).status_code == 400
    assert post(local_judge, {"model": "embed", "input": [1, 2]}).status_code == 400
    assert post(local_judge, {"model": "fault/server_error", "input": "x"}).status_code >= 500
