"""Judge prices in USD per million tokens, from litellm's bundled price map.

The rule (conservative, so that spend is never under-counted): a model whose price litellm knows is
charged that price wherever it is served. A localhost `api_base` is how people reach the LiteLLM proxy,
an SSH tunnel or a corporate gateway in front of a paid provider, so it does not make a known model free.
A call is free only when its configuration says so (explicit prices of 0) or when the model is local and
has no known price (the local judge's `local/...` names, `ollama/...`, or an unknown model behind a
loopback `api_base`). Budgets need a price: a budget on a model without one is refused where the
configuration loads.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

_LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1", "0.0.0.0"}


@dataclass(frozen=True)
class Prices:
    input_per_million: float
    output_per_million: float
    # Input tokens the provider served from its prompt cache; None: no known discount, charged as input.
    cached_input_per_million: float | None = None

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_prompt_tokens: int = 0) -> float:
        cached = min(max(cached_prompt_tokens, 0), prompt_tokens)
        cached_rate = self.input_per_million if self.cached_input_per_million is None else self.cached_input_per_million
        return (
            (prompt_tokens - cached) * self.input_per_million
            + cached * cached_rate
            + completion_tokens * self.output_per_million
        ) / 1e6

    def scaled(self, factor: float) -> Prices:
        """Every rate times `factor`: a batch API's discount applies to input, cached input and output alike."""
        cached = None if self.cached_input_per_million is None else self.cached_input_per_million * factor
        return Prices(self.input_per_million * factor, self.output_per_million * factor, cached)


FREE = Prices(0.0, 0.0)


def worst_case_prompt_tokens(messages: list[dict[str, str]]) -> int:
    """At most this many prompt tokens: BPE tokens are at least one byte each, so bytes bound tokens; plus
    per-message framing."""
    return sum(len(m["content"].encode()) + 8 for m in messages) + 16


def worst_case_cost(prices: Prices, messages: list[dict[str, str]], max_tokens: int) -> float:
    """The most a call can cost: every prompt byte a token and the full `max_tokens` of completion. What a
    budget reserves before sending and what the dry run bills."""
    return prices.cost(worst_case_prompt_tokens(messages), max_tokens)


def is_local(model: str, api_base: str | None) -> bool:
    if model.startswith(("local/", "ollama/", "ollama_chat/")):
        return True
    return bool(api_base) and urlparse(api_base).hostname in _LOCAL_HOSTS


@functools.cache
def model_cost() -> dict[str, Any]:
    """litellm's bundled price map, read from its JSON file without importing litellm (2-3 s at start-up):
    the same file litellm loads as `litellm.model_cost` with LITELLM_LOCAL_MODEL_COST_MAP=True."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("litellm is not installed: its price map prices the judge calls")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return json.loads((folder / "model_prices_and_context_window_backup.json").read_text(encoding="utf-8"))


def known(model: str) -> Prices | None:
    """litellm's bundled price for a model string, or None when its map does not know the model."""
    candidates = [model]
    if "/" in model:
        candidates.append(model.split("/", 1)[1])
    for key in candidates:
        entry = model_cost().get(key)
        if entry and entry.get("input_cost_per_token") is not None:
            cached = entry.get("cache_read_input_token_cost")
            return Prices(
                float(entry["input_cost_per_token"]) * 1e6,
                float(entry.get("output_cost_per_token") or 0.0) * 1e6,
                None if cached is None else float(cached) * 1e6,
            )
    return None


def lookup(model: str, api_base: str | None = None) -> Prices | None:
    """The price to charge: litellm's where known (wherever served), FREE for an unknown local model, else None."""
    prices = known(model)
    if prices is not None:
        return prices
    return FREE if is_local(model, api_base) else None
