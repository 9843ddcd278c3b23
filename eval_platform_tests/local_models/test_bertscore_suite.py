"""BERTScore in a benchmark suite through the assets: a model under test answers over HTTP (the local judge's
`fixed/` model), `bertscore` and `bertscore_idf` score it from a model folder the test builds, and the results
are the `bert-score` package's on the same model."""

from __future__ import annotations

import json

import bert_score
import dagster as dg
import numpy as np
import pytest
import yaml

from eval_platform.benchmarks.config import SuiteError, load_suite, load_suites
from eval_platform_tests.benchmarks.test_generation_suite import materialize, query

ANSWER = "The answer is 18."
CASES = [
    {"case_id": "c1", "input": "How many?", "expected_output": "The answer is 18."},
    {"case_id": "c2", "input": "Who?", "expected_output": "Nobody in the village knew the name of that old man."},
    {"case_id": "c3", "input": "Where?", "expected_output": "Somewhere far beyond the hills and the two rivers."},
    {"case_id": "c4", "input": "Which?", "expected_output": ["The big red fox.", "The answer is 81."]},
]


@pytest.fixture
def project(data_root, local_judge, tiny_bert, tmp_path, monkeypatch):
    (data_root / "datasets" / "phrases").mkdir(parents=True)
    (data_root / "datasets" / "phrases" / "v1.jsonl").write_text("\n".join(json.dumps(c) for c in CASES) + "\n")
    (data_root / "benchmarks").mkdir()
    models = {"models": {"always-18": {"model": f"local/fixed/{ANSWER}"}}}
    (data_root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump(models))
    scorers = [
        {"name": "bertscore", "options": {"model_path": str(tiny_bert), "num_layers": 1}},
        {"name": "bertscore_idf", "options": {"model_path": str(tiny_bert), "num_layers": 1, "metric": "recall"}},
    ]
    suite = {"name": "phrases", "tasks": {"say": {"dataset": "phrases", "prompt": "{{input}}", "scorers": scorers}}}
    (data_root / "benchmarks" / "phrases.yaml").write_text(yaml.safe_dump(suite))
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", ["always-18"])
        yield data_root, instance


def package(tiny_bert, idf: bool) -> np.ndarray:
    """The package's P, R, F1 per case: its best over a case's references, idf over all the references."""
    references = [
        c["expected_output"] if isinstance(c["expected_output"], list) else [c["expected_output"]] for c in CASES
    ]
    if idf:  # the package computes idf over the flattened references of all the candidates it is given
        p, r, f = bert_score.score(
            [ANSWER] * len(CASES), references, model_type=str(tiny_bert), num_layers=1, idf=True, nthreads=0
        )
    else:
        p, r, f = bert_score.score([ANSWER] * len(CASES), references, model_type=str(tiny_bert), num_layers=1)
    return np.column_stack([p.numpy(), r.numpy(), f.numpy()]).astype(float)


def test_a_suite_scored_by_bertscore_reports_the_packages_values(project, tiny_bert, network_attempts):
    root, instance = project
    materialize(root, instance, "always-18", dg.AssetSelection.groups("benchmark_phrases"))
    rows = query(root, "SELECT case_id, status, scores FROM benchmark_cases ORDER BY case_id")
    assert [r[:2] for r in rows] == [(c["case_id"], "COMPLETED") for c in CASES]
    plain, weighted = package(tiny_bert, idf=False), package(tiny_bert, idf=True)
    per_case = {r[0]: {s["metric"]: s["value"] for s in r[2]} for r in rows}
    for index, case in enumerate(CASES):
        assert per_case[case["case_id"]]["bertscore"] == pytest.approx(plain[index, 2], abs=1e-6)
        # a row's own bertscore_idf value is the unweighted one (idf needs the whole task's references)
        assert per_case[case["case_id"]]["bertscore_idf"] == pytest.approx(plain[index, 1], abs=1e-6)
    assert per_case["c1"]["bertscore"] == pytest.approx(1.0, abs=1e-6)  # the answer is the reference
    results = {
        metric: (aggregate, value, low, high, n)
        for metric, aggregate, value, low, high, n in query(
            root,
            "SELECT metric, aggregate, value, ci_low, ci_high, n FROM benchmark_results "
            "WHERE level = 'task' AND model = 'always-18'",
        )
    }
    aggregate, value, low, high, n = results["bertscore"]
    assert (aggregate, n) == ("mean", 4) and value == pytest.approx(plain[:, 2].mean(), abs=1e-6)
    aggregate, value, low, high, n = results["bertscore_idf"]
    assert (aggregate, n) == ("corpus", 4) and value == pytest.approx(weighted[:, 1].mean(), abs=1e-6)
    assert low <= value <= high and value != pytest.approx(plain[:, 1].mean(), abs=1e-3)
    assert network_attempts == []  # the model under test on 127.0.0.1, the scoring model from its folder


def test_a_suite_naming_a_missing_model_folder_is_a_load_error(project, tmp_path):
    root, _ = project
    path = root / "benchmarks" / "phrases.yaml"
    suite = yaml.safe_load(path.read_text())
    suite["tasks"]["say"]["scorers"][0]["options"]["model_path"] = str(tmp_path / "models" / "minilm")
    path.write_text(yaml.safe_dump(suite))
    with pytest.raises(SuiteError, match=r"(?s)field 'tasks.say.scorers.0.options'.*models/minilm': no such folder"):
        load_suite(path, root)
    suites, errors = load_suites(root / "benchmarks", root)  # the code location lists it, loads the others
    assert "phrases" not in suites and "no such folder" in errors["phrases"]
