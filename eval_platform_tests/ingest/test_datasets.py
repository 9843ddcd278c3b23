"""Test-case datasets keep an `expected_output` written as JSON as JSON: a list of accepted answers stays a list,
an object is shown and compared as its JSON text, never as a Python repr."""

from __future__ import annotations

import json

import polars as pl

from eval_platform.ingest.datasets import expected_value, validate_dataset
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.fencing import unfence_all
from eval_platform.judging.prompts import build_messages, trace_values
from eval_platform.judging.references import attach_dataset_references
from eval_platform.scoring import registry

ROWS = [
    {"case_id": "list", "input": "Capital of France?", "expected_output": ["Paris", "paris, France"]},
    {"case_id": "object", "input": "Who signed?", "expected_output": {"name": "Ana", "role": "ceo"}},
    {"case_id": "number", "input": "2 + 2?", "expected_output": 4},
    {"case_id": "flag", "input": "Is it safe?", "expected_output": True},
    {"case_id": "text", "input": "Say hi", "expected_output": "[not a list, just text]"},
    {"case_id": "none", "input": "No gold"},
]


def cases_of(tmp_path, rows=ROWS) -> pl.DataFrame:
    path = tmp_path / "datasets" / "gold" / "v1.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    cases, rejects = validate_dataset(tmp_path, "gold", 1, path)
    assert rejects.is_empty()
    return cases


def test_json_expected_outputs_are_stored_as_json_text_and_read_back_as_written(tmp_path):
    cases = {case["case_id"]: case for case in cases_of(tmp_path).to_dicts()}
    assert cases["list"]["expected_output"] == '["Paris", "paris, France"]'
    assert cases["object"]["expected_output"] == '{"name": "Ana", "role": "ceo"}'  # not {'name': 'Ana', ...}
    assert (cases["number"]["expected_output"], cases["flag"]["expected_output"]) == ("4", "true")
    assert [cases[k]["expected_output_json"] for k in ("list", "object", "text", "none")] == [True, True, False, None]
    assert expected_value(cases["list"]) == ["Paris", "paris, France"]
    assert expected_value(cases["object"]) == {"name": "Ana", "role": "ceo"}
    assert expected_value(cases["text"]) == "[not a list, just text]"  # text that looks like JSON stays text
    assert expected_value(cases["none"]) is None


def test_a_parquet_list_column_is_a_list_of_accepted_answers(tmp_path):
    path = tmp_path / "datasets" / "gold" / "v2.parquet"
    path.parent.mkdir(parents=True)
    frame = pl.DataFrame({"case_id": ["c1"], "input": ["Capital?"], "expected_output": [["Paris", "Paris, France"]]})
    frame.write_parquet(path)
    (case,) = validate_dataset(tmp_path, "gold", 2, path)[0].to_dicts()
    assert expected_value(case) == ["Paris", "Paris, France"]


def test_match_scorers_accept_any_answer_of_a_list_and_compare_an_object_as_json(tmp_path):
    cases = {c["case_id"]: {**c, "expected_output": expected_value(c)} for c in cases_of(tmp_path).to_dicts()}

    def score(name: str, output: str, case_id: str) -> float:
        return registry.get(name).score(output, cases[case_id])

    assert score("exact_match", "Paris, France", "list") == 1.0
    assert score("contains", "It is Paris.", "list") == 1.0
    assert score("exact_match", "Lyon", "list") == 0.0
    assert score("contains", 'Found: {"name": "Ana", "role": "ceo"}', "object") == 1.0
    assert score("exact_match", '{"name": "Ana", "role": "ceo"}', "object") == 1.0
    assert score("numeric_match", "The answer is 4.", "number") == 1.0
    assert registry.get("numeric_match").score("about 19", {"expected_output": [18, 19]}) == 1.0


def test_a_judge_sees_an_object_reference_as_json(tmp_path):
    traces = pl.DataFrame(
        {
            "trace_id": ["t1"],
            "input": ["Who signed?"],
            "output": ["Ana did."],
            "expected_output": [None],
            "metadata": ['{"case_id": "object"}'],
        },
        schema_overrides={"expected_output": pl.String()},
    )
    attached = attach_dataset_references(traces, cases_of(tmp_path), "metadata.case_id")
    config = EvaluatorConfig.model_validate(
        {"name": "gold", "mode": "reference", "model": "openai/x", "prompt": "{{output}} vs {{expected}}"}
    )
    user = build_messages(config, trace_values(attached.row(0, named=True)))[1]["content"]
    assert unfence_all(user)["expected"] == ['{"name": "Ana", "role": "ceo"}']
