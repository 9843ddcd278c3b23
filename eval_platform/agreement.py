"""The `agreement` table: can this judge be trusted? Framework-free; the asset writes what `compute` returns.

One long table, one row per statistic:

- `inter_annotator`: per annotation task and criterion, Krippendorff's alpha (nominal for classification;
  nominal, ordinal, interval and ratio for ratings and ranks; missing ratings allowed), Fleiss' and
  Randolph's kappa, and per annotator pair Cohen's kappa (unweighted; also linear and quadratic for
  ratings and ranks). `annotator` rows: each annotator's agreement with the others' majority and quality
  score (kappa against that majority).
- `judge_vs_human`: an evaluator's final COMPLETED verdicts (or an imported judge's verdicts) against the
  human majority label (or mean rating) of the task its `human_agreement` names: accuracy, macro
  precision/recall/F1, Cohen's kappa and the confusion matrix for labels; Spearman, Pearson and MAE for
  scores; for pairwise judges, the MT-Bench S1 (ties kept) and S2 (ties left out) agreement.
- `judge_vs_judge`: the member models of a consensus evaluator against each other, evaluators of the same
  mode judging the same traces, and each evaluator against each imported judge of its task.
- `position_consistency`: for pairwise evaluators judged in both orders.
- `ranking`: when pairwise annotations and imported verdicts name their candidates (`candidate_a` /
  `candidate_b`), Bradley–Terry rankings of the candidates from human votes and from each judge, and the
  Pearson (LLMFAO's published method) and Spearman correlation of the ranks.

Periods (`period`): `all`, every `day` of judge_scores, and a `trailing` window of `trailing_days` days ending on
each day. A judge verdict the judge could not give (FAILED, or an unusable imported verdict) is left out
(`convention = failed_excluded`); pairwise agreement is also reported the way PandaLM counts it, with an
unusable verdict as a tie (`convention = unusable_as_tie`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import numpy as np
import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.modes import MODES, NUMERIC_MODES
from eval_platform.schemas import AGREEMENT_SCHEMA, GROUND_TRUTH_SCHEMA, JUDGE_SCORE_SCHEMA, conform, empty_frame
from eval_platform.stats.annotators import (
    CodedAnnotations,
    annotator_agreement_coded,
    annotator_pair_tables,
    clear_majority,
    majority_labels,
    majority_labels_coded,
)
from eval_platform.stats.judge_agreement import (
    MAX_TABLE_CELLS,
    label_agreement,
    label_agreement_table,
    label_table,
    pairwise_agreement,
    pairwise_agreement_counts,
    position_consistency,
    position_consistency_from_counts,
    position_counts,
    preference_labels,
    score_agreement,
    score_agreement_by_counts,
    score_agreement_table,
)
from eval_platform.stats._labels import encode
from eval_platform.stats.kappa import (
    category_counts_coded,
    cohen_kappa_table,
    fleiss_kappa,
    randolph_kappa,
)
from eval_platform.stats.ranking import BradleyTerry, bradley_terry
from eval_platform.stats.reliability import krippendorff_alphas_coded
from eval_platform.stats.results import interpret_alpha, interpret_kappa

ORDERED_SCHEMAS = {"rating", "ranking"}
PAIRWISE_LABELS = ["tie", "A", "B"]  # A: response1 (first in the annotation), B: response2
MIN_GROUND_TRUTH_CONSENSUS = 2 / 3
TRAILING_DAYS = 7


@dataclass
class _Rows:
    """Accumulates agreement rows sharing some fields."""

    out: list[dict]

    def add(self, statistic: str, value, n: int, **fields) -> None:
        interpretation = fields.pop("interpretation", None)
        if interpretation is None and value is not None:
            if "alpha" in statistic:
                interpretation = interpret_alpha(value)
            elif "kappa" in statistic:
                interpretation = interpret_kappa(value)
        self.out.append({"statistic": statistic, "value": value, "n": n, "interpretation": interpretation, **fields})


def _task_key(annotations: pl.DataFrame) -> list[tuple[str, str, str]]:
    keys = annotations.lazy().select("task", "criterion", "schema").unique().sort("task", "criterion").collect()
    return [tuple(row) for row in keys.iter_rows()]


# ------------------------------------------------------------------------------------------ humans


def inter_annotator(annotations: pl.DataFrame, rows: _Rows, categories: dict | None = None, cache: dict | None = None) -> None:
    """`categories`: (task, criterion) -> the labels declared for a classification (tasks.yaml). Randolph's
    kappa takes chance agreement as 1 / number of categories the annotators could choose, so a declared label
    nobody used still counts. `cache` (see `human_reference`) keeps each task's majority labels.

    Each task's items, annotators and labels (and a rating's values) are coded to integers once, and every
    statistic below is computed from those codes."""
    for task, criterion, schema in _task_key(annotations):
        part = annotations.filter((pl.col("task") == task) & (pl.col("criterion") == criterion))
        base = {"section": "inter_annotator", "task": task, "criterion": criterion, "period": "all"}
        ordered = schema in ORDERED_SCHEMAS
        labelled = CodedAnnotations.of_frame(part)
        # ratings and ranks are compared on their numeric value, classifications on their label
        valued = labelled.relabelled(part["value"]) if ordered else labelled
        levels = ("nominal", "ordinal", "interval", "ratio") if ordered else ("nominal",)
        values = valued.label_names.to_numpy()
        alphas = krippendorff_alphas_coded(valued.items, valued.annotators, valued.labels, values, list(levels))
        for alpha in alphas:  # one coincidence matrix for every level
            rows.add(alpha.statistic, alpha.value, alpha.n, note=alpha.note, subject="annotators",
                     reference="annotators", **base)
        declared = None if ordered else (categories or {}).get((task, criterion))
        counts = category_counts_coded(valued.items, valued.labels, values, declared)
        for kappa in (fleiss_kappa(counts), randolph_kappa(counts)):
            rows.add(kappa.statistic, kappa.value, kappa.n, note=kappa.note, subject="annotators",
                     reference="annotators", **base)
        majority = majority_labels_coded(labelled)
        if cache is not None and task is not None and criterion is not None:
            cache["majority", task, criterion] = majority
        label_counts = dict(majority.group_by("label").len().sort("label").iter_rows())
        rows.add("items_with_majority", float(majority["label"].is_not_null().sum()), majority.height,
                 subject="annotators", reference="annotators",
                 details=json.dumps({"majority_label_counts": {str(k): v for k, v in label_counts.items()}}), **base)
        _annotator_pairs(valued, ordered, rows, base)
        for row in annotator_agreement_coded(labelled).iter_rows(named=True):
            fields = {**base, "section": "annotator", "subject": row["annotator"], "reference": "others_majority"}
            rows.add("agreement_with_majority", row["agreement_with_majority"], row["n"], **fields)
            rows.add("quality_kappa", row["quality_kappa"], row["n"], **fields)


def _annotator_pairs(coded: CodedAnnotations, ordered: bool, rows: _Rows, base: dict) -> None:
    """Cohen's kappa for every pair of annotators sharing at least one item (over the items they share)."""
    weightings = (None, "linear", "quadratic") if ordered else (None,)
    for a, b, table, _ in annotator_pair_tables(coded):  # one table for the three weightings
        for weights in weightings:
            kappa = cohen_kappa_table(table, weights=weights)
            name = "cohen_kappa" if weights is None else f"cohen_kappa_{weights}"
            rows.add(name, kappa.value, kappa.n, note=kappa.note, subject=a, reference=b, **base)


