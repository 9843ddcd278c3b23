"""The judge modes, one module each, and the `MODES` registry (mode name -> `JudgeMode`).

A `JudgeMode` states what the rest of the platform needs to know about a mode, so that no other file
types out a set of mode names: what kind of verdict it gives (which decides consensus, aggregation and
agreement statistics), the JSON keys its verdict is read from, the column a consensus vote is taken on,
the option sections it needs (filled with their defaults when absent), and its template variables.

Each mode's module also owns its reply: the JSON Schema of its verdict fields (`verdict_schema`, which the
prompt shows the judge) and its parser (`parse`, a JSON object or the text shapes real judges write, to a
`Verdict`). `parsing.parse_reply` and `prompts.reply_schema` only dispatch on the mode. Adding a mode is
one module here defining `MODE` plus its entry below, and its tests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

VerdictKind = Literal["scaled", "boolean", "label", "ranking"]
BASE_VARIABLES = frozenset({"input", "output", "context", "expected", "metadata"})


@dataclass(frozen=True)
class JudgeMode:
    name: str
    verdict: VerdictKind
    verdict_keys: tuple[str, ...]  # where a JSON reply holds the verdict, most usual key first
    vote_column: str  # the judge_scores column a consensus vote counts
    options: tuple[str, ...] = ()  # evaluator sections the mode needs, defaulted to {} when absent
    output_variables: tuple[str, ...] = ("output",)  # what the prompt shows in place of {{output}}
    required_variables: tuple[tuple[str, str], ...] = ()  # (variable, why) the prompt must use
    # (config, JSON object or None, reply text, n candidates) -> Verdict; raises replies.ParseFailure
    parse: Callable[..., Any] | None = None
    # (config, n candidates) -> the verdict fields of the reply's JSON Schema
    verdict_schema: Callable[..., dict[str, Any]] | None = None
    system_note: str | None = None  # a line the system message adds for this mode

    @property
    def numeric(self) -> bool:
        """Its per-case value is a number: consensus may average, agreement is a correlation."""
        return self.verdict in ("scaled", "ranking")

    @property
    def labelled(self) -> bool:
        """Its per-case value is a label: consensus is a vote, agreement is on labels."""
        return self.verdict in ("boolean", "label")

    def template_variables(self) -> set[str]:
        return set(BASE_VARIABLES - {"output"}) | set(self.output_variables)


from eval_platform.judging.modes import (  # noqa: E402  (the modules import JudgeMode from here)
    assertion,
    binary,
    categorical,
    n_wise,
    pairwise,
    reference,
    score,
)

MODES: dict[str, JudgeMode] = {
    m.MODE.name: m.MODE for m in (score, binary, assertion, categorical, pairwise, n_wise, reference)
}


def modes_where(predicate) -> frozenset[str]:
    """The names of the modes for which `predicate(mode)` holds."""
    return frozenset(name for name, mode in MODES.items() if predicate(mode))


SCALED_MODES = modes_where(lambda m: m.verdict == "scaled")
BOOLEAN_MODES = modes_where(lambda m: m.verdict == "boolean")
LABEL_MODES = modes_where(lambda m: m.labelled)
NUMERIC_MODES = modes_where(lambda m: m.numeric)
