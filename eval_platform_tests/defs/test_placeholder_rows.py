"""Figures computed from the local judge's placeholder verdicts say so (issue 30): `experiment_results`, `alerts`
and the judge rows of `agreement` carry `placeholder`, and the report's experiments table shows the mark. Real
materializations in a temp Dagster instance, the placeholder answered over HTTP by the local judge."""

from __future__ import annotations

import json

import dagster as dg
import duckdb
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.report import build_report
from eval_platform.schemas import PLACEHOLDER_MARK
from eval_platform_tests.conftest import write_evaluator

DAY = "2026-11-09"


def materialize(defs, asset, instance, partition=None):
    return dg.materialize(
        list(defs.assets), selection=[asset], partition_key=partition, instance=instance, resources=defs.resources
    )


def query(root, sql: str) -> list[tuple]:
    with duckdb.connect(str(root / "eval_platform.duckdb"), read_only=True) as conn:
        return conn.execute(sql).fetchall()


def test_rows_computed_from_placeholder_verdicts_are_marked(data_root, local_judge, tmp_path):
    """Two evaluators on the same 24 traces of an A/B experiment: `real` (a scripted judge) and `stand_in`
    (the local judge's placeholder, `openai/mock`). Every row computed from stand_in's verdicts is marked,
    none of real's."""
    folder = data_root / "traces" / DAY
    folder.mkdir(parents=True)
    lines = []
    for i in range(24):
        reply = json.dumps({"score": 2 + i % 4, "reasoning": f"answer {i}"})
        lines.append(
            json.dumps(
                {
                    "trace_id": f"t{i:02d}",
                    "timestamp": f"{DAY}T10:{i:02d}:00Z",
                    "input": "Where is my order?",
                    "output": reply,  # what `echo/output` answers
                    "experiment_id": "checkout",
                    "variant": "ab"[i % 2],
                }
            )
        )
    (folder / "export.jsonl").write_text("\n".join(lines) + "\n")
    for name, model in (("real", "openai/echo/output"), ("stand_in", "openai/mock")):
        write_evaluator(
            data_root,
            name,
            mode="score",
            model=model,
            api_base=local_judge.base_url,
            prompt="Question: {{input}}\nAnswer: {{output}}",
            score_scale={"min": 1, "max": 5},
            alerts=["mean <= 1"],  # always broken: one threshold alert per evaluator
        )
    (data_root / "experiments").mkdir()
    (data_root / "experiments" / "checkout.yaml").write_text(
        yaml.safe_dump(
            {
                "experiment_id": "checkout",
                "control": "a",
                "treatments": ["b"],
                "primary_metric": {"evaluator": "real", "field": "score", "direction": "increase"},
                "guardrails": [
                    {
                        "evaluator": "stand_in",
                        "field": "score",
                        "direction": "increase",
                        "must_not_be_significantly_worse": True,
                    }
                ],
                "minimum_sample_size": 5,
            }
        )
    )
    defs = build_definitions(data_root)
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        assert materialize(defs, "traces", instance, DAY).success
        for name in ("real", "stand_in"):
            key = dg.MultiPartitionKey({"date": DAY, "evaluator": name})
            assert materialize(defs, "judge_scores", instance, key).success
        for asset in ("experiment_results", "alerts", "agreement"):
            assert materialize(defs, asset, instance).success
        shown = instance.get_latest_materialization_event(
            dg.AssetKey("experiment_results")
        ).asset_materialization.metadata

    # every verdict behind stand_in's rows is the placeholder's; none behind real's
    assert query(data_root, "SELECT DISTINCT evaluator, provider_model LIKE 'local/mock%' FROM judge_scores") in (
        [("real", False), ("stand_in", True)],
        [("stand_in", True), ("real", False)],
    )
    experiments = query(data_root, "SELECT DISTINCT kind, evaluator, placeholder FROM experiment_results ORDER BY ALL")
    assert experiments == [
        ("comparison", "real", False),
        ("comparison", "stand_in", True),
        ("variant", "real", False),
        ("variant", "stand_in", True),
    ]
    assert shown["placeholder_rows"].value == f"3 of 6 rows: {PLACEHOLDER_MARK}"
    alerts = query(data_root, "SELECT evaluator, kind, placeholder FROM alerts ORDER BY ALL")
    assert alerts == [("real", "threshold", False), ("stand_in", "threshold", True)]
    judge_rows = query(
        data_root,
        "SELECT DISTINCT subject, reference, placeholder FROM agreement WHERE section = 'judge_vs_judge'",
    )
    assert judge_rows and all(placeholder for *_, placeholder in judge_rows)
    assert {side for row in judge_rows for side in row[:2]} == {"real", "stand_in"}

    build_report(data_root)
    page = (data_root / "reports" / "report.html").read_text()
    section = page.split("<h2>Experiments")[1].split("<h2>")[0]
    assert "<th>experiment</th><th>stale</th><th>placeholder</th><th>evaluator</th>" in section
    assert f"<td>checkout</td><td></td><td>{PLACEHOLDER_MARK}</td><td>stand_in</td>" in section
    assert "<td>checkout</td><td></td><td></td><td>real</td>" in section
