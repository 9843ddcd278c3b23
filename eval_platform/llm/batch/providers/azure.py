"""Azure OpenAI's batches.

- **Azure OpenAI** (`azure/<deployment>`): litellm covers the whole cycle (`acreate_file`, `acreate_batch`,
  `aretrieve_batch`, `alist_batches`, `afile_content` with `custom_llm_provider="azure"`), so every call
  goes through it: Azure's paths (`/openai/files`, `/openai/batches`, `?api-version=`), its `api-key` header,
  and the api_base, key and API version litellm resolves for the interactive calls too. The input lines are
  OpenAI's, with `url: /chat/completions` and the deployment as `model`, as Azure documents them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_platform.llm.batch.api import (
    COMPLETION_WINDOW,
    OPENAI_LIMITS,
    BatchLimits,
    BatchLookupUndecided,
    file_lines,
    outcome_lines,
    request_line,
)
from eval_platform.llm.client import CallOutcome, ModelRequest
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.openai_compat import chat_body, is_openai_compatible

if TYPE_CHECKING:
    from collections.abc import Iterator

    import aiohttp

PREFIX = "azure"
SUPPORTS = "azure/<deployment> (Azure OpenAI)"


def accepts(model: str, api_base: str | None) -> bool:
    """An Azure deployment of a model litellm sends unchanged (not a reasoning model)."""
    return model.startswith(f"{PREFIX}/") and is_openai_compatible(f"openai/{model.removeprefix(f'{PREFIX}/')}", None)


AZURE_CHAT_ENDPOINT = "/chat/completions"  # Azure's spelling of the batch endpoint and of each line's url


def batch_api(endpoint: Endpoint, session: aiohttp.ClientSession, timeout_s: float) -> AzureBatchAPI:
    return AzureBatchAPI(endpoint, timeout_s)


def _litellm():
    from eval_platform.llm.client import (
        _litellm as load,  # litellm loaded and configured once
    )

    return load()


@dataclass
class AzureBatchAPI:
    """Azure OpenAI's Files and Batch APIs, through litellm's batch helpers."""

    endpoint: Endpoint
    timeout_s: float
    limits: BatchLimits = OPENAI_LIMITS

    def _options(self) -> dict[str, Any]:
        # Retries are ours (see batch_submit), as for interactive calls.
        return {
            "custom_llm_provider": "azure",
            "api_base": self.endpoint.api_base,
            "api_key": self.endpoint.api_key,
            "timeout": self.timeout_s,
            "max_retries": 0,
        }

    def line(self, custom_id: str, request: ModelRequest) -> str:
        deployment = request.model.removeprefix("azure/")
        body = chat_body(deployment, request.messages, request.temperature, request.max_tokens)
        return request_line(custom_id, body, url=AZURE_CHAT_ENDPOINT)

    async def upload(self, path: Path, filename: str) -> str | None:
        with open(path, "rb") as content:  # litellm hands the open file to the openai SDK, which streams it
            created = await _litellm().acreate_file(
                file=(filename, content, "application/jsonl"), purpose="batch", **self._options()
            )
        return created.id

    async def create(self, input_file_id: str | None, path: Path, metadata: dict[str, str]) -> dict[str, Any]:
        created = await _litellm().acreate_batch(
            completion_window=COMPLETION_WINDOW,
            endpoint=AZURE_CHAT_ENDPOINT,
            input_file_id=input_file_id,
            metadata=metadata,
            **self._options(),
        )
        return created.model_dump()

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        # Without `batch_ignore_default_logging`, litellm's logging prices every completed batch it retrieves by
        # downloading its output file again, in a background task the end of the run's event loop cuts off
        # ("coroutine 'AzureOpenAIFilesAPI.afile_content' was never awaited"). The spend is priced here.
        batch = await _litellm().aretrieve_batch(
            batch_id=batch_id, litellm_metadata={"batch_ignore_default_logging": True}, **self._options()
        )
        return batch.model_dump()

    async def find(self, submission: str, since: float, requests: int = 0) -> dict[str, Any] | None:
        """The batch whose metadata carries `submission`. litellm 1.106 does not pass `after` and `limit` on
        to Azure's list, so only its first page (the newest batches) can be searched: when that page does not
        reach back to `since`, the batch may be further down, and this raises instead of answering None."""
        page = await _litellm().alist_batches(limit=100, **self._options())
        batches = [b.model_dump() for b in page.data]
        for batch in batches:
            if (batch.get("metadata") or {}).get("submission") == submission:
                return batch
        older = any((batch.get("created_at") or 0) < since for batch in batches)  # newest first: all seen
        if not page.has_more or not batches or older:
            return None
        raise BatchLookupUndecided(
            f"submission {submission} is not among the {len(batches)} newest Azure batches, and litellm's Azure "
            "batch list gives no further page; nothing is submitted again while it may exist"
        )

    async def results(self, batch: dict[str, Any], folder: Path) -> Iterator[tuple[str, CallOutcome]]:
        # litellm's afile_content gives the whole file at once: one batch's results (not the day's) in memory
        # while they are written to disk.
        paths = []
        for field in ("output_file_id", "error_file_id"):
            if batch.get(field):
                response = await _litellm().afile_content(file_id=batch[field], **self._options())
                path = Path(folder) / f"{batch['id']}.{field}.jsonl"
                path.write_bytes(response.content)
                del response
                paths.append(path)
        return outcome_lines(batch, file_lines(paths))
