"""reference: a score against the gold answer ({{expected}}), on score_scale."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode(
    "reference", "scaled", ("score", "rating"), "raw_score",
    options=("score_scale", "reference"), required_variables=("expected",),
)
