"""The viewer's pages in headless Chromium on the demo's judged day: the evaluators, an evaluator's day (each filter
narrows, lowest first, pagination), a trace (conversation, spans, verdicts) and a session. What each page shows is
checked against the same Parquet files queried with DuckDB, as an analyst would."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
from playwright.sync_api import expect

from eval_platform.schemas import spans_view_sql
from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import DAY, KEY_PIECES

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)
PAGE_ROWS = 50


def day_url(viewer, evaluator: str, query: str = "") -> str:
    return f"{viewer.url}/evaluators/{evaluator}/{DAY}{query}"


def count(page) -> int:
    return int(page.locator("#count").inner_text().split()[0])


def column(page, index: int) -> list[str]:
    return page.locator(f"#verdicts tbody tr td:nth-child({index})").all_inner_texts()


def test_the_evaluators_page_lists_each_evaluator_with_its_numbers_and_trend(viewer, page):
    page.goto(f"{viewer.url}/")
    expect(page.locator("h1")).to_have_text("Evaluators")
    judged = viewer.query(
        f"""SELECT evaluator, count(*) FILTER (is_final AND status = 'COMPLETED'),
                   count(*) FILTER (is_final AND status = 'FAILED'), sum(calls)
            FROM read_parquet('{viewer.root}/warehouse/judge_scores/*/date={DAY}/**/part.parquet')
            GROUP BY ALL"""
    )
    assert len(judged) >= 5
    for evaluator, completed, failed, calls in judged:
        row = page.locator(f'#evaluators tr[data-evaluator="{evaluator}"]')
        expect(row).to_have_count(1)
        cells = row.locator("td").all_inner_texts()
        assert cells[11].split()[0] == str(failed), (evaluator, cells)
        assert cells[13] == str(calls), (evaluator, cells)
        if completed:  # a day with a mean score draws its point
            expect(row.locator("svg.trend circle").first).to_be_visible()
    helpfulness = page.locator('#evaluators tr[data-evaluator="helpfulness"] td').all_inner_texts()
    assert helpfulness[2] == "score" and helpfulness[5] == "yes"  # mode and enabled, from its config file
    page.locator('#evaluators tr[data-evaluator="helpfulness"] td a').first.click()
    expect(page.locator("h1")).to_contain_text(f"helpfulness / {DAY}")


def test_each_filter_of_an_evaluators_day_narrows_the_verdicts(viewer, page):
    scores = viewer.scores("helpfulness")
    (total,) = viewer.query(f"SELECT count(*) FROM read_parquet('{scores}') WHERE is_final")[0]
    page.goto(day_url(viewer, "helpfulness"))
    assert count(page) == total > PAGE_ROWS
    # status and reason: chosen in the form as a user does
    (status, reason, n) = viewer.query(
        f"""SELECT status, reason, count(*) FROM read_parquet('{scores}') WHERE is_final AND reason IS NOT NULL
            GROUP BY ALL ORDER BY 3 DESC LIMIT 1"""
    )[0]
    page.select_option("select[name=status]", status)
    page.click("#filters button[type=submit]")
    (by_status,) = viewer.query(
        f"SELECT count(*) FROM read_parquet('{scores}') WHERE is_final AND status = ?", [status]
    )[0]
    expect(page.locator("#count")).to_contain_text(f"{by_status} verdict")
    assert by_status < total and set(t.split()[0] for t in column(page, 4)) == {status}
    page.select_option("select[name=reason]", reason)
    page.click("#filters button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"{n} verdict")
    # text in the reasoning: a piece of one verdict's reasoning
    (reasoning,) = viewer.query(
        f"SELECT reasoning FROM read_parquet('{scores}') WHERE status = 'COMPLETED' ORDER BY trace_id LIMIT 1"
    )[0]
    word = reasoning.strip()[:25]
    (with_word,) = viewer.query(
        f"SELECT count(*) FROM read_parquet('{scores}') "
        "WHERE is_final AND (reasoning ILIKE ? OR reason_detail ILIKE ?)",
        [f"%{word}%"] * 2,
    )[0]
    page.goto(day_url(viewer, "helpfulness"))
    page.fill("input[name=q]", word)
    page.click("#filters button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"{with_word} verdict")
    assert 0 < with_word < total
    # a score range
    (in_range,) = viewer.query(
        f"SELECT count(*) FROM read_parquet('{scores}') WHERE is_final AND score >= 0.5 AND score <= 0.8"
    )[0]
    page.goto(day_url(viewer, "helpfulness", "?min=0.5&max=0.8"))
    assert count(page) == in_range < total
    assert all(0.5 <= float(s.split()[0]) <= 0.8 for s in column(page, 5))
    # the variant of the judged trace
    (variant, by_variant) = viewer.query(
        f"SELECT variant, count(*) FROM read_parquet('{scores}') WHERE is_final AND variant IS NOT NULL "
        "GROUP BY ALL ORDER BY 1 LIMIT 1"
    )[0]
    page.goto(day_url(viewer, "helpfulness"))
    page.select_option("select[name=variant]", variant)
    page.click("#filters button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"{by_variant} verdict")
    assert by_variant < total and set(column(page, 7)) == {variant}
    # the trace's metadata (key=value), through the traces of the day
    traces = f"{viewer.root}/warehouse/traces/date={DAY}/**/part.parquet"
    (value, with_meta) = viewer.query(
        f"""SELECT json_extract_string(t.metadata, '$.motivation_app') AS v, count(*)
            FROM read_parquet('{scores}') s JOIN read_parquet('{traces}') t USING (trace_id)
            WHERE s.is_final AND v IS NOT NULL GROUP BY ALL ORDER BY 2 DESC, 1 LIMIT 1"""
    )[0]
    page.fill("input[name=meta]", f"motivation_app={value}")
    page.click("#filters button[type=submit]")
    (both,) = viewer.query(
        f"""SELECT count(*) FROM read_parquet('{scores}') s JOIN read_parquet('{traces}') t USING (trace_id)
            WHERE s.is_final AND s.variant = ? AND json_extract_string(t.metadata, '$.motivation_app') = ?""",
        [variant, value],
    )[0]
    expect(page.locator("#count")).to_contain_text(f"{both} verdict")
    page.goto(day_url(viewer, "helpfulness", f"?meta={quote(f'motivation_app={value}')}"))
    assert 0 < count(page) == with_meta < total


def test_session_model_and_member_filters_narrow_a_day(viewer, page):
    scores = viewer.scores("conversation_quality")
    (total,) = viewer.query(f"SELECT count(*) FROM read_parquet('{scores}') WHERE is_final")[0]
    (session, n) = viewer.query(
        f"SELECT session_id, count(*) FROM read_parquet('{scores}') WHERE is_final AND session_id IS NOT NULL "
        "GROUP BY ALL ORDER BY 1 LIMIT 1"
    )[0]
    page.goto(day_url(viewer, "conversation_quality"))
    page.fill("input[name=session]", session)
    page.click("#filters button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"{n} verdict")
    assert n < total and all(session in target for target in column(page, 2))
    # consensus members are hidden by default and shown on request (key_echo has two member models)
    echo = viewer.scores("key_echo")
    (finals, members) = viewer.query(
        f"SELECT count(*) FILTER (is_final), count(*) FILTER (NOT is_final) FROM read_parquet('{echo}')"
    )[0]
    page.goto(day_url(viewer, "key_echo"))
    assert count(page) == finals
    page.goto(day_url(viewer, "key_echo", "?members=1"))
    assert count(page) == finals + members > finals
    # a model: one member's verdicts
    (model, by_model) = viewer.query(
        f"SELECT model, count(*) FROM read_parquet('{echo}') WHERE NOT is_final GROUP BY ALL ORDER BY 1 LIMIT 1"
    )[0]
    page.select_option("select[name=model]", model)
    page.click("#filters button[type=submit]")
    expect(page.locator("#count")).to_contain_text(f"{by_model} verdict")
    assert by_model < finals + members and {m.split()[0] for m in column(page, 3)} == {model}


def test_lowest_first_is_one_click_and_pages_never_overlap(viewer, page):
    scores = viewer.scores("helpfulness")
    lowest = viewer.query(
        f"SELECT trace_id, score FROM read_parquet('{scores}') WHERE is_final AND score IS NOT NULL "
        "ORDER BY score, trace_id LIMIT 3"
    )
    page.goto(day_url(viewer, "helpfulness"))
    page.click("#lowest-first")
    expect(page).to_have_url(re.compile(r"sort=score"))
    shown = [float(s.split()[0]) for s in column(page, 5) if s.strip() and s.split()[0][0].isdigit()]
    assert shown == sorted(shown) and shown[0] == pytest.approx(lowest[0][1], abs=1e-3)
    assert column(page, 1)[0] == lowest[0][0]
    # pagination: the pages together are every verdict, once
    (total,) = viewer.query(f"SELECT count(*) FROM read_parquet('{scores}') WHERE is_final")[0]
    seen: list[str] = []
    page.goto(day_url(viewer, "helpfulness", "?sort=score&dir=asc"))
    while True:
        rows = column(page, 1)
        targets = column(page, 2)
        assert len(rows) <= PAGE_ROWS
        seen += [f"{r}|{t}" for r, t in zip(rows, targets, strict=True)]
        if page.locator("#next").count() == 0:
            break
        page.click("#next")
    assert len(seen) == total == len(set(seen))
    page.click("#previous")
    expect(page.locator("#count")).to_contain_text("page")


def test_the_trace_page_shows_the_conversation_spans_and_every_verdict(viewer, page):
    traces = f"{viewer.root}/warehouse/traces/date={DAY}/**/part.parquet"
    (trace_id, session) = viewer.query(
        f"SELECT trace_id, session_id FROM read_parquet('{traces}') "
        "WHERE session_id IS NOT NULL AND tool_calls <> '[]' AND conversation LIKE "
        "'%tool_calls%' ORDER BY trace_id LIMIT 1"
    )[0]
    verdicts = viewer.query(
        f"""SELECT evaluator, config_hash, reasoning FROM read_parquet(
            '{viewer.root}/warehouse/judge_scores/*/date={DAY}/**/part.parquet')
            WHERE trace_id = ? ORDER BY 1""",
        [trace_id],
    )
    assert len({v[0] for v in verdicts}) >= 2
    # and the verdicts of superseded configurations (another test of this package may have re-judged one)
    history = viewer.root / "warehouse" / "judge_scores_history"
    superseded = (
        viewer.query(
            f"""SELECT count(*) FROM read_parquet('{history}/*/date={DAY}/**/*.parquet', hive_partitioning=true)
                WHERE trace_id = ?""",
            [trace_id],
        )[0][0]
        if list(history.glob(f"*/date={DAY}/**/*.parquet"))
        else 0
    )
    page.goto(f"{viewer.url}/traces/{DAY}/{trace_id}")
    expect(page.locator("h1")).to_have_text(f"Trace {trace_id}")
    conversation = page.locator("ol.conversation")
    expect(conversation.locator(".role-user").first).to_be_visible()
    expect(conversation.locator(".tool-call").first).to_contain_text("tool call")
    expect(conversation.locator(".role-tool").first).to_be_visible()
    expect(page.locator("#spans tr.span").first).to_be_visible()
    # the `spans` view's query over the day's traces (spans are stored in their trace's row)
    day_traces = f"read_parquet('{viewer.root}/warehouse/traces/date={DAY}/**/part.parquet')"
    (spans,) = viewer.query(f"SELECT count(*) FROM ({spans_view_sql(day_traces)}) WHERE trace_id = ?", [trace_id])[0]
    expect(page.locator("#spans tr.span")).to_have_count(spans)
    cards = page.locator("#verdicts article.verdict-card")
    expect(cards).to_have_count(len(verdicts) + superseded)
    expect(page.locator("#verdicts article.verdict-card.superseded")).to_have_count(superseded)
    for evaluator, config_hash, reasoning in verdicts:
        card = page.locator(f'article.verdict-card[data-evaluator="{evaluator}"]:not(.superseded)').first
        expect(card.locator(".config-hash")).to_have_text(config_hash)
        if reasoning:
            expect(card.locator(".reasoning pre")).to_contain_text(reasoning.strip()[:40])
    expect(page.locator("#labels")).to_be_visible()
    # the session link leads to the session's page: its turns and the verdicts on the whole session
    page.locator('a[href*="/sessions/"]').first.click()
    expect(page.locator("h1")).to_have_text(f"Session {session}")
    (turns,) = viewer.query(f"SELECT count(*) FROM read_parquet('{traces}') WHERE session_id = ?", [session])[0]
    expect(page.locator("#turns article.turn")).to_have_count(turns)
    expect(page.locator(f'#turns a[href$="{trace_id}"]')).to_have_count(1)


def test_no_page_shows_any_piece_of_a_key_the_provider_echoed(viewer, page):
    rows = viewer.query(
        f"SELECT DISTINCT trace_id FROM read_parquet('{viewer.scores('key_echo')}') WHERE status <> 'SKIPPED' "
        "OR reason <> 'not_sampled'"
    )
    assert rows, "key_echo judged no trace"
    urls = [day_url(viewer, "key_echo", "?members=1"), f"{viewer.url}/evaluators"]
    urls += [f"{viewer.url}/traces/{DAY}/{trace_id}" for (trace_id,) in rows[:5]]
    for url in urls:
        page.goto(url)
        for details in page.locator("details").all():  # raw replies opened as a user would
            details.evaluate("d => d.open = true")
        html = page.content()
        assert not [piece for piece in KEY_PIECES if piece in html], url
    expect(page.locator("article.verdict-card").first).to_be_visible()


def test_an_unknown_day_or_trace_is_a_404_page_naming_it(viewer, page):
    response = page.goto(f"{viewer.url}/evaluators/helpfulness/1999-01-01")
    assert response is not None and response.status == 404
    expect(page.locator(".empty")).to_contain_text("1999-01-01")
    response = page.goto(f"{viewer.url}/traces/{DAY}/no-such-trace")
    assert response is not None and response.status == 404
