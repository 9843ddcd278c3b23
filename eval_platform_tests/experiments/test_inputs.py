"""What experiment_results reads from a real warehouse: the final completed rows of the evaluators asked for, older
partitions without the newer columns, and one row per trace."""

from __future__ import annotations

import polars as pl

from eval_platform.experiments.config import ExperimentConfig
from eval_platform.experiments.inputs import read_final_scores, read_trace_variants
from eval_platform.experiments.pairwise import pairwise_verdicts
from eval_platform.schemas import JUDGE_SCORE_SCHEMA, TRACE_SCHEMA, conform
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition


def _scores(evaluator: str, rows: list[dict]) -> pl.DataFrame:
    base = {"evaluator": evaluator, "date": "2026-10-01", "is_final": True, "status": "COMPLETED"}
    return conform(pl.DataFrame([{**base, **row} for row in rows], infer_schema_length=None), JUDGE_SCORE_SCHEMA)


def test_final_completed_rows_of_the_evaluators_asked_for(tmp_path):
    where = DataRoot.from_env(tmp_path)
    write_partition(
        where,
        "judge_scores",
        {"evaluator": "helpful", "date": "2026-10-01"},
        _scores(
            "helpful",
            [
                {"trace_id": "t1", "score": 4.0, "variant": "v1", "experiment_id": "x"},
                {"trace_id": "t2", "score": 2.0, "status": "FAILED"},
                {"trace_id": "t3", "score": 5.0, "is_final": False},
            ],
        ),
    )
    # an older partition: no variant, experiment_id or trace_id_b columns, and a column since dropped
    older = (
        _scores("helpful", [{"trace_id": "t4", "score": 3.0, "date": "2026-10-02"}])
        .drop("variant", "experiment_id", "trace_id_b")
        .with_columns(pl.lit("x").alias("retired_column"))
    )
    write_partition(where, "judge_scores", {"evaluator": "helpful", "date": "2026-10-02"}, older)
    write_partition(
        where,
        "judge_scores",
        {"evaluator": "other", "date": "2026-10-01"},
        _scores("other", [{"trace_id": "t1", "score": 1.0}]),
    )
    frame = read_final_scores(where, ["helpful", "missing"]).sort("trace_id")
    assert frame.select("evaluator", "trace_id", "score", "variant", "experiment_id").rows() == [
        ("helpful", "t1", 4.0, "v1", "x"),
        ("helpful", "t4", 3.0, None, None),
    ]
    assert frame.schema["score"] == JUDGE_SCORE_SCHEMA["score"]
    assert read_final_scores(where, ["missing"]).is_empty()
    assert read_final_scores(DataRoot.from_env(tmp_path / "empty"), ["helpful"]).columns == frame.columns


def _traces(rows: list[tuple]) -> pl.DataFrame:
    return conform(pl.DataFrame(rows, schema=["trace_id", "experiment_id", "variant"], orient="row"), TRACE_SCHEMA)


def test_one_row_per_trace(tmp_path):
    where = DataRoot.from_env(tmp_path)
    write_partition(where, "traces", {"date": "2026-10-01"}, _traces([("t1", "x", "v1"), ("t2", "x", "v2")]))
    write_partition(where, "traces", {"date": "2026-10-02"}, _traces([("t3", "x", "v1")]))
    assert sorted(read_trace_variants(where).rows()) == [
        ("t1", "x", "v1"),
        ("t2", "x", "v2"),
        ("t3", "x", "v1"),
    ]
    # a trace seen twice (written on two days) keeps its values, the first that are not null
    write_partition(where, "traces", {"date": "2026-10-03"}, _traces([("t1", None, None), ("t4", None, "v2")]))
    assert sorted(read_trace_variants(where).rows()) == [
        ("t1", "x", "v1"),
        ("t2", "x", "v2"),
        ("t3", "x", "v1"),
        ("t4", None, "v2"),
    ]


def test_pairwise_sides_take_the_first_row_of_a_repeated_trace():
    config = ExperimentConfig(
        name="e", control="v1", treatments=["v2"], primary_metric={"evaluator": "q"}, pairwise_evaluator="p"
    )
    scores = _scores(
        "p",
        [{"trace_id": "t1", "trace_id_b": "t2", "winner": "A"}, {"trace_id": "t2", "trace_id_b": "t3", "winner": "B"}],
    )
    traces = pl.DataFrame(
        {"trace_id": ["t1", "t2", "t2", "t3"], "variant": ["v1", "v2", "v1", "v1"], "experiment_id": [None] * 4},
        schema_overrides={"experiment_id": pl.String},
    )
    pairs = pairwise_verdicts(config, scores, traces).sort("left")
    assert pairs.select("left", "right", "winner").rows() == [("v1", "v2", "left"), ("v2", "v1", "right")]


def test_pairwise_sides_found_by_trace_id_whatever_the_order_of_the_traces():
    config = ExperimentConfig(
        name="e",
        control="v1",
        treatments=["v2"],
        primary_metric={"evaluator": "q"},
        pairwise_evaluator="p",
        experiment_id="x",
    )
    ids = [f"t{i}" for i in range(230)]
    scores = _scores(
        "p",
        [
            {"trace_id": ids[i], "trace_id_b": ids[(i * 7 + 3) % 230], "winner": ["A", "B", "tie"][i % 3]}
            for i in range(200)
        ],
    )  # some B sides are not traces: those verdicts are left out
    traces = pl.DataFrame(
        {
            "trace_id": ids[:200][::-1],
            "variant": [f"v{1 + (i % 2)}" for i in range(200)][::-1],
            "experiment_id": ["x" if i % 5 else "y" for i in range(200)][::-1],
        }
    )
    pairs = pairwise_verdicts(config, scores, traces)
    variant = dict(zip(traces["trace_id"], traces["variant"], strict=True))
    experiment = dict(zip(traces["trace_id"], traces["experiment_id"], strict=True))
    expected = [
        (variant[a], variant[b], {"A": "left", "B": "right", "tie": "tie"}[w])
        for a, b, w in scores.select("trace_id", "trace_id_b", "winner").rows()
        if b in variant and experiment[a] == experiment[b] == "x" and variant[a] != variant[b]
    ]
    assert sorted(pairs.select("left", "right", "winner").rows()) == sorted(expected) and expected
