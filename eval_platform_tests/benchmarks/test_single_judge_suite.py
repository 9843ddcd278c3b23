"""A model under test benchmarked as a judge that rates one response (score, binary and categorical modes):
its replies, over HTTP, are parsed by the judge mode's own parser and compared with the gold verdicts; the
statistics are checked against scipy and scikit-learn on the same verdicts."""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml
from scipy import stats
from sklearn.metrics import cohen_kappa_score

from eval_platform_tests.benchmarks.test_generation_suite import materialize, query

# (reply the model under test gives, gold verdict). `echo/output` replies with the case's metadata.output, so
# each case scripts the verdict of the judge under test.
SCORED = [
    ('{"score": 2, "reasoning": "weak"}', "1"),
    ('{"score": 7, "reasoning": "fine"}', "5"),
    ('{"score": 5, "reasoning": "ok"}', "8"),
    ('{"score": 9, "reasoning": "great"}', "9"),
    ("I cannot tell.", "6"),
]
LABELLED = [
    ('{"label": "good"}', "good"),
    ('{"label": "bad"}', "Good"),
    ('{"label": "bad"}', "bad"),
    ('{"label": "good"}', "bad"),
    ('{"label": "good"}', "good"),
    ("no idea", "bad"),
]
PASSED = [
    ('{"passed": true}', "yes"),
    ('{"passed": false}', "no"),
    ('{"passed": true}', "no"),
    ('{"passed": false}', "no"),
]

SUITE = """
name: graders
tasks:
  scores:
    dataset: scored
    version: 1
    as_judge:
      output: metadata.output
      evaluator: {mode: score, score_scale: {min: 1, max: 10}, prompt: "Rate this answer to {{input}}: {{output}}"}
    scorers:
      - name: verdict_abs_error
      - name: verdict_correlation
      - {name: verdict_correlation, metric: pearson, options: {method: pearson}}
  labels:
    dataset: labelled
    version: 1
    as_judge:
      output: metadata.output
      evaluator: {mode: categorical, labels: {good: 1.0, bad: 0.0}, prompt: "Is {{output}} a good answer to {{input}}?"}
    scorers: [{name: verdict_accuracy}, {name: verdict_kappa}]
  passes:
    dataset: passed
    version: 1
    as_judge:
      output: metadata.output
      evaluator: {mode: binary, prompt: "Does {{output}} answer {{input}}?"}
    scorers: [{name: verdict_accuracy}, {name: verdict_kappa}]
  peek:
    dataset: scored
    version: 1
    as_judge:
      output: metadata.output
      evaluator: {mode: score, score_scale: {min: 1, max: 10}, prompt: "{{output}} (reference: {{expected}})"}
    scorers: [{name: verdict_abs_error}]
"""


def write_dataset(root, name: str, cases: list[tuple[str, str]]) -> None:
    folder = root / "datasets" / name
    folder.mkdir(parents=True)
    rows = [
        {"case_id": f"{name}-{i}", "input": f"question {i}", "expected_output": gold, "metadata": {"output": reply}}
        for i, (reply, gold) in enumerate(cases)
    ]
    (folder / "v1.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


@pytest.fixture
def graders(data_root, local_judge, tmp_path, monkeypatch):
    for name, cases in (("scored", SCORED), ("labelled", LABELLED), ("passed", PASSED)):
        write_dataset(data_root, name, cases)
    (data_root / "benchmarks").mkdir()
    (data_root / "benchmarks" / "graders.yaml").write_text(SUITE)
    (data_root / "benchmarks" / "models.yaml").write_text(
        yaml.safe_dump(
            {
                "models": {
                    "echo": {"model": "local/echo/output"},
                    "peeker": {
                        "model": "local/echo/expected",
                        "only": ["graders.peek"],
                    },  # replies with what {{expected}} shows
                }
            }
        )
    )
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", ["echo", "peeker"])
        materialize(data_root, instance, "echo", dg.AssetSelection.groups("benchmark_graders"))
        materialize(data_root, instance, "peeker", [dg.AssetKey(["benchmark", "graders", "peek"])])
        yield data_root


def results(root, task: str) -> dict[str, tuple]:
    rows = query(
        root,
        f"SELECT metric, value, n, n_failed, ci_low FROM benchmark_results WHERE level = 'task' AND name = '{task}'",
    )
    return {metric: rest for metric, *rest in rows}


def test_a_score_judge_against_gold_scores(graders):
    verdicts = query(
        graders, "SELECT case_id, status, reason, verdict FROM benchmark_cases WHERE task = 'scores' ORDER BY case_id"
    )
    assert [v[3] for v in verdicts] == ["2.0", "7.0", "5.0", "9.0", None]  # raw scores on the evaluator's scale
    assert verdicts[4][1:3] == ("FAILED", "scorer_error")  # no score: never counted as right, never lost
    judged = [(float(gold), json.loads(reply)["score"]) for reply, gold in SCORED[:4]]
    got = results(graders, "scores")
    mae, n, failed, _ = got["verdict_abs_error"]
    assert mae == pytest.approx(sum(abs(g - j) for g, j in judged) / 4) and (n, failed) == (4, 1)
    rho, n, _, ci_low = got["verdict_correlation"]
    assert rho == pytest.approx(stats.spearmanr([g for g, _ in judged], [j for _, j in judged]).statistic, abs=1e-12)
    assert n == 4 and ci_low is None  # a task-level statistic: no per-case interval
    assert got["pearson"][0] == pytest.approx(
        stats.pearsonr([g for g, _ in judged], [j for _, j in judged]).statistic, abs=1e-12
    )


@pytest.mark.parametrize(
    ("task", "cases", "normalize"),
    [
        ("labels", LABELLED, lambda gold: gold.lower()),
        ("passes", PASSED, lambda gold: {"yes": "true", "no": "false"}[gold]),
    ],
)
def test_a_label_judge_against_gold_labels(graders, task, cases, normalize):
    verdicts = query(
        graders, f"SELECT verdict, status, reason FROM benchmark_cases WHERE task = '{task}' ORDER BY case_id"
    )
    judge = []
    for reply, _gold in cases:
        try:
            parsed = json.loads(reply)
        except json.JSONDecodeError:
            judge.append(None)
            continue
        judge.append(parsed["label"] if "label" in parsed else str(parsed["passed"]).lower())
    assert [v[0] for v in verdicts] == judge
    # a reply without a verdict is an answer, and a wrong one, as for pairwise judges
    assert all(status == "COMPLETED" for _, status, _ in verdicts)
    assert [reason for verdict, _, reason in verdicts if verdict is None] == ["no_verdict"] * judge.count(None)
    gold = [normalize(g) for _, g in cases]
    shown = [j if j is not None else "(no verdict)" for j in judge]
    got = results(graders, task)
    assert got["verdict_accuracy"][0] == pytest.approx(
        sum(j == g for j, g in zip(shown, gold, strict=True)) / len(gold)
    )
    assert got["verdict_kappa"][0] == pytest.approx(cohen_kappa_score(gold, shown), abs=1e-12)
    assert got["verdict_kappa"][1] == len(gold)


def test_the_judge_never_sees_the_gold_verdict(graders):
    """expected_output is the gold verdict. A judge that replies with whatever {{expected}} shows gets nothing
    there (no `reference` field is set), so it cannot copy the gold score: every case is without a score."""
    rows = query(
        graders, "SELECT verdict, status, reason FROM benchmark_cases WHERE model = 'peeker' AND task = 'peek'"
    )
    assert len(rows) == len(SCORED)
    assert all(verdict is None and (status, reason) == ("FAILED", "scorer_error") for verdict, status, reason in rows)
