"""The report tells the truth (issue 30): placeholder verdicts marked beside their model, stale experiments
flagged, no line across days without data, rates on a 0..1 axis. Rows are real Parquet partitions read through
the DuckDB views, as the report reads them."""

from __future__ import annotations

import math

import duckdb
import polars as pl

from eval_platform.defs.catalog import refresh
from eval_platform.report import build_report, daily_judging, judging_figure
from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, JUDGE_SCORE_SCHEMA, PLACEHOLDER_MARK, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition


def write_day(root, evaluator: str, day: str, model: str, provider_model: str, scores: list[float | None]) -> None:
    rows = pl.DataFrame(
        {
            "evaluator": evaluator,
            "date": day,
            "trace_id": [f"{day}-{i}" for i in range(len(scores))],
            "model": model,
            "provider_model": provider_model,
            "is_final": True,
            "status": ["FAILED" if s is None else "COMPLETED" for s in scores],
            "score": scores,
            "cost_usd": 0.001,
        }
    )
    write_partition(
        DataRoot.from_env(root),
        "judge_scores",
        {"evaluator": evaluator, "date": day},
        conform(rows, JUDGE_SCORE_SCHEMA),
    )


def judging_section(root) -> str:
    page = (root / "reports" / "report.html").read_text()
    return page.split("<h2>Judging over time")[1].split("<h2>")[0]


def test_placeholder_verdicts_are_marked_beside_their_model(data_root):
    """An evaluator configured for a real model whose verdicts came from the local judge's placeholder: the
    table names the model and marks the row; a real judge's row is not marked."""
    write_day(data_root, "helpful", "2026-11-09", "openai/gpt-4o-mini", "gpt-4o-mini-2024-07-18", [0.2, 0.4])
    write_day(data_root, "helpful", "2026-11-10", "local/mock", "local/mock", [0.9, 0.1, None])
    write_day(data_root, "tone", "2026-11-10", "openai/mock", "local/mock", [0.5])  # the local judge's mock model
    refresh(DataRoot.from_env(data_root))
    build_report(data_root)
    section = judging_section(data_root)
    assert "<th>model</th><th>verdicts</th><th>mean_score</th>" in section
    assert "<td>helpful</td><td>2026-11-09</td><td>openai/gpt-4o-mini</td><td></td><td>0.3</td>" in section
    mark = PLACEHOLDER_MARK  # no character HTML escapes
    assert f"<td>helpful</td><td>2026-11-10</td><td>local/mock</td><td>{mark}</td><td>0.5</td>" in section
    assert f"<td>tone</td><td>2026-11-10</td><td>openai/mock</td><td>{mark}</td>" in section


def test_days_without_data_break_the_line_and_rates_stay_within_0_and_1(data_root):
    """Oct 30 and Nov 9 have rows, the days between none: the lines have no segment across the gap (NaN on the
    empty days) and the FAILED-rate axis runs from 0 to 1."""
    write_day(data_root, "helpful", "2026-10-30", "openai/gpt-4o-mini", "gpt-4o-mini", [0.5, None])
    write_day(data_root, "helpful", "2026-10-31", "openai/gpt-4o-mini", "gpt-4o-mini", [0.7, 0.7])
    write_day(data_root, "helpful", "2026-11-09", "openai/gpt-4o-mini", "gpt-4o-mini", [0.9, 0.9])
    refresh(DataRoot.from_env(data_root))
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        figure = judging_figure(*daily_judging(conn))
    mean_ax, rate_ax, cost_ax = figure.get_axes()
    for ax in (mean_ax, rate_ax, cost_ax):
        [line] = ax.get_lines()
        values = list(line.get_ydata())
        assert len(values) == 11  # Oct 30 .. Nov 9, each day
        assert all(math.isnan(v) for v in values[2:10]), values  # the gap: nothing drawn across it
        assert not any(math.isnan(v) for v in (values[0], values[1], values[10]))
    assert list(mean_ax.get_lines()[0].get_ydata()[[0, 1, 10]]) == [0.5, 0.7, 0.9]
    assert rate_ax.get_ylim() == (0.0, 1.0)


def test_the_experiments_table_says_which_rows_are_stale(data_root):
    """An experiment whose file broke keeps its last rows flagged stale in `experiment_results`: the report's
    table shows the flag and the reason, and the plot's label says STALE."""
    base = {"evaluator": "helpful", "control_variant": "a", "variant": "b", "kind": "comparison", "method": "welch"}
    rows = [
        {**base, "experiment": "current", "difference": 0.1, "diff_ci_low": 0.0, "diff_ci_high": 0.2, "stale": False},
        {
            **base,
            "experiment": "broken_file",
            "difference": 0.3,
            "diff_ci_low": 0.1,
            "diff_ci_high": 0.5,
            "stale": True,
            "stale_reason": "experiments/broken_file.yaml: field 'variants': Field required",
        },
    ]
    write_partition(
        DataRoot.from_env(data_root), "experiment_results", {}, conform(pl.DataFrame(rows), EXPERIMENT_RESULT_SCHEMA)
    )
    refresh(DataRoot.from_env(data_root))
    build_report(data_root)
    page = (data_root / "reports" / "report.html").read_text()
    section = page.split("<h2>Experiments")[1].split("<h2>")[0]
    assert "<th>experiment</th><th>stale</th>" in section
    assert "<td>broken_file</td><td>STALE</td>" in section and "<td>current</td><td></td>" in section
    assert "field &#x27;variants&#x27;: Field required" in section
