"""Keep provider keys out of everything the platform stores, caches, logs or prints.

A provider or gateway may echo a request's credentials (its Authorization, api-key or x-api-key header) in an
error body, in a reply, in the model name it reports, or in the answer to a batch poll. The rule, written once:

- A *secret* is any key the platform may send: the value of each `api_key_env` variable an evaluator or a
  model under test uses, any key an endpoint takes from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY,
  ...), and the value of every environment variable named like a provider key (`*API_KEY`, `*ACCESS_KEY`,
  `*_TOKEN`, `*_SECRET`). Each is remembered for the life of the process (`remember`).
- `redact` replaces every run of text made of pieces of a secret at least `MIN_PIECE` (8) characters long
  with [REDACTED]: a whole key, and also the piece of one left at the edge of a text cut short elsewhere.
- `clip` is how provider text is shortened: redacted first, then cut, so no cut leaves a piece of a key.
- `install_log_redaction` passes every log record, of every logger (the platform's, Dagster's `context.log`,
  litellm's, aiohttp's, asyncio's), and every printed warning through `redact` as it is created, before any
  handler (the console, Dagster's event log, its compute logs) sees it. Each process installs it where it starts
  (`eval_platform/startup.py`), never on import.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping
from typing import Any, overload

REDACTED = "[REDACTED]"
# No piece of a key this long survives; shorter secrets are not worth matching (they would hide ordinary words).
MIN_PIECE = 8
# Every piece of MIN_PIECE characters of a key holds one whole block of _BLOCK characters that starts at a
# multiple of _BLOCK in the key: looking for those blocks finds every piece, at the cost of a few str.find.
_BLOCK = MIN_PIECE // 2
# Environment variables whose values are provider keys by their name alone.
_KEY_NAME = re.compile(r"(API_?KEY|ACCESS_KEY|_TOKEN|_SECRET)$", re.IGNORECASE)


class _Secrets:
    """The secrets remembered so far, and the aligned blocks of each that `redact` looks for."""

    def __init__(self) -> None:
        self.values: frozenset[str] = frozenset()
        self.blocks: tuple[tuple[str, str, int], ...] = ()  # (block, secret, offset of the block in the secret)
        self._lock = threading.Lock()
        self._on_first: Callable[[], None] | None = None

    def add(self, values: Iterable[str | None]) -> None:
        new = {v for v in values if isinstance(v, str) and len(v) >= MIN_PIECE} - self.values
        if not new:
            return
        with self._lock:
            self.values |= new
            self.blocks = tuple(
                (secret[offset : offset + _BLOCK], secret, offset)
                for secret in sorted(self.values)
                for offset in range(0, len(secret) - _BLOCK + 1, _BLOCK)
            )
            hook, self._on_first = self._on_first, None
        if hook is not None:
            hook()

    def when_first(self, hook: Callable[[], None]) -> None:
        """Call `hook` once there is a secret: now, or when the first one is remembered."""
        with self._lock:
            if not self.blocks:
                self._on_first = hook
                return
        hook()


_SECRETS = _Secrets()


def remember(*secrets: str | None) -> None:
    """Treat these values as secrets from now on (values shorter than MIN_PIECE, and None, are ignored)."""
    _SECRETS.add(secrets)


def secrets_in_env(env: Mapping[str, str]) -> set[str]:
    """The values of the environment variables named like provider keys (OPENAI_API_KEY, HF_TOKEN, ...)."""
    return {value for name, value in env.items() if _KEY_NAME.search(name) and value and not value.isspace()}


def remember_env(env: Mapping[str, str] | None = None) -> None:
    """Remember the keys in `env` and in the process's environment, where litellm looks for the key of an
    endpoint that names none (ANTHROPIC_API_KEY, AZURE_API_KEY, ...), as it is now."""
    _SECRETS.add(secrets_in_env(os.environ) | secrets_in_env(env or {}))


def _spans(text: str, blocks: tuple[tuple[str, str, int], ...]) -> list[tuple[int, int]]:
    """(start, end) of every run of `text` that is a piece of a secret of at least MIN_PIECE characters."""
    spans = []
    for block, secret, offset in blocks:
        at = text.find(block)
        while at != -1:
            start, before = at, offset  # extend the match left and right along the secret
            while start > 0 and before > 0 and text[start - 1] == secret[before - 1]:
                start, before = start - 1, before - 1
            end, after = at + _BLOCK, offset + _BLOCK
            while end < len(text) and after < len(secret) and text[end] == secret[after]:
                end, after = end + 1, after + 1
            if end - start >= MIN_PIECE:
                spans.append((start, end))
            at = text.find(block, at + 1)
    return spans


@overload
def redact(text: str, secrets: Iterable[str | None] = ()) -> str: ...
@overload
def redact(text: None, secrets: Iterable[str | None] = ()) -> None: ...
@overload
def redact(text: str | None, secrets: Iterable[str | None] = ()) -> str | None: ...
def redact(text: str | None, secrets: Iterable[str | None] = ()) -> str | None:
    """`text` with every piece of a secret (`secrets`, and every one remembered) of MIN_PIECE or more characters
    replaced by [REDACTED]; `secrets` are remembered from now on."""
    if secrets:
        _SECRETS.add(secrets)
    if not text or not _SECRETS.blocks:
        return text
    merged: list[list[int]] = []
    for start, end in sorted(_spans(text, _SECRETS.blocks)):
        if merged and start <= merged[-1][1]:  # overlapping or touching pieces: one marker
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    if not merged:
        return text
    parts, done = [], 0
    for start, end in merged:
        parts += [text[done:start], REDACTED]
        done = end
    parts.append(text[done:])
    return "".join(parts)


@overload
def clip(text: str, limit: int, secrets: Iterable[str | None] = ()) -> str: ...
@overload
def clip(text: None, limit: int, secrets: Iterable[str | None] = ()) -> None: ...
@overload
def clip(text: str | None, limit: int, secrets: Iterable[str | None] = ()) -> str | None: ...
def clip(text: str | None, limit: int, secrets: Iterable[str | None] = ()) -> str | None:
    """`text` redacted, then cut to `limit` characters: the one way provider text is shortened."""
    text = redact(text, secrets)
    return text[:limit] if text is not None and len(text) > limit else text


def _redact_record(record: logging.LogRecord) -> None:
    if not _SECRETS.blocks:
        return
    try:
        message = record.getMessage()
    except Exception:  # a malformed logging call: logging reports it itself when a handler formats the record
        return
    redacted = redact(message)
    if redacted != message:
        record.msg, record.args = redacted, ()
    if record.exc_info and not record.exc_text:
        # Formatters use exc_text when it is set: the traceback is written redacted.
        traceback = logging.Formatter().formatException(record.exc_info)
        redacted = redact(traceback)
        if redacted != traceback:
            record.exc_text = redacted


_installed = False


def _install_record_factory() -> None:
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        _redact_record(record)
        return record

    logging.setLogRecordFactory(redacted_record)


def install_log_redaction() -> None:
    """Redact every log record as it is created, and every warning as it is formatted (once per process). The
    record factory is put in place with the first secret remembered (a record made before there is any secret has
    nothing to redact), so a process without a key makes its log records without a detour."""
    global _installed
    if _installed:
        return
    _installed = True
    _SECRETS.when_first(_install_record_factory)
    remember_env()
    format_warning = warnings.formatwarning

    def redacted_warning(message, category, filename, lineno, line=None) -> str:
        return redact(format_warning(message, category, filename, lineno, line))

    warnings.formatwarning = redacted_warning
