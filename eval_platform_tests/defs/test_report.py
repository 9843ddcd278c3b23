"""`report`: one self-contained HTML file whose tables say what the DuckDB views say, and whose plots are real PNGs."""

from __future__ import annotations

import base64
import re

import dagster as dg
import duckdb

from eval_platform.definitions import build_definitions
from eval_platform_tests.conftest import copy_sample_days, write_evaluator

DAYS = ["2026-11-09", "2026-11-10"]


def test_report_shows_each_evaluator_per_day_and_says_what_is_missing(data_root, local_judge, monkeypatch):
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.delenv("NO_SUCH_KEY_SET", raising=False)
    for name in ("clarity", "tone"):
        write_evaluator(data_root, name, mode="score", model="openai/gpt-4o-mini", api_key_env="NO_SUCH_KEY_SET",
                        prompt=f"Rate the {name} of {{{{output}}}}", score_scale={"min": 0, "max": 1})
    copy_sample_days(data_root, DAYS)
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:
        for day in DAYS:
            assert dg.materialize(list(defs.assets), selection=["traces"], partition_key=day, instance=instance,
                                  resources=defs.resources).success
            for name in ("clarity", "tone"):
                key = dg.MultiPartitionKey({"date": day, "evaluator": name})
                assert dg.materialize(list(defs.assets), selection=["judge_scores"], partition_key=key,
                                      instance=instance, resources=defs.resources).success
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
            "SELECT evaluator, date, avg(score) FROM judge_scores WHERE is_final AND status = 'COMPLETED' GROUP BY ALL"
        ).fetchall()
    assert len(means) == 4
    for evaluator, date, mean in means:
        assert f"<td>{evaluator}</td><td>{date}</td><td>{mean:.4g}</td>" in page
    for missing in ("No judge-vs-human agreement yet", "No experiment comparisons yet", "No benchmark results yet"):
        assert missing in page
    assert len(metadata["empty_sections"].value) == 3
