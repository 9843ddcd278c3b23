"""pairwise: which of two outputs ({{output_a}}, {{output_b}}) is better, or a tie; consensus by vote."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode(
    "pairwise", "label", ("winner", "verdict", "choice"), "winner",
    options=("pairwise",), output_variables=("output_a", "output_b"),
)
