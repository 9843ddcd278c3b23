"""The demo's data root, judged by `eval-platform demo` (one day), served by `eval-platform view` on 127.0.0.1 and
browsed in headless Chromium (Debian's package, driven by playwright, as the Dagster UI tests do).

The data root also holds `key_echo`, an evaluator whose provider (the local judge's `fault/echo_key_*` models)
echoes the caller's key in its replies and errors: no page may show any piece of that key.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from eval_platform_tests.conftest import REPO_DATA, write_evaluator
from eval_platform_tests.ui.conftest import free_port, start, stop
from eval_platform_tests.ui.test_browser import CHROMIUM, CHROMIUM_ARGS, UI_TIMEOUT_MS

REPO = Path(__file__).resolve().parents[2]
DAY = "2026-11-09"  # the demo's first sample day (`demo --days 1`)
KEY = "vW7pQ3zK9xB2mN6tR4yH8jL1cF5gD0sA3eU7oI2kM9wX4nV6tZ"  # no piece of it is anything the platform writes
KEY_ENV = "VIEWER_TEST_PROVIDER_CREDENTIAL"
KEY_PIECES = sorted({KEY[i : i + 8] for i in range(len(KEY) - 7)})
DEMO_TIMEOUT_S = 900  # the demo on a loaded 2-core machine; this only bounds a hang
STARTUP_TIMEOUT_S = 120


@dataclass
class Viewer:
    url: str
    root: Path
    log: Path

    @property
    def dagster_home(self) -> Path:
        return self.root.parent / "dagster_home"

    def scores(self, evaluator: str, day: str = DAY) -> str:
        """Every file of the partition (a day judged in parts has one per part)."""
        return str(
            self.root / "warehouse" / "judge_scores" / f"evaluator={evaluator}" / f"date={day}" / "**" / "part.parquet"
        )

    def query(self, sql: str, params: list | None = None) -> list[tuple]:
        """What an analyst's DuckDB says about the same Parquet files (the expected values of the tests)."""
        with duckdb.connect() as conn:
            return conn.execute(sql, params or []).fetchall()


@pytest.fixture(scope="package")
def viewer_port() -> int:
    return free_port()


@pytest.fixture(scope="package")
def demo_root(local_judge, viewer_port, tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("viewer")
    root = base / "data"
    shutil.copytree(REPO_DATA, root, ignore=shutil.ignore_patterns("warehouse", "state", "dagster_home", "*.duckdb*"))
    write_evaluator(
        root,
        "key_echo",
        name="key_echo",
        mode="score",
        score_scale={"min": 1, "max": 5},
        prompt="Q: {{input}} A: {{output}}",
        models=[
            {"model": f"openai/fault/{kind}", "api_base": local_judge.base_url, "api_key_env": KEY_ENV}
            for kind in ("echo_key_reply", "echo_key_long")
        ],
        consensus="mean",
        trigger="sampled",
        sample_rate=0.05,
        max_retries=0,
        timeout_s=30,
    )
    env = {
        **os.environ,
        "EVAL_PLATFORM_DATA_DIR": str(root),
        "DAGSTER_HOME": str(base / "dagster_home"),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        KEY_ENV: KEY,
    }
    env.pop("EVAL_PLATFORM_LOCAL_JUDGE_URL", None)
    # where the viewer will listen: the runs link each judge_scores partition to its page there
    env["EVAL_PLATFORM_VIEWER_URL"] = f"http://127.0.0.1:{viewer_port}"
    done = subprocess.run(
        [sys.executable, "-m", "eval_platform.cli", "demo", "--days", "1"],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=DEMO_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root


@pytest.fixture(scope="package")
def viewer(demo_root, viewer_port, tmp_path_factory) -> Viewer:
    """`eval-platform view` as a user starts it, in a process of its own (no key in its environment)."""
    log = tmp_path_factory.mktemp("viewer_log") / "viewer.log"
    env = {k: v for k, v in viewer_env().items() if k != KEY_ENV}
    with serve(demo_root, log, env, port=viewer_port, ready="/evaluators") as viewer:
        yield viewer


def viewer_env() -> dict[str, str]:
    """This process's environment, with this checkout importable, as the viewer's process gets it."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }


@contextmanager
def serve(
    root: Path, log: Path, env: dict[str, str], port: int | None = None, ready: str = "/static/viewer.css"
) -> Iterator[Viewer]:
    """`eval-platform view` on the data root `root` in a process of its own (environment `env`; on `port`, else a
    free one), once `ready` answers 200; stopped after."""
    port = port or free_port()
    command = [sys.executable, "-m", "eval_platform.cli", "--data-dir", str(root), "view", "--port", str(port)]
    process = start(command, env, log)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"eval-platform view exited with {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"{url}{ready}", timeout=30).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"eval-platform view did not answer within {STARTUP_TIMEOUT_S} s:\n{log.read_text()}")
            time.sleep(0.5)
        yield Viewer(url=url, root=root, log=log)
    finally:
        stop(process)


@pytest.fixture
def page(viewer):
    """A Chromium page that may reach the viewer only: any other request (the internet) is refused and fails the
    test, so a page that needs an asset from elsewhere is noticed."""
    expect.set_options(timeout=UI_TIMEOUT_MS)
    refused: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1500, "height": 1100})

        def only_the_viewer(route):
            if route.request.url.startswith(viewer.url):
                route.continue_()
            else:
                refused.append(route.request.url)
                route.abort()

        context.route(re.compile(r"^https?://"), only_the_viewer)
        page = context.new_page()
        page.set_default_timeout(UI_TIMEOUT_MS)
        try:
            yield page
        finally:
            context.close()
            browser.close()
    assert not refused, f"the viewer's pages asked for other hosts: {sorted(set(refused))}"