def human_reference(annotations: pl.DataFrame, task: str, criterion: str | None, cache: dict | None = None) -> pl.DataFrame:
    """Per item: the majority `label`, mean `value`, and (pairwise tasks) the two responses' trace ids.

    `cache`, one dict per `compute`: each reference is computed once for all the judges of its task, from the
    majority labels `inter_annotator` already computed when there are any."""
    cache = {} if cache is None else cache
    if ("reference", task, criterion) in cache:
        return cache["reference", task, criterion]
    part = annotations.filter(pl.col("task") == task)
    if criterion is not None:
        part = part.filter(pl.col("criterion") == criterion)
    majority = cache.get(("majority", task, criterion)) if criterion is not None else None
    majority = (majority if majority is not None else majority_labels(part)).select("item_id", "label")
    extra = part.group_by("item_id").agg(
        pl.col("value").mean().alias("value"),
        pl.col("trace_id").drop_nulls().first(),
        pl.col("response1_trace_id").drop_nulls().first(),
        pl.col("response2_trace_id").drop_nulls().first(),
    )
    cache["reference", task, criterion] = majority.join(extra, on="item_id", how="left")
    return cache["reference", task, criterion]


# ------------------------------------------------------------------------------------------ judges


def _pairwise_human_labels(reference: pl.DataFrame) -> pl.DataFrame:
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


def _pairwise_stats(frame: pl.DataFrame, rows: _Rows, base: dict) -> None:
    """Judge vs human (or judge vs judge) on A/B/tie labels, under both conventions."""
    for convention in ("failed_excluded", "unusable_as_tie"):
        judge = frame["judge"] if convention == "failed_excluded" else frame["judge"].fill_null("tie")
        labels = label_agreement(frame["human"], judge, labels=PAIRWISE_LABELS)
        _pairwise_rows(labels, pairwise_agreement(frame["human"], judge), rows, {**base, "convention": convention})


