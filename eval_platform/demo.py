"""Run the daily scoring job on the bundled sample data and print what happened.

    python -m eval_platform.demo

It ingests every sample day under `<data root>/traces/` (an absent or empty data root first gets a copy of the
bundled sample data: `demo_data/` of the installed package, or `data/` of the checkout it runs from), scores each
enabled evaluator's partition of each day, rolls up judge costs, and prints a summary. Runs are recorded in a real
Dagster instance (`$DAGSTER_HOME`, default `<data root>/dagster_home`), so `dagster dev` shows them afterwards.

When an evaluator's provider key is not set, the bundled local judge answers instead (the demo turns this mode
on explicitly, `EVAL_PLATFORM_LOCAL_JUDGE_FOR_MISSING_KEYS=1`; elsewhere such rows are SKIPPED no_credentials),
over real HTTP on 127.0.0.1: the pairwise evaluator gets the GPT-3.5-turbo verdicts recorded by the PandaLM authors
(`local/replay/...` rows), the others get deterministic placeholder verdicts (`local/mock` rows), which
are a dry run of prompts, tokens and plumbing, not a judgment of quality.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from eval_platform.instance_config import shipped_instance_yaml
from eval_platform.judge_day import assets_of, materialize
from eval_platform.schemas import COMPLETED, FAILED, NOT_SAMPLED, SKIPPED
from eval_platform.settings import (
    DATA_DIR_ENV,
    LOCAL_JUDGE_FOR_MISSING_KEYS_ENV,
    LOCAL_JUDGE_URL_ENV,
    data_root,
)
from eval_platform.storage.location import DataRoot
from eval_platform.storage.warehouse import open_catalog


def _one_row(result: duckdb.DuckDBPyConnection) -> tuple[Any, ...]:
    """The row of a query that always returns one (aggregates without GROUP BY)."""
    row = result.fetchone()
    assert row is not None
    return row


def _sample_days(root: Path) -> list[str]:
    folder = root / "traces"
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and re.fullmatch(r"\d{4}-\d{2}-\d{2}", p.name))


# What a run writes beside the inputs; never copied from a checkout's data/.
_OUTPUTS = ("warehouse", "state", "dagster_home", "reports", "*.duckdb*", "__pycache__")


def bundled_sample_data() -> Path:
    """The demo's inputs: `demo_data/` inside the installed package (a wheel carries it, licences included; see
    setup.py), else `data/` of the checkout the package runs from (an editable install)."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "demo_data", package.parent / "data"):
        if _sample_days(candidate) and (candidate / "evaluators").is_dir():
            return candidate
    raise SystemExit(f"eval-platform demo: no bundled sample data in {package}; reinstall eval_platform from its wheel")


def prepare_data_root(root: Path) -> str | None:
    """Copy the bundled sample data into the data root when it has no sample day and is absent or empty; a line
    saying so, or None when the root already holds sample days. A root holding something else is refused."""
    if _sample_days(root):
        return None
    if root.exists() and any(root.iterdir()):
        raise SystemExit(
            f"eval-platform demo: the data root {root} holds no sample day (traces/<YYYY-MM-DD>/) and is not empty; "
            "pass --data-dir with a new folder to run the demo on the bundled sample data there"
        )
    source = bundled_sample_data()
    shutil.copytree(source, root, dirs_exist_ok=True, ignore=shutil.ignore_patterns(*_OUTPUTS))
    return f"the bundled sample data copied into {root}"


def _materialize(defs: dg.Definitions, asset_key: str, partition_key, instance) -> None:
    # The demo prints one line per step; the full event log is in the instance (the UI shows it).
    if not materialize(defs, asset_key, partition_key, instance):
        raise SystemExit(f"materializing {asset_key} [{partition_key}] failed; see the run in the Dagster UI")


