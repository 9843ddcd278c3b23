"""A judge model: its litellm string, endpoint, key variable, local judge and prices."""

from __future__ import annotations

from pydantic import Field

from eval_platform.llm import pricing
from eval_platform.strict import Strict


class ModelSpec(Strict):
    model: str = Field(description="Any litellm model string, e.g. openai/gpt-4o-mini or anthropic/claude-3-5-haiku.")
    api_base: str | None = None
    api_key_env: str | None = None
    local_judge: str | None = None
    input_cost_per_million: float | None = Field(None, ge=0)
    output_cost_per_million: float | None = Field(None, ge=0)
    cached_input_cost_per_million: float | None = Field(
        None,
        ge=0,
        description="Price of prompt tokens served from the provider's cache; default: litellm's, else input",
    )

    def prices(self) -> pricing.Prices | None:
        """USD per million input/output (and cached input) tokens: the override, else litellm's bundled price map."""
        if self.input_cost_per_million is not None and self.output_cost_per_million is not None:
            return pricing.Prices(
                self.input_cost_per_million, self.output_cost_per_million, self.cached_input_cost_per_million
            )
        return pricing.lookup(self.model, self.api_base)

    def has_price(self) -> bool:
        """Explicit prices, or a price litellm knows: what a budget needs (a local model's 'free' is a guess)."""
        explicit = self.input_cost_per_million is not None and self.output_cost_per_million is not None
        return explicit or pricing.known(self.model) is not None