def _pairwise_rows(labels, s, rows: _Rows, fields: dict) -> None:
    _label_rows(labels, rows, fields)
    rows.add("agreement_with_ties_s1", s.with_ties, s.n_with_ties, note=s.note, **fields)
    rows.add("agreement_without_ties_s2", s.without_ties, s.n_without_ties, note=s.note, **fields)


class _DailyTables:
    """Per day, the counts of every (human, judge) pair of values, missing ones included, so that a window's
    label statistics come from the sum of its days' tables: the same counts as from the window's rows, without
    a pass over up to seven days of rows for each of the 61 windows."""

    def __init__(self, frame: pl.DataFrame, judge: pl.Series):
        (human_codes, judge_codes), self.categories = encode(frame["human"], judge)
        [day_codes], days = encode(frame["date"])
        k = self.categories.size + 1  # the last row and column count missing values
        cell = np.where(human_codes < 0, k - 1, human_codes) * k + np.where(judge_codes < 0, k - 1, judge_codes)
        dated = day_codes >= 0
        self.total = np.bincount(cell, minlength=k * k).reshape(k, k)  # every row, dated or not
        per_day = np.bincount(day_codes[dated] * k * k + cell[dated], minlength=days.size * k * k)
        self.days = dict(zip(days.tolist(), per_day.reshape(days.size, k, k)))

    def window(self, start: str | None, end: str | None) -> np.ndarray:
        if start is None:
            return self.total
        k = self.categories.size + 1
        return sum((t for day, t in self.days.items() if start <= day <= end), np.zeros((k, k), dtype=np.int64))

    def contingency(self, full: np.ndarray, labels=None) -> tuple[np.ndarray, tuple]:
        """What `contingency_table` gives on the rows counted in `full`: the categories seen on either side
        (or `labels`, in their order), rows human."""
        k = self.categories.size
        if labels is None:
            seen = np.flatnonzero((full[:k, :].sum(axis=1) > 0) | (full[:, :k].sum(axis=0) > 0))
            return full[np.ix_(seen, seen)], tuple(self.categories[seen].tolist())
        position = {value: i for i, value in enumerate(self.categories.tolist())}
        index = [position.get(label, -1) for label in labels]
        padded = np.zeros((k + 1, k + 1), dtype=full.dtype)
        padded[:k, :k] = full[:k, :k]  # the last row and column of `padded` are zeros, for labels never seen
        return padded[np.ix_(index, index)], tuple(labels)

    def pairwise(self, full: np.ndarray, tie: str = "tie"):
        """`pairwise_agreement` on the rows counted in `full`."""
        k = self.categories.size
        both = full[:k, :k]
        decisive = [i for i, value in enumerate(self.categories.tolist()) if value != tie]
        kept = both[np.ix_(decisive, decisive)]
        return pairwise_agreement_counts(int(both.sum()), int(np.trace(both)), int(kept.sum()), int(np.trace(kept)))


class _DailyScoreTables:
    """Per day, the count of every (human value, judge value) pair of the rows with both, so that a window's
    Spearman, Pearson and MAE come from the sum of its days' tables (`score_agreement_table`) instead of ranking
    each of the 61 windows' rows. Only when both sides take few values (`fits`: ratings, scores on a scale);
    otherwise the windows are ranked from their rows."""

    def __init__(self, frame: pl.DataFrame):
        sides = frame.select("date", *(pl.col(c).cast(pl.Float64).fill_nan(None) for c in ("human", "judge"))).drop_nulls(["human", "judge"])
        human, judge = sides["human"].to_numpy(), sides["judge"].to_numpy()
        self.human_values, self.judge_values = (np.sort(sides[c].unique().to_numpy()) for c in ("human", "judge"))
        self.fits = self.human_values.size * self.judge_values.size <= MAX_TABLE_CELLS
        if not self.fits:
            return
        shape = (self.human_values.size, self.judge_values.size)
        cell = np.searchsorted(self.human_values, human) * shape[1] + np.searchsorted(self.judge_values, judge)
        [day_codes], days = encode(sides["date"])
        dated = day_codes >= 0
        size = shape[0] * shape[1]
        self.total = np.bincount(cell, minlength=size).reshape(shape)  # every row, dated or not
        per_day = np.bincount(day_codes[dated] * size + cell[dated], minlength=days.size * size)
        self.days = dict(zip(days.tolist(), per_day.reshape(days.size, *shape)))

    def window(self, start: str | None, end: str | None) -> np.ndarray:
        if start is None:
            return self.total
        return sum((t for day, t in self.days.items() if start <= day <= end), np.zeros_like(self.total))

    def agreement(self, start: str | None, end: str | None):
        return score_agreement_table(self.window(start, end), self.human_values, self.judge_values)


