"""What a run calls models with: the client, the call cache, the budget ledger and the environment."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from eval_platform.llm.budget import BudgetLedger
from eval_platform.llm.cache import JudgeCache
from eval_platform.llm.client import JudgeClient
from eval_platform.llm.statedb import PostgresState

if TYPE_CHECKING:
    from eval_platform.llm.batch.mode import BatchCalls


@dataclass
class JudgeRuntime:
    client: JudgeClient
    cache: JudgeCache
    ledger: BudgetLedger
    local_judge_url: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    # Where batch mode keeps submitted batches (a folder, or the instance's PostgreSQL database); default: a
    # folder beside the cache.
    batch_dir: Path | PostgresState | None = None
    batch: BatchCalls | None = None  # set by batch mode while it judges a day (see `llm.batch.mode`)
    benchmark_ledger: BudgetLedger | None = None  # the models under test's spend; default: the data root's file
