"""Shared fixtures: a temporary data root, a real local judge server on 127.0.0.1, and a judge runtime over it."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
import yaml

from eval_platform.startup import start_process

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
# A file a test just wrote is final at once (the sensor requests it, the ingest reads its unterminated last row):
# the tests of files still being written (defs/test_arrivals.py) set EVAL_PLATFORM_FILE_SETTLE_S themselves.
os.environ.setdefault("EVAL_PLATFORM_FILE_SETTLE_S", "0")
# The tests' process starts here: set up as every process of the platform is (key redaction on every log line).
start_process()

REPO_DATA = Path(__file__).resolve().parents[1] / "data"

# postgres_server, postgres_db and state_backend (the shared state on SQLite and on PostgreSQL); label_studio_server
pytest_plugins = ["eval_platform_tests.shared_state_backends", "eval_platform_tests.label_studio_server"]


@pytest.fixture(autouse=True)
def finetune_lines_are_valid(request):
    """Every fine-tuning export a test writes under its temp folder is checked, line by line, against OpenAI's
    documented chat fine-tuning format (finetune/openai_format.py), whatever the test itself asserts."""
    if "tmp_path" not in request.fixturenames:
        yield
        return
    tmp_path = request.getfixturevalue("tmp_path")
    yield
    from eval_platform_tests.finetune.openai_format import check_line

    for path in sorted(tmp_path.rglob("train.jsonl")):
        if "finetune_exports" in path.parts:
            for text in path.read_text(encoding="utf-8").splitlines():
                check_line(text)


@pytest.fixture(scope="session")
def local_judge():
    """The project's local judge, serving the PandaLM recordings shipped in data/ (read only)."""
    from tools.local_judge_wires import WiredJudgeServer

    server = WiredJudgeServer(data_root=REPO_DATA, retry_after_s=1.0, slow_s=3.0)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def runtime(tmp_path):
    """A judge runtime with its own cache and budget ledger per test (the judging and call-layer tests)."""
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient, RetryPolicy
    from eval_platform.llm.runtime import ModelRuntime

    return ModelRuntime(
        client=LiteLLMModelClient(max_concurrency=8, retry=RetryPolicy(base_delay_s=0.05, max_delay_s=0.2)),
        cache=ModelCache(tmp_path / "cache"),
        ledger=BudgetLedger(tmp_path / "budget.sqlite"),
        env={},
    )


def judge_requests(server) -> int:
    return httpx.get(f"{server.base_url}/stats").json()["requests"]


@pytest.fixture
def data_root(tmp_path, monkeypatch) -> Path:
    """An empty data root in a temp folder; nothing is written into the checkout."""
    root = tmp_path / "data"
    (root / "evaluators").mkdir(parents=True)
    monkeypatch.setenv("EVAL_PLATFORM_DATA_DIR", str(root))
    return root


def write_evaluator(root: Path, file_stem: str, **fields) -> Path:
    path = root / "evaluators" / f"{file_stem}.yaml"
    path.write_text(yaml.safe_dump(fields, sort_keys=False))
    return path


def copy_sample_days(root: Path, days: list[str]) -> None:
    for day in days:
        shutil.copytree(REPO_DATA / "traces" / day, root / "traces" / day)


def docs_text() -> str:
    """The user documentation as one text: README.md, then every page under docs/ (the examples tests read)."""
    repo = Path(__file__).resolve().parents[1]
    pages = [repo / "README.md", *sorted((repo / "docs").rglob("*.md"))]
    return "\n\n".join(page.read_text(encoding="utf-8") for page in pages)
