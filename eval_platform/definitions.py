"""The code location: `dagster dev -w workspace.yaml` and `dagster definitions validate` load this."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from eval_platform.annotation.config import load_annotation_tasks
from eval_platform.defs.agreement import build_agreement
from eval_platform.defs.alerting import alert_delivery_sensor, alerting_resource
from eval_platform.defs.annotation_tasks import LabelStudioResource, build_annotation_task_assets
from eval_platform.defs.annotations import human_annotations, imported_judgments
from eval_platform.defs.benchmarks import benchmark_models_sensor, build_benchmarks
from eval_platform.defs.costs import (
    app_cost_daily,
    build_judge_cost_daily,
    build_judge_cost_monthly,
)
from eval_platform.defs.datasets import (
    dataset_job,
    dataset_versions,
    new_dataset_files_sensor,
)
from eval_platform.defs.drift import build_judge_drift
from eval_platform.defs.experiments import build_alerts, build_experiment_results
from eval_platform.defs.export import build_verdict_export_retries, build_verdict_exports
from eval_platform.defs.finetune import build_finetune_exports
from eval_platform.defs.judging import build_judge_scores, build_traces_updated_sensor, build_waiting_traces_sensor
from eval_platform.defs.partitions import trace_days
from eval_platform.defs.report import build_report_asset
from eval_platform.defs.resources import judge_resource, warehouse_resource
from eval_platform.defs.traces import (
    build_new_trace_files_sensor,
    build_traces,
    daily_ingest_schedule,
    quarantine,
    traces_job,
)
from eval_platform.experiments.config import load_experiments
from eval_platform.finetune.config import load_exports
from eval_platform.judging.loading import load_evaluators
from eval_platform.settings import (
    EVALUATORS_FOLDER,
    JUDGE_PARTITIONS_PER_RUN_ENV,
    TRACE_DAYS_PER_RUN_ENV,
    checked_data_root,
    partitions_per_run,
    start_date,
)
from eval_platform.startup import start_process


def build_definitions(root: Path | None = None) -> dg.Definitions:
    """Definitions for a data root; the evaluator partition values are the YAML files found now. A data root
    without an `evaluators/` folder (or none at all) is a load error naming the path and `EVAL_PLATFORM_DATA_DIR`:
    loading nothing in silence would look like a project without evaluators."""
    root = checked_data_root(root)
    # A broken config file breaks only itself: its error is shown on the assets it would feed.
    broken_evaluators: dict[str, str] = {}
    evaluators = load_evaluators(root / EVALUATORS_FOLDER, broken=broken_evaluators)
    # The day partitions start on EVAL_PLATFORM_START_DATE as it is now (read here, never on import), and so does what
    # the new-files sensor takes for a day (it never reads the variable as it ticks).
    days = trace_days(start_date())
    traces = build_traces(days)
    judge_scores = build_judge_scores(
        evaluators,
        broken=broken_evaluators,
        partitions_per_run=partitions_per_run(JUDGE_PARTITIONS_PER_RUN_ENV),
        days=days,
    )
    judge_cost_daily = build_judge_cost_daily(evaluators, judge_scores)
    judge_cost_monthly = build_judge_cost_monthly(evaluators, judge_cost_daily)
    agreement = build_agreement(evaluators, judge_scores)
    broken_experiments: dict[str, str] = {}
    experiments = load_experiments(
        root / "experiments", evaluators, broken=broken_experiments, broken_evaluators=broken_evaluators
    )
    experiment_results = build_experiment_results(
        experiments, judge_scores, broken=broken_experiments, evaluators=evaluators
    )
    alerts = build_alerts(evaluators, judge_scores)
    drift = build_judge_drift(evaluators, judge_scores)  # empty unless an evaluator declares anchors
    benchmark_assets, _broken_suites = build_benchmarks(root, evaluators)
    leaderboard = next(a for a in benchmark_assets if a.key == dg.AssetKey("leaderboard"))
    broken_exports: dict[str, str] = {}
    exports = load_exports(root / "finetune_exports", evaluators, broken=broken_exports)
    finetune_exports = build_finetune_exports(exports, traces, judge_scores, broken=broken_exports)
    broken_annotation_tasks: dict[str, str] = {}
    annotation_tasks = load_annotation_tasks(root, evaluators, check_datasets=True, broken=broken_annotation_tasks)
    annotation_task_assets, annotation_tasks_job = build_annotation_task_assets(
        annotation_tasks.files, broken_annotation_tasks
    )
    verdict_exports = build_verdict_exports(root, judge_scores)  # off unless verdict_export.yaml names a destination
    report = build_report_asset([judge_scores, agreement, experiment_results, leaderboard, *drift.assets])
    return dg.Definitions(
        assets=[
            traces.with_attributes(
                backfill_policy=dg.BackfillPolicy.multi_run(
                    max_partitions_per_run=partitions_per_run(TRACE_DAYS_PER_RUN_ENV)
                )
            ),
            quarantine,
            dataset_versions,
            human_annotations,
            imported_judgments,
            judge_scores,
            judge_cost_daily,
            judge_cost_monthly,
            agreement,
            app_cost_daily,
            experiment_results,
            alerts,
            *drift.assets,
            finetune_exports,
            verdict_exports,
            *annotation_task_assets,
            *benchmark_assets,
            report,
        ],
        jobs=[traces_job, dataset_job, annotation_tasks_job, *drift.jobs],
        schedules=[daily_ingest_schedule, *drift.schedules],
        sensors=[
            build_new_trace_files_sensor(days),
            build_waiting_traces_sensor(judge_scores),
            build_traces_updated_sensor(judge_scores),
            new_dataset_files_sensor,
            benchmark_models_sensor,
            *drift.sensors,
            alert_delivery_sensor,
            build_verdict_export_retries(root, verdict_exports),
            dg.AutomationConditionSensorDefinition(
                "judge_scores_automation",
                target=dg.AssetSelection.all(),
                default_status=dg.DefaultSensorStatus.RUNNING,
                description="Scores a day for every enabled evaluator as soon as its traces are (re)ingested, then "
                "refreshes the rollups (costs, agreement, experiments, alerts) once the judging they read is done.",
            ),
        ],
        resources={
            "warehouse": warehouse_resource(root),
            "judge": judge_resource(),
            "alerting": alerting_resource(),
            "label_studio": LabelStudioResource(),
        },
        # One process per run, not one more per step: a run's steps here are short and mostly sequential, and
        # starting a second Python process (loading this code location again) cost more than the step itself.
        executor=dg.in_process_executor,
    )


# This module is where Dagster's processes start (its code server, and every run and step process, load it first):
# the process is set up here, never on importing the package.
start_process()
defs = build_definitions()
