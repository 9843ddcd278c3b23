"""A careless provider or gateway that echoes the caller's credentials, so tests can prove no key is kept.

The credentials are what the request carried (OpenAI's `Authorization`, Azure's `api-key` or Anthropic's
`x-api-key` header, see `eval_platform.local_judge.batches.authorization`). By model name:
- `fault/echo_key`: an error (400) whose message quotes them;
- `fault/echo_key_reply`: a reply that parses, with them in its reasoning and in the model name it reports;
- `fault/echo_key_long`: an error whose message is about 4,000 characters of them, repeated, after a
  prompt-dependent run of padding: whatever cut a client makes in the text (2,000 characters, 500, ...),
  some prompt has a key straddling it.

And a batch holding any of these lines answers its first poll (`GET .../batches/{id}`, OpenAI's, Azure's or
Anthropic's) with a 503 quoting the poller's credentials, as a gateway in front of a batch API may; the next
poll is answered normally. An embeddings request for `fault/echo_key_reply` answers vectors reporting a model
name that holds the credentials; the other two fail as the chat request does.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

from eval_platform.local_judge.answers import Answer, JudgeRequestError
from eval_platform.local_judge.server import Wire

ECHO_KEY_MODELS = ("fault/echo_key", "fault/echo_key_reply", "fault/echo_key_long")
LONG_ECHO_CHARS = 4000
POLL_ECHO_STATUS = 503


def echo_key_answer(model: str, authorization: str, prompt: str) -> Answer:
    """The answer of an echo model (one of ECHO_KEY_MODELS) to a request carrying `authorization`."""
    if model == "fault/echo_key":
        message = f"malformed request from client with Authorization: {authorization}"
        raise JudgeRequestError(400, message, code="bad_request")
    if model == "fault/echo_key_long":
        echo = f"Authorization: {authorization}; "
        padding = int(hashlib.sha256(prompt.encode()).hexdigest(), 16) % len(echo)
        text = "." * padding + echo * (LONG_ECHO_CHARS // len(echo) + 1)
        raise JudgeRequestError(400, f"malformed request, headers received: {text}", code="bad_request")
    reply = json.dumps({"score": 3, "reasoning": f"request authorised by {authorization}"})
    return Answer(reply, f"fault-echo for {authorization}")


def echoes_on_first_poll(models: list[object]) -> bool:
    """Whether a batch whose lines ask these models answers its first poll with the credentials echoed."""
    return any(model in ECHO_KEY_MODELS for model in models)


def poll_echo_message(authorization: str) -> str:
    return f"upstream timed out; request was: GET with Authorization: {authorization}"


class EchoKey(Wire):
    """The echo models, and the first poll of a batch holding any of them (see the module's text)."""

    def __init__(self) -> None:
        self._echo_on_poll: set[str] = set()  # batches whose next poll echoes the key
        self._lock = threading.Lock()

    async def answer(self, model: str, prompt: str, credentials: str) -> Answer | None:
        return echo_key_answer(model, credentials, prompt) if model in ECHO_KEY_MODELS else None

    async def embedding(self, model: str, texts: list[str], credentials: str) -> str | None:
        answer = await self.answer(model, "\n".join(texts), credentials)
        return None if answer is None else answer.model

    def batch_created(self, batch_id: str, models: list[Any]) -> None:
        if echoes_on_first_poll(models):
            with self._lock:
                self._echo_on_poll.add(batch_id)

    def batch_polled(self, batch_id: str, credentials: str) -> JudgeRequestError | None:
        with self._lock:
            if batch_id not in self._echo_on_poll:
                return None
            self._echo_on_poll.discard(batch_id)
        return JudgeRequestError(POLL_ECHO_STATUS, poll_echo_message(credentials), code="gateway_timeout")

    def reset(self) -> None:
        with self._lock:
            self._echo_on_poll.clear()
