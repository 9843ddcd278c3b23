"""assertion: a yes/no answer compared with the evaluator's `expect`; consensus by vote."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode("assertion", "boolean", ("answer", "verdict", "result"), "passed")
