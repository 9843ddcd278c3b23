"""An OpenAI-compatible chat-completions server that judges without a model, for demos, tests and benchmarks.

The requested model name picks the behaviour:
- `mock` or `mock/<anything>`: a deterministic placeholder verdict that satisfies the prompt's reply schema;
- `replay/gpt-3.5-turbo`, `replay/pandalm-7b`: the verdict recorded for this item in the PandaLM study, found
  by the prompt's fenced `item_id` (or metadata object), else by the fenced texts (see `pandalm_replay`);
  `replay/llmbar/<judge>/<method>`: the completions recorded by the LLMBar authors (see `llmbar_replay`);
- `fixed/<reply>`: always answers `<reply>` verbatim (the demo's scripted benchmark model, `fixed/The answer is 18.`).

The same answers come back through OpenAI's Files and Batch APIs, one per line of a batch (see `batches`), and
`/v1/embeddings` answers deterministic vectors (see `embeddings`).

Whoever starts the server can plug in more behaviour (`Wire`, `LocalJudgeServer(wires=[...])`): models of their
own, endpoints of other providers, what a batch's poll answers. The project's tests plug in provider faults, a
provider echoing the caller's key, scripted judges, an application's chat model, Azure OpenAI's and Anthropic's
wires (`tools/local_judge_wires`, not shipped).

Every chat-completions request is counted in `/v1/stats`, so tests can prove that no judge call was made.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from eval_platform.judging.fencing import unfence_all
from eval_platform.local_judge.answers import Answer, JudgeRequestError, approx_tokens, message_text
from eval_platform.local_judge.batches import BatchStore, authorization, json_body
from eval_platform.local_judge.embeddings import embedding_inputs, embeddings_response
from eval_platform.local_judge.llmbar_replay import LLMBarRecordings
from eval_platform.local_judge.mock_verdict import mock_verdict
from eval_platform.local_judge.pandalm_replay import (
    RECORDED_JUDGES,
    PandaLMRecordings,
    ReplayMismatch,
    item_id_from_metadata,
)
from eval_platform.schemas import PLACEHOLDER_MODEL
from eval_platform.settings import data_root as default_data_root

REPLAY_MISS_MESSAGE = "replay: no recorded verdict for this prompt (item not found)"
MOCK_REPLY_MODEL = PLACEHOLDER_MODEL  # the model its placeholder verdicts report (rows are marked by it)

# In-flight requests (a slow reply, say) get this long to finish when the server stops.
_SHUTDOWN_TIMEOUT_S = 1.0
FIXED_PREFIX = "fixed/"


class Wire:
    """Behaviour plugged into one local judge by whoever starts it: `LocalJudgeServer(wires=[...])`.

    Every hook is optional; one that returns None leaves the request to the next wire, then to the server.
    `attach` is called once, by the server's constructor, before any other hook."""

    # spelt in the error listing the valid models when a model is unknown
    models: tuple[str, ...] = ()

    def attach(self, server: LocalJudgeServer) -> None:
        self.server = server

    def routes(self, app: web.Application) -> None:
        """Add endpoints (another provider's wire) to the application."""

    async def chat(self, request: web.Request, body: Any) -> web.StreamResponse | None:
        """Answer a whole `/v1/chat/completions` request itself (streaming, tool calls), before the judge does."""
        return None

    async def answer(self, model: str, prompt: str, credentials: str) -> Answer | None:
        """The reply to a chat request for `model` (or raise JudgeRequestError), None when `model` is not its own."""
        return None

    async def embedding(self, model: str, texts: list[str], credentials: str) -> str | None:
        """For an embeddings request: the model name its vectors report (or raise JudgeRequestError), None when
        `model` is not its own."""
        return None

    def batch_created(self, batch_id: str, models: list[Any]) -> None:
        """A batch of requests for these models was created (OpenAI's, or another wire's)."""

    def batch_polled(self, batch_id: str, credentials: str) -> JudgeRequestError | None:
        """What a poll of the batch answers instead of its status, None for its status."""
        return None

    def reset(self) -> None:
        """Forget what was counted or remembered (`POST /v1/stats/reset`)."""


