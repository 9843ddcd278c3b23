"""The batch APIs batch mode speaks, one module per provider, and the registry `PROVIDERS` (the model prefix an
evaluator names, `azure/<deployment>` -> "azure", to the module's `batch_api`). A model whose prefix is not in
`PROVIDERS` is sent to OpenAI's own wire (`openai.py`: OpenAI, or any OpenAI-compatible server with /v1/files and
/v1/batches at its api_base).

Adding a provider is one module here defining `PREFIX`, `batch_api(endpoint, session, timeout_s)`,
`accepts(model, api_base)` (which models it batches: the configuration lets a model into batch mode when a module
accepts it, `batch_accepts`) and `SUPPORTS` (how an evaluator spells them, for the configuration's error), its entry
in `MODULES` below, and its test. A provider module imports `llm.batch.api` and the call layer, never this
registry.

- Vertex AI and Bedrock batches read and write cloud storage buckets (GCS, S3): refused by the
  configuration where it loads (`judging.options.BATCH_REFUSED`).

Limits per batch: Anthropic's 100,000 requests or 256 MB (https://docs.anthropic.com/en/docs/build-with-claude/
batch-processing, "Batch limitations"); Azure is given OpenAI's 50,000 requests and 200 MB, the smaller of what
the two document (a smaller batch costs nothing more). Megabytes are counted as 10^6 bytes, the smaller reading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_platform.llm.batch.providers import anthropic, azure, openai

if TYPE_CHECKING:
    import aiohttp

    from eval_platform.llm.batch.api import BatchAPI
    from eval_platform.llm.endpoint import Endpoint

# Every provider module, OpenAI's own wire first (the one for a model no other module's PREFIX names).
MODULES = (openai, azure, anthropic)
PROVIDERS = {module.PREFIX: module.batch_api for module in MODULES if module is not openai}


def batch_accepts(model: str, api_base: str | None) -> bool:
    """Whether batch mode can send `model` (at `api_base`) through one of the providers' batch APIs."""
    return any(module.accepts(model, api_base) for module in MODULES)


def batch_supports() -> str:
    """What batch mode supports, in the providers' own words: "openai/<model> (...), azure/<deployment> (...) and
    ..."."""
    spelled = [module.SUPPORTS for module in MODULES]
    return ", ".join(spelled[:-1]) + " and " + spelled[-1] if len(spelled) > 1 else spelled[0]


def batch_api_for(endpoint: Endpoint, session: aiohttp.ClientSession, timeout_s: float) -> BatchAPI:
    """The batch API of the provider `endpoint` is served by (the configuration refused the others)."""
    prefix = endpoint.model.split("/", 1)[0] if "/" in endpoint.model else ""
    return PROVIDERS.get(prefix, openai.batch_api)(endpoint, session, timeout_s)
