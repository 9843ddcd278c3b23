"""`fault/<kind>`: misbehaving judge replies, served over real HTTP so retry, timeout and parsing paths can be tested.

Each kind imitates one way a provider fails: throttling, server errors (permanent or once per prompt),
slowness, and replies that arrive with status 200 but are not the JSON object that was asked for. An embeddings
request for a `fault/<kind>` model fails as the chat request would, or with a 500 where the chat reply would be a
(bad) 200.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading

from eval_platform.local_judge.answers import Answer, JudgeRequestError
from eval_platform.local_judge.mock_verdict import mock_verdict
from eval_platform.local_judge.server import Wire

FAULT_PREFIX = "fault/"

FAULT_KINDS = (
    "rate_limit",
    "rate_limit_once",
    "server_error",
    "server_error_once",
    "slow",
    "malformed",
    "truncated",
    "empty",
    "prose",
)

# Almost JSON: a missing comma, so a lenient parser cannot quietly accept it.
MALFORMED_CONTENT = '{"score": 4, "reasoning": "good" "extra"}'


class FirstSeen:
    """Remembers which (fault kind, prompt) pairs were already requested."""

    def __init__(self) -> None:
        self._seen: set[tuple[str, str]] = set()
        # Concurrent requests for one prompt must see exactly one "first"; check-and-add is one step.
        self._lock = threading.Lock()

    def is_first(self, kind: str, prompt_digest: str) -> bool:
        """True exactly once per (kind, prompt_digest)."""
        key = (kind, prompt_digest)
        with self._lock:
            if key in self._seen:
                return False
            self._seen.add(key)
            return True


def _format_seconds(seconds: float) -> str:
    return f"{seconds:g}"


async def fault_answer(
    kind: str, prompt: str, prompt_digest: str, first_seen: FirstSeen, retry_after_s: float, slow_s: float
) -> Answer:
    """The reply of fault mode `kind` for this prompt; raises JudgeRequestError for error statuses."""
    if kind not in FAULT_KINDS:
        # litellm reports this as a RateLimitError because the list mentions rate_limit; the message
        # still names the mistake, and naming the valid kinds is what makes it quick to fix.
        raise JudgeRequestError(
            400,
            f"unknown fault kind {kind!r}; valid kinds: {', '.join(FAULT_KINDS)}",
            code="unknown_fault_kind",
        )
    model = f"local/fault-{kind}"
    mock_json = json.dumps(mock_verdict(prompt))

    if kind == "rate_limit" or (kind == "rate_limit_once" and first_seen.is_first(kind, prompt_digest)):
        raise JudgeRequestError(
            429,
            f"rate limited by fault/{kind}; retry after {_format_seconds(retry_after_s)} s",
            error_type="rate_limit_error",
            code="rate_limit_exceeded",
            headers={"Retry-After": _format_seconds(retry_after_s)},
        )
    if kind == "server_error" or (kind == "server_error_once" and first_seen.is_first(kind, prompt_digest)):
        raise JudgeRequestError(500, f"internal error injected by fault/{kind}", "server_error", "internal_error")

    if kind == "slow":
        await asyncio.sleep(slow_s)
    if kind == "malformed":
        return Answer(MALFORMED_CONTENT, model)
    if kind == "truncated":
        return Answer(mock_json[: len(mock_json) // 2], model, finish_reason="length")
    if kind == "empty":
        return Answer("", model)
    if kind == "prose":
        return Answer(f"Sure! Here is my verdict:\n```json\n{mock_json}\n```\nLet me know if you need more.", model)
    # slow, and the "_once" kinds after their first request, answer like mock.
    return Answer(mock_json, model)


class Faults(Wire):
    """The `fault/<kind>` models: a 429 asks to retry after `retry_after_s`, a `slow` reply takes `slow_s`."""

    models = (f"{FAULT_PREFIX}<kind>",)

    def __init__(self, retry_after_s: float = 1.0, slow_s: float = 5.0) -> None:
        self.retry_after_s = retry_after_s
        self.slow_s = slow_s
        self._first_seen = FirstSeen()

    async def answer(self, model: str, prompt: str, credentials: str) -> Answer | None:
        if not model.startswith(FAULT_PREFIX):
            return None
        digest = hashlib.sha256(prompt.encode()).hexdigest()
        kind = model.removeprefix(FAULT_PREFIX)
        return await fault_answer(kind, prompt, digest, self._first_seen, self.retry_after_s, self.slow_s)

    async def embedding(self, model: str, texts: list[str], credentials: str) -> str | None:
        if await self.answer(model, "\n".join(texts), credentials) is None:
            return None
        raise JudgeRequestError(500, f"{model}: no embedding", error_type="server_error")
