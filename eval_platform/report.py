"""A static HTML report of what the warehouse holds: judging over time, agreement, experiments, leaderboard, and
judge drift when an evaluator has anchors.

One self-contained file (`reports/report.html` under the data root): plots are matplotlib PNGs inlined as
data URLs and tables are plain HTML, so it opens from disk, mails as an attachment and needs no network.
Each evaluator gets its own panels (scores of different evaluators never share an axis). Every number in a
table is read from the DuckDB views, so the report says what SQL says.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
import uuid
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Any

import duckdb

from eval_platform.schemas import COMPLETED, FAILED, PLACEHOLDER_MARK, PLACEHOLDER_MODEL, SKIPPED
from eval_platform.settings import duckdb_path
from eval_platform.storage.warehouse import open_catalog

REPORT_FILE = Path("reports") / "report.html"
CALIBRATED_COLUMNS = ["human_n", "ppi_mean", "ppi_ci_low", "ppi_ci_high"]
HALF_DAY = timedelta(hours=12)


@dataclass(frozen=True)
class ReportSummary:
    path: Path
    evaluators: int
    plots: int
    sections_empty: list[str]


def _query(conn: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = conn.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _png(figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96, bbox_inches="tight")
    return f'<img alt="plot" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _fmt(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.4g}"
    return html.escape(str(value))


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(row.get(c))}</td>" for c in columns) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _names_placeholder_sql(column: str) -> str:
    return f"({column} = '{PLACEHOLDER_MODEL}' OR starts_with({column}, '{PLACEHOLDER_MODEL}/'))"


# A judge_scores row answered by the local judge's placeholder (the SQL of schemas.PLACEHOLDER_ROW).
PLACEHOLDER_SQL = f"coalesce({_names_placeholder_sql('model')} OR {_names_placeholder_sql('provider_model')}, false)"


def daily_judging(conn) -> tuple[list[dict[str, Any]], dict[tuple[str, str, str], float | None]]:
    """Per evaluator, scored day and model: mean score and status counts of the final rows, and how many of its
    verdicts are the local judge's placeholders; and the judge spend of each (evaluator, day, model)."""
    daily = _query(
        conn,
        f"SELECT evaluator, date, model, avg(score) FILTER (status = '{COMPLETED}') AS mean_score, "
        f"count(*) FILTER (status = '{COMPLETED}') AS completed, count(*) FILTER (status = '{FAILED}') AS failed, "
        f"count(*) FILTER (status = '{SKIPPED}') AS skipped, "
        f"count(*) FILTER (status = '{COMPLETED}' AND {PLACEHOLDER_SQL}) AS placeholder "
        "FROM judge_scores WHERE is_final GROUP BY ALL ORDER BY evaluator, date, model",
    )
    # Spend by the day that was scored (every row, members of a panel included; a cache hit costs 0). The
    # ledger's judge_cost_daily counts by the day the call was made instead, which a backfill moves.
    costs = {
        (r["evaluator"], r["date"], r["model"]): r["spend"]
        for r in _query(conn, "SELECT evaluator, date, model, sum(cost_usd) AS spend FROM judge_scores GROUP BY ALL")
    }
    # The human-calibrated mean of the day beside the judge's own (agreement section `calibrated`).
    calibrated = {
        (r["evaluator"], r["date"]): r
        for r in _query(
            conn,
            "SELECT subject AS evaluator, period_start AS date, max(n) FILTER (statistic = 'ppi_mean') AS human_n, "
            + ", ".join(f"max(value) FILTER (statistic = '{s}') AS {s}" for s in CALIBRATED_COLUMNS[1:])
            + " FROM agreement WHERE section = 'calibrated' AND period = 'day' GROUP BY ALL",
        )
    }
    for row in daily:
        found = calibrated.get((row["evaluator"], row["date"]), {})
        row.update({c: found.get(c) for c in CALIBRATED_COLUMNS})
        row["verdicts"] = _verdicts_mark(row["placeholder"], row["completed"])
    return daily, costs


def _verdicts_mark(placeholder: int, completed: int) -> str | None:
    """What the `verdicts` cell says of a row's COMPLETED verdicts: nothing when a real judge gave them all."""
    if not placeholder:
        return ""
    return PLACEHOLDER_MARK if placeholder == completed else f"{placeholder} of {completed}: {PLACEHOLDER_MARK}"


def _daily_series(days: list[date], values: dict[date, float | None]) -> list[float]:
    """`values` on every day from the first to the last of `days`, NaN where a day has none: matplotlib breaks
    the line there instead of joining the days around a gap."""
    span = (days[-1] - days[0]).days
    return [_nan(values.get(days[0] + timedelta(days=i))) for i in range(span + 1)]


def _nan(value: float | None) -> float:
    return math.nan if value is None else float(value)


