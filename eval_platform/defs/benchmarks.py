"""Benchmark suites as asset graphs: one asset group per suite, one asset per task, partitioned by model.

`data/benchmarks/<suite>.yaml` declares the tasks; a task's `depends_on`, `gate` and `outputs_of` are asset
dependencies, so the lineage graph is the suite. Models under test (`data/benchmarks/models.yaml`) are the
dynamic partitions `benchmark_models`, added by `benchmark_models_sensor`, so a new model is one backfill over
a suite's assets. The second partition dimension is left out on purpose: a task pins its dataset version in
the suite file (or takes the newest), and every result row names the version and file hash it came from;
comparing two dataset versions is two suite files, not a partition a backfill could mix. Each task depends on
its dataset version's `dataset_versions` partition, so the lineage graph draws dataset -> suite, and a dataset
version materialized again with other content marks the suite's tasks stale.

Core logic is in `eval_platform.benchmarks`; this module only wires it.
"""

from pathlib import Path

import dagster as dg
import polars as pl

from eval_platform.benchmarks.config import (
    Suite,
    SuiteError,
    Task,
    load_models,
    load_suites,
    upstream,
)
from eval_platform.benchmarks.leaderboard import leaderboard, suite_case_values, suite_results
from eval_platform.benchmarks.metadata import gate_value, leaderboard_preview, rounded, suite_score, task_metadata
from eval_platform.benchmarks.runner import (
    TaskRun,
    run_task_chunks,
)
from eval_platform.benchmarks.task_results import result_columns, task_cases, task_results
from eval_platform.config_files import record_broken
from eval_platform.defs.catalog import refresh
from eval_platform.defs.datasets import dataset_versions
from eval_platform.defs.judging import broken_files_text
from eval_platform.defs.partitions import BENCHMARK_MODELS, REFRESH_AFTER_UPDATES, benchmark_models
from eval_platform.defs.range_runs import (
    CheckOutcome,
    check_results,
    fail_if_any,
    materialize,
    partitioned_check,
    run_partitions,
)
from eval_platform.defs.resources import JudgeResource, WarehouseResource
from eval_platform.ingest.datasets import resolve_version
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.schemas import BENCHMARK_CASE_SCHEMA, LEADERBOARD_SCHEMA
from eval_platform.stale_rows import SUITE_TABLES, flag_suite_partitions, keep_stale_rows
from eval_platform.storage.warehouse import (
    has_files,
    partition_values,
    partition_writer,
    read_partition,
    scan_parquet,
    table_glob,
    write_partition,
)

MODELS_FILE = Path("benchmarks") / "models.yaml"
# What a task taking another task's outputs reads of that task's rows (`runner._take_outputs`).
UPSTREAM_COLUMNS = ["case_id", "sample", "presentation", "status", "reason", "output", "provider_model"]

# A backfill over several models runs each asset once for up to this many models (Dagster cuts the backfill into
# ranges of the dynamic partitions and chunks them): the run's start and Dagster's per-step events are paid once
# per run, not once per model. A single model (a manual materialize, the UI's one-partition launch) is unchanged.
MODELS_PER_RUN = 10
BACKFILL_POLICY = dg.BackfillPolicy.multi_run(max_partitions_per_run=MODELS_PER_RUN)


def task_key(suite: str, task: str) -> dg.AssetKey:
    return dg.AssetKey(["benchmark", suite, task])


def suite_key(suite: str) -> dg.AssetKey:
    return dg.AssetKey(["benchmark_scores", suite])


def model_under_test(root: Path, name: str):
    """The partition's model as models.yaml declares it now (an edit applies without reloading). A bad entry fails
    only its own model's runs, naming the file and the field; the other models run."""
    broken: dict[str, str] = {}
    try:
        models = load_models(root / MODELS_FILE, broken)
    except SuiteError as exc:
        raise dg.Failure(f"model '{name}' cannot run: {exc}") from None
    if name in broken:
        raise dg.Failure(f"model '{name}' cannot run: {broken[name]}")
    if name not in models:
        raise dg.Failure(
            f"model '{name}' is a partition but not in {root / MODELS_FILE}; add it back or delete the partition"
        )
    return models[name]


def dataset_dep(root: Path, task: Task) -> dg.AssetDep:
    """The task's edge from its dataset version's `dataset_versions` partition (whatever the model partition):
    the version it pins, or for `newest` the newest declared when the code location loads (a run reads the newest
    there is then; a reload redraws the edge)."""
    version = None if task.version == "newest" else task.version
    key = f"{task.dataset}@v{resolve_version(root, task.dataset, version)[0]}"
    return dg.AssetDep(dataset_versions, partition_mapping=dg.SpecificPartitionsPartitionMapping([key]))


