"""binary: passed true/false; consensus by vote.

Read from JSON `passed` (or `verdict`, `result`), else yes/no, pass/fail, true/false on a line or in `[[...]]`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.replies import (
    ParseFailure,
    Verdict,
    field,
    yes_no,
    yes_no_from_text,
)
from eval_platform.schemas import SCHEMA_VIOLATION

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


def read_yes_no(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, key: str) -> bool:
    """The yes/no a reply gives under `key` (or `verdict`, `result`), or in its text."""
    value = field(obj, key, "verdict", "result")
    if obj is not None and value is not None:
        return yes_no(value, config.strict, key)
    if obj is not None and config.strict:
        raise ParseFailure(SCHEMA_VIOLATION, f"the reply has no '{key}'")
    return yes_no_from_text(text)


def verdict_schema(_config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    return {"passed": {"type": "boolean"}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    passed = read_yes_no(config, obj, text, "passed")
    return Verdict(1.0 if passed else 0.0, 1.0 if passed else 0.0, None, passed, None, None)


def gold_text(verdict: Verdict) -> str | None:
    """`true` / `false`, as a benchmark compares it with a gold label."""
    return None if verdict.passed is None else str(bool(verdict.passed)).lower()


MODE = JudgeMode(
    "binary",
    "boolean",
    ("passed", "verdict", "result"),
    "passed",
    agreement="labels",
    consensus=VOTES,
    parse=parse,
    verdict_schema=verdict_schema,
    as_judge="label",
    gold_text=gold_text,
)
