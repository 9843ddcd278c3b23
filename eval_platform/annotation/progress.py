"""How far an annotation task is, how much its annotators agree so far, and the labels it has settled.

Input: annotation rows of the task, `human_annotations` columns (task, item_id, annotator, criterion, schema,
label, value, trace_id, annotated_at; `created_at` is read when `annotated_at` is absent) and the tool's time per
annotation: a `lead_time_s` column, else the `lead_time_s` key of the `metadata` JSON. A tool's lead time is per
annotation of an item (all its criteria at once), so it counts once per (item, annotator), not per criterion row.

Per criterion an annotator counts once per item: their first row (a ranking: their ranking, all its rows). A
ranking's label is the whole order, best first (`B > A > C`): two annotators agree on a ranking when they give the
same order. A rating agrees when the value is the same. A `text` criterion is counted (done, complete, time) but
never compared: free text has no agreement and no consensus.

- `progress(rows, config, items)`: ANNOTATION_PROGRESS_SCHEMA rows. Level `task` and level `annotator`, each for
  the whole item (criterion null: items done, items with N annotations, time spent) and per criterion (the same
  counts, and agreement so far). Task agreement is over the items with two or more annotators: Krippendorff's
  alpha (`stats.reliability`: nominal for a classification, ordinal for a rating, and for a ranking ordinal over
  each (item, candidate)'s ranks) and percent agreement (per item, the share of annotator pairs giving the same
  label; their mean). An annotator's agreement is with the majority of the others on the same items
  (`stats.annotators.annotator_agreement`: share and Cohen's kappa; items where the others tie are left out).
- `ground_truth(rows, config)`: per item and comparable criterion, the label that at least `consensus_threshold`
  of the item's annotators gave, when at least `annotations_per_item` annotators labelled it
  (`stats.annotators.clear_majority`). No row otherwise: an item without consensus is never given a guessed label.
- `open_items(rows, config)`: those items without consensus, each with the reason (too_few_annotations,
  below_threshold) and its split (label -> annotators).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import cast

import polars as pl

from eval_platform.annotation.config import AnnotationTaskConfig
from eval_platform.ingest.quarantine import utc_now
from eval_platform.schemas import (
    ANNOTATION_GROUND_TRUTH_SCHEMA,
    ANNOTATION_OPEN_ITEM_SCHEMA,
    ANNOTATION_PROGRESS_SCHEMA,
    UTC_TS,
    conform,
    empty_frame,
)
from eval_platform.stats.annotators import annotator_agreement, clear_majority, majority_labels
from eval_platform.stats.reliability import Level, krippendorff_alpha_long

RANK_SEPARATOR = " > "
ALPHA_LEVELS: dict[str, Level] = {"classification": "nominal", "rating": "ordinal", "ranking": "ordinal"}
_UNIT_SEPARATOR = "\x1f"  # between an item id and a candidate: a ranking's alpha unit


def annotation_rows(rows: pl.DataFrame, config: AnnotationTaskConfig) -> pl.DataFrame:
    """The task's rows with the columns the statistics read: item_id, annotator, criterion, schema (the task's
    declared one), label, value, trace_id, annotated_at, lead_time_s."""
    frame = rows.filter(pl.col("task") == config.name) if "task" in rows.columns else rows
    stamp = next((c for c in ("annotated_at", "created_at") if c in frame.columns), None)
    if "lead_time_s" in frame.columns:
        lead = pl.col("lead_time_s").cast(pl.Float64)
    elif "metadata" in frame.columns:
        lead = pl.col("metadata").str.json_path_match("$.lead_time_s").cast(pl.Float64, strict=False)
    else:
        lead = pl.lit(None, pl.Float64)
    if stamp is None:
        when = pl.lit(None, UTC_TS)
    elif frame.schema[stamp] == pl.String:  # a tool's ISO 8601 text
        when = pl.col(stamp).str.to_datetime(time_unit="us", time_zone="UTC", strict=False)
    else:
        when = pl.col(stamp).cast(UTC_TS)
    declared = {name: spec.schema_ for name, spec in config.criteria.items()}
    return frame.select(
        pl.col("item_id").cast(pl.String),
        pl.col("annotator").cast(pl.String),
        pl.col("criterion").cast(pl.String),
        pl.col("criterion").replace_strict(declared, default=None, return_dtype=pl.String).alias("schema"),
        pl.col("label").cast(pl.String),
        (pl.col("value") if "value" in frame.columns else pl.lit(None)).cast(pl.Float64).alias("value"),
        (pl.col("trace_id") if "trace_id" in frame.columns else pl.lit(None)).cast(pl.String).alias("trace_id"),
        when.alias("annotated_at"),
        lead.alias("lead_time_s"),
    ).filter(pl.col("schema").is_not_null() & pl.col("item_id").is_not_null() & pl.col("annotator").is_not_null())


def labels_per_annotator(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (item, annotator, criterion): the first label given (a ranking: its order, best first)."""
    ranked = frame.filter(pl.col("schema") == "ranking")
    others = frame.filter(pl.col("schema") != "ranking").unique(
        ["item_id", "annotator", "criterion"], keep="first", maintain_order=True
    )
    if ranked.is_empty():
        return others
    orders = (
        ranked.unique(["item_id", "annotator", "criterion", "label"], keep="first", maintain_order=True)
        .sort("value", "label")
        .group_by("item_id", "annotator", "criterion", maintain_order=True)
        .agg(
            pl.col("schema").first(),
            pl.col("label").str.join(RANK_SEPARATOR),
            pl.lit(None, pl.Float64).alias("value"),
            pl.col("trace_id").drop_nulls().first(),
            pl.col("annotated_at").min(),
            pl.col("lead_time_s").max(),
        )
    )
    return pl.concat([others, orders.select(others.columns)])


