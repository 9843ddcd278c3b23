"""The verdicts of an evaluator's earlier configurations, for the compare page (`judge_scores_history`).

A `judge_scores` partition holds the current configuration's verdicts only; the judge_scores write path keeps the
last superseded configurations' verdicts in `judge_scores_history` (`judging/history.py`). A compare side that names
a config hash reads both, so that one evaluator's two config hashes (before and after a prompt change) compare on
the same traces. A hash found in the current partition is read from there only (a configuration that came back
also has older rows in the history, which are not its current verdicts).
"""

from __future__ import annotations

from typing import Any

from eval_platform.judging.history import HISTORY_TABLE, history_keys
from eval_platform.storage.warehouse import partition_path, partition_values


def _literal(location: str) -> str:
    return "'" + str(location).replace("'", "''") + "'"


def history_location(warehouse: Any, evaluator: str, day: str) -> str | None:
    """The history partition's file of an evaluator's day, or None when no configuration was superseded there."""
    if day not in partition_values(warehouse.root, HISTORY_TABLE, {"evaluator": evaluator}, "date"):
        return None
    return str(partition_path(warehouse.root, HISTORY_TABLE, history_keys(evaluator, day)))


def scores_source(warehouse: Any, evaluator: str, day: str, config_hash: str = "") -> str:
    """A SQL source of an evaluator's verdicts of a day: the current partition, and with `config_hash` the
    superseded configurations' verdicts too (judge_scores' columns only)."""
    current = f"read_parquet({_literal(warehouse.scores_location(evaluator, day))}, union_by_name = true)"
    history = history_location(warehouse, evaluator, day) if config_hash else None
    if history is None:
        return current
    return f"""(SELECT * FROM {current} UNION ALL BY NAME
        SELECT * EXCLUDE (superseded_by, superseded_at) FROM read_parquet({_literal(history)}, union_by_name = true)
        WHERE config_hash NOT IN (SELECT DISTINCT config_hash FROM {current} WHERE config_hash IS NOT NULL)) AS s"""


def config_hashes(warehouse: Any, evaluator: str, day: str) -> list[dict[str, Any]]:
    """The config hashes of an evaluator's verdicts on a day: the current one(s) first, then the superseded ones,
    the most recently superseded first; each with its count of final verdicts."""
    if not warehouse.has_day(evaluator, day):
        return []
    current = f"read_parquet({_literal(warehouse.scores_location(evaluator, day))}, union_by_name = true)"
    history = history_location(warehouse, evaluator, day)
    with warehouse.sql() as conn:
        rows = conn.execute(
            f"SELECT config_hash, count(*) FILTER (is_final), NULL, NULL FROM {current} "
            "WHERE config_hash IS NOT NULL GROUP BY ALL ORDER BY 1"
        ).fetchall()
        if history is not None:
            rows += conn.execute(
                f"""SELECT config_hash, count(*) FILTER (is_final), max(superseded_at), any_value(superseded_by)
                FROM read_parquet({_literal(history)}, union_by_name = true) WHERE config_hash IS NOT NULL
                  AND config_hash NOT IN (SELECT DISTINCT config_hash FROM {current} WHERE config_hash IS NOT NULL)
                GROUP BY ALL ORDER BY 3 DESC, 1"""
            ).fetchall()
    return [
        {"config_hash": h, "verdicts": n, "current": at is None, "superseded_at": at, "superseded_by": by}
        for h, n, at, by in rows
    ]
