"""The calls batch mode makes to a provider (`BatchAPI`), OpenAI's Files and Batch APIs over plain HTTP
(aiohttp) as one of them, and the reading of a batch's output lines.

Every provider's batch is seen through OpenAI's batch object (`id`, `status`, `created_at`, `<status>_at`, ...)
so that one flow (`batch`) submits, polls and collects them all; `batch_providers` holds the others (Azure
OpenAI through litellm, Anthropic's Message Batches).

The wire format (https://platform.openai.com/docs/api-reference/batch), which OpenAI-compatible providers
and gateways (Azure OpenAI, vLLM behind a LiteLLM proxy, the local judge) share:
- the input is a JSONL file, one `{"custom_id", "method": "POST", "url": "/v1/chat/completions", "body"}` per
  request, uploaded to `POST /files` with purpose `batch`;
- `POST /batches` starts it (completion window `24h`); `GET /batches/{id}` reports `status`
  (validating, in_progress, finalizing, completed, failed, expired, cancelling, cancelled);
- the output file holds `{"custom_id", "response": {"status_code", "body"}}` per answered request; the error
  file holds requests answered with an error status and, for an expired batch, those never run;
- a batch holds at most 50,000 requests and its input file at most 200 MB (`OPENAI_LIMITS`): a larger day is
  several batches.

A batch's input is uploaded from a file on disk, and its output and error files are downloaded to disk and read a
line at a time: nothing of a batch is held whole in memory.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from eval_platform.llm.client import (
    ERROR_DETAIL_CHARS,
    RETRYABLE_STATUS,
    CallOutcome,
    ModelRequest,
    cached_prompt_tokens,
    transport_error_reason,
)
from eval_platform.llm.openai_compat import (
    ProviderHTTPError,
    chat_body,
    parse_completion,
)
from eval_platform.llm.redaction import clip
from eval_platform.schemas import (
    BATCH_EXPIRED,
    BATCH_FAILED,
    BATCH_UNCONFIRMED,
    CONNECTION_ERROR,
    RATE_LIMITED,
    TIMEOUT,
    provider_error,
)

if TYPE_CHECKING:
    import aiohttp

COMPLETION_WINDOW = "24h"
CHAT_ENDPOINT = "/v1/chat/completions"
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
DOWNLOAD_CHUNK = 1 << 20


@dataclass(frozen=True)
class BatchLimits:
    """What one batch may hold: requests, and bytes of its input."""

    requests: int
    bytes: int


# https://platform.openai.com/docs/api-reference/batch/create: "up to 50,000 requests, and up to 200 MB in size".
OPENAI_LIMITS = BatchLimits(requests=50_000, bytes=200_000_000)  # MB read as 10^6 bytes: the smaller reading


def request_line(custom_id: str, body: dict[str, Any], url: str = CHAT_ENDPOINT) -> str:
    """One line of a batch's input file."""
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": url, "body": body}) + "\n"


class BatchLookupUndecided(Exception):
    """The provider's batches cannot yet tell whether a batch whose creation went unheard exists."""


def http_status(exc: BaseException) -> int | None:
    """The HTTP status of a failed call: ours (`ProviderHTTPError.status`) or litellm's / openai's `status_code`."""
    status = getattr(exc, "status", None) if isinstance(exc, ProviderHTTPError) else getattr(exc, "status_code", None)
    return int(status) if isinstance(status, int) else None


def error_reason(exc: BaseException) -> tuple[str, bool]:
    """(reason code, retryable) of a failed Files/Batch API call, in the codes judge_scores rows use: our own
    HTTP path's, or those of litellm's batch calls (which raise litellm's or the openai SDK's errors)."""
    transport = transport_error_reason(exc)
    if transport is not None:
        return transport
    if isinstance(exc, BatchLookupUndecided):
        return BATCH_UNCONFIRMED, False
    openai = sys.modules.get("openai")  # loaded with litellm, which the Azure batch calls go through
    if openai is not None and isinstance(exc, openai.APITimeoutError):
        return TIMEOUT, True
    if openai is not None and isinstance(exc, openai.APIConnectionError):
        return CONNECTION_ERROR, True
    status = http_status(exc)
    if status == 429:
        return RATE_LIMITED, True
    if status is not None:
        return provider_error(status), status in RETRYABLE_STATUS
    return provider_error(type(exc).__name__), False


