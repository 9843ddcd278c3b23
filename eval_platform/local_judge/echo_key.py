"""A careless provider or gateway that echoes the caller's credentials, so tests can prove no key is kept.

The credentials are what the request carried (OpenAI's `Authorization`, Azure's `api-key` or Anthropic's
`x-api-key` header, see `batches.authorization`). By model name:
- `fault/echo_key`: an error (400) whose message quotes them;
- `fault/echo_key_reply`: a reply that parses, with them in its reasoning and in the model name it reports;
- `fault/echo_key_long`: an error whose message is about 4,000 characters of them, repeated, after a
  prompt-dependent run of padding: whatever cut a client makes in the text (2,000 characters, 500, ...),
  some prompt has a key straddling it.

And a batch holding any of these lines answers its first poll (`GET .../batches/{id}`, OpenAI's, Azure's or
Anthropic's) with a 503 quoting the poller's credentials, as a gateway in front of a batch API may; the next
poll is answered normally.
"""

from __future__ import annotations

import hashlib
import json

from eval_platform.local_judge.answers import Answer, JudgeRequestError

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
