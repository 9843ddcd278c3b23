"""`judge_vs_human`: an evaluator's (or an imported judge's) verdicts against the human majority, per period."""

from __future__ import annotations

import polars as pl

from eval_platform.agreement.humans import human_reference, only_task
from eval_platform.agreement.periods import (
    DailyScoreTables,
    DailyTables,
    in_window,
    period_windows,
    sorted_by_date,
)
from eval_platform.agreement.rows import Rows, label_rows, pairwise_rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import AGREEMENT_SCHEMA
from eval_platform.stats.judge_agreement import (
    label_agreement,
    label_agreement_table,
    pairwise_agreement,
    preference_labels,
    score_agreement,
)

PAIRWISE_LABELS = ["tie", "A", "B"]  # A: response1 (first in the annotation), B: response2


def pairwise_human_labels(reference: pl.DataFrame) -> pl.DataFrame:
    """Human majority in A/B/tie terms: 1 -> A (response1), 2 -> B (response2), 0 -> tie."""
    return reference.with_columns(preference_labels(reference["label"]).alias("human"))


def evaluator_pairwise_labels(scores: pl.DataFrame, reference: pl.DataFrame) -> pl.DataFrame:
    """An evaluator's final pairwise rows as item labels in the annotation's terms (A = response1).

    A pair judged with response2 as its A side has its winner mirrored. FAILED rows give a null verdict
    (left out, or a tie under PandaLM's convention). Columns: item_id, date, human, judge.
    """
    pairs = reference.select("item_id", "human", r1="response1_trace_id", r2="response2_trace_id")
    lookup = pl.concat(
        [
            pairs.select("item_id", "human", first="r1", second="r2", mirrored=pl.lit(False)),
            pairs.select("item_id", "human", first="r2", second="r1", mirrored=pl.lit(True)),
        ]
    )
    joined = scores.join(lookup, left_on=["trace_id", "trace_id_b"], right_on=["first", "second"], how="inner")
    winner = pl.when(pl.col("status") == "COMPLETED").then(pl.col("winner"))
    mirrored = winner.replace({"A": "B", "B": "A"})
    judge = pl.when(pl.col("mirrored")).then(mirrored).otherwise(winner)
    return joined.select("item_id", "date", "human", judge.alias("judge"))


def imported_pairwise_labels(judgments: pl.DataFrame, reference: pl.DataFrame) -> pl.DataFrame:
    """An imported judge's verdicts (PandaLM codes 1 / 2 / 0 or A / B / tie) beside the human majority."""
    frame = judgments.select("item_id", verdict="verdict").join(reference.select("item_id", "human"), on="item_id")
    return frame.with_columns(preference_labels(frame["verdict"]).alias("judge"), pl.lit(None, pl.String).alias("date"))


def _pairwise_stats(frame: pl.DataFrame, rows: Rows, base: dict) -> None:
    """Judge vs human (or judge vs judge) on A/B/tie labels, under both conventions."""
    for convention in ("failed_excluded", "unusable_as_tie"):
        judge = frame["judge"] if convention == "failed_excluded" else frame["judge"].fill_null("tie")
        labels = label_agreement(frame["human"], judge, labels=PAIRWISE_LABELS)
        pairwise_rows(labels, pairwise_agreement(frame["human"], judge), rows, {**base, "convention": convention})


