"""OpenAI's own Files and Batch APIs (`api.OpenAIBatchAPI`), at the evaluator's api_base: OpenAI, or any
OpenAI-compatible server with /v1/files and /v1/batches; every model no other provider module claims."""

from __future__ import annotations

from typing import TYPE_CHECKING

from eval_platform.llm.batch.api import OpenAIBatchAPI
from eval_platform.llm.openai_compat import is_openai_compatible, resolve_base_and_headers

if TYPE_CHECKING:
    import aiohttp

    from eval_platform.llm.endpoint import Endpoint

PREFIX = "openai"
SUPPORTS = "openai/<model> (or the api_base of an OpenAI-compatible server with /v1/files + /v1/batches)"


def accepts(model: str, api_base: str | None) -> bool:
    """OpenAI's models, or any model at an OpenAI-compatible api_base, sent as litellm would send them (a reasoning
    model, whose parameters litellm rewrites, is not: a batch line would not rewrite them)."""
    return is_openai_compatible(model, api_base)


def batch_api(endpoint: Endpoint, session: aiohttp.ClientSession, timeout_s: float) -> OpenAIBatchAPI:
    base, headers = resolve_base_and_headers(endpoint.api_base, endpoint.api_key)
    return OpenAIBatchAPI(session, base, headers, timeout_s)
