"""binary: passed true/false; consensus by vote."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode("binary", "boolean", ("passed", "verdict", "result"), "passed")
