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
# The first day partition of `traces` and `judge_scores` (read when the code location loads): an earlier day cannot
# be ingested, judged or priced.
START_DATE_ENV = "EVAL_PLATFORM_START_DATE"
DEFAULT_START_DATE = "2026-11-01"
EVALUATORS_FOLDER = "evaluators"
# The longest a run's calls wait, in all, for budget reservations of another host (or a submitted batch) to settle
# when the budget is otherwise used: a host that died keeps its reservations in flight for their whole TTL (15
# minutes or more), holding the waiting run's step and pool slot. After it, those calls are SKIPPED budget_exhausted.
BUDGET_WAIT_ENV = "EVAL_PLATFORM_BUDGET_WAIT_S"
DEFAULT_BUDGET_WAIT_S = 120.0
# How long an export file's size and modification time must have stayed the same before the new-files sensor
# requests its day and before the ingest reads its last unterminated row as whole (docs/traces.md, "Files still
# being written"). Read on every tick and every ingest, so a change needs no reload.
FILE_SETTLE_ENV = "EVAL_PLATFORM_FILE_SETTLE_S"
DEFAULT_FILE_SETTLE_S = 30.0
# How many superseded config hashes of one evaluator and day keep their verdicts in `judge_scores_history` (the
# newest ones; 0 keeps none). Read at each judging run.
JUDGE_HISTORY_HASHES_ENV = "EVAL_PLATFORM_JUDGE_HISTORY_HASHES"
DEFAULT_JUDGE_HISTORY_HASHES = 3
# How many partitions a backfill run takes at most (read where the code location is built: `definitions.py`).
JUDGE_PARTITIONS_PER_RUN_ENV = "EVAL_PLATFORM_JUDGE_PARTITIONS_PER_RUN"
TRACE_DAYS_PER_RUN_ENV = "EVAL_PLATFORM_TRACE_DAYS_PER_RUN"
DEFAULT_PARTITIONS_PER_RUN = 10


class DataRootError(FileNotFoundError):
    """The data root, or its `evaluators/` folder, does not exist: the message names the path and the variable."""


# The local judge's base URL (`python -m eval_platform.local_judge`). It answers the models that name it
# (`local/<name>`), and nothing else unless LOCAL_JUDGE_FOR_MISSING_KEYS_ENV is set too.
LOCAL_JUDGE_URL_ENV = "EVAL_PLATFORM_LOCAL_JUDGE_URL"
# The demo's mode, chosen explicitly: an evaluator whose key variable is not set is answered by its `local_judge:`
# model (placeholder verdicts, labelled local/...) instead of being SKIPPED no_credentials. "1" turns it on.
LOCAL_JUDGE_FOR_MISSING_KEYS_ENV = "EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS"


def data_root() -> Path:
    """The data root: `EVAL_PLATFORM_DATA_DIR`, default `./data` relative to the working directory."""
    return Path(os.environ.get(DATA_DIR_ENV, "data")).resolve()


def checked_data_root(root: Path | None = None) -> Path:
    """The data root (`root`, else `data_root()`), refused with a `DataRootError` when it or its `evaluators/`
    folder does not exist: a mistyped `EVAL_PLATFORM_DATA_DIR`, or a command started from another folder than the
    one holding `./data`, would otherwise load nothing and say nothing (no evaluator, a bill of 0 USD)."""
    root = Path(root) if root is not None else data_root()
    value = os.environ.get(DATA_DIR_ENV)
    if root.resolve() != data_root():
        where = f"passed by the caller, not read from {DATA_DIR_ENV}"
    elif value is not None:
        where = f"{DATA_DIR_ENV}={value}"
    else:
        where = f"{DATA_DIR_ENV} is unset: ./data of the working directory {Path.cwd()}"
    if not root.is_dir():
        raise DataRootError(
            f"the data root {root} does not exist ({where}); set {DATA_DIR_ENV} to the folder that holds "
            f"{EVALUATORS_FOLDER}/ and traces/, or create it"
        )
    if not (root / EVALUATORS_FOLDER).is_dir():
        raise DataRootError(
            f"the data root {root} has no {EVALUATORS_FOLDER}/ folder ({root / EVALUATORS_FOLDER} does not exist; "
            f"{where}); create it (it may stay empty), or set {DATA_DIR_ENV} to the data root that has one"
        )
    return root


def budget_wait_s() -> float:
    """`EVAL_PLATFORM_BUDGET_WAIT_S` in seconds (default 120; 0: never wait for another host's reservations)."""
    value = os.environ.get(BUDGET_WAIT_ENV, "").strip()
    if not value:
        return DEFAULT_BUDGET_WAIT_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"{BUDGET_WAIT_ENV}={value!r} is not a number of seconds (0 or more)")
    return seconds


def file_settle_s() -> float:
    """`EVAL_PLATFORM_FILE_SETTLE_S` in seconds (default 30; 0: a file is final as soon as it is seen)."""
    value = os.environ.get(FILE_SETTLE_ENV, "").strip()
    if not value:
        return DEFAULT_FILE_SETTLE_S
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds == float("inf"):
        raise ValueError(f"{FILE_SETTLE_ENV}={value!r} is not a number of seconds (0 or more)")
    return seconds


def judge_history_hashes() -> int:
    """`EVAL_PLATFORM_JUDGE_HISTORY_HASHES`: superseded config hashes kept per evaluator and day (default 3)."""
    value = os.environ.get(JUDGE_HISTORY_HASHES_ENV, "").strip()
    if not value:
        return DEFAULT_JUDGE_HISTORY_HASHES
    if not value.isdigit():
        raise ValueError(f"{JUDGE_HISTORY_HASHES_ENV}={value!r} is not a number of config hashes (0 or more)")
    return int(value)


def partitions_per_run(name: str) -> int:
    """A backfill's partitions per run from the variable `name` (JUDGE_PARTITIONS_PER_RUN_ENV or
    TRACE_DAYS_PER_RUN_ENV; default DEFAULT_PARTITIONS_PER_RUN; 1 is Dagster's default, one run per partition)."""
    value = os.environ.get(name, "").strip()
    if not value:
        return DEFAULT_PARTITIONS_PER_RUN
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{name}={value!r} is not a number of partitions (1 or more)")
    return int(value)


def start_date() -> str:
    """The first day partition: `EVAL_PLATFORM_START_DATE`, default 2026-11-01 (YYYY-MM-DD)."""
    return os.environ.get(START_DATE_ENV, DEFAULT_START_DATE)


def warehouse_dir(root: Path | None = None) -> Path:
    """The local warehouse folder (the default store; `storage.location` picks the store in use)."""
    return (root or data_root()) / "warehouse"


def state_dir(root: Path | None = None) -> Path:
    """Small mutable state shared by concurrent runs: the budget ledger and the judge-call cache."""
    return (root or data_root()) / "state"


def duckdb_path(root: Path | None = None) -> Path:
    return (root or data_root()) / "eval_platform.duckdb"
