"""The batch providers' registry: one module per provider under `llm/batch/providers/`, each in `PROVIDERS` under
the model prefix it serves; a model no module claims goes to OpenAI's own wire (its api_base)."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

from eval_platform.llm.batch import providers
from eval_platform.llm.batch.providers import PROVIDERS, batch_api_for
from eval_platform.llm.endpoint import Endpoint


def endpoint(model: str, api_base: str | None = "http://127.0.0.1:9/v1") -> Endpoint:
    return Endpoint(model=model, label=model, api_base=api_base, api_key="sk-test", prices=None)


def test_every_provider_module_is_registered_under_its_prefix():
    modules = [
        importlib.import_module(f"{providers.__name__}.{info.name}")
        for info in pkgutil.iter_modules(providers.__path__)
    ]
    assert {module.PREFIX for module in modules} == {*PROVIDERS, "openai"}
    for module in modules:
        assert PROVIDERS.get(module.PREFIX, providers.openai.batch_api) is module.batch_api


@pytest.mark.parametrize(
    ("model", "api"),
    [
        ("azure/gpt-4o-mini", "AzureBatchAPI"),
        ("anthropic/claude-3-5-haiku-20241022", "AnthropicBatchAPI"),
        ("openai/gpt-4o-mini", "OpenAIBatchAPI"),
        ("hosted_vllm/qwen", "OpenAIBatchAPI"),  # an OpenAI-compatible server at its api_base
        ("gpt-4o-mini", "OpenAIBatchAPI"),
    ],
)
def test_a_model_gets_the_batch_api_of_its_prefix(model, api):
    assert type(batch_api_for(endpoint(model), None, 5.0)).__name__ == api  # type: ignore[arg-type]  # no call made


def test_a_provider_module_added_to_the_registry_is_all_the_configuration_needs(monkeypatch):
    """Which models batch mode takes is each provider module's word (`accepts`, `SUPPORTS`): one more module in
    `MODULES` lets its models into batch mode, and a refusal names what it supports, with nothing else changed."""
    from eval_platform.judging.config import EvaluatorConfig

    def config(model: str) -> dict:
        return {"name": "b", "mode": "binary", "prompt": "{{output}}", "model": model, "batch": {}}

    with pytest.raises(ValueError, match="provider 'mistral'") as refused:
        EvaluatorConfig.model_validate(config("mistral/mistral-large-latest"))
    assert "mistral/<model>" not in str(refused.value)
    mistral = types.SimpleNamespace(
        PREFIX="mistral",
        SUPPORTS="mistral/<model> (Mistral's batch API)",
        accepts=lambda model, api_base: model.startswith("mistral/"),
        batch_api=providers.openai.batch_api,
    )
    monkeypatch.setattr(providers, "MODULES", (*providers.MODULES, mistral))
    assert EvaluatorConfig.model_validate(config("mistral/mistral-large-latest")).batched
    with pytest.raises(ValueError, match=r"and mistral/<model> \(Mistral's batch API\); use one of those"):
        EvaluatorConfig.model_validate(config("cohere/command-r"))