def _summary(root: Path) -> str:
    with open_catalog(root) as conn:
        rows = conn.execute(
            f"""
            SELECT evaluator, any_value(model) AS model,
                   count(*) FILTER (status <> '{SKIPPED}' OR reason <> '{NOT_SAMPLED}') AS judged,
                   count(*) FILTER (status = '{COMPLETED}') AS completed,
                   count(*) FILTER (status = '{FAILED}') AS failed,
                   count(*) FILTER (status = '{SKIPPED}') AS skipped,
                   avg(score) FILTER (status = '{COMPLETED}' AND is_final) AS mean_score,
                   sum(coalesce(cost_usd, 0)) AS cost_usd,
                   sum(calls) AS calls, sum(cache_hit::INT) AS cache_hits
            FROM judge_scores GROUP BY evaluator ORDER BY evaluator
            """
        ).fetchall()
        traces, quarantined = _one_row(
            conn.execute("SELECT (SELECT count(*) FROM traces), (SELECT count(*) FROM quarantine)")
        )
    lines = [
        f"traces ingested: {traces}   quarantined rows: {quarantined}",
        "",
        f"{'evaluator':<22}{'model':<30}{'judged':>7}{'done':>7}{'failed':>7}{'skipped':>8}"
        f"{'mean':>7}{'cost $':>10}{'calls':>7}{'cached':>7}",
    ]
    for evaluator, model, judged, completed, failed, skipped, mean, cost, calls, hits in rows:
        mean_text = f"{mean:.3f}" if mean is not None else "-"
        lines.append(
            f"{evaluator:<22}{model:<30}{judged:>7}{completed:>7}{failed:>7}{skipped:>8}{mean_text:>7}{cost:>10.4f}{calls:>7}{hits:>7}"
        )
    if any(model == "local/mock" for _, model, *_ in rows):
        lines.append(
            "\nlocal/mock rows are placeholder verdicts from the local judge (no API key set): not a quality judgment."
        )
    if any(model.startswith("local/replay/") for _, model, *_ in rows):
        lines.append(
            "local/replay rows are real GPT-3.5-turbo verdicts recorded by the PandaLM authors, replayed over HTTP."
        )
    return "\n".join(lines)


def _targets_summary(root: Path, evaluators: dict) -> str:
    """What one row is for the evaluators that judge spans or sessions or run a check, or that skipped rows for a
    reason of their own (not sampling): the rows by their unit, and the skips by reason."""
    with open_catalog(root) as conn:
        units = {
            name: (traces, spans, sessions)
            for name, traces, spans, sessions in conn.execute(
                "SELECT evaluator, count(DISTINCT trace_id), count(span_id), count(DISTINCT session_id) "
                "FROM judge_scores GROUP BY evaluator"
            ).fetchall()
        }
        skips: dict[str, list[str]] = {}
        for name, reason, count in conn.execute(
            f"SELECT evaluator, reason, count(*) FROM judge_scores WHERE status = '{SKIPPED}' "
            f"AND reason <> '{NOT_SAMPLED}' GROUP BY ALL ORDER BY ALL"
        ).fetchall():
            skips.setdefault(name, []).append(f"{reason} {count}")
    lines = []
    for name, (traces, spans, sessions) in sorted(units.items()):
        config = evaluators.get(name)
        kind = "check" if config is not None and config.check is not None else getattr(config, "judged_target", None)
        if kind in (None, "trace") and name not in skips:
            continue
        count, unit = {"span": (spans, "spans"), "session": (sessions, "sessions")}.get(kind or "", (traces, "traces"))
        lines.append(f"  {name:<22}{kind:<9}{count:>5} {unit:<10}skipped: {', '.join(skips.get(name, [])) or '-'}")
    header = (
        "\nwhat one row judges (trace, span, session; check: no model), and the skips by reason (not_sampled aside):"
    )
    return "\n".join([header, *lines]) if lines else ""


