"""LLMBar's recorded judge completions through our pairwise parser and both-order logic.

The expected figures are the authors' own statistics.json, shipped beside each result.json; the two
runs the issue names are also spelled out, so a change to the shipped files cannot hide a regression.
"""

from __future__ import annotations

import json

import pytest

from eval_platform.judging.parsing import ParseFailure, parse_reply
from eval_platform.judging.runner import unswap
from eval_platform.recordings.llmbar import LLMBAR_EVALUATOR, ORDERS, WINNER_LABEL, replay_run, run_paths
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
