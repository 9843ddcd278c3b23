"""The compare page on what changed: one evaluator's two config hashes (the verdicts of the configuration before
a prompt change, kept in `judge_scores_history`, against the current ones) and two variants of an experiment on
the same inputs, in headless Chromium on the demo's judged day, checked against the same Parquet files queried
with DuckDB. The earlier configuration's provider echoes its key: no page shows any piece of it."""

from __future__ import annotations

import polars as pl
import pytest
from playwright.sync_api import expect

from eval_platform.judging.config import EvaluatorConfig
from eval_platform.judging.evaluator_day import judge_partition
from eval_platform.storage.location import DataRoot
from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import DAY, KEY, KEY_ENV, KEY_PIECES

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)
NAME = "prompt_change"


def differences(page, table: str) -> list[float]:
    texts = page.locator(f"#{table} td.difference").all_inner_texts()
    return [abs(float(t)) for t in texts if t.strip()]


def assert_no_key(page) -> None:
    content = page.content()
    shown = [piece for piece in KEY_PIECES if piece in content]
    assert not shown, f"the page shows pieces of the provider's key: {shown[:3]}"


@pytest.fixture(scope="module")
def prompt_change(viewer, local_judge, tmp_path_factory):
    """One evaluator judged on the demo's day, then re-judged after its prompt (and model) changed: the first
    configuration's provider echoes its key."""
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
    from eval_platform.llm.runtime import ModelRuntime

    state = tmp_path_factory.mktemp("prompt_change")
    runtime = ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=8, retry=RetryPolicy(base_delay_s=0.05, max_delay_s=0.2)),
        cache=ModelCache(state / "cache"),
        ledger=BudgetLedger(state / "budget.sqlite"),
        env={KEY_ENV: KEY},
    )
    base = {
        "name": NAME,
        "mode": "score",
        "score_scale": {"min": 1, "max": 5},
        "api_base": local_judge.base_url,
        "api_key_env": KEY_ENV,
        "trigger": "sampled",
        "sample_rate": 0.1,
        "max_retries": 0,
    }
    before = EvaluatorConfig.model_validate(
        {**base, "model": "openai/fault/echo_key_reply", "prompt": "Q: {{input}} A: {{output}}"}
    )
    after = EvaluatorConfig.model_validate(
        {**base, "model": "openai/mock", "prompt": "Rate strictly. Q: {{input}} A: {{output}}"}
    )
    for config in (before, after):
        judge_partition(DataRoot.from_env(viewer.root), config, DAY, runtime, set())
    return before.config_hash, after.config_hash


def test_two_config_hashes_of_one_evaluator_compare_on_the_same_traces(viewer, page, prompt_change):
    old, new = prompt_change
    history = viewer.root / "warehouse" / "judge_scores_history" / f"evaluator={NAME}" / f"date={DAY}" / "**/*.parquet"
    current = viewer.scores(NAME)
    shared, changed, largest = viewer.query(
        f"""
        WITH a AS (SELECT trace_id, status, score FROM read_parquet('{history}')
                   WHERE is_final AND config_hash = ? AND NOT (status = 'SKIPPED' AND reason = 'not_sampled')),
             b AS (SELECT trace_id, status, score FROM read_parquet('{current}')
                   WHERE is_final AND config_hash = ? AND NOT (status = 'SKIPPED' AND reason = 'not_sampled'))
        SELECT count(*),
               count(*) FILTER (a.status <> 'COMPLETED' OR b.status <> 'COMPLETED' OR abs(a.score - b.score) >= 1e-9),
               max(abs(a.score - b.score))
        FROM a JOIN b USING (trace_id)
        """,
        [old, new],
    )[0]
    assert shared > 0 and changed > 0
    # the compare page offers the evaluator's config hashes of the day, the superseded one with a link
    page.goto(f"{viewer.url}/compare?day={DAY}&a={NAME}&b={NAME}")
    expect(page.locator(f'#config-hashes-a tr.config-hash[data-hash="{new}"]')).to_contain_text("(current)")
    superseded = page.locator(f'#config-hashes-a tr.config-hash[data-hash="{old}"]')
    expect(superseded).to_contain_text(new)  # superseded by the new hash
    superseded.locator("a.compare-hash").click()
    expect(page.locator("#shared")).to_have_text(str(shared))
    expect(page.locator("#changed-count")).to_have_text(str(changed))
    shown = differences(page, "changed")
    assert shown == sorted(shown, reverse=True)
    if largest is not None and shown:
        assert shown[0] == pytest.approx(largest, abs=1e-3)
    assert_no_key(page)
    # the current verdicts are the new configuration's, untouched
    rows = pl.read_parquet(current)
    assert set(rows["config_hash"]) == {new}


def test_two_variants_list_the_inputs_whose_verdicts_changed(viewer, page):
    traces = str(viewer.root / "warehouse" / "traces" / f"date={DAY}" / "**/*.parquet")
    (a_variant, b_variant, shared, changed, largest) = viewer.query(
        f"""
        WITH v AS (SELECT s.trace_id, t.variant, json_extract_string(t.metadata, '$.item_id') AS item,
                          s.status, s.score
                   FROM read_parquet('{viewer.scores("helpfulness")}') s
                   JOIN read_parquet('{traces}') t USING (trace_id)
                   WHERE s.role <> 'member' AND NOT (s.status = 'SKIPPED' AND s.reason = 'not_sampled')
                     AND item IS NOT NULL),
             pairs AS (SELECT a.variant AS va, b.variant AS vb, a.status <> 'COMPLETED' OR b.status <> 'COMPLETED'
                              OR abs(a.score - b.score) >= 1e-9 AS differs, abs(a.score - b.score) AS size
                       FROM v a JOIN v b USING (item) WHERE a.variant < b.variant)
        SELECT va, vb, count(*), count(*) FILTER (differs), max(size) FROM pairs
        GROUP BY ALL ORDER BY count(*) FILTER (differs) DESC, va, vb LIMIT 1
        """
    )[0]
    assert shared > 0 and changed > 0
    page.goto(f"{viewer.url}/compare?day={DAY}&a=helpfulness&a_variant={a_variant}&b=helpfulness&b_variant={b_variant}")
    expect(page.locator("#shared")).to_have_text(str(shared))
    expect(page.locator("#changed-count")).to_have_text(str(changed))
    expect(page.locator("#changed-pairs tr.change")).to_have_count(min(changed, 50))
    shown = differences(page, "changed-pairs")
    assert shown == sorted(shown, reverse=True)
    if largest is not None and shown:
        assert shown[0] == pytest.approx(largest, abs=1e-3)
    # each side of a changed pair leads to its own variant's trace
    first = page.locator("#changed-pairs tr.change").first
    first.locator("td a").nth(1).click()
    expect(page.locator("h1")).to_contain_text("Trace ")
    expect(page.locator("body")).to_contain_text(b_variant)
    assert_no_key(page)