def _label_rows(labels, rows: _Rows, fields: dict) -> None:
    details = json.dumps({"labels": [str(v) for v in labels.labels], "confusion": labels.confusion})
    rows.add("accuracy", labels.accuracy, labels.n, note=labels.note, **fields)
    rows.add("macro_precision", labels.precision, labels.n, **fields)
    rows.add("macro_recall", labels.recall, labels.n, **fields)
    rows.add("macro_f1", labels.f1, labels.n, **fields)
    rows.add("cohen_kappa", labels.kappa.value, labels.n, note=labels.kappa.note, details=details, **fields)


def _windows(dates: list[str], trailing_days: int) -> list[tuple[str, str | None, str | None]]:
    """(window, start, end): all, each day, and the trailing window ending on each day."""
    windows: list[tuple[str, str | None, str | None]] = [("all", None, None)]
    for day in sorted(set(dates)):
        start = (date.fromisoformat(day) - timedelta(days=trailing_days - 1)).isoformat()
        windows += [("day", day, day), ("trailing", start, day)]
    return windows


def _by_date(frame: pl.DataFrame) -> pl.DataFrame:
    """The frame sorted by date, rows of a day in their order: each window is then a slice (`_in_window`)."""
    return frame.sort("date", maintain_order=True, nulls_last=True)


def _in_window(frame: pl.DataFrame, start: str | None, end: str | None) -> pl.DataFrame:
    """The rows of a `_by_date` frame dated start..end (a slice, not a filter: 61 windows of millions of rows)."""
    if start is None:
        return frame
    dates = frame["date"]
    dated = dates.len() - dates.null_count()
    first = int(dates.head(dated).search_sorted(start, side="left"))
    last = int(dates.head(dated).search_sorted(end, side="right"))
    return frame.slice(first, max(last - first, 0))


def judge_vs_human(
    config: EvaluatorConfig, scores: pl.DataFrame, annotations: pl.DataFrame, rows: _Rows, trailing_days: int,
    cache: dict | None = None,
) -> None:
    options = config.human_agreement
    reference = human_reference(annotations, options.task, options.criterion, cache)
    final = scores.filter(pl.col("is_final"))
    base = {
        "section": "judge_vs_human", "task": options.task, "criterion": options.criterion,
        "subject": config.name, "reference": "human_majority", "floor": options.floor,
    }
    if config.mode == "pairwise":
        frame = evaluator_pairwise_labels(final, _pairwise_human_labels(reference))
        if cache is not None:  # imported_vs_evaluators compares the same labels with the imported judges'
            cache["pairwise_labels", config.name] = frame
    elif config.mode in NUMERIC_MODES:
        frame = final.join(reference.select("item_id", "value", "trace_id"), on="trace_id").select(
            "item_id", "date", pl.col("value").alias("human"),
            pl.when(pl.col("status") == "COMPLETED").then(pl.col("raw_score")).alias("judge"),
        )
    else:
        judge = pl.col("label") if config.mode == "categorical" else pl.col("passed").cast(pl.String)
        # the judge's verdict named before the join: judge_scores has a `label` column of its own
        verdicts = final.select("trace_id", "date", pl.when(pl.col("status") == "COMPLETED").then(judge.str.to_lowercase()).alias("judge"))
        human = reference.select("item_id", "trace_id", pl.col("label").str.to_lowercase().alias("human"))
        frame = verdicts.join(human, on="trace_id").select("item_id", "date", "human", "judge")
    if config.mode in NUMERIC_MODES:  # from tables per day when the values are few, else from each window's rows
        daily_scores = _DailyScoreTables(frame)
        by_date = None if daily_scores.fits else _by_date(frame)
    if config.mode == "pairwise":  # label statistics from tables per day, under both conventions
        conventions = [("failed_excluded", _DailyTables(frame, frame["judge"])),
                       ("unusable_as_tie", _DailyTables(frame, frame["judge"].fill_null("tie")))]
    elif config.mode not in NUMERIC_MODES:
        tables = _DailyTables(frame, frame["judge"])
    for window, start, end in _windows(frame["date"].unique().to_list(), trailing_days):
        fields = {**base, "period": window, "period_start": start, "period_end": end}
        if config.mode == "pairwise":
            for convention, daily in conventions:
                full = daily.window(start, end)
                labels = label_agreement_table(*daily.contingency(full, PAIRWISE_LABELS))
                _pairwise_rows(labels, daily.pairwise(full), rows, {**fields, "convention": convention})
        elif config.mode in NUMERIC_MODES:
            if daily_scores.fits:
                result = daily_scores.agreement(start, end)
            else:
                part = frame if start is None else _in_window(by_date, start, end)
                result = score_agreement(part["human"], part["judge"])
            fields["convention"] = "failed_excluded"
            rows.add("spearman", result.spearman, result.n, note=result.note, **fields)
            rows.add("pearson", result.pearson, result.n, note=result.note, **fields)
            rows.add("mae", result.mae, result.n, note=result.note, **fields)
        else:
            labels = label_agreement_table(*tables.contingency(tables.window(start, end)))
            _label_rows(labels, rows, {**fields, "convention": "failed_excluded"})