def judging_figure(daily: list[dict[str, Any]], costs: dict[tuple[str, str, str], float | None]):
    """One row of panels per evaluator: daily mean score (and its human-calibrated mean with its interval, where
    humans labelled some of the day's traces), FAILED rate (on a 0..1 axis) and judge cost over the scored days,
    one line per model that answered (the local judge's placeholder dashed and marked in the legend). A day with
    no rows breaks the line: days around a gap are never joined."""
    from matplotlib.figure import Figure

    evaluators = sorted({r["evaluator"] for r in daily})
    figure = Figure(figsize=(12, 2.4 * len(evaluators)))
    axes = figure.subplots(len(evaluators), 3, squeeze=False)
    for i, name in enumerate(evaluators):
        mine = [r for r in daily if r["evaluator"] == name]
        # Real dates on a date axis (`_date_axis`), not one text label per day, which smears past a few weeks.
        days = sorted({date.fromisoformat(r["date"]) for r in mine})
        every_day = [days[0] + timedelta(days=k) for k in range((days[-1] - days[0]).days + 1)]
        models = sorted({r["model"] or "" for r in mine})
        for j, label in enumerate(("mean score", "FAILED rate", "judge cost (USD, by scored day)")):
            ax = axes[i][j]
            for model in models:
                rows = {date.fromisoformat(r["date"]): r for r in mine if (r["model"] or "") == model}
                judged = {d: r["completed"] + r["failed"] for d, r in rows.items()}
                values = (
                    {d: r["mean_score"] for d, r in rows.items()}
                    if j == 0
                    else {d: r["failed"] / judged[d] if judged[d] else None for d, r in rows.items()}
                    if j == 1
                    else {d: costs.get((name, r["date"], r["model"])) for d, r in rows.items()}
                )
                if all(v is None for v in values.values()):
                    continue
                placeholder = any(r["placeholder"] for r in rows.values())
                ax.plot(
                    every_day,
                    _daily_series(days, values),
                    # a marker per day while days can be told apart; past a month they would merge into a bar
                    marker="o" if len(every_day) <= 31 else None,
                    linestyle="--" if placeholder else "-",
                    color="tab:grey" if placeholder else None,
                    label=f"{model} (PLACEHOLDER)" if placeholder else model,
                )
            calibrated = sorted(
                {date.fromisoformat(r["date"]): r for r in mine if r.get("ppi_mean") is not None}.items()
            )
            if j == 0 and calibrated:
                centres = [r["ppi_mean"] for _, r in calibrated]
                errors = [
                    [c - r["ppi_ci_low"] for c, (_, r) in zip(centres, calibrated, strict=True)],
                    [r["ppi_ci_high"] - c for c, (_, r) in zip(centres, calibrated, strict=True)],
                ]
                ax.errorbar(
                    [d for d, _ in calibrated],
                    centres,
                    yerr=errors,
                    fmt="s",
                    capsize=2,
                    color="tab:green",
                    label="human-calibrated (PPI, 95% CI)",
                )
            if j == 1:
                ax.set_ylim(0, 1)  # a rate: never below 0 or above 1, whatever the autoscale's margins
            if j == 0 and (calibrated or len(models) > 1 or any(r["placeholder"] for r in mine)):
                ax.legend(fontsize=6)
            _date_axis(ax, days)
            ax.set_title(f"{name}: {label}", fontsize=9)
            ax.tick_params(labelsize=7)
    figure.tight_layout()
    return figure


def _date_axis(ax, days: list[date]) -> None:
    """A date axis over the scored days, readable at any span: each day while they are under a week apart
    (the automatic locator would tick hours there), else a few ticks chosen for the span (weeks, months, years;
    90 days: one per month) whose labels name each month and year once."""
    from matplotlib.dates import (
        AutoDateLocator,
        ConciseDateFormatter,
        DateFormatter,
        DayLocator,
    )

    if (days[-1] - days[0]).days < 7:
        ax.xaxis.set_major_locator(DayLocator())
        ax.xaxis.set_major_formatter(DateFormatter("%b %d"))
    else:
        locator = AutoDateLocator(minticks=2, maxticks=6)
        ax.xaxis.set_major_locator(locator)
        ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    # Half a day either side, so one day is a day wide (matplotlib would widen it to four years).
    ax.set_xlim(datetime.combine(days[0], time()) - HALF_DAY, datetime.combine(days[-1], time()) + HALF_DAY)


