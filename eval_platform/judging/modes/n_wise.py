"""n_wise: a ranking of several candidates ({{candidates}}); each candidate's rank is its value."""

from eval_platform.judging.modes import JudgeMode

MODE = JudgeMode(
    "n_wise", "ranking", ("ranking", "rank", "order"), "raw_score",
    options=("n_wise",), output_variables=("candidates",), required_variables=("candidates",),
)
