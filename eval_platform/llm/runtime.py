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

if TYPE_CHECKING:
    from eval_platform.llm.batch.mode import BatchCalls


@dataclass
class JudgeRuntime:
    client: JudgeClient
    cache: JudgeCache
    ledger: BudgetLedger
    local_judge_url: str | None = None
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    batch_dir: Path | None = None  # where batch mode keeps submitted batches; default: beside the cache
    batch: BatchCalls | None = None  # set by batch mode while it judges a day (see `llm.batch.mode`)