def _task_asset(
    root: Path, suite_name: str, suite: Suite, task_name: str, evaluators: dict[str, EvaluatorConfig]
) -> dg.AssetsDefinition:
    task = suite.tasks[task_name]
    key = task_key(suite_name, task_name)
    source = (
        f"the model answers `prompt` over {task.dataset}"
        if task.prompt is not None
        else f"the model judges {task.dataset}'s pairs in both orders"
        if task.as_judge is not None
        else f"outputs of task `{task.outputs_of}`"
        if task.outputs_of is not None
        else f"recorded outputs in case field `{task.outputs_from}`"
    )
    description = (
        f"Suite `{suite_name}`, task `{task_name}`: {source}; "
        f"scored by {', '.join(s.metric_name for s in task.scorers)}. "
        "One `benchmark_cases` row per case, sample and presentation (COMPLETED / FAILED with reason / SKIPPED with "
        "reason) and one `benchmark_results` row per metric with its 95% interval; a FAILED case is never a 0."
        + (f" Gated on `{task.gate.task}` {task.gate.metric} >= {task.gate.min:g}." if task.gate else "")
    )

    # One asset; `multi_asset` because its `backfill_policy` is stable API (on `@asset` it is a beta parameter).
    @dg.multi_asset(
        name=key.to_python_identifier(),
        specs=[
            dg.AssetSpec(
                key,
                description=description,
                group_name=f"benchmark_{suite_name}",
                deps=[dataset_dep(root, task), *(task_key(suite_name, up) for up in upstream(suite)[task_name])],
                kinds={"python", "parquet"},
                metadata={"suite": suite_name, "task": task_name, "dataset": task.dataset},
            )
        ],
        partitions_def=benchmark_models,
        backfill_policy=BACKFILL_POLICY,
        check_specs=[
            partitioned_check(
                "failed_rate_below_threshold",
                key,
                f"WARN when more than {task.max_failed_rate:.0%} of the answered-or-failed rows FAILED.",
                benchmark_models,
            )
        ],
    )
    def _task(context: dg.AssetExecutionContext, warehouse: WarehouseResource, judge: JudgeResource):
        root = warehouse.root

        def one(model_name: str) -> dict:
            upstream_rows = None
            if task.outputs_of is not None:
                upstream_rows = read_partition(
                    root,
                    "benchmark_cases",
                    {"suite": suite_name, "task": task.outputs_of, "model": model_name},
                    UPSTREAM_COLUMNS,
                )
            gate = None
            if task.gate is not None:
                gate_rows = read_partition(
                    root, "benchmark_results", {"suite": suite_name, "name": task.gate.task, "model": model_name}
                )
                gate = gate_value(gate_rows, task.gate.metric)
            run = TaskRun(
                root.path,
                suite_name,
                suite,
                task_name,
                model_name,
                model_under_test(root.path, model_name),
                judge.runtime(root.path),
                evaluators=evaluators,
                upstream_rows=upstream_rows,
                gate_value=gate,
            )
            # The rows are written a chunk of cases at a time, then read back with only the columns the results
            # use: the step's memory does not grow with the rows' texts.
            keys = {"suite": suite_name, "task": task_name, "model": model_name}
            with partition_writer(root, "benchmark_cases", keys, BENCHMARK_CASE_SCHEMA) as out:
                for chunk in run_task_chunks(run):
                    out.write(chunk)
            frame = read_partition(root, "benchmark_cases", keys, result_columns(task))
            assert frame is not None  # written just above (no rows still write a 0-row file)
            results = task_results(frame, suite_name, task_name, task, model_name)
            write_partition(
                root, "benchmark_results", {"suite": suite_name, "name": task_name, "model": model_name}, results
            )
            return _task_metadata(task, run, frame, results)

        run = run_partitions(context, one)
        done = run.done
        if done:
            refresh(root)
        yield from materialize(context, run, done)
        outcomes = {
            model: CheckOutcome(
                md["failed_rate"] <= task.max_failed_rate,
                {"failed_rate": md["failed_rate"], "max_failed_rate": task.max_failed_rate},
            )
            for model, md in done.items()
        }
        yield from check_results(context, "failed_rate_below_threshold", dg.AssetCheckSeverity.WARN, outcomes)
        fail_if_any(run, "models")

    return _task


