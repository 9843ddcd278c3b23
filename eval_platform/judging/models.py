"""A judge model: its litellm string, endpoint, key variable, local judge and prices."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pydantic import Field

from eval_platform.llm import pricing
from eval_platform.llm.endpoint import Endpoint, ModelAddress, resolve_endpoint
from eval_platform.strict import Strict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.llm.runtime import ModelRuntime


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


def evaluator_endpoint(config: EvaluatorConfig, spec: ModelSpec, runtime: ModelRuntime) -> Endpoint | None:
    """Where one of the evaluator's models is called (see `llm.endpoint.resolve_endpoint`), priced at the batch
    discount in batch mode."""
    endpoint = resolve_endpoint(spec.address(), runtime)
    if endpoint is not None and endpoint.prices is not None and config.batch is not None and config.batched:
        endpoint = replace(endpoint, prices=endpoint.prices.scaled(config.batch.discount))
    return endpoint
