"""Resources: where the data root is, and how judges are reached."""

import os
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from eval_platform.llm.client import LiteLLMJudgeClient
from eval_platform.llm.runtime import JudgeRuntime
from eval_platform.llm.shared_state import SharedState
from eval_platform.settings import DATA_DIR_ENV, data_root

LOCAL_JUDGE_URL_ENV = "EVAL_PLATFORM_LOCAL_JUDGE_URL"


class WarehouseResource(dg.ConfigurableResource):
    """The data root: inputs under it, Parquet warehouse and DuckDB catalog written under it."""

    data_dir: str | None = Field(None, description=f"Defaults to ${DATA_DIR_ENV}, else ./data.")

    @property
    def root(self) -> Path:
        return Path(self.data_dir).resolve() if self.data_dir else data_root()


class JudgeResource(dg.ConfigurableResource):
    """LLM judges through litellm. Provider keys come from each evaluator's `api_key_env` variable.

    When an evaluator's key is not set, its traces are SKIPPED (no_credentials), unless a local judge
    URL is configured: then the local judge server answers (replayed recordings or labelled mock verdicts).

    The judge cache, the budget ledgers and batch state follow the run's Dagster instance (`SharedState`): in
    SQLite files under the data root's state/ folder, or, when the instance is on PostgreSQL, in its database.
    """

    local_judge_url: str | None = Field(None, description=f"Defaults to ${LOCAL_JUDGE_URL_ENV} when set.")
    max_concurrency_per_model: int = Field(16, description="Calls in flight per model string within one run.")
    _instance: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._instance = context.instance  # where the run's state lives (see `runtime`)

    def runtime(self, root: Path) -> JudgeRuntime:
        state = SharedState.of(root, self._instance)
        return JudgeRuntime(
            client=LiteLLMJudgeClient(max_concurrency=self.max_concurrency_per_model),
            cache=state.judge_cache(),
            ledger=state.judge_ledger(),
            batch_dir=state.batches(),
            local_judge_url=self.local_judge_url or os.environ.get(LOCAL_JUDGE_URL_ENV) or None,
            benchmark_ledger=state.benchmark_ledger(),
        )


def judge_resource() -> JudgeResource:
    """The judge resource as the code location declares it.

    Provider keys are never resource config: each evaluator names its key's variable (`api_key_env`) and the call
    layer reads it at call time, so no key is ever part of a run's config, the UI's resource view or a cache key.
    The local judge URL, when set in the environment, is passed as `dg.EnvVar`: Dagster resolves it when a run
    launches and shows the variable's name, never its value, in the UI.
    """
    if os.environ.get(LOCAL_JUDGE_URL_ENV):
        return JudgeResource(local_judge_url=dg.EnvVar(LOCAL_JUDGE_URL_ENV))
    return JudgeResource()
