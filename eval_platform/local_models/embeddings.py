"""Sentence embeddings from a local model folder: the transformer's last layer pooled over each text's tokens.

The pooling is the folder's own when it is a sentence-transformers model (its Pooling config, then its Normalize
module), so the vectors are the ones sentence-transformers gives for that folder; a plain transformers folder is
mean-pooled over the attention mask (padding excluded) and not normalized: cosine similarity does not need it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eval_platform.local_models.loading import LocalModel, LocalModelError, load_model, require_packages

# Texts per forward pass: what bounds memory (a batch's activations), not the number of texts.
DEFAULT_BATCH_SIZE = 32


def embed_texts(model_path: str, texts: list[str], batch_size: int = DEFAULT_BATCH_SIZE) -> list[list[float]]:
    """One vector per text, in order, from the model in `model_path` (CPU, loaded once per process).

    The same texts give the same vectors; a text longer than the model's maximum sequence length is truncated to
    it. `LocalModelError` names the folder when it is missing or not a model, or the extra to install."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, not {batch_size}")
    if not texts:
        return []
    model = load_model(model_path)
    torch, _ = require_packages()
    layout = model.layout
    prepared = [_prepare(text, layout.prompt, layout.do_lower_case) for text in texts]
    vectors: list[list[float]] = []
    with torch.inference_mode():
        for start in range(0, len(prepared), batch_size):
            batch = prepared[start : start + batch_size]
            tokens, mask = _forward(model, batch)
            pooled = pool(torch, tokens, mask, layout.pooling)
            if layout.normalize:
                pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            vectors += pooled.tolist()
    return vectors


def _prepare(text: str, prompt: str, lower: bool) -> str:
    if not isinstance(text, str):
        raise LocalModelError(f"embed_texts needs strings, not {type(text).__name__}")
    text = prompt + text
    return text.lower() if lower else text


def _forward(model: LocalModel, batch: Sequence[str]) -> tuple[Any, Any]:
    """The last layer's token embeddings (batch x tokens x dim, float32) and the attention mask."""
    encoded = model.tokenizer(
        list(batch), padding=True, truncation=True, max_length=model.max_length, return_tensors="pt"
    )
    output = model.model(**encoded)
    return output.last_hidden_state.float(), encoded["attention_mask"]


def pool(torch: Any, tokens: Any, mask: Any, modes: Sequence[str]) -> Any:
    """Sentence vectors from token embeddings (right-padded), each mode as sentence-transformers computes it,
    several modes concatenated in the given order."""
    weights = mask.unsqueeze(-1).to(tokens.dtype)
    counts = torch.clamp(weights.sum(dim=1), min=1e-9)
    lengths = mask.sum(dim=1)
    parts = []
    for mode in modes:
        if mode == "cls":
            parts.append(tokens[:, 0])
        elif mode == "max":
            parts.append(tokens.masked_fill(weights == 0, float("-inf")).max(dim=1).values)
        elif mode == "mean":
            parts.append((tokens * weights).sum(dim=1) / counts)
        elif mode == "mean_sqrt_len_tokens":
            parts.append((tokens * weights).sum(dim=1) / torch.sqrt(counts))
        elif mode == "weightedmean":
            positions = torch.arange(1, tokens.shape[1] + 1, dtype=tokens.dtype).view(1, -1, 1)
            weighted = weights * positions
            parts.append((tokens * weighted).sum(dim=1) / torch.clamp(weighted.sum(dim=1), min=1e-9))
        elif mode == "lasttoken":
            parts.append(tokens[torch.arange(tokens.shape[0]), lengths - 1])
        else:  # read_layout admits only the modes above
            raise LocalModelError(f"unknown pooling mode '{mode}'")
    return torch.cat(parts, dim=-1)
