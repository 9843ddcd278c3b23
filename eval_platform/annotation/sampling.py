"""Which items an annotation task hands to annotators: `select_items`, deterministic for a seed.

Candidates are the rows of the task's source: traces of its days (`traces`), or the cases of its dataset version
(`test_cases`). With a traces source naming evaluators, only the traces one of them judged count: a COMPLETED or
FAILED row of theirs (a SKIPPED trace was not judged). One item per id: a trace exported on two days is the first
day's.

Every rule orders candidates by a seeded key, sha256(`<seed>:<item_id>`): the order depends on the seed and the
ids only, not on the order of files or rows, and a larger `size` keeps the items a smaller one chose (raising the
size of a running task adds items, it does not replace the ones already labelled).

- `random`: the `size` candidates with the smallest keys (a uniform sample without replacement).
- `stratified`: the candidates are grouped by the value of `sampling.field` (a column such as `project_id`, or
  `metadata.<key>`; no value is the stratum `(missing)`). Each stratum gets a share of `size` proportional to its
  candidates, by largest remainder (Hamilton): floor of each quota, then one more to the largest remainders
  (ties: the larger stratum, then the stratum's name). When `size` is at least the number of strata, a stratum
  left with none takes one from the stratum whose allocation exceeds its quota most (among those with two or
  more). Within a stratum, the smallest keys.
- `disagreement`: each candidate trace gets a `priority` in 0..1, the larger of two measures, and the items are the
  `size` of highest priority (ties: the key). Only items with a priority above 0 are chosen: a task may get fewer
  than `size` items, and says so; people's time goes where judges are unsure.
  1. Judges split on the trace: over the COMPLETED verdicts of the named evaluators on the trace (each single
     judge's verdict, each member model's and sample's; a consensus row is not a further vote; FAILED and
     SKIPPED rows are never a verdict), the mean absolute difference between two verdicts' normalized scores
     (0..1), over all pairs. For pass/fail verdicts it is the chance that two verdicts drawn at random differ
     (2 pass, 2 fail: 0.67; 3 pass, 1 fail: 0.5). A trace with fewer than two verdicts has 0.
  2. Judge and humans differed here before (when `human_rows` are given): the human annotations of
     `sampling.human_task`/`human_criterion` (default this task and its only comparable criterion) give each
     labelled trace a human value (the mean `value` of its annotators, on 0..1: a rating by its declared min/max,
     else by the values seen when any lies outside 0..1; a label without a value does not count). Each named
     evaluator's past final COMPLETED scores on those traces fall in five bins ([0, 0.2), ..., [0.8, 1]); a bin's
     gap is the mean absolute difference between judge score and human value over its traces, and counts only
     with `sampling.min_history` traces or more. A candidate's measure is the largest gap of the bins its named
     evaluators' final verdicts on it fall in.
  `why` says which measure gave the priority and over how many verdicts or past items.

No judge verdict is among the item's text columns (input, output, reference, context, conversation, metadata):
an annotator who sees the judge's answer tends to agree with it (anchoring). `priority`, `why` and `stratum`
are for the task's owner; a tool shows annotators the text columns only.
"""

from __future__ import annotations

import hashlib
from datetime import datetime

import polars as pl

from eval_platform.annotation.config import AnnotationTaskConfig
from eval_platform.ingest.quarantine import utc_now
from eval_platform.record_fields import METADATA_PREFIX, field_text
from eval_platform.schemas import ANNOTATION_TASK_ITEM_SCHEMA, COMPLETED, FAILED, conform, empty_frame

MISSING_STRATUM = "(missing)"
HISTORY_BINS = 5  # judge score bins for the judge-human history: [0, 0.2), ..., [0.8, 1]
TEXT_COLUMNS = ("input", "output", "reference", "context", "conversation", "metadata")


def seeded_keys(item_ids: pl.Series, seed: int) -> pl.Series:
    """sha256(`<seed>:<item_id>`) as an unsigned 64-bit key per id: a seeded order that depends on the ids only."""
    keys = [int.from_bytes(hashlib.sha256(f"{seed}:{i}".encode()).digest()[:8], "big") for i in item_ids.to_list()]
    return pl.Series("key", keys, dtype=pl.UInt64)


