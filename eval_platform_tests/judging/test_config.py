"""Evaluator files: a mistake is a clear error naming the file and the field."""

from __future__ import annotations

import logging

import pydantic
import pytest

from eval_platform.judging.loading import EvaluatorConfigError, load_evaluator, load_evaluators
from eval_platform_tests.conftest import REPO_DATA, write_evaluator

BASE = {"mode": "score", "model": "openai/gpt-4o-mini", "prompt": "Rate {{output}} for {{input}}"}


def test_builtin_evaluators_load():
    evaluators = load_evaluators(REPO_DATA / "evaluators")
    builtins = {
        "relevance",
        "hallucination",
        "faithfulness",
        "toxicity",
        "helpfulness",
        "coherence",
        "accuracy",
        "clarity",
    }
    assert builtins <= set(evaluators)
    assert evaluators["accuracy"].score_scale.max == 10
    assert evaluators["pairwise_preference"].mode == "pairwise"


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({**BASE, "temprature": 0.2}, "field 'temprature': Extra inputs are not permitted"),
        ({**BASE, "mode": "rank"}, "field 'mode'"),
        ({**BASE, "prompt": "Judge {{answer}}"}, "unknown variable '{{answer}}'"),
        ({**BASE, "prompt": "{{#if context}}x"}, "never closed"),
        ({**BASE, "trigger": "sampled"}, "needs sample_rate"),
        ({**BASE, "model": "openai/my-private-model", "max_daily_cost_usd": 1.0}, "no known price"),
        ({**BASE, "mode": "categorical"}, "needs `labels`"),
        ({**BASE, "score_scale": {"min": 5, "max": 1}}, "must be greater"),
        ({**BASE, "max_tokens": 0}, "field 'max_tokens'"),
    ],
)
def test_error_names_file_and_field(data_root, fields, expected):
    path = write_evaluator(data_root, "broken", **fields)
    with pytest.raises(EvaluatorConfigError) as err:
        load_evaluator(path)
    assert str(path) in str(err.value)
    assert expected in str(err.value)


def test_name_must_match_file(data_root):
    path = write_evaluator(data_root, "relevance", name="other", **BASE)
    with pytest.raises(EvaluatorConfigError, match="field 'name' is 'other'"):
        load_evaluator(path)


def test_invalid_yaml_names_file(data_root):
    path = data_root / "evaluators" / "bad.yaml"
    path.write_text("mode: score\n  prompt: [unclosed\n")
    with pytest.raises(EvaluatorConfigError, match="bad.yaml: not valid YAML"):
        load_evaluator(path)


def test_budget_allowed_with_price_override(data_root):
    path = write_evaluator(
        data_root,
        "priced",
        **{**BASE, "model": "openai/my-private-model"},
        max_daily_cost_usd=1.0,
        input_cost_per_million=2.0,
        output_cost_per_million=8.0,
    )
    prices = load_evaluator(path).judge_models()[0].prices()
    assert (prices.input_per_million, prices.output_per_million) == (2.0, 8.0)


def test_samples_clamped_to_ten_with_warning(data_root, caplog):
    path = write_evaluator(data_root, "many", **BASE, samples=25)
    with caplog.at_level(logging.WARNING):
        assert load_evaluator(path).samples == 10
    assert "clamped" in caplog.text


def test_config_hash_changes_with_prompt(data_root):
    a = load_evaluator(write_evaluator(data_root, "a", **BASE))
    b = load_evaluator(write_evaluator(data_root, "a", **{**BASE, "prompt": "Rate {{output}}"}))
    assert a.config_hash != b.config_hash


def test_every_field_is_declared_verdict_or_not():
    from eval_platform.judging.config import (
        NON_VERDICT_FIELDS,
        VERDICT_FIELDS,
        EvaluatorConfig,
    )

    # a new field must be placed on one side: otherwise a verdict could change under an unchanged hash
    assert set(VERDICT_FIELDS) | set(NON_VERDICT_FIELDS) == set(EvaluatorConfig.model_fields)
    assert not set(VERDICT_FIELDS) & set(NON_VERDICT_FIELDS)


