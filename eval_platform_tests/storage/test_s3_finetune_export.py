"""A fine-tuning export on the S3 warehouse: the day's JSONL and manifest are objects of the bucket, replaced whole
by a rerun, read back through the storage functions, and nothing lands in the local warehouse."""

from __future__ import annotations

import json
import uuid

import polars as pl
import pytest

from eval_platform.finetune.config import FinetuneExport
from eval_platform.finetune.day import TABLE, run_day
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform
from eval_platform.settings import warehouse_dir
from eval_platform.storage import location
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import read_file, write_partition
from eval_platform_tests.finetune.openai_format import check_line

DAY = "2026-11-10"


@pytest.fixture
def bucket_root(tmp_path, s3_server, monkeypatch):
    bucket = s3_server.create_bucket(f"finetune-{uuid.uuid4().hex[:12]}")
    for name, value in s3_server.env(f"s3://{bucket}/eval").items():
        monkeypatch.setenv(name, value)
    return tmp_path / "data", bucket


def test_the_export_is_written_to_the_bucket_and_replaced_whole(bucket_root, s3_server):
    root, bucket = bucket_root
    where = DataRoot.from_env(root)
    assert isinstance(location.DataRoot.from_env(root).store, location.S3Store)
    traces = pl.DataFrame(
        {"trace_id": ["a", "b"], "date": [DAY, DAY], "input": ["hi", "bye"], "output": ["Hello", "Bye"]}
    ).with_columns(pl.lit(f"{DAY}T10:00:00").str.to_datetime(time_zone="UTC").alias("timestamp"))
    write_partition(where, "traces", {"date": DAY}, conform(traces, TRACE_SCHEMA))

    def scores(a: float, b: float) -> None:
        frame = pl.DataFrame(
            {
                "evaluator": "quality",
                "date": DAY,
                "trace_id": ["a", "b"],
                "status": "COMPLETED",
                "score": [a, b],
                "is_final": True,
            }
        )
        write_partition(
            where,
            "judge_scores",
            {"evaluator": "quality", "date": DAY},
            conform(frame, JUDGE_SCORE_SCHEMA),
        )

    export = FinetuneExport(name="good", evaluators=[{"evaluator": "quality", "min_score": 0.5}])
    keys = {"export": "good", "date": DAY}
    scores(0.9, 0.1)
    done = run_day(where, DAY, {"good": export})
    assert done["good"]["path"] == f"s3://{bucket}/eval/{TABLE}/export=good/date={DAY}/train.jsonl"
    lines = read_file(where, TABLE, keys, "train.jsonl").decode().splitlines()
    assert [check_line(line) for line in lines] == [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "Hello"}]}
    ]
    scores(0.1, 0.9)  # the verdicts changed: the rerun's file replaces the first one whole
    run_day(where, DAY, {"good": export})
    assert [
        check_line(line)["messages"][0]["content"]
        for line in read_file(where, TABLE, keys, "train.jsonl").decode().splitlines()
    ] == ["bye"]
    manifest = json.loads(read_file(where, TABLE, keys, "manifest.json"))
    assert manifest["trace_ids"] == ["b"] and manifest["excluded_by_reason"] == {"below_threshold:quality": 1}
    objects = s3_server.objects(f"{bucket}/eval/{TABLE}")
    assert sorted(key.rsplit("/", 1)[1] for key in objects) == ["manifest.json", "train.jsonl"]
    assert read_file(where, TABLE, {"export": "good", "date": "2026-11-11"}, "train.jsonl") is None
    assert not warehouse_dir(root).exists()