def _task_metadata(task, run: TaskRun, frame: pl.DataFrame, results: pl.DataFrame) -> dict:
    """What the UI shows on one model's materialization of a task (`task_metadata`), as Dagster metadata."""
    plain = task_metadata(task, frame, results, run.model.model, run.cache_write_failed)
    metrics = {row["metric"] for row in results.iter_rows(named=True) if row["value"] is not None}
    return {
        key: dg.MetadataValue.json(value)
        if key in ("reasons", "results")
        else dg.MetadataValue.float(value)
        if key in metrics
        else value
        for key, value in plain.items()
    }


def _suite_asset(suite_name: str, suite: Suite) -> dg.AssetsDefinition:
    key = suite_key(suite_name)
    groups = ", ".join(f"{n} ({g.aggregate})" for n, g in suite.groups.items()) or "none"

    @dg.multi_asset(  # one asset (see _task_asset for why multi_asset)
        name=key.to_python_identifier(),
        specs=[
            dg.AssetSpec(
                key,
                description=(
                    f"Suite `{suite_name}` for one model: each group's and the suite's score (macro over its top-level "
                    "units and micro over all cases), with 95% intervals from cases resampled within tasks. "
                    f"Groups: {groups}."
                ),
                group_name=f"benchmark_{suite_name}",
                deps=[task_key(suite_name, t) for t in suite.tasks],
                kinds={"python", "parquet"},
                automation_condition=REFRESH_AFTER_UPDATES,
            )
        ],
        partitions_def=benchmark_models,
        backfill_policy=BACKFILL_POLICY,
        check_specs=[
            partitioned_check(
                "score_not_dropped",
                key,
                "WARN when the suite score fell below the previous materialization's 95% interval.",
                benchmark_models,
            )
        ],
    )
    def _suite(context: dg.AssetExecutionContext, warehouse: WarehouseResource):
        root = warehouse.root
        drops: dict[str, dict] = {}

        def one(model_name: str) -> dict:
            case_values, task_rows = {}, []
            for task_name, task in suite.tasks.items():
                cases = read_partition(
                    root,
                    "benchmark_cases",
                    {"suite": suite_name, "task": task_name, "model": model_name},
                    result_columns(task),
                )
                results = read_partition(
                    root, "benchmark_results", {"suite": suite_name, "name": task_name, "model": model_name}
                )
                if cases is not None:
                    case_values[task_name] = task_cases(cases, task)
                if results is not None:
                    task_rows.append(results)
            if not task_rows:
                raise dg.Failure(
                    f"no task of suite {suite_name} has run for model {model_name}; materialize its tasks first"
                )
            rows = suite_results(
                suite_name, suite, model_name, case_values, pl.concat(task_rows, how="vertical_relaxed")
            )
            previous = read_partition(
                root, "benchmark_results", {"suite": suite_name, "name": "_suite", "model": model_name}
            )
            write_partition(
                root, "benchmark_results", {"suite": suite_name, "name": "_suite", "model": model_name}, rows
            )
            macro, drops[model_name] = suite_score(rows, previous)
            return {
                "score_macro": rounded(macro["value"]),
                "ci_low": rounded(macro["ci_low"]),
                "ci_high": rounded(macro["ci_high"]),
                "n_cases": macro["n"],
                "tasks_scored": len([t for t in case_values if case_values[t]]),
            }

        run = run_partitions(context, one)
        done = run.done
        if done:
            refresh(root)
        yield from materialize(context, run, done)
        outcomes = {
            model: CheckOutcome(
                not drops[model]["dropped"],
                {k: drops[model][k] for k in ("score", "previous_score", "previous_ci_low")},
            )
            for model in done
        }
        yield from check_results(context, "score_not_dropped", dg.AssetCheckSeverity.WARN, outcomes)
        fail_if_any(run, "models")

    return _suite