def select_items(
    config: AnnotationTaskConfig,
    candidates: pl.DataFrame,
    judge_rows: pl.DataFrame | None = None,
    human_rows: pl.DataFrame | None = None,
    *,
    dataset_version: tuple[int, str] | None = None,
    now: datetime | None = None,
) -> pl.DataFrame:
    """The items to annotate (ANNOTATION_TASK_ITEM_SCHEMA), in the order they are handed out.

    `candidates`: the traces of the task's days (TRACE_SCHEMA columns) or the cases of its dataset version
    (TEST_CASE_SCHEMA columns). `judge_rows`: judge_scores rows, needed when the traces source names evaluators
    (past days too, for the disagreement history). `human_rows`: human_annotations rows (disagreement only).
    `dataset_version`: (N, sha256) of a dataset source, else its `dataset_version` column (or resolved by
    the caller with `config.resolve_dataset_version`)."""
    items = _candidates(config, candidates, judge_rows, dataset_version)
    if items.is_empty():
        return empty_frame(ANNOTATION_TASK_ITEM_SCHEMA)
    items = items.with_columns(seeded_keys(items["item_id"], config.sampling.seed))
    method = config.sampling.method
    if method == "random":
        chosen = items.sort("key").head(config.size)
    elif method == "stratified":
        assert config.sampling.field is not None  # `Sampling._fits_the_method`: stratified sampling names its field
        chosen = _stratified(items, config.sampling.field, config.size)
    else:
        # disagreement: the config requires a traces source naming evaluators, whose rows `_candidates` required
        assert judge_rows is not None
        chosen = _by_disagreement(config, items, judge_rows, human_rows)
    chosen = chosen.with_columns(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("position"),
        pl.lit(config.name).alias("task"),
        pl.lit(config.config_hash).alias("config_hash"),
        pl.lit(method).alias("sampling"),
        pl.lit(config.sampling.seed).alias("seed"),
        pl.lit(now or utc_now()).alias("selected_at"),
    )
    return conform(chosen, ANNOTATION_TASK_ITEM_SCHEMA)


# ---- candidates ------------------------------------------------------------------------------------------


def _candidates(
    config: AnnotationTaskConfig,
    candidates: pl.DataFrame,
    judge_rows: pl.DataFrame | None,
    dataset_version: tuple[int, str] | None,
) -> pl.DataFrame:
    """One row per candidate item: the item columns an annotator sees, and where it comes from."""
    source = config.source
    if source.traces is not None:
        days = source.traces.day_keys()
        frame = candidates.filter(pl.col("date").is_in(days)) if "date" in candidates.columns else candidates
        if source.traces.evaluators:
            if judge_rows is None:
                raise ValueError(
                    f"annotation task '{config.name}' names evaluators {source.traces.evaluators}: select_items needs "
                    "their judge_scores rows to know which traces they judged"
                )
            judged = judge_rows.filter(
                pl.col("evaluator").is_in(source.traces.evaluators) & pl.col("status").is_in([COMPLETED, FAILED])
            ).select(pl.col("trace_id").unique())
            frame = frame.join(judged, on="trace_id", how="semi")
        sort = ["date", "trace_id"] if "date" in frame.columns else ["trace_id"]
        frame = frame.sort(sort).unique("trace_id", keep="first", maintain_order=True)
        return _with_columns(
            frame,
            item_id=pl.col("trace_id"),
            trace_id=pl.col("trace_id"),
            source=pl.lit("traces"),
            source_day=pl.col("date") if "date" in frame.columns else pl.lit(None, pl.String),
            reference=pl.col("expected_output") if "expected_output" in frame.columns else None,
        )
    dataset = source.dataset
    assert dataset is not None  # `Source._exactly_one`: not traces, so a dataset
    frame = candidates
    version: int | None
    sha: str | None
    if "dataset" in frame.columns:
        frame = frame.filter(pl.col("dataset") == dataset.name)
    if dataset_version is not None:
        version, sha = dataset_version
        if "version" in frame.columns:
            frame = frame.filter(pl.col("version") == version)
    else:
        versions = frame["version"].unique().to_list() if "version" in frame.columns else [None]
        if len(versions) > 1:
            raise ValueError(
                f"annotation task '{config.name}': the candidates hold versions {sorted(versions)} of dataset "
                f"'{dataset.name}'; pass dataset_version (annotation.config.resolve_dataset_version)"
            )
        version, sha = (versions or [None])[0], None
    frame = frame.sort("case_id").unique("case_id", keep="first", maintain_order=True)
    return _with_columns(
        frame,
        item_id=pl.col("case_id"),
        trace_id=pl.lit(None, pl.String),
        source=pl.lit("dataset"),
        dataset=pl.lit(dataset.name),
        dataset_version=pl.lit(version, pl.Int64),
        dataset_sha256=pl.lit(sha, pl.String),
        reference=pl.col("expected_output") if "expected_output" in frame.columns else None,
    )


