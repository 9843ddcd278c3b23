"""Keep provider keys out of everything the platform stores or logs.

A provider or gateway may echo the request's Authorization header in an error body or even in a reply.
Every key in use (the value of each `api_key_env` variable of the evaluator) is replaced by a marker in
error details and raw replies before they reach a row, the cache or a log line.
"""

from __future__ import annotations

from collections.abc import Iterable

REDACTED = "[REDACTED]"
# Shorter values are not secrets worth matching (and would redact ordinary words).
_MIN_SECRET_LENGTH = 8


def redact(text: str | None, secrets: Iterable[str]) -> str | None:
    """`text` with every occurrence of each secret replaced by [REDACTED]."""
    if not text:
        return text
    for secret in sorted({s for s in secrets if s and len(s) >= _MIN_SECRET_LENGTH}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text