# ---- progress ----------------------------------------------------------------------------------------------


def progress(
    rows: pl.DataFrame,
    config: AnnotationTaskConfig,
    items: pl.DataFrame | None = None,
    *,
    now: datetime | None = None,
) -> pl.DataFrame:
    """ANNOTATION_PROGRESS_SCHEMA rows of one task (see the module doc). `items`: the task's
    annotation_task_items rows; with them, `items_total` is their count and annotations of other items (left
    from an earlier selection) are left out, and the note says how many."""
    frame = annotation_rows(rows, config)
    note = None
    if items is not None:
        current = items.filter(pl.col("task") == config.name) if "task" in items.columns else items
        outside = frame.join(current.select("item_id"), on="item_id", how="anti")
        if outside.height:
            note = f"{outside.select('item_id', 'annotator').n_unique()} annotations of items not in the task left out"
        frame = frame.join(current.select("item_id"), on="item_id", how="semi")
    n = config.annotations_per_item
    base = {
        "task": config.name,
        "items_total": None if items is None else int(current.height),
        "annotations_per_item": n,
    }
    out: list[dict] = []
    # the whole item: counts and time, for the task and each annotator
    whole = _with_annotators(frame)
    out.append({**base, "level": "task", **_counts(whole, n), **_time(whole), "note": note})
    for annotator in sorted(whole["annotator"].unique().to_list()):
        mine = whole.filter(pl.col("annotator") == annotator)
        out.append({**base, "level": "annotator", "annotator": annotator, **_counts(mine, n), **_time(mine)})
    # per criterion: counts and agreement so far
    labelled = labels_per_annotator(frame)
    for criterion, spec in config.criteria.items():
        part = labelled.filter(pl.col("criterion") == criterion)
        counted = _with_annotators(part)
        fields = {**base, "criterion": criterion, "schema": spec.schema_}
        task_row = {**fields, "level": "task", **_counts(counted, n)}
        if spec.schema_ == "text":
            task_row["note"] = "free text: not compared"
        else:
            task_row |= _task_agreement(frame.filter(pl.col("criterion") == criterion), part, spec.schema_)
        out.append(task_row)
        mates = _annotator_agreement(part) if spec.schema_ != "text" else {}
        for annotator in sorted(part["annotator"].unique().to_list()):
            mine = counted.filter(pl.col("annotator") == annotator)
            out.append(
                {**fields, "level": "annotator", "annotator": annotator, **_counts(mine, n), **mates.get(annotator, {})}
            )
    stamp = now or utc_now()
    full = [{**{name: row.get(name) for name in ANNOTATION_PROGRESS_SCHEMA}, "computed_at": stamp} for row in out]
    return pl.DataFrame(full, schema=ANNOTATION_PROGRESS_SCHEMA, orient="row")


