"""OpenAI's Files and Batch APIs on the local judge, so batch mode is exercised over real HTTP.

`POST /v1/files` (multipart, purpose `batch`) stores a JSONL of requests; `POST /v1/batches` starts a batch over it;
`GET /v1/batches/{id}` reports its status (`GET /v1/batches` lists them, newest first); `GET /v1/files/{id}/content`
returns the output file (one line per answered request, in OpenAI's `{"custom_id", "response": {"status_code",
"body"}}` shape) and the error file (requests answered with an error status, and those left unanswered when the
batch expired). Every line is answered by the same code as `/v1/chat/completions` (mock, replay, fixed, and what
the server's wires answer). A wire can serve the same endpoints under another prefix (`routes`: the tests' Azure
OpenAI paths, whose batches have endpoint `/chat/completions`) and answer a batch's poll (`Wire.batch_polled`).

For tests: `delay_s` is how long a batch stays `in_progress` before it is answered; `expire_after=N` answers
only the first N lines of every batch and then lets it expire, as a provider does when its completion
window runs out; `create_delay_s` answers `POST /v1/batches` that long after the batch was created (a client
that times out meanwhile does not know it exists); `POST /v1/batches/{id}/cancel` cancels a batch still in progress.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from eval_platform.local_judge.answers import JudgeRequestError

if TYPE_CHECKING:
    from eval_platform.local_judge.server import Wire

# (status, JSON body, headers) of one chat-completions request body, given the caller's credentials.
Respond = Callable[[Any, str], Awaitable[tuple[int, dict[str, Any], dict[str, str]]]]

EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."


def error_response(status: int, message: str, code: str | None) -> web.Response:
    """An error in OpenAI's shape."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return web.json_response(body, status=status)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _open(handler: Handler) -> Handler:
    return handler


async def json_body(request: web.Request) -> Any:
    """The request's JSON body, or None when it is not JSON (each endpoint answers that in its provider's terms)."""
    try:
        return await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def authorization(request: web.Request) -> str:
    """The caller's credentials as the chat endpoint sees them: OpenAI's Authorization, Azure's api-key or
    Anthropic's x-api-key (so a wire echoing the key echoes whichever was sent)."""
    for header, prefix in (("Authorization", ""), ("api-key", "api-key "), ("x-api-key", "x-api-key ")):
        if request.headers.get(header):
            return prefix + request.headers[header]
    return ""


