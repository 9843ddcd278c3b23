"""One reader of `metadata.<key>`: the prompt, a reference evaluator's `match_on` and pairwise grouping see the
same text for the same value (JSON text for non-strings), and a missing key is no value, never an error."""

from __future__ import annotations

import json

import polars as pl

from eval_platform.judging.references import attach_dataset_references
from eval_platform.judging.templates import parse_template, render
from eval_platform.record_fields import field_text


def test_metadata_values_read_as_json_text_and_missing_as_none():
    trace = {
        "trace_id": "t1",
        "latency_ms": 12.5,
        "metadata": json.dumps({"flag": True, "n": 3, "tags": ["a", "b"], "who": "Ana", "none": None}),
    }
    assert field_text(trace, "metadata.flag") == "true"  # not Python's "True"
    assert field_text(trace, "metadata.n") == "3"
    assert field_text(trace, "metadata.tags") == '["a", "b"]'  # not "['a', 'b']"
    assert field_text(trace, "metadata.who") == "Ana"
    assert field_text(trace, "metadata.none") is None and field_text(trace, "metadata.absent") is None
    assert field_text({"metadata": None}, "metadata.flag") is None
    assert field_text({"metadata": "[1, 2]"}, "metadata.flag") is None  # not an object: no such key
    assert field_text(trace, "trace_id") == "t1" and field_text(trace, "latency_ms") == "12.5"
    # the prompt shows what grouping and matching compare
    tree = parse_template("{{metadata.flag}} {{metadata.tags}}", {"metadata.flag", "metadata.tags"})
    assert render(tree, {"metadata": trace["metadata"]}, fenced=False) == 'true ["a", "b"]'


def test_reference_matching_reads_metadata_as_the_prompt_does():
    cases = pl.DataFrame({"case_id": ["true", "[1, 2]"], "expected_output": ["yes", "pair"]})
    traces = pl.DataFrame(
        {
            "trace_id": ["t1", "t2", "t3", "t4"],
            "metadata": [json.dumps({"case_id": True}), json.dumps({"case_id": [1, 2]}), "{}", "[]"],
            "expected_output": [None, None, None, None],
        },
        schema={"trace_id": pl.String, "metadata": pl.String, "expected_output": pl.String},
    )
    matched = attach_dataset_references(traces, cases, "metadata.case_id")
    assert matched["expected_output"].to_list() == ["yes", "pair", None, None]