def _agreement_summary(root: Path) -> str:
    """Judge vs human accuracy and kappa per judge, under both conventions for unusable verdicts."""
    with open_catalog(root) as conn:
        rows = conn.execute(
            """
            SELECT subject, convention,
                   max(value) FILTER (statistic = 'accuracy') AS accuracy,
                   max(value) FILTER (statistic = 'macro_f1') AS f1,
                   max(value) FILTER (statistic = 'cohen_kappa') AS kappa,
                   max(n) FILTER (statistic = 'accuracy') AS n
            FROM agreement WHERE section = 'judge_vs_human' AND period = 'all'
            GROUP BY ALL ORDER BY subject, convention
            """
        ).fetchall()
        annotators = _one_row(
            conn.execute(
                "SELECT string_agg(printf('%.2f', value), ' / ' ORDER BY subject, reference) FROM agreement "
                "WHERE section = 'inter_annotator' AND statistic = 'cohen_kappa'"
            )
        )[0]
    lines = [
        f"\nagreement: annotator pairwise Cohen's kappa {annotators}",
        f"  {'judge vs human majority':<34}{'convention':<18}{'n':>5}{'acc':>8}{'macro F1':>10}{'kappa':>8}",
    ]
    for subject, convention, accuracy, f1, kappa, n in rows:
        lines.append(f"  {subject:<34}{convention:<18}{n:>5}{100 * accuracy:>7.2f}%{100 * f1:>9.2f}%{kappa:>8.3f}")
    return "\n".join(lines)


# The demo's benchmark runs: two of LLMBar's recorded judges, and two scripted local models on GSM8K.
DEMO_BENCHMARKS = {
    "llmbar": ["llmbar-gpt-4-vanilla-norules", "llmbar-chatgpt-vanilla-norules"],
    "gsm8k": ["local-always-18", "local-mock"],
}


def _batch_mode_check(root: DataRoot, evaluators: dict, keyless: list[str], day: str) -> str:
    """One day of a keyless score evaluator judged again through the local judge's batch API (scratch cache
    and state, so every request really goes in the batch), its verdicts compared with the interactive ones."""
    import tempfile

    import polars as pl

    from eval_platform.judging.options import BatchOptions
    from eval_platform.judging.runner import judge_day
    from eval_platform.llm.budget import BudgetLedger
    from eval_platform.llm.cache import ModelCache
    from eval_platform.llm.client import LiteLLMModelClient
    from eval_platform.llm.runtime import ModelRuntime
    from eval_platform.storage.warehouse import read_partition

    # the last keyless evaluator judging one trace at a time on a scale: never a real provider, local judge only
    modes = {n: evaluators[n].judge_mode for n in keyless}
    names = [n for n, mode in modes.items() if mode.verdict == "scaled" and not mode.relative]
    if not names:
        return ""
    name = names[-1]
    config = evaluators[name].model_copy(update={"batch": BatchOptions(poll_interval_s=0.2)})
    traces = read_partition(root, "traces", {"date": day})
    assert traces is not None, f"the demo ingested {day} before judging it"
    with tempfile.TemporaryDirectory() as scratch:
        runtime = ModelRuntime(
            LiteLLMModelClient(),
            ModelCache(Path(scratch) / "cache"),
            BudgetLedger(Path(scratch) / "budget.sqlite"),
            local_judge_url=os.environ[LOCAL_JUDGE_URL_ENV],
            local_judge_for_missing_keys=True,
            batch_dir=Path(scratch) / "judge_batches",
        )
        result = judge_day(config, day, traces, runtime)
    columns = ["trace_id", "status", "reason", "score"]
    interactive = read_partition(root, "judge_scores", {"evaluator": name, "date": day})
    same = interactive is not None and result.rows.select(columns).sort("trace_id").equals(
        interactive.select(columns).sort("trace_id")
    )
    sent = sum(b["requests"] for b in result.summary["batches"])
    done = result.rows.filter(pl.col("status") == COMPLETED).height
    return (
        f"batch mode: {name}[{day}] judged again through the local judge's batch API: "
        f"{len(result.summary['batches'])} batch, {sent} requests, {done} COMPLETED; "
        f"same verdicts as interactive: {'yes' if same else 'NO'}"
    )