def _judging(conn, plots: list[str]) -> tuple[str, int]:
    daily, costs = daily_judging(conn)
    if not daily:
        return "<p>No judge_scores rows yet: materialize judge_scores.</p>", 0
    plots.append(_png(judging_figure(daily, costs)))
    for row in daily:
        judged = row["completed"] + row["failed"]
        row["failed_rate"] = row["failed"] / judged if judged else None
        row["cost_usd"] = costs.get((row["evaluator"], row["date"], row["model"]))
    columns = ["evaluator", "date", "model", "verdicts", "mean_score", *CALIBRATED_COLUMNS]
    table = _table(daily, [*columns, "completed", "failed", "skipped", "failed_rate", "cost_usd"])
    return plots[-1] + table, len({r["evaluator"] for r in daily})


def _agreement(conn, plots: list[str]) -> str:
    rows = _query(
        conn,
        "SELECT subject, reference, convention, max(n) AS n, bool_or(coalesce(placeholder, false)) AS placeholder, "
        "max(value) FILTER (statistic = 'accuracy') AS accuracy, "
        "max(value) FILTER (statistic = 'cohen_kappa') AS kappa "
        "FROM agreement WHERE section = 'judge_vs_human' AND period = 'all' "
        "AND statistic IN ('accuracy', 'cohen_kappa') "
        "GROUP BY ALL ORDER BY subject, convention",
    )
    if not rows:
        return "<p>No judge-vs-human agreement yet: materialize human_annotations and agreement.</p>"
    from matplotlib.figure import Figure

    with_kappa = [r for r in rows if r["kappa"] is not None]
    figure = Figure(figsize=(8, 0.4 * len(with_kappa) + 1))
    ax = figure.subplots()
    ax.barh(
        [f"{r['subject']} ({r['convention']}){' [PLACEHOLDER]' if r['placeholder'] else ''}" for r in with_kappa],
        [r["kappa"] for r in with_kappa],
    )
    ax.set_xlabel("Cohen's kappa against the human reference")
    ax.tick_params(labelsize=8)
    figure.tight_layout()
    plots.append(_png(figure))
    _mark_placeholder(rows)
    columns = ["subject", "placeholder", "reference", "convention", "n", "accuracy", "kappa"]
    return plots[-1] + _table(rows, columns)


def _experiments(conn, plots: list[str]) -> str:
    rows = _query(
        conn,
        "SELECT experiment, evaluator, variant, control_variant, method, n, n_control, difference, diff_ci_low, "
        "diff_ci_high, cs_low, cs_high, p_value, always_valid_p_value, p_value_adjusted, significant, "
        "significance_rule, recommendation, stale, stale_reason, coalesce(placeholder, false) AS placeholder "
        "FROM experiment_results WHERE kind = 'comparison' "
        "ORDER BY ALL",
    )
    if not rows:
        return "<p>No experiment comparisons yet: materialize experiment_results.</p>"
    from matplotlib.figure import Figure

    # A fixed-horizon comparison draws its confidence interval; a sequential one (`method: sequential`, no
    # fixed-horizon interval) its confidence sequence, marked in its label.
    for r in rows:
        sequential = r["diff_ci_low"] is None and r["cs_low"] is not None and r["cs_high"] is not None
        r["_low"], r["_high"] = (r["cs_low"], r["cs_high"]) if sequential else (r["diff_ci_low"], r["diff_ci_high"])
        r["_mark"] = (
            (" (confidence sequence)" if sequential else "")
            + (" [STALE]" if r["stale"] else "")
            + (" [PLACEHOLDER]" if r["placeholder"] else "")
        )
    _mark_stale(rows)
    _mark_placeholder(rows)
    shown = [r for r in rows if r["difference"] is not None and r["_low"] is not None and r["_high"] is not None]
    figure = Figure(figsize=(8, 0.4 * len(shown) + 1))
    ax = figure.subplots()
    labels = [
        f"{r['experiment']} {r['evaluator']}: {r['variant']} vs {r['control_variant']}{r['_mark']}" for r in shown
    ]
    centres = [r["difference"] for r in shown]
    errors = [
        [c - r["_low"] for c, r in zip(centres, shown, strict=True)],
        [r["_high"] - c for c, r in zip(centres, shown, strict=True)],
    ]
    ax.errorbar(centres, labels, xerr=errors, fmt="o", capsize=3)
    ax.axvline(0, color="grey", linewidth=0.8)
    ax.set_xlabel("difference in mean score (95% CI; confidence sequence where marked)")
    ax.tick_params(labelsize=7)
    figure.tight_layout()
    plots.append(_png(figure))
    columns = [
        "experiment",
        "stale",
        "placeholder",
        "evaluator",
        "variant",
        "control_variant",
        "n",
        "n_control",
        "difference",
        "diff_ci_low",
        "diff_ci_high",
        "cs_low",
        "cs_high",
        "p_value",
        "always_valid_p_value",
        "p_value_adjusted",
        "significant",
        "significance_rule",
        "recommendation",
        "stale_reason",
    ]
    return plots[-1] + _table(rows, columns)


