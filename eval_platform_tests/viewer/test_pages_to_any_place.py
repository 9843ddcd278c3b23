"""Reaching any place of a long list, and every verdict of a trace, in headless Chromium on a generated day
(3,000 traces judged by two evaluators, `quality` re-judged after a configuration change so that its first
configuration's verdicts on 1,000 traces are kept in `judge_scores_history`): an evaluator's day jumps to page N
and to the last page, compare's changed verdicts are keyset pages (forward through every page and back), and the
trace page shows a superseded configuration's verdict marked as such. Each page is checked against the same
Parquet files queried with DuckDB, as an analyst would."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from eval_platform.judging.history import keep_superseded
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import write_partition
from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import serve, viewer_env
from eval_platform_tests.viewer.large_day import verdicts, write_large_day

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)
DAY = "2026-11-20"
ROWS = 3000
SUPERSEDED = 1000  # traces the first configuration judged
OLD, NEW = "c0ffee00", "c0ffee01"  # quality's first and current config hashes
PAGE_ROWS = 50


@pytest.fixture(scope="module")
def viewer(tmp_path_factory):
    """The viewer on a data root where `quality` was judged under OLD (1,000 traces), then re-judged under NEW
    (the judge_scores write path's `keep_superseded` moving OLD's verdicts to the history), with `quality_v2`."""
    root = tmp_path_factory.mktemp("any_place") / "data"
    keys = {"evaluator": "quality", "date": DAY}
    warehouse = DataRoot.local(root)
    write_partition(warehouse, "judge_scores", keys, verdicts("quality", DAY, SUPERSEDED, 3, OLD))
    assert keep_superseded(warehouse, "quality", DAY, NEW) == [OLD]
    write_large_day(root, DAY, ROWS)
    with serve(root, root.parent / "viewer.log", viewer_env()) as viewer:
        yield viewer


def scores(viewer, evaluator: str, table: str = "judge_scores") -> str:
    return f"read_parquet('{viewer.root}/warehouse/{table}/evaluator={evaluator}/date={DAY}/**/part.parquet')"


def day_traces(page) -> list[str]:
    return page.locator("#verdicts a.trace-link").all_inner_texts()


def expected_day(viewer, where: str, order: str, page_number: int) -> list[str]:
    rows = viewer.query(
        f"""SELECT trace_id FROM {scores(viewer, "quality")} WHERE is_final AND {where}
            ORDER BY {order}, trace_id LIMIT {PAGE_ROWS} OFFSET {(page_number - 1) * PAGE_ROWS}"""
    )
    return [t for (t,) in rows]


def test_an_evaluators_day_jumps_to_page_n_and_to_the_last_page(viewer, page):
    order = "score ASC NULLS LAST"
    pages = -(-ROWS // PAGE_ROWS)
    page.goto(f"{viewer.url}/evaluators/quality/{DAY}")
    page.click("#lowest-first")
    page.fill("#jump input[name=page]", "23")
    page.click("#jump button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"page 23 of {pages}")
    assert day_traces(page) == expected_day(viewer, "TRUE", order, 23)
    # from there, the keyset links go on as from any page
    expect(page.locator("#next")).to_have_attribute("href", re.compile(r"after="))
    page.click("#next")
    expect(page.locator("#count")).to_contain_text(f"page 24 of {pages}")
    assert day_traces(page) == expected_day(viewer, "TRUE", order, 24)
    for number in (23, 22):
        page.click("#previous")
        expect(page.locator("#count")).to_contain_text(f"page {number} of {pages}")
        assert day_traces(page) == expected_day(viewer, "TRUE", order, number)
    page.click("#last")
    expect(page.locator("#count")).to_contain_text(f"page {pages} of {pages}")
    assert day_traces(page) == expected_day(viewer, "TRUE", order, pages)
    expect(page.locator("#next")).to_have_count(0)
    # a column with many ties (status: 3 values over 3,000 rows), highest first, then a filtered day by cost
    page.goto(f"{viewer.url}/evaluators/quality/{DAY}?sort=status&dir=desc&page=41")
    expect(page.locator("#count")).to_contain_text(f"page 41 of {pages}")
    assert day_traces(page) == expected_day(viewer, "TRUE", "status DESC NULLS LAST", 41)
    where = "status = 'COMPLETED' AND variant = 'prompt-v2'"
    (total,) = viewer.query(f"SELECT count(*) FROM {scores(viewer, 'quality')} WHERE is_final AND {where}")[0]
    last = -(-total // PAGE_ROWS)
    page.goto(f"{viewer.url}/evaluators/quality/{DAY}?status=COMPLETED&variant=prompt-v2&sort=cost&dir=desc")
    page.fill("#jump input[name=page]", str(last - 1))
    page.click("#jump button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"page {last - 1} of {last}")
    assert day_traces(page) == expected_day(viewer, where, "cost_usd DESC NULLS LAST", last - 1)
    expect(page.locator("select[name=variant]")).to_have_value("prompt-v2")  # the filters stay


def changed(viewer) -> list[str]:
    """Compare quality with quality_v2: the changed verdicts' traces in the page order (largest change first, a
    status change first of all, then by trace)."""
    rows = viewer.query(
        f"""SELECT trace_id FROM {scores(viewer, "quality")} a JOIN {scores(viewer, "quality_v2")} b USING (trace_id)
            WHERE NOT (a.status = 'COMPLETED' AND b.status = 'COMPLETED' AND a.passed = b.passed)
            ORDER BY abs(b.score - a.score) DESC NULLS FIRST, trace_id"""
    )
    return [t for (t,) in rows]


def test_compares_changed_verdicts_are_keyset_pages_forward_and_back(viewer, page):
    expected = changed(viewer)
    pages = -(-len(expected) // PAGE_ROWS)
    assert pages > 3
    page.goto(f"{viewer.url}/compare?day={DAY}&a=quality&b=quality_v2")
    expect(page.locator("#changed-count")).to_have_text(str(len(expected)))
    rows = page.locator("#changed tr.change td:first-child")
    forward = [rows.all_inner_texts()]
    while page.locator("#next").count():
        # a link names the last row's sort key, never a page's offset
        expect(page.locator("#next")).to_have_attribute("href", re.compile(r"after="))
        page.click("#next")
        expect(page.locator("#changed-page")).to_contain_text(f"page {len(forward) + 1} of {pages}")
        forward.append(rows.all_inner_texts())
    assert len(forward) == pages
    assert [t for shown in forward for t in shown] == expected  # each changed verdict once, in order
    for number in range(pages - 1, 0, -1):
        page.click("#previous")
        expect(page.locator("#changed-page")).to_contain_text(f"page {number} of {pages}")
        assert rows.all_inner_texts() == forward[number - 1]
    expect(page.locator("#previous")).to_have_count(0)


def test_two_variants_changed_pairs_are_keyset_pages(viewer, page):
    traces = f"read_parquet('{viewer.root}/warehouse/traces/date={DAY}/**/part.parquet')"
    expected = [
        pair
        for (pair,) in viewer.query(
            f"""WITH v AS (SELECT json_extract_string(t.metadata, '$.item_id') AS pair, t.variant, s.status,
                                  s.score, s.passed
                           FROM {scores(viewer, "quality")} s JOIN {traces} t USING (trace_id))
                SELECT pair FROM v a JOIN v b USING (pair)
                WHERE a.variant = 'prompt-v1' AND b.variant = 'prompt-v3'
                  AND NOT (a.status = 'COMPLETED' AND b.status = 'COMPLETED' AND a.passed = b.passed)
                ORDER BY abs(b.score - a.score) DESC NULLS FIRST, pair"""
        )
    ]
    assert len(expected) > 2 * PAGE_ROWS
    page.goto(f"{viewer.url}/compare?day={DAY}&a=quality&a_variant=prompt-v1&b=quality&b_variant=prompt-v3")
    expect(page.locator("#changed-count")).to_have_text(str(len(expected)))
    pairs = page.locator("#changed-pairs td.pair")
    assert pairs.all_inner_texts() == expected[:PAGE_ROWS]
    expect(page.locator("#next")).to_have_attribute("href", re.compile(r"after="))
    page.click("#next")
    expect(page.locator("#changed-page")).to_contain_text("page 2 of")
    assert pairs.all_inner_texts() == expected[PAGE_ROWS : 2 * PAGE_ROWS]
    page.click("#previous")
    assert pairs.all_inner_texts() == expected[:PAGE_ROWS]


def test_the_trace_page_shows_superseded_verdicts_with_their_config_hash(viewer, page):
    trace_id = "trace-0000007"  # judged by both of quality's configurations and by quality_v2
    history = scores(viewer, "quality", "judge_scores_history")
    ((old_status, old_score, superseded_by),) = viewer.query(
        f"SELECT status, score, superseded_by FROM {history} WHERE trace_id = ?", [trace_id]
    )
    assert superseded_by == NEW
    page.goto(f"{viewer.url}/traces/{DAY}/{trace_id}")
    cards = page.locator("#verdicts article.verdict-card")
    expect(cards).to_have_count(3)
    old = page.locator(f'#verdicts article.verdict-card[data-config-hash="{OLD}"]')
    expect(old).to_have_count(1)
    expect(old).to_have_class(re.compile(r"\bsuperseded\b"))
    expect(old.locator("h3")).to_contain_text("superseded")
    expect(old.locator("h3")).to_contain_text(old_status)
    if old_score is not None:
        expect(old.locator(".score")).to_contain_text(f"{old_score:.3f}")
    expect(old).to_contain_text(OLD)
    expect(old.locator(".superseded-note")).to_contain_text(f"superseded by {NEW}")
    for evaluator in ("quality", "quality_v2"):  # the current verdicts, not marked
        current = page.locator(f'#verdicts article.verdict-card[data-evaluator="{evaluator}"]:not(.superseded)')
        expect(current).to_have_count(1)
        expect(current.locator("h3")).not_to_contain_text("superseded")
    # from the superseded verdict to the comparison of the two configurations on the same traces
    old.locator("a.compare-superseded").click()
    expect(page.locator("#shared")).to_have_text(str(SUPERSEDED))
    # a trace the first configuration never judged shows current verdicts only
    page.goto(f"{viewer.url}/traces/{DAY}/trace-0002500")
    expect(page.locator("#verdicts article.verdict-card")).to_have_count(2)
    expect(page.locator("#verdicts article.verdict-card.superseded")).to_have_count(0)
