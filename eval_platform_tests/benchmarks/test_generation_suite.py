"""A generation suite through the assets: the model under test answers over HTTP, classical scorers and a
judge evaluator score it, a gate skips an expensive task, and re-scoring makes no model call."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import dagster as dg
import duckdb
import httpx
import pytest
import yaml
from sacrebleu.metrics import BLEU

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import REPO_DATA

GSM8K = REPO_DATA / "datasets" / "gsm8k" / "v1.jsonl"


def query(root: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def requests_for(server, model: str) -> int:
    return httpx.get(f"{server.base_url}/stats").json()["by_model"].get(model, 0)


def expected_18() -> int:
    return sum(json.loads(line)["expected_output"] == "18" for line in GSM8K.read_text().splitlines())


@pytest.fixture
def project(data_root, local_judge, tmp_path, monkeypatch):
    shutil.copytree(REPO_DATA / "datasets" / "gsm8k", data_root / "datasets" / "gsm8k")
    shutil.copy(REPO_DATA / "evaluators" / "helpfulness.yaml", data_root / "evaluators")
    (data_root / "benchmarks").mkdir()
    shutil.copy(REPO_DATA / "benchmarks" / "gsm8k.yaml", data_root / "benchmarks")
    models = {
        "models": {
            "always-18": {"model": "local/fixed/The answer is 18."},
            "unanswerable": {"model": "openai/gpt-4o-mini", "api_key_env": "EVAL_PLATFORM_TEST_UNSET_KEY"},
        }
    }
    (data_root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    monkeypatch.delenv("EVAL_PLATFORM_TEST_UNSET_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", sorted(models["models"]))
        yield data_root, instance


def materialize(root: Path, instance, model: str, selection) -> dg.ExecuteInProcessResult:
    defs = build_definitions(root)
    result = dg.materialize(
        assets=list(defs.assets),
        selection=selection,
        partition_key=model,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success
    return result


def test_generation_suite_scores_gates_and_judges(project, local_judge):
    root, instance = project
    asked = requests_for(local_judge, "fixed/The answer is 18.")
    materialize(root, instance, "always-18", dg.AssetSelection.groups("benchmark_gsm8k"))
    # One call per case for `answer`; `careful` is gated off; `judged` reuses answer's outputs.
    assert requests_for(local_judge, "fixed/The answer is 18.") - asked == 50
    results = {
        (name, metric): (value, n, n_failed, n_skipped)
        for name, metric, value, n, n_failed, n_skipped in query(
            root,
            "SELECT name, metric, value, n, n_failed, n_skipped FROM benchmark_results "
            "WHERE model = 'always-18' AND level = 'task'",
        )
    }
    assert results[("answer", "numeric_match")] == (expected_18() / 50, 50, 0, 0)
    assert results[("answer", "regex")][0] == 1.0
    assert results[("careful", "numeric_match")] == (None, 0, 0, 50)
    (detail,) = query(
        root, "SELECT DISTINCT reason || ': ' || reason_detail FROM benchmark_cases WHERE task = 'careful'"
    )
    assert detail[0] == f"gate_failed: gate: task 'answer' numeric_match {expected_18() / 50:.4g} < min 0.5"
    judged_value, judged_n, _, _ = results[("judged", "judge")]
    assert judged_n == 50 and 0 <= judged_value <= 1
    # The judge saw the model's own output: the mock judge's verdicts are keyed by the text it judged.
    outputs = query(root, "SELECT DISTINCT output FROM benchmark_cases WHERE task = 'judged'")
    assert outputs == [("The answer is 18.",)]


def test_missing_key_skips_every_case_without_a_call(project, local_judge):
    root, instance = project
    materialize(root, instance, "unanswerable", [dg.AssetKey(["benchmark", "gsm8k", "answer"])])
    assert query(root, "SELECT status, reason, count(*) FROM benchmark_cases GROUP BY ALL") == [
        ("SKIPPED", "no_credentials", 50)
    ]
    (value,) = query(root, "SELECT value FROM benchmark_results WHERE metric = 'numeric_match'")
    assert value == (None,)  # nothing answered is not a score of 0


def test_changing_only_a_scorer_rescores_without_calling_the_model(project, local_judge):
    root, instance = project
    answer = [dg.AssetKey(["benchmark", "gsm8k", "answer"])]
    materialize(root, instance, "always-18", answer)
    (hashes,) = query(root, "SELECT DISTINCT task_config_hash, scorer_config_hash FROM benchmark_cases")
    suite = yaml.safe_load((root / "benchmarks" / "gsm8k.yaml").read_text())
    suite["tasks"]["answer"]["scorers"].append({"name": "contains", "options": {"text": "answer"}})
    (root / "benchmarks" / "gsm8k.yaml").write_text(yaml.safe_dump(suite))
    # A crash lost the written rows too: the re-run still finds every reply in the cache.
    shutil.rmtree(root / "warehouse" / "benchmark_cases" / "suite=gsm8k")
    asked = requests_for(local_judge, "fixed/The answer is 18.")
    materialize(root, instance, "always-18", answer)
    assert requests_for(local_judge, "fixed/The answer is 18.") == asked
    (rehashed,) = query(root, "SELECT DISTINCT task_config_hash, scorer_config_hash FROM benchmark_cases")
    assert rehashed[0] == hashes[0] and rehashed[1] != hashes[1]
    assert query(root, "SELECT value FROM benchmark_results WHERE metric = 'contains'") == [(1.0,)]


def test_a_case_missing_the_scored_field_is_failed_not_zero(project, local_judge):
    root, instance = project
    rows = [json.loads(line) for line in GSM8K.read_text().splitlines()]
    rows[0].pop("expected_output")
    rows[1]["expected_output"] = "no number here"
    (root / "datasets" / "gsm8k" / "v2.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    materialize(root, instance, "always-18", [dg.AssetKey(["benchmark", "gsm8k", "answer"])])
    failed = query(root, "SELECT case_id, reason FROM benchmark_cases WHERE status = 'FAILED' ORDER BY case_id")
    assert failed == [(rows[0]["case_id"], "missing_field"), (rows[1]["case_id"], "scorer_error")]
    (row,) = query(root, "SELECT n, n_failed, value FROM benchmark_results WHERE metric = 'numeric_match'")
    right = sum(r.get("expected_output") == "18" for r in rows[2:])
    assert row == (48, 2, right / 48)
    (version,) = query(root, "SELECT DISTINCT dataset_version FROM benchmark_cases")
    assert version == (2,)


def test_a_passing_gate_runs_the_gated_task_with_its_samples(project, local_judge):
    root, instance = project
    suite = yaml.safe_load((root / "benchmarks" / "gsm8k.yaml").read_text())
    suite["tasks"]["careful"]["gate"]["min"] = 0.01
    suite["tasks"]["careful"]["pass_at"] = [1, 3]  # pass@1 from 3 samples, beside pass@3
    (root / "benchmarks" / "gsm8k.yaml").write_text(yaml.safe_dump(suite))
    materialize(root, instance, "always-18", [dg.AssetKey(["benchmark", "gsm8k", "answer"])])
    materialize(root, instance, "always-18", [dg.AssetKey(["benchmark", "gsm8k", "careful"])])
    assert query(root, "SELECT status, count(*) FROM benchmark_cases WHERE task = 'careful' GROUP BY ALL") == [
        ("COMPLETED", 150)
    ]
    (row,) = query(root, "SELECT n, value FROM benchmark_results WHERE name = 'careful' AND metric = 'numeric_match'")
    assert row == (50, expected_18() / 50)
    # three samples a case, `pass_at: [1, 3]`: pass@k and pass^k beside the mean; a model that always says 18 is
    # never flaky
    flakiness = query(
        root, "SELECT metric, k, n, value FROM benchmark_results WHERE name = 'careful' AND k IS NOT NULL ORDER BY 1"
    )
    right = expected_18() / 50
    assert flakiness == [
        ("numeric_match.pass@1", 1, 50, pytest.approx(right)),
        ("numeric_match.pass@3", 3, 50, right),
        ("numeric_match.pass^1", 1, 50, pytest.approx(right)),
        ("numeric_match.pass^3", 3, 50, right),
    ]


def test_every_result_row_names_its_dataset_and_config_hashes(project, local_judge):
    root, instance = project
    materialize(root, instance, "always-18", dg.AssetSelection.groups("benchmark_gsm8k"))
    rows = query(root, "SELECT level, name, datasets, task_config_hash, scorer_config_hash FROM benchmark_results")
    assert {r[0] for r in rows} == {"task", "suite"}
    for level, name, datasets, task_hash, scorer_hash in rows:
        assert "gsm8k@v1 (" in datasets, (level, name)
        assert task_hash and scorer_hash, (level, name)


def test_suite_score_drop_beyond_the_previous_interval_warns(project, local_judge):
    root, instance = project
    selection = [dg.AssetKey(["benchmark", "gsm8k", "answer"]), dg.AssetKey(["benchmark_scores", "gsm8k"])]
    suite = yaml.safe_load((root / "benchmarks" / "gsm8k.yaml").read_text())
    suite["tasks"] = {
        "answer": {**suite["tasks"]["answer"], "dataset": "eighteen"}
    }  # one task: its accuracy is the score
    (root / "benchmarks" / "gsm8k.yaml").write_text(yaml.safe_dump(suite))
    cases = [{"case_id": f"e{i}", "input": f"{i} + {18 - i}?", "expected_output": "18"} for i in range(40)]
    (root / "datasets" / "eighteen").mkdir()
    (root / "datasets" / "eighteen" / "v1.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")

    def run(reply: str) -> dg.AssetCheckEvaluation:
        (root / "benchmarks" / "models.yaml").write_text(
            yaml.safe_dump({"models": {"always-18": {"model": f"local/fixed/{reply}"}}})
        )
        result = materialize(root, instance, "always-18", selection)
        (check,) = [c for c in result.get_asset_check_evaluations() if c.check_name == "score_not_dropped"]
        return check

    assert run("The answer is 18.").passed  # nothing before it
    assert run("The answer is 18.").passed  # the same score again
    dropped = run("I cannot say.")  # every case wrong: 0 is below the previous interval
    assert not dropped.passed and dropped.severity == dg.AssetCheckSeverity.WARN
    assert dropped.metadata["score"].value == 0.0
    assert dropped.metadata["previous_score"].value == 1.0


def test_a_json_list_of_accepted_answers_is_any_of_them(project, local_judge):
    root, instance = project
    cases = [
        {"case_id": "c1", "input": "How many?", "expected_output": ["18", "eighteen"]},
        {"case_id": "c2", "input": "Say it.", "expected_output": ["17", "The answer is 18.", "It is 18."]},
        {"case_id": "c3", "input": "Again?", "expected_output": ["19"]},
    ]
    (root / "datasets" / "answers").mkdir()
    (root / "datasets" / "answers" / "v1.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    suite = {
        "name": "answers",
        "tasks": {
            "answer": {"dataset": "answers", "prompt": "{{input}}", "scorers": [{"name": "contains"}, {"name": "bleu"}]}
        },
    }
    (root / "benchmarks" / "answers.yaml").write_text(yaml.safe_dump(suite))
    materialize(root, instance, "always-18", [dg.AssetKey(["benchmark", "answers", "answer"])])
    per_case = query(
        root,
        "SELECT case_id, expected_output, expected_output_json, primary_value FROM benchmark_cases "
        "WHERE suite = 'answers' ORDER BY case_id",
    )
    assert per_case == [
        ("c1", '["18", "eighteen"]', True, 1.0),
        ("c2", '["17", "The answer is 18.", "It is 18."]', True, 1.0),
        ("c3", '["19"]', True, 0.0),
    ]
    (bleu,) = query(root, "SELECT value FROM benchmark_results WHERE suite = 'answers' AND metric = 'bleu'")
    assert 0 < bleu[0] < 1  # a corpus score over cases with 2, 3 and 1 references


def test_the_leaderboard_cost_is_known_when_every_call_has_a_price(project, local_judge):
    root, instance = project
    # `judged` takes answer's outputs (no call to the model under test): its rows cost nothing, not an unknown price.
    materialize(root, instance, "always-18", dg.AssetSelection.groups("benchmark_gsm8k"))
    defs = build_definitions(root)
    result = dg.materialize(
        assets=list(defs.assets),
        selection=["leaderboard"],
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
    )
    assert result.success
    assert query(root, "SELECT DISTINCT cost_usd FROM leaderboard WHERE model = 'always-18'") == [(0.0,)]
    costs = query(
        root, "SELECT name, cost_usd FROM benchmark_results WHERE model = 'always-18' AND metric = 'numeric_match'"
    )
    assert sorted(costs) == [("answer", 0.0), ("careful", 0.0)]


def test_a_bleu_tasks_group_suite_and_leaderboard_scores_are_its_corpus_bleu(project, local_judge):
    root, instance = project
    # The model answers "The answer is 18." to every case: right on c1, wrong on two longer references. Mean sentence
    # BLEU is about 0.36 (1.0 on c1); corpus BLEU pools the n-grams and pays the brevity penalty: about 0.16.
    cases = [
        {"case_id": "c1", "input": "How many?", "expected_output": "The answer is 18."},
        {"case_id": "c2", "input": "Who?", "expected_output": "Nobody in the village knew the name of that old man."},
        {"case_id": "c3", "input": "Where?", "expected_output": "Somewhere far beyond the hills and the two rivers."},
    ]
    (root / "datasets" / "phrases").mkdir()
    (root / "datasets" / "phrases" / "v1.jsonl").write_text("\n".join(json.dumps(c) for c in cases) + "\n")
    task = {"dataset": "phrases", "prompt": "{{input}}", "scorers": [{"name": "bleu"}]}
    groups = {"speaking": {"tasks": ["say"], "aggregate": "micro"}}
    suite = {"name": "phrases", "tasks": {"say": task}, "groups": groups}
    (root / "benchmarks" / "phrases.yaml").write_text(yaml.safe_dump(suite))
    materialize(root, instance, "always-18", dg.AssetSelection.groups("benchmark_phrases"))
    defs = build_definitions(root)
    assert dg.materialize(
        assets=list(defs.assets), selection=["leaderboard"], instance=instance, resources=defs.resources
    ).success
    corpus = BLEU(effective_order=True).corpus_score(["The answer is 18."] * 3, [[c["expected_output"] for c in cases]])
    rows = query(
        root,
        "SELECT level, aggregate, value, ci_low, ci_high FROM benchmark_results "
        "WHERE suite = 'phrases' AND model = 'always-18' ORDER BY level, aggregate",
    )
    board = query(
        root,
        "SELECT 'leaderboard', aggregate, score, ci_low, ci_high FROM leaderboard "
        "WHERE suite = 'phrases' AND model = 'always-18' ORDER BY aggregate",
    )
    assert [r[:2] for r in rows] == [("group", "micro"), ("suite", "macro"), ("suite", "micro"), ("task", "corpus")]
    assert [r[1] for r in board] == ["macro", "micro"]
    for level, aggregate, value, low, high in rows + board:
        assert value == pytest.approx(corpus.score / 100, abs=1e-12) and value < 0.2, (level, aggregate)
        assert low <= value <= high, (level, aggregate)
