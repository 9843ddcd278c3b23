"""The synthetic project the day-scale and backfill benchmarks judge: a score evaluator on the local judge, and
traces with a short question and answer (one place, so both scripts measure the same work)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def write_score_evaluator(root: Path, name: str, judge_url: str, **fields: Any) -> None:
    """`<root>/evaluators/<name>.yaml`: a 0-1 score judge on the local judge at `judge_url` (its prompt names it,
    so two evaluators never share cached verdicts), with `fields` added (`batch=...`)."""
    config = {
        "mode": "score",
        "score_scale": {"min": 0, "max": 1},
        "model": "openai/mock",
        "api_base": judge_url,
        "temperature": 0.0,
        "prompt": f"Rate the {name} of the answer.\nQ: {{{{input}}}}\nA: {{{{output}}}}",
        **fields,
    }
    (root / "evaluators").mkdir(parents=True, exist_ok=True)
    (root / "evaluators" / f"{name}.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def synthetic_trace(day: str, i: int, id_digits: int) -> dict[str, Any]:
    """Trace `i` of `day`: its id is the day and `i` zero-padded to `id_digits`."""
    return {
        "trace_id": f"{day}-{i:0{id_digits}d}",
        "timestamp": f"{day}T{i % 24:02d}:{i % 60:02d}:00Z",
        "input": f"Summarise item {i} of {day} in one sentence.",
        "output": f"Item {i} of {day} is a synthetic trace with a short answer.",
    }
