"""Anthropic's Messages API and Message Batches on the local judge, so batch mode is exercised over real HTTP.

The wire (https://docs.anthropic.com/en/api/creating-message-batches), with `x-api-key` and
`anthropic-version` headers on every request:
- `POST /v1/messages` answers one Messages request (`system`, `messages`, `max_tokens`, ...) with a message
  (`content: [{"type": "text", ...}]`, `stop_reason`, `usage.input_tokens` / `output_tokens`);
- `POST /v1/messages/batches` takes `{"requests": [{"custom_id", "params"}]}` (params: a Messages request)
  and starts a batch (`processing_status` in_progress, then ended); `GET /v1/messages/batches/{id}` reports
  it, `GET /v1/messages/batches` lists them newest first, `POST .../{id}/cancel` cancels it;
- `GET /v1/messages/batches/{id}/results` (the batch's `results_url` once ended) is a JSONL of
  `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} | {"type":
  "expired"} | {"type": "canceled"}}`.

Each request is answered by the same code as `/v1/chat/completions` (the system prompt as the first chat
message), with the batch settings of the OpenAI batches (`delay_s`, `expire_after`, `create_delay_s`), and
counted in the same `/v1/stats` and `/v1/stats/batches`.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from aiohttp import web

from eval_platform.local_judge.batches import authorization, json_body
from eval_platform.local_judge.server import Wire

# Anthropic's error types by HTTP status (https://docs.anthropic.com/en/api/errors).
ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens"}


def _iso(epoch: float | None) -> str | None:
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat().replace("+00:00", "Z")


def anthropic_error(status: int, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": message}}


def _refusal(request: web.Request) -> web.Response | None:
    if not request.headers.get("x-api-key") and not request.headers.get("Authorization"):
        return web.json_response(anthropic_error(401, "x-api-key header is required"), status=401)
    if not request.headers.get("anthropic-version"):
        return web.json_response(anthropic_error(400, "anthropic-version header is required"), status=400)
    return None


def chat_body(params: Any) -> Any:
    """The chat-completions body a Messages request asks the same as: its system prompt the first message."""
    if not isinstance(params, dict):
        return params
    messages = list(params.get("messages") or [])
    system = params.get("system")
    if system:
        messages.insert(0, {"role": "system", "content": system})
    body = {k: v for k, v in params.items() if k != "system"}
    return {**body, "messages": messages}


def to_message(status: int, completion: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """A chat completion (or an OpenAI-style error) in the Messages API's shape."""
    if status != 200:
        error = completion.get("error") or {}
        return status, anthropic_error(status, str(error.get("message") or completion))
    choice = completion["choices"][0]
    usage = completion.get("usage") or {}
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    message = {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": completion.get("model"),
        "content": [{"type": "text", "text": choice["message"]["content"]}],
        "stop_reason": STOP_REASONS.get(choice.get("finish_reason"), "end_turn"),
        "stop_sequence": None,
        # Anthropic counts cache reads apart from input_tokens.
        "usage": {
            "input_tokens": int(usage.get("prompt_tokens") or 0) - cached,
            "output_tokens": int(usage.get("completion_tokens") or 0),
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": 0,
        },
    }
    return 200, message


