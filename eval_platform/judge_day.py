"""`eval-platform judge --day YYYY-MM-DD`: ingest a day's trace files and judge it with every enabled evaluator
(or those named), then roll up costs and agreement, as the daily schedule does, in the Dagster instance of the
data root (`$DAGSTER_HOME`, default `<data root>/dagster_home`): the runs show in the UI afterwards.

Calls are paid: price the day first with `eval-platform dry-run --start DAY --end DAY`.
"""

from __future__ import annotations

import argparse
import os
from datetime import date

import dagster as dg

from eval_platform.schemas import COMPLETED, FAILED, NOT_SAMPLED, SKIPPED
from eval_platform.settings import DATA_DIR_ENV, data_root
from eval_platform.storage.location import DataRoot

ROLLUPS = ("judge_cost_daily", "judge_cost_monthly", "agreement")


def assets_of(defs: dg.Definitions) -> list[dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset]:
    """The code location's assets as `dg.materialize` takes them (`build_definitions` declares no other kind)."""
    assets = list(defs.assets or [])
    kept = [a for a in assets if isinstance(a, dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset)]
    if len(kept) != len(assets):
        raise TypeError("the definitions hold assets dg.materialize cannot run (cacheable assets definitions)")
    return kept


def materialize(defs: dg.Definitions, asset_key: str, partition_key, instance: dg.DagsterInstance) -> bool:
    """One asset (partition) in a run of the instance, its log at WARNING on the console; True when it succeeded."""
    result = dg.materialize(
        assets=assets_of(defs),
        selection=[asset_key],
        partition_key=partition_key,
        instance=instance,
        resources=defs.resources,
        raise_on_error=False,
        run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
    )
    return result.success


def waiting_text(instance: dg.DagsterInstance, evaluator: str, day: str) -> str | None:
    """What the partition just judged left waiting to be finished (`judging.completion`), or None."""
    partition = str(dg.MultiPartitionKey({"date": day, "evaluator": evaluator}))
    found = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey("judge_scores"), asset_partitions=[partition]), limit=1
    ).records
    materialization = found[0].asset_materialization if found else None
    metadata = materialization.metadata if materialization is not None else {}
    count, first = metadata.get("traces_waiting_for_completion"), metadata.get("complete_at")
    if count is None or not count.value:
        return None
    when = first.value if first is not None else "?"
    return (
        f"  {count.value} trace(s) wait to be finished (quiet period): no row yet; the first completes at {when} "
        "(judge_waiting_traces_sensor judges them then, or run this again after it)"
    )


def day_summary(root: DataRoot, day: str, names: list[str]) -> str:
    """Per evaluator: rows by status, the mean score and the skip and failure reasons of the day."""
    from eval_platform.storage.warehouse import open_catalog

    quoted = ", ".join(f"'{n}'" for n in names)
    with open_catalog(root) as conn:
        rows = conn.execute(
            f"""
            SELECT evaluator,
                   count(*) FILTER (status = '{COMPLETED}') AS completed,
                   count(*) FILTER (status = '{FAILED}') AS failed,
                   count(*) FILTER (status = '{SKIPPED}' AND coalesce(reason, '') <> '{NOT_SAMPLED}') AS skipped,
                   round(avg(score) FILTER (status = '{COMPLETED}' AND is_final), 3) AS mean_score,
                   round(sum(cost_usd), 6) AS cost_usd,
                   string_agg(DISTINCT reason, ', ' ORDER BY reason)
                       FILTER (status <> '{COMPLETED}' AND coalesce(reason, '') <> '{NOT_SAMPLED}') AS reasons
            FROM judge_scores WHERE date = ? AND evaluator IN ({quoted}) GROUP BY evaluator ORDER BY evaluator
            """,
            [day],
        ).fetchall()
    lines = [f"{'evaluator':<24}{'completed':>10}{'failed':>8}{'skipped':>8}{'mean':>8}{'cost $':>12}  reasons"]
    for evaluator, completed, failed, skipped, mean, cost, reasons in rows:
        mean_text = "-" if mean is None else f"{mean:.3f}"
        lines.append(
            f"{evaluator:<24}{completed:>10}{failed:>8}{skipped:>8}{mean_text:>8}{cost or 0:>12.6f}  {reasons or ''}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="eval-platform judge", description=__doc__.split("\n\n")[0])
    parser.add_argument("--day", required=True, help="the UTC day, YYYY-MM-DD (its folder traces/<day>/)")
    parser.add_argument("--evaluator", action="append", help="an evaluator name (repeatable); default: all enabled")
    args = parser.parse_args(argv)
    try:
        day = date.fromisoformat(args.day).isoformat()
    except ValueError:
        parser.error(f"--day {args.day!r} is not a day: write YYYY-MM-DD")
    root = data_root()
    if not root.is_dir():
        parser.error(f"the data root {root} does not exist: run `eval-platform init {root}` or set ${DATA_DIR_ENV}")
    os.environ.setdefault(DATA_DIR_ENV, str(root))
    from eval_platform.ui import dagster_home

    os.environ["DAGSTER_HOME"] = str(dagster_home(root))

    from eval_platform.definitions import build_definitions
    from eval_platform.judging.loading import load_evaluators

    evaluators = load_evaluators(root / "evaluators", broken={})
    names = args.evaluator or [name for name, config in evaluators.items() if config.enabled]
    unknown = sorted(set(names) - set(evaluators))
    if unknown:
        parser.error(f"no evaluator named {', '.join(unknown)}; known: {', '.join(sorted(evaluators)) or 'none'}")
    if not names:
        parser.error(f"no enabled evaluator in {root / 'evaluators'}")
    defs = build_definitions(root)
    failed: list[str] = []
    with dg.DagsterInstance.get() as instance:
        if not materialize(defs, "traces", day, instance):
            print(f"ingesting traces[{day}] failed: see the run in the Dagster UI (eval-platform ui)")
            return 1
        print(f"traces[{day}] ingested")
        for name in names:
            ok = materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": day, "evaluator": name}), instance)
            print(f"judge_scores[{name}|{day}] {'judged' if ok else 'FAILED: see the run in the Dagster UI'}")
            if ok:
                waiting = waiting_text(instance, name, day)
                if waiting:
                    print(waiting)
            if not ok:
                failed.append(name)
        for asset in ROLLUPS:
            if not materialize(defs, asset, None, instance):
                failed.append(asset)
    print()
    print(day_summary(DataRoot.from_env(root), day, names))  # this command's warehouse: the environment's store
    if failed:
        print(f"\n{len(failed)} step(s) failed: {', '.join(failed)}; their runs are in the Dagster UI")
    return 1 if failed else 0
