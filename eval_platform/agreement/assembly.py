"""`compute`: every section of the agreement table, each evaluator's rows read once, and the ground truth."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import partial

import polars as pl

from eval_platform.agreement.calibration import calibrated
from eval_platform.agreement.humans import human_reference, inter_annotator
from eval_platform.agreement.judge_rows import (
    JudgeVerdicts,
    ScoreSource,
    read_evaluator,
)
from eval_platform.agreement.judge_vs_human import imported_vs_human, judge_vs_human
from eval_platform.agreement.judge_vs_judge import (
    imported_vs_evaluators,
    judge_vs_judge,
)
from eval_platform.agreement.out_of_core import OutOfCoreScores
from eval_platform.agreement.periods import TRAILING_DAYS
from eval_platform.agreement.position import position, position_rows
from eval_platform.agreement.ranking import ranking_agreement
from eval_platform.agreement.rows import Rows
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import AGREEMENT_SCHEMA, GROUND_TRUTH_SCHEMA, conform
from eval_platform.stats.annotators import clear_majority, majority_labels

MIN_GROUND_TRUTH_CONSENSUS = 2 / 3
# The human_annotations columns `compute` reads (what the annotation is, not where it came from).
ANNOTATION_COLUMNS = [
    "task",
    "item_id",
    "annotator",
    "criterion",
    "schema",
    "label",
    "value",
    "trace_id",
    "response1_trace_id",
    "response2_trace_id",
    "metadata",
]


def compute(
    evaluators: dict[str, EvaluatorConfig],
    scores: ScoreSource | OutOfCoreScores,
    annotations: pl.DataFrame | pl.LazyFrame,
    judgments: pl.DataFrame,
    trailing_days: int = TRAILING_DAYS,
    categories: dict[tuple[str, str], list[str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The `agreement` rows and the `ground_truth` items; `categories` as in `inter_annotator`. `annotations` may be
    a lazy scan (`defs.agreement.read_annotations` out of core): each task's rows are then read when used, and
    the whole table is never held.

    `scores` may be a lazy scan, or one per evaluator (the asset passes those, `read_evaluator`): each
    evaluator's rows are read once, only the columns used, for all its statistics, and let go after but for
    the verdicts judge-vs-judge compares, so judge_scores is never held in memory whole (3.3 GB at 10M rows)."""
    rows = Rows([])
    cache: dict = {}  # majority labels, human references and pairwise item labels, computed once
    annotations = _comparable(annotations)
    inter_annotator(annotations, rows, categories, cache)
    verdicts: dict[str, JudgeVerdicts] = {}
    for name, config in sorted(evaluators.items()):
        if isinstance(scores, OutOfCoreScores):
            _evaluator_out_of_core(config, scores, annotations, rows, trailing_days, cache)
            continue
        own = read_evaluator(scores, name, config.mode)
        if config.human_agreement is not None and not own.is_empty():
            judge_vs_human(config, own, annotations, rows, trailing_days, cache)
            calibrated(config, own, annotations, rows, trailing_days, cache)
        if config.judge_mode.agreement == "preference" and not own.is_empty():
            position(config, own, rows, trailing_days)
        verdicts[name] = JudgeVerdicts.of(config.mode, own)
        del own
    if not judgments.is_empty() and annotations.lazy().select(pl.len()).collect().item():
        imported_vs_human(judgments, annotations, rows, cache)
        imported_vs_evaluators(evaluators, scores, judgments, annotations, rows, cache)
        ranking_agreement(annotations, judgments, rows)
    judge_vs_judge(evaluators, scores, rows, verdicts)  # out of core: from DuckDB's counts, `verdicts` unused
    frame = conform(pl.DataFrame(rows.out, infer_schema_length=None), AGREEMENT_SCHEMA).with_columns(
        pl.lit(datetime.now(UTC)).alias("computed_at"),
        ((pl.col("statistic") == "cohen_kappa") & (pl.col("value") < pl.col("floor"))).alias("below_floor"),
    )
    truth = []
    keys = annotations.lazy().select("task", "criterion").unique(maintain_order=True).collect()
    for task, criterion in keys.iter_rows():
        majority = cache.get(("majority", task, criterion))
        if majority is None:
            majority = majority_labels(
                annotations.lazy()
                .filter(pl.col("task").eq_missing(task) & pl.col("criterion").eq_missing(criterion))
                .collect()
            )
        truth.append(
            clear_majority(majority, MIN_GROUND_TRUTH_CONSENSUS).with_columns(
                pl.lit(task).alias("task"), pl.lit(criterion).alias("criterion")
            )
        )
    truth_frame = pl.concat(truth, how="diagonal_relaxed") if truth else pl.DataFrame()
    return frame, conform(truth_frame, GROUND_TRUTH_SCHEMA)


