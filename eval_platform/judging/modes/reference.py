"""reference: a score against the gold answer ({{expected}}), on score_scale; read as `score` reads it."""

from eval_platform.judging.modes import AVERAGES, VOTES, JudgeMode, score
from eval_platform.schemas import NO_REFERENCE

MODE = JudgeMode(
    "reference",
    "scaled",
    ("score", "rating"),
    "raw_score",
    agreement="scores",
    consensus=(*AVERAGES, *VOTES),
    options=("score_scale", "reference"),
    accepts=("rubric",),
    required_variables=(("expected", "the gold answer the judge compares with"),),
    needs_values=(("expected", NO_REFERENCE, "the trace has no expected_output (nor a matching dataset case)"),),
    parse=score.parse,
    verdict_schema=score.verdict_schema,
)