class BatchAPI(Protocol):
    """What batch mode asks of a provider; batches come back as OpenAI batch objects (dicts)."""

    limits: BatchLimits  # the provider's own, unless the evaluator's `batch` options say less

    def line(self, custom_id: str, request: ModelRequest) -> str:
        """One request as a line of the batch's input (JSONL)."""

    async def upload(self, path: Path, filename: str) -> str | None:
        """Store the input (the JSONL file at `path`; its file id), or None for a provider that takes the requests
        with the create."""

    async def create(self, input_file_id: str | None, path: Path, metadata: dict[str, str]) -> dict[str, Any]:
        """Start the batch (of the input at `path`); `metadata["submission"]` is what `find` looks for."""

    async def retrieve(self, batch_id: str) -> dict[str, Any]: ...

    async def find(self, submission: str, since: float, requests: int) -> dict[str, Any] | None:
        """The batch of `submission` (`requests` lines, created after `since`, epoch s), or None when there is
        none; raises when the provider cannot tell yet (then nothing may be created again)."""

    async def results(self, batch: dict[str, Any], folder: Path) -> Iterator[tuple[str, CallOutcome]]:
        """(custom_id, outcome) of every request an ended batch answered (see `outcome_lines`), its results first
        downloaded into `folder`, then read a line at a time."""


@dataclass
class OpenAIBatchAPI:
    """The calls batch mode makes, against one OpenAI-compatible base URL."""

    session: aiohttp.ClientSession
    base_url: str  # ending in /v1, no trailing slash
    headers: dict[str, str]
    timeout_s: float
    limits: BatchLimits = OPENAI_LIMITS

    async def _call(self, method: str, path: str, **kwargs: Any) -> str:
        async with asyncio.timeout(self.timeout_s):
            async with self.session.request(method, f"{self.base_url}{path}", **kwargs) as response:
                text = await response.text()
                if response.status >= 400:
                    body = clip(text, ERROR_DETAIL_CHARS)  # the key it was sent with is remembered: see redaction
                    raise ProviderHTTPError(response.status, body, response.headers.get("retry-after"))
                return text

    async def upload(self, path: Path, filename: str) -> str:
        """Upload a batch input file (streamed from disk); its file id."""
        import aiohttp

        with open(path, "rb") as content:
            form = aiohttp.FormData()
            form.add_field("purpose", "batch")
            form.add_field("file", content, filename=filename, content_type="application/jsonl")
            # aiohttp writes the multipart Content-Type with its boundary: the JSON one must not go along.
            headers = {k: v for k, v in self.headers.items() if k.lower() != "content-type"}
            return json.loads(await self._call("POST", "/files", data=form, headers=headers))["id"]

    def line(self, custom_id: str, request: ModelRequest) -> str:
        body = chat_body(request.model, request.messages, request.temperature, request.max_tokens)
        return request_line(custom_id, body)

    async def create(self, input_file_id: str | None, path: Path, metadata: dict[str, str]) -> dict[str, Any]:
        body = {
            "input_file_id": input_file_id,
            "endpoint": CHAT_ENDPOINT,
            "completion_window": COMPLETION_WINDOW,
            "metadata": metadata,
        }
        return json.loads(await self._call("POST", "/batches", data=json.dumps(body), headers=self.headers))

    async def retrieve(self, batch_id: str) -> dict[str, Any]:
        return json.loads(await self._call("GET", f"/batches/{batch_id}", headers=self.headers))

    async def find(
        self, submission: str, since: float, requests: int = 0, max_pages: int = 50
    ) -> dict[str, Any] | None:
        """The batch whose metadata carries `submission`, among those created since `since` (epoch seconds)."""
        after = None
        for _ in range(max_pages):
            query = "?limit=100" + (f"&after={after}" if after else "")
            page = json.loads(await self._call("GET", f"/batches{query}", headers=self.headers))
            for batch in page.get("data") or []:
                if (batch.get("metadata") or {}).get("submission") == submission:
                    return batch
            batches = page.get("data") or []
            older = any((batch.get("created_at") or 0) < since for batch in batches)  # newest first: done
            if not page.get("has_more") or not batches or older:
                return None
            after = page.get("last_id") or batches[-1]["id"]
        return None

    async def results(self, batch: dict[str, Any], folder: Path) -> Iterator[tuple[str, CallOutcome]]:
        paths = []
        for field in ("output_file_id", "error_file_id"):
            if batch.get(field):
                url = f"{self.base_url}/files/{batch[field]}/content"
                path = Path(folder) / f"{batch['id']}.{field}.jsonl"
                paths.append(await download(self.session, url, self.headers, path, self.timeout_s))
        return outcome_lines(batch, file_lines(paths))


async def download(
    session: aiohttp.ClientSession, url: str, headers: dict[str, str], path: Path, timeout_s: float
) -> Path:
    """GET `url` into the file `path`, a chunk at a time (a batch's results can be hundreds of MB)."""
    async with asyncio.timeout(timeout_s):
        async with session.request("GET", url, headers=headers) as response:
            if response.status >= 400:
                body = clip(await response.text(), ERROR_DETAIL_CHARS)  # the key it was sent with is remembered
                raise ProviderHTTPError(response.status, body, response.headers.get("retry-after"))
            with open(path, "wb") as out:
                async for chunk in response.content.iter_chunked(DOWNLOAD_CHUNK):
                    out.write(chunk)
    return path


