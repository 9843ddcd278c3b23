"""Judge spend rollups (`judge_cost_daily`, `judge_cost_monthly`) and, apart, what the traced app spent
(`app_cost_daily`): plain functions over the warehouse's Parquet files and the budget ledger.

Judge spend and the traced application's own spend (`traces.cost_usd`) are never added together: the
app's spend has its own table. `defs/costs.py` wires these into assets.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.shared_state import SharedState
from eval_platform.schemas import (
    APP_COST_DAILY_SCHEMA,
    COMPLETED,
    FAILED,
    JUDGE_COST_DAILY_SCHEMA,
    JUDGE_COST_MEASURES,
    JUDGE_COST_MONTHLY_SCHEMA,
    JUDGE_COST_PARTS_SCHEMA,
    SKIPPED,
    conform,
)
from eval_platform.storage.location import DataRoot, LocalStore
from eval_platform.storage.warehouse import (
    PARTITION_FILE,
    SCHEMA_DIR,
    connect,
    has_files,
    read_parquet,
    remove_parts,
    table_glob,
    write_partition,
)


def judge_ledger(root: Path, instance: Any = None) -> BudgetLedger:
    """The judges' spend ledger (what the budgets are enforced on): the data root's, or the Dagster instance's
    database when it runs on PostgreSQL (see `llm.shared_state`)."""
    return SharedState.of(root, instance).judge_ledger()


def cost_rollup(
    root: DataRoot, evaluators: dict[str, EvaluatorConfig], ledger: BudgetLedger | None = None
) -> pl.DataFrame:
    """Judge spend per UTC day of judging. Judge spend only: the traced application's own cost_usd is
    in `traces` and is never added here. `ledger`: default, the data root's.

    An evaluator and day the ledger has spend for but no judged row (every run of it that day was killed before
    it wrote its partition) still gets a row: no model or project, no rows, the ledger's spend."""
    return counted_cost_rollup(root, evaluators, ledger)[0]


def counted_cost_rollup(
    root: DataRoot, evaluators: dict[str, EvaluatorConfig], ledger: BudgetLedger | None = None
) -> tuple[pl.DataFrame, dict[str, int]]:
    """`cost_rollup`, and how many judge_scores files it summed now (`files_summed`: new or rewritten since the last
    rollup) and kept the sums of (`files_kept`); both -1 when every row was read (a bucket)."""
    spend = ledger_spend(ledger or judge_ledger(root.path))
    frame, counts = _judged_rows(root)
    only_in_ledger = spend.select("evaluator", "day").join(
        frame.select("evaluator", "day"), on=["evaluator", "day"], how="anti"
    )
    if only_in_ledger.height:
        zeros = [pl.lit(0, dtype=dtype).alias(name) for name, dtype in JUDGE_COST_MEASURES.items()]
        frame = pl.concat([frame, only_in_ledger.with_columns(*zeros)], how="diagonal_relaxed").sort(
            "day", "evaluator", "model", "project_id", nulls_last=True
        )
    budgets = {name: cfg.max_daily_cost_usd for name, cfg in evaluators.items()}
    frame = with_budget_use(frame, spend, "day", budgets, "budget_daily_usd")
    return conform(frame, JUDGE_COST_DAILY_SCHEMA), counts


_EMPTY_ROLLUP = pl.DataFrame(
    schema={name: JUDGE_COST_DAILY_SCHEMA[name] for name in ("day", "evaluator", "model", "project_id")}
    | JUDGE_COST_MEASURES
)


# `judge_scores` rows summed per UTC day of judging, evaluator, model and project (and, for `judge_cost_parts`, per
# file). Rows are grouped by the UTC day number and only the groups' days are formatted: a strftime and a time zone
# conversion on every row took most of the query's time at 10M rows.
_SUMMED = f"""
    SELECT strftime(DATE '1970-01-01' + CAST(utc_day AS INTEGER), '%Y-%m-%d') AS day, * EXCLUDE (utc_day)
    FROM (
        SELECT {{files}} floor(epoch_us(judged_at) / 86400000000) AS utc_day, evaluator, model, project_id,
               count(*) AS rows, sum(calls) AS calls, sum(cache_hit::INT) AS cache_hits,
               count(*) FILTER (status = '{COMPLETED}') AS completed,
               count(*) FILTER (status = '{FAILED}') AS failed,
               count(*) FILTER (status = '{SKIPPED}') AS skipped,
               sum(prompt_tokens) AS prompt_tokens, sum(completion_tokens) AS completion_tokens,
               sum(coalesce(cost_usd, 0)) AS spend_usd, sum(cached_cost_usd) AS avoided_by_cache_usd
        FROM read_parquet({{source}}{{filename}})
        GROUP BY ALL
    )
"""
_KEYS = ["day", "evaluator", "model", "project_id"]
COST_PARTS = "judge_cost_parts"
_FILES_PER_QUERY = 2000  # files summed by one query: the first run over a long history lists every file


