"""A `semantic_similarity` check evaluator over a day of traces: its embeddings are fetched from the local judge's
`/v1/embeddings` over real HTTP through the one call path, and its rows count like a judge's (tokens, cost, calls,
cache hits, budgets, FAILED with a reason); the cost rollup includes them."""

from __future__ import annotations

import json

import httpx
import numpy as np
import polars as pl
import pytest

from eval_platform.costs import cost_rollup
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.runner import judge_day
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.conftest import judge_requests
from eval_platform_tests.judging.test_checks import DAY, traces

PRICED = "openai/text-embedding-3-small"  # 0.02 USD per million input tokens in litellm's map
ROWS = [
    {"trace_id": "close", "output": "The cat sat on the mat.", "expected_output": "the cat sat on a mat"},
    {"trace_id": "far", "output": "Revenue rose four percent.", "expected_output": "The cat sat on the mat."},
    {"trace_id": "same", "output": "Paris is the capital.", "expected_output": "paris IS the capital"},
    {"trace_id": "no_reference", "output": "Something.", "expected_output": None},
    {"trace_id": "no_answer", "output": None, "expected_output": "x"},
    {"trace_id": "empty_answer", "output": "   ", "expected_output": "x"},
    {"trace_id": "no_words", "output": "!!!", "expected_output": "x"},
]


def evaluator(local_judge, model: str = PRICED, **fields) -> EvaluatorConfig:
    check = {"scorer": "semantic_similarity", "model": model, "api_base": local_judge.base_url, "max_retries": 0}
    return EvaluatorConfig.model_validate(
        {"name": "similar", "check": {**check, "pass_threshold": 0.5, **fields.pop("check", {})}, **fields}
    )


def numpy_cosine(server, a: str, b: str) -> float:
    """The cosine of the vectors the local judge sends for `a` and `b`, with numpy, over plain HTTP."""
    body = httpx.post(f"{server.base_url}/embeddings", json={"model": "m", "input": [a, b]}, timeout=30).json()
    u, v = (np.array(d["embedding"]) for d in body["data"])
    return float(u @ v / (np.linalg.norm(u) * np.linalg.norm(v)))


def by_trace(rows: pl.DataFrame) -> dict[str, dict]:
    return {row["trace_id"]: row for row in rows.iter_rows(named=True)}


def test_scores_are_the_cosine_of_the_served_embeddings_and_cost_their_tokens(local_judge, runtime):
    config = evaluator(local_judge)
    before = judge_requests(local_judge)
    rows = by_trace(judge_day(config, DAY, traces(ROWS), runtime).rows)
    called = ["close", "far", "same", "no_words"]
    assert judge_requests(local_judge) - before == len(called)  # one request per trace it embeds
    for name in ("close", "far", "same"):
        row, trace = rows[name], next(t for t in ROWS if t["trace_id"] == name)
        expected = numpy_cosine(local_judge, trace["output"], trace["expected_output"])
        assert row["status"] == "COMPLETED" and row["model"] == "check:semantic_similarity"
        assert row["raw_score"] == pytest.approx(expected, abs=1e-6)
        assert row["score"] == pytest.approx(min(1.0, max(0.0, expected)), abs=1e-6)
        assert row["passed"] == (row["score"] >= 0.5)
        assert row["calls"] == 1 and not row["cache_hit"] and row["prompt_tokens"] > 0
        assert row["cost_usd"] == pytest.approx(row["prompt_tokens"] * 0.02 / 1e6)
        assert row["provider_model"] == "local/text-embedding-3-small" and row["raw_response"] is None
    assert rows["close"]["passed"] and not rows["far"]["passed"] and rows["same"]["score"] == pytest.approx(1.0)
    assert rows["far"]["score"] < rows["close"]["score"]
    # no reference, no answer: never a score; an empty answer is 0 with no call; a text without words has no cosine
    assert (rows["no_reference"]["status"], rows["no_reference"]["reason"]) == ("SKIPPED", "missing_field")
    assert (rows["no_answer"]["status"], rows["no_answer"]["reason"]) == ("SKIPPED", "missing_field")
    assert rows["empty_answer"]["status"] == "COMPLETED" and rows["empty_answer"]["score"] == 0.0
    assert rows["empty_answer"]["calls"] == 0 and rows["empty_answer"]["cost_usd"] == 0.0
    no_words = rows["no_words"]
    assert (no_words["status"], no_words["reason"], no_words["score"]) == ("SKIPPED", "not_applicable", None)
    assert no_words["calls"] == 1 and no_words["cost_usd"] > 0  # the call was made, and paid for

    # Re-run: every embedding from the cache, nothing sent, nothing paid, the same scores.
    before = judge_requests(local_judge)
    again = by_trace(judge_day(config, DAY, traces(ROWS), runtime).rows)
    assert judge_requests(local_judge) == before
    for name in called:
        assert again[name]["cache_hit"] and again[name]["cost_usd"] == 0.0 and again[name]["calls"] == 0
        assert again[name]["cached_cost_usd"] == pytest.approx(rows[name]["cost_usd"])
        assert again[name]["raw_score"] == rows[name]["raw_score"]


def test_a_threshold_makes_the_value_a_pass_rate(local_judge, runtime):
    config = evaluator(local_judge, check={"threshold": 0.5, "pass_threshold": 1.0})
    rows = by_trace(judge_day(config, DAY, traces(ROWS[:2]), runtime).rows)
    assert (rows["close"]["score"], rows["close"]["passed"]) == (1.0, True)
    assert (rows["far"]["score"], rows["far"]["passed"]) == (0.0, False)
    assert 0 < rows["close"]["raw_score"] < 1  # the cosine itself


