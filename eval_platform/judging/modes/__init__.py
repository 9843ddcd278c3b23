"""The judge modes, one module each, and the `MODES` registry (mode name -> `JudgeMode`).

A `JudgeMode` states what the rest of the platform needs to know about a mode, so that no other file
types out a set of mode names: what kind of verdict it gives (which decides consensus, aggregation and
agreement statistics), the JSON keys its verdict is read from, the column a consensus vote is taken on,
the option sections it needs (filled with their defaults when absent), and its template variables.

Interface (for a joint scorer registry): `MODES` is a plain dict; each value is a frozen `JudgeMode`.
Adding a mode is one module here defining `MODE` plus its entry below (its parser and reply schema
still live in judging/parsing.py and judging/prompts.py, keyed by the mode name).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

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
    required_variables: tuple[str, ...] = ()  # template variables the prompt must use

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
