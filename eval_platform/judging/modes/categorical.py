"""categorical: one label of the evaluator's `labels`; consensus by vote."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode("categorical", "label", ("label", "category"), "label")
