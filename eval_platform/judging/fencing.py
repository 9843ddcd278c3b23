"""How evaluated content is fenced inside a judge prompt.

Every value substituted into a template (the trace's input, output, context, ...) is wrapped in a block
whose delimiter carries a per-request secret: 64 random bits drawn when the prompt is built. The content's
author wrote the text before the secret existed, so no content can close its block early or forge a
well-formed block of its own (a tag derived from the content could be computed by the attacker). Every
block of a request carries that one secret, the few-shot examples' too: a tag fixed per evaluator would be
the same in every request, so content could forge an example block that reads as the evaluator's own.
The judge-call cache stays content-addressed: its key marks where the secret stood (see `cache.cache_key`).

    <<<output 3f9a1c0d2b7e55a1>>>
    ...the evaluated text, verbatim...
    <<<end output 3f9a1c0d2b7e55a1>>>

The local judge server finds the blocks with `FENCE_RE`.
"""

from __future__ import annotations

import os
import re
import threading

FENCE_RE = re.compile(r"<<<([a-z0-9_]+) ([0-9a-f]{12,32})>>>\n(.*?)\n<<<end \1 \2>>>", re.DOTALL)

# The marker line after which a prompt states the JSON Schema the reply must match (one line of JSON).
REPLY_SCHEMA_MARKER = "Reply with only a JSON object matching this JSON Schema:"


# Secrets are cut from random bytes drawn SECRET_POOL_BYTES at a time from the operating system (`os.urandom`, what
# `secrets.token_hex` reads): one system call per 512 requests instead of one per request (~2% of the CPU of a
# call at concurrency 128). The bytes are as unpredictable either way; none is ever handed out twice, and a forked
# child starts with a pool of its own (`os.register_at_fork`), so two processes never share secrets. The fork hook
# is registered when the first pool is drawn, not on import: importing the package changes nothing process-wide
# (a process that never fences a prompt has no pool to drop).
SECRET_BYTES = 8  # 64 bits
SECRET_POOL_BYTES = 4096
_pool = bytearray()
_pool_lock = threading.Lock()
_drops_at_fork = False  # whether `_drop_pool` is registered (a forked child inherits the registration)


def _drop_pool() -> None:
    global _pool_lock
    _pool_lock = threading.Lock()  # another thread may have held it at the fork: the child's copy would never open
    _pool.clear()


def new_secret() -> str:
    """A fresh fence secret for one request (64 random bits, as 16 hex digits)."""
    global _drops_at_fork
    with _pool_lock:
        if len(_pool) < SECRET_BYTES:
            if not _drops_at_fork:
                os.register_at_fork(after_in_child=_drop_pool)
                _drops_at_fork = True
            _pool[:] = os.urandom(SECRET_POOL_BYTES)
        secret = _pool[-SECRET_BYTES:].hex()
        del _pool[-SECRET_BYTES:]
    return secret


def fence(name: str, value: str, secret: str | None = None) -> str:
    """`value` in a block tagged with the request's secret (a fresh one when not given)."""
    secret = secret or new_secret()
    return f"<<<{name} {secret}>>>\n{value}\n<<<end {name} {secret}>>>"


def unfence_all(text: str) -> dict[str, list[str]]:
    """Every fenced block in `text`, by variable name, in order of appearance."""
    blocks: dict[str, list[str]] = {}
    for match in FENCE_RE.finditer(text):
        blocks.setdefault(match.group(1), []).append(match.group(3))
    return blocks
