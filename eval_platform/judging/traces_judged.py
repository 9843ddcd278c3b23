"""Every traces update judged: which `traces` materialization a `judge_scores` partition judged, and when a day's
traces were updated during the run that judged it (the update the automation misses).

`judge_scores` records in each partition's materialization the storage id (and run) of the latest `traces`
materialization of its day, read when it starts judging that partition (`TRACES_JUDGED`). A file ingested while
that run is still going gets a newer `traces` materialization, older than the judge run's own: the automation
(`SCORE_WHEN_TRACES_UPDATE`) compares materialization times, takes the judge run's as current and never asks again.
`judge_traces_updated_while_judging_sensor` asks for exactly those partitions (`updated_while_judged`), once per
traces update (`UpdatedCursor`), and not while a run of the partition is in progress. When the traces are newer
than the judge run, the automation asks: this rule never does, so a partition is never requested twice.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import timedelta

# The judge_scores materialization's metadata: the storage id of the `traces` materialization of its day it judged
# (the latest when it started judging the partition), and that materialization's run.
TRACES_JUDGED = "traces_judged_storage_id"
TRACES_JUDGED_RUN = "traces_judged_run_id"

# The days the sensor looks at on a tick: those whose traces materialized within this long. A judge run longer
# than this that missed an update is not caught (the next traces update of the day is judged as usual).
RECENT = timedelta(hours=48)


def updated_while_judged(judged: int | None, latest_traces: int, judge_materialization: int) -> bool:
    """The partition's latest judge materialization (storage id `judge_materialization`) judged the traces
    materialization `judged`, and the day's latest (`latest_traces`) came after that one but before the judge
    materialization: it was written during the run, which did not read it. A materialization recorded before this
    was known (`judged` None) is not judged again on that account."""
    return judged is not None and judged < latest_traces < judge_materialization


@dataclass
class UpdatedCursor:
    """What the sensor keeps between ticks: per partition it requested, the traces materialization (storage id) it
    requested it for. Only partitions still in that state are kept."""

    requested: dict[str, int] = field(default_factory=dict)

    @classmethod
    def load(cls, text: str | None) -> UpdatedCursor:
        if not text:
            return cls()
        return cls(requested={k: int(v) for k, v in json.loads(text).get("requested", {}).items()})

    def dump(self) -> str:
        return json.dumps({"requested": self.requested}, sort_keys=True, separators=(",", ":"))

    def due(self, missed: dict[str, int], busy: set[str]) -> list[tuple[str, int]]:
        """Of `missed` (partition -> the traces materialization its judge run missed), those to request now: not
        yet requested for it, and no run of it in progress (`busy`: asked again on a later tick once that run is
        over, if it missed the update too). The cursor then holds only partitions of `missed` (one judged since, or
        out of the window, is dropped)."""
        new = sorted((p, s) for p, s in missed.items() if self.requested.get(p) != s and p not in busy)
        self.requested = {p: s for p, s in missed.items() if self.requested.get(p) == s} | dict(new)
        return new
