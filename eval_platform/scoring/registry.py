"""Name -> scorer: the only list of the scorers. A scorer module imports `scoring.base`, never this module, so
each can be imported first; adding a metric is one module defining its `Scorer`s plus its name in `_MODULES`."""

from __future__ import annotations

from eval_platform.scoring import (
    agent_steps,
    bertscore,
    json_valid,
    judge_evaluator,
    judge_verdict,
    numeric,
    pairwise_choice,
    rouge,
    sacrebleu_metrics,
    semantic_similarity,
    squad,
    text_match,
    tool_calls,
    trace_limits,
)
from eval_platform.scoring.base import (
    MissingField,
    NotApplicable,
    Scorer,
    ScorerOptions,
)

# the names callers of the registry use, so they need not know the base module
__all__ = ["SCORERS", "MissingField", "NotApplicable", "Scorer", "ScorerOptions", "get"]

_MODULES = (
    squad,
    sacrebleu_metrics,
    rouge,
    bertscore,
    text_match,
    json_valid,
    numeric,
    pairwise_choice,
    judge_verdict,
    judge_evaluator,
    tool_calls,
    agent_steps,
    trace_limits,
    semantic_similarity,
)

SCORERS: dict[str, Scorer] = {scorer.name: scorer for module in _MODULES for scorer in module.SCORERS}


def get(name: str) -> Scorer:
    """The scorer called `name`; a KeyError listing the known names otherwise."""
    try:
        return SCORERS[name]
    except KeyError:
        raise KeyError(f"unknown scorer '{name}'; known: {sorted(SCORERS)}") from None
