"""categorical: one label of the evaluator's `labels`; consensus by vote.

Read from JSON `label` (or `category`), else `[[label]]`, `Label: x` or a label alone on a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.replies import ParseFailure, Verdict, choice_from_text, field, norm

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


def verdict_schema(config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    return {"label": {"type": "string", "enum": list(config.labels)}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    labels = {k.lower(): k for k in config.labels}
    value = field(obj, "label", "category")
    if obj is not None and value is not None:
        if not isinstance(value, str) or norm(value) not in labels:
            raise ParseFailure("schema_violation", f"'label' must be one of {list(config.labels)}, got {value!r}")
        canonical = labels[norm(value)]
    elif obj is not None and config.strict:
        raise ParseFailure("schema_violation", "the reply has no 'label'")
    else:
        canonical = choice_from_text(text, labels, "label")
    return Verdict(config.labels[canonical], None, canonical, None, None, None)


def check(config: EvaluatorConfig) -> None:
    if not config.labels:
        raise ValueError("mode 'categorical' needs `labels`: a mapping label -> score in 0..1")
    bad = {k: v for k, v in config.labels.items() if not 0.0 <= v <= 1.0}
    if bad:
        raise ValueError(f"labels map to scores in 0..1; out of range: {bad}")


def gold_text(verdict: Verdict) -> str | None:
    """The label, as a benchmark compares it with a gold label."""
    return verdict.label


MODE = JudgeMode(
    "categorical", "label", ("label", "category"), "label", agreement="labels", consensus=VOTES,
    accepts=("labels",), check=check, parse=parse, verdict_schema=verdict_schema, as_judge="label",
    gold_text=gold_text,
)
