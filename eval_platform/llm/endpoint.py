"""Where a model is called: its litellm model string, api_base, key (from the environment) and prices.

One resolution for every caller: an evaluator's judge model falls back on the local judge when its key is
missing (`resolve_endpoint`); a benchmark's model under test never falls back, and a `local/<name>` model is
served by the local judge (`model_endpoint`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from eval_platform.llm import pricing
from eval_platform.llm.runtime import JudgeRuntime

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.judging.models import ModelSpec

LOCAL_PREFIX = "local/"  # rows name models the local judge answers local/<name>


@dataclass(frozen=True)
class Endpoint:
    """Where calls go after credentials are resolved."""

    model: str  # litellm model string actually called
    label: str  # what rows show in `model`
    api_base: str | None
    api_key: str | None
    prices: pricing.Prices | None

    @property
    def local(self) -> bool:
        """Served by the local judge (its answers are cached apart from the live provider's)."""
        return self.label.startswith(LOCAL_PREFIX)


def local_judge_endpoint(
    name: str, runtime: JudgeRuntime, prices: pricing.Prices | None = pricing.FREE
) -> Endpoint | None:
    """The local judge's model `name`, or None when no local judge URL is configured."""
    if not runtime.local_judge_url:
        return None
    return Endpoint(f"openai/{name}", f"{LOCAL_PREFIX}{name}", runtime.local_judge_url, "local", prices)


def _keyed(spec: ModelSpec, key: str | None) -> Endpoint:
    # OpenAI-compatible servers that need no key (vLLM, llama.cpp, the local judge) still get a placeholder,
    # because the OpenAI client refuses to send a request without one.
    api_key = key or ("no-key" if spec.api_base else None)
    return Endpoint(spec.model, spec.model, spec.api_base, api_key, spec.prices())


def resolve_endpoint(spec: ModelSpec, runtime: JudgeRuntime) -> Endpoint | None:
    """A judge model's endpoint, or None when its key is missing and no local judge is configured."""
    key = runtime.env.get(spec.api_key_env) if spec.api_key_env else None
    if spec.api_key_env and not key:
        # An evaluator's models always name their local judge (the evaluator's, by default mock).
        return local_judge_endpoint(spec.local_judge or "mock", runtime)
    return _keyed(spec, key)


def evaluator_endpoint(config: EvaluatorConfig, spec: ModelSpec, runtime: JudgeRuntime) -> Endpoint | None:
    """Where one of the evaluator's models is called (see `resolve_endpoint`), priced at the batch discount
    in batch mode."""
    endpoint = resolve_endpoint(spec, runtime)
    if endpoint is not None and endpoint.prices is not None and config.batch is not None and config.batched:
        endpoint = replace(endpoint, prices=endpoint.prices.scaled(config.batch.discount))
    return endpoint


def model_endpoint(model: ModelSpec, runtime: JudgeRuntime) -> tuple[Endpoint | None, str | None]:
    """A model under test's endpoint, or (None, why not): a missing key skips, never falls back."""
    if model.model.startswith(LOCAL_PREFIX):
        name, prices = model.model.removeprefix(LOCAL_PREFIX), model.prices() or pricing.FREE
        endpoint = local_judge_endpoint(name, runtime, prices)
        if endpoint is None:
            return None, "the model is served by the local judge, and no local_judge_url is configured"
        return endpoint, None
    key = runtime.env.get(model.api_key_env) if model.api_key_env else None
    if model.api_key_env and not key:
        return None, f"environment variable {model.api_key_env} is not set"
    return _keyed(model, key), None