def file_lines(paths: Iterable[Path]) -> Iterator[str]:
    """The lines of the files at `paths`, in order, read a line at a time; each file deleted once read."""
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as lines:
            yield from lines
        Path(path).unlink(missing_ok=True)


def ended_latency_ms(batch: dict[str, Any]) -> float:
    """From the batch's creation to its end (completed, expired, failed or cancelled); 0 when either is unknown."""
    ends = ("completed_at", "expired_at", "failed_at", "cancelled_at")
    ended = next((float(batch[k]) for k in ends if batch.get(k)), None)
    if ended is None or not batch.get("created_at"):
        return 0.0
    return max(0.0, (ended - float(batch["created_at"])) * 1000)


def result_lines(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The JSON objects of a batch's JSONL results (its lines) that name their request (`custom_id`). A damaged
    line is skipped: its request counts as unanswered, never as a verdict."""
    for line in lines:
        try:
            item = json.loads(line) if line.strip() else None
        except ValueError:
            continue
        if isinstance(item, dict) and isinstance(item.get("custom_id"), str):
            yield item


def read_results(batch: dict[str, Any], output: str, errors: str) -> dict[str, CallOutcome]:
    """The outcome of every request the batch answered, by custom_id (a request absent here went unanswered):
    `outcome_lines` over the output file's text, then the error file's."""
    return dict(outcome_lines(batch, itertools.chain(output.splitlines(), errors.splitlines())))


def outcome_lines(batch: dict[str, Any], lines: Iterable[str]) -> Iterator[tuple[str, CallOutcome]]:
    """(custom_id, outcome) of every request the batch answered, from its output and error files' lines (a request
    absent here went unanswered; one listed twice: the last line holds).

    A 200 line becomes the same `CallOutcome` an interactive call would; an error status the same reason
    code (rate_limited, provider_error:<status>); a request the provider gave up on (`batch_expired`, or any
    other error without a response) names the batch in its detail.
    """
    batch_id = batch["id"]
    latency_ms = ended_latency_ms(batch)
    for item in result_lines(lines):
        outcome = CallOutcome(attempts=1, latency_ms=latency_ms)
        response = item.get("response") or None
        status = response.get("status_code") if response else None
        body = response.get("body") if response else None
        if status == 200:
            try:
                completion = parse_completion(body)
            except (KeyError, IndexError, TypeError, AttributeError) as exc:
                outcome.error_reason = provider_error(200)
                text = clip(json.dumps(body), 500)
                outcome.error_detail = f"batch {batch_id}: not a chat completion ({type(exc).__name__}): {text}"
            else:
                outcome.content = completion.content
                outcome.finish_reason = completion.finish_reason
                outcome.provider_model = completion.model
                outcome.prompt_tokens = int(completion.usage.get("prompt_tokens") or 0)
                outcome.completion_tokens = int(completion.usage.get("completion_tokens") or 0)
                outcome.cached_prompt_tokens = cached_prompt_tokens(completion.usage)
        elif status is not None:
            outcome.error_reason = RATE_LIMITED if status == 429 else provider_error(status)
            outcome.error_detail = f"batch {batch_id}: HTTP {status}: {clip(json.dumps(body), ERROR_DETAIL_CHARS)}"
        else:
            error = item.get("error") or {}
            code = error.get("code") or "unknown"
            outcome.error_reason = BATCH_EXPIRED if code == "batch_expired" else BATCH_FAILED
            message = error.get("message") or ""
            outcome.error_detail = f"batch {batch_id} gave no answer ({code}): {message}".rstrip()
        yield item["custom_id"], outcome


def unanswered(batch: dict[str, Any], detail: str | None = None) -> CallOutcome:
    """The outcome of a request a finished batch did not answer: batch_expired, or batch_failed."""
    status = batch.get("status")
    reason = BATCH_EXPIRED if status == "expired" else BATCH_FAILED
    errors = (batch.get("errors") or {}).get("data") or []
    why = detail or "; ".join(str(e.get("message")) for e in errors if isinstance(e, dict)) or None
    text = f"batch {batch['id']} ended {status} without answering this request"
    return CallOutcome(error_reason=reason, error_detail=f"{text} ({why})" if why else text, attempts=1)


def custom_id_prefix(submission: str) -> str:
    """What every custom_id of one submission starts with (how a batch without metadata is recognised)."""
    return f"s{submission[:12]}-"
