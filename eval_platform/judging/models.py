"""A judge model: its litellm string, endpoint, key variable, local judge and prices."""

from __future__ import annotations

from pydantic import Field

from eval_platform.llm import pricing
from eval_platform.llm.endpoint import ModelAddress
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

    def address(self) -> ModelAddress:
        """The model as the call layer calls it (`llm.endpoint`)."""
        return ModelAddress(
            self.model,
            self.api_base,
            self.api_key_env,
            self.local_judge,
            self.input_cost_per_million,
            self.output_cost_per_million,
            self.cached_input_cost_per_million,
        )

    def prices(self) -> pricing.Prices | None:
        """USD per million input/output (and cached input) tokens: the override, else litellm's bundled price map."""
        return self.address().prices()

    def has_price(self) -> bool:
        """Explicit prices, or a price litellm knows: what a budget needs (a local model's 'free' is a guess)."""
        return self.address().has_price()
