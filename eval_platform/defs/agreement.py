"""`agreement` and `ground_truth`: inter-annotator, judge-vs-human and judge-vs-judge agreement."""

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg
import polars as pl

from eval_platform.agreement import ANNOTATION_COLUMNS, compute
from eval_platform.agreement.assembly import unchecked_because
from eval_platform.agreement.judge_rows import ScoreSource
from eval_platform.agreement.judge_vs_human import latest_kappas
from eval_platform.agreement.out_of_core import OutOfCoreScores, open_scores
from eval_platform.annotation.config import AnnotationTaskError, load_annotation_tasks
from eval_platform.defs.annotations import human_annotations, imported_judgments
from eval_platform.defs.catalog import refresh
from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.out_of_core import reads_out_of_core
from eval_platform.placeholder_rows import mark_agreement, placeholder_days
from eval_platform.schemas import (
    HUMAN_ANNOTATION_SCHEMA,
    IMPORTED_JUDGMENT_SCHEMA,
    empty_frame,
)
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import (
    PARTITION_FILE,
    partition_files,
    read_partition,
    scan_parquet,
    write_partition,
)

SCORE_COLUMNS = [
    "evaluator",
    "date",
    "trace_id",
    "trace_id_b",
    "model",
    "sample",
    "role",
    "is_final",
    "status",
    "score",
    "raw_score",
    "label",
    "passed",
    "winner",
    "verdict_ab",
    "verdict_ba",
]


def scan_scores(root: DataRoot) -> dict[str, pl.LazyFrame]:
    """The judge_scores columns agreement needs, unread, one scan per evaluator over its own partitions:
    `compute` reads one evaluator's rows at a time and opens only its files (a filter on one scan of every
    file opens all of them, twice the time), so the whole table is never in memory at once. An evaluator
    without partitions has no scan (no rows)."""
    return {
        name: scan_parquet(root, files, hive_partitioning=False).select(SCORE_COLUMNS)
        for name, files in partition_files(root, "judge_scores", "evaluator").items()
    }


CATEGORICAL_ANNOTATION_COLUMNS = ["task", "criterion", "schema", "annotator"]


def read_annotations(root: DataRoot, lazy: bool = False) -> pl.DataFrame | pl.LazyFrame:
    """human_annotations, only the columns `compute` reads (`ANNOTATION_COLUMNS`; where each row came from is a
    third of the table's memory); a partition written before a column existed has it null. `lazy`: unread, so
    that `compute` reads each task's rows when it needs them (out of core: 10M annotations take 1.4 GB)."""
    schema = {c: HUMAN_ANNOTATION_SCHEMA[c] for c in ANNOTATION_COLUMNS}
    parts = ("human_annotations", PARTITION_FILE)
    store = root.store
    if store.schema(parts) is None:
        return empty_frame(schema).lazy() if lazy else empty_frame(schema)
    scan = scan_parquet(root, store.location(*parts), schema=schema, missing_columns="insert", extra_columns="ignore")
    # a text value takes 16 bytes a row (a view), a category 4: these columns repeat a few values over millions
    scan = scan.with_columns(pl.col(CATEGORICAL_ANNOTATION_COLUMNS).cast(pl.Categorical))
    return scan if lazy else scan.collect()


@contextmanager
def score_source(root: DataRoot, out_of_core: bool | None = None) -> Iterator[ScoreSource | OutOfCoreScores]:
    """What `compute` reads judge_scores from: one lazy scan per evaluator (`scan_scores`, in memory), or DuckDB out
    of core (`open_scores`) when `reads_out_of_core` (above 20M rows by default, or as `out_of_core` says)."""
    if reads_out_of_core(root, out_of_core):
        with open_scores(root) as scores:
            yield scores
    else:
        yield scan_scores(root)


def build_agreement(evaluators: dict[str, EvaluatorConfig], judge_scores: dg.AssetsDefinition):
    floors = {
        name: c.human_agreement.floor
        for name, c in evaluators.items()
        if c.human_agreement and c.human_agreement.floor is not None
    }

    @dg.asset(
        deps=[judge_scores, human_annotations, imported_judgments],
        automation_condition=REFRESH_AFTER_UPDATES,
        kinds={"polars", "parquet"},
        group_name="analysis",
        check_specs=[
            dg.AssetCheckSpec(
                "judges_agree_with_humans",
                asset="agreement",
                description="WARN when an evaluator's Cohen's kappa with the human majority over its latest trailing "
                "7-day window (FAILED verdicts left out) is below its human_agreement.floor.",
            )
        ],
    )
    def agreement(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        """Inter-annotator agreement (Krippendorff's alpha, Fleiss', Randolph's and Cohen's kappa, annotator
        quality), judge vs human (accuracy, macro P/R/F1, kappa, confusion; Spearman/Pearson/MAE; MT-Bench
        S1/S2), judge vs judge and position consistency, per evaluator and window (all, day, trailing 7 days).
        Items with a clear human majority go to `ground_truth`."""
        root = warehouse.root
        judgments = read_partition(root, "imported_judgments", {})
        out_of_core = reads_out_of_core(root)
        annotations = read_annotations(root, lazy=out_of_core)
        with score_source(root, out_of_core) as scores:
            rows, truth = compute(
                evaluators,
                scores,
                annotations,
                judgments if judgments is not None else empty_frame(IMPORTED_JUDGMENT_SCHEMA),
                categories=declared_categories(root.path),
            )
        rows = mark_agreement(rows, placeholder_days(root))  # a judge side of local/mock verdicts says so
        write_partition(root, "agreement", {}, rows)
        write_partition(root, "ground_truth", {}, truth)
        refresh(root)
        latest = latest_kappas(rows)
        below = latest.filter(pl.col("below_floor"))
        metadata: dict[str, Any] = {
            "rows": rows.height,
            "ground_truth_items": truth.height,
            "evaluators_checked": dg.MetadataValue.json(sorted(latest["subject"].unique().to_list())),
        }
        # "can this judge be trusted?" must not get an empty table (or only annotators' rows) with no word on why
        labels = annotations.lazy().select(pl.len()).collect().item()
        needs = unchecked_because(evaluators, labels, rows)
        if needs is not None:
            metadata["needs"] = needs
            context.log.warning(needs)
        yield dg.MaterializeResult(metadata=metadata)
        yield dg.AssetCheckResult(
            check_name="judges_agree_with_humans",
            passed=below.is_empty(),
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "floors": dg.MetadataValue.json(floors),
                "below_floor": dg.MetadataValue.json(
                    [
                        {k: row[k] for k in ("subject", "period_end", "value", "floor", "n")}
                        for row in below.iter_rows(named=True)
                    ]
                ),
            },
        )

    return agreement


def declared_categories(root: Path) -> dict[tuple[str, str], list[str]]:
    """(task, criterion) -> the labels tasks.yaml allows for each classification criterion that lists them
    (Randolph's kappa counts every category the annotators could choose). A broken file already failed
    `human_annotations`; here it only means no declared categories."""
    try:
        tasks_file = load_annotation_tasks(root, broken={}).declared().tasks_file
    except AnnotationTaskError:
        return {}
    if tasks_file is None:
        return {}
    return {
        (task, criterion): spec.allowed
        for task, task_spec in tasks_file.items()
        for criterion, spec in task_spec.criteria.items()
        if spec.schema_ == "classification" and spec.allowed is not None
    }