def _with_annotators(frame: pl.DataFrame) -> pl.DataFrame:
    """One row per (item, annotator) with `annotators`: how many annotators the item has."""
    pairs = frame.group_by("item_id", "annotator").agg(
        pl.col("annotated_at").min().alias("first"),
        pl.col("annotated_at").max().alias("last"),
        pl.col("lead_time_s").max(),
    )
    return pairs.with_columns(pl.len().over("item_id").alias("annotators"))


def _counts(pairs: pl.DataFrame, n: int) -> dict:
    items = pairs.group_by("item_id").agg(pl.col("annotators").first())
    return {
        "items_done": items.height,
        "items_complete": int((items["annotators"] >= n).sum()),
        "annotations": pairs.height,
    }


def _time(pairs: pl.DataFrame) -> dict:
    lead = pairs["lead_time_s"].drop_nulls()
    return {
        "time_spent_s": float(lead.sum()) if lead.len() else None,
        # the median of a non-empty Float64 column without nulls is a float
        "median_lead_time_s": cast(float, lead.median()) if lead.len() else None,
        "first_annotated_at": pairs["first"].min(),
        "last_annotated_at": pairs["last"].max(),
    }


def _task_agreement(raw: pl.DataFrame, labelled: pl.DataFrame, schema: str) -> dict:
    """Alpha and percent agreement over the criterion's items with two or more annotators."""
    shared = labelled.filter(pl.len().over("item_id") >= 2)
    level = ALPHA_LEVELS[schema]
    result = {"items_compared": shared["item_id"].n_unique(), "alpha_level": level}
    if shared.is_empty():
        return result | {"note": "no item has two annotators yet"}
    if schema == "ranking":  # each candidate's rank, per item: units are (item, candidate)
        ranks = raw.join(shared.select("item_id", "annotator"), on=["item_id", "annotator"], how="semi").unique(
            ["item_id", "annotator", "label"], keep="first", maintain_order=True
        )
        units = ranks["item_id"] + _UNIT_SEPARATOR + ranks["label"]
        alpha = krippendorff_alpha_long(units, ranks["annotator"], ranks["value"], level)
    else:
        values = shared["value"] if schema == "rating" else shared["label"]
        alpha = krippendorff_alpha_long(shared["item_id"], shared["annotator"], values, level)
    votes, total = pl.col("len"), pl.col("len").sum()
    pairs_agreeing = (
        shared.group_by("item_id", "label")
        .len()
        .group_by("item_id")
        .agg(((votes * (votes - 1)).sum() / (total * (total - 1))).alias("share"))
    )
    return result | {
        "alpha": alpha.value,
        # the mean of a non-empty Float64 column (each item shared by two annotators or more: no null share)
        "percent_agreement": cast(float, pairs_agreeing["share"].mean()),
        "note": alpha.note,
    }


def _annotator_agreement(labelled: pl.DataFrame) -> dict[str, dict]:
    """Per annotator: agreement with the others' majority (`stats.annotators.annotator_agreement`)."""
    if labelled.is_empty():
        return {}
    table = annotator_agreement(labelled)
    return {
        row["annotator"]: {
            "items_compared": row["n"],
            "agreement_with_majority": row["agreement_with_majority"],
            "quality_kappa": row["quality_kappa"],
            "note": None if row["n"] else "no item shared with others who agree on a majority yet",
        }
        for row in table.iter_rows(named=True)
    }