def imported_vs_human(judgments: pl.DataFrame, annotations: pl.DataFrame, rows: _Rows, cache: dict | None = None) -> None:
    """Each imported judge against the human majority of its task (pairwise verdicts)."""
    for (source, task, criterion), part in judgments.group_by("source", "task", "criterion", maintain_order=True):
        task = task or _only_task(annotations)
        if task is None:
            continue
        reference = _pairwise_human_labels(human_reference(annotations, task, criterion, cache))
        frame = imported_pairwise_labels(part, reference)
        base = {"section": "judge_vs_human", "task": task, "criterion": criterion, "subject": source,
                "reference": "human_majority", "period": "all"}
        _pairwise_stats(frame, rows, base)


def _only_task(annotations: pl.DataFrame) -> str | None:
    tasks = annotations["task"].unique().to_list()
    return tasks[0] if len(tasks) == 1 else None


def position(config: EvaluatorConfig, scores: pl.DataFrame, rows: _Rows, trailing_days: int) -> None:
    both = scores.filter(pl.col("is_final") & pl.col("verdict_ab").is_not_null() & pl.col("verdict_ba").is_not_null())
    mirrored = pl.col("verdict_ba").replace({"A": "B", "B": "A"})  # back to presentation terms
    frame = both.select("date", "verdict_ab", mirrored.alias("shown_swapped"))
    # Counts per day, summed over each window's days: 61 windows cost 30 days' counts instead of 61 passes.
    days = {day: position_counts(part["verdict_ab"], part["shown_swapped"])
            for (day,), part in frame.group_by("date") if day is not None}
    for window, start, end in _windows(scores["date"].unique().to_list(), trailing_days):
        if start is None:
            result = position_consistency(frame["verdict_ab"], frame["shown_swapped"])
        else:
            counts = [c for day, c in days.items() if start <= day <= end]
            result = position_consistency_from_counts(*(sum(column) for column in zip((0, 0, 0), *counts)))
        rows.add("position_consistency", result.consistency, result.n, note=result.note,
                 section="position_consistency", subject=config.name, reference="swapped_order",
                 period=window, period_start=start, period_end=end,
                 details=json.dumps({"inconsistent": result.inconsistent, "first_position_share": result.first_position_share}))


# ------------------------------------------------------------------------------------------ judge rows

SLOT = ["trace_id", "trace_id_b"]  # what a verdict is about: a trace, or a pair of traces (B side; null for one trace)
ScoreSource = pl.DataFrame | pl.LazyFrame | Mapping[str, pl.LazyFrame]


def _score_columns(mode: str) -> list[str]:
    """The judge_scores columns the agreement statistics read for an evaluator of this mode."""
    judged = MODES[mode].vote_column
    extra = ["score", "raw_score"] if mode in NUMERIC_MODES else ["verdict_ab", "verdict_ba"] if mode == "pairwise" else []
    return ["date", *SLOT, "role", "model", "sample", "is_final", "status", *dict.fromkeys([judged, *extra])]


def read_evaluator(scores: ScoreSource, name: str, mode: str) -> pl.DataFrame:
    """One evaluator's judge_scores rows, only the columns `_score_columns` names. `scores`: every row (a frame or
    a lazy scan, filtered here), or one lazy scan per evaluator (`defs.agreement.scan_scores`: only that
    evaluator's partition files are opened)."""
    columns = _score_columns(mode)
    if isinstance(scores, Mapping):
        if name not in scores:
            return empty_frame(JUDGE_SCORE_SCHEMA).select(columns)
        scores = scores[name]
    return scores.lazy().filter(pl.col("evaluator") == name).select(columns).collect()


def _keyed(rows: pl.LazyFrame, value: str, *extra: str) -> pl.LazyFrame:
    """(key, trace_id, trace_id_b, v): `key` is the 64-bit hash of the slot, so that joins are on one integer
    column instead of two text ones; `_join_slots` checks the ids themselves."""
    return rows.select(pl.struct(*SLOT).hash().alias("key"), *SLOT, pl.col(value).alias("v"), *extra)


ROW_BITS = 32  # the low bits of a sorted key that carry row numbers (the same in every frame: keys must match)


