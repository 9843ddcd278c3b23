"""`experiment_results` (A/B analyses from `experiments/*.yaml`) and `alerts` (daily quality regressions)."""

from pathlib import Path

import dagster as dg
import polars as pl
from pydantic import Field

from eval_platform.agreement.calibration import calibrated_fields, human_truth
from eval_platform.alerting.rules import REGRESSION, with_regressions
from eval_platform.costs import judge_ledger
from eval_platform.defs.annotations import human_annotations
from eval_platform.defs.catalog import refresh
from eval_platform.defs.judging import broken_files_text
from eval_platform.defs.partitions import REFRESH_AFTER_UPDATES
from eval_platform.defs.resources import WarehouseResource
from eval_platform.experiments.analysis import experiment_results as analyze
from eval_platform.experiments.config import ExperimentConfig
from eval_platform.experiments.inputs import experiment_inputs, read_final_scores
from eval_platform.experiments.regressions import (
    DEFAULT_ALPHA,
    DEFAULT_BASELINE_DAYS,
    DEFAULT_MIN_N,
    current_alerts,
    latest_days,
    regressions,
)
from eval_platform.judging.config import EvaluatorConfig
from eval_platform.markdown_table import markdown_table
from eval_platform.placeholder_rows import mark_alerts, mark_experiment_results, placeholder_days
from eval_platform.schemas import PLACEHOLDER_MARK
from eval_platform.stale_rows import keep_stale_rows
from eval_platform.storage.warehouse import read_partition, write_partition
from eval_platform.threshold_alerts import threshold_alerts_for

EXPERIMENT_RESULTS_DOC = (
    "Every experiment in `experiments/*.yaml`, recomputed from all final completed judge scores: per variant and "
    "metric n, mean, std and interval; per treatment and metric the comparison with the control (Welch's t-test "
    "and/or the Bayesian posterior, or the always-valid sequential test read per day; Holm or Benjamini-Hochberg "
    "across treatments x metrics; Cohen's d, the minimum detectable effect and the sample needed, guardrail "
    "verdicts, a recommendation); for a pairwise evaluator, "
    "win rates with Wilson intervals and a Bradley–Terry ranking; where humans labelled some traces of an evaluator "
    "with a `human_agreement` task, the prediction-powered (human-calibrated) means and difference beside the judge's. "
    "An experiment whose file, or an evaluator file it "
    "names, no longer loads keeps its last rows, flagged `stale` with the error in `stale_reason`. A row any of "
    "whose verdicts came from the local judge's placeholder (`local/mock`) has `placeholder` true. "
    "View `experiment_results`."
)


def build_experiment_results(
    experiments: dict[str, ExperimentConfig],
    judge_scores: dg.AssetsDefinition,
    broken: dict[str, str] | None = None,
    evaluators: dict[str, EvaluatorConfig] | None = None,
) -> dg.AssetsDefinition:
    needed = sorted(
        {m.evaluator for e in experiments.values() for _, m in e.metrics}
        | {e.pairwise_evaluator for e in experiments.values() if e.pairwise_evaluator}
    )
    pairwise = sorted({e.pairwise_evaluator for e in experiments.values() if e.pairwise_evaluator})

    calibrated = {name: (evaluators or {})[name] for name in needed if calibrated_fields((evaluators or {}).get(name))}

    @dg.asset(
        deps=[judge_scores, "traces", human_annotations],
        automation_condition=REFRESH_AFTER_UPDATES,
        kinds={"duckdb", "parquet"},
        group_name="experiments",
        description=EXPERIMENT_RESULTS_DOC + broken_files_text("experiment", broken or {}),
        metadata={"broken_config_files": dg.MetadataValue.json(broken or {})},
    )
    def experiment_results(context: dg.AssetExecutionContext, warehouse: WarehouseResource) -> dg.MaterializeResult:
        root = warehouse.root
        annotations = read_partition(root, "human_annotations", {}) if calibrated else None
        human = {
            name: human_truth(config, annotations) for name, config in calibrated.items() if annotations is not None
        }
        with experiment_inputs(root, needed, pairwise) as (scores, trace_variants):
            frame = analyze(experiments.values(), scores, trace_variants, human=human)
        frame = mark_experiment_results(frame, placeholder_days(root))  # rows from local/mock verdicts say so
        # An experiment whose file (or an evaluator file it names) broke keeps its last rows, flagged stale.
        unavailable = {Path(file).stem: error for file, error in (broken or {}).items()}
        frame = keep_stale_rows(frame, read_partition(root, "experiment_results", {}), unavailable)
        stale = dict(frame.filter(pl.col("stale")).select("experiment", "stale_reason").unique().rows())
        for experiment, reason in sorted(stale.items()):
            context.log.warning(f"{experiment}: last results kept, flagged stale: {reason}")
        write_partition(root, "experiment_results", {}, frame)
        refresh(root)
        fresh = frame.filter(~pl.col("stale"))
        decisions = fresh.filter((pl.col("kind") == "comparison") & (pl.col("metric_role") == "primary"))
        comparisons = fresh.filter(pl.col("kind") == "comparison")
        for experiment, variant, text in decisions.select("experiment", "variant", "recommendation").rows():
            context.log.info(f"{experiment} / {variant}: {text}")
        return dg.MaterializeResult(
            metadata={
                "experiments": len(experiments),
                "stale_experiments": dg.MetadataValue.json(stale),
                "comparisons": comparisons.height,
                "significant": int(comparisons["significant"].fill_null(False).sum()),
                "guardrails_failed": int((~comparisons["guardrail_passed"]).sum()),
                "insufficient_sample": int(comparisons["insufficient_sample"].sum()),
                "recommendations": dg.MetadataValue.md(
                    markdown_table(
                        decisions, ["experiment", "variant", "metric", "outcome", "recommendation", "placeholder"]
                    )
                ),
                "placeholder_rows": _placeholder_note(frame),
                "dagster/row_count": frame.height,
            }
        )

    return experiment_results