def _mark_stale(rows: list[dict[str, Any]]) -> None:
    """A row kept from before its file broke says STALE in its `stale` cell (empty for a current row)."""
    for row in rows:
        row["stale"] = "STALE" if row["stale"] else ""


def _mark_placeholder(rows: list[dict[str, Any]]) -> None:
    """A row computed from the local judge's placeholder verdicts says so in its `placeholder` cell (empty
    otherwise): its figures are no quality judgment."""
    for row in rows:
        row["placeholder"] = PLACEHOLDER_MARK if row["placeholder"] else ""


def _leaderboard(conn, plots: list[str]) -> str:
    rows = _query(
        conn,
        "SELECT suite, rank, model, score, ci_low, ci_high, tasks_scored, tasks_total, gap_to_leader, "
        "significant_vs_leader, stale, stale_reason FROM leaderboard WHERE aggregate = 'macro' "
        "ORDER BY suite, rank NULLS LAST, model",
    )
    if not rows:
        return "<p>No benchmark results yet: materialize a suite's assets for a model, then leaderboard.</p>"
    from matplotlib.figure import Figure

    parts = []
    for suite in sorted({r["suite"] for r in rows}):
        ranked = [r for r in rows if r["suite"] == suite and r["score"] is not None]
        if ranked:
            figure = Figure(figsize=(8, 0.4 * len(ranked) + 1))
            ax = figure.subplots()
            errors = [[r["score"] - r["ci_low"] for r in ranked], [r["ci_high"] - r["score"] for r in ranked]]
            ax.errorbar([r["score"] for r in ranked], [r["model"] for r in ranked], xerr=errors, fmt="o", capsize=3)
            ax.invert_yaxis()
            stale = " [STALE: its suite file does not load]" if any(r["stale"] for r in ranked) else ""
            ax.set_title(f"suite {suite}: score (macro, 95% CI){stale}", fontsize=9)
            ax.tick_params(labelsize=7)
            figure.tight_layout()
            plots.append(_png(figure))
            parts.append(plots[-1])
    _mark_stale(rows)
    columns = [
        "suite",
        "stale",
        "rank",
        "model",
        "score",
        "ci_low",
        "ci_high",
        "tasks_scored",
        "tasks_total",
        "gap_to_leader",
        "significant_vs_leader",
        "stale_reason",
    ]
    return "".join(parts) + _table(rows, columns)


def _drift(conn) -> str | None:
    """Every anchor check (judge drift) with its shift from the previous check; None when no evaluator has anchors
    checked (the section is then left out rather than shown empty)."""
    columns = [
        "evaluator",
        "checked_at",
        "trigger",
        "provider_model",
        "n_completed",
        "expected_agreement",
        "n_paired",
        "agreement",
        "mean_shift",
        "shift_ci_low",
        "shift_ci_high",
        "p_value",
        "significant",
    ]
    rows = _query(conn, f"SELECT {', '.join(columns)} FROM judge_drift ORDER BY evaluator, checked_at")
    if not rows:
        return None
    for row in rows:
        row["checked_at"] = row["checked_at"].strftime("%Y-%m-%d %H:%M UTC")
        if row["significant"]:
            row["significant"] = "DRIFT"
    return _table(rows, columns)


STYLE = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}table{border-collapse:collapse;margin:1em 0;"
    "font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}"
    "th{background:#f4f4f4}img{max-width:100%}"
)


def build_report(root: Path) -> ReportSummary:
    """Write the report from the catalog and return where it is; sections with no rows say what to run."""
    plots: list[str] = []
    with open_catalog(root) as conn:
        judging, evaluators = _judging(conn, plots)
        sections = {
            "Judging over time (per evaluator)": judging,
            "Can the judges be trusted? (judge vs human)": _agreement(conn, plots),
            "Experiments (difference to control, 95% CI)": _experiments(conn, plots),
            "Benchmarks (leaderboard)": _leaderboard(conn, plots),
        }
        drift = _drift(conn)
        if drift is not None:
            sections["Judge drift (anchor checks against the previous check)"] = drift
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    body = "".join(f"<h2>{html.escape(title)}</h2>{content}" for title, content in sections.items())
    page = (
        "<!doctype html><html><head><meta charset='utf-8'><title>eval_platform report</title>"
        f"<style>{STYLE}</style></head>"
        f"<body><h1>eval_platform report</h1><p>Generated {generated} from {html.escape(str(duckdb_path(root)))}.</p>"
        f"{body}</body></html>"
    )
    path = root / REPORT_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, path)  # readers see the old report or the new one, never half of one
    empty = [title for title, content in sections.items() if content.startswith("<p>No ")]
    return ReportSummary(path, evaluators, len(plots), empty)
