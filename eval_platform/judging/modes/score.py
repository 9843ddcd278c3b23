"""score: a number on the evaluator's score_scale, normalized to [0, 1]; consensus mean/median.

Read from JSON `score` (or `rating`), else `Rating: [[7]]`, `Score: 4/5` or a number alone on a line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eval_platform.judging.modes import AVERAGES, VOTES, JudgeMode
from eval_platform.judging.replies import (
    SCORE_TEXT_RE,
    ParseFailure,
    Verdict,
    field,
    score_from_text,
)
from eval_platform.schemas import OUT_OF_RANGE, SCHEMA_VIOLATION

if TYPE_CHECKING:
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.judging.options import ScoreScale


def _scale(config: EvaluatorConfig) -> ScoreScale:
    """The evaluator's `score_scale`, which an evaluator of this mode always has once loaded (defaulted or required)."""
    value = config.score_scale
    if value is None:
        raise ValueError(f"evaluator '{config.name}' of mode '{config.mode}' has no `score_scale`")
    return value


def verdict_schema(config: EvaluatorConfig, _n_candidates: int | None) -> dict[str, Any]:
    scale = _scale(config)
    return {"score": {"type": "number", "minimum": scale.min, "maximum": scale.max}}


def parse(config: EvaluatorConfig, obj: dict[str, Any] | None, text: str, _n: int | None) -> Verdict:
    raw = field(obj, "score", "rating")
    scale = _scale(config)
    if obj is not None and raw is not None:
        if isinstance(raw, str) and not config.strict:
            match = SCORE_TEXT_RE.match(raw.strip())
            raw = float(match.group(1)) if match and match.group(2) is None else raw
        if isinstance(raw, bool) or not isinstance(raw, (int, float)):
            raise ParseFailure(SCHEMA_VIOLATION, f"'score' must be a number, got {raw!r}")
    elif obj is not None and config.strict:
        raise ParseFailure(SCHEMA_VIOLATION, "the reply has no 'score'")
    else:
        raw = score_from_text(text, scale.max)
    if not scale.min <= raw <= scale.max:
        raise ParseFailure(OUT_OF_RANGE, f"score {raw} is outside the scale {scale.min}..{scale.max}")
    return Verdict((raw - scale.min) / (scale.max - scale.min), float(raw), None, None, None, None)


def gold_text(verdict: Verdict) -> str | None:
    """The raw score on the evaluator's scale, as a benchmark compares it with a gold score."""
    return None if verdict.raw_score is None else repr(float(verdict.raw_score))


MODE = JudgeMode(
    "score",
    "scaled",
    ("score", "rating"),
    "raw_score",
    agreement="scores",
    consensus=(*AVERAGES, *VOTES),
    options=("score_scale",),
    accepts=("rubric",),
    parse=parse,
    verdict_schema=verdict_schema,
    as_judge="rating",
    gold_text=gold_text,
)
