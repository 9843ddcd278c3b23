"""The judge sides of `agreement`: judge vs human and judge vs judge, computed from judge_scores rows as the asset
reads them (every column), against the plain definitions (a join on the trace ids, the statistics of the rows)."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest

from eval_platform.agreement import (
    _join_slots,
    _keyed,
    _Rows,
    _sorted_by_key,
    _windows,
    compute,
    judge_vs_judge,
)
from eval_platform.ingest.annotations import HUMAN_ANNOTATION_SCHEMA
from eval_platform.ingest.judgments import IMPORTED_JUDGMENT_SCHEMA
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform, empty_frame
from eval_platform.stats.judge_agreement import (
    _average_ranks,
    label_table,
    pairwise_agreement,
    score_agreement,
)
from eval_platform.stats.kappa import cohen_kappa, contingency_table

DAYS = [f"2026-10-{d:02d}" for d in range(1, 6)]


def _evaluator(name: str, mode: str, **options) -> EvaluatorConfig:
    extra = {"labels": {"billing": 0.0, "shipping": 1.0}} if mode == "categorical" else {}
    if mode == "score":
        extra = {"score_scale": {"min": 1, "max": 5}}
    prompt = "{{output_a}} {{output_b}}" if mode == "pairwise" else "{{output}}"
    return EvaluatorConfig(name=name, mode=mode, model="openai/x", prompt=prompt, **extra, **options)


def _annotations(task: str, criterion: str, labels: dict[str, list[str]]) -> pl.DataFrame:
    """Each trace's item labelled by as many annotators as it has labels."""
    rows = [{"task": task, "criterion": criterion, "schema": "classification", "item_id": f"item-{trace}",
             "trace_id": trace, "annotator": f"ann-{i}", "label": label}
            for trace, given in labels.items() for i, label in enumerate(given)]
    return conform(pl.DataFrame(rows), HUMAN_ANNOTATION_SCHEMA)


def _scores(evaluator: str, rows: list[dict]) -> pl.DataFrame:
    """judge_scores rows with every column (as the asset reads them): final, completed unless said otherwise."""
    base = {"evaluator": evaluator, "date": DAYS[0], "is_final": True, "status": "COMPLETED", "role": "verdict", "sample": 0}
    return conform(pl.DataFrame([{**base, **row} for row in rows], infer_schema_length=None), JUDGE_SCORE_SCHEMA)


def _statistic(rows: pl.DataFrame, subject: str, statistic: str, period: str = "all") -> tuple[float | None, int]:
    row = rows.filter((pl.col("subject") == subject) & (pl.col("statistic") == statistic) & (pl.col("period") == period)
                      & (pl.col("section") == "judge_vs_human")).row(0, named=True)
    return row["value"], row["n"]


def test_binary_and_categorical_judges_are_compared_with_the_human_majority_not_with_themselves():
    # judge_scores has a `label` column of its own (null for a binary judge): the human majority must not be
    # read from it, which left a binary judge with no item and gave a categorical judge a kappa of 1
    humans = pl.concat([
        _annotations("correctness", "correct", {"t1": ["true"] * 3, "t2": ["false"] * 3, "t3": ["true", "true", "false"],
                                                "t4": ["false", "false", "true"]}),
        _annotations("topic", "topic", {"t1": ["billing"] * 2, "t2": ["shipping"] * 2, "t3": ["billing"] * 2,
                                        "t4": ["shipping"] * 2}),
    ])
    evaluators = {
        "correct": _evaluator("correct", "binary", human_agreement={"task": "correctness", "criterion": "correct"}),
        "topic": _evaluator("topic", "categorical", human_agreement={"task": "topic", "criterion": "topic"}),
    }
    scores = pl.concat([
        _scores("correct", [{"trace_id": t, "passed": p} for t, p in [("t1", True), ("t2", True), ("t3", True), ("t4", False)]]),
        _scores("topic", [{"trace_id": t, "label": label} for t, label in
                          [("t1", "billing"), ("t2", "billing"), ("t3", "shipping"), ("t4", "shipping")]]),
    ])
    rows, _ = compute(evaluators, scores.lazy(), humans, empty_frame(IMPORTED_JUDGMENT_SCHEMA))
    assert _statistic(rows, "correct", "accuracy") == (0.75, 4)  # wrong on t2 only
    assert _statistic(rows, "topic", "accuracy") == (0.5, 4)  # wrong on t2 and t3
    assert _statistic(rows, "topic", "cohen_kappa") == (0.0, 4)
