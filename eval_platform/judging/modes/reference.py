"""reference: a score against the gold answer ({{expected}}), on score_scale; read as `score` reads it."""

from eval_platform.judging.modes import JudgeMode, score

MODE = JudgeMode(
    "reference", "scaled", ("score", "rating"), "raw_score",
    options=("score_scale", "reference"), required_variables=(("expected", "the gold answer the judge compares with"),),
    parse=score.parse, verdict_schema=score.verdict_schema,
)