def judge_vs_human(
    config: EvaluatorConfig,
    scores: pl.DataFrame,
    annotations: pl.DataFrame | pl.LazyFrame,
    rows: Rows,
    trailing_days: int,
    cache: dict | None = None,
) -> None:
    options = config.human_agreement
    if options is None:
        raise ValueError(f"evaluator {config.name} names no human_agreement task to compare its verdicts with")
    reference = human_reference(annotations, options.task, options.criterion, cache)
    final = scores.filter(pl.col("is_final"))
    base = {
        "section": "judge_vs_human",
        "task": options.task,
        "criterion": options.criterion,
        "subject": config.name,
        "reference": "human_majority",
        "floor": options.floor,
    }
    kind = config.judge_mode.agreement
    if kind == "preference":
        frame = evaluator_pairwise_labels(final, pairwise_human_labels(reference))
        if cache is not None:  # imported_vs_evaluators compares the same labels with the imported judges'
            cache["pairwise_labels", config.name] = frame
    elif kind == "scores":
        frame = final.join(reference.select("item_id", "value", "trace_id"), on="trace_id").select(
            "item_id",
            "date",
            pl.col("value").alias("human"),
            pl.when(pl.col("status") == "COMPLETED").then(pl.col("raw_score")).alias("judge"),
        )
    else:
        judge = pl.col(config.judge_mode.vote_column).cast(pl.String)  # a label, or passed as true / false
        # the judge's verdict named before the join: judge_scores has a `label` column of its own
        verdicts = final.select(
            "trace_id", "date", pl.when(pl.col("status") == "COMPLETED").then(judge.str.to_lowercase()).alias("judge")
        )
        human = reference.select("item_id", "trace_id", pl.col("label").str.to_lowercase().alias("human"))
        frame = verdicts.join(human, on="trace_id").select("item_id", "date", "human", "judge")
    if kind == "scores":  # from tables per day when the values are few, else from each window's rows
        daily_scores = DailyScoreTables(frame)
        by_date = None if daily_scores.fits else sorted_by_date(frame)
    if kind == "preference":  # label statistics from tables per day, under both conventions
        conventions = [
            ("failed_excluded", DailyTables(frame, frame["judge"])),
            ("unusable_as_tie", DailyTables(frame, frame["judge"].fill_null("tie"))),
        ]
    elif kind == "labels":
        tables = DailyTables(frame, frame["judge"])
    for start, end, fields in period_windows(frame["date"].unique().to_list(), trailing_days, base):
        if kind == "preference":
            for convention, daily in conventions:
                full = daily.window(start, end)
                labels = label_agreement_table(*daily.contingency(full, PAIRWISE_LABELS))
                pairwise_rows(labels, daily.pairwise(full), rows, {**fields, "convention": convention})
        elif kind == "scores":
            if by_date is None:  # the day tables fit
                result = daily_scores.agreement(start, end)
            else:
                part = frame if start is None else in_window(by_date, start, end)
                result = score_agreement(part["human"], part["judge"])
            fields["convention"] = "failed_excluded"
            rows.add("spearman", result.spearman, result.n, note=result.note, **fields)
            rows.add("pearson", result.pearson, result.n, note=result.note, **fields)
            rows.add("mae", result.mae, result.n, note=result.note, **fields)
        else:
            labels = label_agreement_table(*tables.contingency(tables.window(start, end)))
            label_rows(labels, rows, {**fields, "convention": "failed_excluded"})


def imported_vs_human(
    judgments: pl.DataFrame, annotations: pl.DataFrame | pl.LazyFrame, rows: Rows, cache: dict | None = None
) -> None:
    """Each imported judge against the human majority of its task (pairwise verdicts)."""
    for (source, task, criterion), part in judgments.group_by("source", "task", "criterion", maintain_order=True):
        task = task or only_task(annotations)
        if task is None:
            continue
        reference = pairwise_human_labels(human_reference(annotations, task, criterion, cache))
        frame = imported_pairwise_labels(part, reference)
        base = {
            "section": "judge_vs_human",
            "task": task,
            "criterion": criterion,
            "subject": source,
            "reference": "human_majority",
            "period": "all",
        }
        _pairwise_stats(frame, rows, base)


def latest_kappas(rows: pl.DataFrame) -> pl.DataFrame:
    """Per evaluator with a floor: Cohen's kappa with humans over the latest trailing window, judge
    verdicts that FAILED left out."""
    kappas = rows.filter(
        (pl.col("section") == "judge_vs_human")
        & (pl.col("statistic") == "cohen_kappa")
        & (pl.col("period") == "trailing")
        & (pl.col("convention") == "failed_excluded")
        & pl.col("floor").is_not_null()
    )
    return kappas.sort("period_end").group_by("subject").last().select(list(AGREEMENT_SCHEMA))