def _placeholder_note(frame: pl.DataFrame) -> str:
    """How many rows were computed from the local judge's placeholder verdicts, marked as such."""
    marked = int(frame["placeholder"].fill_null(False).sum())
    return f"{marked} of {frame.height} rows: {PLACEHOLDER_MARK}" if marked else "none"


class AlertsConfig(dg.Config):
    baseline_days: int = Field(
        DEFAULT_BASELINE_DAYS, ge=1, description="Days before each day whose scores form its baseline."
    )
    baseline_days_by_evaluator: dict[str, int] = Field(
        default_factory=dict, description="Per-evaluator overrides of baseline_days."
    )
    alpha: float = Field(DEFAULT_ALPHA, gt=0, lt=1, description="Significance level of Welch's test (two-sided).")
    min_n: int = Field(DEFAULT_MIN_N, ge=2, description="Scores needed on the day and in the baseline to test.")


def build_alerts(evaluators: dict[str, EvaluatorConfig], judge_scores: dg.AssetsDefinition) -> dg.AssetsDefinition:
    monitored = sorted(
        name for name, cfg in evaluators.items() if not cfg.judge_mode.relative
    )  # a relative score's mean says nothing

    @dg.asset(
        deps=[judge_scores, human_annotations],
        automation_condition=REFRESH_AFTER_UPDATES,
        kinds={"duckdb", "parquet"},
        group_name="monitoring",
        check_specs=[
            dg.AssetCheckSpec(
                "no_quality_regression",
                asset="alerts",
                description="No evaluator's latest day scores significantly below its trailing baseline.",
            )
        ],
    )
    def alerts(context: dg.AssetExecutionContext, config: AlertsConfig, warehouse: WarehouseResource):
        """Quality regressions: for each evaluator (pairwise and n_wise excepted) and trace day, the day's mean
        final score against the previous `baseline_days` days (Welch's t-test); a significantly lower day is an
        alert row (kind `regression`), with the day's human-calibrated mean beside it where humans labelled some of
        its traces. Beside them, every day that breaks a threshold rule of an evaluator's `alerts:` block (kind
        `threshold`: rate, mean, failed_rate, budget use). `alert_delivery_sensor` sends new rows to the
        destinations of alerting.yaml. The check `no_quality_regression` (WARN) fails when an evaluator's latest
        day has a regression. View `alerts`."""
        root = warehouse.root
        scores = read_final_scores(root, monitored)
        labelled = [name for name in monitored if calibrated_fields(evaluators[name])]
        annotations = read_partition(root, "human_annotations", {}) if labelled else None
        human = {name: human_truth(evaluators[name], annotations) for name in labelled if annotations is not None}
        found = regressions(
            scores,
            evaluators=monitored,
            baseline_days=config.baseline_days,
            alpha=config.alpha,
            min_n=config.min_n,
            baseline_days_by_evaluator=config.baseline_days_by_evaluator,
            human=human,
        )
        thresholds = threshold_alerts_for(root, evaluators, judge_ledger(root.path, context.instance))
        frame = mark_alerts(with_regressions(found, thresholds), placeholder_days(root))
        write_partition(root, "alerts", {}, frame)
        refresh(root)
        latest = latest_days(scores, monitored)
        current = current_alerts(frame.filter(pl.col("kind") == REGRESSION), latest)
        for message in current["message"]:
            context.log.warning(message)
        yield dg.MaterializeResult(
            metadata={
                "alerts": frame.height,
                "placeholder_rows": _placeholder_note(frame),
                "threshold_alerts": thresholds.height,
                "alerts_on_latest_day": current.height,
                "evaluators_checked": dg.MetadataValue.json(monitored),
                "latest_days": dg.MetadataValue.json(latest),
                "baseline_days": config.baseline_days,
                "dagster/row_count": frame.height,
            }
        )
        yield dg.AssetCheckResult(
            check_name="no_quality_regression",
            passed=current.height == 0,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={
                "regressions": current.height,
                "alerts": dg.MetadataValue.md(
                    markdown_table(
                        current,
                        ["evaluator", "day", "mean", "baseline_mean", "p_value", "severity", "message", "placeholder"],
                    )
                ),
            },
        )

    return alerts
