"""What a judging mode produces: a completion to send back, or an OpenAI-style error."""

from __future__ import annotations

from dataclasses import dataclass, field


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
