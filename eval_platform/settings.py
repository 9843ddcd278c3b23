"""Where the platform reads its inputs and writes its outputs."""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR_ENV = "EVAL_PLATFORM_DATA_DIR"


def data_root() -> Path:
    """The data root: `EVAL_PLATFORM_DATA_DIR`, default `./data` relative to the working directory."""
    return Path(os.environ.get(DATA_DIR_ENV, "data")).resolve()


def warehouse_dir(root: Path | None = None) -> Path:
    return (root or data_root()) / "warehouse"


def state_dir(root: Path | None = None) -> Path:
    """Small mutable state shared by concurrent runs: the budget ledger and the judge-call cache."""
    return (root or data_root()) / "state"


def duckdb_path(root: Path | None = None) -> Path:
    return (root or data_root()) / "eval_platform.duckdb"
