"""Agreement's per-window statistics from per-day counts equal the statistics of the window's rows; its
inter-annotator statistics, computed from one integer coding per task, equal the peers' and the text-based
functions' on the same annotations."""

from __future__ import annotations

import itertools

import krippendorff
import numpy as np
import polars as pl
import pytest

from eval_platform.agreement.humans import inter_annotator
from eval_platform.agreement.judge_vs_human import PAIRWISE_LABELS
from eval_platform.agreement.periods import DailyTables, windows
from eval_platform.agreement.rows import Rows
from eval_platform.stats.annotators import annotator_agreement
from eval_platform.stats.judge_agreement import (
    label_agreement,
    label_agreement_table,
    pairwise_agreement,
    position_consistency,
    position_consistency_from_counts,
    position_counts,
)
from eval_platform.stats.kappa import (
    category_counts,
    cohen_kappa,
    fleiss_kappa,
    randolph_kappa,
)
from eval_platform.stats.reliability import LEVELS

DAYS = [f"2026-10-{d:02d}" for d in range(1, 13)]


def _frame(seed: int, values: list) -> pl.DataFrame:
    """Human and judge labels over twelve days (one day without rows), with missing labels on both sides and
    some rows without a date."""
    rng = np.random.default_rng(seed)
    n = 400
    pick = lambda: [values[i] if i < len(values) else None for i in rng.integers(0, len(values) + 1, n)]  # noqa: E731
    dates = [DAYS[i] if i != 4 else None for i in rng.integers(0, len(DAYS) - 1, n)]
    return pl.DataFrame(
        {"date": dates, "human": pick(), "judge": pick()},
        schema={"date": pl.String, "human": pl.String, "judge": pl.String},
    )


def _in(frame: pl.DataFrame, start, end) -> pl.DataFrame:
    return frame if start is None else frame.filter(pl.col("date").is_between(pl.lit(start), pl.lit(end)))


@pytest.mark.parametrize("seed", range(8))
def test_label_statistics_per_window_equal_those_of_the_windows_rows(seed):
    # a rare label and one that only the judge gives: each window has its own set of seen labels
    frame = _frame(seed, ["neutral", "negative", "positive", "positive", "sarcastic"][: 3 + seed % 3])
    tables = DailyTables(frame, frame["judge"])
    for _, start, end in windows(DAYS, 3):
        part = _in(frame, start, end)
        assert label_agreement_table(*tables.contingency(tables.window(start, end))) == label_agreement(
            part["human"], part["judge"]
        )


@pytest.mark.parametrize("seed", range(8))
def test_pairwise_statistics_per_window_equal_those_of_the_windows_rows(seed):
    frame = _frame(seed, ["A", "B", "tie", "garbage"])  # a verdict outside the labels: out of the table, in S1
    for judge in (frame["judge"], frame["judge"].fill_null("tie")):
        tables = DailyTables(frame, judge)
        rows = frame.with_columns(judge.alias("judge"))
        for _, start, end in windows(DAYS, 7):
            part, full = _in(rows, start, end), tables.window(start, end)
            assert label_agreement_table(*tables.contingency(full, PAIRWISE_LABELS)) == label_agreement(
                part["human"], part["judge"], labels=PAIRWISE_LABELS
            )
            assert tables.pairwise(full) == pairwise_agreement(part["human"], part["judge"])


def test_a_window_without_rows_has_no_statistics():
    frame = _frame(0, ["A", "B", "tie"])
    tables = DailyTables(frame, frame["judge"])
    empty = tables.window("2026-09-01", "2026-09-07")
    assert label_agreement_table(*tables.contingency(empty)).n == 0
    assert tables.pairwise(empty).with_ties is None


@pytest.mark.parametrize("seed", range(5))
def test_position_consistency_from_counts_summed_over_days(seed):
    rng = np.random.default_rng(seed)
    verdicts = ["A", "B", "tie", None, "odd"]
    frame = pl.DataFrame(
        {
            "day": rng.integers(0, 5, 300),
            "first": [verdicts[i] for i in rng.integers(0, 5, 300)],
            "swapped": [verdicts[i] for i in rng.integers(0, 5, 300)],
        }
    )
    days = [position_counts(part["first"], part["swapped"]) for _, part in frame.group_by("day")]
    summed = position_consistency_from_counts(*(sum(column) for column in zip(*days, strict=True)))
    assert summed == position_consistency(frame["first"], frame["swapped"])


# --------------------------------------------------------------------------- inter-annotator statistics from one coding


