"""What a judging mode produces: a completion to send back, or an OpenAI-style error."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Answer:
    """The assistant message of a successful completion and the model name to report."""

    content: str
    model: str
    finish_reason: str = "stop"


@dataclass(eq=False)  # exceptions must stay hashable for traceback machinery
class JudgeRequestError(Exception):
    """An error reply in OpenAI's shape; clients (litellm, openai) map status and type to exceptions."""

    status: int
    message: str
    error_type: str = "invalid_request_error"
    code: str | None = None
    headers: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return f"{self.status}: {self.message}"

    def body(self) -> dict:
        """The JSON body OpenAI sends with an error."""
        return {"error": {"message": self.message, "type": self.error_type, "param": None, "code": self.code}}


def approx_tokens(text: str) -> int:
    """A deterministic token estimate: one token per four characters, rounded up."""
    return math.ceil(len(text) / 4)


def message_text(message: dict[str, Any]) -> str:
    """The text of one chat message, whether its content is a string or a list of content parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""
