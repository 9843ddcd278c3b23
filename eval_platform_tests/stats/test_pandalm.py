"""The PandaLM paper's human-agreement and judge figures, recomputed from data/ with eval_platform.stats only.

Published values (data/sources/pandalm/PROVENANCE.md): annotator pairwise Cohen's kappa 0.85 / 0.88 / 0.86,
majority labels 105 ties / 422 response 1 / 472 response 2, and against the majority: gpt-3.5-turbo
accuracy 71.07, macro precision 58.79, recall 57.36, F1 57.55; PandaLM-7B 66.77 / 57.38 / 57.50 / 57.43.
PandaLM counts an unusable judge reply ("garbage") as a tie, hence `unusable_as_tie=True`.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from eval_platform.stats.annotators import majority_labels, pairwise_kappas
from eval_platform.stats.judge_agreement import label_agreement, preference_labels

DATA = Path(__file__).resolve().parents[2] / "data"

PAIRS = [("annotator1", "annotator2"), ("annotator1", "annotator3"), ("annotator2", "annotator3")]
PUBLISHED_KAPPAS = dict(zip(PAIRS, (0.85, 0.88, 0.86), strict=True))
# The same kappas to four decimals, as the provenance check reproduced them from the raw labels.
REPRODUCED_KAPPAS = dict(zip(PAIRS, (0.8520, 0.8789, 0.8617), strict=True))
PUBLISHED_MAJORITY = {"tie": 105, "A": 422, "B": 472}
PUBLISHED_JUDGES = {"gpt-3.5-turbo": (71.07, 58.79, 57.36, 57.55), "pandalm-7b": (66.77, 57.38, 57.50, 57.43)}


@pytest.fixture(scope="module")
def annotations() -> pl.DataFrame:
    raw = pl.read_ndjson(DATA / "annotations" / "pandalm_human.jsonl")
    return raw.with_columns(preference_labels(raw["label"]).alias("label"))


def test_annotator_pairwise_kappas(annotations):
    kappas = {(row["annotator_a"], row["annotator_b"]): row["kappa"] for row in pairwise_kappas(annotations).to_dicts()}
    assert {pair: round(kappa, 2) for pair, kappa in kappas.items()} == PUBLISHED_KAPPAS
    assert {pair: round(kappa, 4) for pair, kappa in kappas.items()} == REPRODUCED_KAPPAS


def test_majority_label_distribution(annotations):
    majority = majority_labels(annotations)
    assert majority["label"].null_count() == 0
    assert dict(majority["label"].value_counts().iter_rows()) == PUBLISHED_MAJORITY


@pytest.mark.parametrize("judge", PUBLISHED_JUDGES)
def test_judge_against_the_human_majority(annotations, judge):
    verdicts = pl.read_ndjson(DATA / "judgments" / f"pandalm_{judge}.jsonl")
    verdicts = verdicts.with_columns(preference_labels(verdicts["verdict"], unusable_as_tie=True).alias("verdict"))
    paired = majority_labels(annotations).join(verdicts, on="item_id")
    assert paired.height == 999
    result = label_agreement(paired["label"], paired["verdict"])
    figures = tuple(round(100 * value, 2) for value in (result.accuracy, result.precision, result.recall, result.f1))
    assert figures == PUBLISHED_JUDGES[judge]