def _run_benchmarks(defs: dg.Definitions, instance) -> None:
    models = sorted({m for names in DEMO_BENCHMARKS.values() for m in names})
    known = set(instance.get_dynamic_partitions("benchmark_models"))
    instance.add_dynamic_partitions("benchmark_models", [m for m in models if m not in known])
    for suite, names in DEMO_BENCHMARKS.items():
        for model in names:
            result = dg.materialize(
                assets=assets_of(defs),
                selection=dg.AssetSelection.groups(f"benchmark_{suite}"),
                partition_key=model,
                instance=instance,
                resources=defs.resources,
                raise_on_error=False,
                run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            )
            if not result.success:
                raise SystemExit(f"benchmark {suite} [{model}] failed; see the run in the Dagster UI")
        print(f"  benchmark[{suite}] run for {', '.join(names)}", flush=True)
    _materialize(defs, "leaderboard", None, instance)


def _leaderboard_summary(root: Path) -> str:
    """The leaderboard (macro scores) and LLMBar's per-task accuracy beside the published figure."""
    with open_catalog(root) as conn:
        board = conn.execute(
            "SELECT suite, rank, model, score, ci_low, ci_high, tasks_scored, tasks_total, significant_vs_leader "
            "FROM leaderboard WHERE aggregate = 'macro' AND rank IS NOT NULL ORDER BY suite, rank"
        ).fetchall()
        tasks = conn.execute(
            "SELECT model, string_agg(name || ' ' || printf('%.2f', 100 * value), ', ' ORDER BY name) "
            "FROM benchmark_results "
            "WHERE suite = 'llmbar' AND level = 'task' AND metric = 'pair_accuracy' AND value IS NOT NULL "
            "GROUP BY model ORDER BY model"
        ).fetchall()
    lines = [
        "\nleaderboard (macro over the tasks each model ran; 95% interval; gap to the leader paired over shared cases):"
    ]
    for suite, rank, model, score, low, high, scored, total, significant in board:
        gap = "leader" if rank == 1 else ("significantly behind" if significant else "not significantly behind")
        lines.append(
            f"  {suite:<7} {rank}. {model:<32} {score:.3f} [{low:.3f}, {high:.3f}]  {scored}/{total} tasks, {gap}"
        )
    lines.append("LLMBar accuracy over both orders, % (the paper's correct_average):")
    lines += [f"  {model}: {text}" for model, text in tasks]
    return "\n".join(lines)


