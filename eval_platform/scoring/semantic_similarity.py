"""`semantic_similarity`: the cosine similarity of the embeddings of the output and of the reference.

The output (a benchmark case's output; a trace's final answer, `output`) and the reference (`reference_field`,
default `expected_output`; a list holds several references and the closest counts, as for exact_match) are
embedded by the embedding model the options name, in one request per case, through the one call path
(`scoring.embedding_calls`: cache, budget, retries, redaction, cost, as a judge call). The value is the cosine,
clipped to 0..1 (opposite directions, a negative cosine, are 0; the raw value keeps the cosine); with `threshold`
it is 1 when the cosine is at least the threshold, else 0 (a pass rate), the raw value still the cosine.

An empty output says nothing of the reference: 0, with no call. A vector of zeros (a provider's answer for a text
without words, as the local judge gives) has no direction: the cosine does not exist (NotApplicable), never 0.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
from pydantic import Field

from eval_platform.scoring.base import EMBEDDINGS, EmbeddingModelOptions, NotApplicable, Scorer
from eval_platform.scoring.squad import references


class SemanticSimilarityOptions(EmbeddingModelOptions):
    reference_field: str = "expected_output"
    threshold: float | None = Field(
        None, ge=-1, le=1, description="When set, the value is 1 when the cosine is at least this, else 0."
    )


def _texts(output: str, case: Mapping[str, Any], options: SemanticSimilarityOptions) -> tuple[str, ...]:
    """The output and its references, as one request embeds them; none when the output is empty (no call)."""
    if not output.strip():
        return ()
    refs = references(case, options.reference_field)
    if not any(ref.strip() for ref in refs):
        raise NotApplicable(f"{options.reference_field} is empty: there is nothing to compare the output with")
    return (output, *refs)


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    """cos(a, b) in float64; NotApplicable when either vector is all zeros (it has no direction)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    norms = float(np.linalg.norm(a)) * float(np.linalg.norm(b))
    if norms == 0.0:
        raise NotApplicable("an embedding is all zeros (a text without words): the cosine does not exist")
    return float(np.dot(a, b) / norms)


def _cosine(output: str, case: Mapping[str, Any], options: SemanticSimilarityOptions) -> float | None:
    """The best cosine of the output with a reference; None for an empty output."""
    if not _texts(output, case, options):
        return None
    vectors = case.get(EMBEDDINGS)
    if vectors is None:
        raise RuntimeError("semantic_similarity: the embeddings are fetched by the caller (scoring.embedding_calls)")
    usable = []
    for reference in vectors[1:]:
        try:
            usable.append(cosine(vectors[0], reference))
        except NotApplicable:
            continue
    if not usable:
        cosine(vectors[0], vectors[1])  # raises: the output's or every reference's vector is all zeros
    return max(usable)


def _value(output: str, case: Mapping[str, Any], options: SemanticSimilarityOptions) -> float:
    measured = _cosine(output, case, options)
    if measured is None:
        return 0.0
    if options.threshold is not None:
        return float(measured >= options.threshold)
    return min(1.0, max(0.0, measured))


def _describe(output: str, case: Mapping[str, Any], options: SemanticSimilarityOptions) -> tuple[float, str]:
    measured = _cosine(output, case, options)
    if measured is None:
        return 0.0, "the output is empty: similarity 0 (no embedding call)"
    return measured, f"cosine {measured:.4f} between the embeddings of the output and {options.reference_field}"


SCORERS = [
    Scorer(
        "semantic_similarity",
        SemanticSimilarityOptions,
        _value,
        lambda options: (options.reference_field,),
        describe=_describe,
        embeds=_texts,
    )
]