def _sorted_by_key(frame: pl.DataFrame) -> pl.DataFrame:
    """A `_keyed` frame sorted by its key, with the key's low `ROW_BITS` bits cleared, for merge joins of sorted
    keys (a tenth of the time of a hash join). The row numbers ride in the cleared bits through numpy's sort of
    the keys (several times faster than an argsort), which then gives the order of the rows. Keys of 32 bits
    make some slots share one (about a hundred in a million); `_join_slots` tells them apart."""
    rows = np.uint64((1 << ROW_BITS) - 1)
    if frame.height > rows:
        raise ValueError(f"{frame.height} rows of one evaluator: more than 2**{ROW_BITS} cannot be sorted by key")
    packed = np.sort((frame["key"].to_numpy() & ~rows) | np.arange(frame.height, dtype=np.uint64))
    order = pl.Series(packed & rows).cast(pl.UInt32 if frame.height <= np.iinfo(np.uint32).max else pl.UInt64)
    # one chunk first: gathering from the chunks of 30 day files costs four times as much
    return frame.drop("key").rechunk()[order].with_columns(pl.Series("key", packed & ~rows).set_sorted())


def _join_slots(left: pl.DataFrame, right: pl.DataFrame) -> pl.DataFrame:
    """The inner join of two `_sorted_by_key` frames on their slots (nulls equal), as columns a and b: every pair
    of rows with the same (trace_id, trace_id_b). Joined on the key, then the rows whose ids differ (slots
    sharing a key) are dropped, so the result is that of a join on the ids, in a tenth of the time."""
    both = left.rename({"v": "a"}).join(right.rename({"v": "b", "trace_id": "t", "trace_id_b": "tb"}), on="key")
    same = pl.col("trace_id").eq_missing(pl.col("t")) & pl.col("trace_id_b").eq_missing(pl.col("tb"))
    return both.filter(same).select("a", "b")


def _first_per_slot(frame: pl.DataFrame) -> pl.DataFrame:
    """The first row of each slot, in row order (what a pivot's `first` takes): the frame itself when its keys
    are distinct (then so are its slots), which numpy's sort of the keys tells in a few milliseconds."""
    keys = np.sort(frame["key"].to_numpy())
    if not (keys[1:] == keys[:-1]).any():
        return frame
    return frame.unique(SLOT, keep="first", maintain_order=True)


@dataclass
class JudgeVerdicts:
    """What judge-vs-judge needs of one evaluator's rows, kept after its other statistics let the rows go:
    `final`, its final COMPLETED verdicts (`_keyed`: on score for numeric modes, on the vote column for
    labelled ones); `members`, per member model of a consensus, its first COMPLETED sample-0 verdict of each slot
    (on raw_score or the vote column)."""

    final: pl.DataFrame
    members: dict[str, pl.DataFrame]

    @classmethod
    def of(cls, mode: str, rows: pl.DataFrame) -> JudgeVerdicts:
        judged = MODES[mode].vote_column if MODES[mode].labelled else None
        completed = rows.lazy().filter(pl.col("status") == "COMPLETED")  # lazy: only the columns kept are filtered
        final = _keyed(completed.filter(pl.col("is_final")), judged or "score")
        sampled = _keyed(completed.filter((pl.col("role") == "member") & (pl.col("sample") == 0)), judged or "raw_score", "model")
        final, sampled = pl.collect_all([final, sampled])
        members = {}  # a filter per model: a tenth of the time of partition_by on millions of rows
        for model in sampled["model"].unique(maintain_order=True).to_list():
            part = sampled.filter(pl.col("model").eq_missing(model)).drop("model")
            members["null" if model is None else model] = _sorted_by_key(_first_per_slot(part))
        return cls(_sorted_by_key(final), members)


def judge_vs_judge(
    evaluators: dict[str, EvaluatorConfig], scores: ScoreSource | None, rows: _Rows,
    verdicts: dict[str, JudgeVerdicts] | None = None,
) -> None:
    """Members of a consensus evaluator against each other, and same-mode evaluators on the same slots.

    `verdicts`: each evaluator's `JudgeVerdicts` when `compute` has them from reading its rows for the other
    sections; otherwise each evaluator is read from `scores` once."""
    if verdicts is None:
        verdicts = {name: JudgeVerdicts.of(c.mode, read_evaluator(scores, name, c.mode)) for name, c in evaluators.items()}
    for name, config in evaluators.items():
        members = verdicts[name].members
        for a, b in itertools.combinations(sorted(members), 2):
            both = _join_slots(members[a], members[b])
            _compare(config.mode, both["a"], both["b"], rows, {"section": "judge_vs_judge", "subject": f"{name}:{a}",
                     "reference": f"{name}:{b}", "period": "all"})
    for (a, ca), (b, cb) in itertools.combinations(sorted(evaluators.items()), 2):
        if ca.mode != cb.mode:
            continue
        both = _join_slots(verdicts[a].final, verdicts[b].final)
        if both.height:
            _compare(ca.mode, both["a"], both["b"], rows, {"section": "judge_vs_judge", "subject": a, "reference": b, "period": "all"})


