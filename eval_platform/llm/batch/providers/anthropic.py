"""Anthropic's Message Batches.

- **Anthropic** (`anthropic/<model>`): litellm 1.106 turns a chat request into a Messages request and a
  message back into a chat completion (the same `AnthropicConfig` its interactive calls use, so a batch
  asks and reads exactly what an interactive call would), and can retrieve a batch, but it cannot create one
  (`transform_create_batch_request` raises NotImplementedError), cannot list them, and its retrieve maps
  every ended batch to `completed` (an expired or cancelled one too). So the Message Batches wire is spoken
  here directly over HTTP (aiohttp), as `batch_api.OpenAIBatchAPI` does for OpenAI: `POST
  /v1/messages/batches` with `requests: [{custom_id, params}]`, `GET /v1/messages/batches[/{id}]`, and
  the batch's `results_url` (JSONL, one `result` of type succeeded / errored / canceled / expired each).
  Anthropic keeps no metadata on a batch, so the submission id rides in every custom_id, and a batch whose
  creation went unheard is recognised by its results (see `AnthropicBatchAPI.find`).
"""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval_platform.llm.batch.api import (
    DOWNLOAD_CHUNK,
    BatchLimits,
    BatchLookupUndecided,
    custom_id_prefix,
    download,
    ended_latency_ms,
    file_lines,
    result_lines,
)
from eval_platform.llm.client import ERROR_DETAIL_CHARS, CallOutcome, ModelRequest, cached_prompt_tokens
from eval_platform.llm.endpoint import Endpoint
from eval_platform.llm.openai_compat import ProviderHTTPError
from eval_platform.llm.redaction import clip, remember
from eval_platform.schemas import BATCH_EXPIRED, BATCH_FAILED, RATE_LIMITED, provider_error

if TYPE_CHECKING:
    import aiohttp

PREFIX = "anthropic"
SUPPORTS = "anthropic/<model> (Message Batches)"
ANTHROPIC_API_BASE = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
ANTHROPIC_LIMITS = BatchLimits(requests=100_000, bytes=256_000_000)
# Anthropic's error types (https://docs.anthropic.com/en/api/errors) by the HTTP status they stand for: an
# errored batch request gets the reason code the same error gets interactively.
ANTHROPIC_ERROR_STATUS = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "overloaded_error": 529,
}


def accepts(model: str, api_base: str | None) -> bool:
    return model.startswith(f"{PREFIX}/")


def batch_api(endpoint: Endpoint, session: aiohttp.ClientSession, timeout_s: float) -> AnthropicBatchAPI:
    return AnthropicBatchAPI(session, endpoint, timeout_s)


def _litellm():
    from eval_platform.llm.client import (
        _litellm as load,  # litellm loaded and configured once
    )

    return load()


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def as_openai_batch(batch: dict[str, Any]) -> dict[str, Any]:
    """An Anthropic MessageBatch seen as an OpenAI batch object: an ended batch is `expired` when any request
    expired, `cancelled` when it was cancelled, else `completed` (its errored requests answer for themselves)."""
    counts = batch.get("request_counts") or {}
    processing = batch.get("processing_status")
    if processing == "in_progress":
        status = "in_progress"
    elif processing == "canceling":
        status = "cancelling"
    elif batch.get("cancel_initiated_at"):
        status = "cancelled"
    elif counts.get("expired"):
        status = "expired"
    else:
        status = "completed"
    converted = {
        "id": batch["id"],
        "object": "batch",
        "status": status,
        "created_at": _epoch(batch.get("created_at")),
        "results_url": batch.get("results_url"),
        "errors": None,
        "request_counts": {
            "total": sum(int(v or 0) for v in counts.values()),
            "completed": int(counts.get("succeeded") or 0),
            "failed": sum(int(counts.get(k) or 0) for k in ("errored", "canceled", "expired")),
        },
    }
    if processing == "ended":
        converted[f"{status}_at"] = _epoch(batch.get("ended_at"))
    return converted


