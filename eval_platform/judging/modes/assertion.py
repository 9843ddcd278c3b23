"""assertion: a yes/no answer compared with the evaluator's `expect`; consensus by vote."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.modes.binary import read_yes_no
from eval_platform.judging.replies import Verdict

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


def verdict_schema(_config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    return {"answer": {"type": "string", "enum": ["yes", "no"]}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    answer = read_yes_no(config, obj, text, "answer")
    passed = answer == config.expect
    return Verdict(1.0 if passed else 0.0, 1.0 if answer else 0.0, "yes" if answer else "no", passed, None, None)


MODE = JudgeMode(
    "assertion",
    "boolean",
    ("answer", "verdict", "result"),
    "passed",
    agreement="labels",
    consensus=VOTES,
    accepts=("expect",),
    parse=parse,
    verdict_schema=verdict_schema,
    system_note="Answer the question about the content with yes or no.",
)