def _judged_rows(root: DataRoot) -> tuple[pl.DataFrame, dict[str, int]]:
    """`judge_scores` grouped per UTC day of judging, evaluator, model and project: from `judge_cost_parts`, the
    sums of each judge_scores file kept beside its version, updated for the files written since (`judged_rows`);
    on a bucket, where a file has no cheap version, from every row (`rescan_judged_rows`)."""
    versions = _file_versions(root)
    if versions is None:
        frame = rescan_judged_rows(root) if has_files(root, "judge_scores") else _EMPTY_ROLLUP
        return frame, {"files_summed": -1, "files_kept": -1}
    return judged_rows(root, versions)


def rescan_judged_rows(root: DataRoot) -> pl.DataFrame:
    """`_judged_rows` from every `judge_scores` row (what the sums of `judge_cost_parts` add up to)."""
    sql = _SUMMED.format(files="", source=f"'{table_glob(root, 'judge_scores')}'", filename="")
    with connect(root) as conn:
        return conn.sql(f"{sql} ORDER BY day, evaluator, model, project_id").pl()


def _file_versions(root: DataRoot) -> dict[str, str] | None:
    """Each judge_scores file (its path under the table's folder) and its version (size, modification time); None
    on a bucket (no cheap version) or for a file outside an evaluator × day partition."""
    store = root.store
    if not isinstance(store, LocalStore):
        return None
    versions = {}
    for parts in store.files(("judge_scores",), PARTITION_FILE):
        if parts[1] == SCHEMA_DIR:
            continue
        if not (parts[1].startswith("evaluator=") and parts[2].startswith("date=")):
            return None
        try:
            stat = store.folder.joinpath(*parts).stat()
        except FileNotFoundError:  # removed since it was listed
            continue
        versions["/".join(parts[1:])] = f"{stat.st_size}:{stat.st_mtime_ns}"
    return versions


def _partition_keys(file: str) -> dict[str, str]:
    evaluator, date = file.split("/")[:2]
    return {"evaluator": evaluator.removeprefix("evaluator="), "date": date.removeprefix("date=")}


def judged_rows(root: DataRoot, versions: dict[str, str]) -> tuple[pl.DataFrame, dict[str, int]]:
    """`_judged_rows` from `judge_cost_parts`: its rows of files still at their version are kept, the files new or
    rewritten since (`versions`, from `_file_versions`) are summed, alone, and the partitions of `judge_cost_parts`
    they change are rewritten whole; a partition whose judge_scores files are all gone is removed. Each partition is
    written atomically and a row is used only while its file is at its version, so a kill at any instant leaves
    rows the next run corrects, never a file counted twice or an old version counted."""
    kept = _cost_parts(root)
    at_version = pl.DataFrame(
        {"file": list(versions), "file_version": list(versions.values())},
        schema={"file": pl.String, "file_version": pl.String},
    )
    current = kept.join(at_version, on=["file", "file_version"], how="semi", maintain_order="left")
    summed = set(current["file"].unique().to_list())
    todo = sorted(file for file in versions if file not in summed)
    fresh = _sum_files(root, todo, versions)
    rows = pl.concat([current, fresh], how="vertical_relaxed")
    # the partitions of judge_cost_parts that change: those with a file summed now, or a row of a gone version
    changed = {tuple(_partition_keys(f).values()) for f in todo}
    changed |= {tuple(_partition_keys(f).values()) for f in kept.filter(~pl.col("file").is_in(list(summed)))["file"]}
    store = root.store
    for evaluator, date in sorted(changed):
        keys = {"evaluator": evaluator, "date": date}
        prefix = f"evaluator={evaluator}/date={date}/"
        mine = rows.filter(pl.col("file").str.starts_with(prefix))
        if mine.height:
            write_partition(root, COST_PARTS, keys, conform(mine.sort("file", *_KEYS), JUDGE_COST_PARTS_SCHEMA))
        else:  # its judge_scores partition is gone
            remove_parts(store, COST_PARTS, keys, keep_whole=False)
    return _total(rows), {"files_summed": len(todo), "files_kept": len(summed & set(versions))}


def _cost_parts(root: DataRoot) -> pl.DataFrame:
    """Every row of `judge_cost_parts` (none when it has no partition)."""
    empty = conform(pl.DataFrame(), JUDGE_COST_PARTS_SCHEMA)
    if not has_files(root, COST_PARTS):
        return empty
    return conform(read_parquet(root, table_glob(root, COST_PARTS)), JUDGE_COST_PARTS_SCHEMA)