def _experiments_summary(root: Path) -> str:
    """Two lines on `experiment_results` and `alerts`; the README's "Experiments" section explains them."""
    with open_catalog(root) as conn:
        experiments, comparisons, significant = _one_row(
            conn.execute(
                "SELECT count(DISTINCT experiment), count(*) FILTER (kind = 'comparison'), "
                "count(*) FILTER (kind = 'comparison' AND significant) FROM experiment_results"
            )
        )
        rankings = conn.execute(
            "SELECT experiment, evaluator, string_agg(variant, ' > ' ORDER BY rank, variant) FROM experiment_results "
            "WHERE kind = 'bradley_terry' GROUP BY ALL ORDER BY ALL"
        ).fetchall()
        alerts, latest = _one_row(
            conn.execute(
                "SELECT count(*), count(*) FILTER (day = (SELECT max(date) FROM judge_scores s "
                "WHERE s.evaluator = a.evaluator "
                f"AND s.is_final AND s.status = '{COMPLETED}')) FROM alerts a"
            )
        )
    lines = [f"\nexperiment_results: {experiments} experiment(s), {comparisons} comparisons, {significant} significant"]
    lines += [f"  {name}: Bradley-Terry ranking by {evaluator}: {order}" for name, evaluator, order in rankings]
    lines.append(f"alerts: {alerts} quality regression(s), {latest} on the latest day")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=None, help="score only the first N sample days")
    args = parser.parse_args(argv)

    root = data_root()
    copied = prepare_data_root(root)
    if copied:
        print(copied, flush=True)
    os.environ.setdefault(DATA_DIR_ENV, str(root))
    dagster_home = Path(os.environ.setdefault("DAGSTER_HOME", str(root / "dagster_home")))
    dagster_home.mkdir(parents=True, exist_ok=True)
    if not (dagster_home / "dagster.yaml").exists():  # the shipped instance config: run queue and pool limits
        (dagster_home / "dagster.yaml").write_text(shipped_instance_yaml(), encoding="utf-8")

    from eval_platform.definitions import build_definitions
    from eval_platform.judging.loading import load_evaluators
    from eval_platform.local_judge import LocalJudgeServer

    evaluators = load_evaluators(root / "evaluators")
    enabled = [name for name, cfg in evaluators.items() if cfg.enabled]
    keyless = [n for n in enabled if (key := evaluators[n].api_key_env) and not os.environ.get(key)]
    server = None
    # The demo's explicit mode: the local judge answers for an evaluator whose key is not set (a local judge URL
    # alone answers only local/ models, never a real provider's in its place).
    os.environ[LOCAL_JUDGE_FOR_MISSING_KEYS_ENV] = "1"
    if not os.environ.get(LOCAL_JUDGE_URL_ENV):
        # The benchmark demo's models are served by the local judge (recordings and scripted replies).
        server = LocalJudgeServer(data_root=root)
        os.environ[LOCAL_JUDGE_URL_ENV] = server.start()
        if keyless:
            print(f"no provider key for {', '.join(keyless)}: using the local judge at {server.base_url}")

    defs = build_definitions(root)
    days = _sample_days(root)[: args.days]
    started = time.perf_counter()
    batch_line = ""
    try:
        with dg.DagsterInstance.get() as instance:
            for day in days:
                _materialize(defs, "traces", day, instance)
                print(f"  traces[{day}] ingested", flush=True)
            _materialize(defs, "quarantine", None, instance)
            for name in enabled:
                for day in days:
                    _materialize(defs, "judge_scores", dg.MultiPartitionKey({"date": day, "evaluator": name}), instance)
                print(f"  judge_scores[{name}] scored for {len(days)} days", flush=True)
            for asset in (
                "judge_cost_daily",
                "judge_cost_monthly",
                "app_cost_daily",
                "human_annotations",
                "imported_judgments",
                "agreement",
            ):
                _materialize(defs, asset, None, instance)
            _materialize(defs, "experiment_results", None, instance)
            _materialize(defs, "alerts", None, instance)
            _run_benchmarks(defs, instance)
            _materialize(defs, "report", None, instance)
            batch_line = _batch_mode_check(DataRoot.from_env(root), evaluators, keyless, days[-1])
    finally:
        if server is not None:
            server.stop()
    print(f"\nDone in {time.perf_counter() - started:.0f}s. Data root: {root}\n")
    print(_summary(root))
    if batch_line:
        print(batch_line)
    targets = _targets_summary(root, evaluators)
    if targets:
        print(targets)
    print(_agreement_summary(root))
    print(_experiments_summary(root))
    print(_leaderboard_summary(root))
    print(f"\nreport with plots: {root / 'reports' / 'report.html'}")
    print(
        f"""
Open the Dagster UI (assets, partitions, runs, backfills):
  DAGSTER_HOME={dagster_home} .venv/bin/dagster dev -w workspace.yaml      # then http://127.0.0.1:3000
Query the results with SQL:
  {sql_hint(root)}"""
    )
    return 0


def sql_hint(root: Path) -> str:
    """The closing SQL hint: one line that queries the catalog on whichever store holds the warehouse (a plain
    `duckdb.connect` cannot read a bucket's views), with the environment's settings (`open_catalog`). The data root
    is named unless it is the default (`./data` of the working directory)."""
    query = "SELECT evaluator, status, count(*) FROM judge_scores GROUP BY ALL"
    where = "" if root.resolve() == Path("data").resolve() else repr(str(root))
    return (
        '.venv/bin/python -c "from eval_platform.storage.warehouse import open_catalog; '
        f"print(open_catalog({where}).sql('{query}'))\""
    )


if __name__ == "__main__":
    from eval_platform.startup import start_process

    start_process()
    sys.exit(main())
