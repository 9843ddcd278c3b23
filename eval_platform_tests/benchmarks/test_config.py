"""Suite files: valid ones load; each kind of mistake is an error naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eval_platform.benchmarks.config import (
    SuiteError,
    load_suite,
    load_suites,
    upstream,
)

GOOD = """
tasks:
  smoke:
    dataset: qa
    version: 1
    prompt: "Answer: {{input}}"
    scorers: [{name: exact_match}]
  full:
    dataset: qa
    prompt: "Think, then answer: {{input}}"
    scorers: [{name: token_f1}, {name: numeric_match, options: {abs_tol: 0.5}}]
    gate: {task: smoke, metric: exact_match, min: 0.6}
  judged:
    dataset: qa
    outputs_from: metadata.output
    depends_on: [full]
    scorers: [{name: contains, options: {text: "because"}}]
groups:
  answers: {tasks: [smoke, full], aggregate: micro}
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "datasets" / "qa").mkdir(parents=True)
    (tmp_path / "datasets" / "qa" / "v1.jsonl").write_text(json.dumps({"input": "q", "expected_output": "a"}) + "\n")
    (tmp_path / "benchmarks").mkdir()
    return tmp_path


def write(root: Path, name: str, text: str) -> Path:
    path = root / "benchmarks" / f"{name}.yaml"
    path.write_text(text)
    return path


def test_a_valid_suite_loads_with_its_dependencies_and_groups(root):
    suite = load_suite(write(root, "s", GOOD), root)
    assert upstream(suite) == {"smoke": [], "full": ["smoke"], "judged": ["full"]}
    assert suite.tasks["full"].version == "newest" and suite.groups["answers"].aggregate == "micro"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("{name: exact_match}", "{name: bluert}"), "field 'tasks.smoke.scorers.0.name': unknown scorer 'bluert'"),
        (("{abs_tol: 0.5}", "{abs_tol: -1}"), "field 'tasks.full.scorers.1.options'"),
        (
            ("dataset: qa\n    version: 1", "dataset: qb\n    version: 1"),
            "field 'tasks.smoke.dataset': unknown dataset 'qb'",
        ),
        (("version: 1", "version: 3"), "field 'tasks.smoke.version': dataset 'qa' has no version 3"),
        (
            ("metric: exact_match", "metric: accuracy"),
            "field 'tasks.full.gate.metric': task 'smoke' does not produce 'accuracy'",
        ),
        (
            ('{{input}}"\n    scorers: [{name: exact_match}]', '{{inptu}}"\n    scorers: [{name: exact_match}]'),
            "field 'tasks.smoke.prompt'",
        ),
        (
            ("    outputs_from: metadata.output\n", "    outputs_from: metadata.output\n    seeds: 3\n"),
            "field 'tasks.judged.seeds'",
        ),
        (
            ("outputs_from: metadata.output", "outputs_from: output"),
            "field 'tasks.judged.outputs_from': 'output' is not a case field",
        ),
        (
            ("outputs_from: metadata.output", "outputs_of: fulll"),
            "field 'tasks.judged.outputs_of': unknown task 'fulll'",
        ),
        (
            ("outputs_from: metadata.output", "prompt: '{{input}}'\n    outputs_of: full"),
            "give exactly one of 'prompt'",
        ),
        (
            ('{name: contains, options: {text: "because"}}', "{name: judge, options: {evaluator: helpfulnes}}"),
            "field 'tasks.judged.scorers.0.options.evaluator': unknown evaluator 'helpfulnes'; known: ['helpfulness']",
        ),
        (
            (
                "{name: token_f1}, {name: numeric_match",
                "{name: token_f1}, {name: token_f1, options: {}}, {name: numeric_match",
            ),
            "field 'tasks.full.scorers': two scorers give the metric ['token_f1']; name one with 'metric'",
        ),
        (
            ('{name: contains, options: {text: "because"}}', "{name: pair_accuracy}"),
            "field 'tasks.judged.scorers.0.name': scorer 'pair_accuracy' scores a judge's verdicts: "
            "the task needs 'as_judge'",
        ),
        (("tasks: [smoke, full]", "tasks: [smoke, ful]"), "field 'groups.answers.tasks': unknown task(s) ['ful']"),
        (
            ("    version: 1\n", "    version: 1\n    samples: 5\n    pass_at: [1, 10]\n"),
            "field 'tasks.smoke.pass_at': Value error, each k must be between 1 and the task's samples (5), got 10",
        ),
        (
            ("    version: 1\n", "    version: 1\n    pass_at: [1, 1]\n"),
            "field 'tasks.smoke.pass_at': Value error, each k once",
        ),
    ],
)
def test_each_mistake_names_file_and_field(root, change, message):
    old, new = change
    assert old in GOOD
    path = write(root, "s", GOOD.replace(old, new))
    with pytest.raises(SuiteError) as err:
        load_suite(path, root, evaluators={"helpfulness"})
    assert str(path) in str(err.value) and message in str(err.value)


