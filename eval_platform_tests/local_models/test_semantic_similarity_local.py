"""`semantic_similarity` with a local sentence-embedding model (`model_path`): the vectors come from the folder
(`local_models.embed_texts`), in this process, with no call and no cost; a folder that cannot be read is a config
error naming it, or (gone at run time) a FAILED row with the reason, never a score."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from pydantic import ValidationError

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.local_models import embed_texts
from eval_platform_tests.judging.test_checks import DAY, traces

ROWS = [
    {"trace_id": "close", "output": "the cat sat on the mat", "expected_output": "the cat sat on a mat"},
    {"trace_id": "far", "output": "revenue rose four percent", "expected_output": "the cat sat on the mat"},
    {"trace_id": "empty_answer", "output": "  ", "expected_output": "x"},
]


def evaluator(model_path: str, **check) -> EvaluatorConfig:
    spec = {"scorer": "semantic_similarity", "model_path": model_path, "pass_threshold": 0.5, **check}
    return EvaluatorConfig.model_validate({"name": "similar_local", "check": spec})


def cosine(a, b) -> float:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_local_model_scores_the_cosine_of_its_own_vectors_with_no_call_and_no_cost(
    tiny_bert, runtime, network_attempts
):
    rows = {r["trace_id"]: r for r in judge_day(evaluator(str(tiny_bert)), DAY, traces(ROWS), runtime).rows.to_dicts()}
    for name in ("close", "far"):
        trace = next(t for t in ROWS if t["trace_id"] == name)
        out, ref = embed_texts(str(tiny_bert), [trace["output"], trace["expected_output"]])
        row = rows[name]
        assert row["status"] == "COMPLETED"
        assert row["raw_score"] == pytest.approx(cosine(out, ref), abs=1e-6)
        assert row["cost_usd"] == 0.0
    assert rows["close"]["raw_score"] > rows["far"]["raw_score"]
    assert rows["empty_answer"]["score"] == 0.0
    assert network_attempts == []  # nothing fetched, nothing sent


def test_a_local_model_is_one_model_not_a_provider_and_its_folder_is_checked_at_load(tiny_bert, tmp_path):
    with pytest.raises(ValidationError, match="exactly one of model"):
        evaluator(str(tiny_bert), model="openai/text-embedding-3-small")
    with pytest.raises(ValidationError, match="api_key_env"):
        evaluator(str(tiny_bert), api_key_env="OPENAI_API_KEY")
    with pytest.raises(ValidationError, match=str(tmp_path / "nowhere")):
        evaluator(str(tmp_path / "nowhere"))
    with pytest.raises(ValidationError, match="budget bounds nothing"):
        EvaluatorConfig.model_validate(
            {
                "name": "similar_local",
                "check": {"scorer": "semantic_similarity", "model_path": str(tiny_bert)},
                "max_daily_cost_usd": 1.0,
            }
        )


def test_a_folder_whose_weights_cannot_be_read_fails_every_row_with_the_reason(tiny_bert, tmp_path, runtime):
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    weights = [p for p in copy.iterdir() if p.suffix in (".safetensors", ".bin")]
    assert weights
    for path in weights:
        path.write_bytes(b"not weights")
    rows = judge_day(evaluator(str(copy)), DAY, traces(ROWS[:2]), runtime).rows.to_dicts()
    assert [r["status"] for r in rows] == ["FAILED", "FAILED"]
    assert {r["reason"] for r in rows} == {"local_model_error"}
    assert all(str(copy) in r["reason_detail"] for r in rows)
    assert all(r["score"] is None for r in rows)


def test_a_folder_gone_at_run_time_fails_the_run_naming_it(tiny_bert, tmp_path, runtime):
    """Its options are checked again when the day is judged: the run stops with the folder named, no row is
    written as if scored (the partition stays re-runnable)."""
    copy = tmp_path / "copy"
    shutil.copytree(tiny_bert, copy)
    config = evaluator(str(copy))
    shutil.rmtree(copy)
    with pytest.raises(ValueError, match=str(copy)):
        judge_day(config, DAY, traces(ROWS[:2]), runtime)
