"""The viewer on a generated large day (200,000 verdicts of one evaluator and 200,000 of a second one whose
partition is a folder of two parts), in headless Chromium: keyset pages forward and back, each filter, the
evaluators page's numbers and compare. What each page shows is checked against the same Parquet files queried with
DuckDB, as an analyst would."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import serve, viewer_env
from eval_platform_tests.viewer.large_day import write_large_day

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)
DAY = "2026-11-20"
ROWS = 200_000
PAGE_ROWS = 50


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """`eval-platform view` on a data root holding only the generated large day (the `page` fixture's viewer)."""
    root = tmp_path_factory.mktemp("large_day") / "data"
    write_large_day(root, DAY, ROWS)
    with serve(root, root.parent / "viewer.log", viewer_env()) as viewer:
        yield viewer


def scores(viewer, evaluator: str) -> str:
    """The partition's files as an analyst globs them (one file, or a folder of parts)."""
    return f"read_parquet('{viewer.root}/warehouse/judge_scores/evaluator={evaluator}/date={DAY}/**/part.parquet')"


def day_url(viewer, evaluator: str, query: str = "") -> str:
    return f"{viewer.url}/evaluators/{evaluator}/{DAY}{query}"


def count(page) -> int:
    return int(page.locator("#count").inner_text().split()[0])


def shown_keys(page) -> list[str]:
    """The rows of the page as trace|target (unique in this day)."""
    traces = page.locator("#verdicts tbody tr td:nth-child(1)").all_inner_texts()
    targets = page.locator("#verdicts tbody tr td:nth-child(2)").all_inner_texts()
    return [f"{t}|{g}" for t, g in zip(traces, targets, strict=True)]


def expected_keys(viewer, where: str, order: str, offset: int, params: list | None = None) -> list[str]:
    rows = viewer.query(
        f"""SELECT trace_id, span_id, session_id FROM {scores(viewer, "quality")} WHERE is_final AND {where}
            ORDER BY {order}, trace_id LIMIT {PAGE_ROWS} OFFSET {offset}""",
        params,
    )
    return [f"{t}|" + (f"session {x}" if x else f"span {s}" if s else "trace").strip() for t, s, x in rows]


def test_keyset_pages_go_forward_and_back_without_overlap(viewer, page):
    """Lowest first over 200,000 verdicts: the next and previous links name a row (after=/before=), not a page
    number, and each page is the analyst's same page, forward and back."""
    order = "score ASC NULLS LAST"
    page.goto(day_url(viewer, "quality"))
    assert count(page) == ROWS
    page.click("#lowest-first")
    expect(page).to_have_url(re.compile(r"sort=score"))
    forward = [shown_keys(page)]
    assert forward[0] == expected_keys(viewer, "TRUE", order, 0)
    for number in range(2, 5):
        expect(page.locator("#next")).to_have_attribute("href", re.compile(r"after="))
        page.click("#next")
        expect(page.locator("#count")).to_contain_text(f"page {number} of {ROWS // PAGE_ROWS}")
        forward.append(shown_keys(page))
        assert forward[-1] == expected_keys(viewer, "TRUE", order, (number - 1) * PAGE_ROWS)
    for number in (3, 2, 1):
        expect(page.locator("#previous")).to_have_attribute("href", re.compile(r"before="))
        page.click("#previous")
        expect(page.locator("#count")).to_contain_text(f"page {number} of")
        assert shown_keys(page) == forward[number - 1]
    expect(page.locator("#previous")).to_have_count(0)
    # highest first: the FAILED and SKIPPED verdicts (no score) come last, after every scored one
    page.goto(day_url(viewer, "quality", "?sort=score&dir=desc"))
    page.click("#next")
    assert shown_keys(page) == expected_keys(viewer, "TRUE", "score DESC NULLS LAST", PAGE_ROWS)


def test_every_page_of_a_filtered_day_once_forward_and_back(viewer, page):
    """A filter of a few hundred verdicts sorted by a column with many ties (cost): walking every page forward shows
    each verdict once, and walking back shows the same pages."""
    where = "status = 'FAILED' AND reason = 'timeout' AND model = ? AND variant = 'prompt-v2'"
    params = ["openai/judge-b"]
    (total,) = viewer.query(f"SELECT count(*) FROM {scores(viewer, 'quality')} WHERE is_final AND {where}", params)[0]
    assert 2 * PAGE_ROWS < total < 10 * PAGE_ROWS
    query = f"?status=FAILED&reason=timeout&model={quote('openai/judge-b')}&variant=prompt-v2&sort=cost&dir=desc"
    page.goto(day_url(viewer, "quality", query))
    forward = [shown_keys(page)]
    while page.locator("#next").count():
        page.click("#next")
        forward.append(shown_keys(page))
    seen = [key for keys in forward for key in keys]
    assert len(seen) == total == len(set(seen))
    expect(page.locator("#count")).to_contain_text(f"page {len(forward)} of {len(forward)}")
    for keys in reversed(forward[:-1]):
        page.click("#previous")
        assert shown_keys(page) == keys


def test_each_filter_narrows_the_large_day_as_duckdb_says(viewer, page):
    source = scores(viewer, "quality")
    traces = f"read_parquet('{viewer.root}/warehouse/traces/date={DAY}/**/part.parquet')"
    cases = [
        ("?status=FAILED", "status = 'FAILED'", []),
        ("?status=SKIPPED&reason=budget_exhausted", "status = 'SKIPPED' AND reason = 'budget_exhausted'", []),
        (f"?model={quote('openai/judge-b')}", "model = 'openai/judge-b'", []),
        ("?variant=prompt-v2", "variant = 'prompt-v2'", []),
        ("?session=session-1234", "session_id = 'session-1234'", []),
        ("?min=0.2&max=0.3", "score >= 0.2 AND score <= 0.3", []),
        ("?q=CONTRADICTS", "(reasoning ILIKE '%contradicts%' OR reason_detail ILIKE '%contradicts%')", []),
        ("?q=timeout", "(reasoning ILIKE '%timeout%' OR reason_detail ILIKE '%timeout%')", []),
        (
            f"?meta={quote('item_id=item-42')}",
            f"trace_id IN (SELECT trace_id FROM {traces} WHERE json_extract_string(metadata, '$.item_id') = 'item-42')",
            [],
        ),
        (
            "?meta=pro",
            f"trace_id IN (SELECT trace_id FROM {traces} WHERE metadata ILIKE '%pro%')",
            [],
        ),
        (
            f"?meta={quote('tier=team')}&status=COMPLETED&min=0.9",
            f"""status = 'COMPLETED' AND score >= 0.9 AND trace_id IN (
                SELECT trace_id FROM {traces} WHERE json_extract_string(metadata, '$.tier') = 'team')""",
            [],
        ),
    ]
    for query, where, params in cases:
        (expected,) = viewer.query(f"SELECT count(*) FROM {source} WHERE is_final AND {where}", params)[0]
        page.goto(day_url(viewer, "quality", query))
        assert 0 < count(page) == expected < ROWS, query
        assert shown_keys(page) == expected_keys(viewer, where, "trace_id", 0, params), query
    # the form, as a user fills it: a reasoning text and a status
    page.goto(day_url(viewer, "quality"))
    page.select_option("select[name=status]", "COMPLETED")
    page.fill("input[name=q]", "refund policy")
    page.click("#filters button[type=submit]")
    (expected,) = viewer.query(
        f"SELECT count(*) FROM {source} WHERE is_final AND status = 'COMPLETED' AND reasoning ILIKE '%refund policy%'"
    )[0]
    expect(page.locator("#count")).to_contain_text(f"{expected} verdict")
    expect(page.locator("#verdicts td.reasoning").first).to_contain_text("refund policy")


def test_the_evaluators_page_counts_a_partition_made_of_parts(viewer, page):
    page.goto(f"{viewer.url}/evaluators")
    for evaluator in ("quality", "quality_v2"):
        (completed, failed, calls) = viewer.query(
            f"""SELECT count(*) FILTER (status = 'COMPLETED'), count(*) FILTER (status = 'FAILED'), sum(calls)
                FROM {scores(viewer, evaluator)} WHERE is_final"""
        )[0]
        row = page.locator(f'#evaluators tr[data-evaluator="{evaluator}"]')
        expect(row).to_have_count(1)
        cells = row.locator("td").all_inner_texts()
        assert cells[11].split()[0] == str(failed), (evaluator, cells)
        assert cells[13] == str(calls), (evaluator, cells)
    page.goto(day_url(viewer, "quality_v2"))
    assert count(page) == ROWS
    expect(page.locator("p.summary")).to_contain_text(f"{completed} completed")


def test_compare_on_the_same_traces_of_the_large_day(viewer, page):
    a, b = scores(viewer, "quality"), scores(viewer, "quality_v2")
    (shared, changed) = viewer.query(
        f"""SELECT count(*), count(*) FILTER (a.status <> 'COMPLETED' OR b.status <> 'COMPLETED'
                                             OR a.passed <> b.passed)
            FROM {a} a JOIN {b} b USING (trace_id)"""
    )[0]
    page.goto(f"{viewer.url}/compare?day={DAY}&a=quality&b=quality_v2")
    expect(page.locator("#shared")).to_have_text(str(shared))
    expect(page.locator("#changed-count")).to_have_text(str(changed))
    rows = page.locator("#changed tr.change")
    expect(rows).to_have_count(PAGE_ROWS)
    # each changed verdict shows both sides' own reasoning (or failure detail), read for that page only
    for i in range(5):
        trace_id = rows.nth(i).locator("td").first.inner_text()
        (text_a, text_b) = viewer.query(
            f"""SELECT coalesce(a.reasoning, a.reason_detail, ''), coalesce(b.reasoning, b.reason_detail, '')
                FROM {a} a JOIN {b} b USING (trace_id) WHERE trace_id = ?""",
            [trace_id],
        )[0]
        reasonings = rows.nth(i).locator("td.reasoning").all_inner_texts()
        assert [r.strip() for r in reasonings] == [text_a, text_b], trace_id
