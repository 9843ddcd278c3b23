"""The lean path to OpenAI-compatible endpoints: one POST /chat/completions on a shared aiohttp session.

Measured (README, "Benchmark: judge throughput"): litellm spends several ms of CPU per call on its logging,
cost calculation, the OpenAI SDK's request transform and pydantic response objects; on two cores that, not
the provider, caps a fast judge. For endpoints that speak OpenAI's chat-completions wire format (an
`api_base` to vLLM, llama.cpp, a gateway or the local judge; `openai/...` models) this module sends the same
request body litellm would and reads the same fields back; every other provider still goes through litellm.
Retries, Retry-After, timeouts, concurrency and budgets stay in `client`, shared by both paths.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import sys
import urllib.request
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eval_platform import jsontext
from eval_platform.llm import pricing
from eval_platform.llm.redaction import clip, remember
from eval_platform.llm.request_json import messages_json, scalar

if TYPE_CHECKING:
    import aiohttp

OPENAI_API_BASE = "https://api.openai.com/v1"


def is_openai_compatible(model: str, api_base: str | None) -> bool:
    """True for calls the lean path sends exactly as litellm would.

    `openai/<name>` is litellm's own spelling of "an OpenAI-compatible server" (with `api_base`) or OpenAI
    itself; an unprefixed name with an `api_base` is what litellm sends to that base as OpenAI too. Reasoning
    models (o1, o3, ... as litellm's price map marks them) stay on litellm, which rewrites their parameters.
    """
    if model.startswith("openai/"):
        name = model.removeprefix("openai/")
    elif "/" not in model and api_base:
        name = model
    else:
        return False
    entry = pricing.model_cost().get(name) or {}
    return not entry.get("supports_reasoning")


@dataclass
class ProviderHTTPError(Exception):
    """A non-2xx answer (or a 2xx that is not a completion), with the Retry-After it carried."""

    status: int | None
    body: str
    retry_after: str | None = None

    def __str__(self) -> str:
        return f"HTTP {self.status}: {self.body}" if self.status is not None else self.body


@dataclass
class Completion:
    content: str
    finish_reason: str | None
    model: str | None
    usage: dict[str, Any]


@dataclass
class Embeddings:
    data: Any  # OpenAI's list of {index, embedding}
    model: str | None
    usage: dict[str, Any]


def is_connection_error(exc: BaseException) -> bool:
    """An aiohttp connection failure or a socket error: retryable, as litellm's APIConnectionError."""
    aiohttp = sys.modules.get("aiohttp")
    return isinstance(exc, OSError) or (aiohttp is not None and isinstance(exc, aiohttp.ClientError))


class OpenAICompatTransport:
    """One aiohttp session per event loop (each `judge_day` runs its own loop); `aclose()` ends the current one."""

    def __init__(self) -> None:
        self._sessions: dict[int, aiohttp.ClientSession] = {}
        # Per event loop (a day), per base and key: the URL and headers, looked up once (the environment included).
        self._targets: dict[tuple[int, str | None, str | None], tuple[Any, dict[str, str]]] = {}
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

    def _session(self, key: int) -> aiohttp.ClientSession:
        """The session of the event loop whose id is `key` (the running one)."""
        session = self._sessions.get(key)
        if session is None or session.closed:
            import aiohttp  # on the first call: the code location loads without it (a quarter of a second)

            # The endpoint limiter bounds concurrency; the connector must not add a second, hidden limit.
            # trust_env makes aiohttp look up ~/.netrc in a thread on every request (a measurable share of the
            # path at hundreds of calls/s): only when proxy variables are set does the environment matter.
            trust_env = bool(urllib.request.getproxies())
            # Each call's `timeout_s` bounds it whole (`_timeout`): aiohttp's default (5 minutes in total, 30 s to
            # connect) would be a hidden cap on a longer `timeout_s`.
            no_timeout = aiohttp.ClientTimeout(total=None, connect=None, sock_connect=None, sock_read=None)
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0), trust_env=trust_env, timeout=no_timeout
            )
            self._sessions[key] = session
        return session

    def _target(self, loop: int, api_base: str | None, api_key: str | None) -> tuple[Any, dict[str, str]]:
        """The URL (a parsed `yarl.URL`) and headers of a chat completion, once per day (event loop `loop`, the
        running one's id), base and key."""
        key = (loop, api_base, api_key)
        target = self._targets.get(key)
        if target is None:
            import yarl  # aiohttp's own URL type: parsed once instead of on every request

            base, headers = resolve_base_and_headers(api_base, api_key)
            target = self._targets[key] = (yarl.URL(f"{base}/chat/completions"), headers)
        return target

    async def aclose(self) -> None:
        loop = id(asyncio.get_running_loop())
        self._targets = {key: target for key, target in self._targets.items() if key[0] != loop}
        session = self._sessions.pop(loop, None)
        if session is not None:
            await session.close()

    def _timeout(self, timeout_s: float) -> aiohttp.ClientTimeout:
        """aiohttp's total timeout of `timeout_s` seconds: one timer bounds the call whole (connecting, sending, reading
        the reply), never rounded up (`ceil_threshold`); a timed-out call raises TimeoutError. Its timer context takes
        the event loop it was given: a per-call `asyncio.timeout` looked the loop up twice (a getpid() each in
        Python 3.11) and was a second timer beside aiohttp's own."""
        timeout = self._timeouts.get(timeout_s)
        if timeout is None:
            import aiohttp

            timeout = self._timeouts[timeout_s] = aiohttp.ClientTimeout(total=timeout_s, ceil_threshold=math.inf)
        return timeout

    async def _post(
        self, loop: int, url: Any, body: bytes, headers: dict[str, str], timeout_s: float
    ) -> tuple[int, bytes]:
        """POST `body` (JSON) within `timeout_s` on the session of event loop `loop`: the status and the body's bytes
        (JSON, which json reads from bytes as they are); an HTTP error is a ProviderHTTPError with its text."""
        timeout = self._timeout(timeout_s)
        async with self._session(loop).post(url, data=body, headers=headers, timeout=timeout) as response:
            status, retry_after = response.status, response.headers.get("retry-after")
            if status >= 400:
                raise ProviderHTTPError(status, await response.text(), retry_after)
            return status, await response.read()

    async def complete(
        self,
        model: str,
        messages: list[dict[str, str]],
        api_base: str | None,
        api_key: str | None,
        temperature: float,
        max_tokens: int,
        timeout_s: float,
        written_messages: str | None = None,
        loop: int | None = None,
    ) -> Completion:
        """One chat completion; `written_messages` is `messages` as JSON when the caller has it already (the
        request's, which its cache key was made of: `request_json`), so the body is not written twice. `loop` is the
        running event loop's id when the caller has it (in Python 3.11 each `get_running_loop()` is a getpid())."""
        if loop is None:
            loop = id(asyncio.get_running_loop())
        url, headers = self._target(loop, api_base, api_key)
        body = chat_body_json(model, messages, temperature, max_tokens, written_messages).encode()
        status, raw = await self._post(loop, url, body, headers, timeout_s)
        try:
            return parse_completion(jsontext.loads(raw))
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            text = raw.decode("utf-8", errors="replace")
            detail = f"not a chat completion ({type(exc).__name__}): {clip(text, 500, [api_key])}"
            raise ProviderHTTPError(status, detail) from exc

    async def embed(
        self, model: str, texts: list[str], api_base: str | None, api_key: str | None, timeout_s: float
    ) -> Embeddings:
        """`POST {base}/embeddings` (OpenAI's wire, the vectors asked for as floats): the response's `data` (checked
        by the client, `embeddings.embedding_vectors`), model and usage."""
        loop = id(asyncio.get_running_loop())
        chat_url, headers = self._target(loop, api_base, api_key)
        url = chat_url.parent.parent / "embeddings"  # {base}/chat/completions -> {base}/embeddings
        body = json.dumps(embeddings_body(model, texts)).encode()
        status, raw = await self._post(loop, url, body, headers, timeout_s)
        try:
            data = json.loads(raw)
            return Embeddings(data=data["data"], model=data.get("model"), usage=data.get("usage") or {})
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            text = raw.decode("utf-8", errors="replace")
            detail = f"not an embeddings response ({type(exc).__name__}): {clip(text, 500, [api_key])}"
            raise ProviderHTTPError(status, detail) from exc


