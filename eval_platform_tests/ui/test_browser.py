"""Headless Chromium (Debian's package, driven by playwright) through the pages a user opens after a backfill:
the global asset lineage, judge_scores' partitions and the backfill itself. Screenshots are saved as artifacts."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import quote

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect, sync_playwright

from eval_platform_tests.ui.conftest import DAYS, EVALUATOR, EVALUATORS

CHROMIUM = Path("/usr/bin/chromium")
# The browser is Debian's (apt-get install chromium; .ci/run installs it): playwright downloads none.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
UI_TIMEOUT_MS = 90_000  # how long a page may take to render on a loaded 2-core machine; not a speed claim

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)


@pytest.fixture(scope="module")
def artifacts() -> Path:
    folder = Path(os.environ.get("EVAL_PLATFORM_TEST_ARTIFACTS") or Path(__file__).resolve().parents[1] / "_artifacts")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(dagster_ui):
    expect.set_options(timeout=UI_TIMEOUT_MS)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1600, "height": 1200})
        # Loopback only: the UI's own server answers; any other host is refused (and listed if a page asks).
        refused: list[str] = []

        def only_the_webserver(route):
            if route.request.url.startswith(dagster_ui.url):
                route.continue_()
            else:
                refused.append(route.request.url)
                route.abort()

        context.route(re.compile(r"^https?://"), only_the_webserver)
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            yield page
        finally:
            if refused:
                print(f"\nrequests to other hosts refused: {sorted(set(refused))}")
            context.close()
            browser.close()


def shoot(page, artifacts: Path, name: str) -> Path:
    try:  # let the page's last queries land before the picture; the assertions never depend on this
        page.wait_for_load_state("networkidle", timeout=15_000)
    except PlaywrightTimeout:
        pass
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"\nscreenshot: {path}")
    return path


def expand_all_groups(page) -> None:
    """The graph's "Expand all groups" (⌥E); pressed again if the graph had not yet taken its keys."""
    for _ in range(5):
        page.keyboard.press("Alt+e")
        try:
            page.wait_for_url(re.compile(r"[?&]expanded="), timeout=10_000)
            return
        except PlaywrightTimeout:
            continue
    raise AssertionError(f"the lineage graph did not expand its groups: {page.url}")


STATUSES_DRAWN = "() => !document.querySelector('[style*=\"--minimal-bg: var(--color-background-light)\"]')"


def test_lineage_partitions_and_backfill_pages_show_the_backfilled_partitions(dagster_ui, ui_backfill, page, artifacts):
    # Global asset lineage, filtered to judge_scores and its neighbours, every group expanded (the graph's ⌥E):
    # the pipeline's assets are drawn as nodes.
    page.goto(f"{dagster_ui.url}/asset-groups~{quote('+key:judge_scores+', safe='')}/")
    expect(page.get_by_text("judging", exact=True).last).to_be_visible()
    expand_all_groups(page)
    for asset in ("traces", "judge_scores", "judge_cost_daily", "agreement"):
        expect(page.get_by_text(asset, exact=True).first).to_be_visible()
    # The nodes are drawn before their statuses arrive (a light box until then): wait for the colours, for the
    # screenshot only (the partitions and backfill pages below carry the assertions on status).
    try:
        page.wait_for_function(STATUSES_DRAWN)
    except PlaywrightTimeout:
        print("\nlineage: asset statuses still loading when the screenshot was taken")
    shoot(page, artifacts, "lineage")

    # judge_scores' partitions: the backfilled dates are materialized; one of them opened shows its rows.
    traced = dict(dagster_ui.query_catalog("SELECT CAST(date AS VARCHAR), count(*) FROM traces GROUP BY ALL"))
    page.goto(f"{dagster_ui.url}/assets/judge_scores?view=partitions")
    expect(page.get_by_text(f"Materialized ({len(DAYS) * len(EVALUATORS)})")).to_be_visible()
    page.get_by_text(DAYS[0], exact=True).first.click()
    page.get_by_text(EVALUATOR, exact=True).first.click()
    expect(page.get_by_text(f"{DAYS[0]}|{EVALUATOR}", exact=True).first).to_be_visible()
    for field, value in (("traces_in_partition", traced[DAYS[0]]), ("rows", traced[DAYS[0]]), ("failed", 0)):
        row = page.locator("tr").filter(has=page.get_by_text(field, exact=True))
        expect(row.first).to_contain_text(re.compile(rf"^{field}\s*{value}\s*$"))
    shoot(page, artifacts, "judge_scores_partitions")

    # The backfill launched through GraphQL: succeeded, both assets 100% done.
    page.goto(f"{dagster_ui.url}/runs/b/{ui_backfill['id']}")
    expect(page.get_by_text(ui_backfill["id"]).first).to_be_visible()
    expect(page.get_by_text("Succeeded", exact=True).first).to_be_visible()
    expect(page.get_by_text(re.compile(rf"{DAYS[0]}.{{1,3}}{DAYS[-1]}")).first).to_be_visible()
    for asset in ("traces", "judge_scores"):
        expect(page.get_by_role("link", name=asset).first).to_be_visible()
    expect(page.get_by_text("100% completed")).to_have_count(2)
    shoot(page, artifacts, "backfill")
