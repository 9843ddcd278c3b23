"""The compare page (two evaluators, two judges of one consensus) and the agreement, experiments and alerts pages,
in headless Chromium on the demo's judged day, checked against the same Parquet files queried with DuckDB."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import DAY

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)
NOT_SAMPLED = "NOT (status = 'SKIPPED' AND coalesce(reason, '') = 'not_sampled')"


def expected(viewer, a: str, b: str, where_a: str, where_b: str) -> tuple[int, int, float | None]:
    """Targets both sides judged, how many changed, and the largest score change: the analyst's own join."""
    return viewer.query(
        f"""
        WITH a AS (SELECT trace_id, coalesce(span_id, '') s, coalesce(session_id, '') x, status, avg(score) score
                   FROM read_parquet('{viewer.scores(a)}') WHERE {NOT_SAMPLED} AND {where_a} GROUP BY ALL),
             b AS (SELECT trace_id, coalesce(span_id, '') s, coalesce(session_id, '') x, status, avg(score) score
                   FROM read_parquet('{viewer.scores(b)}') WHERE {NOT_SAMPLED} AND {where_b} GROUP BY ALL)
        SELECT count(*),
               count(*) FILTER (a.status <> 'COMPLETED' OR b.status <> 'COMPLETED' OR abs(a.score - b.score) >= 1e-9),
               max(abs(a.score - b.score))
        FROM a JOIN b USING (trace_id, s, x)
        """
    )[0]


def changed_differences(page) -> list[float | None]:
    texts = page.locator("#changed td.difference").all_inner_texts()
    return [float(t) if t.strip() else None for t in texts]


def test_two_evaluators_on_the_same_traces_list_the_changed_verdicts_largest_first(viewer, page):
    shared, changed, largest = expected(viewer, "helpfulness", "toxicity", "role <> 'member'", "role <> 'member'")
    assert shared > 0 and changed > 0
    page.goto(f"{viewer.url}/compare")
    page.select_option("select[name=day]", DAY)
    page.select_option("select[name=a]", "helpfulness")
    page.select_option("select[name=b]", "toxicity")
    page.click("#compare-form button[type=submit]")
    expect(page.locator("#shared")).to_have_text(str(shared))
    expect(page.locator("#changed-count")).to_have_text(str(changed))
    expect(page.locator("#agreement")).to_be_visible()
    differences = [abs(d) for d in changed_differences(page) if d is not None]
    assert differences == sorted(differences, reverse=True)
    assert differences[0] == pytest.approx(largest, abs=1e-3)
    expect(page.locator("#changed tr.change")).to_have_count(min(changed, 50))
    # a changed verdict leads to its trace
    page.locator("#changed tr.change a").first.click()
    expect(page.locator("h1")).to_contain_text("Trace ")
    expect(page.locator('article.verdict-card[data-evaluator="toxicity"]')).not_to_have_count(0)


def test_two_judges_of_one_consensus_compare_member_by_member(viewer, page):
    reply, long = "openai/fault/echo_key_reply", "openai/fault/echo_key_long"
    shared, changed, _ = expected(viewer, "key_echo", "key_echo", f"model = '{reply}'", f"model = '{long}'")
    assert shared > 0
    page.goto(f"{viewer.url}/compare?day={DAY}&a=key_echo&a_model={reply}&b=key_echo&b_model={long}")
    expect(page.locator("#shared")).to_have_text(str(shared))
    expect(page.locator("#changed-count")).to_have_text(str(changed))
    # the one whose reply parses against the one whose provider errors: every verdict changed status
    expect(page.locator("#changed tr.change").first.locator(".status-failed")).to_have_count(1)


def test_the_agreement_experiments_and_alerts_pages_show_their_tables(viewer, page):
    root = viewer.root / "warehouse"
    (agreement,) = viewer.query(f"SELECT count(*) FROM read_parquet('{root}/agreement/**/part.parquet')")[0]
    (section, in_section) = viewer.query(
        f"SELECT section, count(*) FROM read_parquet('{root}/agreement/**/part.parquet') "
        "GROUP BY ALL ORDER BY 2 LIMIT 1"
    )[0]
    page.goto(f"{viewer.url}/agreement")
    expect(page.locator("#rows tbody tr")).to_have_count(agreement)
    page.fill("input[name=section]", section)
    page.click("form.filters button[type=submit]")
    expect(page.locator("#rows tbody tr")).to_have_count(in_section)
    assert in_section < agreement
    (experiments,) = viewer.query(
        f"SELECT count(*) FROM read_parquet('{root}/experiment_results/**/part.parquet', union_by_name = true)"
    )[0]
    page.goto(f"{viewer.url}/experiments")
    expect(page.locator("h1")).to_have_text("Experiments")
    expect(page.locator("#count")).to_contain_text(f"{experiments} row")
    if experiments:  # each row shows its interval
        expect(page.locator("#rows thead")).to_contain_text("diff_ci_low")
    (alerts,) = viewer.query(
        f"SELECT count(*) FROM read_parquet('{root}/alerts/**/part.parquet', union_by_name = true)"
    )[0]
    page.goto(f"{viewer.url}/alerts")
    expect(page.locator("#count")).to_contain_text(f"{alerts} row")