@pytest.mark.parametrize(
    "change",
    [
        {"description": "now with a description"},
        {"max_daily_cost_usd": 3.0, "max_monthly_cost_usd": 50.0},
        {"enabled": False},
        {"timeout_s": 5.0, "max_retries": 1},
        {"trigger": "sampled", "sample_rate": 0.5},
        {"api_key_env": "OTHER_KEY"},
    ],
)
def test_config_hash_ignores_what_cannot_change_a_verdict(data_root, change):
    a = load_evaluator(write_evaluator(data_root, "a", **BASE))
    b = load_evaluator(write_evaluator(data_root, "a", **{**BASE, **change}))
    assert a.config_hash == b.config_hash


@pytest.mark.parametrize(
    "change",
    [
        {"temperature": 0.7},
        {"max_tokens": 64},
        {"samples": 3},
        {"model": "openai/gpt-4o"},
        {"score_scale": {"min": 0, "max": 10}},
        {"anti_gaming_clauses": ["Ignore length."]},
        {"strict": True},
    ],
)
def test_config_hash_follows_what_can_change_a_verdict(data_root, change):
    a = load_evaluator(write_evaluator(data_root, "a", **BASE))
    b = load_evaluator(write_evaluator(data_root, "a", **{**BASE, **change}))
    assert a.config_hash != b.config_hash


def test_mode_defaults_are_filled_without_mutating_a_frozen_model(data_root):
    config = load_evaluator(
        write_evaluator(data_root, "p", **{**BASE, "mode": "pairwise", "prompt": "{{output_a}} or {{output_b}}"})
    )
    assert config.pairwise is not None and config.pairwise.orders == "both"
    assert config.consensus == "majority_vote"
    with pytest.raises(pydantic.ValidationError, match="frozen"):
        config.consensus = "mean"  # frozen


REFERENCE = {"mode": "reference", "model": "openai/gpt-4o-mini", "prompt": "{{output}} vs {{expected}}"}


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        (
            {"source": "dataset", "dataset": "faq", "version": 3},
            "field 'reference.version': dataset 'faq' has no version 3; declared: [1, 2]",
        ),
        ({"source": "dataset", "dataset": "fqa"}, "field 'reference.dataset': unknown dataset 'fqa'"),
        ({"source": "dataset", "dataset": "fqa", "version": 1}, "field 'reference.dataset': unknown dataset 'fqa'"),
    ],
)
def test_a_reference_dataset_version_not_declared_is_a_load_error(data_root, caplog, reference, expected):
    """'Exists' at load time means declared: a file datasets/<name>/v<N>.<ext> under the data root (whether it
    is materialized yet is the run's business, and the run says so)."""
    for version in (1, 2):
        (data_root / "datasets" / "faq").mkdir(parents=True, exist_ok=True)
        (data_root / "datasets" / "faq" / f"v{version}.jsonl").write_text('{"input": "q", "expected_output": "a"}\n')
    write_evaluator(data_root, "gold", **REFERENCE, reference=reference)
    write_evaluator(data_root, "fine", **BASE)
    write_evaluator(data_root, "newest", **REFERENCE, reference={"source": "dataset", "dataset": "faq"})
    write_evaluator(data_root, "pinned", **REFERENCE, reference={"source": "dataset", "dataset": "faq", "version": 2})
    broken: dict[str, str] = {}
    with caplog.at_level(logging.ERROR):
        evaluators = load_evaluators(data_root / "evaluators", broken=broken)
    assert sorted(evaluators) == ["fine", "newest", "pinned"]  # only the bad evaluator is affected
    assert list(broken) == ["gold.yaml"]
    assert broken["gold.yaml"].startswith(str(data_root / "evaluators" / "gold.yaml"))
    assert expected in broken["gold.yaml"]
    assert expected in caplog.text


def test_two_files_of_one_evaluator_are_an_error_not_a_silent_replacement(data_root):
    first = write_evaluator(data_root, "twin", **{**BASE, "prompt": "First {{output}}"})
    second = first.with_suffix(".yml")
    second.write_text(first.read_text().replace("First", "Second"))
    with pytest.raises(EvaluatorConfigError, match=r"twin\.yml: field 'name': evaluator 'twin' is already defined by"):
        load_evaluators(data_root / "evaluators")

    broken: dict[str, str] = {}
    evaluators = load_evaluators(data_root / "evaluators", broken=broken)
    assert evaluators["twin"].prompt == "First {{output}}"
    assert list(broken) == ["twin.yml"] and "twin.yaml" in broken["twin.yml"]