def _with_columns(frame: pl.DataFrame, **columns: pl.Expr | None) -> pl.DataFrame:
    """The candidate's columns (a stratified field may be any of them) plus the item columns; an item column given
    as None, or a text column the source lacks, is null."""
    exprs = [expr.alias(name) for name, expr in columns.items() if expr is not None]
    frame = frame.with_columns(exprs)
    missing = [name for name in (*TEXT_COLUMNS, *columns) if name not in frame.columns]
    return frame.with_columns([pl.lit(None, pl.String).alias(name) for name in missing])


# ---- stratified ------------------------------------------------------------------------------------------


def stratum_values(frame: pl.DataFrame, field: str) -> pl.Series:
    """Each row's stratum: the field's value as text (`record_fields.field_text`), `(missing)` when absent."""
    column = "metadata" if field.startswith(METADATA_PREFIX) else field
    if column not in frame.columns:
        return pl.Series("stratum", [MISSING_STRATUM] * frame.height, dtype=pl.String)
    distinct = frame.select(pl.col(column).unique())
    texts = [field_text({column: value}, field) for value in distinct[column].to_list()]
    lookup = distinct.with_columns(pl.Series("stratum", texts, dtype=pl.String))
    joined = frame.select(column).join(lookup, on=column, how="left", nulls_equal=True, maintain_order="left")
    return joined["stratum"].fill_null(MISSING_STRATUM)


