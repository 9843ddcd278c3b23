"""Keep the verdicts of an evaluator's earlier configuration when its `judge_scores` partition is re-judged.

A `judge_scores` partition (evaluator × day) holds the verdicts of the evaluator's current configuration: re-judging
it after a prompt or model change replaces them. So that "how does the new configuration differ from the old one on
the same traces?" can still be answered, the judge_scores write path calls `keep_superseded` once, before the new
verdicts replace the partition: the partition's rows of any other config hash are copied into the partition of
`judge_scores_history` for the same evaluator and day, with `superseded_by` (the new hash) and `superseded_at`.

Bounded: per evaluator and day the rows of the last `EVAL_PLATFORM_JUDGE_HISTORY_HASHES` superseded config hashes
are kept (default 3, by when they were superseded; a hash superseded again replaces its older rows), older hashes'
rows are dropped when the history partition is rewritten. The history partition is written whole, atomically
(`partition_writer`), streamed a frame at a time; `judge_scores` is only read. A run that fails after this step
leaves the old verdicts in both tables (judge_scores unchanged), never in neither.
"""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl

from eval_platform.schemas import JUDGE_SCORE_HISTORY_SCHEMA
from eval_platform.settings import judge_history_hashes
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import iter_partition, partition_writer, read_partition

HISTORY_TABLE = "judge_scores_history"


def history_keys(evaluator: str, day: str) -> dict[str, str]:
    return {"evaluator": evaluator, "date": day}


def keep_superseded(root: DataRoot, evaluator: str, day: str, config_hash: str, keep: int | None = None) -> list[str]:
    """Before `judge_scores[evaluator, day]` is replaced by verdicts of `config_hash`: copy its rows of other
    config hashes into `judge_scores_history` (keeping the newest `keep` hashes); returns the hashes copied."""
    keep = judge_history_hashes() if keep is None else keep
    keys = history_keys(evaluator, day)
    current = read_partition(root, "judge_scores", keys, ["config_hash"])
    if current is None:
        return []
    superseded = sorted(set(current["config_hash"].drop_nulls().unique().to_list()) - {config_hash})
    if not superseded:
        return []  # re-judged under the same configuration: nothing is superseded
    earlier = read_partition(root, HISTORY_TABLE, keys, ["config_hash", "superseded_at"])
    if keep == 0 and earlier is None:
        return []
    # the newest first: the hashes superseded now, then the earlier ones by when they were superseded
    older: list[str] = []
    if earlier is not None and earlier.height:
        last = earlier.group_by("config_hash").agg(pl.col("superseded_at").max()).sort("superseded_at", descending=True)
        older = [h for h in last["config_hash"].to_list() if h is not None and h not in superseded]
    kept = set((superseded + older)[:keep])
    now = datetime.now(UTC)
    with partition_writer(root, HISTORY_TABLE, keys, JUDGE_SCORE_HISTORY_SCHEMA) as out:
        for frame in iter_partition(root, "judge_scores", keys) or []:
            rows = frame.filter(pl.col("config_hash").is_in(list(kept & set(superseded))))
            out.write(rows.with_columns(superseded_by=pl.lit(config_hash), superseded_at=pl.lit(now)))
        for frame in iter_partition(root, HISTORY_TABLE, keys) or []:
            out.write(frame.filter(pl.col("config_hash").is_in(list(kept - set(superseded)))))
    return [h for h in superseded if h in kept]