class BatchStore:
    """Uploaded files and batches, in memory, with the counts tests assert on (`stats()`)."""

    def __init__(
        self,
        respond: Respond,
        delay_s: float = 0.0,
        expire_after: int | None = None,
        create_delay_s: float = 0.0,
        wires: list[Wire] | None = None,
    ):
        self.respond = respond
        self.wires = wires if wires is not None else []
        self.delay_s = delay_s
        self.create_delay_s = create_delay_s
        self.expire_after = expire_after
        self.files: dict[str, dict[str, Any]] = {}
        self.batches: dict[str, dict[str, Any]] = {}
        # Batches a wire serves on another provider's API (the tests' Anthropic Message Batches), counted with
        # these: id -> what the wire keeps of it.
        self.other_batches: dict[str, dict[str, Any]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._cancelled: dict[str, asyncio.Event] = {}  # set by a cancel: wakes a batch still waiting out delay_s
        self._lock = threading.Lock()
        self.lines_answered = 0
        self.downloads = 0  # file contents served (a batch's input, output or error file)

    def routes(self, app: web.Application, prefix: str = "/v1", guard: Callable[[Handler], Handler] = _open) -> None:
        """OpenAI's paths under `prefix`, each handler wrapped by `guard` (a provider's checks on every request)."""
        app.router.add_post(f"{prefix}/files", guard(self.upload))
        app.router.add_get(f"{prefix}/files/{{file_id}}", guard(self.file_object))
        app.router.add_get(f"{prefix}/files/{{file_id}}/content", guard(self.file_content))
        app.router.add_post(f"{prefix}/batches", guard(self.create))
        app.router.add_get(f"{prefix}/batches", guard(self.list_batches))
        app.router.add_get(f"{prefix}/batches/{{batch_id}}", guard(self.retrieve))
        app.router.add_post(f"{prefix}/batches/{{batch_id}}/cancel", guard(self.cancel))

    def stats(self) -> dict[str, int]:
        with self._lock:
            batches = len(self.batches) + len(self.other_batches)
            return {"batches": batches, "files": len(self.files), "batch_lines": self.lines_answered}

    async def stats_handler(self, _request: web.Request) -> web.Response:
        return web.json_response(self.stats())

    def reset(self) -> None:
        with self._lock:
            self.files.clear()
            self.batches.clear()
            self.other_batches.clear()
            self.lines_answered = 0
            self.downloads = 0

    def _store_file(self, content: bytes, filename: str, purpose: str) -> dict[str, Any]:
        file_id = f"file-{uuid.uuid4().hex[:24]}"
        meta = {
            "id": file_id,
            "object": "file",
            "bytes": len(content),
            "created_at": int(time.time()),
            "filename": filename,
            "purpose": purpose,
        }
        with self._lock:
            self.files[file_id] = {**meta, "content": content}
        return meta

    # --- handlers --------------------------------------------------------------------------------------

    async def upload(self, request: web.Request) -> web.Response:
        if not request.content_type.startswith("multipart/"):
            return error_response(
                400, "upload the file as multipart/form-data with fields purpose and file", "invalid_upload"
            )
        form = await request.post()
        upload, purpose = form.get("file"), form.get("purpose")
        if purpose != "batch":
            return error_response(400, f"purpose must be 'batch' here, got {purpose!r}", "invalid_purpose")
        if not isinstance(upload, web.FileField):
            return error_response(400, "missing the 'file' field", "missing_file")
        content = upload.file.read()
        for number, line in enumerate(content.decode("utf-8").splitlines(), start=1):
            try:
                item = json.loads(line)
                if not isinstance(item.get("custom_id"), str) or not isinstance(item.get("body"), dict):
                    raise ValueError("needs custom_id and body")
            except (ValueError, AttributeError) as exc:
                return error_response(400, f"line {number} of the batch file is not a request: {exc}", "invalid_jsonl")
        return web.json_response(self._store_file(content, upload.filename or "batch.jsonl", "batch"))

    async def file_object(self, request: web.Request) -> web.Response:
        stored = self.files.get(request.match_info["file_id"])
        if stored is None:
            return error_response(404, f"no file {request.match_info['file_id']!r}", "file_not_found")
        return web.json_response({k: v for k, v in stored.items() if k != "content"})

    async def file_content(self, request: web.Request) -> web.Response:
        stored = self.files.get(request.match_info["file_id"])
        if stored is None:
            return error_response(404, f"no file {request.match_info['file_id']!r}", "file_not_found")
        with self._lock:
            self.downloads += 1
        return web.Response(body=stored["content"], content_type="application/jsonl")

    async def create(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error_response(400, "request body must be a JSON object", "invalid_body")
        stored = self.files.get(body.get("input_file_id") or "")
        if stored is None:
            return error_response(400, f"no input file {body.get('input_file_id')!r}", "file_not_found")
        if body.get("endpoint") not in ("/v1/chat/completions", "/chat/completions"):  # OpenAI's, Azure's
            return error_response(400, "the local judge batches /v1/chat/completions only", "unsupported_endpoint")
        if body.get("completion_window") != "24h":
            return error_response(400, "completion_window must be '24h'", "invalid_completion_window")
        lines = [json.loads(line) for line in stored["content"].decode("utf-8").splitlines() if line.strip()]
        batch_id = f"batch_{uuid.uuid4().hex[:24]}"
        batch = {
            "id": batch_id,
            "object": "batch",
            "endpoint": body["endpoint"],
            "errors": None,
            "input_file_id": stored["id"],
            "completion_window": "24h",
            "status": "in_progress",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": int(time.time()),
            "in_progress_at": int(time.time()),
            "completed_at": None,
            "expired_at": None,
            "cancelled_at": None,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": body.get("metadata"),
        }
        with self._lock:
            self.batches[batch_id] = batch
        self.created(batch_id, [(line.get("body") or {}).get("model") for line in lines])
        task = asyncio.create_task(self._run(batch, lines, authorization(request)))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self.create_delay_s > 0:  # the batch exists, but the client may give up before it hears so
            await asyncio.sleep(self.create_delay_s)
        return web.json_response(batch)

    async def list_batches(self, request: web.Request) -> web.Response:
        """Newest first, `limit` per page (default 20, at most 100), the page after the batch id `after`."""
        try:
            limit = min(100, max(1, int(request.query.get("limit", "20"))))
        except ValueError:
            return error_response(400, "limit must be an integer", "invalid_limit")
        newest_first = list(reversed(self.batches.values()))
        after = request.query.get("after")
        if after is not None:
            ids = [batch["id"] for batch in newest_first]
            if after not in ids:
                return error_response(400, f"no batch {after!r} to list after", "batch_not_found")
            newest_first = newest_first[ids.index(after) + 1 :]
        page = newest_first[:limit]
        return web.json_response(
            {
                "object": "list",
                "data": page,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
                "has_more": len(newest_first) > limit,
            }
        )

    def created(self, batch_id: str, models: list[Any]) -> None:
        """Tell the wires a batch of requests for these models was created."""
        for wire in self.wires:
            wire.batch_created(batch_id, models)

    def polled(self, batch_id: str, request: web.Request) -> JudgeRequestError | None:
        """What a wire answers a poll of the batch with instead of its status, else None."""
        for wire in self.wires:
            refusal = wire.batch_polled(batch_id, authorization(request))
            if refusal is not None:
                return refusal
        return None

    def count_line(self) -> None:
        """One more batch line answered (`/v1/stats/batches`)."""
        with self._lock:
            self.lines_answered += 1

    async def retrieve(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return error_response(404, f"no batch {request.match_info['batch_id']!r}", "batch_not_found")
        refusal = self.polled(batch["id"], request)
        if refusal is not None:
            return error_response(refusal.status, refusal.message, refusal.code)
        return web.json_response(batch)

    async def cancel(self, request: web.Request) -> web.Response:
        batch = self.batches.get(request.match_info["batch_id"])
        if batch is None:
            return error_response(404, f"no batch {request.match_info['batch_id']!r}", "batch_not_found")
        if batch["status"] == "in_progress":
            batch["status"] = "cancelling"
            self._cancelled[batch["id"]].set()
        return web.json_response(batch)

    # --- the work --------------------------------------------------------------------------------------

    async def _run(self, batch: dict[str, Any], lines: list[dict[str, Any]], authorization: str) -> None:
        cancelled = self._cancelled[batch["id"]] = asyncio.Event()
        if self.delay_s > 0:
            try:
                await asyncio.wait_for(cancelled.wait(), self.delay_s)
            except TimeoutError:
                pass
        answered = lines if self.expire_after is None else lines[: self.expire_after]
        outputs: list[dict[str, Any]] = []
        errors: list[dict[str, Any]] = []
        for line in answered:
            if batch["status"] == "cancelling":
                break
            status, payload, _ = await self.respond(line["body"], authorization)
            item = {
                "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                "custom_id": line["custom_id"],
                "response": {"status_code": status, "request_id": uuid.uuid4().hex, "body": payload},
                "error": None,
            }
            (outputs if status == 200 else errors).append(item)
            with self._lock:
                self.lines_answered += 1
        done = {line["custom_id"] for line in outputs + errors}
        if batch["status"] == "cancelling":
            final = "cancelled"
        elif len(done) < len(lines):
            final = "expired"
            errors += [
                {
                    "id": f"batch_req_{uuid.uuid4().hex[:24]}",
                    "custom_id": line["custom_id"],
                    "response": None,
                    "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE},
                }
                for line in lines
                if line["custom_id"] not in done
            ]
        else:
            final = "completed"
        if outputs:
            batch["output_file_id"] = self._jsonl_file(outputs, f"{batch['id']}_output.jsonl")
        if errors:
            batch["error_file_id"] = self._jsonl_file(errors, f"{batch['id']}_error.jsonl")
        batch["request_counts"] = {"total": len(lines), "completed": len(outputs), "failed": len(lines) - len(outputs)}
        batch[f"{final}_at"] = int(time.time())
        batch["status"] = final

    def _jsonl_file(self, items: list[dict[str, Any]], filename: str) -> str:
        content = "".join(json.dumps(item) + "\n" for item in items).encode()
        return self._store_file(content, filename, "batch_output")["id"]
