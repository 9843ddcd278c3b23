"""Links both ways between the viewer and the Dagster UI.

- Dagster -> viewer: `judge_scores`' materialization metadata carries `viewer`, the URL of the evaluator's day in
  the viewer, when `$EVAL_PLATFORM_VIEWER_URL` (the viewer's base URL, e.g. http://127.0.0.1:3100) is set where the
  runs execute; unset, no link is made (a link to a viewer that was never started helps nobody).
- viewer -> Dagster: each evaluator's day links to its partition of `judge_scores` and to the runs that
  materialized it, under the Dagster UI's base URL (`eval-platform view --dagster-url`, default
  `$EVAL_PLATFORM_DAGSTER_URL` or http://127.0.0.1:3000, where `eval-platform ui` listens).
"""

from __future__ import annotations

import os
from urllib.parse import quote, urlencode

VIEWER_URL_ENV = "EVAL_PLATFORM_VIEWER_URL"
DAGSTER_URL_ENV = "EVAL_PLATFORM_DAGSTER_URL"
DEFAULT_DAGSTER_URL = "http://127.0.0.1:3000"


def day_path(evaluator: str, day: str) -> str:
    """The viewer's path of one evaluator's day."""
    return f"/evaluators/{quote(evaluator, safe='')}/{quote(day, safe='')}"


def trace_path(day: str, trace_id: str) -> str:
    return f"/traces/{quote(day, safe='')}/{quote(trace_id, safe='')}"


def session_path(day: str, session_id: str) -> str:
    return f"/sessions/{quote(day, safe='')}/{quote(session_id, safe='')}"


def viewer_day_url(evaluator: str, day: str, env: dict[str, str] | None = None) -> str | None:
    """The viewer's URL of an evaluator's day, or None when `$EVAL_PLATFORM_VIEWER_URL` is not set."""
    base = (os.environ if env is None else env).get(VIEWER_URL_ENV, "").strip().rstrip("/")
    return f"{base}{day_path(evaluator, day)}" if base else None


def dagster_url(env: dict[str, str] | None = None) -> str:
    return ((os.environ if env is None else env).get(DAGSTER_URL_ENV) or DEFAULT_DAGSTER_URL).rstrip("/")


def partition_key(evaluator: str, day: str) -> str:
    """judge_scores' multi-partition key as Dagster spells it (dimensions by name: date, then evaluator)."""
    return f"{day}|{evaluator}"


def dagster_partition_url(base: str, evaluator: str, day: str) -> str:
    """The judge_scores partition's page in the Dagster UI."""
    query = urlencode({"view": "partitions", "partition": partition_key(evaluator, day)})
    return f"{base}/assets/judge_scores?{query}"


def dagster_runs_url(base: str, evaluator: str, day: str) -> str:
    """The Dagster UI's runs list filtered to the runs that materialized this partition (by its partition tags)."""
    tags = [("q[]", f"tag:dagster/partition/date={day}"), ("q[]", f"tag:dagster/partition/evaluator={evaluator}")]
    return f"{base}/runs?{urlencode(tags)}"
