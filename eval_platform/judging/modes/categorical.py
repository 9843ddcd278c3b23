"""categorical: one label of the evaluator's `labels`; consensus by vote.

Read from JSON `label` (or `category`), else `[[label]]`, `Label: x` or a label alone on a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import VOTES, JudgeMode
from eval_platform.judging.replies import (
    ParseFailure,
    Verdict,
    choice_from_text,
    field,
    norm,
)
from eval_platform.schemas import SCHEMA_VIOLATION

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig


def _labels(config: EvaluatorConfig) -> dict[str, float]:
    """The evaluator's `labels`, which an evaluator of this mode always has once loaded (defaulted or required)."""
    value = config.labels
    if value is None:
        raise ValueError(f"evaluator '{config.name}' of mode '{config.mode}' has no `labels`")
    return value


def verdict_schema(config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    return {"label": {"type": "string", "enum": list(_labels(config))}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    labels = {k.lower(): k for k in _labels(config)}
    value = field(obj, "label", "category")
    if obj is not None and value is not None:
        if not isinstance(value, str) or norm(value) not in labels:
            raise ParseFailure(SCHEMA_VIOLATION, f"'label' must be one of {list(_labels(config))}, got {value!r}")
        canonical = labels[norm(value)]
    elif obj is not None and config.strict:
        raise ParseFailure(SCHEMA_VIOLATION, "the reply has no 'label'")
    else:
        canonical = choice_from_text(text, labels, "label")
    return Verdict(_labels(config)[canonical], None, canonical, None, None, None)


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
    "categorical",
    "label",
    ("label", "category"),
    "label",
    agreement="labels",
    consensus=VOTES,
    accepts=("labels",),
    check=check,
    parse=parse,
    verdict_schema=verdict_schema,
    as_judge="label",
    gold_text=gold_text,
)
