"""A budget on a model under test: its calls reserve their worst case in a ledger of their own, the run stops
spending at the limit, and the cases it could not afford are SKIPPED `budget_exhausted`, never lost."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing

import dagster as dg
import pytest
import yaml

from eval_platform.benchmarks.config import SuiteError, load_models
from eval_platform.benchmarks.runner import benchmark_ledger, budget_name
from eval_platform.llm.budget import BudgetLedger
from eval_platform.settings import state_dir
from eval_platform_tests.benchmarks.test_generation_suite import (
    materialize,
    query,
    requests_for,
)
from eval_platform_tests.conftest import REPO_DATA

BUDGET_USD = 2.0
# 1,000 USD per million tokens: a call costs cents, its worst case (every prompt byte a token, 512 completion
# tokens) about 0.8 USD, so the budget is used up after a few dozen calls of the 50.
PRICE = {"input_cost_per_million": 1000.0, "output_cost_per_million": 1000.0}
FIXED = "fixed/The answer is 18."


@pytest.fixture
def priced_project(data_root, local_judge, tmp_path, monkeypatch):
    shutil.copytree(REPO_DATA / "datasets" / "gsm8k", data_root / "datasets" / "gsm8k")
    shutil.copy(REPO_DATA / "evaluators" / "helpfulness.yaml", data_root / "evaluators")
    (data_root / "benchmarks").mkdir()
    shutil.copy(REPO_DATA / "benchmarks" / "gsm8k.yaml", data_root / "benchmarks")
    models = {"models": {"priced-18": {"model": f"local/{FIXED}", **PRICE, "max_daily_cost_usd": BUDGET_USD}}}
    (data_root / "benchmarks" / "models.yaml").write_text(yaml.safe_dump(models))
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_URL", local_judge.base_url)
    monkeypatch.setenv("EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS", "1")  # the demo's mode: keyless judges answered
    (tmp_path / "dagster_home").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster_home")) as instance:
        instance.add_dynamic_partitions("benchmark_models", ["priced-18"])
        yield data_root, instance


def test_a_model_budget_stops_spending_and_skips_the_rest(priced_project, local_judge):
    root, instance = priced_project
    asked = requests_for(local_judge, FIXED)
    materialize(root, instance, "priced-18", dg.AssetSelection.assets(dg.AssetKey(["benchmark", "gsm8k", "answer"])))
    statuses = dict(
        query(root, "SELECT status || coalesce(':' || reason, ''), count(*) FROM benchmark_cases GROUP BY ALL")
    )
    completed, skipped = statuses.get("COMPLETED", 0), statuses.get("SKIPPED:budget_exhausted", 0)
    assert completed + skipped == 50 and set(statuses) <= {"COMPLETED", "SKIPPED:budget_exhausted"}
    assert 0 < completed < 50 and skipped > 0
    # only the affordable calls reached the provider; each is charged, and the ledger holds exactly that spend
    assert requests_for(local_judge, FIXED) - asked == completed
    (spent_rows,) = query(root, "SELECT sum(cost_usd) FROM benchmark_cases WHERE status = 'COMPLETED'")[0]
    ledger = benchmark_ledger(root)
    spent = ledger.spent(budget_name("priced-18"), day=ledger.clock().strftime("%Y-%m-%d"))
    assert spent == pytest.approx(spent_rows, abs=1e-9)
    worst = max(
        r[0]
        for r in query(root, "SELECT (length(input) + 200) * 1000.0 / 1e6 + 512 * 1000.0 / 1e6 FROM benchmark_cases")
    )
    assert BUDGET_USD - worst <= spent <= BUDGET_USD + 1e-9
    (detail,) = query(root, "SELECT any_value(reason_detail) FROM benchmark_cases WHERE status = 'SKIPPED'")[0]
    assert "daily" in detail and f"{BUDGET_USD:g}" in detail
    # the models' spend never counts against (or shows in) the judges' ledger
    assert BudgetLedger(state_dir(root) / "budget.sqlite").totals() == []
    # a re-run pays only for what is still missing: the budget is spent, so nothing more is sent or charged
    materialize(root, instance, "priced-18", dg.AssetSelection.assets(dg.AssetKey(["benchmark", "gsm8k", "answer"])))
    assert requests_for(local_judge, FIXED) - asked == completed
    assert benchmark_ledger(root).spent(
        budget_name("priced-18"), day=ledger.clock().strftime("%Y-%m-%d")
    ) == pytest.approx(spent)
    assert dict(query(root, "SELECT status, count(*) FROM benchmark_cases GROUP BY ALL"))["COMPLETED"] == completed


def test_a_model_budget_needs_a_price(tmp_path):
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump({"models": {"free-guess": {"model": "local/mock", "max_daily_cost_usd": 1.0}}}))
    with pytest.raises(SuiteError) as err:
        load_models(path)
    message = str(err.value)
    assert str(path) in message and "free-guess" in message and "no known price" in message


def test_a_cache_that_cannot_store_the_answers_costs_no_row(priced_project, local_judge):
    # A real SQLite failure on every write, as a full disk gives: the judge cache refuses inserts. The answers
    # were paid for, so the task's rows are written all the same and the failure is reported beside them.
    root, instance = priced_project
    cache = state_dir(root) / "judge_cache" / "replies.sqlite"
    cache.parent.mkdir(parents=True)
    with closing(sqlite3.connect(cache)) as conn:
        conn.execute("CREATE TABLE replies (key TEXT PRIMARY KEY, entry TEXT NOT NULL)")
        conn.execute("CREATE TRIGGER full BEFORE INSERT ON replies BEGIN SELECT RAISE(FAIL, 'disk is full'); END")
        conn.commit()
    asked = requests_for(local_judge, FIXED)
    answer = dg.AssetKey(["benchmark", "gsm8k", "answer"])
    materialize(root, instance, "priced-18", dg.AssetSelection.assets(answer))
    completed = dict(query(root, "SELECT status, count(*) FROM benchmark_cases GROUP BY ALL"))["COMPLETED"]
    assert completed > 0 and requests_for(local_judge, FIXED) - asked == completed
    metadata = instance.get_latest_materialization_event(answer).asset_materialization.metadata
    assert "disk is full" in metadata["cache_write_failed"].value
    assert str(cache) in metadata["cache_write_failed"].value
