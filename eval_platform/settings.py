"""Where the platform reads its inputs and writes its outputs."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "EVAL_PLATFORM_DATA_DIR"
# Where the warehouse's Parquet partitions go when not under the data root: `s3://bucket/prefix` (an S3-compatible
# store). Unset: `<data root>/warehouse` on local disk. The store's endpoint and credentials are read from the
# standard AWS variables, the ones every S3 client (pyarrow, polars, DuckDB's credential chain, the aws CLI) reads.
WAREHOUSE_URL_ENV = "EVAL_PLATFORM_WAREHOUSE_URL"
S3_ENDPOINT_URL_ENV = "AWS_ENDPOINT_URL"
S3_REGION_ENV = "AWS_REGION"
S3_ACCESS_KEY_ID_ENV = "AWS_ACCESS_KEY_ID"
S3_SECRET_ACCESS_KEY_ENV = "AWS_SECRET_ACCESS_KEY"  # a secret: the redaction rule remembers it (`*ACCESS_KEY`)
# The local judge's base URL (`python -m eval_platform.local_judge`). It answers the models that name it
# (`local/<name>`), and nothing else unless LOCAL_JUDGE_FOR_MISSING_KEYS_ENV is set too.
LOCAL_JUDGE_URL_ENV = "EVAL_PLATFORM_LOCAL_JUDGE_URL"
# The demo's mode, chosen explicitly: an evaluator whose key variable is not set is answered by its `local_judge:`
# model (placeholder verdicts, labelled local/...) instead of being SKIPPED no_credentials. "1" turns it on.
LOCAL_JUDGE_FOR_MISSING_KEYS_ENV = "EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS"


def data_root() -> Path:
    """The data root: `EVAL_PLATFORM_DATA_DIR`, default `./data` relative to the working directory."""
    return Path(os.environ.get(DATA_DIR_ENV, "data")).resolve()


def warehouse_dir(root: Path | None = None) -> Path:
    """The local warehouse folder (the default store; `storage.location` picks the store in use)."""
    return (root or data_root()) / "warehouse"


def state_dir(root: Path | None = None) -> Path:
    """Small mutable state shared by concurrent runs: the budget ledger and the judge-call cache."""
    return (root or data_root()) / "state"


def duckdb_path(root: Path | None = None) -> Path:
    return (root or data_root()) / "eval_platform.duckdb"