@dataclass
class AnthropicBatchAPI:
    """Anthropic's Message Batches over plain HTTP; requests built and replies read by litellm's Anthropic code."""

    session: aiohttp.ClientSession
    endpoint: Endpoint
    timeout_s: float
    limits: BatchLimits = ANTHROPIC_LIMITS

    @property
    def base_url(self) -> str:
        import os  # where litellm's anthropic provider looks when the evaluator names no api_base

        base = self.endpoint.api_base or os.environ.get("ANTHROPIC_API_BASE") or os.environ.get("ANTHROPIC_BASE_URL")
        return (base or ANTHROPIC_API_BASE).rstrip("/").removesuffix("/v1/messages").removesuffix("/v1")

    @property
    def headers(self) -> dict[str, str]:
        import os

        key = self.endpoint.api_key or os.environ.get("ANTHROPIC_API_KEY") or ""
        remember(key)  # whatever is sent, from the evaluator or the environment, is never kept
        return {"x-api-key": key, "anthropic-version": ANTHROPIC_VERSION, "content-type": "application/json"}

    async def _call(self, method: str, url: str, **kwargs: Any) -> str:
        async with asyncio.timeout(self.timeout_s):
            async with self.session.request(method, url, headers=self.headers, **kwargs) as response:
                text = await response.text()
                if response.status >= 400:
                    body = clip(text, ERROR_DETAIL_CHARS)  # the key it was sent with is remembered: see redaction
                    raise ProviderHTTPError(response.status, body, response.headers.get("retry-after"))
                return text

    def line(self, custom_id: str, request: ModelRequest) -> str:
        """The Messages request litellm sends for this chat request (system prompt apart, content as blocks)."""
        _litellm()  # first: the one place litellm is imported (its price map read locally)
        from litellm.llms.anthropic.chat.transformation import AnthropicConfig

        model = request.model.removeprefix("anthropic/")
        config = AnthropicConfig()
        optional = config.map_openai_params(
            {"temperature": request.temperature, "max_tokens": request.max_tokens}, {}, model, drop_params=False
        )
        messages: Any = copy.deepcopy(request.messages)  # litellm's message types; these are plain chat messages
        params = config.transform_request(model, messages, optional, {}, {})
        return json.dumps({"custom_id": custom_id, "params": params}) + "\n"

    async def upload(self, path: Path, filename: str) -> str | None:
        return None  # Anthropic takes the requests with the create

    async def create(self, input_file_id: str | None, path: Path, metadata: dict[str, str]) -> dict[str, Any]:
        # The body, {"requests": [<line>, ...]}, written beside the lines and sent from disk.
        body = Path(path).with_suffix(".body.json")
        with open(path, "rb") as lines, open(body, "wb") as out:
            out.write(b'{"requests": [')
            for number, line in enumerate(line for line in lines if line.strip()):
                out.write(b"," + line if number else line)
            out.write(b"]}")
        try:
            with open(body, "rb") as data:
                text = await self._call("POST", f"{self.base_url}/v1/messages/batches", data=data)
        finally:
            body.unlink(missing_ok=True)
        return as_openai_batch(json.loads(text))

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return as_openai_batch(json.loads(await self._call("GET", f"{self.base_url}/v1/messages/batches/{batch_id}")))

    async def find(
        self, submission: str, since: float, requests: int = 0, max_pages: int = 50
    ) -> dict[str, Any] | None:
        """Anthropic keeps no metadata, so a candidate is a batch created since `since` with as many requests;
        an ended one is ours when its results carry this submission's custom_ids. A candidate still running
        cannot be told apart yet: that raises, and nothing is created again until it has ended."""
        after = None
        undecided = []
        prefix = custom_id_prefix(submission)
        for _ in range(max_pages):
            query = "?limit=100" + (f"&after_id={after}" if after else "")
            page = json.loads(await self._call("GET", f"{self.base_url}/v1/messages/batches{query}"))
            batches = page.get("data") or []
            for raw in batches:
                batch = as_openai_batch(raw)
                if (batch["created_at"] or 0) < since or (requests and batch["request_counts"]["total"] != requests):
                    continue
                if raw.get("processing_status") != "ended":
                    undecided.append(batch["id"])
                elif await self._has_custom_id(batch, prefix):
                    return batch
            older = any((_epoch(b.get("created_at")) or 0) < since for b in batches)  # newest first: done
            if not page.get("has_more") or not batches or older:
                break
            after = page.get("last_id") or batches[-1]["id"]
        if undecided:
            raise BatchLookupUndecided(
                f"Anthropic batches keep no metadata, and {', '.join(undecided)} (created since this submission, "
                f"with {requests} requests) may be submission {submission}; it is recognised by its results once "
                "it has ended, so nothing is submitted again until then"
            )
        return None

    def _results_url(self, batch: dict[str, Any]) -> str:
        return batch.get("results_url") or f"{self.base_url}/v1/messages/batches/{batch['id']}/results"

    async def _has_custom_id(self, batch: dict[str, Any], prefix: str) -> bool:
        """Whether a line of the batch's results has a custom_id starting with `prefix` (read line by line)."""
        async with asyncio.timeout(self.timeout_s):
            async with self.session.request("GET", self._results_url(batch), headers=self.headers) as response:
                if response.status >= 400:
                    body = clip(await response.text(), ERROR_DETAIL_CHARS)
                    raise ProviderHTTPError(response.status, body, response.headers.get("retry-after"))
                rest = b""
                async for chunk in response.content.iter_chunked(DOWNLOAD_CHUNK):
                    *lines, rest = (rest + chunk).split(b"\n")
                    if _starts_with(lines, prefix):
                        return True
                return _starts_with([rest], prefix)

    async def results(self, batch: dict[str, Any], folder: Path) -> Iterator[tuple[str, CallOutcome]]:
        path = Path(folder) / f"{batch['id']}.results.jsonl"
        await download(self.session, self._results_url(batch), self.headers, path, self.timeout_s)
        return anthropic_outcomes(batch, file_lines([path]))