def unchecked_because(evaluators: dict[str, EvaluatorConfig], labels: int, rows: pl.DataFrame) -> str | None:
    """Why no evaluator has `judge_vs_human` rows in `rows` ("can this judge be trusted?" unanswered, the table empty
    or holding only annotators' or imported judges' rows), naming what that needs and which of it is missing:
    human labels (`labels` rows of human_annotations) and a `human_agreement:` block on an evaluator. None when an
    evaluator is compared with humans."""
    compared = rows.filter((pl.col("section") == "judge_vs_human") & pl.col("subject").is_in(list(evaluators)))
    if not compared.is_empty():
        return None
    needs = (
        "no evaluator is compared with human labels (judge_vs_human): that needs human labels in annotations/ "
        "and a `human_agreement:` block (task, criterion) on the evaluator"
    )
    missing = []
    if not labels:
        missing.append(
            "no human label: put annotation exports in annotations/ (their task declared in annotations/tasks.yaml) "
            "and materialize human_annotations"
        )
    with_block = sorted(name for name, config in evaluators.items() if config.human_agreement)
    if not with_block:
        missing.append("no evaluator has a `human_agreement:` block naming the annotation task and criterion")
    if not missing:
        missing.append(
            f"{labels} human label(s) and a block on {', '.join(with_block)}, but none of their verdicts is on a "
            "labelled item (materialize judge_scores for the days of the labelled traces; check the block's task)"
        )
    return f"{needs}; " + "; ".join(missing)


def _comparable(annotations: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame | pl.LazyFrame:
    """The annotations whose labels can agree: free-text (`text`) criteria are collected, never compared nor made
    ground truth. Filtered only when there are any, so the common case copies nothing."""
    text = pl.col("schema").eq_missing("text")
    if not annotations.lazy().filter(text).select(pl.len()).collect().item():
        return annotations
    return annotations.filter(~text)


def _evaluator_out_of_core(
    config: EvaluatorConfig,
    scores: OutOfCoreScores,
    annotations: pl.DataFrame | pl.LazyFrame,
    rows: Rows,
    trailing_days: int,
    cache: dict,
) -> None:
    """One evaluator's judge-vs-human, calibrated and position rows, as `compute` makes them in memory, from what
    DuckDB hands over: the rows whose trace the human reference has (the join in `judge_vs_human` keeps no other),
    the other traces' per-day moments (all the calibrated means need of them), and counts."""
    if config.name not in scores or not scores.has_rows(config.name):
        return
    if config.human_agreement is not None:
        options = config.human_agreement
        reference = human_reference(annotations, options.task, options.criterion, cache)
        traces = pl.concat(
            [reference[c] for c in ("trace_id", "response1_trace_id", "response2_trace_id") if c in reference.columns]
        )
        own = scores.rows_meeting(config.name, config.mode, traces)
        judge_vs_human(config, own, annotations, rows, trailing_days, cache)
        moments = partial(scores.daily_moments, config.name)  # the other traces' verdicts, as per-day moments
        calibrated(config, own, annotations, rows, trailing_days, cache, unlabelled_moments=moments)
    if config.judge_mode.agreement == "preference":
        position_rows(config, scores.position_table(config.name), scores.dates(config.name), rows, trailing_days)