class MessageBatches(Wire):
    """Anthropic's endpoints on one local judge (its batch settings and counts are the OpenAI batches')."""

    def __init__(self) -> None:
        self._cancelled: dict[str, asyncio.Event] = {}
        self._tasks: set[asyncio.Task] = set()

    @property
    def store(self):
        return self.server.batches

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.message)
        app.router.add_post("/v1/messages/batches", self.create)
        app.router.add_get("/v1/messages/batches", self.list_batches)
        app.router.add_get("/v1/messages/batches/{batch_id}", self.retrieve)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self.results)
        app.router.add_post("/v1/messages/batches/{batch_id}/cancel", self.cancel)

    async def message(self, request: web.Request) -> web.Response:
        refused = _refusal(request)
        if refused is not None:
            return refused
        params = await json_body(request)
        status, payload, headers = await self.server.interactive(chat_body(params), authorization(request))
        status, body = to_message(status, payload)
        return web.json_response(body, status=status, headers=headers)

    async def create(self, request: web.Request) -> web.Response:
        refused = _refusal(request)
        if refused is not None:
            return refused
        body = await json_body(request)
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return web.json_response(anthropic_error(400, "requests: a non-empty list is required"), status=400)
        for number, item in enumerate(requests):
            if (
                not isinstance(item, dict)
                or not isinstance(item.get("custom_id"), str)
                or not isinstance(item.get("params"), dict)
            ):
                message = f"requests.{number}: needs custom_id (string) and params (object)"
                return web.json_response(anthropic_error(400, message), status=400)
        now = time.time()
        batch = {
            "id": f"msgbatch_{uuid.uuid4().hex[:24]}",
            "type": "message_batch",
            "processing_status": "in_progress",
            "request_counts": {"processing": len(requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0},
            "ended_at": None,
            "created_at": _iso(now),
            "expires_at": _iso(now + timedelta(hours=24).total_seconds()),
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": None,
        }
        self.store.other_batches[batch["id"]] = {"batch": batch, "results": None, "created": now}
        self.store.created(batch["id"], [item["params"].get("model") for item in requests])
        task = asyncio.create_task(self._run(batch, requests, authorization(request)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self.store.create_delay_s > 0:  # the batch exists, but the client may give up before it hears so
            await asyncio.sleep(self.store.create_delay_s)
        return web.json_response(batch)

    async def list_batches(self, request: web.Request) -> web.Response:
        """Newest first, `limit` per page (default 20, at most 1000), the page after the batch id `after_id`."""
        refused = _refusal(request)
        if refused is not None:
            return refused
        try:
            limit = min(1000, max(1, int(request.query.get("limit", "20"))))
        except ValueError:
            return web.json_response(anthropic_error(400, "limit must be an integer"), status=400)
        newest_first = [entry["batch"] for entry in reversed(self.store.other_batches.values())]
        after = request.query.get("after_id")
        if after is not None:
            ids = [batch["id"] for batch in newest_first]
            if after not in ids:
                return web.json_response(anthropic_error(400, f"no batch {after!r} to list after"), status=400)
            newest_first = newest_first[ids.index(after) + 1 :]
        page = newest_first[:limit]
        return web.json_response(
            {
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest_first) > limit,
            }
        )

    def _entry(self, request: web.Request) -> dict[str, Any] | web.Response:
        refused = _refusal(request)
        if refused is not None:
            return refused
        entry = self.store.other_batches.get(request.match_info["batch_id"])
        if entry is None:
            return web.json_response(anthropic_error(404, f"no batch {request.match_info['batch_id']!r}"), status=404)
        return entry

    async def retrieve(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        if isinstance(entry, web.Response):
            return entry
        refusal = self.store.polled(entry["batch"]["id"], request)
        if refusal is not None:
            return web.json_response(anthropic_error(refusal.status, refusal.message), status=refusal.status)
        return web.json_response(entry["batch"])

    async def results(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        if isinstance(entry, web.Response):
            return entry
        if entry["results"] is None:
            message = f"batch {entry['batch']['id']} is still {entry['batch']['processing_status']}: no results yet"
            return web.json_response(anthropic_error(400, message), status=400)
        return web.Response(body=entry["results"], content_type="application/binary")

    async def cancel(self, request: web.Request) -> web.Response:
        entry = self._entry(request)
        if isinstance(entry, web.Response):
            return entry
        batch = entry["batch"]
        if batch["processing_status"] == "in_progress":
            batch["processing_status"] = "canceling"
            batch["cancel_initiated_at"] = _iso(time.time())
            self._cancelled[batch["id"]].set()
        return web.json_response(batch)

    async def _run(self, batch: dict[str, Any], requests: list[dict[str, Any]], credentials: str) -> None:
        cancelled = self._cancelled[batch["id"]] = asyncio.Event()
        if self.store.delay_s > 0:
            try:
                await asyncio.wait_for(cancelled.wait(), self.store.delay_s)
            except TimeoutError:
                pass
        expire_after = self.store.expire_after
        counts = batch["request_counts"]
        lines = []
        for number, item in enumerate(requests):
            if batch["processing_status"] == "canceling":
                result: dict[str, Any] = {"type": "canceled"}
            elif expire_after is not None and number >= expire_after:
                result = {"type": "expired"}
            else:
                status, payload, _ = await self.server.respond(chat_body(item["params"]), credentials)
                status, message = to_message(status, payload)
                result = (
                    {"type": "succeeded", "message": message}
                    if status == 200
                    else {"type": "errored", "error": message}
                )
                self.store.count_line()
            counts["processing"] -= 1
            counts[result["type"]] += 1
            lines.append({"custom_id": item["custom_id"], "result": result})
        self.store.other_batches[batch["id"]]["results"] = "".join(json.dumps(line) + "\n" for line in lines).encode()
        base = self.server.base_url.removesuffix("/v1") if self.server.base_url else ""
        batch.update(
            processing_status="ended",
            ended_at=_iso(time.time()),
            results_url=f"{base}/v1/messages/batches/{batch['id']}/results",
        )