def test_a_budget_that_cannot_afford_an_embedding_skips_it_unsent(local_judge, runtime):
    config = evaluator(local_judge, max_daily_cost_usd=0.0)
    before = judge_requests(local_judge)
    rows = judge_day(config, DAY, traces(ROWS[:3]), runtime).rows
    assert judge_requests(local_judge) == before
    assert rows["status"].to_list() == ["SKIPPED"] * 3 and set(rows["reason"]) == {"budget_exhausted"}
    assert rows["score"].null_count() == 3 and rows["cost_usd"].sum() == 0.0


def test_a_budget_counts_the_embeddings_spend_in_the_judges_ledger(local_judge, runtime):
    config = evaluator(local_judge, max_daily_cost_usd=1.0)
    rows = judge_day(config, DAY, traces(ROWS[:3]), runtime).rows
    assert rows["status"].to_list() == ["COMPLETED"] * 3
    day = runtime.ledger.clock().strftime("%Y-%m-%d")
    assert runtime.ledger.spent("similar", day=day) == pytest.approx(rows["cost_usd"].sum())


def test_a_failing_embeddings_endpoint_is_a_failed_row_with_its_reason(local_judge, runtime):
    config = evaluator(local_judge, model="openai/fault/server_error")
    rows = judge_day(config, DAY, traces(ROWS[:2]), runtime).rows
    assert rows["status"].to_list() == ["FAILED"] * 2 and set(rows["reason"]) == {"provider_error:500"}
    assert rows["score"].null_count() == 2 and rows["passed"].null_count() == 2
    assert all("injected by fault/server_error" in detail for detail in rows["reason_detail"])


def test_a_missing_key_skips_and_never_falls_back_on_the_local_stand_in(local_judge, runtime):
    config = evaluator(local_judge, check={"api_key_env": "NOT_SET_EMBEDDING_KEY", "api_base": None})
    rows = judge_day(config, DAY, traces(ROWS[:2]), runtime).rows
    assert set(rows["status"]) == {"SKIPPED"} and set(rows["reason"]) == {"no_credentials"}
    assert "NOT_SET_EMBEDDING_KEY" in rows["reason_detail"][0]


def test_budgets_are_refused_where_nothing_is_paid_or_nothing_is_priced(local_judge):
    with pytest.raises(ValueError, match="max_daily_cost_usd configure a judge"):
        EvaluatorConfig.model_validate({"name": "x", "check": {"scorer": "valid_json"}, "max_daily_cost_usd": 1.0})
    with pytest.raises(ValueError, match="no known price"):
        evaluator(local_judge, model="openai/in-house-embedder", max_daily_cost_usd=1.0)
    priced = evaluator(
        local_judge, model="openai/in-house-embedder", max_daily_cost_usd=1.0, check={"input_cost_per_million": 0.1}
    )
    assert priced.max_daily_cost_usd == 1.0


def test_the_cost_rollup_counts_embedding_checks_like_judge_calls(local_judge, runtime, tmp_path):
    root = tmp_path / "data"
    config = evaluator(local_judge)
    rows = judge_day(config, DAY, traces(ROWS), runtime).rows
    write_partition(DataRoot.from_env(root), "judge_scores", {"evaluator": "similar", "date": DAY}, rows)
    rollup = cost_rollup(DataRoot.from_env(root), {"similar": config}, runtime.ledger)
    assert rollup.height == 1
    row = rollup.row(0, named=True)
    assert row["evaluator"] == "similar" and row["model"] == "check:semantic_similarity"
    assert row["spend_usd"] == pytest.approx(rows["cost_usd"].sum()) and row["spend_usd"] > 0
    assert row["calls"] == 4 and row["prompt_tokens"] == rows["prompt_tokens"].sum()


def test_a_list_of_references_in_the_trace_file_is_several_references_the_closest_counting(
    data_root, local_judge, runtime
):
    """A trace file's `expected_output: [...]` is read (ingest) and scored as a suite's list is: the cosine with the
    closest reference, not with the list's JSON text as one reference."""
    from eval_platform.ingest.traces import read_trace_day

    day = data_root / "traces" / DAY
    day.mkdir(parents=True)
    references = ["Revenue rose four percent.", "The cat sat on the mat."]
    rows = [
        {"trace_id": "listed", "output": "The cat sat on the mat.", "expected_output": references},
        {"trace_id": "one", "output": "The cat sat on the mat.", "expected_output": "the cat sat on a mat"},
    ]
    lines = [json.dumps({**row, "timestamp": f"{DAY}T09:00:0{i}Z"}) for i, row in enumerate(rows)]
    (day / "traces.jsonl").write_text("\n".join(lines) + "\n")
    ingested = read_trace_day(data_root, DAY).traces
    similar = by_trace(judge_day(evaluator(local_judge), DAY, ingested, runtime).rows)
    listed = similar["listed"]
    closest = max(numpy_cosine(local_judge, "The cat sat on the mat.", ref) for ref in references)
    assert closest == pytest.approx(1.0)
    assert listed["status"] == "COMPLETED" and listed["raw_score"] == pytest.approx(closest, abs=1e-6)
    assert listed["passed"]
    assert similar["one"]["raw_score"] == pytest.approx(
        numpy_cosine(local_judge, "The cat sat on the mat.", "the cat sat on a mat"), abs=1e-6
    )
    # the other reference scorers read the same list, as in suites
    exact = EvaluatorConfig.model_validate({"name": "exact", "check": {"scorer": "exact_match"}})
    matched = by_trace(judge_day(exact, DAY, ingested, runtime).rows)
    assert (matched["listed"]["status"], matched["listed"]["score"]) == ("COMPLETED", 1.0)
