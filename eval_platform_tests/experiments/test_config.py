"""Experiment files: validated on load, with errors that name the file, the field and the fix."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import yaml

from eval_platform.experiments.config import (
    ExperimentConfigError,
    load_experiment,
    load_experiments,
)
from eval_platform.judging.config import EvaluatorConfig
from eval_platform_tests.conftest import REPO_DATA, docs_text

VALID = {
    "description": "new prompt",
    "experiment_id": "exp-1",
    "control": "v1",
    "treatments": ["v2"],
    "primary_metric": {"evaluator": "helpfulness"},
    "guardrails": [{"evaluator": "toxicity", "max_degradation": 0.05}],
}


def evaluator(name: str, mode: str) -> EvaluatorConfig:
    prompts = {"pairwise": "{{output_a}} {{output_b}}", "n_wise": "{{candidates}}"}
    return EvaluatorConfig(name=name, mode=mode, model="openai/mock", prompt=prompts.get(mode, "{{output}}"))


EVALUATORS = {
    "helpfulness": evaluator("helpfulness", "score"),
    "toxicity": evaluator("toxicity", "score"),
    "strict": evaluator("strict", "binary"),
    "preference": evaluator("preference", "pairwise"),
}


def write(folder: Path, stem: str, **fields) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def test_defaults_and_name_from_the_file(tmp_path):
    config = load_experiment(write(tmp_path, "prompt_v2", **VALID), EVALUATORS)
    assert config.name == "prompt_v2"
    assert config.variants == ["v1", "v2"]
    assert (config.method, config.alpha, config.minimum_sample_size) == ("frequentist", 0.05, 30)
    assert (config.primary_metric.field, config.primary_metric.direction) == ("score", "increase")
    assert [(role, m.name) for role, m in config.metrics] == [
        ("primary", "helpfulness.score"),
        ("guardrail", "toxicity.score"),
    ]
    assert config.guardrails[0].rule == "degradation at most 0.05"


def test_dates_parse(tmp_path):
    config = load_experiment(write(tmp_path, "w", **VALID, start_date="2026-11-01", end_date="2026-11-30"))
    assert (config.start_date, config.end_date) == (dt.date(2026, 11, 1), dt.date(2026, 11, 30))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"treatment": ["v2"]}, r"field 'treatment': Extra inputs are not permitted"),
        ({"method": "bandit"}, r"field 'method': Input should be 'frequentist', 'bayesian', 'both' or 'sequential'"),
        ({"alpha": 0.7}, r"field 'alpha'"),
        ({"minimum_sample_size": 1}, r"field 'minimum_sample_size'"),
        ({"treatments": []}, r"field 'treatments'"),
        ({"treatments": ["v2", "v2"]}, r"listed more than once: \['v2'\]"),
        ({"treatments": ["v1", "v2"]}, r"control 'v1' is also listed in treatments"),
        ({"primary_metric": {"evaluator": "helpfulness", "field": "label"}}, r"field 'primary_metric.field'"),
        ({"guardrails": [{"evaluator": "toxicity"}]}, r"field 'guardrails.0': .*needs a rule: set max_degradation"),
        ({"guardrails": [{"evaluator": "helpfulness", "max_degradation": 0.1}]}, r"both primary and guardrail"),
        ({"start_date": "2026-11-30", "end_date": "2026-11-01"}, r"end_date \(2026-11-01\) is before start_date"),
        ({"name": "other"}, r"field 'name' is 'other' but the file is named 'exp.yaml'"),
    ],
)
def test_errors_name_the_file_and_the_field(tmp_path, change, message):
    path = write(tmp_path, "exp", **{**VALID, **change})
    with pytest.raises(ExperimentConfigError, match=message) as error:
        load_experiment(path)
    assert str(error.value).startswith(str(path))


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            {"primary_metric": {"evaluator": "helpfulnes"}},
            r"field 'primary_metric.evaluator': no evaluator named 'helpfulnes'",
        ),
        (
            {"guardrails": [{"evaluator": "toxic", "max_degradation": 0.1}]},
            r"field 'guardrails.0.evaluator': no evaluator named 'toxic'",
        ),
        ({"primary_metric": {"evaluator": "preference"}}, r"'preference' is pairwise .* name it in pairwise_evaluator"),
        (
            {"primary_metric": {"evaluator": "helpfulness", "field": "passed"}},
            r"score evaluator without pass/fail; use field: score",
        ),
        (
            {"pairwise_evaluator": "helpfulness"},
            r"field 'pairwise_evaluator': 'helpfulness' is a score evaluator, not pairwise",
        ),
        ({"pairwise_evaluator": "missing"}, r"field 'pairwise_evaluator': no evaluator named 'missing'"),
    ],
)
def test_evaluators_are_checked_when_given(tmp_path, change, message):
    path = write(tmp_path, "exp", **{**VALID, **change})
    load_experiment(path)  # the file alone is well-formed
    with pytest.raises(ExperimentConfigError, match=message):
        load_experiment(path, EVALUATORS)


def test_pass_rates_and_pairwise_are_accepted_for_the_right_modes(tmp_path):
    path = write(
        tmp_path,
        "exp",
        **{**VALID, "primary_metric": {"evaluator": "strict", "field": "passed"}, "pairwise_evaluator": "preference"},
    )
    assert load_experiment(path, EVALUATORS).primary_metric.name == "strict.passed"


def test_folder_loading_is_sorted_and_a_missing_folder_has_none(tmp_path):
    write(tmp_path / "experiments", "b", **VALID)
    write(tmp_path / "experiments", "a", **VALID)
    assert list(load_experiments(tmp_path / "experiments")) == ["a", "b"]
    assert load_experiments(tmp_path / "nowhere") == {}


def test_the_shipped_sample_experiment_is_valid():
    from eval_platform.judging.loading import load_evaluators

    experiments = load_experiments(REPO_DATA / "experiments", load_evaluators(REPO_DATA / "evaluators"))
    sample = experiments["pandalm_models"]
    assert sample.control == "llama-7b" and sample.pairwise_evaluator == "pairwise_preference"


def test_the_readme_example_is_a_valid_experiment(tmp_path):
    readme = docs_text()
    [(stem, body)] = re.findall(r"```yaml\n# experiments/(\w+)\.yaml\n(.*?)```", readme, re.DOTALL)
    path = tmp_path / f"{stem}.yaml"
    path.write_text(body, encoding="utf-8")
    known = {**EVALUATORS, "faithfulness": evaluator("faithfulness", "score")}
    config = load_experiment(path, known)
    assert (config.method, config.pairwise_evaluator, len(config.guardrails)) == ("both", "preference", 2)
