"""Links both ways between the Dagster UI and the viewer: a judge_scores partition's materialization carries the
URL of its day in the viewer (when $EVAL_PLATFORM_VIEWER_URL is set where the runs execute), which opens that day;
the day's page links back to the partition and its runs in the Dagster UI."""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import dagster as dg
import pytest
from playwright.sync_api import expect

from eval_platform_tests.ui.test_browser import CHROMIUM
from eval_platform_tests.viewer.conftest import DAY

pytestmark = pytest.mark.skipif(
    not CHROMIUM.exists(), reason=f"{CHROMIUM} is absent: install Debian's chromium package (apt-get install chromium)"
)


def test_a_partitions_materialization_links_to_its_day_in_the_viewer_and_back(viewer, page, monkeypatch):
    monkeypatch.setenv("DAGSTER_HOME", str(viewer.dagster_home))
    partition = dg.MultiPartitionKey({"date": DAY, "evaluator": "helpfulness"})
    with dg.DagsterInstance.get() as instance:
        records = instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=dg.AssetKey("judge_scores"), asset_partitions=[str(partition)]), limit=1
        ).records
    assert records, "the demo materialized no judge_scores partition for helpfulness"
    metadata = records[0].asset_materialization.metadata
    link = metadata["viewer"].value
    page.goto(link)
    expect(page.locator("h1")).to_contain_text(f"helpfulness / {DAY}")
    expect(page.locator("#count")).to_contain_text(f"{metadata['rows'].value} verdicts")
    # and back: the partition's page and its runs, in the Dagster UI the viewer was pointed at
    back = page.get_by_role("link", name="partition in Dagster").get_attribute("href")
    runs = page.get_by_role("link", name="its runs").get_attribute("href")
    assert back and runs
    assert urlsplit(back).path == "/assets/judge_scores"
    assert dict(parse_qsl(urlsplit(back).query))["partition"] == str(partition)
    assert sorted(v for k, v in parse_qsl(urlsplit(runs).query)) == [
        f"tag:dagster/partition/date={DAY}",
        "tag:dagster/partition/evaluator=helpfulness",
    ]