# ---- ground truth --------------------------------------------------------------------------------------------


def _majorities(rows: pl.DataFrame, config: AnnotationTaskConfig) -> pl.DataFrame:
    """Per (criterion, item) of the comparable criteria: the majority label, votes, top_votes, consensus."""
    labelled = labels_per_annotator(annotation_rows(rows, config))
    frames = []
    for criterion in config.comparable_criteria:
        part = labelled.filter(pl.col("criterion") == criterion)
        if part.is_empty():
            continue
        majority = majority_labels(part)  # one row per annotator already: votes are annotators
        split = part.group_by("item_id", "label").len().sort("label")
        splits = split.group_by("item_id").agg(pl.struct("label", "len").alias("split"))
        trace = part.group_by("item_id").agg(pl.col("trace_id").drop_nulls().first())
        frames.append(
            majority.join(splits, on="item_id", how="left")
            .join(trace, on="item_id", how="left")
            .with_columns(
                pl.lit(criterion).alias("criterion"),
                pl.lit(config.criteria[criterion].schema_).alias("schema"),
            )
        )
    return pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()


def ground_truth(rows: pl.DataFrame, config: AnnotationTaskConfig, *, now: datetime | None = None) -> pl.DataFrame:
    """ANNOTATION_GROUND_TRUTH_SCHEMA: per item and criterion, the consensus label (see the module doc)."""
    majority = _majorities(rows, config)
    if majority.is_empty():
        return empty_frame(ANNOTATION_GROUND_TRUTH_SCHEMA)
    settled = clear_majority(majority, config.consensus_threshold, config.annotations_per_item)
    value = [
        _label_value(config, criterion, label)
        for criterion, label in zip(settled["criterion"], settled["label"], strict=True)
    ]
    settled = settled.with_columns(
        pl.Series("value", value, dtype=pl.Float64),
        pl.lit(config.name).alias("task"),
        pl.col("votes").alias("annotations"),
        pl.col("top_votes").alias("agreeing"),
        pl.lit(config.consensus_threshold).alias("threshold"),
        pl.lit(config.annotations_per_item).alias("annotations_per_item"),
        pl.lit(config.config_hash).alias("config_hash"),
        pl.lit(now or utc_now()).alias("computed_at"),
    )
    return conform(settled, ANNOTATION_GROUND_TRUTH_SCHEMA).sort("criterion", "item_id")


def _label_value(config: AnnotationTaskConfig, criterion: str, label: str) -> float | None:
    spec = config.criteria[criterion]
    if spec.schema_ == "rating":
        return float(label)
    if spec.schema_ == "classification":
        return spec.label_value(label)
    return None


def open_items(rows: pl.DataFrame, config: AnnotationTaskConfig) -> pl.DataFrame:
    """ANNOTATION_OPEN_ITEM_SCHEMA: the items and criteria labelled but without consensus, with their split."""
    majority = _majorities(rows, config)
    if majority.is_empty():
        return empty_frame(ANNOTATION_OPEN_ITEM_SCHEMA)
    settled = clear_majority(majority, config.consensus_threshold, config.annotations_per_item)
    unsettled = majority.join(settled.select("criterion", "item_id"), on=["criterion", "item_id"], how="anti")
    split = [json.dumps({s["label"]: s["len"] for s in cells}, sort_keys=True) for cells in unsettled["split"]]
    reason = pl.when(pl.col("votes") < config.annotations_per_item).then(pl.lit("too_few_annotations"))
    unsettled = unsettled.with_columns(
        pl.lit(config.name).alias("task"),
        reason.otherwise(pl.lit("below_threshold")).alias("reason"),
        pl.col("votes").alias("annotations"),
        pl.col("top_votes").alias("agreeing"),
        pl.Series("split", split, dtype=pl.String),
    )
    return conform(unsettled, ANNOTATION_OPEN_ITEM_SCHEMA).sort("criterion", "item_id")
