"""LLMBar's recorded judge completions, replayed through our pairwise parser and both-order logic.

Zeng et al. (LLMBar, ICLR 2024) published, for 28 judge runs, every completion in both presentation
orders (`data/sources/llmbar/Dataset/**/result.json`, MIT). Each completion goes through `parse_reply`
for a pairwise evaluator configured like their prompt (candidates named "Output (a)" / "Output (b)", no
ties, and their parser's convention that a completion naming both is a verdict for "Output (a)"), and the
two orders through `unswap` / `combine_orders`, exactly as `judge_scores` does. The figures come out
of that code and are compared with the authors' `statistics.json`:

- accuracy per order = verdicts equal to the gold label / n (an unparseable verdict counts as wrong);
  `correct_average` is their mean;
- `equal` (positional agreement) = both orders give the same verdict, where, as upstream, two
  unparseable verdicts also count as "the same".

`python -m eval_platform.recordings.llmbar` prints the table for every run; with `--write-datasets` it
(re)writes the benchmark datasets `data/datasets/llmbar_*/v1.jsonl` from the authors' dataset.json files.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes.pairwise import PairwiseOptions, combine_orders, unswap
from eval_platform.judging.parsing import ParseFailure, parse_reply
from eval_platform.settings import data_root

LLMBAR_DIR = Path("sources") / "llmbar" / "Dataset"
ORDERS = ("swap = False", "swap = True")
WINNER_LABEL = {"A": 1, "B": 2}  # output_1 / output_2, as the gold `label`

LLMBAR_EVALUATOR = EvaluatorConfig(
    name="llmbar_pairwise",
    mode="pairwise",
    model="openai/gpt-4",
    prompt="{{input}}\n\nOutput (a):\n{{output_a}}\n\nOutput (b):\n{{output_b}}",
    # LLMBar's parser tries the regex for "Output (a)" at a line start first: a completion naming both is (a).
    pairwise=PairwiseOptions(
        candidate_names=["Output (a)", "Output (b)"], allow_ties=False, when_both_named="first_shown"
    ),
)


def _leading_int(text: str) -> int:
    """The number `text` starts with (LLMBar's statistics write "123 (45.6%)")."""
    match = re.match(r"\s*(\d+)", text)
    if match is None:
        raise ValueError(f"no count at the start of {text!r}")
    return int(match.group(1))


@dataclass(frozen=True)
class ReplayedRun:
    subset: str
    judge: str
    strategy: str
    n: int
    correct: tuple[int, int]  # per order: presented as recorded, swapped
    equal: int  # positional agreement, upstream convention
    consistent: int  # both orders parsed and agree
    both_parsed: int
    unparseable: int  # completions (of 2n) our parser rejects
    failure_reasons: dict[str, int]
    published_correct_average: float
    published_equal: int

    @property
    def correct_average(self) -> float:
        return 100.0 * sum(self.correct) / 2 / self.n

    @property
    def unparseable_rate(self) -> float:
        return self.unparseable / (2 * self.n)


def run_paths(root: Path) -> list[Path]:
    """Every run directory holding a result.json, sorted."""
    return sorted(path.parent for path in (root / LLMBAR_DIR).glob("**/evaluators/*/*/result.json"))


def replay_run(run_dir: Path) -> ReplayedRun:
    rows = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    published = json.loads((run_dir / "statistics.json").read_text(encoding="utf-8"))
    correct = [0, 0]
    equal = consistent = both_parsed = unparseable = 0
    reasons: dict[str, int] = {}
    for row in rows:
        verdicts: list[str | None] = []
        for i, order in enumerate(ORDERS):
            completion = row["results"][-1][order]["completion"][0]
            try:
                winner = parse_reply(LLMBAR_EVALUATOR, completion).winner
            except ParseFailure as failure:
                reasons[failure.reason] = reasons.get(failure.reason, 0) + 1
                unparseable += 1
                verdicts.append(None)
                continue
            assert winner is not None  # a parsed pairwise reply names a winner
            verdict = unswap(winner) if i == 1 else winner  # the second order showed output_2 first
            verdicts.append(verdict)
            correct[i] += WINNER_LABEL[verdict] == row["label"]
        first, second = verdicts
        equal += first == second
        if first is not None and second is not None:
            both_parsed += 1
            consistent += combine_orders(first, second)[1] is True
    subset_dir = run_dir.parents[2]  # <subset>/evaluators/<judge>/<strategy>
    return ReplayedRun(
        subset=f"{subset_dir.parent.name}/{subset_dir.name}",
        judge=run_dir.parent.name,
        strategy=run_dir.name,
        n=len(rows),
        correct=(correct[0], correct[1]),
        equal=equal,
        consistent=consistent,
        both_parsed=both_parsed,
        unparseable=unparseable,
        failure_reasons=reasons,
        published_correct_average=float(published["correct_average"].rstrip("%")),
        published_equal=_leading_int(published["equal"]),
    )


# Benchmark dataset name -> the authors' subset folder (under Dataset/).
SUBSETS: dict[str, str] = {
    "llmbar_natural": "LLMBar/Natural",
    "llmbar_adversarial_neighbor": "LLMBar/Adversarial/Neighbor",
    "llmbar_adversarial_gptinst": "LLMBar/Adversarial/GPTInst",
    "llmbar_adversarial_gptout": "LLMBar/Adversarial/GPTOut",
    "llmbar_adversarial_manual": "LLMBar/Adversarial/Manual",
    "llmbar_mtbench": "Processed/MT-Bench",
    "llmbar_faireval": "Processed/FairEval",
    "llmbar_llmeval2": "Processed/LLMEval^2",
}


def dataset_cases(root: Path, dataset: str) -> list[dict]:
    """The cases of one subset, in the authors' order: the gold label ("1"/"2") is the expected output."""
    rows = json.loads((root / LLMBAR_DIR / SUBSETS[dataset] / "dataset.json").read_text(encoding="utf-8"))
    prefix = dataset.removeprefix("llmbar_")
    return [
        {
            "case_id": f"{prefix}-{index:04d}",
            "input": row["input"],
            "expected_output": str(row["label"]),
            "metadata": {"output_1": row["output_1"], "output_2": row["output_2"]},
        }
        for index, row in enumerate(rows)
    ]


def write_datasets(root: Path) -> list[Path]:
    written = []
    for dataset in SUBSETS:
        path = root / "datasets" / dataset / "v1.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        lines = [json.dumps(case, ensure_ascii=False) for case in dataset_cases(root, dataset)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    import sys

    if "--write-datasets" in sys.argv[1:]:
        for path in write_datasets(data_root()):
            print(path)
        return
    header = (
        f"{'subset':<22} {'judge':<8} {'strategy':<18} {'n':>4} {'acc avg':>8} "
        f"{'(pub)':>7} {'equal':>6} {'(pub)':>6} {'unparseable':>12}"
    )
    print(header)
    for run_dir in run_paths(data_root()):
        r = replay_run(run_dir)
        print(
            f"{r.subset:<22} {r.judge:<8} {r.strategy:<18} {r.n:>4} {r.correct_average:>7.2f}% "
            f"{r.published_correct_average:>6.2f}% {r.equal:>6} {r.published_equal:>6} "
            f"{r.unparseable:>4} ({100 * r.unparseable_rate:.1f}%)"
        )


if __name__ == "__main__":
    from eval_platform.startup import start_process

    start_process()
    main()
