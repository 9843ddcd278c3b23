"""Every asset materialized for real (a Dagster instance in a temp DAGSTER_HOME, the local judge over HTTP) with the
warehouse on the local S3 server, chosen by the resource's `dg.EnvVar` settings: downstream assets read what
upstream ones wrote to the bucket, the catalog's views answer what they answer on local disk, nothing lands in the
local warehouse, and no piece of the secret key is in any file or log line."""

from __future__ import annotations

import uuid
from pathlib import Path

import dagster as dg
import duckdb
import yaml

from eval_platform.definitions import build_definitions
from eval_platform.report import REPORT_FILE
from eval_platform.settings import warehouse_dir
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import open_catalog
from eval_platform_tests.conftest import write_evaluator
from eval_platform_tests.defs.test_no_key_leaks import decoded_texts
from eval_platform_tests.defs.test_pipeline import DAYS, key, write_day
from eval_platform_tests.s3_server import SECRET_ACCESS_KEY

PIECES = sorted({SECRET_ACCESS_KEY[i : i + 8] for i in range(len(SECRET_ACCESS_KEY) - 7)})
EVALUATORS = ("helpfulness", "preference")
# What each view answers, volatile columns (clocks, latencies) left out.
QUERIES = {
    "traces": "SELECT trace_id, date, variant, cost_usd FROM traces",
    "quarantine": "SELECT source, partition, reason FROM quarantine",
    "judge_scores": "SELECT evaluator, date, trace_id, status, score, label, cache_hit FROM judge_scores",
    "judge_cost_daily": "SELECT evaluator, model, calls, completed, spend_usd FROM judge_cost_daily",
    "judge_cost_monthly": "SELECT evaluator, model, calls, completed, days FROM judge_cost_monthly",
    "app_cost_daily": "SELECT day, traces, app_cost_usd FROM app_cost_daily",
    "experiment_results": "SELECT experiment, kind, variant, metric, n, mean FROM experiment_results",
    "agreement": "SELECT * EXCLUDE (computed_at) FROM agreement",
}


def write_project(root: Path, judge_url: str) -> None:
    (root / "evaluators").mkdir(parents=True)
    for day in DAYS:
        write_day(root, day)
    common = {"model": "openai/mock", "api_base": judge_url, "temperature": 0.0}
    write_evaluator(root, "helpfulness", mode="score", score_scale={"min": 0, "max": 1}, prompt="{{input}}", **common)
    write_evaluator(root, "preference", mode="pairwise", prompt="{{input}}: {{output_a}} vs {{output_b}}", **common)
    (root / "experiments").mkdir()
    experiment = {"experiment_id": "ab", "control": "a", "treatments": ["b"]}
    experiment["primary_metric"] = {"evaluator": "helpfulness"}
    (root / "experiments" / "ab.yaml").write_text(yaml.safe_dump(experiment))


def run_everything(root: Path, home: Path) -> dict[str, list]:
    defs = build_definitions(root)
    assets = list(defs.assets)

    def materialize(selection, partition=None):
        result = dg.materialize(
            assets=assets, selection=selection, partition_key=partition, instance=instance, resources=defs.resources
        )
        assert result.success, selection

    home.mkdir()
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        for day in DAYS:
            materialize(["traces"], day)
        for evaluator in EVALUATORS:
            for day in DAYS:
                materialize(["judge_scores"], key(day, evaluator))
        materialize(["judge_scores"], key(DAYS[0], "helpfulness"))  # re-materialized: replaced, from the cache
        for asset in ("quarantine", "judge_cost_daily", "judge_cost_monthly", "app_cost_daily", "agreement"):
            materialize([asset])
        materialize(["experiment_results"])
        materialize(["report"])
    with open_catalog(DataRoot.from_env(root)) as conn:
        return {table: conn.execute(f"{sql} ORDER BY ALL").fetchall() for table, sql in QUERIES.items()}


def test_every_asset_on_the_bucket_answers_as_on_local_disk(tmp_path, s3_server, local_judge, monkeypatch):
    local_root, bucket_root = tmp_path / "local" / "data", tmp_path / "bucket" / "data"
    for root in (local_root, bucket_root):
        write_project(root, local_judge.base_url)
    on_disk = run_everything(local_root, tmp_path / "local" / "dagster_home")

    bucket = s3_server.create_bucket(f"warehouse-{uuid.uuid4().hex[:12]}")
    for name, value in s3_server.env(f"s3://{bucket}/team/eval").items():
        monkeypatch.setenv(name, value)
    declared = build_definitions(bucket_root).resources["warehouse"].get_resource_definition().config_schema
    assert declared.default_value["s3_secret_access_key"] == {"env": "AWS_SECRET_ACCESS_KEY"}  # the name, not the key
    on_bucket = run_everything(bucket_root, tmp_path / "bucket" / "dagster_home")

    assert on_bucket == on_disk
    assert len(on_bucket["judge_scores"]) == 18 and len(on_bucket["traces"]) == 12 and on_bucket["experiment_results"]
    assert not warehouse_dir(bucket_root).exists()  # every partition went to the bucket
    objects = s3_server.objects(f"{bucket}/team/eval")
    assert f"{bucket}/team/eval/judge_scores/evaluator=preference/date={DAYS[1]}/part.parquet" in objects
    report = (bucket_root / REPORT_FILE).read_text()  # written from the catalog's views over the bucket
    assert "helpfulness" in report and "no rows" not in report.split("helpfulness")[0][-200:]

    # The secret key reached the S3 clients only: no file under the data root or DAGSTER_HOME (Parquet, SQLite,
    # the DuckDB catalog, compute logs) holds any 8-character piece of it.
    found = [
        str(path)
        for path in sorted(p for p in tmp_path.joinpath("bucket").rglob("*") if p.is_file())
        if any(piece in text for text in decoded_texts(path) for piece in PIECES)
    ]
    assert not found
    with duckdb.connect(str(bucket_root / "eval_platform.duckdb"), read_only=True) as conn:
        rows = conn.execute("SELECT sql FROM duckdb_views() WHERE NOT internal").fetchall()
    views = "\n".join(sql for (sql,) in rows)
    assert f"s3://{bucket}/team/eval/judge_scores/**/part.parquet" in views
    assert not any(piece in views for piece in PIECES)