def _compare(mode: str, a: pl.Series, b: pl.Series, rows: _Rows, fields: dict) -> None:
    if mode in NUMERIC_MODES:
        result = score_agreement_by_counts(a, b)
        rows.add("spearman", result.spearman, result.n, note=result.note, **fields)
        rows.add("pearson", result.pearson, result.n, note=result.note, **fields)
        rows.add("mae", result.mae, result.n, note=result.note, **fields)
        return
    kappa = cohen_kappa_table(label_table(a, b)[0])  # = cohen_kappa(a.cast(pl.String), b.cast(pl.String))
    rows.add("cohen_kappa", kappa.value, kappa.n, note=kappa.note, **fields)
    if mode == "pairwise":
        s = pairwise_agreement(a, b)
        rows.add("agreement_with_ties_s1", s.with_ties, s.n_with_ties, note=s.note, **fields)
        rows.add("agreement_without_ties_s2", s.without_ties, s.n_without_ties, note=s.note, **fields)


def imported_vs_evaluators(
    evaluators: dict[str, EvaluatorConfig], scores: ScoreSource, judgments: pl.DataFrame,
    annotations: pl.DataFrame, rows: _Rows, cache: dict | None = None,
) -> None:
    """Each pairwise evaluator with a human task against each imported judge of that task (its item labels from
    `cache` when `judge_vs_human` computed them, else from its rows in `scores`)."""
    cache = {} if cache is None else cache
    for name, config in evaluators.items():
        options = config.human_agreement
        if config.mode != "pairwise" or options is None:
            continue
        reference = _pairwise_human_labels(human_reference(annotations, options.task, options.criterion, cache))
        ours = cache.get(("pairwise_labels", name))
        if ours is None:
            final = read_evaluator(scores, name, config.mode).filter(pl.col("is_final"))
            ours = evaluator_pairwise_labels(final, reference)
        for source, part in judgments.group_by("source", maintain_order=True):
            theirs = imported_pairwise_labels(part, reference).select("item_id", theirs="judge")
            both = ours.join(theirs, on="item_id")
            _compare("pairwise", both["judge"], both["theirs"], rows, {
                "section": "judge_vs_judge", "task": options.task, "subject": name, "reference": source[0],
                "period": "all", "convention": "failed_excluded"})


# ------------------------------------------------------------------------------------------ rankings

HUMAN_VOTES = "human_votes"
CANDIDATE_FIELDS = ("candidate_a", "candidate_b")  # metadata naming the compared models: A (left, first) and B


def _named_comparisons(frame: pl.DataFrame, verdict: str) -> pl.DataFrame:
    """The rows with `a`, `b` (the candidates their metadata names, else null) and `winner` (left | right |
    tie for A | B | tie; null when unusable), the terms `bradley_terry` takes."""
    side = preference_labels(frame[verdict]).replace_strict({"A": "left", "B": "right", "tie": "tie"}, default=None)
    return frame.with_columns(
        pl.col("metadata").str.json_path_match(f"$.{CANDIDATE_FIELDS[0]}").alias("a"),
        pl.col("metadata").str.json_path_match(f"$.{CANDIDATE_FIELDS[1]}").alias("b"),
        side.alias("winner"),
    )


def ranking_agreement(annotations: pl.DataFrame, judgments: pl.DataFrame, rows: _Rows) -> None:
    """`ranking` rows: do an imported judge and the humans rank the compared models alike?

    For a pairwise task whose annotations name the two candidates in their metadata (`candidate_a`, shown
    left or first, and `candidate_b`), Bradley–Terry strengths are fitted on every human vote (each
    annotator's vote is one comparison; a tie is half a win for each side) and on each imported judge's
    verdicts on the task (a judgment that does not name the candidates takes those of its item; an unusable
    verdict is left out). Over the models both rankings have (`n`): `bradley_terry_rank_pearson`, the Pearson
    correlation of the two rank vectors, equal strengths sharing the best rank (LLMFAO's published method and
    tie handling), and `bradley_terry_spearman`, Spearman's correlation of the strengths (average ranks). Subject: the judge (source); reference: `human_votes`, or another judge of
    the same task; `details`: both rankings (model, score, rank, comparisons). A task and criterion are
    matched as in `imported_vs_human`.
    """
    # most annotations name no candidates: a substring test spares parsing their metadata
    named = annotations.filter(pl.col("metadata").str.contains(CANDIDATE_FIELDS[0], literal=True))
    votes = _named_comparisons(named, "label").filter(pl.col("a").is_not_null() & pl.col("b").is_not_null())
    if votes.is_empty():
        return
    judged = _named_comparisons(judgments, "verdict")
    fitted: dict[tuple, dict[str, BradleyTerry]] = {}
    for (source, task, criterion), part in judged.group_by("source", "task", "criterion", maintain_order=True):
        task = task or _only_task(annotations)
        humans = votes.filter(pl.col("task") == task)
        if criterion is not None:
            humans = humans.filter(pl.col("criterion") == criterion)
        if humans.is_empty():
            continue
        if (task, criterion) not in fitted:
            fitted[task, criterion] = {HUMAN_VOTES: bradley_terry(humans["a"], humans["b"], humans["winner"])}
        fits = fitted[task, criterion]
        items = humans.group_by("item_id").agg(pl.col("a").first().alias("item_a"), pl.col("b").first().alias("item_b"))
        part = part.join(items, on="item_id", how="left").with_columns(
            pl.coalesce("a", "item_a").alias("a"), pl.coalesce("b", "item_b").alias("b")
        )
        fits[source] = bradley_terry(part["a"], part["b"], part["winner"])
    for (task, criterion), fits in fitted.items():
        base = {"section": "ranking", "task": task, "criterion": criterion, "period": "all"}
        judges = sorted(name for name in fits if name != HUMAN_VOTES)
        pairs = [(judge, HUMAN_VOTES) for judge in judges] + list(itertools.combinations(judges, 2))
        for subject, reference in pairs:
            _rank_correlation(fits[subject], fits[reference], rows, {**base, "subject": subject, "reference": reference})


