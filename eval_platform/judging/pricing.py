"""Judge prices in USD per million tokens, from litellm's bundled price map.

Models served from this machine (an api_base on localhost, or the local judge's `local/...` names) cost 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlparse

import litellm

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class Prices:
    input_per_million: float
    output_per_million: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_million + completion_tokens * self.output_per_million) / 1e6


FREE = Prices(0.0, 0.0)


def is_local(model: str, api_base: str | None) -> bool:
    if model.startswith(("local/", "ollama/", "ollama_chat/")):
        return True
    return bool(api_base) and urlparse(api_base).hostname in _LOCAL_HOSTS


def lookup(model: str, api_base: str | None = None) -> Prices | None:
    """Prices for a litellm model string, or None when litellm's map does not know the model."""
    if is_local(model, api_base):
        return FREE
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for key in candidates:
        entry = litellm.model_cost.get(key)
        if entry and entry.get("input_cost_per_token") is not None:
            return Prices(
                float(entry["input_cost_per_token"]) * 1e6,
                float(entry.get("output_cost_per_token") or 0.0) * 1e6,
            )
    return None