class LocalJudgeServer:
    """The local judge served by aiohttp on a daemon thread with its own event loop.

    Use `start()`/`stop()` or a `with` block; `base_url` is the OpenAI-style base URL ending in `/v1`.
    """

    def __init__(
        self,
        data_root: Path | None = None,
        latency_ms: float = 0.0,
        host: str = "127.0.0.1",
        port: int = 0,
        aliases: dict[str, str] | None = None,
        rate_limit_rps: float | None = None,
        rate_limit_burst: int = 10,
        prompt_cache: bool = False,
        batch_delay_s: float = 0.0,
        batch_expire_after: int | None = None,
        batch_create_delay_s: float = 0.0,
        wires: Sequence[Wire] = (),
    ):
        # What the caller plugs in (see `Wire`), asked in this order before the server's own models.
        self.wires = list(wires)
        # OpenAI's Files and Batch APIs (see `batches`): a batch is answered after `batch_delay_s`; with
        # `batch_expire_after=N` only its first N lines are, and it expires with the rest unanswered.
        self.batches = BatchStore(
            self.respond,
            delay_s=batch_delay_s,
            expire_after=batch_expire_after,
            create_delay_s=batch_create_delay_s,
            wires=self.wires,
        )
        # Like OpenAI's automatic prompt caching: a system message seen before is reported as cached input
        # tokens (usage.prompt_tokens_details.cached_tokens), so spend accounting can be tested.
        self.prompt_cache = prompt_cache
        self._seen_prefixes: set[str] = set()
        # A provider's rate limit: a token bucket of `rate_limit_burst` requests refilled at `rate_limit_rps`;
        # a request finding it empty gets 429 with the Retry-After until the next token.
        self.rate_limit_rps = rate_limit_rps
        self.rate_limit_burst = rate_limit_burst
        self._bucket = float(rate_limit_burst)
        self._bucket_at = time.monotonic()
        self._rate_limited = 0
        # A provider's model name served as one of ours (e.g. {"gpt-4o-mini": "mock"}), the way a LiteLLM
        # proxy or a gateway on localhost answers for a paid model: tests of pricing and budgets use it.
        self.aliases = dict(aliases or {})
        self.data_root = Path(data_root) if data_root is not None else default_data_root()
        self.latency_ms = latency_ms
        self.host = host
        self.port = port
        self.base_url: str | None = None

        self._requests = 0
        self._requests_by_model: Counter[str] = Counter()
        # What a provider bills: every interactive reply it produced, read by the client or not (a client killed
        # mid-call is billed all the same); tests compare spend ledgers with it (`/v1/stats/billed`).
        self._billed: Counter[str] = Counter()
        self._stats_lock = threading.Lock()
        self._recordings: PandaLMRecordings | None = None
        self._recordings_lock = threading.Lock()
        self._llmbar_recordings: LLMBarRecordings | None = None

        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        for wire in self.wires:
            wire.attach(self)

    # --- lifecycle -------------------------------------------------------------------------------------

    def start(self) -> str:
        """Bind, serve in the background and return the base URL (`http://host:port/v1`)."""
        if self._thread is not None:
            raise RuntimeError("local judge server already started")
        ready = threading.Event()
        startup_errors: list[BaseException] = []
        loop = asyncio.new_event_loop()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._open())
            except BaseException as error:  # noqa: BLE001 - handed to the starting thread, which re-raises
                startup_errors.append(error)
                loop.close()
                ready.set()
                return
            ready.set()
            loop.run_forever()
            assert self._runner is not None  # `_open` set it before `ready`; only `stop` clears it, after this thread
            loop.run_until_complete(self._runner.cleanup())
            # Handlers still running past the shutdown timeout (a slow reply) are cancelled, not abandoned.
            leftovers = asyncio.all_tasks(loop)
            for task in leftovers:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*leftovers, return_exceptions=True))
            loop.close()

        self._loop = loop
        self._thread = threading.Thread(target=serve, name="local-judge-server", daemon=True)
        self._thread.start()
        ready.wait()
        if startup_errors:
            self._thread.join()
            self._thread = self._loop = None
            raise startup_errors[0]
        assert self.base_url is not None  # `_open` set it before `ready`
        return self.base_url

    def stop(self) -> None:
        """Stop serving and wait for the server thread to exit; a no-op if not running."""
        if self._thread is None:
            return
        assert self._loop is not None  # set with `_thread`
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._thread = self._loop = self._runner = None
        self.base_url = None

    def __enter__(self) -> LocalJudgeServer:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    async def _open(self) -> None:
        self._runner = web.AppRunner(self.build_app(), access_log=None, shutdown_timeout=_SHUTDOWN_TIMEOUT_S)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, self.port).start()
        self.port = self._runner.addresses[0][1]
        self.base_url = f"http://{self.host}:{self.port}/v1"

    def build_app(self) -> web.Application:
        """The aiohttp application, for serving it some other way (e.g. aiohttp's test client)."""
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat_completions)
        app.router.add_post("/chat/completions", self._chat_completions)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/embeddings", self._embeddings)
        app.router.add_get("/v1/stats", self._stats)
        app.router.add_get("/v1/stats/billed", self._billed_stats)
        app.router.add_post("/v1/stats/reset", self._reset_stats)
        # Batches created, files stored and batch lines answered (reset with the other counts).
        app.router.add_get("/v1/stats/batches", self.batches.stats_handler)
        self.batches.routes(app)
        for wire in self.wires:
            wire.routes(app)
        return app

    # --- handlers --------------------------------------------------------------------------------------

    async def _stats(self, _request: web.Request) -> web.Response:
        with self._stats_lock:
            stats: dict[str, Any] = {"requests": self._requests, "by_model": dict(self._requests_by_model)}
            if self.rate_limit_rps is not None:
                stats["rate_limited"] = self._rate_limited  # 429s sent by the rate limit
            return web.json_response(stats)

    async def _billed_stats(self, _request: web.Request) -> web.Response:
        with self._stats_lock:
            return web.json_response({"replies": 0, "prompt_tokens": 0, "completion_tokens": 0, **self._billed})

    async def _reset_stats(self, _request: web.Request) -> web.Response:
        with self._stats_lock:
            self._requests = 0
            self._requests_by_model.clear()
            self._billed.clear()
        self.batches.reset()
        for wire in self.wires:
            wire.reset()
        return web.json_response({"requests": 0, "by_model": {}})

    async def _chat_completions(self, request: web.Request) -> web.StreamResponse:
        body = await json_body(request)
        for wire in self.wires:
            response = await wire.chat(request, body)
            if response is not None:
                return response
        status, payload, headers = await self.interactive(body, authorization(request))
        return web.json_response(payload, status=status, headers=headers)

    async def _embeddings(self, request: web.Request) -> web.Response:
        """OpenAI's embeddings endpoint (see `embeddings`): counted and rate limited like a chat call."""
        body = await json_body(request)
        model = body.get("model") if isinstance(body, dict) else None
        self.count(model if isinstance(model, str) else "")
        try:
            self._take_token()
            model, texts = embedding_inputs(body)
            reported = None
            for wire in self.wires:
                reported = await wire.embedding(model, texts, authorization(request))
                if reported is not None:
                    break
        except JudgeRequestError as error:
            return web.json_response(error.body(), status=error.status, headers=error.headers)
        payload = embeddings_response(model, texts, reported)
        with self._stats_lock:
            self._billed.update(replies=1, prompt_tokens=payload["usage"]["prompt_tokens"], completion_tokens=0)
        return web.json_response(payload)

    async def interactive(self, body: Any, credentials: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        """One interactive call: counted in `/v1/stats`, delayed by `latency_ms`, rate limited, answered."""
        model = body.get("model") if isinstance(body, dict) else None
        self.count(model if isinstance(model, str) else "")

        if self.latency_ms > 0:
            await asyncio.sleep(self.latency_ms / 1000)
        try:
            self._take_token()
        except JudgeRequestError as error:
            return error.status, error.body(), error.headers
        status, payload, headers = await self.respond(body, credentials)
        if status == 200:
            with self._stats_lock:
                self._billed.update(
                    replies=1,
                    prompt_tokens=payload["usage"]["prompt_tokens"],
                    completion_tokens=payload["usage"]["completion_tokens"],
                )
        return status, payload, headers

    async def respond(self, body: Any, authorization: str) -> tuple[int, dict[str, Any], dict[str, str]]:
        """(status, JSON body, headers) of one chat-completions request body: what `/v1/chat/completions`
        answers, and what a batch answers for each of its lines."""
        try:
            messages = self._validated_messages(body)
            model = body["model"]
            prompt = "\n".join(message_text(message) for message in messages)
            answer = await self._answer(model, prompt, authorization)
        except JudgeRequestError as error:
            return error.status, error.body(), error.headers
        completion = self._completion(answer, messages)
        if self.prompt_cache:
            prefix = message_text(messages[0]) if messages else ""
            with self._stats_lock:
                seen = prefix in self._seen_prefixes
                self._seen_prefixes.add(prefix)
            completion["usage"]["prompt_tokens_details"] = {"cached_tokens": approx_tokens(prefix) if seen else 0}
        return 200, completion, {}

    def _take_token(self) -> None:
        if self.rate_limit_rps is None:
            return
        with self._stats_lock:
            now = time.monotonic()
            self._bucket = min(self.rate_limit_burst, self._bucket + (now - self._bucket_at) * self.rate_limit_rps)
            self._bucket_at = now
            if self._bucket >= 1:
                self._bucket -= 1
                return
            self._rate_limited += 1
            wait = max(0.1, round((1 - self._bucket) / self.rate_limit_rps, 1))
        raise JudgeRequestError(
            429,
            f"Rate limit reached: {self.rate_limit_rps} requests per second; retry after {wait} s",
            error_type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": str(wait)},
        )

    def count(self, model: str) -> None:
        """Count one request for `model` in `/v1/stats` (a wire answering a request itself calls it)."""
        with self._stats_lock:
            self._requests += 1
            self._requests_by_model[model] += 1

    @staticmethod
    def _validated_messages(body: Any) -> list[dict[str, Any]]:
        if not isinstance(body, dict):
            raise JudgeRequestError(400, "request body must be a JSON object", code="invalid_body")
        if not isinstance(body.get("model"), str):
            raise JudgeRequestError(400, "missing required parameter: 'model'", code="missing_model")
        if body.get("stream"):
            raise JudgeRequestError(400, "the local judge does not stream; send stream=false", code="unsupported")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise JudgeRequestError(400, "'messages' must be a non-empty list of objects", code="invalid_messages")
        return messages

    async def _answer(self, model: str, prompt: str, credentials: str) -> Answer:
        model = self.aliases.get(model, model)
        if model == "mock" or model.startswith("mock/"):
            return Answer(json.dumps(mock_verdict(prompt)), MOCK_REPLY_MODEL)
        if model.startswith("replay/llmbar/"):
            return self._replay_llmbar(model.removeprefix("replay/llmbar/"), prompt)
        if model.startswith("replay/"):
            return self._replay(model.removeprefix("replay/"), prompt)
        if model.startswith(FIXED_PREFIX):
            return Answer(model.removeprefix(FIXED_PREFIX), f"local/{model}")
        for wire in self.wires:
            answer = await wire.answer(model, prompt, credentials)
            if answer is not None:
                return answer
        # A wire's own kinds are not spelled out (`<prefix>/<kind>`): litellm files any error whose text mentions a
        # rate limit as a retryable RateLimitError, which would hide this permanent configuration error.
        valid = ["mock", "mock/<any>", *(f"replay/{name}" for name in RECORDED_JUDGES)]
        valid += ["replay/llmbar/<judge>/<method>", f"{FIXED_PREFIX}<reply>"]
        valid += [name for wire in self.wires for name in wire.models]
        raise JudgeRequestError(
            404, f"the local judge has no model {model!r}; valid: {', '.join(valid)}", code="model_not_found"
        )

    def _replay(self, judge_name: str, prompt: str) -> Answer:
        if judge_name not in RECORDED_JUDGES:
            raise JudgeRequestError(
                404,
                f"replay: no recordings for {judge_name!r}; recorded judges: {', '.join(RECORDED_JUDGES)}",
                code="model_not_found",
            )
        blocks = unfence_all(prompt)
        if not all(blocks.get(name) for name in ("input", "output_a", "output_b")):
            raise JudgeRequestError(
                400, "replay: the prompt needs fenced input, output_a and output_b blocks", code="replay_miss"
            )
        # `{{metadata.item_id}}` fences the id alone; `{{metadata}}` fences the whole object.
        item_id = blocks.get("metadata_item_id", [None])[0] or item_id_from_metadata(blocks.get("metadata", [None])[0])
        try:
            verdict = self._pandalm().lookup(
                judge_name, blocks["input"][0], blocks["output_a"][0], blocks["output_b"][0], item_id=item_id
            )
        except ReplayMismatch as error:
            raise JudgeRequestError(400, f"replay: {error}", code="replay_miss") from error
        if verdict is None:
            raise JudgeRequestError(400, REPLAY_MISS_MESSAGE, code="replay_miss")

        reply_model = RECORDED_JUDGES[judge_name].reply_model
        if verdict.winner is None:
            # The authors could not parse the judge's reply either; pass that on for the parser to fail.
            return Answer(f"[recorded verdict unusable: {verdict.raw_result}]", reply_model)
        return Answer(json.dumps({"winner": verdict.winner, "reasoning": verdict.reasoning}), reply_model)

    def _replay_llmbar(self, run: str, prompt: str) -> Answer:
        recordings = self._llmbar()
        if run not in recordings.runs:
            raise JudgeRequestError(
                404,
                f"replay: no LLMBar recordings for {run!r}; recorded runs: {', '.join(sorted(recordings.runs))}",
                code="model_not_found",
            )
        blocks = unfence_all(prompt)
        if not all(blocks.get(name) for name in ("input", "output_a", "output_b")):
            raise JudgeRequestError(
                400, "replay: the prompt needs fenced input, output_a and output_b blocks", code="replay_miss"
            )
        completion = recordings.lookup(run, blocks["input"][0], blocks["output_a"][0], blocks["output_b"][0])
        if completion is None:
            raise JudgeRequestError(
                400, f"replay: the LLMBar run {run} recorded no completion for this item and order", code="replay_miss"
            )
        return Answer(completion, f"{run} (LLMBar recording)")

    def _llmbar(self) -> LLMBarRecordings:
        with self._recordings_lock:
            if self._llmbar_recordings is None:
                self._llmbar_recordings = LLMBarRecordings.load(self.data_root)
            return self._llmbar_recordings

    def _pandalm(self) -> PandaLMRecordings:
        with self._recordings_lock:
            if self._recordings is None:
                try:
                    self._recordings = PandaLMRecordings.load(self.data_root)
                except FileNotFoundError as error:
                    raise JudgeRequestError(
                        400, f"replay: PandaLM recordings not found ({error.filename})", code="replay_unavailable"
                    ) from error
            return self._recordings

    @staticmethod
    def _completion(answer: Answer, messages: list[dict[str, Any]]) -> dict[str, Any]:
        prompt_tokens = sum(approx_tokens(message_text(message)) for message in messages)
        completion_tokens = approx_tokens(answer.content)
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": answer.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer.content},
                    "finish_reason": answer.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
