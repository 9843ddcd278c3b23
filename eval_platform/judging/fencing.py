"""How evaluated content is fenced inside a judge prompt.

Every value substituted into a template (the trace's input, output, context, ...) is wrapped in a block
whose delimiter carries a tag derived from the value itself. The content's author cannot close the block
early because the tag is a hash of the very text they would have to write it into. The tag is
deterministic, so identical requests stay identical and the judge-call cache keeps working.

    <<<output 3f9a1c0d2b7e>>>
    ...the evaluated text, verbatim...
    <<<end output 3f9a1c0d2b7e>>>

The local judge server finds the blocks with `FENCE_RE`.
"""

from __future__ import annotations

import hashlib
import re

FENCE_RE = re.compile(r"<<<([a-z0-9_]+) ([0-9a-f]{12})>>>\n(.*?)\n<<<end \1 \2>>>", re.DOTALL)

# The marker line after which a prompt states the JSON Schema the reply must match (one line of JSON).
REPLY_SCHEMA_MARKER = "Reply with only a JSON object matching this JSON Schema:"


def fence_tag(name: str, value: str) -> str:
    return hashlib.sha256(f"{name}\x00{value}".encode()).hexdigest()[:12]


def fence(name: str, value: str) -> str:
    tag = fence_tag(name, value)
    return f"<<<{name} {tag}>>>\n{value}\n<<<end {name} {tag}>>>"


def unfence_all(text: str) -> dict[str, list[str]]:
    """Every fenced block in `text`, by variable name, in order of appearance."""
    blocks: dict[str, list[str]] = {}
    for match in FENCE_RE.finditer(text):
        blocks.setdefault(match.group(1), []).append(match.group(3))
    return blocks