def _rank_correlation(subject: BradleyTerry, reference: BradleyTerry, rows: _Rows, fields: dict) -> None:
    both = subject.table.join(reference.table, on="model", suffix="_reference")
    ranks = score_agreement(both["rank_reference"], both["rank"])
    strengths = score_agreement(both["score_reference"], both["score"])
    fit_notes = [f"{side} fit: {fit.note}" for side, fit in (("subject", subject), ("reference", reference)) if fit.note]
    details = json.dumps({"subject": subject.table.to_dicts(), "reference": reference.table.to_dicts()})
    for statistic, value, result in (
        ("bradley_terry_rank_pearson", ranks.pearson, ranks),
        ("bradley_terry_spearman", strengths.spearman, strengths),
    ):
        note = "; ".join(n for n in [result.note, *fit_notes] if n) or None
        rows.add(statistic, value, result.n, note=note, details=details, **fields)


# ------------------------------------------------------------------------------------------ entry


def compute(
    evaluators: dict[str, EvaluatorConfig],
    scores: ScoreSource,
    annotations: pl.DataFrame,
    judgments: pl.DataFrame,
    trailing_days: int = TRAILING_DAYS,
    categories: dict[tuple[str, str], list[str]] | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The `agreement` rows and the `ground_truth` items; `categories` as in `inter_annotator`.

    `scores` may be a lazy scan, or one per evaluator (the asset passes those, `read_evaluator`): each
    evaluator's rows are read once, only the columns used, for all its statistics, and let go after but for
    the verdicts judge-vs-judge compares, so judge_scores is never held in memory whole (3.3 GB at 10M rows)."""
    rows = _Rows([])
    cache: dict = {}  # majority labels, human references and pairwise item labels, computed once
    inter_annotator(annotations, rows, categories, cache)
    verdicts: dict[str, JudgeVerdicts] = {}
    for name, config in sorted(evaluators.items()):
        own = read_evaluator(scores, name, config.mode)
        if config.human_agreement is not None and not own.is_empty():
            judge_vs_human(config, own, annotations, rows, trailing_days, cache)
        if config.mode == "pairwise" and not own.is_empty():
            position(config, own, rows, trailing_days)
        verdicts[name] = JudgeVerdicts.of(config.mode, own)
        del own
    if not judgments.is_empty() and not annotations.is_empty():
        imported_vs_human(judgments, annotations, rows, cache)
        imported_vs_evaluators(evaluators, scores, judgments, annotations, rows, cache)
        ranking_agreement(annotations, judgments, rows)
    judge_vs_judge(evaluators, scores, rows, verdicts)
    frame = conform(pl.DataFrame(rows.out, infer_schema_length=None), AGREEMENT_SCHEMA).with_columns(
        pl.lit(datetime.now(UTC)).alias("computed_at"),
        ((pl.col("statistic") == "cohen_kappa") & (pl.col("value") < pl.col("floor"))).alias("below_floor"),
    )
    truth = []
    for task, criterion in annotations.select("task", "criterion").unique(maintain_order=True).iter_rows():
        majority = cache.get(("majority", task, criterion))
        if majority is None:
            majority = majority_labels(annotations.filter(pl.col("task").eq_missing(task) & pl.col("criterion").eq_missing(criterion)))
        truth.append(clear_majority(majority, MIN_GROUND_TRUTH_CONSENSUS).with_columns(
            pl.lit(task).alias("task"), pl.lit(criterion).alias("criterion")))
    truth_frame = pl.concat(truth, how="diagonal_relaxed") if truth else pl.DataFrame()
    return frame, conform(truth_frame, GROUND_TRUTH_SCHEMA)
