"""`report`: one self-contained HTML file whose tables say what the DuckDB views say, and whose plots are real PNGs."""

from __future__ import annotations

import base64
import re
from datetime import date, timedelta

import dagster as dg
import duckdb

from eval_platform.definitions import build_definitions
from eval_platform.report import build_report, judging_figure
from eval_platform.schemas import PLACEHOLDER_MARK
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import copy_sample_days, write_evaluator

DAYS = ["2026-11-09", "2026-11-10"]


def test_report_shows_each_evaluator_per_day_and_says_what_is_missing(data_root, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    monkeypatch.delenv("NO_SUCH_KEY_SET", raising=False)
    for name in ("clarity", "tone"):
        write_evaluator(
            data_root,
            name,
            mode="score",
            model="openai/gpt-4o-mini",
            api_key_env="NO_SUCH_KEY_SET",
            prompt=f"Rate the {name} of {{{{output}}}}",
            score_scale={"min": 0, "max": 1},
        )
    copy_sample_days(data_root, DAYS)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        for day in DAYS:
            assert dg.materialize(
                list(defs.assets), selection=["traces"], partition_key=day, instance=instance, resources=defs.resources
            ).success
            for name in ("clarity", "tone"):
                key = dg.MultiPartitionKey({"date": day, "evaluator": name})
                assert dg.materialize(
                    list(defs.assets),
                    selection=["judge_scores"],
                    partition_key=key,
                    instance=instance,
                    resources=defs.resources,
                ).success
        result = dg.materialize(list(defs.assets), selection=["report"], instance=instance, resources=defs.resources)
        assert result.success
        metadata = result.asset_materializations_for_node("report")[0].metadata
    path = data_root / "reports" / "report.html"
    assert metadata["path"].value == str(path)
    page = path.read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == 1 and metadata["plots"].value == 1  # one panel grid for judging; nothing else has rows
    assert all(base64.b64decode(image).startswith(b"\x89PNG") for image in images)
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        means = conn.execute(
            "SELECT evaluator, date, model, avg(score) FROM judge_scores WHERE is_final AND status = 'COMPLETED' "
            "GROUP BY ALL"
        ).fetchall()
    assert len(means) == 4
    for evaluator, day, model, mean in means:
        mark = PLACEHOLDER_MARK if model == "local/mock" else ""  # the model that answered, marked if a stand-in
        assert f"<td>{evaluator}</td><td>{day}</td><td>{model}</td><td>{mark}</td><td>{mean:.4g}</td>" in page
    for missing in ("No judge-vs-human agreement yet", "No experiment comparisons yet", "No benchmark results yet"):
        assert missing in page
    assert len(metadata["empty_sections"].value) == 3


def test_the_date_axis_stays_readable_at_90_days(data_root):
    """90 days of one evaluator's scores: each panel's date axis shows a few distinct dates, not 90 labels."""
    import polars as pl

    from eval_platform.defs.catalog import refresh
    from eval_platform.report import daily_judging, judging_figure
    from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform
    from eval_platform.storage.warehouse import write_partition

    start = date(2026, 8, 1)
    days = [(start + timedelta(days=i)).isoformat() for i in range(90)]
    for i, day in enumerate(days):
        rows = pl.DataFrame(
            {
                "evaluator": ["clarity"] * 2,
                "date": [day] * 2,
                "trace_id": [f"{day}-a", f"{day}-b"],
                "is_final": [True, True],
                "status": ["COMPLETED", "FAILED"],
                "score": [0.5 + (i % 7) / 20, None],
                "cost_usd": [0.001, 0.0],
            }
        )
        rows = conform(rows, JUDGE_SCORE_SCHEMA)
        write_partition(DataRoot.from_env(data_root), "judge_scores", {"evaluator": "clarity", "date": day}, rows)
    refresh(DataRoot.from_env(data_root))

    summary = build_report(data_root)
    assert summary.evaluators == 1 and summary.plots == 1
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        figure = judging_figure(*daily_judging(conn))
    figure.draw_without_rendering()  # lays out the ticks as savefig does
    axes = figure.get_axes()
    assert len(axes) == 3  # mean score, FAILED rate, cost
    for ax in axes:
        low, high = ax.get_xlim()
        labels = [t.get_text() for t in ax.get_xticklabels() if low <= t.get_position()[0] <= high]
        assert 3 <= len(labels) <= 8, labels
        assert len(set(labels)) == len(labels) and all(labels), labels
        # the labels name the months the 90 days cover: a reader can tell where on the calendar a point is
        assert {"Aug", "Sep", "Oct"} <= set(labels) | {ax.xaxis.get_offset_text().get_text()}, labels


def test_daily_table_shows_the_human_calibrated_mean_beside_the_judges(data_root):
    """A judge a fifth too generous on a day where humans labelled 30 of 200 traces: the day's row carries the
    prediction-powered mean and interval (from `agreement`, section calibrated) beside the judge's own mean, and
    the mean-score panel draws it."""
    import numpy as np
    import polars as pl

    from eval_platform.agreement import compute
    from eval_platform.defs.catalog import refresh
    from eval_platform.judging.config import EvaluatorConfig
    from eval_platform.report import daily_judging
    from eval_platform.schemas import HUMAN_ANNOTATION_SCHEMA, IMPORTED_JUDGMENT_SCHEMA, JUDGE_SCORE_SCHEMA, conform
    from eval_platform.storage.warehouse import write_partition

    rng = np.random.default_rng(5)
    day = "2026-11-09"
    truth = rng.random(200) < 0.5
    passed = truth | (rng.random(200) < 0.4)
    traces = [f"t{i}" for i in range(200)]
    scores = conform(
        pl.DataFrame(
            {
                "evaluator": "helpful",
                "date": day,
                "trace_id": traces,
                "is_final": True,
                "status": "COMPLETED",
                "score": passed.astype(float),
                "passed": passed,
                "cost_usd": 0.0,
            }
        ),
        JUDGE_SCORE_SCHEMA,
    )
    write_partition(DataRoot.from_env(data_root), "judge_scores", {"evaluator": "helpful", "date": day}, scores)
    annotations = conform(
        pl.DataFrame(
            {
                "task": "review",
                "criterion": "helpful",
                "item_id": traces[:30],
                "trace_id": traces[:30],
                "annotator": "ann",
                "schema": "classification",
                "label": [str(t).lower() for t in truth[:30]],
            }
        ),
        HUMAN_ANNOTATION_SCHEMA,
    )
    config = EvaluatorConfig(
        name="helpful",
        mode="binary",
        model="openai/x",
        prompt="{{output}}",
        human_agreement={"task": "review", "criterion": "helpful"},
    )
    rows, _ = compute({"helpful": config}, scores, annotations, conform(pl.DataFrame(), IMPORTED_JUDGMENT_SCHEMA))
    write_partition(DataRoot.from_env(data_root), "agreement", {}, rows)
    refresh(DataRoot.from_env(data_root))

    build_report(data_root)
    page = (data_root / "reports" / "report.html").read_text()
    day_row = rows.filter((pl.col("section") == "calibrated") & (pl.col("period") == "day"))
    figures = dict(day_row.select("statistic", "value").rows())
    judge_mean = passed.mean()
    assert figures["judge_mean"] == judge_mean and figures["ppi_mean"] < judge_mean  # the bias is corrected
    cells = [judge_mean, 30, figures["ppi_mean"], figures["ppi_ci_low"], figures["ppi_ci_high"]]
    expected = "".join(f"<td>{v:.4g}</td>" if isinstance(v, float) else f"<td>{v}</td>" for v in cells)
    assert f"<td>helpful</td><td>{day}</td><td>–</td><td></td>{expected}" in page  # no model named, no mark
    with duckdb.connect(str(data_root / "eval_platform.duckdb"), read_only=True) as conn:
        daily, costs = daily_judging(conn)
    figure = judging_figure(daily, costs)
    assert "human-calibrated (PPI, 95% CI)" in [t.get_text() for t in figure.get_axes()[0].get_legend().get_texts()]


def test_a_sequential_comparison_shows_its_always_valid_figures(data_root):
    """`method: sequential` has no fixed-horizon p-value or interval: the experiments table shows the always-valid
    p-value, the confidence sequence, the corrected p-value and the rule that decided, and the plot draws the
    confidence sequence (marked as such) instead of leaving the comparison out."""
    import polars as pl

    from eval_platform.defs.catalog import refresh
    from eval_platform.schemas import EXPERIMENT_RESULT_SCHEMA, conform
    from eval_platform.storage.warehouse import write_partition

    base = {"experiment": "prompt_v2", "evaluator": "helpful", "control_variant": "a", "kind": "comparison"}
    rows = [
        {
            **base,
            "variant": "b",
            "method": "sequential",
            "difference": 0.1,
            "cs_low": 0.0234,
            "cs_high": 0.1766,
            "always_valid_p_value": 0.0123,
            "p_value_adjusted": 0.0246,
            "significant": True,
            "significance_rule": "Holm-adjusted always-valid p < 0.05 (2 tests)",
        },
        {
            **base,
            "variant": "c",
            "method": "sequential",
            "difference": -0.01,
            "always_valid_p_value": 1.0,
            "p_value_adjusted": 1.0,
            "significant": False,
            "significance_rule": "Holm-adjusted always-valid p < 0.05 (2 tests)",
        },
    ]
    write_partition(
        DataRoot.from_env(data_root), "experiment_results", {}, conform(pl.DataFrame(rows), EXPERIMENT_RESULT_SCHEMA)
    )
    refresh(DataRoot.from_env(data_root))

    summary = build_report(data_root)
    page = (data_root / "reports" / "report.html").read_text()
    section = page.split("<h2>Experiments")[1].split("<h2>")[0]
    for text in ("always_valid_p_value", "cs_low", "significance_rule", "0.0123", "0.0246", "0.0234", "0.1766"):
        assert text in section, text
    assert "Holm-adjusted always-valid p &lt; 0.05 (2 tests)" in section
    # the bounded sequence is drawn; the unbounded one (no cs yet) is listed, not drawn
    assert section.count('src="data:image/png;base64,') == 1 and summary.plots == 1
