"""LLMBar's recorded judge completions through our pairwise parser and both-order logic.

The expected figures are the authors' own statistics.json, shipped beside each result.json; the two
runs the issue names are also spelled out, so a change to the shipped files cannot hide a regression.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml

from eval_platform.judging.modes.pairwise import unswap
from eval_platform.judging.parsing import ParseFailure, parse_reply
from eval_platform.recordings.llmbar import (
    LLMBAR_EVALUATOR,
    ORDERS,
    WINNER_LABEL,
    replay_run,
    run_paths,
)
from eval_platform_tests.conftest import REPO_DATA

RUNS = run_paths(REPO_DATA)
MT_BENCH = REPO_DATA / "sources/llmbar/Dataset/Processed/MT-Bench/evaluators"


def test_all_recorded_runs_are_shipped():
    assert len(RUNS) == 28


@pytest.mark.parametrize(
    ("judge", "accuracy", "agreement"),
    [("GPT-4", 81.0, 174), ("ChatGPT", 71.25, 115)],
)
def test_mt_bench_vanilla_norules_reproduces_the_paper(judge, accuracy, agreement):
    run = replay_run(MT_BENCH / judge / "Vanilla_NoRules")
    assert run.n == 200
    assert run.correct_average == pytest.approx(accuracy)
    assert run.equal == agreement  # 174/200 = 87.0%, 115/200 = 57.5%
    assert run.unparseable == 0 and run.consistent == agreement


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: "/".join(p.parts[-5:]))
def test_every_run_matches_its_published_statistics(run_dir):
    run = replay_run(run_dir)
    assert run.correct_average == pytest.approx(run.published_correct_average, abs=0.005)
    assert run.equal == run.published_equal


@pytest.mark.parametrize("run_dir", RUNS, ids=lambda p: "/".join(p.parts[-5:]))
def test_unparseable_rate_is_what_the_raw_data_implies(run_dir):
    """Where the authors' parser found no winner, ours fails too (raw reply kept), and nowhere else."""
    rows = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    recorded_none = 0
    for row in rows:
        for i, order in enumerate(ORDERS):
            recorded = row["results"][-1][order]
            completion, winner = recorded["completion"][0], recorded["winner"]
            if winner is None:
                recorded_none += 1
                with pytest.raises(ParseFailure) as failure:
                    parse_reply(LLMBAR_EVALUATOR, completion)
                assert failure.value.reason in {"empty_reply", "unparseable"}
            else:
                ours = parse_reply(LLMBAR_EVALUATOR, completion).winner
                assert str(WINNER_LABEL[unswap(ours) if i else ours]) == winner
    assert replay_run(run_dir).unparseable == recorded_none


# LLMBar's parser (LLMEvaluator/evaluate.py with evaluators/config/*.json): the first pattern found wins.
AUTHORS_PATTERNS = {"1": r"(?:^|\n) ?Output \(a\)", "2": r"(?:^|\n) ?Output \(b\)"}


def authors_reading(completion: str) -> str | None:
    return next((label for label, pattern in AUTHORS_PATTERNS.items() if re.search(pattern, completion)), None)


@pytest.mark.parametrize(
    "completion", ["Output (a)\nOutput (b)", "Output (b)\n\nOutput (a)", "Output (b)\nI was wrong.\nOutput (a)"]
)
def test_a_completion_naming_both_outputs_is_read_as_the_authors_parser_reads_it(completion):
    """Where our parser finds both outputs named (first or last line, `Key: x`, `[[x]]`), the declared convention
    gives the authors' reading; by default the reply is ambiguous."""
    ours = parse_reply(LLMBAR_EVALUATOR, completion).winner
    assert str(WINNER_LABEL[ours]) == authors_reading(completion) == "1"
    plain = LLMBAR_EVALUATOR.model_copy(
        update={"pairwise": LLMBAR_EVALUATOR.pairwise.model_copy(update={"when_both_named": "ambiguous"})}
    )
    with pytest.raises(ParseFailure, match="ambiguous"):  # without the declared convention: no winner
        parse_reply(plain, completion)


def test_the_shipped_suite_declares_the_same_convention_as_the_replay():
    suite = yaml.safe_load((REPO_DATA / "benchmarks" / "llmbar.yaml").read_text(encoding="utf-8"))
    declared = {task["as_judge"]["evaluator"]["pairwise"]["when_both_named"] for task in suite["tasks"].values()}
    assert declared == {LLMBAR_EVALUATOR.pairwise.when_both_named} == {"first_shown"}
