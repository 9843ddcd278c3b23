"""Resources: where the data root is, and how judges are reached."""

import os
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr

from eval_platform.llm.client import LiteLLMModelClient
from eval_platform.llm.runtime import ModelRuntime
from eval_platform.llm.shared_state import SharedState
from eval_platform.settings import (
    DATA_DIR_ENV,
    LOCAL_JUDGE_FOR_MISSING_KEYS_ENV,
    LOCAL_JUDGE_URL_ENV,
    S3_ACCESS_KEY_ID_ENV,
    S3_ENDPOINT_URL_ENV,
    S3_REGION_ENV,
    S3_SECRET_ACCESS_KEY_ENV,
    WAREHOUSE_URL_ENV,
    data_root,
)
from eval_platform.storage import location


class WarehouseResource(dg.ConfigurableResource):
    """The data root (inputs, state and the DuckDB catalog under it) and where the Parquet warehouse is: under the
    data root on local disk by default, or an S3-compatible bucket (`warehouse_url`).

    Declare the bucket's settings as `dg.EnvVar` (as `warehouse_resource` does): Dagster then shows the variable's
    name, never its value, and the secret key is read only when a run starts.
    """

    data_dir: str | None = Field(default=None, description=f"Defaults to ${DATA_DIR_ENV}, else ./data.")
    warehouse_url: str | None = Field(
        default=None,
        description="s3://bucket/prefix for an S3-compatible store; unset: <data root>/warehouse on local disk.",
    )
    s3_endpoint_url: str | None = Field(default=None, description="http(s)://host:port of the store; unset: AWS S3.")
    s3_region: str | None = Field(default=None, description="The bucket's region (us-east-1 when unset).")
    s3_access_key_id: str | None = Field(default=None, description="Unset: the AWS SDK's credential chain.")
    s3_secret_access_key: str | None = Field(default=None, description="Give it as an EnvVar, never as a value.")

    def store(self, root: Path) -> location.Store:
        if not self.warehouse_url:
            return location.LocalStore(root / "warehouse")
        return location.parse_url(
            self.warehouse_url, self.s3_endpoint_url, self.s3_region, self.s3_access_key_id, self.s3_secret_access_key
        )

    @property
    def root(self) -> location.DataRoot:
        """The data root with this resource's store, what the storage functions (`storage/warehouse.py`) are given.
        Reading it changes nothing: the store is part of the value, not remembered anywhere."""
        folder = Path(self.data_dir).resolve() if self.data_dir else data_root()
        return location.DataRoot(folder, self.store(folder))


def warehouse_resource(root: Path | None = None) -> WarehouseResource:
    """The warehouse resource as the code location declares it: each of the store's settings that is set in the
    environment is passed as `dg.EnvVar` (resolved when a run launches; the UI shows only the variable's name)."""
    names = {
        "warehouse_url": WAREHOUSE_URL_ENV,
        "s3_endpoint_url": S3_ENDPOINT_URL_ENV,
        "s3_region": S3_REGION_ENV,
        "s3_access_key_id": S3_ACCESS_KEY_ID_ENV,
        "s3_secret_access_key": S3_SECRET_ACCESS_KEY_ENV,
    }
    if not os.environ.get(WAREHOUSE_URL_ENV):
        return WarehouseResource(data_dir=str(root) if root else None)
    settings = {field: dg.EnvVar(name) for field, name in names.items() if os.environ.get(name)}
    return WarehouseResource(data_dir=str(root) if root else None, **settings)


class JudgeResource(dg.ConfigurableResource):
    """LLM judges through litellm. Provider keys come from each evaluator's `api_key_env` variable.

    When an evaluator's key is not set, its traces are SKIPPED (no_credentials), whether or not a local judge URL
    is configured: the local judge answers only the models that name it (`local/<name>`), and a keyless evaluator
    only in the demo's explicit mode (`local_judge_for_missing_keys`: replayed recordings or labelled mock verdicts).

    The judge cache, the budget ledgers and batch state follow the run's Dagster instance (`SharedState`): in
    SQLite files under the data root's state/ folder, or, when the instance is on PostgreSQL, in its database.
    """

    local_judge_url: str | None = Field(default=None, description=f"Defaults to ${LOCAL_JUDGE_URL_ENV} when set.")
    local_judge_for_missing_keys: bool = Field(
        default=False,
        description="The demo's mode: the local judge answers for an evaluator whose key variable is not set "
        f"(placeholder verdicts, labelled local/...). Defaults to ${LOCAL_JUDGE_FOR_MISSING_KEYS_ENV}=1.",
    )
    max_concurrency_per_model: int = Field(default=16, description="Calls in flight per model string within one run.")
    _instance: Any = PrivateAttr(default=None)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        self._instance = context.instance  # where the run's state lives (see `runtime`)

    def runtime(self, root: Path) -> ModelRuntime:
        state = SharedState.of(root, self._instance)
        return ModelRuntime(
            client=LiteLLMModelClient(max_concurrency=self.max_concurrency_per_model),
            cache=state.model_cache(),
            ledger=state.judge_ledger(),
            batch_dir=state.batches(),
            local_judge_url=self.local_judge_url or os.environ.get(LOCAL_JUDGE_URL_ENV) or None,
            local_judge_for_missing_keys=self.local_judge_for_missing_keys or local_judge_for_missing_keys(),
            benchmark_ledger=state.benchmark_ledger(),
        )


def judge_resource() -> JudgeResource:
    """The judge resource as the code location declares it.

    Provider keys are never resource config: each evaluator names its key's variable (`api_key_env`) and the call
    layer reads it at call time, so no key is ever part of a run's config, the UI's resource view or a cache key.
    The local judge URL, when set in the environment, is passed as `dg.EnvVar`: Dagster resolves it when a run
    launches and shows the variable's name, never its value, in the UI.
    """
    for_missing_keys = local_judge_for_missing_keys()
    if os.environ.get(LOCAL_JUDGE_URL_ENV):
        return JudgeResource(
            local_judge_url=dg.EnvVar(LOCAL_JUDGE_URL_ENV), local_judge_for_missing_keys=for_missing_keys
        )
    return JudgeResource(local_judge_for_missing_keys=for_missing_keys)


def local_judge_for_missing_keys() -> bool:
    """Whether the environment turns the demo's mode on (`EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS=1`, or
    true / yes / on)."""
    return os.environ.get(LOCAL_JUDGE_FOR_MISSING_KEYS_ENV, "").strip().lower() in ("1", "true", "yes", "on")
