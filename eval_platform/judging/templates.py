"""Prompt templates: `{{variable}}` and `{{#if variable}} ... {{/if}}` blocks (may nest).

`{{metadata.key}}` is one key of the trace's metadata object (fenced as `metadata_key`), so a prompt
can show an id without showing the rest of the metadata.

Parsing happens at load time so an unknown variable or an unbalanced block is an evaluator-file error,
not a failure in the middle of a run. Substituted values are fenced (see `fencing`): the evaluated
content is declared data inside an unguessable delimiter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eval_platform.judging.fencing import fence, new_secret
from eval_platform.record_fields import field_text

_NAME = r"[a-z_]+(?:\.[A-Za-z0-9_]+)?"
_TOKEN_RE = re.compile(rf"\{{\{{\s*(#if\s+{_NAME}|/if|{_NAME})\s*\}}\}}")


class TemplateError(ValueError):
    pass


@dataclass(frozen=True)
class _Text:
    text: str


@dataclass(frozen=True)
class _Var:
    name: str


@dataclass(frozen=True)
class _If:
    name: str
    body: tuple


def parse_template(template: str, allowed: set[str]) -> tuple:
    """Parse into a small tree; raise TemplateError naming the unknown variable or the unbalanced block."""
    _check_stray_tags(template, allowed)
    stack: list[tuple[str | None, list]] = [(None, [])]
    pos = 0
    for match in _TOKEN_RE.finditer(template):
        if match.start() > pos:
            stack[-1][1].append(_Text(template[pos : match.start()]))
        token = match.group(1)
        if token.startswith("#if"):
            name = token.split()[1]
            _check(name, allowed)
            stack.append((name, []))
        elif token == "/if":
            if len(stack) == 1:
                raise TemplateError("'{{/if}}' without a matching '{{#if ...}}'")
            name, body = stack.pop()
            assert name is not None  # only the bottom of the stack is nameless, and it is never popped
            stack[-1][1].append(_If(name, tuple(body)))
        else:
            _check(token, allowed)
            stack[-1][1].append(_Var(token))
        pos = match.end()
    if len(stack) > 1:
        raise TemplateError(f"'{{{{#if {stack[-1][0]}}}}}' is never closed with '{{{{/if}}}}'")
    if pos < len(template):
        stack[0][1].append(_Text(template[pos:]))
    return tuple(stack[0][1])


def _check_stray_tags(template: str, allowed: set[str]) -> None:
    """Every `{{...}}` anywhere in the template, inside `#if` blocks too, must be a tag this module knows."""
    for tag in re.finditer(r"\{\{(.*?)\}\}", template, re.DOTALL):
        if _TOKEN_RE.fullmatch(tag.group(0)):
            continue
        inner = tag.group(1).strip()
        if re.fullmatch(r"#if\s+[\w.]+|[\w.]+", inner):
            _check(inner.removeprefix("#if").strip(), allowed)  # raises: not a known name (e.g. a typo)
        raise TemplateError(f"unrecognised template tag {tag.group(0)!r}")


def _check(name: str, allowed: set[str]) -> None:
    base, dot, _key = name.partition(".")
    if dot and base == "metadata" and base in allowed:
        return
    if name not in allowed:
        raise TemplateError(f"unknown variable '{{{{{name}}}}}'; known: {', '.join(sorted(allowed))}")


def render(
    tree: tuple,
    values: dict[str, str | None],
    prefenced: frozenset[str] | set[str] = frozenset(),
    secret: str | None = None,
    fenced: bool = True,
) -> str:
    """Render with every substituted value fenced; `#if` keeps its body when the value is non-empty.

    Values named in `prefenced` are inserted as given: they were built from fenced parts already.
    `secret` is the request's fence secret (a fresh one when not given). `fenced=False` substitutes plain
    text: a benchmark's prompt to the model under test is the suite's template exactly.
    """
    secret = secret or new_secret()
    parts: list[str] = []
    for node in tree:
        if isinstance(node, _Text):
            parts.append(node.text)
        elif isinstance(node, _Var):
            value = field_text(values, node.name) or ""
            name = node.name.replace(".", "_").lower()
            plain = node.name in prefenced or not fenced
            parts.append(value if plain else fence(name, value, secret))
        elif field_text(values, node.name):
            parts.append(render(node.body, values, prefenced, secret, fenced))
    return "".join(parts)


def template_names(tree: tuple) -> set[str]:
    """Every variable a parsed template substitutes or tests."""
    names: set[str] = set()
    for node in tree:
        if isinstance(node, _Var):
            names.add(node.name)
        elif isinstance(node, _If):
            names |= {node.name} | template_names(node.body)
    return names


def required_names(tree: tuple, guarded: frozenset[str] = frozenset()) -> set[str]:
    """The variables a parsed template substitutes where no `{{#if}}` on that same variable guards them: the
    fields its prompt always shows."""
    names: set[str] = set()
    for node in tree:
        if isinstance(node, _Var) and node.name not in guarded:
            names.add(node.name)
        elif isinstance(node, _If):
            names |= required_names(node.body, guarded | {node.name})
    return names