JUDGE_TASK = """
tasks:
  pairs:
    dataset: qa
    as_judge:
      pair: [metadata.output_1, metadata.output_2]
      evaluator: {mode: pairwise, prompt: "{{input}} {{output_a}} {{output_b}}"}
    scorers: [{name: pair_accuracy}, {name: position_agreement}]
"""


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            ("mode: pairwise", "mode: n_wise"),
            "field 'tasks.pairs.as_judge.evaluator.mode': judges of mode score, binary, categorical, pairwise can be "
            "benchmarked, not 'n_wise'",
        ),
        (
            (
                'mode: pairwise, prompt: "{{input}} {{output_a}} {{output_b}}"',
                'mode: score, prompt: "{{input}} {{output}}"',
            ),
            "field 'tasks.pairs.scorers.0.name': scorer 'pair_accuracy' scores pairwise judges, "
            "and this task's judge is score",
        ),
        (
            (
                "[metadata.output_1, metadata.output_2]",
                "[metadata.output_1, metadata.output_2]\n      reference: expected_output",
            ),
            "field 'tasks.pairs.as_judge.reference': expected_output is the gold verdict",
        ),
        (
            ("{mode: pairwise,", "{mode: pairwise, model: openai/gpt-4o,"),
            "field 'tasks.pairs.as_judge.evaluator.model': not allowed",
        ),
        (("metadata.output_2]", "output_2]"), "field 'tasks.pairs.as_judge.pair': 'output_2' is not a case field"),
        (("{{output_b}}", "{{output_c}}"), "field 'tasks.pairs.as_judge.evaluator'"),
    ],
)
def test_judge_task_mistakes_name_file_and_field(root, change, message):
    load_suite(write(root, "j", JUDGE_TASK), root)
    path = write(root, "j", JUDGE_TASK.replace(*change))
    with pytest.raises(SuiteError) as err:
        load_suite(path, root)
    assert str(path) in str(err.value) and message in str(err.value)


def test_a_depends_on_cycle_is_named(root):
    cyclic = GOOD.replace("    version: 1\n", "    version: 1\n    depends_on: [judged]\n")
    with pytest.raises(SuiteError, match="depends_on cycle full -> smoke -> judged -> full"):
        load_suite(write(root, "s", cyclic), root)


def test_a_broken_suite_file_does_not_hide_the_others(root):
    write(root, "good", GOOD)
    write(root, "bad", "tasks: [1, 2]")
    write(root, "models", "models: [a]")
    suites, errors = load_suites(root / "benchmarks", root)
    assert list(suites) == ["good"]
    assert list(errors) == ["bad"] and "bad.yaml" in errors["bad"] and "field 'tasks'" in errors["bad"]


def test_a_yml_suite_loads_as_every_other_config_file(root):
    (root / "benchmarks" / "short.yml").write_text(GOOD)
    write(root, "bad", "tasks: [1, 2]")
    suites, errors = load_suites(root / "benchmarks", root)
    assert list(suites) == ["short"] and set(suites["short"].tasks) == {"smoke", "full", "judged"}
    assert list(errors) == ["bad"]