def embeddings_body(model: str, texts: list[str]) -> dict[str, Any]:
    """The embeddings request body, as litellm's openai provider sends it, with the vectors asked for as floats."""
    return {"model": model.removeprefix("openai/"), "input": texts, "encoding_format": "float"}


def chat_body(model: str, messages: list[dict[str, str]], temperature: float, max_tokens: int) -> dict[str, Any]:
    """The chat-completions request body, as litellm's openai provider sends it (also one line of a batch)."""
    return {
        "model": model.removeprefix("openai/"),
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }


def chat_body_json(
    model: str, messages: list[dict[str, str]], temperature: float, max_tokens: int, written_messages: str | None = None
) -> str:
    """`chat_body` as JSON text, with the messages' JSON as `request_json` writes it (`written_messages`, when given:
    the same messages, their keys sorted)."""
    if written_messages is None:
        written_messages = messages_json(messages).text
    return (
        '{"model": '
        + scalar(model.removeprefix("openai/"))
        + ', "messages": '
        + written_messages
        + ', "temperature": '
        + scalar(temperature)
        + ', "max_tokens": '
        + scalar(max_tokens)
        + "}"
    )


def resolve_base_and_headers(api_base: str | None, api_key: str | None) -> tuple[str, dict[str, str]]:
    """The base URL (no trailing slash) and headers for an OpenAI-compatible endpoint."""
    # Where litellm looks when the evaluator names neither (its openai provider reads the same variables).
    api_base = api_base or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_BASE")
    api_key = api_key or os.environ.get("OPENAI_API_KEY")
    headers = {"Content-Type": "application/json"}
    if api_key:
        remember(api_key)  # whatever is sent, from the evaluator or the environment, is never kept
        headers["Authorization"] = f"Bearer {api_key}"
    return (api_base or OPENAI_API_BASE).rstrip("/"), headers


def parse_completion(data: Any) -> Completion:
    """The fields we use of a chat completion's JSON; raises KeyError, IndexError, ... on another shape."""
    choice = data["choices"][0]
    return Completion(
        content=choice["message"].get("content") or "",
        finish_reason=choice.get("finish_reason"),
        model=data.get("model"),
        usage=data.get("usage") or {},
    )
