"""What the UI shows of benchmark runs, as plain values (no Dagster here; `defs.benchmarks` wraps them): one
model's run of a task, the gate a task waits on, a suite score against its previous materialization, and the
leaderboard as a Markdown table. Scores are rounded for display; the tables keep full precision."""

from __future__ import annotations

import polars as pl

from eval_platform.markdown_table import markdown_table
from eval_platform.schemas import COMPLETED, FAILED, SKIPPED

# What the UI shows of a score, rate or interval (4 decimals), and of money (to the micro-dollar); the tables keep
# full precision.
SCORE_DIGITS, USD_DIGITS = 4, 6


def rounded(value: float | None, digits: int = SCORE_DIGITS) -> float | None:
    return None if value is None else round(float(value), digits)


def task_metadata(
    task, frame: pl.DataFrame, results: pl.DataFrame, model_id: str, cache_write_failed: str | None
) -> dict:
    """What the UI shows on one model's materialization of a task: counts, rates and cost as numbers, `reasons`
    (reason -> rows not COMPLETED) as a dict, each metric's value as a float, `results` as a list of dicts."""
    counts = dict(frame.group_by("status").len().iter_rows())
    judged = counts.get(COMPLETED, 0) + counts.get(FAILED, 0)
    failed_rate = counts.get(FAILED, 0) / judged if judged else 0.0
    reasons = frame.filter(pl.col("status") != COMPLETED).group_by("reason").len().sort("len", descending=True)
    return {
        "rows": frame.height,
        "completed": counts.get(COMPLETED, 0),
        "failed": counts.get(FAILED, 0),
        "skipped": counts.get(SKIPPED, 0),
        "failed_rate": rounded(failed_rate),
        "reasons": dict(reasons.iter_rows()),
        "calls": int((~frame["cache_hit"] & frame["status"].is_in([COMPLETED, FAILED])).sum())
        if task.calls_model
        else 0,
        "cost_usd": rounded(float(frame["cost_usd"].sum()), USD_DIGITS),
        **{
            f"{row['metric']}": rounded(row["value"])
            for row in results.iter_rows(named=True)
            if row["value"] is not None
        },
        "results": [
            {key: rounded(value) if isinstance(value, float) else value for key, value in row.items()}
            for row in results.select("metric", "value", "ci_low", "ci_high", "n", "n_failed").to_dicts()
        ],
        "model_id": model_id,
        "dataset": f"{task.dataset}@v{frame['dataset_version'][0]}" if frame.height else task.dataset,
        **({"cache_write_failed": cache_write_failed} if cache_write_failed else {}),
    }


def gate_value(gate_rows: pl.DataFrame | None, metric: str) -> float | None:
    """The gating task's value of `metric` in its `benchmark_results` rows; None when it has not run."""
    if gate_rows is None:
        return None
    hit = gate_rows.filter(pl.col("metric") == metric)
    return hit["value"][0] if hit.height else None


def suite_score(rows: pl.DataFrame, previous: pl.DataFrame | None) -> tuple[dict, dict]:
    """The suite's macro row in `rows` (its `benchmark_results` rows), with what the UI shows of it, and whether
    the score fell below the previous materialization's 95% interval (`previous`: its rows then, or None)."""
    macro = rows.filter((pl.col("level") == "suite") & (pl.col("aggregate") == "macro")).row(0, named=True)
    dropped, before = False, None
    if previous is not None:
        old = previous.filter((pl.col("level") == "suite") & (pl.col("aggregate") == "macro"))
        if old.height and old["ci_low"][0] is not None and macro["value"] is not None:
            before = old.row(0, named=True)
            dropped = macro["value"] < before["ci_low"]
    drop = {
        "dropped": dropped,
        "score": rounded(macro["value"]),
        "previous_score": rounded(before["value"]) if before else None,
        "previous_ci_low": rounded(before["ci_low"]) if before else None,
    }
    return macro, drop


def leaderboard_preview(board: pl.DataFrame) -> str:
    """The leaderboard as a Markdown table for the UI: one row per suite and model, each score labelled with its
    aggregate and shown with its 95% interval, rounded to 3 decimals (the `leaderboard` view has them in full); a
    suite whose file no longer loads says STALE and why."""

    def interval(value, low, high) -> str:
        if value is None:
            return ""
        return f"{value:.3f}" + (f" [{low:.3f}, {high:.3f}]" if low is not None and high is not None else "")

    columns = [
        "suite",
        "rank (macro)",
        "model",
        "score (macro) [95% CI]",
        "score (micro) [95% CI]",
        "gap to leader (macro) [95% CI]",
        "gap significant",
        "cost (USD)",
        "stale",
    ]
    macro = board.filter(pl.col("aggregate") == "macro")
    micro = {(r["suite"], r["model"]): r for r in board.filter(pl.col("aggregate") == "micro").iter_rows(named=True)}
    rows = []
    for row in macro.sort("suite", "rank", "model", nulls_last=True).iter_rows(named=True):
        other = micro.get((row["suite"], row["model"]), {})
        significant = row["significant_vs_leader"]
        cells = [
            row["suite"],
            "" if row["rank"] is None else str(row["rank"]),
            row["model"],
            interval(row["score"], row["ci_low"], row["ci_high"]),
            interval(other.get("score"), other.get("ci_low"), other.get("ci_high")),
            "leader"
            if row["model"] == row["leader"]
            else interval(row["gap_to_leader"], row["gap_ci_low"], row["gap_ci_high"]),
            "" if significant is None else "yes" if significant else "no",
            "unknown" if row["cost_usd"] is None else f"{row['cost_usd']:.{USD_DIGITS}f}".rstrip("0").rstrip("."),
            f"STALE: {row['stale_reason']}" if row["stale"] else "",
        ]
        rows.append(dict(zip(columns, cells, strict=True)))
    return markdown_table(rows, columns)