def allocate(counts: dict[str, int], size: int) -> dict[str, int]:
    """Items per stratum: proportional to its candidates by largest remainder, at least one per stratum when
    `size` allows (see the module doc). Never more than a stratum holds; the total is min(size, candidates)."""
    total = sum(counts.values())
    size = min(size, total)
    if size == 0:
        return dict.fromkeys(counts, 0)
    # Integer arithmetic throughout: a quota is size * n / total, kept as its numerator size * n over the common
    # denominator total, so equal remainders compare equal and ties follow the stated rule (floats would not).
    numerators = {name: size * n for name, n in counts.items()}
    given = {name: numerator // total for name, numerator in numerators.items()}
    left = size - sum(given.values())
    by_remainder = sorted(counts, key=lambda name: (-(numerators[name] % total), -counts[name], name))
    for name in by_remainder[:left]:
        given[name] += 1
    if size >= len(counts):
        unserved = (name for name in counts if given[name] == 0 and counts[name] > 0)
        for name in sorted(unserved, key=counts.__getitem__)[::-1]:
            donors = [d for d in counts if given[d] >= 2]
            donor = max(donors, key=lambda d: (given[d] * total - numerators[d], given[d], d))
            given[donor] -= 1
            given[name] += 1
    return given


def _stratified(items: pl.DataFrame, field: str, size: int) -> pl.DataFrame:
    items = items.with_columns(stratum_values(items, field).alias("stratum"))
    counts = dict(items.group_by("stratum").len().iter_rows())
    shares = pl.DataFrame(
        list(allocate(counts, size).items()), schema={"stratum": pl.String, "share": pl.Int64}, orient="row"
    )
    ranked = items.sort("key").with_columns(pl.int_range(pl.len()).over("stratum").alias("rank_in_stratum"))
    chosen = ranked.join(shares, on="stratum").filter(pl.col("rank_in_stratum") < pl.col("share"))
    return chosen.sort("key").drop("rank_in_stratum", "share")


# ---- disagreement ----------------------------------------------------------------------------------------


def judge_spread(judge_rows: pl.DataFrame, evaluators: list[str]) -> pl.DataFrame:
    """Per trace: `verdicts` (COMPLETED single, member or sample verdicts of the evaluators) and `spread`, the mean
    absolute difference of their normalized scores over all pairs (0 with fewer than two)."""
    votes = judge_rows.filter(
        pl.col("evaluator").is_in(evaluators)
        & (pl.col("status") == COMPLETED)
        & pl.col("role").ne_missing("consensus")
        & pl.col("score").is_not_null()
    )
    for one_trace in ("trace_id_b", "span_id", "session_id"):  # rows about a pair, span or session are not a trace's
        if one_trace in votes.columns:
            votes = votes.filter(pl.col(one_trace).is_null())
    # sum over pairs i < j of |x_j - x_i| = sum_k x_(k) (2k - n + 1) over the sorted scores x_(0) <= ... <= x_(n-1)
    ordered = votes.select("trace_id", "score").sort("trace_id", "score")
    n = pl.len().over("trace_id")
    k = pl.int_range(pl.len()).over("trace_id")
    per_trace = (
        ordered.with_columns((pl.col("score") * (2 * k - n + 1)).alias("weighted"), n.alias("n"))
        .group_by("trace_id")
        .agg(pl.col("n").first().alias("verdicts"), pl.col("weighted").sum())
    )
    pairs = pl.col("verdicts") * (pl.col("verdicts") - 1) / 2
    spread = pl.when(pl.col("verdicts") >= 2).then(pl.col("weighted") / pairs).otherwise(0.0)
    return per_trace.select("trace_id", pl.col("verdicts").cast(pl.Int64), spread.clip(0.0, 1.0).alias("spread"))


def human_values(config: AnnotationTaskConfig, human_rows: pl.DataFrame) -> pl.DataFrame:
    """Per labelled trace: `human`, the mean value of its annotators on 0..1 (see the module doc)."""
    task, criterion = config.human_history()
    rows = human_rows.filter((pl.col("task") == task) & pl.col("value").is_not_null())
    if criterion is not None:
        rows = rows.filter(pl.col("criterion") == criterion)
    if "schema" in rows.columns:
        rows = rows.filter(pl.col("schema").is_in(["classification", "rating"]))
    if rows.is_empty():
        return pl.DataFrame(schema={"trace_id": pl.String, "human": pl.Float64})
    spec = config.criteria.get(criterion) if task == config.name and criterion is not None else None
    value = pl.col("value").cast(pl.Float64)
    low, high = rows.select(value.min().alias("low"), value.max().alias("high")).row(0)
    if spec is not None and spec.schema_ == "rating" and spec.min is not None and spec.max is not None:
        low, high = spec.min, spec.max
    elif low >= 0 and high <= 1:
        low, high = 0.0, 1.0
    scale = (pl.col("value") - low) / (high - low) if high > low else pl.lit(None, pl.Float64)
    trace = pl.coalesce(pl.col("trace_id"), pl.col("item_id")) if "trace_id" in rows.columns else pl.col("item_id")
    return (
        rows.select(trace.alias("trace_id"), scale.alias("human"))
        .drop_nulls()
        .group_by("trace_id")
        .agg(pl.col("human").mean())
    )


def _score_bin(score: pl.Expr) -> pl.Expr:
    return (score * HISTORY_BINS).floor().clip(0, HISTORY_BINS - 1).cast(pl.Int64)


def history_gaps(config: AnnotationTaskConfig, judge_rows: pl.DataFrame, human_rows: pl.DataFrame) -> pl.DataFrame:
    """Per (evaluator, score bin) with at least `min_history` labelled traces: `gap`, the mean absolute difference
    between the judge's final score and the human value, over `past` traces."""
    humans = human_values(config, human_rows)
    assert config.source.traces is not None  # disagreement sampling: the config requires a traces source
    final = judge_rows.filter(
        pl.col("evaluator").is_in(config.source.traces.evaluators)
        & pl.col("is_final")
        & (pl.col("status") == COMPLETED)
        & pl.col("score").is_not_null()
    )
    if "trace_id_b" in final.columns:
        final = final.filter(pl.col("trace_id_b").is_null())
    # one verdict per (evaluator, trace): its latest day's
    final = final.sort("evaluator", "trace_id", "date").unique(["evaluator", "trace_id"], keep="last")
    return (
        final.join(humans, on="trace_id")
        .group_by("evaluator", _score_bin(pl.col("score")).alias("bin"))
        .agg((pl.col("score") - pl.col("human")).abs().mean().alias("gap"), pl.len().alias("past"))
        .filter(pl.col("past") >= config.sampling.min_history)
    )


def _by_disagreement(
    config: AnnotationTaskConfig, items: pl.DataFrame, judge_rows: pl.DataFrame, human_rows: pl.DataFrame | None
) -> pl.DataFrame:
    assert config.source.traces is not None  # disagreement sampling: the config requires a traces source
    evaluators = config.source.traces.evaluators
    days = config.source.traces.day_keys()
    today = judge_rows.filter(pl.col("date").is_in(days)) if "date" in judge_rows.columns else judge_rows
    spread = judge_spread(today, evaluators)
    scored = items.join(spread, on="trace_id", how="left").with_columns(
        pl.col("spread").fill_null(0.0), pl.col("verdicts").fill_null(0)
    )
    gap = pl.lit(0.0)
    if human_rows is not None and not human_rows.is_empty():
        gaps = history_gaps(config, judge_rows, human_rows)
        verdicts = today.filter(
            pl.col("evaluator").is_in(evaluators) & pl.col("is_final") & (pl.col("status") == COMPLETED)
        ).select("evaluator", "trace_id", _score_bin(pl.col("score")).alias("bin"))
        worst = (
            verdicts.join(gaps, on=["evaluator", "bin"])
            .sort("gap", "evaluator", descending=[True, False])
            .group_by("trace_id", maintain_order=True)
            .first()
            .select("trace_id", "gap", "past", gap_evaluator="evaluator", gap_bin="bin")
        )
        scored = scored.join(worst, on="trace_id", how="left")
        gap = pl.col("gap").fill_null(0.0)
    else:
        scored = scored.with_columns(
            pl.lit(None, pl.Float64).alias("gap"),
            pl.lit(None, pl.UInt32).alias("past"),
            pl.lit(None, pl.String).alias("gap_evaluator"),
            pl.lit(None, pl.Int64).alias("gap_bin"),
        )
    scored = scored.with_columns(pl.max_horizontal(pl.col("spread"), gap).alias("priority"))
    chosen = scored.filter(pl.col("priority") > 0).sort(["priority", "key"], descending=[True, False])
    chosen = chosen.head(config.size)
    return chosen.with_columns(_why().alias("why"))


def _why() -> pl.Expr:
    low = pl.col("gap_bin").cast(pl.Float64) / HISTORY_BINS
    bin_text = pl.format("[{}, {})", low.round(1), (low + 1 / HISTORY_BINS).round(1))
    split = pl.format(
        "judges split: mean verdict difference {} over {} verdicts", pl.col("spread").round(3), pl.col("verdicts")
    )
    history = pl.format(
        "judge and humans differed: {}'s score bin {} was {} from the human value on average over {} past items",
        pl.col("gap_evaluator"),
        bin_text,
        pl.col("gap").round(3),
        pl.col("past"),
    )
    by_history = pl.col("gap").is_not_null() & (pl.col("gap") > pl.col("spread"))
    return pl.when(by_history).then(history).otherwise(split)


def candidate_count_note(config: AnnotationTaskConfig, candidates: int, chosen: int) -> str | None:
    """What to tell the task's owner when the task has fewer items than its size."""
    if chosen >= config.size:
        return None
    if config.sampling.method == "disagreement":
        return (
            f"{chosen} of {config.size} items: only {chosen} of {candidates} candidates have judges that disagree "
            "(or a judge-human history gap); the others are not worth a person's time by this rule"
        )
    return f"{chosen} of {config.size} items: the source has {candidates} candidates"