def _sum_files(root: DataRoot, files: list[str], versions: dict[str, str]) -> pl.DataFrame:
    """`judge_cost_parts` rows of these judge_scores files: their rows summed per file, and one row of no rows for a
    file that has none (so that its version is known)."""
    empty = conform(pl.DataFrame(), JUDGE_COST_PARTS_SCHEMA)
    if not files:
        return empty
    store = root.store
    location = {store.location("judge_scores", *file.split("/")): file for file in files}
    paths = list(location)
    with connect(root) as conn:
        frames = [
            conn.sql(_SUMMED.format(files="filename,", source=repr(chunk), filename=", filename = true")).pl()
            for chunk in (paths[i : i + _FILES_PER_QUERY] for i in range(0, len(paths), _FILES_PER_QUERY))
        ]
    frame = pl.concat(frames, how="vertical_relaxed")
    frame = frame.with_columns(pl.col("filename").replace_strict(location, return_dtype=pl.String).alias("file"))
    frame = frame.with_columns(pl.col("file").replace_strict(versions, return_dtype=pl.String).alias("file_version"))
    empty_files = sorted(set(files) - set(frame["file"].to_list()))
    none = pl.DataFrame(
        {"file": empty_files, "file_version": [versions[f] for f in empty_files], "rows": [0] * len(empty_files)}
    )
    return conform(pl.concat([frame.drop("filename"), none], how="diagonal_relaxed"), JUDGE_COST_PARTS_SCHEMA)


def _total(rows: pl.DataFrame) -> pl.DataFrame:
    """The files' sums added up per UTC day of judging, evaluator, model and project, as one query over every row
    adds them (a sum over no known value stays null)."""
    measures = [
        pl.when(pl.col(name).is_not_null().any()).then(pl.col(name).sum()).alias(name) for name in JUDGE_COST_MEASURES
    ]
    total = rows.filter(pl.col("rows") > 0).group_by(_KEYS).agg(measures)  # not the rows of files with none
    return total.sort(_KEYS, nulls_last=True)


def ledger_spend(ledger: BudgetLedger) -> pl.DataFrame:
    """The ledger's spend per evaluator and UTC day of the call, as the budgets count it: settled calls, calls of
    killed runs at their worst case, and reservations still in flight at theirs (all runs, all hosts; cache hits
    cost nothing). A reservation of a run on a host that died is in flight until its time is up; counting it
    keeps the rollup from ever showing less than the provider billed."""
    return pl.DataFrame(
        [(e, d, s) for e, d, s, _ in ledger.totals(in_flight=True)],
        schema={"evaluator": pl.String, "day": pl.String, "ledger_spend_usd": pl.Float64},
        orient="row",
        strict=False,
    )


def with_budget_use(
    frame: pl.DataFrame, spend: pl.DataFrame, period: str, budgets: dict[str, float | None], budget_column: str
) -> pl.DataFrame:
    """Adds the period's ledger spend, the evaluator's budget for that period and the percentage used."""
    return (
        frame.join(spend, on=["evaluator", period], how="left", maintain_order="left")
        .with_columns(
            pl.col("evaluator").replace_strict(budgets, default=None, return_dtype=pl.Float64).alias(budget_column),
            pl.col("ledger_spend_usd").fill_null(0.0),
            pl.lit(datetime.now(UTC)).alias("computed_at"),
        )
        .with_columns((100 * pl.col("ledger_spend_usd") / pl.col(budget_column)).alias("budget_used_pct"))
    )


def monthly_rollup(daily: pl.DataFrame, ledger: BudgetLedger, evaluators: dict[str, EvaluatorConfig]) -> pl.DataFrame:
    """`judge_cost_daily` summed per UTC month, with the month's ledger spend against the monthly budget."""
    frame = (
        daily.with_columns(pl.col("day").str.slice(0, 7).alias("month"))
        .group_by("month", "evaluator", "model", "project_id")
        .agg(pl.col(list(JUDGE_COST_MEASURES)).sum(), pl.col("day").n_unique().alias("days"))
    )
    monthly_spend = (
        ledger_spend(ledger)
        .group_by("evaluator", pl.col("day").str.slice(0, 7).alias("month"))
        .agg(pl.col("ledger_spend_usd").sum())
    )
    budgets = {name: cfg.max_monthly_cost_usd for name, cfg in evaluators.items()}
    frame = with_budget_use(frame, monthly_spend, "month", budgets, "budget_monthly_usd")
    return conform(frame.sort("month", "evaluator", "model", "project_id", nulls_last=True), JUDGE_COST_MONTHLY_SCHEMA)


def app_cost_rollup(root: DataRoot) -> pl.DataFrame:
    """The traced application's own spend and tokens per trace day, project and model."""
    if not has_files(root, "traces"):
        return conform(pl.DataFrame(), APP_COST_DAILY_SCHEMA)
    with connect(root) as conn:
        frame = conn.sql(
            f"""
            SELECT date AS day, project_id, model, count(*) AS traces,
                   count(cost_usd) AS traces_with_cost, sum(prompt_tokens) AS prompt_tokens,
                   sum(completion_tokens) AS completion_tokens, sum(cost_usd) AS app_cost_usd
            FROM read_parquet('{table_glob(root, "traces")}', union_by_name = true)
            GROUP BY ALL ORDER BY ALL
            """
        ).pl()
    return conform(frame.with_columns(pl.lit(datetime.now(UTC)).alias("computed_at")), APP_COST_DAILY_SCHEMA)