def _leaderboard_asset(suites: dict[str, Suite], broken: dict[str, str]) -> dg.AssetsDefinition:
    @dg.asset(
        name="leaderboard",
        description=(
            "One row per suite, model and aggregate (macro, micro): rank, score, 95% interval, and the gap to the "
            "leader with its paired 95% interval over the cases both answered (significant when it excludes 0). "
            "A suite whose file no longer loads (or is gone) keeps its last rows, flagged `stale` with the reason "
            "in `stale_reason`, here and in `benchmark_cases` and `benchmark_results`. Exposed as the `leaderboard` "
            "view." + broken_files_text("suite", broken)
        ),
        group_name="benchmarks",
        deps=[suite_key(s) for s in suites],
        kinds={"python", "parquet"},
        automation_condition=REFRESH_AFTER_UPDATES,
        metadata={"broken_config_files": dg.MetadataValue.json(broken)},
    )
    def _leaderboard(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        root = warehouse.root
        tables = []
        for suite_name, suite in suites.items():
            cases = None
            if has_files(root, "benchmark_cases"):  # this suite's rows, only the columns its tasks' values use
                needed = {c for task in suite.tasks.values() for c in result_columns(task)}
                columns = sorted(needed | {"suite", "task", "model"})
                scan = scan_parquet(root, table_glob(root, "benchmark_cases"))
                cases = scan.filter(pl.col("suite") == suite_name).select(columns).collect()
            by_model, costs = suite_case_values(cases, suite_name, suite)
            board = leaderboard(suite_name, suite, by_model, costs)
            write_partition(root, "leaderboard", {"suite": suite_name}, board)
            flag_suite_partitions(root, suite_name, None)  # loads again: its cases and results are current
            tables.append(board)
        # A suite whose file broke (or was removed) is not recomputed: its last rows stay, flagged stale, in
        # leaderboard, benchmark_cases and benchmark_results alike.
        stale = {}
        written = {
            name
            for table in ("leaderboard", *SUITE_TABLES)
            for name in partition_values(root, table, {}, "suite")
            if name not in suites
        }
        for suite_name in sorted(written):
            reason = broken.get(suite_name) or f"benchmarks/{suite_name}.yaml no longer exists"
            previous = read_partition(root, "leaderboard", {"suite": suite_name})
            if previous is not None:
                kept = keep_stale_rows(
                    pl.DataFrame(schema=LEADERBOARD_SCHEMA),
                    previous,
                    {suite_name: reason},
                    "suite",
                    LEADERBOARD_SCHEMA,
                )
                write_partition(root, "leaderboard", {"suite": suite_name}, kept)
                tables.append(kept)
            flag_suite_partitions(root, suite_name, reason)
            stale[suite_name] = reason
            context.log.warning(
                f"suite {suite_name}: last leaderboard, benchmark_cases and benchmark_results rows kept, "
                f"flagged stale: {reason}"
            )
        refresh(root)
        board = pl.concat(tables) if tables else pl.DataFrame(schema=LEADERBOARD_SCHEMA)
        preview = dg.MetadataValue.md(leaderboard_preview(board))
        return dg.MaterializeResult(
            metadata={"rows": board.height, "preview": preview, "stale_suites": dg.MetadataValue.json(stale)}
        )

    return _leaderboard


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Adds a benchmark_models partition for each model listed in data/benchmarks/models.yaml "
    "(never removes one: its results stay). Backfill a new model over a suite's assets in the UI.",
)
def benchmark_models_sensor(context: dg.SensorEvaluationContext, warehouse: WarehouseResource):
    broken: dict[str, str] = {}
    try:
        models = load_models(warehouse.root.path / MODELS_FILE, broken)
    except SuiteError as exc:
        context.log.error(str(exc))
        return dg.SkipReason(str(exc))
    for message in broken.values():
        context.log.error(message)
    known = set(context.instance.get_dynamic_partitions(BENCHMARK_MODELS))
    new = sorted(set(models) - known)  # a broken entry is no partition until it loads
    if not new:
        return dg.SkipReason("no new model in models.yaml" + (f" that loads ({len(broken)} broken)" if broken else ""))
    return dg.SensorResult(dynamic_partitions_requests=[benchmark_models.build_add_request(new)])


def build_benchmarks(
    root: Path, evaluators: dict[str, EvaluatorConfig]
) -> tuple[list[dg.AssetsDefinition], dict[str, str]]:
    """Every suite that loads as its own asset group, plus the leaderboard; a broken suite file is listed, not fatal."""
    suites, broken = load_suites(root / "benchmarks", root, set(evaluators))
    broken_models: dict[str, str] = {}
    try:
        load_models(root / MODELS_FILE, broken_models)
    except SuiteError as exc:
        record_broken(broken, "models", exc, "models file")
    broken |= {f"models: {name}": message for name, message in broken_models.items()}
    assets = []
    for suite_name, suite in suites.items():
        assets += [_task_asset(root, suite_name, suite, task_name, evaluators) for task_name in suite.tasks]
        assets.append(_suite_asset(suite_name, suite))
    assets.append(_leaderboard_asset(suites, broken))
    return assets, broken