def _two_tasks(seed: int) -> pl.DataFrame:
    """A 1–5 rating task and a three-label classification, with missing labels and repeated annotations."""
    rng = np.random.default_rng(seed)
    frames = []
    for task, schema, labels in (
        ("quality", "rating", ["1", "2", "3", "4", "5"]),
        ("topic", "classification", ["x", "y", "z"]),
    ):
        n = 300
        label = [labels[i] if i < len(labels) else None for i in rng.integers(0, len(labels) + 1, n)]
        frames.append(
            pl.DataFrame(
                {
                    "task": task,
                    "criterion": task,
                    "schema": schema,
                    "item_id": [f"{task}-{i}" for i in rng.integers(0, 60, n)],
                    "annotator": [f"ann-{i}" for i in rng.integers(0, 5, n)],
                    "label": label,
                    "value": [float(x) if x is not None and schema == "rating" else None for x in label],
                }
            )
        )
    return pl.concat(frames)


def _inter_annotator_rows(annotations: pl.DataFrame, categories=None) -> dict[tuple, dict]:
    rows = Rows([])
    inter_annotator(annotations, rows, categories)
    return {(r["section"], r["task"], r["statistic"], r.get("subject"), r.get("reference")): r for r in rows.out}


@pytest.mark.parametrize("seed", range(6))
def test_inter_annotator_statistics_equal_the_peers_on_each_tasks_first_labels(seed):
    annotations = _two_tasks(seed)
    got = _inter_annotator_rows(annotations, {("topic", "topic"): ["x", "y", "z", "w"]})
    for task, levels, column, weightings in (
        ("quality", LEVELS, "value", (None, "linear", "quadratic")),
        ("topic", ("nominal",), "label", (None,)),
    ):
        part = annotations.filter(pl.col("task") == task)
        first = part.drop_nulls(column).unique(["item_id", "annotator"], keep="first", maintain_order=True)
        wide = first.pivot(on="annotator", index="item_id", values=column).sort("item_id")
        coders = sorted(c for c in wide.columns if c != "item_id")
        matrix = (
            wide.select(coders)
            .with_columns(
                pl.all().cast(pl.Float64)
                if column == "value"
                else pl.all().replace_strict({"x": 0.0, "y": 1.0, "z": 2.0})
            )
            .to_numpy()
            .T
        )
        for level in levels:
            expected = krippendorff.alpha(reliability_data=matrix, level_of_measurement=level)
            row = got["inter_annotator", task, f"krippendorff_alpha_{level}", "annotators", "annotators"]
            assert row["value"] == pytest.approx(expected, abs=1e-12)
        declared = None if column == "value" else ["x", "y", "z", "w"]
        counts = category_counts(part["item_id"], part[column], declared)
        for kappa in (fleiss_kappa(counts), randolph_kappa(counts)):
            row = got["inter_annotator", task, kappa.statistic, "annotators", "annotators"]
            assert (row["value"], row["n"], row["note"]) == (kappa.value, kappa.n, kappa.note)
        for a, b in itertools.combinations(coders, 2):
            pair = wide.select(a, b).drop_nulls()
            for weights in weightings:
                name = "cohen_kappa" if weights is None else f"cohen_kappa_{weights}"
                expected = cohen_kappa(pair[a], pair[b], weights=weights)
                row = got["inter_annotator", task, name, a, b]
                assert (row["n"], row["value"]) == (expected.n, pytest.approx(expected.value, abs=1e-12))
        quality = annotator_agreement(part)
        for row in quality.iter_rows(named=True):
            kappa = got["annotator", task, "quality_kappa", row["annotator"], "others_majority"]
            assert (kappa["n"], kappa["value"]) == (row["n"], row["quality_kappa"])


def test_an_annotators_label_after_a_missing_one_counts_in_their_pair_kappas():
    """Repeated (item, annotator) rows keep the first label, not the first row: as alpha and the quality
    score count it, so does Cohen's kappa between annotators."""
    annotations = pl.DataFrame(
        [("i1", "a", None), ("i1", "a", "yes"), ("i1", "b", "yes"), ("i2", "a", "no"), ("i2", "b", "no")],
        schema=["item_id", "annotator", "label"],
        orient="row",
    ).with_columns(
        task=pl.lit("t"), criterion=pl.lit("t"), schema=pl.lit("classification"), value=pl.lit(None, pl.Float64)
    )
    row = _inter_annotator_rows(annotations)["inter_annotator", "t", "cohen_kappa", "a", "b"]
    alpha = _inter_annotator_rows(annotations)[
        "inter_annotator", "t", "krippendorff_alpha_nominal", "annotators", "annotators"
    ]
    assert row["n"] == 2 and alpha["n"] == 4
