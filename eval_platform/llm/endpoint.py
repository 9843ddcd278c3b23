"""Where a model is called: its litellm model string, api_base, key (from the environment) and prices.

One resolution for every caller: a `local/<name>` model is served by the local judge (judge models and models
under test alike); any other model is called at its provider with the key its `api_key_env` names. A judge model
whose key is missing has no endpoint (its rows are SKIPPED `no_credentials`, `unreachable` says why), unless the
runtime is in the demo's explicit mode (`local_judge_for_missing_keys`): then its evaluator's `local_judge:` model
answers (`resolve_endpoint`). A benchmark's model under test never falls back (`model_endpoint`). A local judge
URL alone never stands in for a real provider: a misspelt key variable must not turn into placeholder scores.
"""

from __future__ import annotations

from dataclasses import dataclass

from eval_platform.llm import pricing
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.schemas import NO_CREDENTIALS, NO_LOCAL_JUDGE
from eval_platform.settings import LOCAL_JUDGE_FOR_MISSING_KEYS_ENV, LOCAL_JUDGE_URL_ENV

LOCAL_PREFIX = "local/"  # rows name models the local judge answers local/<name>


@dataclass(frozen=True)
class ModelAddress:
    """A model as the call layer calls it (a judge model, a model under test, an embedding model): its litellm
    string, its api_base, the variable that holds its key, the local judge model that answers when that key is
    missing (the demo's mode), and the prices a configuration gives (else litellm's)."""

    model: str
    api_base: str | None = None
    api_key_env: str | None = None
    local_judge: str | None = None
    input_cost_per_million: float | None = None
    output_cost_per_million: float | None = None
    cached_input_cost_per_million: float | None = None

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
    name: str, runtime: ModelRuntime, prices: pricing.Prices | None = pricing.FREE
) -> Endpoint | None:
    """The local judge's model `name`, or None when no local judge URL is configured."""
    if not runtime.local_judge_url:
        return None
    return Endpoint(f"openai/{name}", f"{LOCAL_PREFIX}{name}", runtime.local_judge_url, "local", prices)


def _keyed(spec: ModelAddress, key: str | None) -> Endpoint:
    # OpenAI-compatible servers that need no key (vLLM, llama.cpp, the local judge) still get a placeholder,
    # because the OpenAI client refuses to send a request without one.
    api_key = key or ("no-key" if spec.api_base else None)
    return Endpoint(spec.model, spec.model, spec.api_base, api_key, spec.prices())


def _named_local(spec: ModelAddress, runtime: ModelRuntime) -> Endpoint | None:
    """The endpoint of a model that names the local judge (`local/<name>`), None when no URL is configured."""
    return local_judge_endpoint(spec.model.removeprefix(LOCAL_PREFIX), runtime, spec.prices() or pricing.FREE)


def resolve_endpoint(spec: ModelAddress, runtime: ModelRuntime) -> Endpoint | None:
    """A judge model's endpoint, or None when it cannot be called (`unreachable` says why)."""
    if spec.model.startswith(LOCAL_PREFIX):
        return _named_local(spec, runtime)
    key = runtime.env.get(spec.api_key_env) if spec.api_key_env else None
    if spec.api_key_env and not key:
        if not runtime.local_judge_for_missing_keys:
            return None
        # The demo's mode: an evaluator's models always name their local judge (the evaluator's, by default mock).
        return local_judge_endpoint(spec.local_judge or "mock", runtime)
    return _keyed(spec, key)


def unreachable(spec: ModelAddress, runtime: ModelRuntime) -> tuple[str, str]:
    """Why `resolve_endpoint` gives `spec` no endpoint: the reason code of its SKIPPED rows and the detail, which
    names the variable to set (never a value)."""
    if spec.model.startswith(LOCAL_PREFIX):
        return NO_LOCAL_JUDGE, f"{spec.model} is served by the local judge, and {LOCAL_JUDGE_URL_ENV} is not set"
    detail = f"environment variable {spec.api_key_env} is not set (the provider key of {spec.model})"
    if runtime.local_judge_url and not runtime.local_judge_for_missing_keys:
        detail += (
            f"; the local judge at {LOCAL_JUDGE_URL_ENV} answers only local/ models, and answers for a missing key "
            f"(placeholder verdicts) only when {LOCAL_JUDGE_FOR_MISSING_KEYS_ENV}=1"
        )
    elif runtime.local_judge_for_missing_keys:
        detail += f", and {LOCAL_JUDGE_URL_ENV} is not set"
    return NO_CREDENTIALS, detail


def model_endpoint(model: ModelAddress, runtime: ModelRuntime) -> tuple[Endpoint | None, str | None]:
    """A model under test's endpoint, or (None, why not): a missing key skips, never falls back."""
    if model.model.startswith(LOCAL_PREFIX):
        endpoint = _named_local(model, runtime)
        if endpoint is None:
            return None, "the model is served by the local judge, and no local_judge_url is configured"
        return endpoint, None
    key = runtime.env.get(model.api_key_env) if model.api_key_env else None
    if model.api_key_env and not key:
        return None, f"environment variable {model.api_key_env} is not set"
    return _keyed(model, key), None
