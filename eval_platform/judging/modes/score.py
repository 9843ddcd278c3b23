"""score: a number on the evaluator's score_scale, normalized to [0, 1]; consensus mean/median."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode("score", "scaled", ("score", "rating"), "raw_score", options=("score_scale",))
