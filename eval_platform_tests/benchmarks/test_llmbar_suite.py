"""The LLMBar suite through the assets: the authors' 28 recorded judge runs, replayed by the local judge over
HTTP per item and presentation order, must give every published statistics.json figure in benchmark_results."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA, judge_requests

SUBSET_TASK = {"Natural": "natural", "MT-Bench": "mtbench", "FairEval": "faireval", "LLMEval^2": "llmeval2"}
ADVERSARIAL_TASKS = ["adversarial_neighbor", "adversarial_gptinst", "adversarial_gptout", "adversarial_manual"]


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def recorded_runs() -> list[tuple[str, str, str, dict]]:
    """(task, judge, method, statistics.json) for every run whose completions are shipped."""
    runs = []
    for stats in sorted((REPO_DATA / "sources" / "llmbar" / "Dataset").glob("**/evaluators/*/*/statistics.json")):
        if (stats.parent / "result.json").exists():
            subset = stats.parents[3].name
            runs.append(
                (SUBSET_TASK[subset], stats.parent.parent.name, stats.parent.name, json.loads(stats.read_text()))
            )
    return runs


def partition(judge: str, method: str) -> str:
    return f"llmbar-{judge.lower()}-{method.lower().replace('_', '-')}"


@pytest.fixture(scope="module")
def llmbar_project(tmp_path_factory, local_judge):
    """A data root with the shipped suite, models and datasets; every model materialized once."""
    tmp = tmp_path_factory.mktemp("llmbar")
    root = tmp / "data"
    shutil.copytree(REPO_DATA / "benchmarks", root / "benchmarks")
    for folder in (REPO_DATA / "datasets").glob("llmbar_*"):
        shutil.copytree(folder, root / "datasets" / folder.name)
    (root / "evaluators").mkdir()
    models = yaml.safe_load((root / "benchmarks" / "models.yaml").read_text())
    # A live judge is any litellm string: here an OpenAI-compatible server (the local judge) that always
    # answers "Output (a)", and one whose key is not set.
    models["models"]["always-a"] = {"model": "openai/fixed/Output (a)", "api_base": local_judge.base_url}
    models["models"]["no-key"] = {"model": "openai/gpt-4o-mini", "api_key_env": "EVAL_PLATFORM_TEST_UNSET_KEY"}
    (root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump(models))
    mp = pytest.MonkeyPatch()
    mp.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
    mp.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    mp.delenv("EVAL_PLATFORM_TEST_UNSET_KEY", raising=False)
    defs = build_definitions(root)
    home = tmp / "dagster_home"
    home.mkdir()
    before = judge_requests(local_judge)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        instance.add_dynamic_partitions("benchmark_models", sorted(models["models"]))
        suite = dg.AssetSelection.groups("benchmark_llmbar")
        for model in sorted(models["models"]):
            result = dg.materialize(
                assets=list(defs.assets),
                selection=suite,
                partition_key=model,
                instance=instance,
                resources=defs.resources,
                raise_on_error=False,
            )
            assert result.success, model
        calls = judge_requests(local_judge) - before
        board = dg.materialize(
            assets=list(defs.assets), selection=["leaderboard"], instance=instance, resources=defs.resources
        )
        assert board.success
        yield root, defs, instance, calls
    mp.undo()


@pytest.mark.parametrize(
    ("task", "judge", "method", "published"), recorded_runs(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_recorded_run_reproduces_its_published_statistics(llmbar_project, task, judge, method, published):
    root, *_ = llmbar_project
    rows = dict(
        (metric, (value, n, n_failed))
        for metric, value, n, n_failed in query(
            root,
            f"SELECT metric, value, n, n_failed FROM benchmark_results WHERE suite = 'llmbar' AND level = 'task' "
            f"AND name = '{task}' AND model = '{partition(judge, method)}'",
        )
    )
    accuracy, n, n_failed = rows["pair_accuracy"]
    assert n_failed == 0
    assert 100 * accuracy == pytest.approx(float(published["correct_average"].rstrip("%")), abs=1e-9)
    equal, total = count(published["equal"])
    assert n == total
    assert round(rows["position_agreement"][0] * n) == equal
    assert rows["position_agreement"][0] == pytest.approx(equal / total, abs=1e-12)
    # per presentation order (correct_False: as listed, correct_True: swapped) and in both orders at once
    for metric, field in (
        ("accuracy_as_listed", "correct_False"),
        ("accuracy_swapped", "correct_True"),
        ("accuracy_both_orders", "correct_both"),
    ):
        right, total = count(published[field])
        value, n, n_failed = rows[metric]
        assert (n, n_failed) == (total, 0)
        assert value == pytest.approx(right / total, abs=1e-12), (metric, value, right, total)
    # the kappas, with the authors' mapping of a winner to 1 (first output) or 0 (anything else)
    for metric, field in (
        ("kappa_as_listed", "kappa_False"),
        ("kappa_swapped", "kappa_True"),
        ("kappa_average", "kappa_average"),
        ("kappa_between_orders", "kappa_agreement"),
    ):
        assert rows[metric][0] == pytest.approx(published[field], abs=1e-12), (
            metric,
            rows[metric][0],
            published[field],
        )


def count(figure: str) -> tuple[int, int]:
    """(k, n) of a published `k / n = p%` figure."""
    right, total = re.match(r"\s*(\d+)\s*/\s*(\d+)", figure).groups()
    return int(right), int(total)


def test_all_28_runs_are_checked():
    assert len(recorded_runs()) == 28


def repeated_prompts(task: str) -> int:
    """The prompts of a task (each pair in both orders) identical to another of its prompts: an MT-Bench pair that
    another item holds with its answers swapped, an LLMEval² pair of two identical outputs. Sent once."""
    seen: Counter[tuple[str, str, str]] = Counter()
    for line in (REPO_DATA / "datasets" / f"llmbar_{task}" / "v1.jsonl").read_text().splitlines():
        case = json.loads(line)
        first, second = case["metadata"]["output_1"], case["metadata"]["output_2"]
        seen.update([(case["input"], first, second), (case["input"], second, first)])
    return sum(n - 1 for n in seen.values())


def test_the_adversarial_group_is_the_mean_of_its_four_subsets_and_unrecorded_subsets_make_no_call(llmbar_project):
    root, _defs, _instance, calls = llmbar_project
    # Recorded runs: 28 runs x n pairs x 2 orders; plus always-a on all 885 pairs x 2 orders; no-key: none;
    # each less the prompts identical to another of its task's, sent once (single flight).
    recorded_pairs = sum(int(re.match(r"\s*\d+\s*/\s*(\d+)", p["equal"]).group(1)) for *_, p in recorded_runs())
    repeated = sum(repeated_prompts(task) for task, *_ in recorded_runs())
    repeated += sum(repeated_prompts(task) for task in [*SUBSET_TASK.values(), *ADVERSARIAL_TASKS])
    assert repeated > 0
    assert calls == 2 * recorded_pairs + 2 * 885 - repeated
    skipped = dict(
        query(root, "SELECT reason, count(*) FROM benchmark_cases WHERE model = 'llmbar-gpt-4-vanilla' GROUP BY reason")
    )
    assert skipped == {None: 200, "not_in_scope": 2 * 785}
    (group,) = query(
        root,
        "SELECT value FROM benchmark_results WHERE level = 'group' AND name = 'adversarial' AND model = 'always-a'",
    )
    subsets = query(
        root,
        "SELECT value FROM benchmark_results WHERE level = 'task' AND metric = 'pair_accuracy' AND model = 'always-a' "
        "AND name LIKE 'adversarial_%'",
    )
    assert len(subsets) == 4
    assert group[0] == pytest.approx(sum(v for (v,) in subsets) / 4)


def test_a_live_judge_is_a_partition_and_a_missing_key_skips_without_a_call(llmbar_project):
    root, *_ = llmbar_project
    # "Output (a)" in both orders: right on every label-1 case in one order and every label-2 case in the
    # other (accuracy exactly 0.5), and never the same verdict twice (position agreement 0).
    for value, agreement in query(
        root,
        "SELECT a.value, p.value FROM benchmark_results a JOIN benchmark_results p USING (suite, level, name, model) "
        "WHERE a.model = 'always-a' AND a.level = 'task' AND a.metric = 'pair_accuracy' "
        "AND p.metric = 'position_agreement'",
    ):
        assert value == 0.5
        assert agreement == 0.0
    reasons = query(root, "SELECT DISTINCT status, reason FROM benchmark_cases WHERE model = 'no-key'")
    assert reasons == [("SKIPPED", "no_credentials")]
    (row,) = query(
        root,
        "SELECT value, n, n_skipped FROM benchmark_results "
        "WHERE model = 'no-key' AND name = 'natural' AND metric = 'pair_accuracy'",
    )
    assert row == (None, 0, 100)


def test_leaderboard_ranks_models_with_paired_gaps(llmbar_project):
    root, *_ = llmbar_project
    board = query(
        root,
        "SELECT model, rank, score, ci_low, ci_high, leader, gap_to_leader, significant_vs_leader, tasks_scored "
        "FROM leaderboard WHERE suite = 'llmbar' AND aggregate = 'macro' ORDER BY rank NULLS LAST",
    )
    by_model = {row[0]: row for row in board}
    assert by_model["no-key"][1] is None  # nothing answered: no rank, no score
    ranked = [row for row in board if row[1] is not None]
    assert [r[1] for r in ranked] == list(range(1, len(ranked) + 1))
    assert all(r[3] <= r[2] <= r[4] for r in ranked)
    leader = ranked[0]
    assert leader[6] is None and all(r[5] == leader[0] for r in ranked)
    # always-a scores 0.5 on every task; GPT-4's recorded runs are far above it on the cases both answered.
    assert by_model["always-a"][7] is True
    assert by_model["always-a"][6] < 0
