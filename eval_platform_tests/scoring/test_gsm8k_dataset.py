"""The shipped GSM8K slice: every case has a question and a numeric reference the numeric scorer reads."""

from __future__ import annotations

import json
from pathlib import Path

from eval_platform.scoring import registry

DATASET = Path(__file__).resolve().parents[2] / "data" / "datasets" / "gsm8k" / "v1.jsonl"


def test_gsm8k_slice_is_fifty_cases_with_numeric_references_matching_their_worked_solution():
    rows = [json.loads(line) for line in DATASET.read_text(encoding="utf-8").splitlines()]
    assert len(rows) == 50 and len({row["case_id"] for row in rows}) == 50
    numeric = registry.get("numeric_match")
    # Upstream's own worked solution, ending "... = <<..>>18", scores 1 against its final answer.
    solved = [numeric.score(row["metadata"]["solution"], row) for row in rows]
    assert sum(solved) == 48  # two worked solutions end on a restated number, not the final answer
    assert all(row["input"].strip() for row in rows)


def test_dataset_versions_accepts_every_shipped_case():
    from eval_platform.ingest.datasets import validate_dataset

    cases, rejects = validate_dataset(DATASET.parents[2], "gsm8k", 1, DATASET)
    assert cases.height == 50 and rejects.height == 0
    assert cases["expected_output"][0] == "18"
