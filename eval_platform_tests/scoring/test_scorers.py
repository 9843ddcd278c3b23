"""Classical scorers: values of the SQuAD v1.1 evaluation script's rules, options validated, missing fields named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from eval_platform.scoring import registry
from eval_platform.scoring.base import Scorer, ScorerOptions
from eval_platform.scoring.squad import normalize_answer


def score(name: str, output: str, case: dict, **options) -> float:
    scorer = registry.get(name)
    return scorer.score(output, case, scorer.options(**options))


def test_squad_normalization_drops_case_punctuation_articles_and_spaces():
    # The v1.1 script: white_space_fix(remove_articles(remove_punc(lower(s)))).
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a day") == "apple day"
    assert normalize_answer("theory") == "theory"  # 'the' only as a word


def test_exact_match_and_f1_take_the_best_reference_as_the_script_does():
    case = {"expected_output": ["Denver Broncos", "the Denver Broncos"]}
    assert score("exact_match", "The Denver Broncos.", case) == 1.0
    # pred {cat, sat} vs ref {cat, sat, on, mat}: precision 1, recall 0.5 -> F1 2/3.
    assert score("token_f1", "the cat sat", {"expected_output": "a cat sat on the mat"}) == pytest.approx(2 / 3)
    assert score("exact_match", "the cat sat", {"expected_output": "a cat sat on the mat"}) == 0.0
    assert score("token_f1", "dog", {"expected_output": "cat"}) == 0.0
    # Repeated tokens count with multiplicity (Counter intersection): common {red, blue} of 3 and 3 tokens.
    assert score("token_f1", "red red blue", {"expected_output": "red blue blue"}) == pytest.approx(2 / 3)


def test_text_and_json_and_numeric_scorers():
    assert score("contains", "The answer is Paris.", {"expected_output": "paris"}) == 1.0
    assert score("contains", "The answer is Paris.", {}, text="paris", case_sensitive=True) == 0.0
    assert score("regex", "ID-1234", {}, pattern=r"ID-\d{4}", full_match=True) == 1.0
    assert score("regex", "xID-12", {}, pattern=r"ID-\d{4}") == 0.0
    assert score("valid_json", '{"a": 1}', {}) == 1.0
    assert score("valid_json", "{'a': 1}", {}) == 0.0
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}
    assert score("json_schema", '{"a": 1}', {}, json_schema=schema) == 1.0
    assert score("json_schema", '{"a": "1"}', {}, json_schema=schema) == 0.0
    assert score("numeric_match", "so she pays 1,250.0 dollars", {"expected_output": "#### 1250"}) == 1.0
    assert score("numeric_match", "about 3.14", {"expected_output": "3.1416"}, abs_tol=0.01) == 1.0
    assert score("numeric_match", "about 3.14", {"expected_output": "3.1416"}) == 0.0
    assert score("numeric_match", "no idea", {"expected_output": "7"}) == 0.0


@pytest.mark.parametrize("output", ["NaN", '{"a": NaN}', "[Infinity]", '{"a": -Infinity}', '{"a": 1} x', ""])
def test_valid_json_is_rfc_8259_json(output):
    # Python's json.loads accepts NaN and Infinity; JSON (RFC 8259) and every other parser do not.
    assert score("valid_json", output, {}) == 0.0
    assert score("json_schema", output, {}, json_schema={}) == 0.0


def test_valid_json_accepts_any_rfc_8259_value():
    for output in ('{"a": 1e400}', "[1, -0.5, true, null]", '"text"', ' {"a": "\\u00e9"} \n'):
        assert score("valid_json", output, {}) == 1.0


def test_a_case_missing_the_field_a_scorer_needs_is_named_not_scored():
    with pytest.raises(registry.MissingField, match="expected_output"):
        score("token_f1", "x", {"input": "q"})
    with pytest.raises(registry.MissingField, match="answer"):
        score("numeric_match", "3", {"expected_output": "3"}, reference_field="answer")


def test_options_are_strict_and_unknown_scorers_are_listed():
    with pytest.raises(ValidationError, match="extra"):
        registry.get("exact_match").options(refrence_field="x")
    with pytest.raises(ValidationError, match="regular expression"):
        registry.get("regex").options(pattern="(")
    with pytest.raises(ValidationError, match="JSON Schema"):
        registry.get("json_schema").options(json_schema={"type": 5})
    with pytest.raises(KeyError, match="known: .*exact_match"):
        registry.get("bleurt")


def test_aggregate_is_the_mean_and_none_when_nothing_answered():
    scorer = registry.get("exact_match")
    assert scorer.aggregate([1.0, 0.0, 1.0, 1.0], [], [], scorer.options()) == 0.75
    assert scorer.aggregate([], [], [], scorer.options()) is None


def test_a_scorer_declares_its_aggregation_and_the_declaration_decides():
    corpus = {name for name, scorer in registry.SCORERS.items() if scorer.task_level}
    assert corpus == {"bleu", "chrf", "verdict_kappa", "verdict_correlation", "llmbar_kappa", "bertscore_idf"}

    # A corpus statistic written as a lambda is still a corpus statistic: the declaration, not the function's name.
    longest = Scorer(
        "longest",
        ScorerOptions,
        lambda output, _case, _options: float(len(output)),
        aggregate=lambda values, _outputs, _cases, _options: max(values),
        aggregation="corpus",
    )
    assert longest.task_level and longest.aggregate([1.0, 3.0], [], [], None) == 3.0

    def total(values, _outputs, _cases, _options):
        return sum(values)

    with pytest.raises(ValueError, match="aggregation='corpus'"):  # an own aggregate, undeclared
        Scorer("total", ScorerOptions, lambda output, _case, _options: 1.0, aggregate=total)
    with pytest.raises(ValueError, match="needs its own aggregate"):  # declared, without the statistic
        Scorer("total", ScorerOptions, lambda output, _case, _options: 1.0, aggregation="corpus")
