"""Turning the verdict export on and off, and a broken verdict_export.yaml: what the user sees in Dagster."""

from __future__ import annotations

import json

import dagster as dg
import pytest
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.export.config import ExportConfig
from eval_platform.export.run import export_partition
from eval_platform.storage.location import DataRoot
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.export.test_otlp_events import DAY, failure_text, key


@pytest.fixture
def root(data_root):
    write_evaluator(data_root, "quality", mode="score", model="openai/mock", prompt="{{input}} {{output}}")
    return data_root


def verdict_exports(root) -> tuple[dg.Definitions, dg.AssetsDefinition]:
    defs = build_definitions(root)
    return defs, defs.resolve_assets_def("verdict_exports")


def test_off_without_the_file_never_requested_and_a_manual_run_says_how_to_turn_it_on(root):
    defs, asset = verdict_exports(root)
    assert asset.automation_conditions_by_key.get(dg.AssetKey("verdict_exports")) is None
    assert "Off." in asset.descriptions_by_key[dg.AssetKey("verdict_exports")]
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            assets=list(defs.assets),
            selection=["verdict_exports"],
            partition_key=key("quality"),
            instance=instance,
            resources=defs.resources,
            raise_on_error=False,
        )
    assert not result.success
    failure = failure_text(result)
    assert "the verdict export is off" in failure and "verdict_export.yaml" in failure


def test_on_with_a_destination_requested_after_judging(root):
    destination = {"name": "c", "type": "otlp", "endpoint": "http://127.0.0.1:4318"}
    (root / "verdict_export.yaml").write_text(yaml.safe_dump({"destinations": [destination]}))
    _, asset = verdict_exports(root)
    assert asset.automation_conditions_by_key.get(dg.AssetKey("verdict_exports")) is not None
    assert "On: c." in asset.descriptions_by_key[dg.AssetKey("verdict_exports")]


def test_a_broken_file_names_the_file_and_field_and_the_rest_loads(root):
    broken = {"destinations": [{"name": "c", "type": "otlp", "endpoint": "http://x:1", "colour": "red"}]}
    (root / "verdict_export.yaml").write_text(yaml.safe_dump(broken))
    defs, asset = verdict_exports(root)
    description = asset.descriptions_by_key[dg.AssetKey("verdict_exports")]
    assert "BROKEN verdict_export.yaml" in description and "colour" in description
    assert asset.automation_conditions_by_key.get(dg.AssetKey("verdict_exports")) is None
    assert defs.resolve_assets_def("judge_scores") is not None


def test_an_unset_secret_variable_is_a_failed_send_naming_the_variable_not_a_silent_skip(root, monkeypatch):
    from eval_platform.storage.warehouse import write_partition

    monkeypatch.delenv("EXPORT_HEADERS_NOT_SET", raising=False)
    write_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": "quality", "date": DAY}, _one_verdict())
    write_partition(DataRoot.from_env(root), "traces", {"date": DAY}, _one_otlp_trace())
    config = ExportConfig.model_validate(
        {
            "destinations": [
                {"name": "c", "type": "otlp", "endpoint": "http://127.0.0.1:9", "headers_env": "EXPORT_HEADERS_NOT_SET"}
            ]
        }
    )
    report = export_partition(DataRoot.from_env(root), "quality", DAY, config, {})
    (destination,) = report.destinations
    assert destination.sent == 0 and destination.not_sent == 1
    assert "$EXPORT_HEADERS_NOT_SET" in destination.error


def _one_verdict():
    import polars as pl

    from eval_platform.schemas import JUDGE_SCORE_SCHEMA, conform

    row = {"evaluator": "quality", "date": DAY, "trace_id": "t1", "model": "openai/mock", "sample": 0}
    row |= {"role": "verdict", "is_final": True, "status": "COMPLETED", "score": 0.5, "config_hash": "h"}
    return conform(pl.DataFrame([row]), JUDGE_SCORE_SCHEMA)


def _one_otlp_trace():
    """A trace that came as OpenTelemetry spans: its one span stored in its row (the `spans` view reads it there)."""
    import json

    import polars as pl

    from eval_platform.schemas import TRACE_SCHEMA, conform

    span = {"otel_trace_id": "ab" * 16, "span_id": "cd" * 8, "parent_span_id": None, "name": "root"}
    row = {"trace_id": "t1", "date": DAY, "input": "q", "output": "a", "span_count": 1, "spans": json.dumps([span])}
    return conform(pl.DataFrame([row]), TRACE_SCHEMA)


def test_on_the_automation_sensor_requests_the_export_of_a_partition_once_it_is_judged(data_root, local_judge):
    write_evaluator(
        data_root,
        "quality",
        mode="score",
        model="openai/mock",
        api_base=local_judge.base_url,
        prompt="{{input}} {{output}}",
    )
    row = {"trace_id": "t1", "timestamp": f"{DAY}T10:00:00Z", "input": "Hi?", "output": "Hello."}
    (data_root / "traces" / DAY).mkdir(parents=True)
    (data_root / "traces" / DAY / "t.jsonl").write_text(json.dumps(row) + "\n")
    destination = {"name": "c", "type": "otlp", "endpoint": "http://127.0.0.1:4318"}
    (data_root / "verdict_export.yaml").write_text(yaml.safe_dump({"destinations": [destination]}))
    defs = build_definitions(data_root)
    with dg.instance_for_test() as instance:

        def run(asset, partition):
            assert dg.materialize(
                assets=list(defs.assets),
                selection=[asset],
                partition_key=partition,
                instance=instance,
                resources=defs.resources,
            ).success

        run("traces", DAY)
        before = dg.evaluate_automation_conditions(defs=defs, instance=instance)
        assert not before.get_requested_partitions(dg.AssetKey("verdict_exports"))
        run("judge_scores", key("quality"))
        after = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=before.cursor)
        assert after.get_requested_partitions(dg.AssetKey("verdict_exports")) == {key("quality")}