def _starts_with(lines: list[bytes], prefix: str) -> bool:
    texts = (line.decode("utf-8", errors="replace") for line in lines)
    return any(item["custom_id"].startswith(prefix) for item in result_lines(texts))


def anthropic_outcomes(batch: dict[str, Any], lines: Iterable[str]) -> Iterator[tuple[str, CallOutcome]]:
    """(custom_id, outcome) of every request in a Message Batch's results (its lines): a succeeded message read
    by litellm as its interactive call reads it; an errored one with the reason code of the same error
    interactively; an expired one batch_expired, a canceled one batch_failed (the batch named in the detail)."""
    import httpx

    litellm = _litellm()  # first: the one place litellm is imported (its price map read locally)
    from litellm.llms.anthropic.chat.transformation import AnthropicConfig

    batch_id = batch["id"]
    latency_ms = ended_latency_ms(batch)
    for item in result_lines(lines):
        result: dict[str, Any] = item["result"] if isinstance(item.get("result"), dict) else {}
        kind = result.get("type")
        outcome = CallOutcome(attempts=1, latency_ms=latency_ms)
        if kind == "succeeded":
            message: Any = result.get("message")
            try:
                response = AnthropicConfig().transform_parsed_response(
                    completion_response=message,
                    raw_response=httpx.Response(200, json=message),
                    model_response=litellm.ModelResponse(),
                )
                choice = response.choices[0]
            except Exception as exc:  # not a message: never a verdict
                outcome.error_reason = provider_error(200)
                text = clip(json.dumps(message), 500)
                outcome.error_detail = f"batch {batch_id}: not a message ({type(exc).__name__}): {text}"
            else:
                usage = getattr(response, "usage", None)
                outcome.content = choice.message.content or ""
                outcome.finish_reason = choice.finish_reason
                outcome.provider_model = getattr(response, "model", None)
                outcome.prompt_tokens = int(getattr(usage, "prompt_tokens", 0) or 0)
                outcome.completion_tokens = int(getattr(usage, "completion_tokens", 0) or 0)
                outcome.cached_prompt_tokens = cached_prompt_tokens(usage)
        elif kind == "errored":
            error = result.get("error") or {}
            inner: Any = error.get("error") if isinstance(error.get("error"), dict) else error
            status = ANTHROPIC_ERROR_STATUS.get(inner.get("type"))
            outcome.error_reason = RATE_LIMITED if status == 429 else provider_error(status or inner.get("type"))
            outcome.error_detail = f"batch {batch_id}: HTTP {status}: {clip(json.dumps(error), ERROR_DETAIL_CHARS)}"
        elif kind in ("expired", "canceled"):
            outcome.error_reason = BATCH_EXPIRED if kind == "expired" else BATCH_FAILED
            outcome.error_detail = f"batch {batch_id} gave no answer ({kind})"
        else:
            continue  # an unknown result type: the request counts as unanswered
        yield item["custom_id"], outcome
