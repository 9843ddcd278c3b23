"""`semantic_similarity` as a benchmark scorer: the embeddings of every case's output and expected output are fetched
from the local judge's `/v1/embeddings` over real HTTP through the one call path before the cases are scored; their
cost is the row's, a re-run finds them in the cache, a failed call is a FAILED case with its reason, and a model's
budget bounds them."""

from __future__ import annotations

import json

import httpx
import numpy as np
import pytest
import yaml

from eval_platform.benchmarks.config import load_models, load_suite
from eval_platform.benchmarks.runner import TaskRun, run_task
from eval_platform.defs.resources import JudgeResource
from eval_platform_tests.conftest import judge_requests

CASES = [
    {"case_id": "c0", "input": "q0", "expected_output": "the cat sat on a mat", "metadata": {"out": "The cat sat."}},
    {"case_id": "c1", "input": "q1", "expected_output": "Revenue rose.", "metadata": {"out": "The dog barked."}},
    {
        "case_id": "c2",
        "input": "q2",
        "expected_output": ["Paris", "capital: Paris"],
        "metadata": {"out": "Paris"},
    },
    {"case_id": "c3", "input": "q3", "expected_output": "x", "metadata": {"out": ""}},
]


def project(root, local_judge, model: str, budget: dict | None = None):
    (root / "datasets" / "sim").mkdir(parents=True)
    (root / "datasets" / "sim" / "v1.jsonl").write_text("".join(json.dumps(c) + "\n" for c in CASES))
    (root / "benchmarks").mkdir()
    scorer = {"name": "semantic_similarity", "options": {"model": model, "api_base": local_judge.base_url}}
    scorer["options"]["max_retries"] = 0
    task = {"dataset": "sim", "outputs_from": "metadata.out", "max_failed_rate": 1.0, "scorers": [scorer]}
    suite_file = root / "benchmarks" / "sim.yaml"
    suite_file.write_text(yaml.safe_dump({"tasks": {"similar": task}}))
    models = {"recorded": {"model": "local/mock", **(budget or {})}}
    (root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump({"models": models}))
    return load_suite(suite_file, root), load_models(root / "benchmarks" / "models.yaml")


def run(root, local_judge, suite, models):
    runtime = JudgeResource(local_judge_url=local_judge.base_url).runtime(root)
    task_run = TaskRun(root, "sim", suite, "similar", "recorded", models["recorded"], runtime)
    return {row["case_id"]: row for row in run_task(task_run).to_dicts()}


def cosine(server, a: str, b: str) -> float:
    body = httpx.post(f"{server.base_url}/embeddings", json={"model": "m", "input": [a, b]}, timeout=30).json()
    u, v = (np.array(d["embedding"]) for d in body["data"])
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def value(row) -> float | None:
    return {s["metric"]: s["value"] for s in row["scores"]}["semantic_similarity"]


def test_case_values_are_the_cosine_of_the_served_vectors_and_a_rerun_costs_nothing(tmp_path, local_judge):
    root = tmp_path / "data"
    suite, models = project(root, local_judge, "openai/text-embedding-3-small")
    before = judge_requests(local_judge)
    rows = run(root, local_judge, suite, models)
    assert judge_requests(local_judge) - before == 3  # one request per case with an output; c3's is empty
    assert value(rows["c0"]) == pytest.approx(cosine(local_judge, "The cat sat.", "the cat sat on a mat"), abs=1e-6)
    far = cosine(local_judge, "The dog barked.", "Revenue rose.")
    assert value(rows["c1"]) == pytest.approx(max(0.0, far), abs=1e-6)
    # several references: the closest counts
    best = max(cosine(local_judge, "Paris", "Paris"), cosine(local_judge, "Paris", "capital: Paris"))
    assert value(rows["c2"]) == pytest.approx(best, abs=1e-6) == pytest.approx(1.0)
    assert value(rows["c3"]) == 0.0 and rows["c3"]["cost_usd"] == 0.0  # an empty output: 0, no call
    assert all(rows[c]["status"] == "COMPLETED" for c in rows)
    for case in ("c0", "c1", "c2"):  # the embedding's cost is the row's (this task's outputs cost nothing)
        assert rows[case]["cost_usd"] > 0

    before = judge_requests(local_judge)
    again = run(root, local_judge, suite, models)
    assert judge_requests(local_judge) == before
    assert all(again[c]["cost_usd"] == 0.0 and value(again[c]) == value(rows[c]) for c in rows)


def test_a_failing_embeddings_endpoint_fails_the_case_with_its_reason(tmp_path, local_judge):
    root = tmp_path / "data"
    suite, models = project(root, local_judge, "openai/fault/server_error")
    rows = run(root, local_judge, suite, models)
    for case in ("c0", "c1", "c2"):
        assert rows[case]["status"] == "FAILED" and rows[case]["reason"] == "embedding:provider_error:500"
        assert rows[case]["scores"] is None and "injected" in rows[case]["reason_detail"]
    assert rows["c3"]["status"] == "COMPLETED"  # nothing to embed: no call to fail


def test_the_model_budget_bounds_the_embedding_calls(tmp_path, local_judge):
    root = tmp_path / "data"
    budget = {"input_cost_per_million": 1.0, "output_cost_per_million": 1.0, "max_daily_cost_usd": 0.0}
    suite, models = project(root, local_judge, "openai/text-embedding-3-small", budget)
    before = judge_requests(local_judge)
    rows = run(root, local_judge, suite, models)
    assert judge_requests(local_judge) == before
    assert {rows[c]["reason"] for c in ("c0", "c1", "c2")} == {"embedding:budget_exhausted"}


def test_a_suite_dry_run_counts_the_embedding_calls_and_sends_nothing(tmp_path, local_judge):
    from eval_platform.dry_run import estimate_suite

    root = tmp_path / "data"
    suite, models = project(root, local_judge, "openai/text-embedding-3-small")
    before = judge_requests(local_judge)
    (bill,) = estimate_suite(root, "sim", suite, "recorded", models["recorded"], {})
    assert judge_requests(local_judge) == before
    # the three cases with an output would each cost one embedding call, priced by litellm's map
    assert bill.judge_calls == 3 and bill.unpriced_calls == 0 and bill.worst_case_usd > 0
